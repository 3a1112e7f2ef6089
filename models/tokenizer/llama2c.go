package tokenizer

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// llama2.c's tokenizer.bin has no ids for its special tokens; run.c
// hard-codes these.
const (
	llama2cUnk = 0
	llama2cBOS = 1
	llama2cEOS = 2
)

// maxPieceLen bounds max_token_length so a corrupt header cannot make us
// allocate gigabytes; real vocabularies stay far below it.
const maxPieceLen = 1 << 16

// LoadLlama2c reads a llama2.c tokenizer.bin. The file does not record its
// own size, so vocabSize must come from the model header.
func LoadLlama2c(path string, vocabSize int) (*SentencePiece, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	defer f.Close()
	t, err := ReadLlama2c(bufio.NewReader(f), vocabSize)
	if err != nil {
		return nil, fmt.Errorf("%w (reading %s)", err, path)
	}
	return t, nil
}

// ReadLlama2c reads a tokenizer in llama2.c's format: a little-endian int32
// max_token_length, then for each of vocabSize tokens a float32 score, an
// int32 length and that many bytes of piece (with spaces, not ▁). Anything
// after the last token is ignored, as llama2.c does. The tokenizer encodes
// as llama2.c's encode() does (see SentencePiece.Encode).
func ReadLlama2c(r io.Reader, vocabSize int) (*SentencePiece, error) {
	if vocabSize <= llama2cEOS {
		return nil, fmt.Errorf("tokenizer: llama2.c: vocab size %d leaves no room for unk, bos and eos", vocabSize)
	}
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:4]); err != nil {
		return nil, fmt.Errorf("tokenizer: llama2.c: reading max_token_length: %w", eofIsUnexpected(err))
	}
	maxLen := int32(binary.LittleEndian.Uint32(hdr[:4]))
	if maxLen <= 0 || maxLen > maxPieceLen {
		return nil, fmt.Errorf("tokenizer: llama2.c: max_token_length %d out of range [1, %d]", maxLen, maxPieceLen)
	}

	// Grow as we read instead of trusting vocabSize with an allocation: a
	// wrong vocabSize then fails at the end of the file, not in make.
	capHint := min(vocabSize, 1<<16)
	pieces := make([]string, 0, capHint)
	scores := make([]float32, 0, capHint)
	buf := make([]byte, maxLen)
	for i := range vocabSize {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return nil, fmt.Errorf("tokenizer: llama2.c: token %d of %d: %w", i, vocabSize, eofIsUnexpected(err))
		}
		score := math.Float32frombits(binary.LittleEndian.Uint32(hdr[:4]))
		n := int32(binary.LittleEndian.Uint32(hdr[4:]))
		if n < 0 || n > maxLen {
			return nil, fmt.Errorf("tokenizer: llama2.c: token %d has length %d, want 0..%d", i, n, maxLen)
		}
		if _, err := io.ReadFull(r, buf[:n]); err != nil {
			return nil, fmt.Errorf("tokenizer: llama2.c: token %d: %w", i, eofIsUnexpected(err))
		}
		pieces = append(pieces, string(buf[:n]))
		scores = append(scores, score)
	}
	return newSentencePiece(pieces, scores, nil, llama2cBOS, llama2cEOS, llama2cUnk, true)
}

// eofIsUnexpected reports a clean EOF as truncation: inside a tokenizer
// file, running out of data is always an error.
func eofIsUnexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
