package models

import (
	"fmt"
)

// Families of 2025–26 that share the Llama forward pass with differences
// of data: SmolLM3's layers without RoPE, Phi-3's fused projections,
// gpt-oss's attention sinks, biases and clamped SwiGLU experts.

// smollm3NoRopeStep is SmolLM3's period of layers without RoPE: layer l
// rotates unless (l+1) % 4 == 0. llama.cpp fixes it in code
// (n_no_rope_layer_step); the Hugging Face config lists the layers
// (no_rope_layers).
const smollm3NoRopeStep = 4

// noRopeEvery marks every step-th layer (counting from one) as NoPE.
func noRopeEvery(layers, step int) []bool {
	s := make([]bool, layers)
	for l := range s {
		s[l] = (l+1)%step == 0
	}
	return s
}

// familyGGUF sets what an architecture of this file adds to the Llama
// family, and reshapes its tensors into the Llama family's names.
func familyGGUF(m *Model, md *metaReader) error {
	c := &m.Config
	switch c.Arch {
	case "smollm3":
		c.NoRope = noRopeEvery(c.Layers, smollm3NoRopeStep)
	case "phi3":
		return splitFused(m)
	case "gpt-oss":
		return gptOSS(m, md)
	case "qwen35", "qwen35moe":
		return qwen35GGUF(m, md)
	case "qwen2vl", "qwen3vl":
		return qwenVLGGUF(m, md)
	}
	return nil
}

// qwenVLGGUF reads Qwen2-VL's and Qwen3-VL's language models: Qwen2 and
// Qwen3 whose q and k turn by M-RoPE's sections (rope.dimension_sections,
// counts of rotation pairs; llama.cpp requires them), interleaved for
// Qwen3-VL, whose images also bring deepstack slices (n_deepstack_layers).
func qwenVLGGUF(m *Model, md *metaReader) error {
	c := &m.Config
	key := md.prefix + "rope.dimension_sections"
	v, ok := md.f.Int32s(key)
	if !ok || len(v) == 0 || len(v) > 4 {
		return fmt.Errorf("%s: missing, or not up to four counts", key)
	}
	sum := 0
	for i, n := range v {
		if n < 0 || n > int32(c.RopeDim) {
			return fmt.Errorf("%s = %v: out of range", key, v)
		}
		c.RopeSections[i] = int(n)
		sum += int(n)
	}
	if sum == 0 || sum > c.HeadDim { // ggml asserts as much
		return fmt.Errorf("%s = %v: %d pairs for heads of %d", key, v, sum, c.HeadDim)
	}
	c.RopeInterleaved = c.Arch == "qwen3vl"
	if c.Arch == "qwen3vl" {
		// Images' deepstack slices (optional, as llama.cpp reads it).
		if v, ok := md.f.Uint(md.prefix + "n_deepstack_layers"); ok {
			if v > maxDeepstack {
				return fmt.Errorf("%sn_deepstack_layers = %d: out of range (at most %d)", md.prefix, v, maxDeepstack)
			}
			c.Deepstack = int(v)
		}
	}
	return nil
}

// maxDeepstack bounds Qwen3-VL's deepstack slices (its models have 3): a
// file cannot ask for image embeddings of absurd widths.
const maxDeepstack = 64

// gptOSS reads gpt-oss (llama.cpp's openai-moe): q/k/v and output biases,
// a sink logit per head, every other layer from the first sliding over
// attention.sliding_window positions with the same YaRN as the others,
// the router and experts with biases and the clamped SwiGLU, the top k's
// softmax; the norm before the experts is stored as post_attention_norm.
func gptOSS(m *Model, md *metaReader) error {
	c := &m.Config
	c.QKVBias, c.AttnSinks, c.AttnOutBias = true, true, true
	c.Act, c.MoE.Biases, c.MoE.NormTopK = SwiGLUOAI, true, true
	c.SlidingWindow = md.int("attention.sliding_window", 0)
	if md.err != nil {
		return md.err
	}
	c.Sliding = slidingPattern(c.Layers, 2)
	c.LocalRopeTheta, c.LocalRopeScaled = c.RopeTheta, true
	for l := range c.Layers {
		from, to := LayerTensor(l, AttnPostNorm), LayerTensor(l, FFNNorm)
		if t, ok := m.Tensors[from]; ok {
			delete(m.Tensors, from)
			t.Name = to
			m.Tensors[to] = t
		}
	}
	return nil
}

// splitFused turns Phi-3's fused attn_qkv (AttnQKV: q, k and v rows one
// after the other) and ffn_up (gate rows, then up rows) into the
// separate q, k, v, gate and up tensors the forward pass reads (and fuses
// again on upload): views of the file's rows, so nothing is copied until
// read, and quantized rows keep their blocks.
func splitFused(m *Model) error {
	c := m.Config
	q, kv := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	for l := range c.Layers {
		if t, ok := m.Tensors[LayerTensor(l, AttnQKV)]; ok {
			if len(t.Shape) != 2 || t.Shape[0] != q+2*kv || t.Shape[1] != c.Dim {
				return fmt.Errorf("tensor %s has shape %v, want [%d %d]", t.Name, t.Shape, q+2*kv, c.Dim)
			}
			delete(m.Tensors, t.Name)
			for _, part := range []struct {
				kind     string
				from, to int
			}{{AttnQ, 0, q}, {AttnK, q, q + kv}, {AttnV, q + kv, q + 2*kv}} {
				name := LayerTensor(l, part.kind)
				m.Tensors[name] = rowsOf(name, t, part.from, part.to)
			}
		}
		up := LayerTensor(l, FFNUp)
		if _, gated := m.Tensors[LayerTensor(l, FFNGate)]; gated {
			continue
		}
		t, ok := m.Tensors[up]
		if !ok {
			return fmt.Errorf("missing tensor %s", up)
		}
		if len(t.Shape) != 2 || t.Shape[0] != 2*c.FFN {
			return fmt.Errorf("tensor %s has shape %v, want [%d %d] (gate and up)", up, t.Shape, 2*c.FFN, c.Dim)
		}
		gate := LayerTensor(l, FFNGate)
		m.Tensors[gate] = rowsOf(gate, t, 0, c.FFN)
		m.Tensors[up] = rowsOf(up, t, c.FFN, 2*c.FFN)
	}
	return nil
}

// rowsOf is rows from..to of matrix t, named name: the bytes of those rows
// (a row of any type is a whole number of bytes, of blocks for quantized
// types).
func rowsOf(name string, t *Tensor, from, to int) *Tensor {
	rows := t.Shape[0]
	return NewTensor(name, []int{to - from, t.Shape[1]}, t.Type, func() ([]byte, error) {
		b, err := t.Raw()
		if err != nil {
			return nil, err
		}
		size := len(b) / rows
		return b[from*size : to*size], nil
	})
}
