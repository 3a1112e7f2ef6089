package runtime

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/lora"
	"github.com/tessera-llm/tessera/models/synth"
)

// twin is the self-check's small stand-in for a model: the model's
// architecture, flags and tensor types at twinConfig's widths, with
// random weights (synth's, of a fixed seed), built in memory. Running it
// takes the kernels the model takes: which kernel a product runs depends
// on its weights' storage, on whether its width is a multiple of 4 or of
// the storage's blocks, on the head width and on the kinds of layers, all
// of which the twin keeps; not on how wide the matrices are beyond that.
type twin struct {
	model *models.Model
	ws    WeightStorage // the model's storage, by the twin's names
	// lora is a random rank-8 adapter of every projection, which the
	// twin's first sequence runs with, for a model that serves adapters
	// unmerged; nil otherwise.
	lora *lora.Adapter
}

// twinLoRARank is the rank of the twin's adapter.
const twinLoRARank = 8

// newTwin builds the twin of m, whose weights ws stores, with an adapter
// where withLoRA.
func newTwin(m *models.Model, ws WeightStorage, withLoRA bool) (*twin, error) {
	c := m.Config
	if c.Encoder.On || c.Pooling != models.PoolNone {
		return nil, fmt.Errorf("no twin of an embedding model (%s)", c.Arch)
	}
	tc, layers := twinConfig(c)
	// realName is the model's tensor that twin tensor name stands for:
	// twin layer l is the model's layer layers[l].
	realName := func(name string) string {
		if s := layerName.FindStringSubmatch(name); s != nil {
			l, _ := strconv.Atoi(s[1])
			name = fmt.Sprintf("blk.%d.%s", layers[l], s[2])
		}
		return name
	}
	typeOf := func(name string) (dtype.Type, bool) {
		t, ok := m.Tensors[realName(name)]
		if !ok { // Phi-3's fused q, k and v, which the model splits at load
			t, ok = m.Tensors[realName(fusedQKV.ReplaceAllString(name, ".attn_q."))]
		}
		if !ok { // Gemma 4's fused gate and up experts, likewise
			t, ok = m.Tensors[realName(fusedGateUpExps.ReplaceAllString(name, "."+models.FFNGateExps+"."))]
		}
		if !ok {
			return 0, false
		}
		if _, err := dtype.Quantize(t.Type, nil); err != nil {
			return 0, false // a type no quantizer writes: f32 weights instead
		}
		return t.Type, true
	}
	written := tc
	if written.Arch == "mistral" { // GGUF has no Mistral; its tensors are Llama's
		written.Arch = "llama"
	}
	var buf bytes.Buffer
	if err := synth.WriteTyped(&buf, synth.Shape{Name: "self-check twin", Config: written}, dtype.F32, typeOf, 46); err != nil {
		return nil, fmt.Errorf("no twin of %s: %w", c.Arch, err)
	}
	tm, err := models.OpenReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "the self-check twin of "+m.Path)
	if err != nil {
		return nil, fmt.Errorf("no twin of %s: %w", c.Arch, err)
	}
	tm.Config = tc
	tws := ws
	if ws.Int8 != nil {
		tws.Int8 = map[string]bool{}
		for name := range tm.Tensors {
			tws.Int8[name] = ws.Int8[realName(name)]
		}
	}
	tw := &twin{model: tm, ws: tws}
	// Gemma 4's shared layers have no k and v to adapt, Qwen3.5's linear
	// ones no q, k, v or o: their adapters are not checked.
	if withLoRA && c.Gemma4 == nil && !c.Linear.On() {
		targets := []string{"q", "k", "v", "o"}
		if !c.MoE.On() { // the experts take no adapters
			targets = append(targets, "gate", "up", "down")
		}
		if tw.lora, err = synth.LoRA(tc, twinLoRARank, targets, 47); err != nil {
			return nil, fmt.Errorf("no twin of %s's adapters: %w", c.Arch, err)
		}
	}
	return tw, nil
}

var (
	layerName = regexp.MustCompile(`^blk\.(\d+)\.(.*)$`)
	fusedQKV  = regexp.MustCompile(`\.attn_qkv\.`)

	fusedGateUpExps = regexp.MustCompile(`\.` + models.FFNGateUpExps + `\.`)
)

// twinConfig shrinks c to at most 511 columns and to one layer of each
// kind c has (sliding or global, rotating or not, with keys and values of
// its own or another's, linear attention or not; at least two, so that a layer's output reaches
// the next one's norm), keeping what chooses kernels. layers[l] is the model's layer that twin layer l stands for.
func twinConfig(c models.Config) (t models.Config, layers []int) {
	t = c
	t.Dim = twinWidth(c.Dim)
	t.FFN = twinWidth(c.FFN)
	t.Vocab = twinWidth(c.Vocab)
	t.Context = 64
	// Heads: grouped or not as c's are, and q as wide as a multiple of
	// the blocks c's is (the attention output's rows are q's width).
	t.KVHeads = min(c.KVHeads, 2)
	t.Heads = t.KVHeads
	if c.Heads > c.KVHeads {
		t.KVHeads, t.Heads = 1, 2
	}
	for align := widthAlign(c.Heads * c.HeadDim); (t.Heads*c.HeadDim)%align != 0 && t.Heads < c.Heads; {
		t.Heads += t.KVHeads
	}
	if c.MoE.On() {
		t.MoE.Experts = min(c.MoE.Experts, 4)
		t.MoE.Used = min(c.MoE.Used, t.MoE.Experts)
		t.MoE.FFN = twinWidth(c.MoE.FFN)
		if c.MoE.SharedFFN > 0 {
			t.MoE.SharedFFN = twinWidth(c.MoE.SharedFFN)
		}
	}
	if c.SlidingWindow > 0 {
		t.SlidingWindow = min(c.SlidingWindow, 4) // shorter than the twin's sequences
	}
	kind := func(l int) [4]bool {
		shared := c.Gemma4 != nil && l >= c.Layers-c.Gemma4.SharedKV
		return [4]bool{l < len(c.Sliding) && c.Sliding[l], l < len(c.NoRope) && c.NoRope[l], shared, c.LayerLinear(l)}
	}
	seen := map[[4]bool]bool{}
	for l := range c.Layers {
		if !seen[kind(l)] {
			seen[kind(l)] = true
			layers = append(layers, l)
		}
	}
	if len(layers) == 1 && c.Layers > 1 {
		layers = append(layers, 1)
	}
	t.Layers = len(layers)
	t.Sliding, t.NoRope, t.Linear.Layers = nil, nil, nil
	for _, l := range layers {
		if c.Sliding != nil {
			t.Sliding = append(t.Sliding, c.Sliding[l])
		}
		if c.NoRope != nil {
			t.NoRope = append(t.NoRope, c.NoRope[l])
		}
		if c.Linear.On() {
			t.Linear.Layers = append(t.Linear.Layers, c.Linear.Layers[l])
		}
	}
	if c.Linear.On() { // Qwen3.5's linear attention: value heads grouped on key heads as c's
		t.Linear.KHeads, t.Linear.VHeads = 1, min(2, c.Linear.VHeads/c.Linear.KHeads)
	}
	if c.Gemma4 != nil {
		g := *c.Gemma4
		g.FFNs, g.SharedKV, g.VFromK, t.FFN = nil, 0, nil, 0
		for _, l := range layers {
			g.FFNs = append(g.FFNs, twinWidth(c.LayerFFN(l)))
			if c.Gemma4.VFromK != nil {
				g.VFromK = append(g.VFromK, c.Gemma4.LayerVFromK(l))
			}
			t.FFN = max(t.FFN, g.FFNs[len(g.FFNs)-1])
			if kind(l)[2] {
				g.SharedKV++ // the shared layers come last, after a sliding and a global one
			}
		}
		if g.LocalKVHeads < c.Heads {
			g.LocalKVHeads = 1
		} else {
			g.LocalKVHeads = t.Heads
		}
		g.PerLayer = twinWidth(g.PerLayer)
		t.Gemma4 = &g
	}
	return t, layers
}

// twinWidth is d if it is under 512, else 256 and d's residue mod 256:
// the same number of values past the last whole super-block (of K-quants
// and IQ4_XS), and so of values past the last whole block of 32 and of 4,
// which is what chooses a product's kernel and storage.
func twinWidth(d int) int {
	if d < 512 {
		return d
	}
	return 256 + d%256
}

// widthAlign is the largest of 256, 32 and 1 that divides d: the blocks
// a row of d values can be stored in.
func widthAlign(d int) int {
	for _, a := range []int{256, 32} {
		if d%a == 0 {
			return a
		}
	}
	return 1
}
