package dtype

import (
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/x448/float16"
)

// Int4GroupSize is how many consecutive values of a row share one scale and
// one min in the Int4 format.
const Int4GroupSize = 32

// Int4 is a rows × cols matrix in Tessera's one internal 4-bit weight
// format, shared by the WebGPU kernels and the Go reference:
//
//   - each row is cut into groups of 32 consecutive values along the input
//     dimension; a row whose length is not a multiple of 32 has a last,
//     short group whose missing values are padded with code 0 (kernels
//     never multiply the padding by an input);
//   - a group holds 32 codes q in 0..15, an f16 scale and an f16 min, and
//     value = f32(scale)·f32(q) + f32(min).
//
// Codes: group g of row r is the four words Codes[4(r·G+g) : 4(r·G+g)+4],
// G = Groups(). Word w holds values 8w..8w+7 of the group, value 8w+i in
// bits 4i..4i+3 (the low nibble first), so one u32 unpacks into eight
// consecutive inputs and a group is one 16-byte vec4<u32> load.
//
// Scales: word r·G+g holds the f16 scale in bits 0..15 and the f16 min in
// bits 16..31, the order in which WGSL's unpack2x16float returns them (x is
// the scale, y the min). WGSL here has no f16 type, so halves travel packed.
//
// The product scale·q is exact in f32 (an 11-bit significand times a 4-bit
// integer), so the only rounding in a value is the addition: fused
// multiply-add on a GPU gives the same bits as the Go code, and the
// dequantized values of the two are identical.
//
// The asymmetric min makes the format a superset of ggml's Q4_0
// (d·(q−8): scale d, min −8d), Q4_1 (d·q + m) and Q4_K (per sub-block
// d·sc·q − dmin·m) without touching their 4-bit codes (see Int4FromGGML);
// float weights are quantized into it by QuantizeInt4.
type Int4 struct {
	Rows, Cols int
	Codes      []uint32 // Rows·Groups()·4 words of packed nibbles
	Scales     []uint32 // Rows·Groups() words: f16 scale | f16 min << 16
}

// NewInt4 allocates a zero rows × cols matrix.
func NewInt4(rows, cols int) *Int4 {
	g := int4Groups(cols)
	return &Int4{Rows: rows, Cols: cols, Codes: make([]uint32, rows*g*4), Scales: make([]uint32, rows*g)}
}

func int4Groups(cols int) int { return (cols + Int4GroupSize - 1) / Int4GroupSize }

// Groups is the number of groups per row: ceil(Cols/32).
func (m *Int4) Groups() int { return int4Groups(m.Cols) }

// Bytes is the storage size: 16 bytes of codes and 4 of scale and min per
// group (5 bits per value).
func (m *Int4) Bytes() int64 { return 4 * int64(len(m.Codes)+len(m.Scales)) }

// Int4Bytes is the storage size of a rows × cols Int4 matrix.
func Int4Bytes(rows, cols int) int64 { return int64(rows) * int64(int4Groups(cols)) * 20 }

// Code returns the 4-bit code of value (r, c).
func (m *Int4) Code(r, c int) uint8 {
	g, i := c/Int4GroupSize, c%Int4GroupSize
	w := m.Codes[4*(r*m.Groups()+g)+i/8]
	return uint8(w >> (4 * (i % 8)) & 15)
}

// ScaleMin returns the scale and min of group g of row r.
func (m *Int4) ScaleMin(r, g int) (scale, min float32) {
	return UnpackScaleMin(m.Scales[r*m.Groups()+g])
}

// PackScaleMin rounds scale and min to f16 (to nearest, ties to even;
// beyond the f16 range they saturate at ±65504) and packs them into one
// word, the scale in the low half.
func PackScaleMin(scale, min float32) uint32 {
	return uint32(satF16(scale)) | uint32(satF16(min))<<16
}

func satF16(v float32) uint16 {
	const top = 65504
	return float16.Fromfloat32(max(-top, min(v, top))).Bits()
}

// UnpackScaleMin is the inverse of PackScaleMin (and of WGSL's
// unpack2x16float).
func UnpackScaleMin(w uint32) (scale, min float32) {
	t := f16Table()
	return t[uint16(w)], t[uint16(w>>16)]
}

// PackNibbles packs 32 codes (each 0..15) into the four words of a group.
func PackNibbles(q *[Int4GroupSize]uint8, dst []uint32) {
	for w := range 4 {
		var v uint32
		for i := range 8 {
			v |= uint32(q[8*w+i]&15) << (4 * i)
		}
		dst[w] = v
	}
}

