package dtype

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
)

// quantizers lists the types Quantize can produce. Each function fills
// dst (exactly the encoded size) from src (a whole number of blocks).
//
// Unlike ggml's reference quantizers, these derive the codes from the
// scales as rounded to f16, i.e. from what the decoder will multiply by;
// that matters for blocks whose scale is near the f16 subnormal range.
var quantizers = map[Type]func(src []float32, dst []byte){
	F32:  quantF32,
	F16:  quantF16,
	BF16: quantBF16,
	Q4_0: quantQ4_0,
	Q4_1: quantQ4_1,
	Q5_0: quantQ5_0,
	Q5_1: quantQ5_1,
	Q8_0: quantQ8_0,
	Q4_K: quantQ4K,
	Q5_K: quantQ5K,
	Q6_K: quantQ6K,
	Q2_K: quantQ2K,
	Q3_K: quantQ3K,

	IQ4_NL: quantIQ4NL,
	IQ4_XS: quantIQ4XS,
	MXFP4:  quantMXFP4,
}

// Quantize encodes src as type t in ggml's layout. len(src) must be a whole
// number of t's blocks. It exists so that tests and tools can produce
// quantized tensors; its choice of scales aims at low error, not at
// matching llama.cpp's quantizer bit for bit, but every block it produces
// decodes with the ggml formulas.
func Quantize(t Type, src []float32) ([]byte, error) {
	q, ok := quantizers[t]
	if !ok {
		return nil, fmt.Errorf("dtype: quantize: unsupported tensor type %v", t)
	}
	n, err := Bytes(t, int64(len(src)))
	if err != nil {
		return nil, err
	}
	dst := make([]byte, n)
	q(src, dst)
	return dst, nil
}

// QuantizeRows is Quantize of a matrix of rows of rowLen values (each a
// whole number of t's blocks), in pieces of whole rows spread over the
// cores, stopping when ctx is done: a tensor of the slow types (IQ4_XS's
// scale search) takes seconds, and a tool's Ctrl-C or SIGTERM must not
// wait for it. Every block is encoded alone, so the bytes are Quantize's.
func QuantizeRows(ctx context.Context, t Type, src []float32, rowLen int) ([]byte, error) {
	q, ok := quantizers[t]
	if !ok {
		return nil, fmt.Errorf("dtype: quantize: unsupported tensor type %v", t)
	}
	if rowLen <= 0 || len(src)%rowLen != 0 {
		return nil, fmt.Errorf("dtype: quantize: %d values are not rows of %d", len(src), rowLen)
	}
	rowBytes, err := Bytes(t, int64(rowLen))
	if err != nil {
		return nil, err
	}
	rows := len(src) / rowLen
	dst := make([]byte, int64(rows)*rowBytes)
	// Pieces of about 64K values: small enough to stop within
	// milliseconds, large enough that handing them out costs nothing.
	per := max(1, (1<<16)/rowLen)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), (rows+per-1)/per) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				r0 := int(next.Add(int64(per))) - per
				if r0 >= rows {
					return
				}
				r1 := min(rows, r0+per)
				q(src[r0*rowLen:r1*rowLen], dst[int64(r0)*rowBytes:int64(r1)*rowBytes])
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return dst, nil
}

func quantF32(src []float32, dst []byte) {
	for i, v := range src {
		le.PutUint32(dst[4*i:], math.Float32bits(v))
	}
}

func quantF16(src []float32, dst []byte) {
	for i, v := range src {
		putF16(dst[2*i:], v)
	}
}

func quantBF16(src []float32, dst []byte) {
	for i, v := range src {
		le.PutUint16(dst[2*i:], f32ToBF16(v))
	}
}

// signedMax returns the element of largest magnitude, keeping its sign.
// Symmetric formats map it to the extreme code of the wider side (-8 for
// 4 bits) so that the largest weight is represented exactly.
func signedMax(x []float32) float32 {
	var amax, m float32
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax, m = a, v
		}
	}
	return m
}

