package dtype

import "fmt"

// Int8GroupSize is how many consecutive values of a row share one scale and
// one min in the Int8 format.
//
// It is 16, not Int4's 32, for two reasons. ggml's Q6_K, the format of
// most downloaded output heads, scales sub-blocks of 16 values each by its
// own 8-bit factor: a group of 32 could keep its 6-bit codes only by
// re-rounding one half. And a group of 16 bytes of codes is one vec4<u32>,
// as a group of Int4 is, so the GPU kernels read both formats with one
// loop (shaders/matmul_quant_gemv.inc.wgsl). It costs 10 bits a value
// instead of 9.
const Int8GroupSize = 16

// Int8 is a rows × cols matrix in Tessera's internal 8-bit weight format,
// the precision of every GGUF type wider than 4 bits that it keeps whole:
//
//   - each row is cut into groups of 16 consecutive values along the input
//     dimension; a short last group is padded with code 0 (kernels never
//     multiply the padding by an input);
//   - a group holds 16 codes q in 0..255, an f16 scale and an f16 min, and
//     value = f32(scale)·f32(q) + f32(min), as for Int4.
//
// Codes: group g of row r is the four words Codes[4(r·G+g) : 4(r·G+g)+4],
// G = Groups(). Word w holds values 4w..4w+3 of the group, value 4w+i in
// bits 8i..8i+7 (the lowest byte first: memory order on a little-endian
// machine), so a group is one 16-byte vec4<u32> load and WGSL's
// unpack4xU8 expands a word into four consecutive inputs.
//
// Scales: word r·G+g packs the f16 scale (low half) and min (high half)
// exactly as Int4's do (PackScaleMin).
//
// The product scale·q is exact in f32 (an 11-bit significand times an
// 8-bit integer), so the only rounding in a value is the addition, and a
// GPU's fused multiply-add gives the Go code's bits.
//
// The min makes the format hold ggml's 5-, 6- and 8-bit types with their
// codes unchanged (see Int8FromGGML); float weights are quantized into it
// by QuantizeInt8.
type Int8 struct {
	Rows, Cols int
	Codes      []uint32 // Rows·Groups()·4 words of packed bytes
	Scales     []uint32 // Rows·Groups() words: f16 scale | f16 min << 16
}

// NewInt8 allocates a zero rows × cols matrix.
func NewInt8(rows, cols int) *Int8 {
	g := int8Groups(cols)
	return &Int8{Rows: rows, Cols: cols, Codes: make([]uint32, rows*g*4), Scales: make([]uint32, rows*g)}
}

func int8Groups(cols int) int { return (cols + Int8GroupSize - 1) / Int8GroupSize }

// Groups is the number of groups per row: ceil(Cols/16).
func (m *Int8) Groups() int { return int8Groups(m.Cols) }

// Bytes is the storage size: 16 bytes of codes and 4 of scale and min per
// group (10 bits per value).
func (m *Int8) Bytes() int64 { return 4 * int64(len(m.Codes)+len(m.Scales)) }

// Int8Bytes is the storage size of a rows × cols Int8 matrix.
func Int8Bytes(rows, cols int) int64 { return int64(rows) * int64(int8Groups(cols)) * 20 }

// Code returns the code of value (r, c).
func (m *Int8) Code(r, c int) uint8 {
	g, i := c/Int8GroupSize, c%Int8GroupSize
	return uint8(m.Codes[4*(r*m.Groups()+g)+i/4] >> (8 * (i % 4)))
}

// ScaleMin returns the scale and min of group g of row r.
func (m *Int8) ScaleMin(r, g int) (scale, min float32) {
	return UnpackScaleMin(m.Scales[r*m.Groups()+g])
}

// PackBytes packs 16 codes into the four words of a group.
func PackBytes(q *[Int8GroupSize]uint8, dst []uint32) {
	for w := range 4 {
		dst[w] = uint32(q[4*w]) | uint32(q[4*w+1])<<8 | uint32(q[4*w+2])<<16 | uint32(q[4*w+3])<<24
	}
}

// DequantizeRow writes the Cols values of row r into dst.
func (m *Int8) DequantizeRow(r int, dst []float32) {
	G := m.Groups()
	dst = dst[:m.Cols]
	codes := m.Codes[4*r*G : 4*(r+1)*G]
	t := f16Table()
	for g, sm := range m.Scales[r*G : (r+1)*G] {
		s, mn := t[uint16(sm)], t[uint16(sm>>16)]
		out := dst[g*Int8GroupSize : min(len(dst), (g+1)*Int8GroupSize)]
		ws := codes[4*g : 4*g+4]
		for i := range out {
			out[i] = float32(s*float32(uint8(ws[i/4]>>(8*(i%4))))) + mn
		}
	}
}

