// Package kernel holds the CPU backend's vector kernels: integer dot
// products of int4 weights with activations quantized per group of 32
// (the shape of llama.cpp's Q4_0×Q8_0 path), int8 weights with f32
// activations (DotQ8), and f32 and f16 dot products, with one plain-Go twin per
// kernel that defines its result to the bit and hand-written assembly (AVX2
// and AVX-512 on amd64, NEON on arm64) that reproduces it, chosen at run
// time from the CPU's features.
//
// Activations take 16 bits, not llama.cpp's 8: a group of 32 products
// costs the same instructions either way (the per-group scaling dominates,
// not the multiplies), and 16 bits keep the CPU's greedy tokens those of
// the WebGPU kernels, which read f32 activations. With 8 bits, stories260K
// (64 wide) parts from them after 13 tokens of a prompt.
//
// The arithmetic is fixed so that every path gives the same bits: integer
// products are exact whatever the instruction, and the float steps (one
// scale per group, eight lanes, one fixed horizontal order) are spelled out
// in the twins. A model therefore decodes to the same tokens on every CPU.
package kernel

import (
	"math"

	"github.com/tessera-llm/tessera/models/dtype"
)

// Group is the number of consecutive inputs that share a scale: the Int4
// weight format's group, so that one weight group meets one activation
// group.
const Group = dtype.Int4GroupSize

// Max is the largest code of a quantized activation.
const Max = 32767

// QRow is a row of activations quantized for dot products with Int4 rows:
// per group of 32 inputs, int16 codes and a scale d (x ≈ d·q), and the
// exact f32 sum of the group's inputs, which meets the weights' per-group
// min without rounding the inputs.
//
// Codes are stored in the order in which Int4 code bytes unpack, so that a
// kernel multiplies unpacked nibbles and codes without shuffling: a group's
// low nibbles are its even inputs (0, 2, …, 30), its high nibbles the odd
// ones, and a 512-bit register unpacks two groups at once. So groups go in
// pairs, 64 codes each: the even inputs of the first group, the even inputs
// of the second, the odd inputs of the first, the odd inputs of the second
// (CodeIndex). A last group without a partner holds its even inputs, then
// its odd ones. DS holds d and the sum of group g at 2g and 2g+1.
type QRow struct {
	Cols   int
	Codes  []int16   // Groups()·32, padded with 0
	DS     []float32 // Groups()·2: scale, sum
	Halves []float32 // Groups()·2 sums of 16 inputs, where SumHalves made them

	// The same row quantized per super-block of 256 inputs, for the K
	// quants' integer products (blocks_k.go): codes in Codes' order and
	// one scale a super-block.
	KCodes []int16   // Groups()·32, padded with 0
	KD     []float32 // ceil(Cols/256)
	KSums  []float32 // Groups(): DS's sums, one after the other

	// hasK says whether KCodes, KD and KSums hold the row (Quantize,
	// QuantizeK), not a previous one's: QuantizeGroups leaves them, since
	// only the K quants' products read them and their quantizing costs a
	// tenth of a Q4_0 prompt's time.
	hasK bool
}

// Groups is ceil(Cols/32).
func (q *QRow) Groups() int { return (q.Cols + Group - 1) / Group }

// Resize makes q hold a row of cols inputs, reusing its storage.
func (q *QRow) Resize(cols int) {
	q.Cols, q.hasK = cols, false
	g := q.Groups()
	if cap(q.Codes) < g*Group {
		// DS has room for a chunk of eight groups past a row's last
		// (dotBlocksAsm reads a chunk whole).
		q.Codes, q.DS = make([]int16, g*Group), make([]float32, 2*g, 2*g+16)
	}
	q.Codes, q.DS, q.Halves = q.Codes[:g*Group], q.DS[:2*g], q.Halves[:0]
	if cap(q.KCodes) < g*Group {
		q.KCodes = make([]int16, g*Group)
	}
	nk := (cols + KBlock - 1) / KBlock
	if cap(q.KD) < nk {
		q.KD = make([]float32, nk)
	}
	if cap(q.KSums) < g {
		q.KSums = make([]float32, g)
	}
	q.KCodes, q.KD, q.KSums = q.KCodes[:g*Group], q.KD[:nk], q.KSums[:g]
}

