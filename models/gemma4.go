package models

import (
	"errors"
	"fmt"
	"math"
	"sync"
)

// Gemma 4 (llama.cpp's gemma4) on the Llama forward pass. What it adds to
// Gemma 3:
//   - sliding and global layers of different attention shapes: the global
//     layers' heads are wider (E2B: 512 against 256), may have their own
//     number of kv heads, and rotate a quarter of their dimensions
//     ("proportional" RoPE, which the converter stores as rope_freqs with
//     factors of 1e30 for the pairs that do not rotate);
//   - v normalised per head without a weight, k by attn_k_norm, q by
//     attn_q_norm, and scores not scaled (the norms set their size);
//   - the last SharedKV layers store no keys and values: each attends over
//     the cache of the last earlier layer of its kind;
//   - E2B/E4B: per-layer token embeddings (a second table, PerLayer values
//     per layer and token) mixed with a projection of the embeddings, fed
//     into each layer after its feed-forward through a small gated
//     projection; feed-forwards of per-layer widths (E2B's shared layers
//     are twice as wide);
//   - a scalar that multiplies each layer's output (layer_output_scale);
//   - norms stored as they multiply (no +1), GeGLU, final logit soft cap;
//   - the 31B's and 26B-A4B's global layers have no attn_v: their values
//     are their keys' projection (attention_k_eq_v; llama.cpp takes
//     Vcur = Kcur where wv is absent), normalised as values, not rotated;
//   - the mixture of experts (26B-A4B): every layer's feed-forward is a
//     dense MLP (ffn_gate/up/down, its output normalised by
//     post_ffw_norm_1) beside routed experts (input pre_ffw_norm_2(x),
//     output normalised by post_ffw_norm_2), the two summed before
//     post_ffw_norm. The router reads x through a weightless RMS norm
//     scaled by ffn_gate_inp.scale/√dim; softmax over the experts, the top
//     k's weights renormalised; each expert's output multiplied by its
//     ffn_down_exps.scale. Converted files store gate and up fused
//     (ffn_gate_up_exps, gate rows first in each expert), which the
//     loader splits into ffn_gate_exps and ffn_up_exps.

// Gemma 4's tensors beyond Gemma 3's, as llama.cpp names them.
const (
	PerLayerTokenEmbd = "per_layer_token_embd.weight" // [Vocab, Layers·PerLayer]
	PerLayerModelProj = "per_layer_model_proj.weight" // [Layers·PerLayer, Dim]
	PerLayerProjNorm  = "per_layer_proj_norm.weight"  // [PerLayer]
	PerLayerInpGate   = "inp_gate"                    // blk.N: [PerLayer, Dim]
	PerLayerProj      = "proj"                        // blk.N: [Dim, PerLayer]
	PerLayerPostNorm  = "post_norm"                   // blk.N: [Dim]
	LayerOutScale     = "layer_output_scale"          // blk.N: [1]
	RopeFreqs         = "rope_freqs.weight"

	// The mixture of experts' (26B-A4B), blk.N: the experts' norms, gate
	// and up fused as the converter writes them ([E, 2·ffn, dim]), and
	// the .scale tensors (LayerScale) of the router's input ([dim]) and of
	// each expert's output ([E]).
	FFNPreNorm2   = "pre_ffw_norm_2"
	FFNPostNorm1  = "post_ffw_norm_1"
	FFNPostNorm2  = "post_ffw_norm_2"
	FFNGateUpExps = "ffn_gate_up_exps"
)

// LayerScale names the .scale tensor of kind in layer l, e.g.
// "blk.3.ffn_gate_inp.scale".
func LayerScale(l int, kind string) string {
	return fmt.Sprintf("blk.%d.%s.scale", l, kind)
}

