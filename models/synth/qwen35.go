package synth

import (
	"math"
	"slices"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/gguf"
)

// Qwen3.5 (qwen35, qwen35moe): three Gated DeltaNet layers to each full
// attention layer, at the published configs of the small dense models and
// at tiny shapes for tests (value heads twice the key heads, so that the
// head mapping is exercised, and two full-attention layers).
var qwen35Shapes = []Shape{
	// Qwen/Qwen3.5-0.8B and -2B (text part): head_dim 256 with a quarter
	// rotated, 16 key and 16 value heads of 128 in the linear layers.
	{Name: "qwen3.5-0.8b", Config: qwen35(models.Config{Arch: "qwen35", Dim: 1024, FFN: 3584, Layers: 24, Heads: 8, KVHeads: 2, HeadDim: 256,
		Vocab: 248320, Context: 262144, NormEps: 1e-6, RopeTheta: 10000000, RopeDim: 64, TiedEmbeddings: true}, 4, 16, 16, 128)},
	{Name: "qwen3.5-2b", Config: qwen35(models.Config{Arch: "qwen35", Dim: 2048, FFN: 6144, Layers: 24, Heads: 8, KVHeads: 2, HeadDim: 256,
		Vocab: 248320, Context: 262144, NormEps: 1e-6, RopeTheta: 10000000, RopeDim: 64, TiedEmbeddings: true}, 4, 16, 16, 128)},
	{Name: "tiny-qwen35", Config: qwen35(models.Config{Arch: "qwen35", Dim: 64, FFN: 96, Layers: 8, Heads: 4, KVHeads: 2, HeadDim: 32,
		Vocab: 300, Context: 256, NormEps: 1e-6, RopeTheta: 10000000, RopeDim: 8, TiedEmbeddings: true}, 4, 2, 4, 16)},
	{Name: "tiny-qwen35moe", Config: qwen35(models.Config{Arch: "qwen35moe", Dim: 64, FFN: 96, Layers: 4, Heads: 4, KVHeads: 2, HeadDim: 32,
		Vocab: 300, Context: 256, NormEps: 1e-6, RopeTheta: 10000000, RopeDim: 8,
		MoE: models.MoEConfig{Experts: 4, Used: 2, FFN: 32, SharedFFN: 48, NormTopK: true}}, 4, 2, 4, 16)},
}

func init() { shapes = append(shapes, qwen35Shapes...) }

// qwen35 gives c Qwen3.5's layers: every interval-th full attention (q/k
// norms, output gate, NeoX rotation of RopeDim), the others Gated DeltaNet
// with kHeads key and vHeads value heads of headDim and a 4-tap
// convolution.
func qwen35(c models.Config, interval, kHeads, vHeads, headDim int) models.Config {
	c.Rope, c.QKNorm, c.AttnGate = models.RopeHalves, true, true
	c.Linear = models.LinearConfig{Layers: make([]bool, c.Layers), Conv: 4, KHeads: kHeads, VHeads: vHeads, HeadDim: headDim}
	for l := range c.Layers {
		c.Linear.Layers[l] = (l+1)%interval != 0
	}
	return c
}

// qwen35Interval is the period of full-attention layers in c.
func qwen35Interval(c models.Config) int {
	for l, lin := range c.Linear.Layers {
		if !lin {
			return l + 1
		}
	}
	return c.Layers + 1
}

// qwen35Metadata is the GGUF metadata of Qwen3.5's layers, under
// llama.cpp's keys; the M-RoPE sections split the rotated pairs in three
// (for text every section turns by the token's position).
func qwen35Metadata(c models.Config) []gguf.KV {
	if !c.Linear.On() {
		return nil
	}
	a, lc := c.Arch+".", c.Linear
	u := func(v int) gguf.Value { return gguf.Uint32Value(uint32(v)) }
	pairs := c.RopeDim / 2
	sections := []int32{int32(pairs - 2*(pairs/3)), int32(pairs / 3), int32(pairs / 3), 0}
	return []gguf.KV{
		{Key: a + "ssm.conv_kernel", Value: u(lc.Conv)},
		{Key: a + "ssm.state_size", Value: u(lc.HeadDim)},
		{Key: a + "ssm.group_count", Value: u(lc.KHeads)},
		{Key: a + "ssm.time_step_rank", Value: u(lc.VHeads)},
		{Key: a + "ssm.inner_size", Value: u(lc.Inner())},
		{Key: a + "full_attention_interval", Value: u(qwen35Interval(c))},
		{Key: a + "rope.dimension_sections", Value: gguf.ArrayValue(sections)},
	}
}