// UnpackNibbles is the inverse of PackNibbles.
func UnpackNibbles(src []uint32, q *[Int4GroupSize]uint8) {
	for w := range 4 {
		for i := range 8 {
			q[8*w+i] = uint8(src[w] >> (4 * i) & 15)
		}
	}
}

// Int4Value is one dequantized value: scale·q + min in float32, the
// product rounded on its own (it is exact anyway) so that no FMA fusion can
// change the result.
func Int4Value(scale, min float32, q uint8) float32 {
	return float32(scale*float32(q)) + min
}

// DequantizeRow writes the Cols values of row r into dst.
func (m *Int4) DequantizeRow(r int, dst []float32) {
	G := m.Groups()
	dst = dst[:m.Cols]
	codes := m.Codes[4*r*G : 4*(r+1)*G]
	sms := m.Scales[r*G : (r+1)*G]
	t := f16Table()
	for g, sm := range sms {
		s, mn := t[uint16(sm)], t[uint16(sm>>16)]
		out := dst[g*Int4GroupSize : min(len(dst), (g+1)*Int4GroupSize)]
		ws := codes[4*g : 4*g+4]
		if len(out) == Int4GroupSize {
			for w, v := range ws {
				o := out[8*w : 8*w+8]
				for i := range o {
					o[i] = float32(s*float32(v>>(4*i)&15)) + mn
				}
			}
			continue
		}
		for i := range out {
			out[i] = float32(s*float32(ws[i/8]>>(4*(i%8))&15)) + mn
		}
	}
}

// Dequantize returns all values, row-major.
func (m *Int4) Dequantize() []float32 {
	out := make([]float32, m.Rows*m.Cols)
	for r := range m.Rows {
		m.DequantizeRow(r, out[r*m.Cols:(r+1)*m.Cols])
	}
	return out
}

// Int4Exact reports whether Int4FromGGML keeps the 4-bit codes of type t.
func Int4Exact(t Type) bool { return t == Q4_0 || t == Q4_1 || t == Q4_K }

// ToInt4 converts a rows × cols tensor stored as type t into Int4: Q4_0,
// Q4_1 and Q4_K keep their codes (Int4FromGGML); every other type is
// dequantized to f32 and quantized by QuantizeInt4, which re-rounds values
// already rounded by their own format (lossless for none of them: Q8_0,
// Q5_*, Q6_K and the other K quants lose their extra bits).
func ToInt4(t Type, raw []byte, rows, cols int) (*Int4, error) {
	if Int4Exact(t) && cols%t.BlockSize() == 0 {
		return Int4FromGGML(t, raw, rows, cols)
	}
	x := make([]float32, rows*cols)
	if err := Dequantize(t, raw, x); err != nil {
		return nil, err
	}
	return QuantizeInt4(x, rows, cols), nil
}