func minMax(x []float32) (lo, hi float32) {
	lo, hi = x[0], x[0]
	for _, v := range x[1:] {
		lo, hi = min(lo, v), max(hi, v)
	}
	return lo, hi
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

// inverse returns 1/d, or 0 for an all-zero block so that every code
// becomes the zero point instead of NaN.
func inverse(d float32) float32 {
	if d == 0 {
		return 0
	}
	return 1 / d
}

// code rounds v half up to an integer code in [0, hi]; NaN maps to 0.
// It sits in every quantizer's inner loop, hence the clamp-then-truncate
// instead of math.Round.
func code(v float32, hi int) int {
	switch {
	case !(v > 0):
		return 0
	case v >= float32(hi):
		return hi
	}
	return int(float32(v) + 0.5) // float32(v): not fused with a product the caller passes
}

// quantQ4_0 uses d = max/-8, so codes run from the max's side at 0 to the
// opposite side, clamped at 15.
func quantQ4_0(src []float32, dst []byte) {
	const bb = 2 + qk/2
	for b := 0; b < len(src)/qk; b++ {
		x, blk := src[b*qk:(b+1)*qk], dst[b*bb:(b+1)*bb]
		putF16(blk, signedMax(x)/-8)
		id := inverse(f16(blk))
		for j := range qk / 2 {
			lo := code(float32(x[j]*id)+8, 15)
			hi := code(float32(x[j+qk/2]*id)+8, 15)
			blk[2+j] = byte(lo | hi<<4)
		}
	}
}

// quantQ4_1 spreads 16 codes evenly over [min, max].
func quantQ4_1(src []float32, dst []byte) {
	const bb = 4 + qk/2
	for b := 0; b < len(src)/qk; b++ {
		x, blk := src[b*qk:(b+1)*qk], dst[b*bb:(b+1)*bb]
		lo, hi := minMax(x)
		putF16(blk, (hi-lo)/15)
		putF16(blk[2:], lo)
		id, lo := inverse(f16(blk)), f16(blk[2:])
		for j := range qk / 2 {
			c0 := code((x[j]-lo)*id, 15)
			c1 := code((x[j+qk/2]-lo)*id, 15)
			blk[4+j] = byte(c0 | c1<<4)
		}
	}
}

// putQ5 stores 32 five-bit codes: low nibbles as in Q4_0, fifth bits in
// the little-endian u32 qh (bit j for element j).
func putQ5(codes *[qk]int, qh, qs []byte) {
	var h uint32
	for j := range qk / 2 {
		qs[j] = byte(codes[j]&0x0f | (codes[j+qk/2]&0x0f)<<4)
		h |= uint32(codes[j]>>4) << j
		h |= uint32(codes[j+qk/2]>>4) << (j + qk/2)
	}
	le.PutUint32(qh, h)
}

func quantQ5_0(src []float32, dst []byte) {
	const bb = 2 + 4 + qk/2
	var codes [qk]int
	for b := 0; b < len(src)/qk; b++ {
		x, blk := src[b*qk:(b+1)*qk], dst[b*bb:(b+1)*bb]
		putF16(blk, signedMax(x)/-16)
		id := inverse(f16(blk))
		for j, v := range x {
			codes[j] = code(float32(v*id)+16, 31)
		}
		putQ5(&codes, blk[2:6], blk[6:])
	}
}

func quantQ5_1(src []float32, dst []byte) {
	const bb = 4 + 4 + qk/2
	var codes [qk]int
	for b := 0; b < len(src)/qk; b++ {
		x, blk := src[b*qk:(b+1)*qk], dst[b*bb:(b+1)*bb]
		lo, hi := minMax(x)
		putF16(blk, (hi-lo)/31)
		putF16(blk[2:], lo)
		id, lo := inverse(f16(blk)), f16(blk[2:])
		for j, v := range x {
			codes[j] = code((v-lo)*id, 31)
		}
		putQ5(&codes, blk[4:8], blk[8:])
	}
}

// quantQ8_0 scales the block's largest magnitude to ±127.
func quantQ8_0(src []float32, dst []byte) {
	const bb = 2 + qk
	for b := 0; b < len(src)/qk; b++ {
		x, blk := src[b*qk:(b+1)*qk], dst[b*bb:(b+1)*bb]
		putF16(blk, abs32(signedMax(x))/127)
		id := inverse(f16(blk))
		for j, v := range x {
			blk[2+j] = byte(int8(code(float32(v*id)+127, 254) - 127))
		}
	}
}