// qwen35Writer stores Qwen3.5's tensors as llama.cpp's files do: a full
// attention layer's q and gate rows interleaved head by head in attn_q,
// the norm before the feed-forward as post_attention_norm, and A (ssm_a)
// negative, -exp(A_log) (here in -(0.1..0.5), decays of a useful range).
type qwen35Writer struct {
	put     func(name string, shape []int, vals []float32) error
	c       models.Config
	pending map[string][]float32 // a layer's q or gate, waiting for the other
}

func (w *qwen35Writer) tensor(name string, shape []int, vals []float32) error {
	var l int
	var kind string
	if n, _ := sscanLayer(name, &l, &kind); n != 2 {
		return w.put(name, shape, vals)
	}
	switch kind {
	case models.AttnQ + ".weight", models.AttnQGate + ".weight":
		// Whichever comes first waits for the other.
		if w.pending == nil {
			w.pending = map[string][]float32{}
		}
		other := models.LayerTensor(l, models.AttnQGate)
		if kind == models.AttnQGate+".weight" {
			other = models.LayerTensor(l, models.AttnQ)
		}
		got, ok := w.pending[other]
		if !ok {
			w.pending[name] = vals
			return nil
		}
		delete(w.pending, other)
		q, gate := vals, got
		if kind == models.AttnQGate+".weight" {
			q, gate = got, vals
		}
		hd, in := w.c.HeadDim, shape[1]
		both := make([]float32, 0, 2*len(q))
		for h := range w.c.Heads {
			both = append(both, q[h*hd*in:(h+1)*hd*in]...)
			both = append(both, gate[h*hd*in:(h+1)*hd*in]...)
		}
		return w.put(models.LayerTensor(l, models.AttnQ), []int{2 * shape[0], in}, both)
	case models.FFNNorm + ".weight":
		return w.put(models.LayerTensor(l, models.AttnPostNorm), shape, vals)
	case models.LinA:
		neg := make([]float32, len(vals))
		for i, v := range vals { // vals are 1 ± 0.05
			neg[i] = -(0.1 + float32(4*(v-0.95)))
		}
		return w.put(name, shape, neg)
	}
	return w.put(name, shape, vals)
}

// qwen35HFTensor turns a tensor of Qwen3.5's GGUF (as qwen35Writer hands
// it on) into the folder's, undoing what llama.cpp's converter does
// (models/hf_qwen35.go): the norm before the feed-forward named as
// post_attention_layernorm is, A_log = log(−ssm_a), conv1d [C, 1, K], and
// with fewer key than value heads the value heads grouped by the key head
// they read (the folder's head g·V/K + i is the GGUF's head i·K + g).
func qwen35HFTensor(c models.Config, name string, shape []int, vals []float32) (string, []int, []float32) {
	var l int
	var kind string
	if n, _ := sscanLayer(name, &l, &kind); n != 2 {
		return name, shape, vals
	}
	lc := c.Linear
	d, qk := lc.HeadDim, 2*lc.KHeads*lc.HeadDim
	// grouped reorders the value heads: per rows a head from row from on,
	// or (cols) per columns a head in every row.
	grouped := func(v []float32, from, per, rowLen int, cols bool) []float32 {
		if lc.KHeads == lc.VHeads {
			return v
		}
		out := slices.Clone(v)
		r := lc.VHeads / lc.KHeads
		unit, stride, n := per*rowLen, 0, 1
		if cols {
			unit, stride, n = per, rowLen, len(v)/rowLen
		}
		for row := range n {
			base := row*stride + from*rowLen
			for j := range lc.VHeads {
				src := (j%r)*lc.KHeads + j/r
				copy(out[base+j*unit:base+(j+1)*unit], v[base+src*unit:base+(src+1)*unit])
			}
		}
		return out
	}
	in := shape[len(shape)-1]
	switch kind {
	case models.AttnPostNorm + ".weight":
		return models.LayerTensor(l, models.FFNNorm), shape, vals
	case models.LinA:
		logs := make([]float32, len(vals))
		for i, v := range vals {
			logs[i] = float32(math.Log(float64(-v)))
		}
		return name, shape, grouped(logs, 0, 1, 1, false)
	case models.LinDT + ".bias":
		return name, shape, grouped(vals, 0, 1, 1, false)
	case models.LinQKV + ".weight":
		return name, shape, grouped(vals, qk, d, in, false)
	case models.LinGate + ".weight":
		return name, shape, grouped(vals, 0, d, in, false)
	case models.LinBeta + ".weight", models.LinAlpha + ".weight":
		return name, shape, grouped(vals, 0, 1, in, false)
	case models.LinConv + ".weight":
		return name, []int{shape[0], 1, shape[1]}, grouped(vals, qk, d, in, false)
	case models.LinOut + ".weight":
		return name, shape, grouped(vals, 0, d, in, true)
	}
	return name, shape, vals
}