// Gemma4 is what Gemma 4 adds to Config (nil for every other family).
// The global layers' attention is Config's (HeadDim, KVHeads, RopeDim,
// RopeTheta, RopeFactors); the sliding layers' is here.
type Gemma4 struct {
	LocalHeadDim, LocalKVHeads, LocalRopeDim int
	// FFNs is each layer's feed-forward width (Config.FFN is the widest).
	FFNs []int
	// SharedKV is how many of the last layers read another layer's keys
	// and values instead of storing their own.
	SharedKV int
	// PerLayer is the width of a layer's per-layer token embedding; 0:
	// none (the larger models).
	PerLayer int
	// VFromK marks the layers without attn_v, whose values are their
	// keys' projection (attention_k_eq_v: the 31B's and 26B-A4B's global
	// layers); nil when every layer has one.
	VFromK []bool
}

// LayerVFromK reports whether layer l's values are its keys' projection.
func (g *Gemma4) LayerVFromK(l int) bool {
	return g != nil && l < len(g.VFromK) && g.VFromK[l]
}

// LayerHeadDim is the width of layer l's attention heads.
func (c Config) LayerHeadDim(l int) int {
	if c.Gemma4 != nil && c.LayerSliding(l) {
		return c.Gemma4.LocalHeadDim
	}
	return c.HeadDim
}

// LayerKVHeads is layer l's number of key/value heads.
func (c Config) LayerKVHeads(l int) int {
	if c.Gemma4 != nil && c.LayerSliding(l) {
		return c.Gemma4.LocalKVHeads
	}
	return c.KVHeads
}

// LayerRopeDim is how many dimensions of layer l's heads rotate.
func (c Config) LayerRopeDim(l int) int {
	if c.Gemma4 != nil && c.LayerSliding(l) {
		return c.Gemma4.LocalRopeDim
	}
	return c.RopeDim
}

// LayerFFN is layer l's feed-forward width.
func (c Config) LayerFFN(l int) int {
	if c.Gemma4 != nil && l < len(c.Gemma4.FFNs) {
		return c.Gemma4.FFNs[l]
	}
	return c.FFN
}

// KVSource is the layer whose keys and values layer l attends over: l
// itself, but for Gemma 4's shared layers the last layer before them of
// the same kind, as llama.cpp picks it: the one just before the shared
// layers for a global layer, the one before that for a sliding one
// (Validate checks that they are of those kinds).
func (c Config) KVSource(l int) int {
	if c.Gemma4 == nil || l < c.Layers-c.Gemma4.SharedKV {
		return l
	}
	first := c.Layers - c.Gemma4.SharedKV
	if c.LayerSliding(l) {
		return first - 2
	}
	return first - 1
}

func (g *Gemma4) validate(c Config) error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(g.LocalHeadDim > 0 && g.LocalHeadDim%2 == 0, "sliding layers' head dim %d must be positive and even", g.LocalHeadDim)
	check(g.LocalKVHeads > 0 && c.Heads%max(g.LocalKVHeads, 1) == 0, "sliding layers' kv head count %d must divide head count %d", g.LocalKVHeads, c.Heads)
	check(g.LocalRopeDim > 0 && g.LocalRopeDim <= g.LocalHeadDim && g.LocalRopeDim%2 == 0,
		"sliding layers' rope dim %d must be even and in 1..%d", g.LocalRopeDim, g.LocalHeadDim)
	check(len(g.FFNs) == c.Layers, "feed-forward widths for %d layers, want %d", len(g.FFNs), c.Layers)
	for l, f := range g.FFNs {
		check(f > 0 && f <= c.FFN, "layer %d's feed-forward width %d out of 1..%d", l, f, c.FFN)
	}
	check(g.PerLayer >= 0, "per-layer embedding width %d must not be negative", g.PerLayer)
	check(g.SharedKV >= 0 && g.SharedKV < c.Layers, "%d layers sharing keys and values of %d", g.SharedKV, c.Layers)
	check(g.VFromK == nil || len(g.VFromK) == c.Layers, "values-from-keys flags for %d layers, want %d", len(g.VFromK), c.Layers)
	if c.MoE.On() {
		check(c.MoE.NormTopK && c.MoE.SharedFFN == 0 && !c.MoE.Biases, "gemma4's experts renormalise their top k, with no shared expert or biases")
	}
	if first := c.Layers - g.SharedKV; g.SharedKV > 0 && len(c.Sliding) == c.Layers {
		// llama.cpp's rule reads the layers just before the shared ones:
		// a file whose last own layers are not sliding then global would
		// attend over the wrong kind of cache.
		check(first >= 2 && c.LayerSliding(first-2) && !c.LayerSliding(first-1),
			"layers %d and %d (the last before the %d sharing keys and values) must be sliding then global", first-2, first-1, g.SharedKV)
	}
	return errors.Join(errs...)
}

