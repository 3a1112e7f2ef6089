package models

import (
	"fmt"
)

// Qwen3.5 (llama.cpp's qwen35 and qwen35moe): hybrid layers. Three of
// every four are Gated DeltaNet linear attention, whose memory is a fixed
// state per sequence instead of a growing cache; the fourth is full
// attention whose q projection also yields an output gate per head.
//
// A linear layer, from h = norm(x):
//
//	mixed = W_qkv·h, z = W_gate·h, b = W_beta·h, a = W_alpha·h
//	c     = silu(causal conv1d of mixed over the sequence, Conv taps)
//	q, k  = l2norm of c's key heads, v = c's value heads
//	g     = exp(softplus(a + dt_bias)·A), β = sigmoid(b)   (per value head)
//	S     = g·S;  S += β·(v − S·k)·kᵀ;  o = S·q/√D         (the delta rule)
//	x    += W_out·(rmsnorm(o)·w_norm · silu(z))            (per head)
//
// Value head h reads key head h mod KHeads (llama.cpp repeats the key
// heads as a whole; its converter orders the value heads to match).

// LinearConfig describes Qwen3.5's Gated DeltaNet layers; off when Layers
// is nil.
type LinearConfig struct {
	Layers         []bool // per layer: linear attention instead of full attention
	Conv           int    // taps of the causal convolution (ssm.conv_kernel)
	KHeads, VHeads int    // key and value heads (ssm.group_count, ssm.time_step_rank)
	HeadDim        int    // width of a key and of a value head (ssm.state_size)
}

// On reports whether the model has linear-attention layers.
func (l LinearConfig) On() bool { return l.Layers != nil }

// Channels is the width of the convolved q, k and v of a row.
func (l LinearConfig) Channels() int { return (2*l.KHeads + l.VHeads) * l.HeadDim }

// Inner is the width of the value heads: of o, z and W_out's input.
func (l LinearConfig) Inner() int { return l.VHeads * l.HeadDim }

// Count is the number of linear layers.
func (l LinearConfig) Count() int { return l.CountBefore(len(l.Layers)) }

// CountBefore is the number of linear layers before layer n: a linear
// layer's index among them, and what a full-attention layer's index among
// the layers with a KV cache is short of n.
func (l LinearConfig) CountBefore(n int) int {
	c := 0
	for _, on := range l.Layers[:min(n, len(l.Layers))] {
		if on {
			c++
		}
	}
	return c
}

func (l LinearConfig) validate(layers int) error {
	if !l.On() {
		return nil
	}
	switch {
	case len(l.Layers) != layers:
		return fmt.Errorf("linear-attention flags for %d layers, want %d", len(l.Layers), layers)
	case l.Conv < 1 || l.Conv > 16:
		return fmt.Errorf("linear attention's convolution of %d taps (want 1..16)", l.Conv)
	case l.KHeads <= 0 || l.VHeads <= 0 || l.VHeads%l.KHeads != 0:
		return fmt.Errorf("linear attention's %d key heads must divide its %d value heads", l.KHeads, l.VHeads)
	case l.HeadDim <= 0 || l.HeadDim > 512:
		return fmt.Errorf("linear attention's head width %d (want 1..512)", l.HeadDim)
	}
	return nil
}

// LayerLinear reports whether layer l is a linear-attention layer.
func (c Config) LayerLinear(l int) bool { return l < len(c.Linear.Layers) && c.Linear.Layers[l] }

// Tensor kinds of Qwen3.5's layers, as llama.cpp names them, and
// AttnQGate, the gate half of a full-attention layer's attn_q, which the
// loader splits off (the file interleaves each head's q and gate rows).
const (
	AttnQGate = "attn_q_gate"
	LinQKV    = "attn_qkv"  // mixed q, k, v before the convolution
	LinGate   = "attn_gate" // z, the output gate
	LinConv   = "ssm_conv1d"
	LinDT     = "ssm_dt" // its bias: the softplus's
	LinA      = "ssm_a"  // -exp(A_log), stored without a .weight suffix
	LinBeta   = "ssm_beta"
	LinAlpha  = "ssm_alpha"
	LinNorm   = "ssm_norm"
	LinOut    = "ssm_out"
)

// LinA's name has no suffix in llama.cpp's files.
func linAName(l int) string { return fmt.Sprintf("blk.%d.%s", l, LinA) }

// LinearA names layer l's decay scale (A = -exp(A_log)).
func LinearA(l int) string { return linAName(l) }

