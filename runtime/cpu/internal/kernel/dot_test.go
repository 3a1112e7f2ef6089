package kernel

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tessera-llm/tessera/models/dtype"
)

// int4Row makes a random rows × cols Int4 matrix through the real
// quantizer, with values at several scales (and some zero groups).
func int4Matrix(rng *rand.Rand, rows, cols int) *dtype.Int4 {
	x := make([]float32, rows*cols)
	for i := range x {
		x[i] = float32(rng.NormFloat64()) * float32(math.Pow(10, float64(i/97%5)-3))
	}
	return dtype.QuantizeInt4(x, rows, cols)
}

func randomRow(rng *rand.Rand, cols int) []float32 {
	x := make([]float32, cols)
	for i := range x {
		switch rng.IntN(10) {
		case 0:
			x[i] = 0
		case 1:
			x[i] = float32(rng.NormFloat64()) * 1e4
		case 2:
			x[i] = float32(rng.NormFloat64()) * 1e-40 // subnormal
		default:
			x[i] = float32(rng.NormFloat64())
		}
	}
	return x
}

// rowOf returns the codes and scales of row r.
func rowOf(m *dtype.Int4, r int) ([]uint32, []uint32) {
	g := m.Groups()
	return m.Codes[4*r*g : 4*(r+1)*g], m.Scales[r*g : (r+1)*g]
}

var shapes = []int{1, 7, 31, 32, 33, 64, 95, 96, 288, 576, 1000, 1536}

// TestDotQ4MatchesTwin: every int4 kernel this CPU has gives the Go twin's
// bits on awkward lengths (one value, short last groups, odd and even
// numbers of groups), one row and four.
func TestDotQ4MatchesTwin(t *testing.T) {
	type path struct {
		name string
		one  func(codes, scales []uint32, x *QRow) float32
		four func(codes, scales []uint32, xs *[4]*QRow, out *[4]float32)
	}
	var paths []path
	if hasAVX2 {
		paths = append(paths, path{"avx2", func(c, s []uint32, x *QRow) float32 {
			return dotQ4AVX2(&c[0], &s[0], &x.Codes[0], &x.DS[0], len(s))
		}, nil})
	}
	if hasAVX512 {
		paths = append(paths, path{"avx512", func(c, s []uint32, x *QRow) float32 {
			return dotQ4AVX512(&c[0], &s[0], &x.Codes[0], &x.DS[0], len(s))
		}, func(c, s []uint32, xs *[4]*QRow, out *[4]float32) {
			dotQ4x4AVX512(&c[0], &s[0], len(s), &[4]*int16{&xs[0].Codes[0], &xs[1].Codes[0], &xs[2].Codes[0], &xs[3].Codes[0]},
				&[4]*float32{&xs[0].DS[0], &xs[1].DS[0], &xs[2].DS[0], &xs[3].DS[0]}, out)
		}})
	}
	paths = append(paths, path{"dispatch", DotQ4, DotQ4x4})
	t.Logf("kernels: %s", Path())
	rng := rand.New(rand.NewPCG(1, 2))
	for _, cols := range shapes {
		m := int4Matrix(rng, 3, cols)
		var xs [4]*QRow
		for r := range xs {
			xs[r] = new(QRow)
			xs[r].Quantize(randomRow(rng, cols))
		}
		for r := range 3 {
			codes, scales := rowOf(m, r)
			for _, p := range paths {
				var got4 [4]float32
				if p.four != nil {
					p.four(codes, scales, &xs, &got4)
				}
				for i, x := range xs {
					want := dotQ4Go(codes, scales, x.Codes, x.DS)
					if got := p.one(codes, scales, x); math.Float32bits(got) != math.Float32bits(want) {
						t.Errorf("%s: cols %d row %d input %d: %v, twin %v", p.name, cols, r, i, got, want)
					}
					if p.four != nil && math.Float32bits(got4[i]) != math.Float32bits(want) {
						t.Errorf("%s ×4: cols %d row %d input %d: %v, twin %v", p.name, cols, r, i, got4[i], want)
					}
				}
			}
		}
	}
}

