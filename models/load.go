package models

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/tessera-llm/tessera/models/gguf"
	"github.com/tessera-llm/tessera/models/tokenizer"
)

// Options adjust how a model is opened.
type Options struct {
	// Tokenizer overrides the model's tokenizer with a file: a llama2.c
	// tokenizer, a SentencePiece .model or a GGUF. llama2.c checkpoints carry
	// no tokenizer; without this option Open looks beside the checkpoint for
	// tok<vocab>.bin and then tokenizer.bin, as llama2.c's own tools name them.
	Tokenizer string
}

// ErrNotFound is returned (wrapped) when there is no model at the path.
var ErrNotFound = errors.New("model not found")

// ErrUnknownFormat is returned (wrapped) for a file no loader recognises.
var ErrUnknownFormat = errors.New("unknown model format")

// Open loads the description of the model at path: a GGUF file, a llama2.c
// checkpoint, or a Hugging Face folder (config.json, safetensors weights in
// one file or shards, tokenizer.json). The tensors stay in the files until
// read; Close releases them.
func Open(path string, opts Options) (*Model, error) {
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("open model: %w: %w", ErrNotFound, err)
	}
	if err != nil {
		return nil, fmt.Errorf("open model: %w", err)
	}
	var m *Model
	if st.IsDir() { // a Hugging Face folder
		m, err = openHF(path, opts.Tokenizer != "")
	} else {
		var magic []byte
		if magic, err = readMagic(path); err != nil {
			return nil, fmt.Errorf("open model %s: %w", path, err)
		}
		switch {
		case bytes.Equal(magic, []byte("GGUF")):
			m, err = openGGUF(path)
		default:
			m, err = openLlama2c(path, opts.Tokenizer)
		}
	}
	if err != nil {
		return nil, err
	}
	if opts.Tokenizer != "" && m.Format != "llama2c" {
		tok, err := LoadTokenizer(opts.Tokenizer, m.Config.Vocab)
		if err != nil {
			m.Close()
			return nil, err
		}
		m.Tokenizer = tok
	}
	if err := m.check(); err != nil {
		m.Close()
		return nil, fmt.Errorf("open model %s: %w", path, err)
	}
	m.paceReads()
	return m, nil
}

// LoadTokenizer reads a tokenizer file of any supported kind for a model
// whose vocabulary has vocab entries, or of any size when vocab is 0: a
// GGUF (only its tokenizer.ggml.* keys are read), a Hugging Face
// tokenizer.json or the folder holding one, a SentencePiece .model, or a
// llama2.c tokenizer.bin.
func LoadTokenizer(path string, vocab int) (tokenizer.Tokenizer, error) {
	tok, err := func() (tokenizer.Tokenizer, error) {
		st, err := os.Stat(path)
		if err != nil {
			return nil, err
		}
		if st.IsDir() || filepath.Ext(path) == ".json" {
			if wp, ok, err := tokenizer.LoadHFWordPiece(path); ok {
				return wp, err
			}
			b, err := tokenizer.LoadHF(path)
			// tokenizer.json lists only the ids it uses, while models pad
			// their embeddings (Qwen3: 151,669 ids, 151,936 rows).
			if err == nil && vocab > b.VocabSize() {
				b, err = b.WithVocabSize(vocab)
			}
			if err != nil {
				return nil, err
			}
			return b, nil
		}
		magic, err := readMagic(path)
		if err != nil {
			return nil, err
		}
		switch {
		case bytes.Equal(magic, []byte("GGUF")):
			f, err := gguf.Open(path)
			if err != nil {
				return nil, err
			}
			defer f.Close()
			return ggufTokenizer(f)
		case filepath.Ext(path) == ".model":
			return tokenizer.LoadModelProto(path)
		case vocab <= 0:
			return tokenizer.LoadLlama2cFile(path)
		}
		return tokenizer.LoadLlama2c(path, vocab)
	}()
	if err != nil {
		return nil, fmt.Errorf("load tokenizer %s: %w", path, err)
	}
	if vocab > 0 && tok.VocabSize() != vocab {
		return nil, fmt.Errorf("load tokenizer %s: it has %d tokens but the model has %d", path, tok.VocabSize(), vocab)
	}
	return tok, nil
}

// check verifies what every loader must deliver: a valid config, a tokenizer
// that fits the vocabulary and every tensor the forward pass reads, with the
// right shape.
func (m *Model) check() error {
	c := m.Config
	if err := c.Validate(); err != nil {
		return fmt.Errorf("invalid config: %w", err)
	}
	if m.Tokenizer == nil {
		return errors.New("no tokenizer")
	}
	if m.Tokenizer.VocabSize() != c.Vocab {
		return fmt.Errorf("tokenizer has %d tokens but the model has %d", m.Tokenizer.VocabSize(), c.Vocab)
	}
	want := LlamaTensors
	if c.Encoder.On {
		want = EncoderTensors
	}
	for _, want := range want(c) {
		if _, err := m.Tensor(want.Name, want.Shape...); err != nil {
			return err
		}
	}
	return nil
}