// linearTensors lists linear layer l's attention tensors.
func linearTensors(c Config, l int) []Tensor {
	lc := c.Linear
	d, inner, ch := lc.HeadDim, lc.Inner(), lc.Channels()
	return []Tensor{
		{Name: LayerTensor(l, LinQKV), Shape: []int{ch, c.Dim}},
		{Name: LayerTensor(l, LinGate), Shape: []int{inner, c.Dim}},
		{Name: LayerTensor(l, LinBeta), Shape: []int{lc.VHeads, c.Dim}},
		{Name: LayerTensor(l, LinAlpha), Shape: []int{lc.VHeads, c.Dim}},
		{Name: LayerTensor(l, LinConv), Shape: []int{ch, lc.Conv}},
		{Name: LayerBias(l, LinDT), Shape: []int{lc.VHeads}},
		{Name: LinearA(l), Shape: []int{lc.VHeads}},
		{Name: LayerTensor(l, LinNorm), Shape: []int{d}},
		{Name: LayerTensor(l, LinOut), Shape: []int{c.Dim, inner}},
	}
}

// qwen35GGUF reads Qwen3.5's hybrid layout: the linear layers' shapes from
// the ssm.* keys, every full_attention_interval-th layer (counting from
// one) full attention, q/k norms and the output gate on those, and the
// norm before the feed-forward stored as post_attention_norm.
func qwen35GGUF(m *Model, md *metaReader) error {
	c := &m.Config
	lc := LinearConfig{
		Conv:    md.int("ssm.conv_kernel", 0),
		HeadDim: md.int("ssm.state_size", 0),
		VHeads:  md.int("ssm.time_step_rank", 0),
		KHeads:  md.int("ssm.group_count", 0),
	}
	inner := md.int("ssm.inner_size", 0)
	interval := md.int("full_attention_interval", 4)
	if md.err != nil {
		return md.err
	}
	if _, ok := md.f.Lookup(md.prefix + "attention.recurrent_layers"); ok {
		return fmt.Errorf("%sattention.recurrent_layers is not supported (layers follow %sfull_attention_interval)", md.prefix, md.prefix)
	}
	if inner != lc.VHeads*lc.HeadDim {
		return fmt.Errorf("%sssm.inner_size %d is not %d value heads × state size %d (llama.cpp's qwen35 needs value heads as wide as key heads)",
			md.prefix, inner, lc.VHeads, lc.HeadDim)
	}
	if interval < 1 {
		return fmt.Errorf("%sfull_attention_interval %d must be positive", md.prefix, interval)
	}
	lc.Layers = make([]bool, c.Layers)
	for l := range lc.Layers {
		lc.Layers[l] = (l+1)%interval != 0
	}
	c.Linear, c.QKNorm, c.AttnGate = lc, true, true
	for l := range c.Layers {
		from, to := LayerTensor(l, AttnPostNorm), LayerTensor(l, FFNNorm)
		if t, ok := m.Tensors[from]; ok {
			delete(m.Tensors, from)
			t.Name = to
			m.Tensors[to] = t
		}
		if lc.Layers[l] {
			continue
		}
		if err := splitQGate(m, l); err != nil {
			return err
		}
	}
	return nil
}

// splitQGate splits full-attention layer l's attn_q, whose rows hold for
// each head its q rows then its gate rows, into attn_q and attn_q_gate:
// views of the file's rows (a row of any type is a whole number of bytes).
func splitQGate(m *Model, l int) error {
	c := m.Config
	name := LayerTensor(l, AttnQ)
	t, ok := m.Tensors[name]
	if !ok {
		return fmt.Errorf("missing tensor %s", name)
	}
	q := c.Heads * c.HeadDim
	if len(t.Shape) != 2 || t.Shape[0] != 2*q {
		return fmt.Errorf("tensor %s has shape %v, want [%d %d] (q and gate of %d heads)", name, t.Shape, 2*q, c.Dim, c.Heads)
	}
	half := func(name string, which int) *Tensor {
		return NewTensor(name, []int{q, t.Shape[1]}, t.Type, func() ([]byte, error) {
			b, err := t.Raw()
			if err != nil {
				return nil, err
			}
			row := len(b) / (2 * q)
			out := make([]byte, 0, q*row)
			for h := range c.Heads {
				from := (2*h + which) * c.HeadDim * row
				out = append(out, b[from:from+c.HeadDim*row]...)
			}
			return out, nil
		})
	}
	m.Tensors[name] = half(name, 0)
	gate := LayerTensor(l, AttnQGate)
	m.Tensors[gate] = half(gate, 1)
	return nil
}
