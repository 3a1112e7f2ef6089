// Package models describes a language model independently of the file it came
// from: a Config (the shapes and the numeric choices of the architecture) and a
// set of named tensors read lazily from the file. GGUF files, llama2.c
// checkpoints and Hugging Face folders (config.json and safetensors) all load
// into this one description, so the engine has a single forward pass to get
// right.
package models

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/tensor"
	"github.com/tessera-llm/tessera/models/tokenizer"
)

// The seam's vocabulary (the tensor, the activations, RoPE layouts) lives
// in models/tensor, a leaf that the backends import without this package's
// loaders; these aliases keep it models' own words.

// RopeLayout says which elements of a head RoPE rotates together
// (tensor.RopeLayout).
type RopeLayout = tensor.RopeLayout

// The RoPE layouts (see tensor.RopePairs).
const (
	RopePairs  = tensor.RopePairs
	RopeHalves = tensor.RopeHalves
)

// Activation is the nonlinearity of a gated feed-forward
// (tensor.Activation).
type Activation = tensor.Activation

// The activations (see tensor.SiLU).
const (
	SiLU      = tensor.SiLU
	GELUTanh  = tensor.GELUTanh
	GELU      = tensor.GELU
	Tanh      = tensor.Tanh
	SwiGLUOAI = tensor.SwiGLUOAI
	Sigmoid   = tensor.Sigmoid
	GELUQuick = tensor.GELUQuick
)

// Tensor is a named weight whose bytes stay in the file until asked for
// (tensor.Tensor).
type Tensor = tensor.Tensor

// NewTensor describes a tensor whose raw bytes read returns.
func NewTensor(name string, shape []int, t dtype.Type, read func() ([]byte, error)) *Tensor {
	return tensor.New(name, shape, t, read)
}

