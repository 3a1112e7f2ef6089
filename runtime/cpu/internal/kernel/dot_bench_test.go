package kernel

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tessera-llm/tessera/models/dtype"
)

// BenchmarkDotQ4 measures one row of smollm2-135m's widest input (1536)
// against 256 weight rows, one input row and four: MAC/s of the kernels.
func BenchmarkDotQ4(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	const rows, cols = 256, 1536
	m := int4Matrix(rng, rows, cols)
	var xs [4]*QRow
	for r := range xs {
		xs[r] = new(QRow)
		xs[r].Quantize(randomRow(rng, cols))
	}
	for _, path := range []struct {
		name string
		f    func(codes, scales []uint32) float32
	}{
		{"x1", func(c, s []uint32) float32 { return DotQ4(c, s, xs[0]) }},
		{"x4", func(c, s []uint32) float32 { var o [4]float32; DotQ4x4(c, s, &xs, &o); return o[0] }},
		{"go", func(c, s []uint32) float32 { return dotQ4Go(c, s, xs[0].Codes, xs[0].DS) }},
	} {
		b.Run(path.name, func(b *testing.B) {
			macs := rows * cols
			if path.name == "x4" {
				macs *= 4
			}
			var sink float32
			for b.Loop() {
				for r := range rows {
					c, s := rowOf(m, r)
					sink += path.f(c, s)
				}
			}
			b.ReportMetric(float64(macs)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
			_ = fmt.Sprint(sink)
		})
	}
}

// BenchmarkDotQ4Cold streams 60 MiB of weights, more than any cache, past
// one input row: the decode case, where memory bounds the kernel.
func BenchmarkDotQ4Cold(b *testing.B) {
	rng := rand.New(rand.NewPCG(2, 2))
	const rows, cols = 40960, 1536
	m := dtype.NewInt4(rows, cols)
	for i := range m.Codes {
		m.Codes[i] = rng.Uint32()
	}
	for i := range m.Scales {
		m.Scales[i] = dtype.PackScaleMin(float32(rng.NormFloat64())*1e-2, -float32(rng.Float64())*1e-1)
	}
	var x QRow
	x.Quantize(randomRow(rng, cols))
	var sink float32
	for b.Loop() {
		for r := range rows {
			c, s := rowOf(m, r)
			sink += DotQ4(c, s, &x)
		}
	}
	b.ReportMetric(float64(m.Bytes())*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
	b.ReportMetric(float64(rows*cols)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
	_ = fmt.Sprint(sink)
}

func BenchmarkQuantize(b *testing.B) {
	x := randomRow(rand.New(rand.NewPCG(3, 3)), 1536)
	var q QRow
	for b.Loop() {
		q.Quantize(x)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(x)), "ns/value")
}

// BenchmarkDotQ8 is BenchmarkDotQ4's row for int8 weights (f32 inputs),
// against the f32 kernel on the same row and the Go twin.
func BenchmarkDotQ8(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	const rows, cols = 256, 1536
	m := dtype.QuantizeInt8(randomRow(rng, rows*cols), rows, cols)
	x := randomRow(rng, cols)
	sums := make([]float32, m.Groups())
	GroupSums8(x, sums)
	w := m.Dequantize()
	G := m.Groups()
	for _, path := range []struct {
		name string
		f    func(r int) float32
	}{
		{"x1", func(r int) float32 { return DotQ8(m.Codes[4*r*G:4*(r+1)*G], m.Scales[r*G:(r+1)*G], x, sums) }},
		{"go", func(r int) float32 { return dotQ8Go(m.Codes[4*r*G:4*(r+1)*G], m.Scales[r*G:(r+1)*G], x, sums) }},
		{"f32", func(r int) float32 { return DotF32(w[r*cols:(r+1)*cols], x) }},
	} {
		b.Run(path.name, func(b *testing.B) {
			var sink float32
			for b.Loop() {
				for r := range rows {
					sink += path.f(r)
				}
			}
			b.ReportMetric(float64(rows*cols)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
			_ = fmt.Sprint(sink)
		})
	}
}

// BenchmarkAxpyRows times AxpyRows and AxpyRows2 on the shapes that use
// them most: a LoRA expand panel (64 columns, rank rows, packed) and an
// attention value run (64-wide head, 256 positions).
func BenchmarkAxpyRows(b *testing.B) {
	rng := rand.New(rand.NewPCG(4, 4))
	for _, s := range []struct {
		name        string
		width, rows int
	}{{"panel-r8", 64, 8}, {"panel-r64", 64, 64}, {"values-256", 64, 256}} {
		x := normalRow(rng, s.rows*s.width)
		a0, a1 := normalRow(rng, s.rows), normalRow(rng, s.rows)
		d0, d1 := make([]float32, s.width), make([]float32, s.width)
		b.Run(s.name+"/1", func(b *testing.B) {
			for b.Loop() {
				AxpyRows(d0, a0, x, s.width)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(s.width*s.rows), "ns/MAC")
		})
		b.Run(s.name+"/2", func(b *testing.B) {
			for b.Loop() {
				AxpyRows2(d0, d1, a0, a1, x, s.width)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(2*s.width*s.rows), "ns/MAC")
		})
	}
}

// normalRow is cols standard normal values: what the float kernels'
// benchmarks take, where randomRow's subnormals (one in ten, which the
// twin tests want) would time the CPU's assists for them, not the kernels
// (BenchmarkDotF32Block/tile: 0.85 GFLOP/s with them, about 100 without).
func normalRow(rng *rand.Rand, cols int) []float32 {
	x := make([]float32, cols)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

// BenchmarkDotF32Block times the f32 tile kernels on data in cache: four
// weight rows against a block of input rows (a SigLIP tower's width and
// matMul's row block for it), DotF32Rows for the same products beside
// it; and a 72-value head's scores of sixteen keys for 32 query rows.
func BenchmarkDotF32Block(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	const k, m, nw = 1152, 48, 4
	w, x, out := normalRow(rng, nw*k), normalRow(rng, m*k), make([]float32, m*nw)
	flops := float64(2 * k * m * nw)
	b.Run("tile", func(b *testing.B) {
		for b.Loop() {
			DotF32Block(out, nw, w, nw, x, k, m)
		}
		b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
	b.Run("rows", func(b *testing.B) {
		for b.Loop() {
			for j := range nw {
				DotF32Rows(out[j:], nw, w[j*k:(j+1)*k], x, m)
			}
		}
		b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
	const hd, rows = 72, 32
	keys, q, scores := normalRow(rng, KeysTile*hd), normalRow(rng, rows*hd), make([]float32, rows*KeysTile)
	kt := make([]float32, KeysTile*hd)
	TransposeKeys(kt, keys, 0, KeysTile, hd)
	b.Run("keys", func(b *testing.B) {
		for b.Loop() {
			DotF32Keys(scores, KeysTile, kt, KeysTile, hd, q, hd, rows)
		}
		b.ReportMetric(float64(2*hd*KeysTile*rows)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
	b.Run("keys-rows", func(b *testing.B) {
		for b.Loop() {
			for t := range KeysTile {
				DotF32Rows(scores[t:], KeysTile, keys[t*hd:(t+1)*hd], q, rows)
			}
		}
		b.ReportMetric(float64(2*hd*KeysTile*rows)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
}