// TestDotQ4Accuracy: the quantized product is close to the float one over
// the dequantized weights: within what rounding the inputs to 8 bits
// allows (half a step of each group's scale per input).
func TestDotQ4Accuracy(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, cols := range shapes {
		m := int4Matrix(rng, 4, cols)
		w := make([]float32, cols)
		x := randomRow(rng, cols)
		var q QRow
		q.Quantize(x)
		for r := range m.Rows {
			m.DequantizeRow(r, w)
			var exact, bound float64
			for i := range w {
				exact += float64(w[i]) * float64(x[i])
				bound += math.Abs(float64(w[i])) * float64(q.DS[2*(i/Group)]) / 2
			}
			codes, scales := rowOf(m, r)
			got := float64(DotQ4(codes, scales, &q))
			if d := math.Abs(got - exact); d > bound*1.01+1e-6*math.Abs(exact) {
				t.Errorf("cols %d row %d: %v, exact %v (off by %g, bound %g)", cols, r, got, exact, d, bound)
			}
		}
	}
}

// TestQuantizeOrder: codes come in nibble order and round to nearest, ties
// to even; the sum is exact; padding is zero.
func TestQuantizeOrder(t *testing.T) {
	x := make([]float32, 34)
	for i := range x {
		x[i] = float32(i) - 10
	}
	var q QRow
	q.Quantize(x)
	if q.Groups() != 2 || len(q.Codes) != 64 {
		t.Fatalf("%d groups, %d codes", q.Groups(), len(q.Codes))
	}
	d := q.DS[0]
	if d != 21.0/Max {
		t.Errorf("scale %v, want 21/%d", d, Max)
	}
	for i := range 32 {
		want := int16(math.RoundToEven(float64(x[i] * (1 / d))))
		if got := q.Codes[CodeIndex(0, 2, i)]; got != want {
			t.Errorf("input %d: code %d, want %d", i, got, want)
		}
	}
	if q.DS[1] != 176 || q.DS[3] != 45 {
		t.Errorf("sums %v and %v, want 176 and 45", q.DS[1], q.DS[3])
	}
	if q.Codes[CodeIndex(1, 2, 0)] != 31342 || q.Codes[CodeIndex(1, 2, 1)] != Max ||
		q.Codes[CodeIndex(1, 2, 2)] != 0 || q.Codes[CodeIndex(1, 2, 31)] != 0 {
		t.Errorf("second group %v", q.Codes)
	}
}

// TestF32KernelsMatchTwins: DotF32, DotF32x4 and Axpy give their Go twins'
// bits on lengths below, at and past the block, and with tails.
func TestF32KernelsMatchTwins(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{1, 5, 8, 31, 32, 33, 64, 100, 576, 1537} {
		w := randomRow(rng, n)
		var xs [4][]float32
		for r := range xs {
			xs[r] = randomRow(rng, n)
		}
		var got4 [4]float32
		DotF32x4(w, &xs, &got4)
		for r, x := range xs {
			m := n &^ (Block - 1)
			var want float32
			if m > 0 {
				want = dotF32Go(w[:m], x[:m])
			}
			for i := m; i < n; i++ {
				want += float32(w[i] * x[i])
			}
			if got := DotF32(w, x); math.Float32bits(got) != math.Float32bits(want) {
				t.Errorf("n %d row %d: DotF32 %v, twin %v", n, r, got, want)
			}
			if math.Float32bits(got4[r]) != math.Float32bits(want) {
				t.Errorf("n %d row %d: DotF32x4 %v, twin %v", n, r, got4[r], want)
			}
		}
		a := float32(rng.NormFloat64())
		got, want := append([]float32(nil), xs[0]...), append([]float32(nil), xs[0]...)
		Axpy(got, a, w)
		for i := range want {
			want[i] += float32(a * w[i])
		}
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("n %d: Axpy[%d] %v, loop %v", n, i, got[i], want[i])
			}
		}
	}
}

// TestDotF32RowsMatchesDotF32: DotF32Rows gives DotF32's bits for every
// row, on lengths below, at and past the block, odd and even row counts,
// and outputs packed or apart.
func TestDotF32RowsMatchesDotF32(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, k := range []int{1, 5, 31, 32, 33, 64, 100, 172} {
		for _, m := range []int{1, 2, 3, 4, 5, 8, 33} {
			for _, stride := range []int{1, 7} {
				w, x := randomRow(rng, k), randomRow(rng, m*k)
				out := make([]float32, (m-1)*stride+1)
				DotF32Rows(out, stride, w, x, m)
				for i := range m {
					if got, want := out[i*stride], DotF32(w, x[i*k:(i+1)*k]); math.Float32bits(got) != math.Float32bits(want) {
						t.Fatalf("k %d, %d rows, stride %d: row %d %v, DotF32 %v", k, m, stride, i, got, want)
					}
				}
			}
		}
	}
}