// Int4FromGGML converts Q4_0, Q4_1 or Q4_K blocks into Int4 without
// re-rounding any 4-bit code. Each 32-value block (or Q4_K sub-block)
// becomes one group:
//
//   - Q4_0, d·(q−8): scale d, min −8d. Both are exact in f16 (−8d is a
//     power-of-two multiple), so every value equals ggml's exactly (as a
//     number: for d < 0 the code 8 gives +0 where ggml gives −0).
//   - Q4_1, d·q + m: scale d, min m, bit for bit; values identical.
//   - Q4_K, (d·sc)·q − dmin·m: scale f16(d·sc), min f16(−dmin·m). The
//     products of an f16 and a 6-bit integer have up to 17 significant
//     bits, so rounding them to f16 can move a scale or min by up to
//     2^-11 of itself (relative); where both products fit in f16 (always
//     for sc, m ≤ 1 or d with few significant bits) values are identical.
//
// A group whose scale or min overflows f16 (|8d| > 65504 for Q4_0) is
// requantized from its dequantized values instead: its codes change.
// cols must be a multiple of the type's block size.
func Int4FromGGML(t Type, raw []byte, rows, cols int) (*Int4, error) {
	if !Int4Exact(t) {
		return nil, fmt.Errorf("dtype: int4: %v has no exact conversion (want Q4_0, Q4_1 or Q4_K)", t)
	}
	if cols%t.BlockSize() != 0 {
		return nil, fmt.Errorf("dtype: int4: rows of %d values are not whole %v blocks", cols, t)
	}
	need, err := Bytes(t, int64(rows)*int64(cols))
	if err != nil {
		return nil, err
	}
	if int64(len(raw)) < need {
		return nil, fmt.Errorf("dtype: int4: %d×%d %v needs %d bytes, have %d", rows, cols, t, need, len(raw))
	}
	m := NewInt4(rows, cols)
	groups := rows * cols / Int4GroupSize // cols is a multiple of 32 here
	var q [Int4GroupSize]uint8
	var fallback [Int4GroupSize]float32
	put := func(g int, scale, min float32, ok bool, src []byte, srcType Type, sub int) {
		if ok {
			PackNibbles(&q, m.Codes[4*g:4*g+4])
			m.Scales[g] = PackScaleMin(scale, min)
			return
		}
		// Out of f16 range: requantize this group from ggml's values.
		var all [qkK]float32
		bs := srcType.BlockSize()
		_ = Dequantize(srcType, src, all[:bs])
		copy(fallback[:], all[sub*Int4GroupSize:(sub+1)*Int4GroupSize])
		m.Scales[g] = quantizeGroup(fallback[:], &q)
		PackNibbles(&q, m.Codes[4*g:4*g+4])
	}
	switch t {
	case Q4_0:
		const bb = 2 + qk/2
		for g := range groups {
			blk := raw[g*bb : (g+1)*bb]
			for j := range qk / 2 {
				q[j], q[j+qk/2] = blk[2+j]&15, blk[2+j]>>4
			}
			d := f16(blk)
			mn := -8 * d
			put(g, d, mn, fitsF16(mn), blk, Q4_0, 0)
		}
	case Q4_1:
		const bb = 4 + qk/2
		for g := range groups {
			blk := raw[g*bb : (g+1)*bb]
			for j := range qk / 2 {
				q[j], q[j+qk/2] = blk[4+j]&15, blk[4+j]>>4
			}
			PackNibbles(&q, m.Codes[4*g:4*g+4])
			m.Scales[g] = uint32(le.Uint16(blk)) | uint32(le.Uint16(blk[2:]))<<16 // d and m as they are
		}
	case Q4_K:
		const bb = 4 + 12 + qkK/2
		for b := range groups / 8 {
			blk := raw[b*bb : (b+1)*bb]
			d, dmin := f16(blk), f16(blk[2:])
			scales, qs := blk[4:16], blk[16:bb]
			for sub := range 8 {
				sc, mm := scaleMinK4(sub, scales)
				j, hi := sub/2, sub%2 == 1
				for l := range 32 {
					v := qs[32*j+l]
					if hi {
						v >>= 4
					}
					q[l] = v & 15
				}
				scale, mn := d*float32(sc), -(dmin * float32(mm))
				put(8*b+sub, scale, mn, fitsF16(scale) && fitsF16(mn), blk, Q4_K, sub)
			}
		}
	}
	return m, nil
}

// fitsF16 reports whether v rounds to a finite f16.
func fitsF16(v float32) bool {
	h := float16.Fromfloat32(v)
	return !h.IsInf(0) && !h.IsNaN()
}

// QuantizeInt4 quantizes a row-major rows × cols f32 matrix, spreading the
// rows across cores. Each group's scale and min come from a search (see
// quantizeGroup) rather than the plain min and max.
func QuantizeInt4(src []float32, rows, cols int) *Int4 {
	m := NewInt4(rows, cols)
	G := m.Groups()
	work := func(r0, r1 int) {
		var q [Int4GroupSize]uint8
		for r := r0; r < r1; r++ {
			row := src[r*cols : (r+1)*cols]
			for g := range G {
				x := row[g*Int4GroupSize : min(cols, (g+1)*Int4GroupSize)]
				q = [Int4GroupSize]uint8{}
				m.Scales[r*G+g] = quantizeGroup(x, &q)
				PackNibbles(&q, m.Codes[4*(r*G+g):4*(r*G+g)+4])
			}
		}
	}
	parallelRows(rows, cols, work)
	return m
}

// parallelRows runs work over the rows of a rows × cols matrix, split
// across cores when the matrix is large enough to pay for goroutines.
func parallelRows(rows, cols int, work func(r0, r1 int)) {
	workers := runtime.GOMAXPROCS(0)
	if rows*cols < 1<<16 || workers == 1 {
		work(0, rows)
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		r0, r1 := rows*w/workers, rows*(w+1)/workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			work(r0, r1)
		}()
	}
	wg.Wait()
}

