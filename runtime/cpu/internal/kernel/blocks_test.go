package kernel

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/tessera-llm/tessera/models/dtype"
)

// blocksMatrix makes a random rows × cols matrix of type t through the
// real quantizer, with values at several scales (the first row's tiny,
// its scales f16 subnormals).
func blocksMatrix(t testing.TB, rng *rand.Rand, typ dtype.Type, rows, cols int) *dtype.Blocks {
	x := make([]float32, rows*cols)
	for i := range x {
		x[i] = float32(rng.NormFloat64()) * float32(math.Pow(10, float64(i/97%3)-1))
		if i < cols {
			x[i] *= 1e-6
		}
	}
	raw, err := dtype.Quantize(typ, x)
	if err != nil {
		t.Fatal(err)
	}
	b, err := dtype.BlocksFromGGML(typ, raw, rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// blockWidths are awkward row widths for each type: one block, odd and
// even numbers of groups, eight-group chunks with one to seven left.
func blockWidths(typ dtype.Type) []int {
	if typ.BlockSize() == 256 {
		return []int{256, 512, 768, 2304}
	}
	return []int{32, 64, 96, 224, 256, 288, 576, 1000 / 32 * 32, 1536}
}

// TestDotBlocksValue: DotBlocks is the dot product of the dequantized
// weights with the quantized activations (d·q), to f32 rounding.
func TestDotBlocksValue(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, typ := range dtype.BlockTypes {
		for _, cols := range blockWidths(typ) {
			m := blocksMatrix(t, rng, typ, 3, cols)
			x := randomRow(rng, cols)
			var q QRow
			q.Quantize(x)
			q.SumHalves(x)
			l, _ := dtype.Layout(typ)
			for r := range m.Rows {
				c, s := m.Row(r)
				got := DotBlocks(m, r, &q)
				// value = S·c + M: S·c meets the quantized activations d·q,
				// the min the sums of x itself.
				var want, mag float64
				var cs [dtype.BlockGroup]int8
				for g := range q.Groups() {
					l.GroupCodes(c[g*l.CodeWords:(g+1)*l.CodeWords], &cs)
					lo, hi, mlo, mhi := dtype.GroupScale(typ, s, g, q.Groups())
					for i := range Group {
						sc, mn := lo, mlo
						if i >= 16 {
							sc, mn = hi, mhi
						}
						xq := float64(q.DS[2*g]) * float64(q.Codes[CodeIndex(g, q.Groups(), i)])
						if KType(typ) { // the activations of the super-block
							xq = float64(q.KD[g/8]) * float64(q.KCodes[CodeIndex(g, q.Groups(), i)])
						}
						want += float64(sc)*float64(cs[i])*xq + float64(mn)*float64(x[g*Group+i])
						mag += math.Abs(float64(sc)*float64(cs[i])*xq) + math.Abs(float64(mn)*float64(x[g*Group+i]))
					}
				}
				if math.Abs(float64(got)-want) > 1e-5*mag+1e-30 {
					t.Errorf("%v %d wide, row %d: %g, want %g (magnitude %g)", typ, cols, r, got, want, mag)
				}
			}
		}
	}
}

// TestDotBlocksMatchesTwin: every block kernel this CPU has gives
// dotBlocksGo's bits for every type on awkward widths, a row at a time and
// many rows in one call.
func TestDotBlocksMatchesTwin(t *testing.T) {
	t.Logf("kernels: %v", blocksPaths())
	withKVariants(t, testDotBlocksMatchesTwin)
}

func testDotBlocksMatchesTwin(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, typ := range dtype.BlockTypes {
		for _, cols := range blockWidths(typ) {
			m := blocksMatrix(t, rng, typ, 5, cols)
			x := randomRow(rng, cols)
			var q QRow
			q.Quantize(x)
			q.SumHalves(x)
			G, cw, sw := m.Groups(), m.Groups()*m.Layout().CodeWords, m.RowScaleWords()
			want := make([]float32, m.Rows)
			for r := range want {
				c, s := m.Row(r)
				want[r] = dotBlocksRowGo(typ, c, s, &q)
			}
			for _, path := range blocksPaths() {
				got := make([]float32, m.Rows)
				for r0, n := range map[int]int{0: m.Rows, 2: 1, 3: 2} {
					out := got[r0 : r0+n]
					done := dotBlocksRowsOn(path, typ, m.Codes[r0*cw:(r0+n)*cw], m.Scales[r0*sw:], sw, &q, G, out)
					if blocksCovered(path, typ) && done != n {
						t.Errorf("%v %d wide, %s: %d of %d rows", typ, cols, path, done, n)
					}
					for j := done; j < n; j++ {
						out[j] = want[r0+j]
					}
					for j, v := range out {
						if math.Float32bits(v) != math.Float32bits(want[r0+j]) {
							t.Fatalf("%v %d wide, %s, row %d (of %d from %d): %g, twin %g (%d bits differ)", typ, cols, path, r0+j, n, r0, v, want[r0+j],
								bits.OnesCount32(math.Float32bits(v)^math.Float32bits(want[r0+j])))
						}
					}
				}
			}
			if got := DotBlocks(m, m.Rows-1, &q); math.Float32bits(got) != math.Float32bits(want[m.Rows-1]) {
				t.Errorf("%v %d wide: DotBlocks %g, twin %g", typ, cols, got, want[m.Rows-1])
			}
		}
	}
}

// BenchmarkDotBlocks: one weight row of each type against one quantized
// activation row, 2048 wide (from cache: the arithmetic's cost), and int4's
// DotQ4 on the same width for scale.
func BenchmarkDotBlocks(b *testing.B) {
	const cols, rows = 2048, 64
	rng := rand.New(rand.NewPCG(7, 8))
	x := randomRow(rng, cols)
	var q QRow
	q.Quantize(x)
	q.SumHalves(x)
	b.Run("int4", func(b *testing.B) {
		m := int4Matrix(rng, rows, cols)
		b.SetBytes(m.Bytes())
		for b.Loop() {
			for r := range rows {
				c, s := rowOf(m, r)
				DotQ4(c, s, &q)
			}
		}
	})
	out := make([]float32, rows)
	for _, typ := range dtype.BlockTypes {
		m := blocksMatrix(b, rng, typ, rows, cols)
		b.Run(typ.String(), func(b *testing.B) {
			b.SetBytes(m.Bytes())
			for b.Loop() {
				DotBlocksRows(m, 0, &q, out)
			}
		})
	}
}

// TestDotBlocksKAgainstF32: the K quants' products (activations rounded
// per super-block of 256) stay within the activations' rounding of the
// dot product of the dequantized weights with the f32 activations: per
// input at most |w|·D/2 (D the super-block's step), plus f32 rounding;
// on widths of an odd number of super-blocks, rows not a multiple of
// anything, activations with outliers, and every kernel of this CPU.
func TestDotBlocksKAgainstF32(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, typ := range []dtype.Type{dtype.Q2_K, dtype.Q3_K, dtype.Q4_K, dtype.Q5_K, dtype.Q6_K, dtype.IQ4_XS} {
		for _, cols := range []int{256, 768, 1280, 2304} {
			const rows = 7
			m := blocksMatrix(t, rng, typ, rows, cols)
			x := randomRow(rng, cols)
			x[rng.IntN(cols)] *= 40 // an outlier sets its super-block's step
			var q QRow
			q.Quantize(x)
			q.SumHalves(x) // Q2_K's mins meet them
			w := make([]float32, cols)
			got := make([]float32, rows)
			for _, path := range blocksPaths() {
				G, cw, sw := m.Groups(), m.Groups()*m.Layout().CodeWords, m.RowScaleWords()
				done := dotBlocksRowsOn(path, typ, m.Codes, m.Scales, sw, &q, G, got)
				if blocksCovered(path, typ) && done != rows {
					t.Errorf("%v %d wide, %s: %d of %d rows", typ, cols, path, done, rows)
				}
				for j := done; j < rows; j++ {
					got[j] = dotBlocksKGo(typ, m.Codes[j*cw:(j+1)*cw], m.Scales[j*sw:(j+1)*sw], &q)
				}
				for r := range rows {
					m.DequantizeRow(r, w)
					var want, bound, mag float64
					for i, v := range w {
						want += float64(v) * float64(x[i])
						bound += math.Abs(float64(v)) * float64(q.KD[i/KBlock]) / 2
						mag += math.Abs(float64(v) * float64(x[i]))
					}
					if d := math.Abs(float64(got[r]) - want); d > bound+1e-5*mag {
						t.Errorf("%v %d wide, %s, row %d: %g, f32 dot %g: off by %g, bound %g", typ, cols, path, r, got[r], want, d, bound+1e-5*mag)
					}
				}
			}
		}
	}
}

// TestDotBlocksKPartial: a row that ends in a partial super-block (no
// GGML file has one, but Blocks can hold it) goes to the twin, which
// gives the dot product of the dequantized weights with the per-256
// activations, to f32 rounding.
func TestDotBlocksKPartial(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, typ := range []dtype.Type{dtype.Q4_K, dtype.Q5_K} {
		full := blocksMatrix(t, rng, typ, 3, 512)
		for _, cols := range []int{288, 300} { // 9 groups, 10 with a short last one
			m := &dtype.Blocks{Type: typ, Rows: full.Rows, Cols: cols}
			l, G, fcw, fsw := m.Layout(), m.Groups(), full.Groups()*full.Layout().CodeWords, full.RowScaleWords()
			cw, sw := G*l.CodeWords, m.RowScaleWords()
			for r := range m.Rows {
				m.Codes = append(m.Codes, full.Codes[r*fcw:r*fcw+cw]...)
				m.Scales = append(m.Scales, full.Scales[r*fsw:r*fsw+sw]...)
			}
			x := randomRow(rng, cols)
			var q QRow
			q.Quantize(x)
			out := make([]float32, m.Rows)
			DotBlocksRows(m, 0, &q, out)
			w := make([]float32, G*Group)
			for r := range m.Rows {
				m.DequantizeRow(r, w)
				var want, mag float64
				for i, v := range w[:cols] {
					_, _, mn, _ := dtype.GroupScale(typ, m.Scales[r*sw:(r+1)*sw], i/Group, G)
					// the min meets x itself, the rest the per-256 codes
					xq := float64(q.KD[i/KBlock]) * float64(q.KCodes[CodeIndex(i/Group, G, i%Group)])
					want += (float64(v)-float64(mn))*xq + float64(mn)*float64(x[i])
					mag += math.Abs(float64(v) * float64(x[i]))
				}
				if d := math.Abs(float64(out[r]) - want); d > 1e-5*mag {
					t.Errorf("%v %d wide, row %d: %g, want %g", typ, cols, r, out[r], want)
				}
			}
		}
	}
}

// TestDotBlocksMXFP4Exponents: MXFP4's E8M0 scales at the ends of their
// range (0 and 1 give subnormal scales, 255 the largest), which quantizing
// ordinary values never writes, give the twin's bits on every kernel.
func TestDotBlocksMXFP4Exponents(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	exps := []byte{0, 1, 2, 3, 100, 127, 128, 254, 255}
	for _, cols := range []int{32, 96, 288} {
		m := blocksMatrix(t, rng, dtype.MXFP4, 3, cols)
		G, sw := m.Groups(), m.RowScaleWords()
		for r := range m.Rows {
			for g := range G {
				w := &m.Scales[r*sw+g/4]
				sh := 8 * (g % 4)
				*w = *w&^(0xff<<sh) | uint32(exps[(r*G+g)%len(exps)])<<sh
			}
		}
		x := randomRow(rng, cols)
		var q QRow
		q.Quantize(x)
		want := make([]float32, m.Rows)
		for r := range want {
			c, s := m.Row(r)
			want[r] = dotBlocksRowGo(dtype.MXFP4, c, s, &q)
		}
		for _, path := range blocksPaths() {
			got := make([]float32, m.Rows)
			done := dotBlocksRowsOn(path, dtype.MXFP4, m.Codes, m.Scales, sw, &q, G, got)
			if blocksCovered(path, dtype.MXFP4) && done != m.Rows {
				t.Errorf("%d wide, %s: %d of %d rows", cols, path, done, m.Rows)
			}
			for r := range done {
				if math.Float32bits(got[r]) != math.Float32bits(want[r]) {
					t.Errorf("%d wide, %s, row %d: %g, twin %g", cols, path, r, got[r], want[r])
				}
			}
		}
	}
}
