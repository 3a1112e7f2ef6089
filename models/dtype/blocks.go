package dtype

import "fmt"

// BlockGroup is how many consecutive inputs of a row a Blocks group holds:
// a legacy block, or a K quant's sub-block of 32 (two of 16 for Q6_K,
// Q3_K and Q2_K, whose halves have scales of their own).
const BlockGroup = 32

// Blocks is a rows × cols matrix of a GGUF block type kept at the file's
// bits, repacked at load into the one layout that the WGSL kernels and
// the CPU's vector kernels both read: per group of 32 consecutive inputs
// of a row, CodeWords words of codes; per scale block (ScaleGroups groups
// of a row), ScaleWords words of scales. Every value is
//
//	value = f32(S·c) + M
//
// with c the group's integer code of the input (a codebook level, or the
// stored bits less an offset), S the scale of its group (or of its half:
// inputs 0..15 and 16..31) and M the min, both f32 products of the file's
// scales that are exact (an f16 times a factor of at most 8 bits), so that
// S·c is exact too and every value equals ggml's dequantized one bit for
// bit (TestBlocksMatchGGML), on a GPU with fused multiply-adds as well.
//
// The codes of a group are planes, each in the order that makes a plane
// one shift and mask for the kernels: the low 4 bits as Int4 keeps them
// (input 8w+i in bits 4i..4i+3 of word w, so that a byte holds an even
// input and the odd one after it), then for 5-bit codes a word of fifth
// bits (bit b: input 2b, bit 16+b: input 2b+1: the even inputs, then the
// odd ones), for 6-bit codes two words of 2-bit fields, for Q2_K and Q3_K
// two words of 2-bit codes (Q3_K then a word of third bits), for Q8_0
// eight words of int8 codes (the even inputs, then the odd ones). A 2-bit
// field of input i is in byte (i/2)%8 at bit 2·(i%2) + 4·(i/16): one byte
// holds inputs 2j, 2j+1, 2j+16 and 2j+17 in its four fields.
//
// The scales keep the file's own bytes where a super-block has them
// (Q4_K, Q5_K, Q2_K, IQ4_XS: word 0 the f16 d and dmin or d and
// scales_h, then the packed factors as the file has them), and the legacy
// types' f16 d (two groups a word), d and m (a word a group) or E8M0
// exponent (four groups a word). Q6_K's and Q3_K's super-blocks hold 18
// and 14 bytes of scales, no whole words: a row keeps its super-blocks'
// f16 d first, then their factors (Q6_K's 16 int8, Q3_K's 12 packed
// bytes as the file has them), so that only a row of an odd number of
// super-blocks pads (2 bytes).
//
// Bits a value, stored against the file's: the same for every type (for
// Q6_K and Q3_K in rows of an even number of super-blocks), but for a
// legacy row of an odd number of groups, which pads its last scale word.
type Blocks struct {
	Type       Type
	Rows, Cols int
	Codes      []uint32 // Rows·Groups()·CodeWords
	Scales     []uint32 // Rows·RowScaleWords()
}

// Plane is one part of a group's codes (BlockLayout.Planes).
type Plane uint8

const (
	Nibbles Plane = 1 << iota // 4 words: bits 0..3
	High1                     // 1 word: bit 4 (Q5_*) or bit 2 (Q3_K)
	High2                     // 2 words: bits 4..5 (Q6_K)
	Low2                      // 2 words: bits 0..1 (Q2_K, Q3_K)
	Bytes8                    // 8 words: int8 codes (Q8_0)
)

// BlockLayout is how Blocks keeps one type.
type BlockLayout struct {
	Planes      Plane
	CodeWords   int       // words of codes a group
	ScaleGroups int       // groups a scale block holds
	ScaleBytes  int       // bytes a scale block
	Split       bool      // a row's f16 d first, then its blocks' factors
	Offset      int       // subtracted from the stored bits
	Codebook    *[16]int8 // the levels that 4-bit codes index, if any
	Halves      bool      // a scale per 16 inputs
	Min         int       // mins: 0 none, 1 one a group, 2 one a half
}