// Config holds everything about an architecture that the forward pass needs
// besides the weights.
type Config struct {
	Arch      string // "llama"
	Dim       int    // model (embedding) width
	FFN       int    // feed-forward hidden width
	Layers    int
	Heads     int // query heads
	KVHeads   int // key/value heads (GQA when < Heads)
	HeadDim   int
	Vocab     int
	Context   int // longest sequence the model supports
	NormEps   float32
	RopeTheta float64
	RopeDim   int // leading dimensions of each head that RoPE rotates
	Rope      RopeLayout
	// TiedEmbeddings is true when the output head reuses the token embedding.
	TiedEmbeddings bool
	// QKVBias: the q, k and v projections add a bias (Qwen2/2.5).
	QKVBias bool
	// QKNorm: each head of q and k is RMS-normalised with its own weight
	// before RoPE (Qwen3).
	QKNorm bool
	// RopeFactors, when set, divide the frequency of each rotation pair
	// (RopeDim/2 of them): Llama 3.1's scaling, from GGUF's rope_freqs
	// tensor or computed by Llama3RopeFactors from a Hugging Face config;
	// YaRN's (YarnRopeFactors) and LongRoPE's short factors likewise.
	RopeFactors []float32
	// RopeScale multiplies the cosines and sines of the rotations (the
	// rotated dimensions of q and k): YaRN's and LongRoPE's attention
	// factor (rope.go). 0 means 1.
	RopeScale float32
	// RopeLong are LongRoPE's factors for contexts longer than
	// RopeOrigContext (Phi-3); ForContext puts them in RopeFactors.
	RopeLong        []float32
	RopeOrigContext int
	// NoRope marks the layers that do not rotate q and k at all
	// (SmolLM3's every fourth); nil: every layer rotates.
	NoRope []bool
	// RopeSections, when any is non-zero, rotate q and k by several
	// positions (Qwen-VL's M-RoPE, rope.dimension_sections): the first
	// RopeSections[0] pairs by a token's time, then height, width and a
	// fourth; interleaved pair by pair with RopeInterleaved (Qwen3-VL).
	// Text turns every section by its position, so that only images
	// (runtime/images.go) tell M-RoPE from RoPE.
	RopeSections    [4]int
	RopeInterleaved bool
	// Deepstack is how many deepstack slices an image token brings
	// (Qwen3-VL, n_deepstack_layers): an image token's embedding is
	// Dim·(1+Deepstack) values, the first Dim its input, slice k+1 added
	// to the hidden state after layer k (for k < Deepstack, and k below
	// Layers). Text adds nothing.
	Deepstack int
	// LocalRopeScaled: sliding-window layers rotate with the global
	// layers' scaling (RopeFactors, RopeScale) at LocalRopeTheta (gpt-oss's
	// YaRN), not unscaled (Gemma).
	LocalRopeScaled bool

	// The rest is Gemma 2/3's, each off at its zero value.

	// EmbedScale multiplies the token embeddings (Gemma: sqrt(Dim)); 0
	// means 1.
	EmbedScale float32
	// Act is the activation of the gated feed-forward: SiLU (SwiGLU) or
	// GELU's tanh approximation (GeGLU).
	Act Activation
	// PostNorms: the outputs of attention and of the feed-forward are
	// RMS-normalised (attn_post_norm, ffn_post_norm) before they are added
	// to the residual stream.
	PostNorms bool
	// QueryScale multiplies the attention scores q·k; 0 means
	// 1/sqrt(HeadDim). Gemma uses 1/sqrt(query_pre_attn_scalar).
	QueryScale float32
	// AttnSoftcap and FinalSoftcap, when positive, squash attention scores
	// and output logits as cap·tanh(x/cap) (Gemma 2).
	AttnSoftcap, FinalSoftcap float32
	// SlidingWindow, when positive, limits the layers marked in Sliding to
	// the last SlidingWindow positions (each token included). Those layers
	// rotate with LocalRopeTheta, unscaled (RopeFactors are the global
	// layers').
	SlidingWindow  int
	Sliding        []bool // per layer
	LocalRopeTheta float64

	// Mixture of experts (moe.go), off when Experts is 0.
	MoE MoEConfig

	// gpt-oss's, each off at its zero value (families.go): AttnSinks, a
	// learned logit per query head (attn_sinks) that joins each row's
	// softmax with no value; AttnOutBias, a bias of the attention's output
	// projection.
	AttnSinks, AttnOutBias bool

	// Granite's multipliers, each off at its zero value: ResidualScale
	// multiplies what attention and the feed-forward add to the residual
	// stream; the logits are divided by LogitScale.
	ResidualScale, LogitScale float32
	// QKNormFull: the q and k norms (QKNorm) normalise all heads of a row
	// together, with weights as wide as q and k (OLMoE), not each head.
	QKNormFull bool

	// Gemma 4's per-layer shapes, shared keys and values and per-layer
	// embeddings (gemma4.go); nil for every other family.
	Gemma4 *Gemma4

	// Qwen3.5's hybrid layers (qwen35.go), off at their zero values:
	// Linear marks the Gated DeltaNet layers and their shapes; AttnGate
	// gates the full-attention layers' output per head by sigmoid of a
	// second half of q's projection (attn_q_gate).
	Linear   LinearConfig
	AttnGate bool

	// Embedding models (encoder.go): how a sequence becomes one vector,
	// and the encoders' differences, each off at its zero value.
	Pooling Pooling
	Encoder EncoderConfig
}

func (c Config) LayerRope(l int) bool { return l >= len(c.NoRope) || !c.NoRope[l] }

// LayerSliding reports whether layer l attends through the sliding window.
func (c Config) LayerSliding(l int) bool {
	return c.SlidingWindow > 0 && l < len(c.Sliding) && c.Sliding[l]
}

// Llama3RopeFactors computes Llama 3.1's frequency-dependent RoPE scaling:
// wavelengths longer than orig/low are stretched by factor, those shorter
// than orig/high kept, and those between interpolated smoothly.
func Llama3RopeFactors(ropeDim int, theta, factor, low, high float64, orig int) []float32 {
	out := make([]float32, ropeDim/2)
	lowWave, highWave := float64(orig)/low, float64(orig)/high
	for i := range out {
		freq := 1 / math.Pow(theta, float64(2*i)/float64(ropeDim))
		wave := 2 * math.Pi / freq
		switch {
		case wave < highWave:
			out[i] = 1
		case wave > lowWave:
			out[i] = float32(factor)
		default:
			smooth := (float64(orig)/wave - low) / (high - low)
			// new freq = (1-smooth)·freq/factor + smooth·freq
			out[i] = float32(1 / ((1-smooth)/factor + smooth))
		}
	}
	return out
}

