package models

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/llama2c"
)

// openLlama2c loads a llama2.c checkpoint and its tokenizer file.
func openLlama2c(path, tokPath string) (*Model, error) {
	ck, err := llama2c.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open model %s: %w (not GGUF either: %w)", path, err, ErrUnknownFormat)
	}
	h := ck.Header
	m := &Model{
		Format: "llama2c",
		Path:   path,
		Config: Config{
			Arch: "llama", Dim: h.Dim, FFN: h.HiddenDim, Layers: h.Layers,
			Heads: h.Heads, KVHeads: h.KVHeads, HeadDim: h.HeadDim(),
			Vocab: h.VocabSize, Context: h.SeqLen,
			NormEps: 1e-5, RopeTheta: 10000, RopeDim: h.HeadDim(), Rope: RopePairs,
			TiedEmbeddings: h.SharedClassifier,
		},
		Tensors: map[string]*Tensor{},
		close:   ck.Close,
	}
	for _, t := range ck.Tensors {
		m.Tensors[t.Name] = NewTensor(t.Name, t.Shape, dtype.F32, func() ([]byte, error) { return ck.ReadTensor(t) })
	}
	if tokPath == "" {
		tokPath, err = findLlama2cTokenizer(path, h.VocabSize)
		if err != nil {
			ck.Close()
			return nil, fmt.Errorf("open model %s: %w", path, err)
		}
	}
	tok, err := LoadTokenizer(tokPath, h.VocabSize)
	if err != nil {
		ck.Close()
		return nil, err
	}
	m.Tokenizer = tok
	return m, nil
}

// findLlama2cTokenizer looks beside a checkpoint for the tokenizer llama2.c's
// tools would have written: tok<vocab>.bin for custom vocabularies and
// tokenizer.bin for the Llama 2 one.
func findLlama2cTokenizer(path string, vocab int) (string, error) {
	dir := filepath.Dir(path)
	for _, name := range []string{fmt.Sprintf("tok%d.bin", vocab), "tokenizer.bin"} {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("a llama2.c checkpoint carries no tokenizer: pass one with --tokenizer (for example tok512.bin or tokenizer.bin)")
}