var blockLayouts = [...]BlockLayout{
	Q4_0:   {Planes: Nibbles, CodeWords: 4, ScaleGroups: 2, ScaleBytes: 4, Offset: 8},
	Q4_1:   {Planes: Nibbles, CodeWords: 4, ScaleGroups: 1, ScaleBytes: 4, Min: 1},
	Q5_0:   {Planes: Nibbles | High1, CodeWords: 5, ScaleGroups: 2, ScaleBytes: 4, Offset: 16},
	Q5_1:   {Planes: Nibbles | High1, CodeWords: 5, ScaleGroups: 1, ScaleBytes: 4, Min: 1},
	Q8_0:   {Planes: Bytes8, CodeWords: 8, ScaleGroups: 2, ScaleBytes: 4},
	IQ4_NL: {Planes: Nibbles, CodeWords: 4, ScaleGroups: 2, ScaleBytes: 4, Codebook: &kvaluesIQ4NL},
	MXFP4:  {Planes: Nibbles, CodeWords: 4, ScaleGroups: 4, ScaleBytes: 4, Codebook: &kvaluesMXFP4},
	Q2_K:   {Planes: Low2, CodeWords: 2, ScaleGroups: 8, ScaleBytes: 20, Halves: true, Min: 2},
	Q3_K:   {Planes: Low2 | High1, CodeWords: 3, ScaleGroups: 8, ScaleBytes: 14, Split: true, Offset: 4, Halves: true},
	Q4_K:   {Planes: Nibbles, CodeWords: 4, ScaleGroups: 8, ScaleBytes: 16, Min: 1},
	Q5_K:   {Planes: Nibbles | High1, CodeWords: 5, ScaleGroups: 8, ScaleBytes: 16, Min: 1},
	Q6_K:   {Planes: Nibbles | High2, CodeWords: 6, ScaleGroups: 8, ScaleBytes: 18, Split: true, Offset: 32, Halves: true},
	IQ4_XS: {Planes: Nibbles, CodeWords: 4, ScaleGroups: 8, ScaleBytes: 8, Codebook: &kvaluesIQ4NL},
}

// BlockTypes are the types Blocks keeps, in ggml's order.
var BlockTypes = []Type{Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4}

// Layout returns how Blocks keeps type t, and whether it keeps it.
func Layout(t Type) (BlockLayout, bool) {
	if int64(t) >= int64(len(blockLayouts)) || blockLayouts[t].CodeWords == 0 {
		return BlockLayout{}, false
	}
	return blockLayouts[t], true
}

// BlockBits is the bits a value that Blocks takes for a row of cols
// values of type t (0 if it does not keep t).
func BlockBits(t Type, cols int) float64 {
	if _, ok := Layout(t); !ok || cols <= 0 {
		return 0
	}
	return float64(BlocksBytes(t, 1, cols)) * 8 / float64(cols)
}

// BlocksBytes is the storage size of a rows × cols matrix of type t.
func BlocksBytes(t Type, rows, cols int) int64 {
	l := blockLayouts[t]
	g := (cols + BlockGroup - 1) / BlockGroup
	return 4 * int64(rows) * int64(g*l.CodeWords+l.rowScaleWords(g))
}

func (l BlockLayout) rowScaleWords(groups int) int {
	if l.ScaleGroups == 0 {
		return 0
	}
	return ((groups+l.ScaleGroups-1)/l.ScaleGroups*l.ScaleBytes + 3) / 4
}

// factorsAt is the byte of a row's scale words (of groups groups) where
// scale block b's bytes start, and with Split where its factors do (its
// d is at byte 2b).
func (l BlockLayout) factorsAt(b, groups int) int {
	if l.Split {
		return 2*(groups/l.ScaleGroups) + (l.ScaleBytes-2)*b
	}
	return l.ScaleBytes * b
}

// Groups is the number of groups a row: Cols/32.
func (b *Blocks) Groups() int { return (b.Cols + BlockGroup - 1) / BlockGroup }

