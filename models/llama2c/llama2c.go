// Package llama2c reads the checkpoints written by Karpathy's llama2.c
// (the legacy "version 0" format: a 7-int header followed by float32 tensors in
// a fixed order) and its tokenizer files.
//
// The format carries no names and no magic number, so the reader checks that
// the header is plausible and that the file holds exactly the bytes the header
// implies before trusting it.
package llama2c

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"

	"github.com/tessera-llm/tessera/models/tokenizer"
)

// Header is the checkpoint header. A positive VocabSize in the file means the
// classifier is shared with the token embedding; a negative one means a
// separate classifier follows the other tensors.
type Header struct {
	Dim, HiddenDim, Layers, Heads, KVHeads, VocabSize, SeqLen int
	SharedClassifier                                          bool
}

// HeadDim is the width of one attention head.
func (h Header) HeadDim() int { return h.Dim / h.Heads }

// Tensor locates one tensor in the checkpoint. Names follow GGUF's llama
// convention ("blk.0.attn_q.weight") so every loader yields the same names.
type Tensor struct {
	Name   string
	Shape  []int // row-major, [out, in] for matrices
	Offset int64 // bytes from the start of the file
}

// Size is the tensor's size in bytes (float32 values).
func (t Tensor) Size() int64 {
	n := int64(4)
	for _, d := range t.Shape {
		n *= int64(d)
	}
	return n
}

// Checkpoint is an opened llama2.c model file.
type Checkpoint struct {
	Header  Header
	Tensors []Tensor
	r       io.ReaderAt
	c       io.Closer
	size    int64 // bytes the header implies
}

const headerBytes = 7 * 4

// Open opens a checkpoint file.
func Open(path string) (*Checkpoint, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	ck, err := Read(f, st.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("llama2.c checkpoint %s: %w", path, err)
	}
	ck.c = f
	return ck, nil
}

// Read parses the header of a checkpoint of the given size and lays out its
// tensors. Tensor data is read later, on demand.
func Read(r io.ReaderAt, size int64) (*Checkpoint, error) {
	var raw [7]int32
	if size < headerBytes {
		return nil, fmt.Errorf("file of %d bytes is too short for a header", size)
	}
	buf := make([]byte, headerBytes)
	if _, err := r.ReadAt(buf, 0); err != nil {
		return nil, fmt.Errorf("read header: %w", err)
	}
	for i := range raw {
		raw[i] = int32(binary.LittleEndian.Uint32(buf[4*i:]))
	}
	h := Header{
		Dim: int(raw[0]), HiddenDim: int(raw[1]), Layers: int(raw[2]), Heads: int(raw[3]),
		KVHeads: int(raw[4]), VocabSize: int(raw[5]), SeqLen: int(raw[6]),
		SharedClassifier: raw[5] > 0,
	}
	if h.VocabSize < 0 {
		h.VocabSize = -h.VocabSize
	}
	if err := h.validate(); err != nil {
		return nil, fmt.Errorf("implausible header %v: %w", raw, err)
	}
	ck := &Checkpoint{Header: h, r: r}
	ck.layout()
	if ck.size != size {
		return nil, fmt.Errorf("header %v implies %d bytes but the file has %d", raw, ck.size, size)
	}
	return ck, nil
}

// validate bounds every field so that the size arithmetic cannot overflow and
// a random file is rejected rather than misread.
func (h Header) validate() error {
	const lim = 1 << 20
	for _, f := range []struct {
		name string
		v    int
	}{{"dim", h.Dim}, {"hidden_dim", h.HiddenDim}, {"n_layers", h.Layers}, {"n_heads", h.Heads},
		{"n_kv_heads", h.KVHeads}, {"vocab_size", h.VocabSize}, {"seq_len", h.SeqLen}} {
		if f.v <= 0 || f.v > lim {
			return fmt.Errorf("%s = %d out of range", f.name, f.v)
		}
	}
	if h.Dim%h.Heads != 0 || h.HeadDim()%2 != 0 {
		return fmt.Errorf("dim %d does not split into %d heads of even width", h.Dim, h.Heads)
	}
	if h.Heads%h.KVHeads != 0 {
		return fmt.Errorf("n_kv_heads %d does not divide n_heads %d", h.KVHeads, h.Heads)
	}
	return nil
}

// layout computes where llama2.c's run.c finds each tensor: every tensor kind
// is stored for all layers at once, in this order, followed by the final norm,
// the (unused) RoPE tables and, if not shared, the classifier.
func (ck *Checkpoint) layout() {
	h := ck.Header
	kvDim := h.KVHeads * h.HeadDim()
	off := int64(headerBytes)
	add := func(name string, shape ...int) {
		t := Tensor{Name: name, Shape: shape, Offset: off}
		ck.Tensors = append(ck.Tensors, t)
		off += t.Size()
	}
	perLayer := func(kind string, shape ...int) {
		for l := 0; l < h.Layers; l++ {
			add(fmt.Sprintf("blk.%d.%s.weight", l, kind), shape...)
		}
	}
	add("token_embd.weight", h.VocabSize, h.Dim)
	perLayer("attn_norm", h.Dim)
	perLayer("attn_q", h.Dim, h.Dim)
	perLayer("attn_k", kvDim, h.Dim)
	perLayer("attn_v", kvDim, h.Dim)
	perLayer("attn_output", h.Dim, h.Dim)
	perLayer("ffn_norm", h.Dim)
	perLayer("ffn_gate", h.HiddenDim, h.Dim)
	perLayer("ffn_down", h.Dim, h.HiddenDim)
	perLayer("ffn_up", h.HiddenDim, h.Dim)
	add("output_norm.weight", h.Dim)
	off += int64(h.SeqLen) * int64(h.HeadDim()) * 4 // freq_cis_real and freq_cis_imag, half a head each
	if !h.SharedClassifier {
		add("output.weight", h.VocabSize, h.Dim)
	}
	ck.size = off
}

// ReadTensor returns the raw little-endian float32 bytes of t.
func (ck *Checkpoint) ReadTensor(t Tensor) ([]byte, error) {
	buf := make([]byte, t.Size())
	if _, err := ck.r.ReadAt(buf, t.Offset); err != nil {
		return nil, fmt.Errorf("read %s: %w", t.Name, err)
	}
	return buf, nil
}

// Close closes the file behind an opened checkpoint.
func (ck *Checkpoint) Close() error {
	if ck.c == nil {
		return nil
	}
	return ck.c.Close()
}

// LoadTokenizer reads a llama2.c tokenizer file (tokenizer.bin, tok512.bin)
// for a model with the given vocabulary size.
func LoadTokenizer(path string, vocabSize int) (*tokenizer.SentencePiece, error) {
	return tokenizer.LoadLlama2c(path, vocabSize)
}
