// Package tensor is the vocabulary that the model description (models)
// and the backends (runtime/backend and its implementations) share: a named
// weight read lazily, the activations of the feed-forward and encoders,
// RoPE's layouts, and the bound on experts. It imports nothing but
// models/dtype, so that a backend can take a model's tensors without
// importing the loaders (GGUF, safetensors, the tokenizers, protobuf)
// that models pulls in. The arrows point down: models and runtime/backend
// both import this leaf, and models re-exports its names as aliases, so
// code written against models.Tensor keeps working.
package tensor

import (
	"fmt"

	"github.com/tessera-llm/tessera/models/dtype"
)

// RopeLayout says which elements of a head RoPE rotates together.
type RopeLayout int

const (
	// RopePairs rotates adjacent pairs (x[2i], x[2i+1]): llama2.c and GGUF's
	// "normal" RoPE.
	RopePairs RopeLayout = iota
	// RopeHalves rotates x[i] with x[i+d/2]: the Hugging Face ("NeoX") layout.
	RopeHalves
)

func (l RopeLayout) String() string {
	if l == RopeHalves {
		return "halves"
	}
	return "pairs"
}

// Activation is the nonlinearity of a gated feed-forward.
type Activation int

const (
	// SiLU: x·sigmoid(x), SwiGLU's (Llama, Qwen, Mistral).
	SiLU Activation = iota
	// GELUTanh: GELU's tanh approximation, GeGLU's (Gemma; transformers'
	// gelu_pytorch_tanh).
	GELUTanh
	// GELU: exact GELU, x/2·(1 + erf(x/√2)), BERT's feed-forward
	// (transformers' "gelu"). Only Backend.Activate takes it.
	GELU
	// Tanh: a rerankers' classification head (BERT's pooler). Only
	// Backend.Activate takes it.
	Tanh
	// SwiGLUOAI: gpt-oss's clamped SwiGLU of gate g and up u,
	// min(g, 7)·sigmoid(1.702·min(g, 7))·(clamp(u, −7, 7) + 1). Only
	// Backend.GLU takes it.
	SwiGLUOAI
	// Sigmoid: Qwen3.5's attention output gate, sigmoid(g)·u. Only
	// Backend.GLU takes it.
	Sigmoid
	// GELUQuick: x·sigmoid(1.702·x), CLIP's and Qwen2-VL's vision
	// towers' (transformers' "quick_gelu"); Backend.Activate and
	// Backend.GLU take it (Gemma 4's vision tower gates with it, as
	// llama.cpp's clip does without clip.use_gelu).
	GELUQuick
)

func (a Activation) String() string {
	switch a {
	case GELUTanh:
		return "gelu_tanh"
	case GELU:
		return "gelu"
	case Tanh:
		return "tanh"
	case SwiGLUOAI:
		return "swiglu_oai"
	case Sigmoid:
		return "sigmoid"
	case GELUQuick:
		return "gelu_quick"
	}
	return "silu"
}

// LayerRope reports whether layer l rotates q and k.

// Tensor is a named weight whose bytes stay in the file until asked for.
type Tensor struct {
	Name  string
	Shape []int // row-major, outermost first: a weight matrix is [out, in]
	Type  dtype.Type
	read  func() ([]byte, error)
	int4  *dtype.Int4 // set by WithInt4
}

// New describes a tensor whose raw bytes read returns.
func New(name string, shape []int, t dtype.Type, read func() ([]byte, error)) *Tensor {
	return &Tensor{Name: name, Shape: shape, Type: t, read: read}
}

// Elements is the number of values in the tensor.
func (t *Tensor) Elements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Raw returns the tensor's bytes as stored in the file.
func (t *Tensor) Raw() ([]byte, error) {
	b, err := t.read()
	if err != nil {
		return nil, fmt.Errorf("read tensor %s: %w", t.Name, err)
	}
	return b, nil
}