// Layout is b's type's layout.
func (b *Blocks) Layout() BlockLayout { return blockLayouts[b.Type] }

// RowScaleWords is the number of scale words a row.
func (b *Blocks) RowScaleWords() int { return b.Layout().rowScaleWords(b.Groups()) }

// Bytes is the storage size.
func (b *Blocks) Bytes() int64 { return 4 * int64(len(b.Codes)+len(b.Scales)) }

// Row returns the code and scale words of row r.
func (b *Blocks) Row(r int) (codes, scales []uint32) {
	cw, sw := b.Groups()*b.Layout().CodeWords, b.RowScaleWords()
	return b.Codes[r*cw : (r+1)*cw], b.Scales[r*sw : (r+1)*sw]
}

// GroupCodes sets c to the codes of the group whose code words are w:
// a codebook's level, or the stored bits less the layout's offset.
func (l *BlockLayout) GroupCodes(w []uint32, c *[BlockGroup]int8) {
	for i := range c {
		var q int
		switch l.Planes {
		case Bytes8:
			c[i] = int8(byteOf(w, i%2*16+i/2))
			continue
		case Nibbles:
			q = nibble(w, i)
		case Nibbles | High1:
			q = nibble(w, i) | bit(w[4], i)<<4
		case Nibbles | High2:
			q = nibble(w, i) | field2(w[4:6], i)<<4
		case Low2:
			q = field2(w, i)
		case Low2 | High1:
			q = field2(w, i) | bit(w[2], i)<<2
		}
		if l.Codebook != nil {
			c[i] = l.Codebook[q]
		} else {
			c[i] = int8(q - l.Offset)
		}
	}
}

func byteOf(w []uint32, k int) uint8     { return uint8(w[k/4] >> (8 * (k % 4))) }
func nibble(w []uint32, i int) int       { return int(w[i/8] >> (4 * (i % 8)) & 15) }
func bit(h uint32, i int) int            { return int(h >> (i%2*16 + i/2) & 1) }
func field2(w []uint32, i int) int       { return int(byteOf(w, i/2%8) >> (2*(i%2) + 4*(i/16)) & 3) }
func putBit(w []uint32, i, v int)        { w[0] |= uint32(v&1) << (i%2*16 + i/2) }
func putByte(w []uint32, k int, v uint8) { w[k/4] |= uint32(v) << (8 * (k % 4)) }

// GroupScale is the scales of group g of a row of groups groups whose
// scale words are s: lo and hi for its inputs 0..15 and 16..31 (equal
// unless the layout has Halves), and the mins likewise (0 without mins).
func GroupScale(t Type, s []uint32, g, groups int) (lo, hi, mlo, mhi float32) {
	tab := f16Table()
	half := func(w uint32, h int) float32 { return tab[uint16(w>>(16*h))] }
	l := blockLayouts[t]
	j, at := g%8, l.factorsAt(g/8, groups) // a K type's super-block: its group, its bytes
	bytes := func(n int) []byte {
		b := make([]byte, n)
		for k := range b {
			b[k] = byteOf(s, at+k)
		}
		return b
	}
	switch t {
	case Q4_0, Q5_0, Q8_0, IQ4_NL:
		lo = half(s[g/2], g%2)
		return lo, lo, 0, 0
	case Q4_1, Q5_1:
		lo, mlo = half(s[g], 0), half(s[g], 1)
		return lo, lo, mlo, mlo
	case MXFP4:
		lo = e8m0Half(byteOf(s, g))
		return lo, lo, 0, 0
	case Q4_K, Q5_K:
		b := bytes(16)
		d, dmin := f16(b), f16(b[2:])
		sc, m := scaleMinK4(j, b[4:])
		lo, mlo = d*float32(sc), -(dmin * float32(m))
		return lo, lo, mlo, mlo
	case Q6_K:
		d, b := half(s[g/8/2], g/8%2), bytes(16)
		return d * float32(int8(b[2*j])), d * float32(int8(b[2*j+1])), 0, 0
	case Q3_K:
		d, sc := half(s[g/8/2], g/8%2), Q3KScales(bytes(12))
		return d * float32(sc[2*j]), d * float32(sc[2*j+1]), 0, 0
	case Q2_K:
		b := bytes(20)
		d, dmin := f16(b), f16(b[2:])
		a, c := b[4+2*j], b[5+2*j]
		return d * float32(a&15), d * float32(c&15), -(dmin * float32(a>>4)), -(dmin * float32(c>>4))
	case IQ4_XS:
		b := bytes(8)
		lo = f16(b) * float32(IQ4XSScale(le.Uint16(b[2:]), b[4:], j))
		return lo, lo, 0, 0
	}
	panic(fmt.Sprintf("dtype: %v is no block layout", t))
}

