package dtype

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestDequantizeCodebooks decodes hand-written IQ4_NL, IQ4_XS and MXFP4
// blocks whose values follow from ggml's formulas: the codebooks, the
// nibble order (element j low, j+16 high), IQ4_XS's split 6-bit factors
// and MXFP4's E8M0 scales down to the subnormal ones.
func TestDequantizeCodebooks(t *testing.T) {
	t.Run("IQ4_NL", func(t *testing.T) {
		blk := cat(u16(h0_5), fill(16, func(j int) byte { return byte(j | (15-j)<<4) }))
		want := float32s(32, func(j int) float32 {
			if j < 16 {
				return 0.5 * float32(kvaluesIQ4NL[j])
			}
			return 0.5 * float32(kvaluesIQ4NL[31-j])
		})
		got := make([]float32, 32)
		if err := Dequantize(IQ4_NL, blk, got); err != nil {
			t.Fatal(err)
		}
		expectBits(t, got, want)
	})
	t.Run("IQ4_XS", func(t *testing.T) {
		// Factors ls_j = 33 + j/2 for even j, 30 + j/2 for odd j: low
		// nibbles and high bits of both kinds, and factors either side of 32.
		var sh uint16
		sl := make([]byte, 4)
		ls := func(j int) int { return []int{33, 30}[j%2] + j/2 }
		for j := range 8 {
			sl[j/2] |= byte(ls(j)&15) << (4 * (j % 2))
			sh |= uint16(ls(j)>>4) << (2 * j)
		}
		qs := fill(128, func(i int) byte { return byte(i%16 | (i*7%16)<<4) })
		blk := cat(u16(h0_25), u16(sh), sl, qs)
		want := float32s(256, func(i int) float32 {
			j, l := i/32, i%32
			q := qs[16*j+l%16]
			if l >= 16 {
				q >>= 4
			}
			return 0.25 * float32(ls(j)-32) * float32(kvaluesIQ4NL[q&15])
		})
		got := make([]float32, 256)
		if err := Dequantize(IQ4_XS, blk, got); err != nil {
			t.Fatal(err)
		}
		expectBits(t, got, want)
	})
	t.Run("MXFP4", func(t *testing.T) {
		e2m1 := []float32{0, 0.5, 1, 1.5, 2, 3, 4, 6}
		for _, e := range []int{127, 130, 0, 1, 254} {
			blk := cat([]byte{byte(e)}, fill(16, func(j int) byte { return byte(j | (15-j)<<4) }))
			scale := math.Ldexp(1, e-127)
			want := float32s(32, func(j int) float32 {
				q := j
				if j >= 16 {
					q = 31 - j
				}
				v := float64(e2m1[q%8]) * scale
				if q >= 8 {
					v = -v
				}
				return float32(v)
			})
			got := make([]float32, 32)
			if err := Dequantize(MXFP4, blk, got); err != nil {
				t.Fatal(err)
			}
			for j := range got { // -0 for code 8 is ggml's 0·d: compare values
				if got[j] != want[j] {
					t.Fatalf("e %d: element %d = %g, want %g", e, j, got[j], want[j])
				}
			}
		}
	})
}

// TestQuantizeCodebookExact: values on a codebook's grid come back as
// they are.
func TestQuantizeCodebookExact(t *testing.T) {
	nl := float32s(32, func(j int) float32 { return 0.5 * float32(kvaluesIQ4NL[(j*5)%16]) })
	nl[3] = 0.5 * -127 // the largest magnitude on the first level
	expectBits(t, roundTrip(t, IQ4_NL, nl), nl)
	mx := float32s(32, func(j int) float32 { return 0.25 * float32(kvaluesMXFP4[(j*3)%16]) })
	mx[0] = 0.25 * 12
	got := roundTrip(t, MXFP4, mx)
	for j := range mx {
		if got[j] != mx[j] {
			t.Fatalf("MXFP4 element %d: %g, want %g", j, got[j], mx[j])
		}
	}
}

// TestNearestLevelSearch: nearestLevel's search gives the scan's code for
// every codebook, at each level, each midpoint between two levels and
// the floats either side of them (the ties and near-ties), zeros,
// infinities, NaN, subnormals, values far outside the levels, and a
// million random floats near the levels and random bit patterns.
func TestNearestLevelSearch(t *testing.T) {
	for _, tc := range []struct {
		name string
		kv   *[16]int8
	}{{"MXFP4", &kvaluesMXFP4}, {"IQ4_NL", &kvaluesIQ4NL}} {
		vals := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
			math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32, math.MaxFloat32, -math.MaxFloat32, 1e7, -1e7, 3e9, -3e9}
		for _, a := range tc.kv {
			for _, b := range tc.kv {
				for _, v := range []float32{float32(a), (float32(a) + float32(b)) / 2} {
					vals = append(vals, v, math.Nextafter32(v, float32(math.Inf(1))), math.Nextafter32(v, float32(math.Inf(-1))))
				}
			}
		}
		rng := rand.New(rand.NewPCG(7, 42))
		for range 1_000_000 {
			vals = append(vals, 300*(rng.Float32()-0.5), math.Float32frombits(rng.Uint32()))
		}
		bad := 0
		for _, v := range vals {
			if got, want := nearestLevel(tc.kv, v), nearestLevelScan(tc.kv, v); got != want {
				if bad++; bad <= 5 {
					t.Errorf("%s: nearestLevel(%g) = code %d (level %d), the scan's %d (level %d)", tc.name, v, got, tc.kv[got], want, tc.kv[want])
				}
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d values differ", tc.name, bad, len(vals))
		}
	}
}