// OnRead makes t call f with the length of what each read of its bytes
// returns (Raw, and through it Float32, Int4 and Int8), after the read.
func (t *Tensor) OnRead(f func(n int)) {
	read := t.read
	t.read = func() ([]byte, error) {
		b, err := read()
		if err == nil {
			f(len(b))
		}
		return b, err
	}
}

// Float32 returns the tensor's values, dequantized.
func (t *Tensor) Float32() ([]float32, error) {
	raw, err := t.Raw()
	if err != nil {
		return nil, err
	}
	out := make([]float32, t.Elements())
	if err := dtype.Dequantize(t.Type, raw, out); err != nil {
		return nil, fmt.Errorf("dequantize tensor %s: %w", t.Name, err)
	}
	return out, nil
}

// WithInt4 returns a copy of t that keeps its values (Raw, Float32) but
// stores as q wherever it is kept in int4: the result of a calibrated
// quantization (runtime's GPTQ), computed once on the host so that every
// backend uploads the same codes.
func (t *Tensor) WithInt4(q *dtype.Int4) *Tensor {
	c := *t
	c.int4 = q
	return &c
}

// Int4 returns the tensor in Tessera's int4 format: the form WithInt4
// gave it, or else its bytes converted by dtype.ToInt4 (Q4_0, Q4_1 and
// Q4_K keep their codes; other types are quantized by the per-group
// search). The tensor must be a matrix.
func (t *Tensor) Int4() (*dtype.Int4, error) {
	if len(t.Shape) != 2 {
		return nil, fmt.Errorf("tensor %s: int4 needs a matrix, not shape %v", t.Name, t.Shape)
	}
	rows, cols := t.Shape[0], t.Shape[1]
	if t.int4 != nil {
		if t.int4.Rows != rows || t.int4.Cols != cols {
			return nil, fmt.Errorf("tensor %s: int4 form of %d×%d for shape %v", t.Name, t.int4.Rows, t.int4.Cols, t.Shape)
		}
		return t.int4, nil
	}
	raw, err := t.Raw()
	if err != nil {
		return nil, err
	}
	q, err := dtype.ToInt4(t.Type, raw, rows, cols)
	if err != nil {
		return nil, fmt.Errorf("tensor %s: %w", t.Name, err)
	}
	return q, nil
}

// Int8 returns the tensor in Tessera's int8 format, its bytes converted
// by dtype.ToInt8 (Q8_0, Q5_0, Q5_1, Q5_K and Q6_K keep their codes; other
// types are quantized group by group). The tensor must be a matrix.
func (t *Tensor) Int8() (*dtype.Int8, error) {
	if len(t.Shape) != 2 {
		return nil, fmt.Errorf("tensor %s: int8 needs a matrix, not shape %v", t.Name, t.Shape)
	}
	raw, err := t.Raw()
	if err != nil {
		return nil, err
	}
	q, err := dtype.ToInt8(t.Type, raw, t.Shape[0], t.Shape[1])
	if err != nil {
		return nil, fmt.Errorf("tensor %s: %w", t.Name, err)
	}
	return q, nil
}

// Blocks returns the tensor at its file's bits, repacked for the kernels
// (dtype.BlocksFromGGML): its type must be one of dtype.BlockTypes and its
// rows whole blocks of it. The tensor must be a matrix.
func (t *Tensor) Blocks() (*dtype.Blocks, error) {
	if len(t.Shape) != 2 {
		return nil, fmt.Errorf("tensor %s: blocks need a matrix, not shape %v", t.Name, t.Shape)
	}
	raw, err := t.Raw()
	if err != nil {
		return nil, err
	}
	b, err := dtype.BlocksFromGGML(t.Type, raw, t.Shape[0], t.Shape[1])
	if err != nil {
		return nil, fmt.Errorf("tensor %s: %w", t.Name, err)
	}
	return b, nil
}

// MaxExperts bounds a mixture of experts' E: the router's kernels keep a
// row's choice in registers and workgroup memory (the largest real models
// have 256).
const MaxExperts = 1024