// CodeIndex is where in QRow.Codes input i of group g of a row of groups
// groups lies.
func CodeIndex(g, groups, i int) int {
	if g < groups&^1 {
		return g/2*2*Group + i%2*Group + g%2*Group/2 + i/2
	}
	return g*Group + i%2*Group/2 + i/2
}

// Quantize sets q to the row x, group by group as quantizeGo defines it
// (in vector code where the CPU has it), and per super-block as quantizeK
// does.
func (q *QRow) Quantize(x []float32) {
	q.QuantizeGroups(x)
	q.QuantizeK(x)
}

// QuantizeGroups sets q to the row x group by group only (Quantize
// without the per-super-block codes): enough for every product but the K
// quants', which need QuantizeK of the same x first.
func (q *QRow) QuantizeGroups(x []float32) {
	q.Resize(len(x))
	G, pairs := q.Groups(), len(x)/(2*Group)
	switch {
	case pairs > 0 && hasAVX2:
		quantizeAVX2(&x[0], &q.Codes[0], &q.DS[0], pairs)
	case pairs > 0 && hasNEON:
		quantizeNEON(&x[0], &q.Codes[0], &q.DS[0], pairs)
	default:
		pairs = 0
	}
	for g := 2 * pairs; g < G; g++ {
		quantizeGo(x[g*Group:min(len(x), (g+1)*Group)], q.Codes, g, G, q.DS[2*g:2*g+2])
	}
}

// QuantizeK adds the per-super-block codes of x (quantizeK) to a row that
// QuantizeGroups made of x, unless it has them already.
func (q *QRow) QuantizeK(x []float32) {
	if !q.hasK {
		q.quantizeK(x)
		q.hasK = true
	}
}

// HasK says whether q holds its row's per-super-block codes (Quantize or
// QuantizeK), which the K quants' products read.
func (q *QRow) HasK() bool { return q.hasK }

// needK panics where a K quant's product meets a row without its
// per-super-block codes: a caller's bug (QuantizeGroups without
// QuantizeK), which would otherwise read another row's codes.
func needK(q *QRow) {
	if !q.hasK {
		panic("kernel: a K quant's product needs QRow.QuantizeK first")
	}
}

// quantizeGo is the definition of the quantization of group g of a row of
// groups groups, from up to 32 inputs (missing ones are 0): d = max|x|/Max,
// codes round(x·(1/d)) to nearest, ties to even, placed by CodeIndex; the
// sum folds the 32 inputs as four 8-wide registers are folded: (r0+r1) +
// (r2+r3), then ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)).
//
// Where 1/d is not finite the codes are 0: an all-zero group (d = 0), and
// one so small (max|x| below about 1e-34) that 1/d overflows, where
// x·(1/d) would be ±Inf, whose conversion to int16 Go leaves to each
// architecture (and AVX2 saturates). Such a group's products are then 0,
// against at most about 1e-33 times its weights. Every finite 1/d keeps
// the codes within ±Max.
func quantizeGo(x []float32, codes []int16, g, groups int, ds []float32) {
	var in [Group]float32
	copy(in[:], x)
	var amax float32
	for _, v := range in {
		amax = max(amax, abs(v))
	}
	var r [Lanes]float32
	for j := range Lanes {
		r[j] = (in[j] + in[8+j]) + (in[16+j] + in[24+j])
	}
	sum := ((r[0] + r[4]) + (r[2] + r[6])) + ((r[1] + r[5]) + (r[3] + r[7]))
	d := amax / Max
	inv := 1 / d
	if !(inv <= math.MaxFloat32) { // +Inf, or NaN from a NaN input
		inv = 0
	}
	for i, v := range in {
		codes[CodeIndex(g, groups, i)] = int16(math.RoundToEven(float64(v * inv)))
	}
	ds[0], ds[1] = d, sum
}

func abs(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }
