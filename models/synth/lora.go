package synth

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/lora"
)

// DefaultLoRATargets are the projections a synthetic adapter adapts when no
// targets are named: all seven.
var DefaultLoRATargets = []string{"q", "k", "v", "o", "gate", "up", "down"}

// LoRA draws a random adapter of rank r for a base of config c, adapting
// the named targets (short names: q, k, v, o, gate, up, down, head and
// embed, the token embeddings) of every layer. A is uniform in ±sqrt(3/in) and B in ±sqrt(3/r)·0.5, so that
// with alpha = r each adapted projection moves by about half its own size:
// enough to change greedy tokens, as a real fine-tune does.
func LoRA(c models.Config, r int, targets []string, seed uint64) (*lora.Adapter, error) {
	if r <= 0 {
		return nil, fmt.Errorf("synth: LoRA rank %d", r)
	}
	if len(targets) == 0 {
		targets = DefaultLoRATargets
	}
	var kinds []string
	head, embed := false, false
	for _, t := range targets {
		t = strings.TrimSpace(t)
		switch t {
		case lora.HeadShort, "output":
			head = true
			continue
		case lora.EmbedShort:
			embed = true
			continue
		}
		i := slices.IndexFunc(lora.Kinds, func(k struct{ Short, GGUF, PEFT string }) bool { return k.Short == t })
		if i < 0 {
			return nil, fmt.Errorf("synth: unknown LoRA target %q (known: q, k, v, o, gate, up, down, head, embed)", t)
		}
		kinds = append(kinds, lora.Kinds[i].GGUF)
	}
	shapes := lora.TargetShapes(c)
	var names []string
	for l := range c.Layers {
		for _, k := range kinds {
			names = append(names, models.LayerTensor(l, k))
		}
	}
	if head {
		names = append(names, models.Output)
	}
	if embed {
		names = append(names, models.TokenEmbedding)
	}
	rng := rand.New(rand.NewPCG(seed, 0x10ad))
	a := &lora.Adapter{Format: "synth", Alpha: float32(r), Targets: map[string]*lora.Target{}}
	for _, name := range names {
		s := shapes[name]
		t := &lora.Target{Name: name, Rank: r, Out: s[0], In: s[1], A: make([]float32, r*s[1]), B: make([]float32, s[0]*r), Scale: 1}
		ua, ub := float32(math.Sqrt(3/float64(s[1]))), 0.5*float32(math.Sqrt(3/float64(r)))
		if name == models.TokenEmbedding {
			// Its input is a one-hot vector, not one of unit-sized
			// values: A's entries are of unit size instead.
			ua = float32(math.Sqrt(3))
		}
		for i := range t.A {
			t.A[i] = ua * (2*rng.Float32() - 1)
		}
		for i := range t.B {
			t.B[i] = ub * (2*rng.Float32() - 1)
		}
		a.Targets[name] = t
	}
	return a, nil
}