// DequantizeRow writes the Cols values of row r into dst.
func (b *Blocks) DequantizeRow(r int, dst []float32) {
	l := b.Layout()
	codes, scales := b.Row(r)
	var c [BlockGroup]int8
	for g := range b.Groups() {
		l.GroupCodes(codes[g*l.CodeWords:(g+1)*l.CodeWords], &c)
		lo, hi, mlo, mhi := GroupScale(b.Type, scales, g, b.Groups())
		out := dst[g*BlockGroup : (g+1)*BlockGroup]
		for i, q := range c {
			s, m := lo, mlo
			if i >= BlockGroup/2 {
				s, m = hi, mhi
			}
			out[i] = float32(s*float32(q)) + m
		}
	}
}

// Dequantize returns all values, row-major.
func (b *Blocks) Dequantize() []float32 {
	out := make([]float32, b.Rows*b.Cols)
	for r := range b.Rows {
		b.DequantizeRow(r, out[r*b.Cols:(r+1)*b.Cols])
	}
	return out
}

// BlocksFromGGML repacks a rows × cols tensor of type t, as a GGUF file
// stores it, into Blocks: no code or scale changes, only where its bits
// lie. cols must be a whole number of t's blocks.
func BlocksFromGGML(t Type, raw []byte, rows, cols int) (*Blocks, error) {
	l, ok := Layout(t)
	if !ok {
		return nil, fmt.Errorf("dtype: blocks: %v has no block layout", t)
	}
	bs, bb := t.BlockSize(), t.BlockBytes()
	if cols%bs != 0 {
		return nil, fmt.Errorf("dtype: blocks: rows of %d values are not whole %v blocks", cols, t)
	}
	need, err := Bytes(t, int64(rows)*int64(cols))
	if err != nil {
		return nil, err
	}
	if int64(len(raw)) < need {
		return nil, fmt.Errorf("dtype: blocks: %d×%d %v needs %d bytes, have %d", rows, cols, t, need, len(raw))
	}
	b := &Blocks{Type: t, Rows: rows, Cols: cols}
	G := b.Groups()
	cw, sw := G*l.CodeWords, b.RowScaleWords()
	// Scales has room for eight groups' scale words past the end: the
	// CPU's vector kernels read a row's scales eight groups at a time.
	b.Codes, b.Scales = make([]uint32, rows*cw), make([]uint32, rows*sw, rows*sw+8)
	var q [qkK]uint8
	for r := range rows {
		codes, scales := b.Codes[r*cw:(r+1)*cw], b.Scales[r*sw:(r+1)*sw]
		for k := range cols / bs {
			blk := raw[(r*cols/bs+k)*bb:][:bb]
			g0 := k * bs / BlockGroup
			if !nibbleCodes(t, blk, codes[g0*l.CodeWords:(g0+bs/BlockGroup)*l.CodeWords]) {
				storedCodes(t, blk, &q)
				for sub := range bs / BlockGroup {
					g := g0 + sub
					packGroup(&l, q[sub*BlockGroup:(sub+1)*BlockGroup], codes[g*l.CodeWords:(g+1)*l.CodeWords])
				}
			}
			packScales(t, blk, g0, G, scales)
		}
	}
	return b, nil
}