// dotF32Twin is DotF32 as its Go twin computes it: dotF32Go over the
// whole blocks, then the tail one product and one sum at a time.
func dotF32Twin(w, x []float32) float32 {
	n := len(w) &^ (Block - 1)
	var s float32
	if n > 0 {
		s = dotF32Go(w[:n], x[:n])
	}
	for i := n; i < len(w); i++ {
		s += float32(w[i] * x[i])
	}
	return s
}

// TestDotF32BlockMatchesTwin: DotF32Block, and DotF16Block on weights
// given as halves, give the Go twin's bits (DotF32's definition) for every
// weight row and input row, on lengths below, at and
// past the block with and without tails (a vision head's 72, a SigLIP
// width's 1152 plus a tail), weight and input row counts around the
// register tile's four and three, inputs packed or further apart, outputs
// packed or apart, and values of every scale with zeros of both signs.
func TestDotF32BlockMatchesTwin(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, k := range []int{1, 5, 31, 32, 33, 64, 72, 100, 1157} {
		for _, nw := range []int{1, 3, 4, 5, 8, 11} {
			for _, m := range []int{1, 2, 3, 4, 6, 7, 13} {
				for _, gap := range []int{0, 3} {
					xstride, stride := k+gap, nw+2*gap
					w, x := randomRow(rng, nw*k), randomRow(rng, (m-1)*xstride+k)
					for i := range w {
						w[i] *= float32(math.Exp(rng.NormFloat64() * 6))
					}
					w[0], x[len(x)-1] = float32(math.Copysign(0, -1)), 0
					// DotF16Block on the weights as halves (a smaller range:
					// the f32 scale would overflow them) against the twin on
					// their widened values.
					wh, wf := make([]uint16, len(w)), make([]float32, len(w))
					for i, v := range w {
						wh[i] = dtype.HalfBits(v * float32(math.Exp(-float64(i%13))))
						wf[i] = half(wh[i])
					}
					for _, c := range []struct {
						what string
						w    []float32
						run  func(out []float32)
					}{
						{"DotF32Block", w, func(out []float32) { DotF32Block(out, stride, w, nw, x, xstride, m) }},
						{"DotF16Block", wf, func(out []float32) { DotF16Block(out, stride, wh, nw, x, xstride, m) }},
					} {
						out := make([]float32, (m-1)*stride+nw)
						c.run(out)
						for i := range m {
							for j := range nw {
								want := dotF32Twin(c.w[j*k:(j+1)*k], x[i*xstride:i*xstride+k])
								if got := out[i*stride+j]; math.Float32bits(got) != math.Float32bits(want) {
									t.Fatalf("%s: k %d, %d×%d rows, gap %d: weight %d input %d: %v, twin %v", c.what, k, nw, m, gap, j, i, got, want)
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestDotF32KeysMatchesTwin: DotF32Keys gives the Go twin's bits (DotF32's
// definition) for every row and key, on head widths below, at and past the
// block with and without tails (a vision tower's 72), full and partial
// tiles of keys, row counts around the eight a partial tile takes at a
// time, rows packed or apart, outputs packed or apart, values of every
// scale with zeros of both signs, and tiles filled in two runs of records
// (TransposeKeys at an offset) over stale values.
func TestDotF32KeysMatchesTwin(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	for _, k := range []int{1, 5, 31, 32, 33, 64, 72, 100, 130} {
		for _, n := range []int{1, 7, KeysTile} {
			for _, m := range []int{1, 2, 8, 9, 17} {
				for _, gap := range []int{0, 3} {
					xstride, stride := k+gap, KeysTile+2*gap
					keys, x := randomRow(rng, n*k), randomRow(rng, (m-1)*xstride+k)
					for i := range keys {
						keys[i] *= float32(math.Exp(rng.NormFloat64() * 6))
					}
					keys[0], x[len(x)-1] = float32(math.Copysign(0, -1)), 0
					kt := randomRow(rng, KeysTile*k) // stale values: the keys past n become zeros
					h := n / 2                       // the tile in two runs of records
					TransposeKeys(kt, keys, 0, h, k)
					TransposeKeys(kt, keys[h*k:], h, n-h, k)
					for d := range k {
						for j := n; j < KeysTile; j++ {
							if v := kt[d*KeysTile+j]; math.Float32bits(v) != 0 {
								t.Fatalf("k %d, %d keys: value %d of key %d past them is %v, not +0", k, n, d, j, v)
							}
						}
					}
					out := make([]float32, (m-1)*stride+KeysTile)
					DotF32Keys(out, stride, kt, n, k, x, xstride, m)
					for i := range m {
						for j := range n {
							want := dotF32Twin(x[i*xstride:i*xstride+k], keys[j*k:(j+1)*k])
							if got := out[i*stride+j]; math.Float32bits(got) != math.Float32bits(want) {
								t.Fatalf("k %d, %d keys, %d rows, gap %d: row %d key %d: %v, twin %v", k, n, m, gap, i, j, got, want)
							}
						}
					}
				}
			}
		}
	}
}

// TestAxpyRows4MatchesLoop: AxpyRows4 gives each of its four sums the
// bits of Axpy's loop row after row, on widths below, at and past the
// kernel's 8-, 16- and 64-column blocks (a vision head's 72 and 136 = 2·64
// + 8), one row or many, rows packed or further apart, and sums that start
// from values of their own.
func TestAxpyRows4MatchesLoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	for _, width := range []int{1, 7, 8, 9, 16, 17, 24, 63, 64, 65, 72, 80, 136} {
		for _, rows := range []int{1, 2, 5, 16} {
			for _, stride := range []int{width, width + 3} {
				x := randomRow(rng, (rows-1)*stride+width)
				var got, want, a [4][]float32
				for r := range 4 {
					a[r], got[r] = randomRow(rng, rows), randomRow(rng, width)
					want[r] = slices.Clone(got[r])
					for t := range rows {
						for i := range width {
							want[r][i] += float32(a[r][t] * x[t*stride+i])
						}
					}
				}
				AxpyRows4(&got, &a, x, stride)
				for r := range 4 {
					for i := range width {
						if math.Float32bits(got[r][i]) != math.Float32bits(want[r][i]) {
							t.Fatalf("width %d, %d rows, stride %d: sum %d [%d] %v, loop %v", width, rows, stride, r, i, got[r][i], want[r][i])
						}
					}
				}
			}
		}
	}
}

// TestSiLUMul: SiLUMul gives its loop's bits (siluMulGo, spelt out again
// here) at lengths below, at and past a register, on values of every
// scale, with infinities and NaN among the exps.
func TestSiLUMul(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 40, 100} {
		g, e, u := randomRow(rng, n), randomRow(rng, n), randomRow(rng, n)
		for i := range e {
			e[i] = float32(math.Exp(float64(e[i] * 20)))
			g[i] *= float32(math.Exp(float64(rng.NormFloat64() * 10)))
		}
		if n > 3 {
			e[1], e[2], e[3] = float32(math.Inf(1)), float32(math.NaN()), 0
		}
		want := make([]float32, n)
		for i := range want {
			r := float32(1 / float32(1+e[i]))
			want[i] = float32(g[i]*r) * u[i]
		}
		twin := slices.Clone(g)
		siluMulGo(twin, e, u)
		SiLUMul(g, e, u)
		for i := range want {
			if math.Float32bits(g[i]) != math.Float32bits(want[i]) || math.Float32bits(twin[i]) != math.Float32bits(want[i]) {
				t.Fatalf("n %d: [%d] %v (twin %v), loop %v", n, i, g[i], twin[i], want[i])
			}
		}
	}
}

// TestAxpyRowsMatchesLoop: AxpyRows and AxpyRows2, and their F16 forms on
// x's values as halves, give the bits of its definition, a plain Axpy loop
// row after row, on widths below, at and past a register and a 32-column
// block (with tails), one row or many, rows packed or further apart.
func TestAxpyRowsMatchesLoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, width := range []int{1, 3, 7, 8, 9, 16, 31, 32, 33, 40, 56, 64, 72, 100} {
		for _, rows := range []int{1, 2, 5, 8, 13} {
			for _, stride := range []int{width, width + 3, 4 * width} {
				a, a1 := randomRow(rng, rows), randomRow(rng, rows)
				x := randomRow(rng, (rows-1)*stride+width)
				xh := make([]uint16, len(x))
				for i, v := range x {
					xh[i] = dtype.HalfBits(v)
				}
				for _, half := range []bool{false, true} {
					if half {
						for i, h := range xh {
							x[i] = dtype.HalfValue(h)
						}
					}
					got, got0, got1 := randomRow(rng, width), randomRow(rng, width), randomRow(rng, width)
					want, want0, want1 := slices.Clone(got), slices.Clone(got0), slices.Clone(got1)
					if half {
						AxpyRowsF16(got, a, xh, stride)
						AxpyRows2F16(got0, got1, a, a1, xh, stride)
					} else {
						AxpyRows(got, a, x, stride)
						AxpyRows2(got0, got1, a, a1, x, stride)
					}
					for r := range a {
						for i := range want {
							want[i] += float32(a[r] * x[r*stride+i])
							want0[i] += float32(a[r] * x[r*stride+i])
							want1[i] += float32(a1[r] * x[r*stride+i])
						}
					}
					for _, c := range []struct {
						what      string
						got, want []float32
					}{{"AxpyRows", got, want}, {"AxpyRows2 first", got0, want0}, {"AxpyRows2 second", got1, want1}} {
						for i := range c.got {
							if math.Float32bits(c.got[i]) != math.Float32bits(c.want[i]) {
								t.Fatalf("%s (halves %v): width %d, %d rows, stride %d: [%d] %v, loop %v", c.what, half, width, rows, stride, i, c.got[i], c.want[i])
							}
						}
					}
				}
			}
		}
	}
}

// TestDotF16RowsMatchesDotF32Rows: DotF16Rows gives DotF32Rows' bits on the
// halves' values, for row counts around DotF16x4's four and lengths with
// and without a tail past whole blocks.
func TestDotF16RowsMatchesDotF32Rows(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, k := range []int{5, 32, 64, 97, 172, 576} {
		for _, m := range []int{1, 3, 4, 6, 9} {
			w := randomRow(rng, k)
			wh := make([]uint16, k)
			for i, v := range w {
				wh[i] = dtype.HalfBits(v)
				w[i] = dtype.HalfValue(wh[i])
			}
			x := randomRow(rng, m*k)
			got, want := make([]float32, 2*m), make([]float32, 2*m)
			DotF16Rows(got, 2, wh, x, m)
			DotF32Rows(want, 2, w, x, m)
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("k %d, m %d: [%d] %v, DotF32Rows %v", k, m, i, got[i], want[i])
				}
			}
		}
	}
}

// TestQuantizeMatchesTwin: the vector quantizer gives quantizeGo's codes,
// scales and sums, ties, zero groups and groups too small for 1/d included.
func TestQuantizeMatchesTwin(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{32, 33, 64, 100, 576, 1536} {
		x := randomRow(rng, n)
		clear(x[:min(n, 32)]) // an all-zero group
		if n > 64 {
			// Group 1 scales by exactly 1 (its largest |x| is Max) and
			// holds halves: ties that rounding to even and rounding away
			// from zero take apart (2.5 → 2, 3.5 → 4), both signs.
			x[32] = float32(Max)
			for i := 33; i < 64; i++ {
				x[i] = float32(i-33) + 0.5
				if i%3 == 0 {
					x[i] = -x[i]
				}
			}
		}
		if n >= 128 {
			// Group 2's 1/d overflows (its codes are 0); group 3's d is
			// subnormal, and 1/d finite.
			for i := 64; i < 128; i++ {
				x[i] = float32(i%32+1) * 1e-37
				if i >= 96 {
					x[i] *= 60
				}
				if i%5 == 0 {
					x[i] = -x[i]
				}
			}
		}
		var got QRow
		got.Quantize(x)
		want := QRow{Cols: n, Codes: make([]int16, len(got.Codes)), DS: make([]float32, len(got.DS))}
		for g := range want.Groups() {
			quantizeGo(x[g*Group:min(n, (g+1)*Group)], want.Codes, g, want.Groups(), want.DS[2*g:2*g+2])
		}
		for i := range want.Codes {
			if got.Codes[i] != want.Codes[i] {
				t.Fatalf("n %d: code %d = %d, twin %d", n, i, got.Codes[i], want.Codes[i])
			}
		}
		for i := range want.DS {
			if math.Float32bits(got.DS[i]) != math.Float32bits(want.DS[i]) {
				t.Fatalf("n %d: ds %d = %v, twin %v", n, i, got.DS[i], want.DS[i])
			}
		}
		if n >= 128 {
			for i := range Group {
				if c := got.Codes[CodeIndex(2, got.Groups(), i)]; c != 0 {
					t.Fatalf("n %d: group 2 (1/d overflows): code %d = %d, want 0", n, i, c)
				}
				x, d := x[96+i], got.DS[6]
				if c := got.Codes[CodeIndex(3, got.Groups(), i)]; math.Abs(float64(c)-float64(x/d)) > 0.51 {
					t.Fatalf("n %d: group 3 (subnormal d): code %d = %d for %v/%v", n, i, c, x, d)
				}
			}
		}
	}
}

// TestQuantizeKMatchesTwin: the per-super-block quantization gives
// quantizeKGo's codes and scales (its vector code the whole super-blocks,
// the twin a short last one): ties, an all-zero super-block and one too
// small for 1/d included.
func TestQuantizeKMatchesTwin(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{32, 256, 288, 768, 1000, 2304} {
		x := randomRow(rng, n)
		if n >= 768 {
			clear(x[:KBlock]) // an all-zero super-block
			// The second scales by exactly 1 (its largest |x| is Max) and
			// holds halves that rounding to even and away from zero take
			// apart, both signs; the third's 1/d overflows.
			x[KBlock] = float32(Max)
			for i := KBlock + 1; i < 2*KBlock; i++ {
				x[i] = float32(i%200) + 0.5
				if i%3 == 0 {
					x[i] = -x[i]
				}
			}
			for i := 2 * KBlock; i < 3*KBlock; i++ {
				x[i] = float32(i%32+1) * 1e-37
			}
		}
		var got QRow
		got.Quantize(x)
		want := QRow{Cols: n, KCodes: make([]int16, len(got.KCodes)), KD: make([]float32, len(got.KD))}
		want.quantizeKGo(x, 0)
		for i := range want.KCodes {
			if got.KCodes[i] != want.KCodes[i] {
				t.Fatalf("n %d: code %d = %d, twin %d", n, i, got.KCodes[i], want.KCodes[i])
			}
		}
		for i := range want.KD {
			if math.Float32bits(got.KD[i]) != math.Float32bits(want.KD[i]) {
				t.Fatalf("n %d: super-block %d's scale %v, twin %v", n, i, got.KD[i], want.KD[i])
			}
		}
		if n >= 768 {
			for i := range KBlock {
				if c := got.KCodes[CodeIndex((2*KBlock+i)/Group, got.Groups(), i%Group)]; c != 0 {
					t.Fatalf("n %d: super-block 2 (1/d overflows): code %d = %d, want 0", n, i, c)
				}
			}
		}
	}
}

// TestF16KernelsMatchF32: a row of halves gives DotF32's bits over its
// widened values, one row and four.
func TestF16KernelsMatchF32(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, n := range []int{1, 31, 32, 33, 64, 100, 576, 1537} {
		w := make([]uint16, n)
		for i := range w {
			w[i] = dtype.HalfBits(float32(rng.NormFloat64()))
		}
		wf := widen(w)
		var xs [4][]float32
		for r := range xs {
			xs[r] = randomRow(rng, n)
		}
		var got4 [4]float32
		DotF16x4(w, &xs, &got4)
		for r, x := range xs {
			want := DotF32(wf, x)
			if got := DotF16(x, w); math.Float32bits(got) != math.Float32bits(want) {
				t.Errorf("n %d row %d: DotF16 %v, DotF32 %v", n, r, got, want)
			}
			if math.Float32bits(got4[r]) != math.Float32bits(want) {
				t.Errorf("n %d row %d: DotF16x4 %v, DotF32 %v", n, r, got4[r], want)
			}
		}
	}
}

// TestHalfMatchesDtype: the kernels' tails widen every half, subnormals
// and infinities included, to dtype.HalfValue's f32 (NaNs to a NaN).
func TestHalfMatchesDtype(t *testing.T) {
	for h := range 1 << 16 {
		got, want := half(uint16(h)), dtype.HalfValue(uint16(h))
		if want != want {
			if got == got {
				t.Fatalf("half %#04x: %v, want a NaN", h, got)
			}
			continue
		}
		if math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("half %#04x: %v, dtype %v", h, got, want)
		}
	}
}