// gemma4GGUF reads Gemma 4's keys: the sliding pattern (an array of one
// flag a layer), the sliding layers' head and rotation widths and RoPE
// base, the per-layer kv heads and feed-forward widths (a number or an
// array), the shared layers and the per-layer embedding width.
func gemma4GGUF(m *Model, md *metaReader) error {
	c := &m.Config
	_, router := m.Tensors[LayerTensor(0, FFNRouter)]
	if router != c.MoE.On() {
		return fmt.Errorf("gemma4: %sexpert_count %d, router tensor %v: both or neither", md.prefix, c.MoE.Experts, router)
	}
	if c.MoE.On() {
		// llama.cpp's gemma4 graph always renormalises the top k's
		// weights, whatever expert_weights_norm says.
		c.MoE.NormTopK = true
		if err := splitGateUpExperts(m, c.Layers); err != nil {
			return err
		}
	}
	c.EmbedScale = float32(math.Sqrt(float64(c.Dim)))
	c.Act, c.PostNorms, c.QKNorm = GELUTanh, true, true
	c.QueryScale = 1 // llama.cpp's f_attention_scale: q and k are normalised instead
	c.FinalSoftcap = float32(md.float("final_logit_softcapping", 0))
	c.SlidingWindow = md.int("attention.sliding_window", 0)
	c.LocalRopeTheta = md.float("rope.freq_base_swa", 10000)
	g := &Gemma4{}
	g.LocalHeadDim = md.int("attention.key_length_swa", 0)
	if v := md.int("attention.value_length_swa", g.LocalHeadDim); v != g.LocalHeadDim {
		return fmt.Errorf("%sattention.value_length_swa %d differs from key_length_swa %d", md.prefix, v, g.LocalHeadDim)
	}
	if v := md.int("attention.value_length", c.HeadDim); v != c.HeadDim {
		return fmt.Errorf("%sattention.value_length %d differs from key_length %d", md.prefix, v, c.HeadDim)
	}
	g.LocalRopeDim = md.int("rope.dimension_count_swa", g.LocalHeadDim)
	if md.err != nil {
		return md.err
	}
	if v, ok := md.f.Uint(md.prefix + "attention.shared_kv_layers"); ok {
		g.SharedKV = int(min(v, 1<<20))
	}
	if v, ok := md.f.Uint(md.prefix + "embedding_length_per_layer_input"); ok {
		g.PerLayer = int(min(v, 1<<20))
	}
	var err error
	if c.Sliding, err = md.flags("attention.sliding_window_pattern", c.Layers); err != nil {
		return err
	}
	kvHeads, err := md.perLayer("attention.head_count_kv", c.Layers)
	if err != nil {
		return err
	}
	if g.FFNs, err = md.perLayer("feed_forward_length", c.Layers); err != nil {
		return err
	}
	c.FFN = 0
	for _, f := range g.FFNs {
		c.FFN = max(c.FFN, f)
	}
	// One kv head count a kind of layer: the cache holds each kind in one shape.
	kinds := map[bool]int{}
	for l, h := range kvHeads {
		s := c.Sliding[l]
		if k, ok := kinds[s]; ok && k != h {
			return fmt.Errorf("%sattention.head_count_kv: layer %d has %d kv heads, an earlier layer of its kind %d", md.prefix, l, h, k)
		}
		kinds[s] = h
	}
	c.KVHeads, g.LocalKVHeads = kinds[false], kinds[true]
	if c.KVHeads == 0 {
		c.KVHeads = g.LocalKVHeads
	}
	if g.LocalKVHeads == 0 {
		g.LocalKVHeads = c.KVHeads
	}
	for l := range c.Layers - g.SharedKV { // the shared layers store no keys and values
		if _, ok := m.Tensors[LayerTensor(l, AttnV)]; !ok {
			if g.VFromK == nil {
				g.VFromK = make([]bool, c.Layers)
			}
			g.VFromK[l] = true
		}
	}
	c.Gemma4 = g
	return nil
}