// nibbleCodes writes the codes of block blk of a type whose codes are its
// nibbles or 2-bit fields (and for Q6_K and Q3_K their top bits' plane)
// straight into w, its groups' words: what storedCodes and then packGroup
// give, eight codes a word at a time. It reports whether t is such a type
// (Q4_0, Q4_1, IQ4_NL, MXFP4 and IQ4_XS: 16 bytes a group, input j in
// byte j's low nibble and j+16 in its high one; Q4_K: 32 bytes a pair of
// groups, the first's inputs in their low nibbles, the second's in their
// high ones; Q6_K, whose top two bits a code lie in a plane of their own;
// Q2_K and Q3_K, group 4n+k's inputs the 2-bit fields 2k of 32 bytes,
// Q3_K's third bits bit g of its 32 hmask bytes).
func nibbleCodes(t Type, blk []byte, w []uint32) bool {
	var qs []byte
	switch t {
	case Q4_0, IQ4_NL:
		qs = blk[2:18]
	case Q4_1:
		qs = blk[4:20]
	case MXFP4:
		qs = blk[1:17]
	case IQ4_XS:
		qs = blk[8:136]
	case Q4_K:
		for j := range 4 {
			for k := range 4 {
				x := le.Uint64(blk[16+32*j+8*k:])
				w[8*j+k], w[8*j+4+k] = packNibbles(x), packNibbles(x>>4)
			}
		}
		return true
	case Q6_K:
		// Group 4n+k's low four bits are the low (k < 2) or high nibbles
		// of bytes 64n + 32(k%2).., its top two bits 2k of bytes
		// 128 + 32n..; six words a group.
		for n := range 2 {
			for k := range 4 {
				g := w[6*(4*n+k):]
				for m := range 4 {
					g[m] = packNibbles(le.Uint64(blk[64*n+32*(k%2)+8*m:]) >> (4 * (k / 2)))
				}
				qh := blk[128+32*n:]
				g[4] = packPairs(le.Uint64(qh)>>(2*k), le.Uint64(qh[16:])>>(2*k))
				g[5] = packPairs(le.Uint64(qh[8:])>>(2*k), le.Uint64(qh[24:])>>(2*k))
			}
		}
		return true
	case Q2_K, Q3_K:
		qs, cw := blk[16:80], 2
		if t == Q3_K {
			qs, cw = blk[32:96], 3
		}
		for g := range 8 {
			q, k := qs[32*(g/4):], 2*(g%4)
			gw := w[cw*g:]
			gw[0] = packPairs(le.Uint64(q)>>k, le.Uint64(q[16:])>>k)
			gw[1] = packPairs(le.Uint64(q[8:])>>k, le.Uint64(q[24:])>>k)
			if t == Q3_K {
				gw[2] = 0
				for i, m := range blk[:32] {
					putBit(gw[2:], i, int(m>>g))
				}
			}
		}
		return true
	default:
		return false
	}
	for g := range len(qs) / 16 {
		lo, hi := le.Uint64(qs[16*g:]), le.Uint64(qs[16*g+8:])
		w[4*g], w[4*g+1], w[4*g+2], w[4*g+3] = packNibbles(lo), packNibbles(hi), packNibbles(lo>>4), packNibbles(hi>>4)
	}
	return true
}