// Validate reports a Config that cannot describe a working model. It is
// called by every loader, so that the engine can trust the shapes.
func (c Config) Validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(c.Dim > 0, "dim %d must be positive", c.Dim)
	check(c.FFN > 0, "ffn width %d must be positive", c.FFN)
	check(c.Layers > 0 && c.Layers <= 1024, "layer count %d out of range", c.Layers)
	check(c.Heads > 0, "head count %d must be positive", c.Heads)
	check(c.KVHeads > 0 && c.Heads%max(c.KVHeads, 1) == 0, "kv head count %d must divide head count %d", c.KVHeads, c.Heads)
	check(c.HeadDim > 0 && c.HeadDim%2 == 0, "head dim %d must be positive and even", c.HeadDim)
	check(c.Vocab > 0, "vocabulary size %d must be positive", c.Vocab)
	check(c.Context > 0, "context length %d must be positive", c.Context)
	check(c.RopeDim > 0 && c.RopeDim <= c.HeadDim && c.RopeDim%2 == 0, "rope dim %d must be even and in 1..head dim %d", c.RopeDim, c.HeadDim)
	check(c.NormEps > 0, "norm epsilon %g must be positive", c.NormEps)
	check(c.RopeTheta > 0, "rope theta %g must be positive", c.RopeTheta)
	check(c.EmbedScale >= 0 && c.QueryScale >= 0 && c.AttnSoftcap >= 0 && c.FinalSoftcap >= 0,
		"embedding scale %g, query scale %g and soft caps %g, %g must not be negative",
		c.EmbedScale, c.QueryScale, c.AttnSoftcap, c.FinalSoftcap)
	check(c.Act == SiLU || c.Act == GELUTanh || (c.Encoder.On && c.Act == GELU) || (c.MoE.On() && c.Act == SwiGLUOAI),
		"activation %s not supported here", c.Act)
	check(c.Pooling >= PoolNone && c.Pooling <= PoolRank, "pooling %d unknown", c.Pooling)
	if c.SlidingWindow > 0 {
		check(len(c.Sliding) == c.Layers, "sliding-window flags for %d layers, want %d", len(c.Sliding), c.Layers)
		check(c.LocalRopeTheta > 0, "local rope theta %g must be positive", c.LocalRopeTheta)
	}
	check(c.SlidingWindow >= 0, "sliding window %d must not be negative", c.SlidingWindow)
	check(c.NoRope == nil || len(c.NoRope) == c.Layers, "no-rope flags for %d layers, want %d", len(c.NoRope), c.Layers)
	check(c.RopeFactors == nil || len(c.RopeFactors) == c.RopeDim/2, "%d rope factors for %d rotation pairs", len(c.RopeFactors), c.RopeDim/2)
	check(c.RopeLong == nil || len(c.RopeLong) == c.RopeDim/2 && c.RopeOrigContext > 0,
		"%d long rope factors for %d rotation pairs, original context %d", len(c.RopeLong), c.RopeDim/2, c.RopeOrigContext)
	check(c.RopeScale >= 0, "rope scale %g must not be negative", c.RopeScale)
	check(c.ResidualScale >= 0 && c.LogitScale >= 0, "residual scale %g and logit scale %g must not be negative", c.ResidualScale, c.LogitScale)
	if err := c.MoE.validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Gemma4 != nil {
		errs = append(errs, c.Gemma4.validate(c))
	}
	if err := c.Linear.validate(c.Layers); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Model is a loaded model description: config, tensors and tokenizer.
type Model struct {
	Config    Config
	Format    string // "gguf" or "llama2c"
	Path      string
	Tensors   map[string]*Tensor
	Tokenizer tokenizer.Tokenizer
	// ChatTemplate is the Jinja chat template the file carries (a GGUF's
	// tokenizer.chat_template), or empty. It travels with the model so
	// that a model read from memory (OpenReader) chats as one from disk.
	ChatTemplate string
	close        func() error
}

// Tensor returns the named tensor, checking its shape when want is given.
func (m *Model) Tensor(name string, want ...int) (*Tensor, error) {
	t, ok := m.Tensors[name]
	if !ok {
		return nil, fmt.Errorf("model %s: missing tensor %s", m.Path, name)
	}
	if len(want) > 0 && !equalShape(t.Shape, want) {
		return nil, fmt.Errorf("model %s: tensor %s has shape %v, want %v", m.Path, name, t.Shape, want)
	}
	return t, nil
}

// TensorNames returns the tensor names in sorted order.
func (m *Model) TensorNames() []string {
	names := make([]string, 0, len(m.Tensors))
	for n := range m.Tensors {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Close releases the file behind the model. Closing twice is harmless.
func (m *Model) Close() error {
	if m.close == nil {
		return nil
	}
	c := m.close
	m.close = nil
	return c()
}

func equalShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
