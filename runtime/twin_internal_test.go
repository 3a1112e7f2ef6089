package runtime

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/runtime/cpu"
)

// TestTwinKeepsWhatPicksKernels: for every decoder shape synth knows, the
// self-check's twin keeps the head width, the rotation, the residues of
// its widths that choose kernels, one layer of each kind and every
// matrix's type, and runs on the CPU, in milliseconds, whatever block
// type the real model stores its matrices in.
func TestTwinKeepsWhatPicksKernels(t *testing.T) {
	for _, name := range synth.Names() {
		s, err := synth.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		c := s.Config
		if c.Encoder.On || c.Pooling != models.PoolNone {
			continue
		}
		types := []dtype.Type{dtype.Q4_K}
		if name == "qwen3-0.6b" { // every kind of block on one shape
			types = []dtype.Type{dtype.F16, dtype.Q4_0, dtype.Q4_K, dtype.IQ4_XS, dtype.Q6_K, dtype.MXFP4}
		}
		for _, typ := range types {
			t.Run(name+"/"+typ.String(), func(t *testing.T) {
				// A stand-in of the real model: its config, and the names
				// of the twin's tensors in typ (2-D) or f32.
				plain, err := newTwin(&models.Model{Config: c, Tensors: map[string]*models.Tensor{}}, WeightStorage{}, false)
				if err != nil {
					t.Fatal(err)
				}
				_, layers := twinConfig(c)
				real := &models.Model{Config: c, Tensors: map[string]*models.Tensor{}}
				for n, tt := range plain.model.Tensors {
					rt := dtype.F32
					if len(tt.Shape) >= 2 && tt.Shape[len(tt.Shape)-1]%256 == 0 {
						rt = typ
					}
					if s := layerName.FindStringSubmatch(n); s != nil {
						l, _ := strconv.Atoi(s[1])
						n = fmt.Sprintf("blk.%d.%s", layers[l], s[2])
					}
					real.Tensors[n] = models.NewTensor(n, tt.Shape, rt, nil)
				}
				tw, err := newTwin(real, WeightStorage{}, true)
				if err != nil {
					t.Fatal(err)
				}
				if (tw.lora == nil) != (c.Gemma4 != nil || c.Linear.On()) {
					t.Errorf("twin adapter %v", tw.lora != nil)
				}
				tc := tw.model.Config
				if tc.HeadDim != c.HeadDim || tc.RopeDim != c.RopeDim || tc.Rope != c.Rope || tc.Arch != c.Arch {
					t.Errorf("twin head %d rope %d %v %s, want %d %d %v %s", tc.HeadDim, tc.RopeDim, tc.Rope, tc.Arch, c.HeadDim, c.RopeDim, c.Rope, c.Arch)
				}
				for _, w := range []struct {
					what      string
					got, want int
				}{{"dim", tc.Dim, c.Dim}, {"ffn", tc.FFN, c.FFN}, {"vocab", tc.Vocab, c.Vocab}, {"q width", tc.Heads * tc.HeadDim, c.Heads * c.HeadDim}} {
					if w.got%256 != w.want%256 && w.what != "q width" || widthAlign(w.got) < widthAlign(w.want) {
						t.Errorf("twin %s %d, real %d: not the same blocks", w.what, w.got, w.want)
					}
				}
				if (tc.Heads == tc.KVHeads) != (c.Heads == c.KVHeads) {
					t.Errorf("twin heads %d/%d, real %d/%d", tc.Heads, tc.KVHeads, c.Heads, c.KVHeads)
				}
				kinds := func(c models.Config, n int) map[[4]bool]bool {
					k := map[[4]bool]bool{}
					for l := range n {
						k[[4]bool{c.LayerSliding(l), l < len(c.NoRope) && c.NoRope[l], c.KVSource(l) != l, c.LayerLinear(l)}] = true
					}
					return k
				}
				if len(kinds(tc, tc.Layers)) != len(kinds(c, c.Layers)) || tc.Layers > 4 {
					t.Errorf("twin of %d layers holds %d kinds of layer, the model %d", tc.Layers, len(kinds(tc, tc.Layers)), len(kinds(c, c.Layers)))
				}
				for n, tt := range tw.model.Tensors {
					if s := layerName.FindStringSubmatch(n); s != nil {
						l, _ := strconv.Atoi(s[1])
						n = fmt.Sprintf("blk.%d.%s", layers[l], s[2])
					}
					if want := real.Tensors[n].Type; tt.Type != want {
						t.Errorf("twin %s is %v, the model's %v", n, tt.Type, want)
					}
				}
				be := cpu.New(1)
				defer be.Close()
				steps, err := runTwin(context.Background(), be, tw, 0)
				if err != nil {
					t.Fatal(err)
				}
				for _, st := range steps {
					for _, v := range st.logits {
						if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
							t.Fatalf("%s: logit %v", st.name, v)
						}
					}
				}
			})
		}
	}
}