// storedCodes writes the stored codes of one block of type t in value
// order: the unsigned bits before any offset or codebook (Q8_0: the int8
// bits; Q3_K: the low 2 bits with the hmask bit as bit 2). The types
// whose codes are their nibbles alone go through nibbleCodes instead.
func storedCodes(t Type, blk []byte, q *[qkK]uint8) {
	switch t {
	case Q5_0, Q5_1:
		off := 2
		if t == Q5_1 {
			off = 4
		}
		qh, qs := le.Uint32(blk[off:]), blk[off+4:]
		for j := range 16 {
			h0, h1 := q5High(qh, j)
			q[j], q[j+16] = qs[j]&15|h0, qs[j]>>4|h1
		}
	case Q8_0:
		copy(q[:], blk[2:34])
	case Q5_K:
		// Values 64j..64j+31 are the low nibbles of bytes 48+32j.., the
		// next 32 their high ones; their fifth bits are bits 2j and 2j+1
		// of byte 16+l.
		for j := range 4 {
			for l, b := range blk[48+32*j : 48+32*j+32] {
				h := blk[16+l] >> (2 * j)
				q[64*j+l], q[64*j+32+l] = b&15|h&1<<4, b>>4|h>>1&1<<4
			}
		}
	default:
		panic("dtype: storedCodes of " + t.String())
	}
}

// packGroup stores the 32 stored codes q of a group as l's planes in w.
func packGroup(l *BlockLayout, q []uint8, w []uint32) {
	clear(w)
	switch l.Planes {
	case Bytes8:
		for i, c := range q {
			putByte(w, i%2*16+i/2, c)
		}
		return
	}
	// The nibble plane (Q5_0, Q5_1, Q5_K: the others with one go through
	// nibbleCodes): inputs 8k..8k+7's low four bits in word k, eight bytes
	// at a time.
	for k := range 4 {
		w[k] = packNibbles(le.Uint64(q[8*k:]))
	}
	if l.Planes&High1 != 0 {
		for i, c := range q {
			putBit(w[4:], i, int(c>>4))
		}
	}
}

// packPairs is a word of a 2-bit plane (field2's places) from the low
// two bits of the bytes of lo (inputs 2b and 2b+1 of byte b of the word,
// bits 0..3) and of hi (inputs 16+2b and 17+2b, bits 4..7).
func packPairs(lo, hi uint64) uint32 {
	pair := func(x uint64) uint64 { // bytes 2b, 2b+1's two bits as 4 in 16-bit lane b
		x &= 0x0303030303030303
		return (x | x>>6) & 0x000f000f000f000f
	}
	x := pair(lo) | pair(hi)<<4
	x = (x | x>>8) & 0x0000ffff0000ffff
	return uint32(x | x>>16)
}

// packNibbles is the low four bits of x's eight bytes side by side, byte
// k's at bits 4k..4k+3.
func packNibbles(x uint64) uint32 {
	x &= 0x0f0f0f0f0f0f0f0f
	x = (x | x>>4) & 0x00ff00ff00ff00ff
	x = (x | x>>8) & 0x0000ffff0000ffff
	return uint32(x | x>>16)
}

// packScales stores the scales of the block blk of type t, whose first
// group is group g0 of its row of groups groups, into the row's scale
// words s.
func packScales(t Type, blk []byte, g0, groups int, s []uint32) {
	switch t {
	case Q4_0, Q5_0, Q8_0, IQ4_NL:
		s[g0/2] |= uint32(le.Uint16(blk)) << (16 * (g0 % 2))
	case Q4_1, Q5_1:
		s[g0] = le.Uint32(blk)
	case MXFP4:
		putByte(s, g0, blk[0])
	case Q4_K, Q5_K, Q2_K, IQ4_XS, Q3_K, Q6_K:
		var rec []byte // the block's scale bytes as Blocks keeps them
		switch t {
		case Q4_K, Q5_K:
			rec = blk[:16]
		case Q2_K:
			rec = append(append([]byte{}, blk[80:84]...), blk[:16]...)
		case IQ4_XS:
			rec = blk[:8]
		case Q3_K:
			rec = append(append([]byte{}, blk[108:110]...), blk[96:108]...)
		case Q6_K:
			rec = append(append([]byte{}, blk[208:210]...), blk[192:208]...)
		}
		l := blockLayouts[t]
		at := l.factorsAt(g0/8, groups)
		if l.Split { // d apart
			putByte(s, 2*(g0/8), rec[0])
			putByte(s, 2*(g0/8)+1, rec[1])
			rec = rec[2:]
		}
		for k, v := range rec {
			putByte(s, at+k, v)
		}
	}
}