// Dequantize returns all values, row-major.
func (m *Int8) Dequantize() []float32 {
	out := make([]float32, m.Rows*m.Cols)
	for r := range m.Rows {
		m.DequantizeRow(r, out[r*m.Cols:(r+1)*m.Cols])
	}
	return out
}

// Int8Exact reports whether Int8FromGGML keeps the codes of type t.
func Int8Exact(t Type) bool {
	switch t {
	case Q8_0, Q5_0, Q5_1, Q5_K, Q6_K:
		return true
	}
	return false
}

// ToInt8 converts a rows × cols tensor stored as type t into Int8: the
// types of Int8Exact keep their codes (Int8FromGGML) where rows are whole
// blocks; every other type is dequantized and quantized by QuantizeInt8.
func ToInt8(t Type, raw []byte, rows, cols int) (*Int8, error) {
	if Int8Exact(t) && cols%t.BlockSize() == 0 {
		return Int8FromGGML(t, raw, rows, cols)
	}
	x := make([]float32, rows*cols)
	if err := Dequantize(t, raw, x); err != nil {
		return nil, err
	}
	return QuantizeInt8(x, rows, cols), nil
}

// Int8FromGGML converts Q8_0, Q5_0, Q5_1, Q5_K or Q6_K blocks into Int8
// without re-rounding any code. Each run of 16 values becomes one group:
//
//   - Q8_0, d·q with q in −128..127: code q+128, scale d, min −128d. Both
//     are exact in f16 (−128d is d times a power of two), so values equal
//     ggml's exactly.
//   - Q5_0, d·(q−16): scale d, min −16d; exact likewise.
//   - Q5_1, d·q + m: scale d, min m, bit for bit; values identical.
//   - Q5_K, (d·sc)·q − dmin·m per sub-block of 32: scale f16(d·sc), min
//     f16(−dmin·m). The products of an f16 and a 6-bit integer have up to
//     17 significant bits, so rounding them to f16 can move a scale or min
//     by half an f16 ulp (2^-11 of itself, relative): not bit-exact in
//     general (Int4FromGGML's Q4_K case, one bit wider).
//   - Q6_K, d·sc·(q−32) per sub-block of 16 (sc a signed 8-bit factor):
//     scale S = f16(d·sc), min −32S. d·sc has up to 19 significant bits,
//     so S is within half an f16 ulp of it (relative 2^-11), and the value
//     S·(q−32) is then computed exactly. Not bit-exact in general; exact
//     where d·sc fits f16 (ggml itself rounds (d·sc)·(q−32) in f32).
//
// A group whose scale or min overflows f16 (|128d| > 65504 for Q8_0) is
// requantized from its dequantized values instead: its codes change.
// cols must be a multiple of the type's block size.
func Int8FromGGML(t Type, raw []byte, rows, cols int) (*Int8, error) {
	if !Int8Exact(t) {
		return nil, fmt.Errorf("dtype: int8: %v has no exact conversion (want Q8_0, Q5_0, Q5_1, Q5_K or Q6_K)", t)
	}
	bs, bb := t.BlockSize(), t.BlockBytes()
	if cols%bs != 0 {
		return nil, fmt.Errorf("dtype: int8: rows of %d values are not whole %v blocks", cols, t)
	}
	need, err := Bytes(t, int64(rows)*int64(cols))
	if err != nil {
		return nil, err
	}
	if int64(len(raw)) < need {
		return nil, fmt.Errorf("dtype: int8: %d×%d %v needs %d bytes, have %d", rows, cols, t, need, len(raw))
	}
	m := NewInt8(rows, cols)
	var blk8 block8
	var vals [qkK]float32
	var q [Int8GroupSize]uint8
	for b := range rows * cols / bs { // rows are whole blocks: groups run on across rows
		src := raw[b*bb : (b+1)*bb]
		decode8(t, src, &blk8)
		for sub := range bs / Int8GroupSize {
			g := b*bs/Int8GroupSize + sub
			copy(q[:], blk8.codes[sub*Int8GroupSize:])
			s, mn := blk8.scale[sub], blk8.min[sub]
			if fitsF16(s) && fitsF16(mn) {
				m.Scales[g] = PackScaleMin(s, mn)
			} else { // out of f16 range: requantize this group from ggml's values
				_ = Dequantize(t, src, vals[:bs])
				m.Scales[g] = quantizeGroup8(vals[sub*Int8GroupSize:(sub+1)*Int8GroupSize], &q)
			}
			PackBytes(&q, m.Codes[4*g:4*g+4])
		}
	}
	return m, nil
}

// block8 is one ggml block as Int8 groups: the codes in value order and
// each group's scale and min in f32 (before rounding to f16).
type block8 struct {
	codes      [qkK]uint8
	scale, min [qkK / Int8GroupSize]float32
}

