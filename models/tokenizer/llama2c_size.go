package tokenizer

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// LoadLlama2cFile reads a llama2.c tokenizer.bin without knowing the
// model's vocabulary size: every token up to the end of the file is read.
// (The format does not record its size; run.c takes it from the model.)
func LoadLlama2cFile(path string) (*SentencePiece, error) {
	n, err := countLlama2c(path)
	if err != nil {
		return nil, fmt.Errorf("%w (reading %s)", err, path)
	}
	return LoadLlama2c(path, n)
}

// countLlama2c counts the tokens of a llama2.c tokenizer file.
func countLlama2c(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("tokenizer: %w", err)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:4]); err != nil {
		return 0, fmt.Errorf("tokenizer: llama2.c: reading max_token_length: %w", eofIsUnexpected(err))
	}
	maxLen := int32(binary.LittleEndian.Uint32(hdr[:4]))
	if maxLen <= 0 || maxLen > maxPieceLen {
		return 0, fmt.Errorf("tokenizer: llama2.c: max_token_length %d out of range [1, %d]", maxLen, maxPieceLen)
	}
	n := 0
	for {
		_, err := io.ReadFull(r, hdr[:])
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return 0, fmt.Errorf("tokenizer: llama2.c: token %d: %w", n, err)
		}
		size := int32(binary.LittleEndian.Uint32(hdr[4:]))
		if size < 0 || size > maxLen {
			return 0, fmt.Errorf("tokenizer: llama2.c: token %d has length %d, want 0..%d", n, size, maxLen)
		}
		if _, err := r.Discard(int(size)); err != nil {
			return 0, fmt.Errorf("tokenizer: llama2.c: token %d: %w", n, eofIsUnexpected(err))
		}
		n++
	}
}
