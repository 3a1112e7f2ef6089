package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tessera-llm/tessera/models/tensor"
	"github.com/tessera-llm/tessera/runtime/backend"
)

// TestRowOpsTeam: the element-wise ops that share a prompt's rows among
// the team (RMSNorm, GLU of each activation, Add, Rope) give the bits of
// one worker, at row counts above and below the team's threshold.
func TestRowOpsTeam(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	const cols = 576
	rope := backend.Rope{Heads: 9, HeadDim: 64, Dim: 64, Theta: 10000}
	norm := make([]float32, cols)
	for i := range norm {
		norm[i] = float32(rng.NormFloat64())
	}
	for _, m := range []int{1, 7, 130} {
		vals := func() []float32 {
			v := make([]float32, m*cols)
			for i := range v {
				v[i] = 4 * float32(rng.NormFloat64())
			}
			return v
		}
		x, y := vals(), vals()
		var outs [2][][]float32
		for k, workers := range []int{1, 3} {
			be := New(workers)
			batch := backend.Batch{Tokens: make([]int32, m), Pos: make([]int32, m), Seq: make([]int32, m), BlockSize: 3 * m, Tables: [][]int32{{0}}}
			for i := range m {
				batch.Pos[i] = int32(3 * i)
			}
			if err := be.Begin(batch); err != nil {
				t.Fatal(err)
			}
			tensorOf := func(v []float32) *Tensor { return NewTensor(m, cols, append([]float32(nil), v...)) }
			d := tensorOf(make([]float32, m*cols))
			be.RMSNorm(d, tensorOf(x), NewWeight([]int{cols}, norm), 1e-5)
			outs[k] = append(outs[k], d.Data)
			for _, act := range []tensor.Activation{tensor.SiLU, tensor.GELUTanh, tensor.SwiGLUOAI} {
				g := tensorOf(x)
				be.GLU(g, tensorOf(y), act)
				outs[k] = append(outs[k], g.Data)
			}
			a := tensorOf(x)
			be.Add(a, tensorOf(y))
			r := tensorOf(x)
			be.Rope(r, rope)
			outs[k] = append(outs[k], a.Data, r.Data)
		}
		for op := range outs[0] {
			for i, v := range outs[0][op] {
				if w := outs[1][op][i]; math.Float32bits(v) != math.Float32bits(w) {
					t.Fatalf("%d rows, op %d: [%d] = %g on three workers, %g on one", m, op, i, w, v)
				}
			}
		}
	}
}

// TestRopeStoreTeam: RopeStore, which rotates q and k in one job of the
// team where they share their angles, gives the bits of Rope, Rope and
// StoreKV one after the other on one worker, in q, k and the cache (f32,
// f16 and int8), for ropes of one set of frequencies (pairs and halves)
// and of two.
func TestRopeStoreTeam(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	const hd, qHeads, kvHeads = 64, 9, 3
	same := backend.Rope{Heads: qHeads, HeadDim: hd, Dim: hd, Theta: 10000}
	pairs := same
	pairs.Layout = tensor.RopePairs
	for _, kt := range []backend.KVType{backend.KVF32, backend.KVF16, backend.KVInt8} {
		for _, c := range []struct {
			name   string
			rq, rk backend.Rope
		}{
			{"halves", same, backend.Rope{Heads: kvHeads, HeadDim: hd, Dim: hd, Theta: 10000}},
			{"pairs", pairs, backend.Rope{Heads: kvHeads, HeadDim: hd, Dim: hd, Theta: 10000, Layout: tensor.RopePairs}},
			{"two thetas", same, backend.Rope{Heads: kvHeads, HeadDim: hd, Dim: hd, Theta: 500000}},
		} {
			for _, m := range []int{1, 7, 130} {
				vals := func(cols int) []float32 {
					v := make([]float32, m*cols)
					for i := range v {
						v[i] = 4 * float32(rng.NormFloat64())
					}
					return v
				}
				q, k, v := vals(qHeads*hd), vals(kvHeads*hd), vals(kvHeads*hd)
				var outs [2][][]float32
				for run, workers := range []int{1, 3} {
					be := New(workers)
					const bs = 16
					batch := backend.Batch{Tokens: make([]int32, m), Pos: make([]int32, m), Seq: make([]int32, m), BlockSize: bs, Tables: [][]int32{make([]int32, (3*m+bs)/bs)}}
					for i := range m {
						batch.Pos[i] = int32(3*i + 1)
					}
					for i := range batch.Tables[0] {
						batch.Tables[0][i] = int32(i)
					}
					if err := be.Begin(batch); err != nil {
						t.Fatal(err)
					}
					kv, err := be.NewKV(backend.KVShape{Layers: 2, Blocks: len(batch.Tables[0]), BlockSize: bs, Heads: kvHeads, HeadDim: hd, Type: kt})
					if err != nil {
						t.Fatal(err)
					}
					qt := NewTensor(m, qHeads*hd, append([]float32(nil), q...))
					kt := NewTensor(m, kvHeads*hd, append([]float32(nil), k...))
					vt := NewTensor(m, kvHeads*hd, append([]float32(nil), v...))
					if run == 0 {
						be.Rope(qt, c.rq)
						be.Rope(kt, c.rk)
						be.StoreKV(kv, 1, kt, vt)
					} else {
						be.RopeStore(qt, kt, vt, kv, 1, c.rq, c.rk)
					}
					cache := kv.(*KV)
					outs[run] = [][]float32{qt.Data, kt.Data, cache.K.f32, cache.V.f32, cache.K.scale, cache.V.scale}
					for _, st := range []*KVStore{&cache.K, &cache.V} {
						var raw []float32
						for _, h := range st.f16 {
							raw = append(raw, float32(h))
						}
						for _, c := range st.i8 {
							raw = append(raw, float32(c))
						}
						outs[run] = append(outs[run], raw)
					}
				}
				for op := range outs[0] {
					for i, x := range outs[0][op] {
						if y := outs[1][op][i]; math.Float32bits(x) != math.Float32bits(y) {
							t.Fatalf("%s, %v cache, %d rows: output %d [%d] = %g by RopeStore on three workers, %g by the ops on one", c.name, kt, m, op, i, y, x)
						}
					}
				}
			}
		}
	}
}