// decode8 reads one block of type t (an Int8Exact type) into o.
func decode8(t Type, blk []byte, o *block8) {
	switch t {
	case Q8_0:
		d := f16(blk)
		for j, c := range blk[2 : 2+qk] {
			o.codes[j] = c ^ 0x80 // int8 q + 128
		}
		o.scale[0], o.scale[1], o.min[0], o.min[1] = d, d, -128*d, -128*d
	case Q5_0, Q5_1:
		d, mn, off := f16(blk), -16*f16(blk), 2
		if t == Q5_1 {
			mn, off = f16(blk[2:]), 4
		}
		qh, qs := le.Uint32(blk[off:]), blk[off+4:]
		for j := range qk / 2 {
			h0, h1 := q5High(qh, j)
			o.codes[j], o.codes[j+qk/2] = qs[j]&0x0f|h0, qs[j]>>4|h1
		}
		o.scale[0], o.scale[1], o.min[0], o.min[1] = d, d, mn, mn
	case Q5_K:
		d, dmin := f16(blk), f16(blk[2:])
		scales, qh, qs := blk[4:16], blk[16:48], blk[48:]
		for j := range 4 {
			for h := range 2 {
				sc, mm := scaleMinK4(2*j+h, scales)
				s, mn := d*float32(sc), -(dmin * float32(mm))
				o.scale[4*j+2*h], o.scale[4*j+2*h+1], o.min[4*j+2*h], o.min[4*j+2*h+1] = s, s, mn, mn
			}
			for l := range 32 {
				q := qs[32*j+l]
				o.codes[64*j+l] = q&0x0f | (qh[l]>>(2*j)&1)<<4
				o.codes[64*j+32+l] = q>>4 | (qh[l]>>(2*j+1)&1)<<4
			}
		}
	case Q6_K:
		d := f16(blk[208:])
		for n := range 2 {
			ql, qh, sc := blk[64*n:64*n+64], blk[128+32*n:128+32*n+32], blk[192+8*n:192+8*n+8]
			base := 128 * n
			for l := range 32 {
				o.codes[base+l] = ql[l]&0x0f | (qh[l]&3)<<4
				o.codes[base+32+l] = ql[l+32]&0x0f | (qh[l]>>2&3)<<4
				o.codes[base+64+l] = ql[l]>>4 | (qh[l]>>4&3)<<4
				o.codes[base+96+l] = ql[l+32]>>4 | (qh[l]>>6&3)<<4
			}
			// Value base + 32k + 16i (i = l/16) has factor sc[i + 2k].
			for k := range 4 {
				for i := range 2 {
					s := float32(halfRound(d * float32(int8(sc[i+2*k]))))
					g := base/16 + 2*k + i
					o.scale[g], o.min[g] = s, -32*s
				}
			}
		}
	}
}

// halfRound rounds v to the nearest f16 value (saturating as satF16).
func halfRound(v float32) float32 { return f16Table()[satF16(v)] }

// QuantizeInt8 quantizes a row-major rows × cols f32 matrix, spreading the
// rows across cores (see quantizeGroup8).
func QuantizeInt8(src []float32, rows, cols int) *Int8 {
	m := NewInt8(rows, cols)
	G := m.Groups()
	work := func(r0, r1 int) {
		var q [Int8GroupSize]uint8
		for r := r0; r < r1; r++ {
			row := src[r*cols : (r+1)*cols]
			for g := range G {
				q = [Int8GroupSize]uint8{}
				m.Scales[r*G+g] = quantizeGroup8(row[g*Int8GroupSize:min(cols, (g+1)*Int8GroupSize)], &q)
				PackBytes(&q, m.Codes[4*(r*G+g):4*(r*G+g)+4])
			}
		}
	}
	parallelRows(rows, cols, work)
	return m
}

// quantizeGroup8 picks the scale and min of one group of up to 16 values
// and writes their codes into q (entries past len(x) are left alone): the
// min is the smallest value rounded to f16, the scale the span above it
// over 255, rounded to f16 and nudged up until the largest value is
// reached, and each code the nearest under those f16 values. With 256
// levels the range search Int4 needs gains nothing measurable.
func quantizeGroup8(x []float32, q *[Int8GroupSize]uint8) uint32 {
	lo, hi := x[0], x[0]
	for _, v := range x[1:] {
		lo, hi = min(lo, v), max(hi, v)
	}
	mn := halfRound(lo)
	if !(hi > mn) { // constant (or NaN): the min alone encodes it
		for i := range x {
			q[i] = 0
		}
		return PackScaleMin(0, lo)
	}
	sm := PackScaleMin((hi-mn)/255, mn)
	if s, m := UnpackScaleMin(sm); float32(s*255)+m < hi && uint16(sm) < 0x7bff {
		sm++ // the next f16 up: the top code reaches hi
	}
	s, m := UnpackScaleMin(sm)
	inv := inverse(s)
	for i, v := range x {
		q[i] = uint8(code((v-m)*inv, 255))
	}
	return sm
}