// splitGateUpExperts replaces each layer's fused ffn_gate_up_exps ([E,
// 2·ffn, dim], each expert's gate rows before its up rows) by the
// ffn_gate_exps and ffn_up_exps the engine reads, views of it that share
// one read. A file may store them apart instead, as llama.cpp also reads.
func splitGateUpExperts(m *Model, layers int) error {
	for l := range layers {
		name := LayerTensor(l, FFNGateUpExps)
		t, ok := m.Tensors[name]
		if !ok {
			continue
		}
		gate, up := LayerTensor(l, FFNGateExps), LayerTensor(l, FFNUpExps)
		if _, dup := m.Tensors[gate]; dup {
			return fmt.Errorf("layer %d has both %s and %s", l, name, gate)
		}
		if len(t.Shape) != 3 || t.Shape[1]%2 != 0 {
			return fmt.Errorf("tensor %s of shape %v: want [experts, 2·ffn, dim]", name, t.Shape)
		}
		e, rows, width := t.Shape[0], t.Shape[1], t.Shape[2]
		bs, bb := t.Type.BlockSize(), t.Type.BlockBytes()
		if bs == 0 || width%bs != 0 {
			return fmt.Errorf("tensor %s: rows of %d %s values are not whole blocks", name, width, t.Type)
		}
		row := width / bs * bb
		sh := &sharedRead{t: t, left: 2}
		half := func(n string, second int) *Tensor {
			return NewTensor(n, []int{e, rows / 2, width}, t.Type, func() ([]byte, error) {
				return sh.read(func(b []byte) []byte {
					out := make([]byte, 0, e*rows/2*row)
					for x := range e {
						at := (x*rows + second*rows/2) * row
						out = append(out, b[at:at+rows/2*row]...)
					}
					return out
				}, e*rows*row)
			})
		}
		delete(m.Tensors, name)
		m.Tensors[gate], m.Tensors[up] = half(gate, 0), half(up, 1)
	}
	return nil
}

// flags reads a per-layer flag array (or, as older files store a
// sliding pattern, a period n: every layer but each n-th sliding, and
// with n 0 every layer, as llama.cpp's set_swa_pattern reads it).
func (r *metaReader) flags(key string, layers int) ([]bool, error) {
	v, ok := r.f.Lookup(r.prefix + key)
	if !ok {
		return nil, fmt.Errorf("missing %s%s", r.prefix, key)
	}
	if n, ok := v.Uint(); ok {
		return slidingPattern(layers, int(min(n, 1<<20))), nil
	}
	if v.Len() != layers {
		return nil, fmt.Errorf("%s%s has %d values for %d layers", r.prefix, key, v.Len(), layers)
	}
	out := make([]bool, layers)
	for l := range out {
		b, ok := v.Index(l).Bool()
		if !ok {
			return nil, fmt.Errorf("%s%s[%d] is not a flag", r.prefix, key, l)
		}
		out[l] = b
	}
	return out, nil
}

// perLayer reads a count that is one number for every layer or an array
// of one a layer.
func (r *metaReader) perLayer(key string, layers int) ([]int, error) {
	v, ok := r.f.Lookup(r.prefix + key)
	if !ok {
		return nil, fmt.Errorf("missing %s%s", r.prefix, key)
	}
	out := make([]int, layers)
	if n, ok := v.Uint(); ok {
		for l := range out {
			out[l] = int(min(n, 1<<31))
		}
		return out, nil
	}
	if v.Len() != layers {
		return nil, fmt.Errorf("%s%s has %d values for %d layers", r.prefix, key, v.Len(), layers)
	}
	for l := range out {
		n, ok := v.Index(l).Uint()
		if !ok || n > 1<<31 {
			return nil, fmt.Errorf("%s%s[%d] is not a count", r.prefix, key, l)
		}
		out[l] = int(n)
	}
	return out, nil
}