// LlamaTensors lists the tensors a Llama-family model of config c needs, with
// their shapes, under the GGUF names that every loader uses.
func LlamaTensors(c Config) []Tensor {
	if c.Gemma4 != nil {
		return gemma4Tensors(c)
	}
	q, kv := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	ts := []Tensor{
		{Name: TokenEmbedding, Shape: []int{c.Vocab, c.Dim}},
		{Name: OutputNorm, Shape: []int{c.Dim}},
	}
	if !c.TiedEmbeddings {
		ts = append(ts, Tensor{Name: Output, Shape: []int{c.Vocab, c.Dim}})
	}
	for l := 0; l < c.Layers; l++ {
		if c.LayerLinear(l) { // Qwen3.5's Gated DeltaNet instead of attention
			ts = append(ts, Tensor{Name: LayerTensor(l, AttnNorm), Shape: []int{c.Dim}})
			ts = append(ts, linearTensors(c, l)...)
			ts = append(ts, Tensor{Name: LayerTensor(l, FFNNorm), Shape: []int{c.Dim}})
			ts = append(ts, ffnTensors(c, l)...)
			continue
		}
		if c.AttnGate {
			ts = append(ts, Tensor{Name: LayerTensor(l, AttnQGate), Shape: []int{q, c.Dim}})
		}
		if c.QKVBias {
			ts = append(ts,
				Tensor{Name: LayerBias(l, AttnQ), Shape: []int{q}},
				Tensor{Name: LayerBias(l, AttnK), Shape: []int{kv}},
				Tensor{Name: LayerBias(l, AttnV), Shape: []int{kv}})
		}
		if c.QKNorm {
			qn, kn := c.HeadDim, c.HeadDim
			if c.QKNormFull {
				qn, kn = q, kv
			}
			ts = append(ts,
				Tensor{Name: LayerTensor(l, AttnQNorm), Shape: []int{qn}},
				Tensor{Name: LayerTensor(l, AttnKNorm), Shape: []int{kn}})
		}
		if c.AttnSinks {
			ts = append(ts, Tensor{Name: LayerTensor(l, AttnSinks), Shape: []int{c.Heads}})
		}
		if c.AttnOutBias {
			ts = append(ts, Tensor{Name: LayerBias(l, AttnOutput), Shape: []int{c.Dim}})
		}
		ts = append(ts,
			Tensor{Name: LayerTensor(l, AttnNorm), Shape: []int{c.Dim}},
			Tensor{Name: LayerTensor(l, AttnQ), Shape: []int{q, c.Dim}},
			Tensor{Name: LayerTensor(l, AttnK), Shape: []int{kv, c.Dim}},
			Tensor{Name: LayerTensor(l, AttnV), Shape: []int{kv, c.Dim}},
			Tensor{Name: LayerTensor(l, AttnOutput), Shape: []int{c.Dim, q}},
			Tensor{Name: LayerTensor(l, FFNNorm), Shape: []int{c.Dim}},
		)
		ts = append(ts, ffnTensors(c, l)...)
		if c.PostNorms {
			ts = append(ts,
				Tensor{Name: LayerTensor(l, AttnPostNorm), Shape: []int{c.Dim}},
				Tensor{Name: LayerTensor(l, FFNPostNorm), Shape: []int{c.Dim}})
		}
	}
	return ts
}

// Tensor names, as GGUF's llama architecture spells them.
const (
	TokenEmbedding = "token_embd.weight"
	OutputNorm     = "output_norm.weight"
	Output         = "output.weight"

	AttnNorm   = "attn_norm"
	AttnQ      = "attn_q"
	AttnK      = "attn_k"
	AttnV      = "attn_v"
	AttnOutput = "attn_output"
	FFNNorm    = "ffn_norm"
	FFNGate    = "ffn_gate"
	FFNUp      = "ffn_up"
	FFNDown    = "ffn_down"
	AttnQNorm  = "attn_q_norm"
	AttnKNorm  = "attn_k_norm"
	// Gemma 2/3's norms of the attention and feed-forward outputs (FFNNorm
	// is its pre-feed-forward norm).
	AttnPostNorm = "post_attention_norm"
	FFNPostNorm  = "post_ffw_norm"
	// gpt-oss's per-head sink logits.
	AttnSinks = "attn_sinks"
)

// LayerTensor names the weight of kind in layer l, e.g. "blk.3.attn_q.weight".
func LayerTensor(l int, kind string) string {
	return fmt.Sprintf("blk.%d.%s.weight", l, kind)
}

// LayerBias names the bias of kind in layer l, e.g. "blk.3.attn_q.bias".
func LayerBias(l int, kind string) string {
	return fmt.Sprintf("blk.%d.%s.bias", l, kind)
}

func readMagic(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	magic := make([]byte, 4)
	n, err := io.ReadFull(f, magic)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return magic[:n], nil
}
