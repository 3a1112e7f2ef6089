package cpu_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/cpu"
)

// TestQuantizeKV8 checks the int8 cache's rounding on heads of awkward
// lengths: codes stay in -127..127, the largest magnitude maps to ±127,
// every value is within half a step of scale·code, and a head of zeros
// (or of one value) is exact.
func TestQuantizeKV8(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name string
		x    []float32
	}{
		{"zeros", make([]float32, 8)},
		{"one", []float32{-3.5}},
		{"tie", []float32{127, 0.5, -0.5, 1.5}}, // scale 1: ties round to even
	} {
		codes := make([]int8, len(tc.x))
		scale := cpu.QuantizeKV8(codes, tc.x)
		for i, v := range tc.x {
			if got := scale * float32(codes[i]); tc.name != "tie" && got != v {
				t.Errorf("%s: value %d is %g, stored %g", tc.name, i, v, got)
			}
		}
		if tc.name == "tie" && fmt.Sprint(codes) != "[127 0 0 2]" {
			t.Errorf("ties: codes %v, want [127 0 0 2]", codes)
		}
	}
	for _, n := range []int{1, 3, 7, 8, 13, 64, 96, 128, 256} {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * math.Pow(10, rng.Float64()*4-2))
		}
		codes := make([]int8, n)
		scale := cpu.QuantizeKV8(codes, x)
		var amax float32
		top := false
		for i, v := range x {
			amax = max(amax, float32(math.Abs(float64(v))))
			if codes[i] < -127 {
				t.Fatalf("n=%d: code %d", n, codes[i])
			}
			if e := math.Abs(float64(v - scale*float32(codes[i]))); e > 0.5*float64(scale)*(1+1e-5) {
				t.Errorf("n=%d: value %g stored as %d·%g, off by %g (more than half a step)", n, v, codes[i], scale, e)
			}
			top = top || codes[i] == 127 || codes[i] == -127
		}
		if scale != amax/127 || !top {
			t.Errorf("n=%d: scale %g for a largest magnitude %g; ±127 used: %v", n, scale, amax, top)
		}
	}
}

// TestKVHalf: the f16 cache rounds to the nearest half and clamps what
// f16 cannot hold to its largest finite value rather than to Inf.
func TestKVHalf(t *testing.T) {
	for _, tc := range []struct{ in, want float32 }{
		{1, 1}, {0.1, dtype.HalfValue(dtype.HalfBits(0.1))}, {65504, 65504}, {1e6, 65504}, {-1e30, -65504}, {6e-8, 5.9604645e-08},
	} {
		if got := dtype.HalfValue(cpu.KVHalf(tc.in)); got != tc.want {
			t.Errorf("KVHalf(%g) = %g, want %g", tc.in, got, tc.want)
		}
	}
}

// TestKVTypesAttend attends over the same keys and values stored in each
// cache type and bounds the difference from the f32 cache: what each type
// costs, and proof that the narrower ones are in use (they differ).
// Blocks of 5 slots, a GQA group of 3 and head dim 12.
func TestKVTypesAttend(t *testing.T) {
	const heads, kvHeads, hd, rows = 6, 2, 12, 23
	rng := rand.New(rand.NewPCG(3, 4))
	random := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		return x
	}
	q, k, v := random(rows*heads*hd), random(rows*kvHeads*hd), random(rows*kvHeads*hd)
	batch := backend.Batch{BlockSize: 5, Tables: [][]int32{{4, 0, 2, 1, 3}}}
	for i := range rows {
		batch.Tokens, batch.Pos, batch.Seq = append(batch.Tokens, 0), append(batch.Pos, int32(i)), append(batch.Seq, 0)
	}
	a := backend.Attention{Heads: heads, KVHeads: kvHeads, HeadDim: hd, Scale: 1 / float32(math.Sqrt(hd))}
	out := map[backend.KVType][]float32{}
	for _, kt := range []backend.KVType{backend.KVF32, backend.KVF16, backend.KVInt8} {
		b := cpu.New(1)
		kv, err := b.NewKV(backend.KVShape{Layers: 2, Blocks: 5, BlockSize: 5, Heads: kvHeads, HeadDim: hd, Type: kt})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Begin(batch); err != nil {
			t.Fatal(err)
		}
		dst := cpu.NewTensor(rows, heads*hd, make([]float32, rows*heads*hd))
		b.StoreKV(kv, 1, cpu.NewTensor(rows, kvHeads*hd, k), cpu.NewTensor(rows, kvHeads*hd, v))
		b.CopyBlock(kv, 2, 2) // a copy onto itself changes nothing
		b.Attend(dst, cpu.NewTensor(rows, heads*hd, q), kv, 1, a)
		out[kt] = dst.Data
	}
	for kt, bound := range map[backend.KVType]float64{backend.KVF16: 2e-3, backend.KVInt8: 2e-2} {
		var worst float64
		for i, want := range out[backend.KVF32] {
			worst = max(worst, math.Abs(float64(out[kt][i]-want)))
		}
		t.Logf("%v cache: largest difference from f32 %.2g", kt, worst)
		if worst > bound || worst == 0 {
			t.Errorf("%v cache: outputs differ from the f32 cache's by up to %g, want (0, %g]", kt, worst, bound)
		}
	}
}

// BenchmarkAttendKV times one decode row's attention over 2,048 cached
// positions (32 heads over 8 kv heads of 64, SmolLM2-like) in each cache
// type, on one goroutine.
func BenchmarkAttendKV(b *testing.B) {
	const heads, kvHeads, hd, ctx, bs = 32, 8, 64, 2048, 16
	for _, kt := range []backend.KVType{backend.KVF32, backend.KVF16, backend.KVInt8} {
		b.Run(kt.String(), func(b *testing.B) {
			be := cpu.New(1)
			kv, err := be.NewKV(backend.KVShape{Layers: 1, Blocks: ctx / bs, BlockSize: bs, Heads: kvHeads, HeadDim: hd, Type: kt})
			if err != nil {
				b.Fatal(err)
			}
			table := make([]int32, ctx/bs)
			for i := range table {
				table[i] = int32(i)
			}
			rng := rand.New(rand.NewPCG(5, 6))
			x := make([]float32, 64*kvHeads*hd)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			kt := cpu.NewTensor(64, kvHeads*hd, x)
			for p0 := 0; p0 < ctx; p0 += 64 { // fill the cache, 64 positions a step
				batch := backend.Batch{BlockSize: bs, Tables: [][]int32{table}}
				for i := range 64 {
					batch.Tokens, batch.Pos, batch.Seq = append(batch.Tokens, 0), append(batch.Pos, int32(p0+i)), append(batch.Seq, 0)
				}
				if err := be.Begin(batch); err != nil {
					b.Fatal(err)
				}
				be.StoreKV(kv, 0, kt, kt)
			}
			if err := be.Begin(backend.Batch{BlockSize: bs, Tables: [][]int32{table}, Tokens: []int32{0}, Pos: []int32{ctx - 1}, Seq: []int32{0}}); err != nil {
				b.Fatal(err)
			}
			q := cpu.NewTensor(1, heads*hd, x[:heads*hd])
			out := cpu.NewTensor(1, heads*hd, make([]float32, heads*hd))
			a := backend.Attention{Heads: heads, KVHeads: kvHeads, HeadDim: hd, Scale: 0.125}
			b.ResetTimer()
			for range b.N {
				be.Attend(out, q, kv, 0, a)
			}
		})
	}
}