// gemma4Tensors lists a Gemma 4's tensors and their shapes, but for
// rope_freqs (RopeFreqs: the global layers' proportional rotation, which
// Config.RopeFactors holds).
func gemma4Tensors(c Config) []Tensor {
	g := c.Gemma4
	ts := []Tensor{
		{Name: TokenEmbedding, Shape: []int{c.Vocab, c.Dim}},
		{Name: OutputNorm, Shape: []int{c.Dim}},
	}
	if !c.TiedEmbeddings {
		ts = append(ts, Tensor{Name: Output, Shape: []int{c.Vocab, c.Dim}})
	}
	if g.PerLayer > 0 {
		lp := c.Layers * g.PerLayer
		ts = append(ts, Tensor{Name: PerLayerTokenEmbd, Shape: []int{c.Vocab, lp}},
			Tensor{Name: PerLayerModelProj, Shape: []int{lp, c.Dim}},
			Tensor{Name: PerLayerProjNorm, Shape: []int{g.PerLayer}})
	}
	for l := range c.Layers {
		hd, f := c.LayerHeadDim(l), c.LayerFFN(l)
		q, kv := c.Heads*hd, c.LayerKVHeads(l)*hd
		ts = append(ts,
			Tensor{Name: LayerTensor(l, AttnNorm), Shape: []int{c.Dim}},
			Tensor{Name: LayerTensor(l, AttnQ), Shape: []int{q, c.Dim}},
			Tensor{Name: LayerTensor(l, AttnQNorm), Shape: []int{hd}})
		if c.KVSource(l) == l {
			ts = append(ts, Tensor{Name: LayerTensor(l, AttnK), Shape: []int{kv, c.Dim}})
			if !g.LayerVFromK(l) {
				ts = append(ts, Tensor{Name: LayerTensor(l, AttnV), Shape: []int{kv, c.Dim}})
			}
			ts = append(ts, Tensor{Name: LayerTensor(l, AttnKNorm), Shape: []int{hd}})
		}
		ts = append(ts,
			Tensor{Name: LayerTensor(l, AttnOutput), Shape: []int{c.Dim, q}},
			Tensor{Name: LayerTensor(l, AttnPostNorm), Shape: []int{c.Dim}},
			Tensor{Name: LayerTensor(l, FFNNorm), Shape: []int{c.Dim}},
			Tensor{Name: LayerTensor(l, FFNGate), Shape: []int{f, c.Dim}},
			Tensor{Name: LayerTensor(l, FFNUp), Shape: []int{f, c.Dim}},
			Tensor{Name: LayerTensor(l, FFNDown), Shape: []int{c.Dim, f}},
			Tensor{Name: LayerTensor(l, FFNPostNorm), Shape: []int{c.Dim}},
			Tensor{Name: LayerTensor(l, LayerOutScale), Shape: []int{1}})
		if m := c.MoE; m.On() {
			ts = append(ts,
				Tensor{Name: LayerTensor(l, FFNRouter), Shape: []int{m.Experts, c.Dim}},
				Tensor{Name: LayerScale(l, FFNRouter), Shape: []int{c.Dim}},
				Tensor{Name: LayerTensor(l, FFNPreNorm2), Shape: []int{c.Dim}},
				Tensor{Name: LayerTensor(l, FFNPostNorm1), Shape: []int{c.Dim}},
				Tensor{Name: LayerTensor(l, FFNPostNorm2), Shape: []int{c.Dim}},
				Tensor{Name: LayerTensor(l, FFNGateExps), Shape: []int{m.Experts, m.FFN, c.Dim}},
				Tensor{Name: LayerTensor(l, FFNUpExps), Shape: []int{m.Experts, m.FFN, c.Dim}},
				Tensor{Name: LayerTensor(l, FFNDownExps), Shape: []int{m.Experts, c.Dim, m.FFN}},
				Tensor{Name: LayerScale(l, FFNDownExps), Shape: []int{m.Experts}})
		}
		if g.PerLayer > 0 {
			ts = append(ts,
				Tensor{Name: LayerTensor(l, PerLayerInpGate), Shape: []int{g.PerLayer, c.Dim}},
				Tensor{Name: LayerTensor(l, PerLayerProj), Shape: []int{c.Dim, g.PerLayer}},
				Tensor{Name: LayerTensor(l, PerLayerPostNorm), Shape: []int{c.Dim}})
		}
	}
	return ts
}