// quantizeGroup picks the scale and min of one group of up to 32 values
// and writes their codes into q (entries past len(x) are left alone).
//
// The plain choice, scale = (max−min)/15 with min at the smallest value,
// spends codes on the group's outliers. The search tries that range and
// ranges clipped at either end by a few 32nds, and refits scale and min by
// least squares to the codes each one gives; every candidate is rounded to
// f16 and scored by the squared error of the values the kernels will
// actually compute, and the best is kept.
func quantizeGroup(x []float32, q *[Int4GroupSize]uint8) uint32 {
	lo, hi := x[0], x[0]
	for _, v := range x[1:] {
		lo, hi = min(lo, v), max(hi, v)
	}
	if !(hi > lo) { // constant (or NaN): the min alone encodes it
		for i := range x {
			q[i] = 0
		}
		return PackScaleMin(0, lo)
	}
	var best float64 = math.Inf(1)
	var bestSM uint32
	var codes [Int4GroupSize]uint8
	// try scores the packed candidate sm, keeping it (and its codes) if best.
	try := func(sm uint32) {
		s, mn := UnpackScaleMin(sm)
		inv := inverse(s)
		var e float64
		for i, v := range x {
			c := uint8(code((v-mn)*inv, 15))
			codes[i] = c
			d := float64(Int4Value(s, mn, c) - v)
			e += float64(d * d)
		}
		if e < best {
			best, bestSM = e, sm
			copy(q[:len(x)], codes[:len(x)])
		}
	}
	// refit solves least squares for x ≈ s·c + b over the current best codes.
	refit := func() {
		var sc, sc2, sx, scx float64
		n := float64(len(x))
		for i, v := range x {
			c := float64(q[i])
			sc += c
			sc2 += float64(c * c)
			sx += float64(v)
			scx += float64(c * float64(v))
		}
		if den := float64(n*sc2) - float64(sc*sc); den > 0 {
			s := (float64(n*scx) - float64(sc*sx)) / den
			b := (sx - float64(s*sc)) / n
			try(PackScaleMin(float32(s), float32(b)))
		}
	}
	span := hi - lo
	for _, c := range [...]struct{ a, b float32 }{{0, 0}, {1, 0}, {0, 1}, {1, 1}, {2, 0}, {0, 2}, {2, 2}} {
		l, h := lo+float32(span*c.a/32), hi-float32(span*c.b/32)
		try(PackScaleMin((h-l)/15, l))
	}
	refit()
	refit()
	return bestSM
}

// QuantizeInt4Group quantizes one group of up to 32 values as
// QuantizeInt4 does (the range search of quantizeGroup), writing the codes
// into q and returning the packed scale and min. Calibrated quantizers
// (models/gptq) fix a group's range with it and then round its values one
// at a time with Int4Code, as the error they feed forward changes them.
func QuantizeInt4Group(x []float32, q *[Int4GroupSize]uint8) uint32 { return quantizeGroup(x, q) }

// Int4Code is the code QuantizeInt4 gives v in a group of the given scale
// and min: (v−min)/scale rounded half up and clamped to 0..15.
func Int4Code(v, scale, min float32) uint8 { return uint8(code((v-min)*inverse(scale), 15)) }

// Q4_1 encodes m as ggml Q4_1 blocks: an Int4 group is a Q4_1 block (f16
// d = scale, f16 m = min, the same 4-bit codes), so this is the exact
// inverse of Int4FromGGML for Q4_1 and lets a GGUF file carry Tessera's
// int4 weights, calibrated ones included, bit for bit. Cols must be a
// multiple of 32 (Q4_1 has no short block).
func (m *Int4) Q4_1() ([]byte, error) {
	if m.Cols%qk != 0 {
		return nil, fmt.Errorf("dtype: int4 to Q4_1: rows of %d values are not whole blocks of %d", m.Cols, qk)
	}
	const bb = 4 + qk/2
	groups := len(m.Scales)
	out := make([]byte, groups*bb)
	var q [Int4GroupSize]uint8
	for g, sm := range m.Scales {
		blk := out[g*bb : (g+1)*bb]
		le.PutUint16(blk, uint16(sm))
		le.PutUint16(blk[2:], uint16(sm>>16))
		UnpackNibbles(m.Codes[4*g:4*g+4], &q)
		for j := range qk / 2 {
			blk[4+j] = q[j] | q[j+qk/2]<<4
		}
	}
	return out, nil
}

// HalfBits rounds v to an IEEE half (to nearest, ties to even) and returns
// its bits, the element of F16 storage.
func HalfBits(v float32) uint16 { return float16.Fromfloat32(v).Bits() }

// HalfValue widens the half with bits h to float32 (exactly).
func HalfValue(h uint16) float32 { return f16Table()[h] }

// Halves returns v as IEEE halves, or nil if some value is not exactly
// one (a tensor stored in F16 and widened is: a backend may keep it in
// halves, losing nothing).
func Halves(v []float32) []uint16 {
	h := make([]uint16, len(v))
	for i, x := range v {
		h[i] = HalfBits(x)
		if math.Float32bits(HalfValue(h[i])) != math.Float32bits(x) {
			return nil
		}
	}
	return h
}