// SplitColumns splits matrix t into n tensors of its columns in order
// (Gemma 4's per-layer token table: one [vocab, P] table a layer), and
// SplitRows into n of its rows (the per-layer projection). Each part's
// columns must be whole blocks of t's type. The parts share one read of
// t: the first part read reads it, and its bytes are let go once every
// part has been read, so that a table of gigabytes is read once, not once
// a layer.
func SplitColumns(t *Tensor, n int) ([]*Tensor, error) { return split(t, n, true) }

// SplitRows: see SplitColumns.
func SplitRows(t *Tensor, n int) ([]*Tensor, error) { return split(t, n, false) }

func split(t *Tensor, n int, cols bool) ([]*Tensor, error) {
	if len(t.Shape) != 2 || n <= 0 {
		return nil, fmt.Errorf("split tensor %s of shape %v in %d", t.Name, t.Shape, n)
	}
	rows, width := t.Shape[0], t.Shape[1]
	bs, bb := t.Type.BlockSize(), t.Type.BlockBytes()
	if bs == 0 || width%bs != 0 {
		return nil, fmt.Errorf("tensor %s: rows of %d %s values are not whole blocks", t.Name, width, t.Type)
	}
	along := rows
	if cols {
		along = width
	}
	if along%n != 0 || cols && (width/n)%bs != 0 {
		return nil, fmt.Errorf("tensor %s of shape %v does not split in %d parts of whole %s blocks", t.Name, t.Shape, n, t.Type)
	}
	sh := &sharedRead{t: t, left: n}
	row := width / bs * bb // bytes of a row
	parts := make([]*Tensor, n)
	for i := range parts {
		name := fmt.Sprintf("%s[%d]", t.Name, i)
		if cols {
			lo, hi := i*width/n/bs*bb, (i+1)*width/n/bs*bb
			parts[i] = NewTensor(name, []int{rows, width / n}, t.Type, func() ([]byte, error) {
				return sh.read(func(b []byte) []byte {
					out := make([]byte, 0, rows*(hi-lo))
					for r := range rows {
						out = append(out, b[r*row+lo:r*row+hi]...)
					}
					return out
				}, rows*row)
			})
		} else {
			lo, hi := i*rows/n*row, (i+1)*rows/n*row
			parts[i] = NewTensor(name, []int{rows / n, width}, t.Type, func() ([]byte, error) {
				return sh.read(func(b []byte) []byte { return append([]byte(nil), b[lo:hi]...) }, rows*row)
			})
		}
	}
	return parts, nil
}

// sharedRead holds a tensor's bytes while parts of it remain to be read.
type sharedRead struct {
	mu   sync.Mutex
	t    *Tensor
	raw  []byte
	left int
}

// read returns part(bytes of t), reading t if it is not held, and lets
// the bytes go after the last of the parts.
func (s *sharedRead) read(part func([]byte) []byte, size int) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.raw == nil {
		b, err := s.t.Raw()
		if err != nil {
			return nil, err
		}
		if len(b) != size {
			return nil, fmt.Errorf("tensor %s holds %d bytes, want %d", s.t.Name, len(b), size)
		}
		s.raw = b
	}
	out := part(s.raw)
	if s.left--; s.left <= 0 {
		s.raw = nil // a part read again reads t again
	}
	return out, nil
}
