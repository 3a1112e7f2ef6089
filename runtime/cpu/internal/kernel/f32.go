package kernel

import "github.com/x448/float16"

// Block is the number of f32 products DotF32 sums in independent lanes:
// four 8-wide registers, so that the adds of one block do not wait on
// each other.
const Block = 32

// DotF32 returns Σ a_i·b_i over len(a) values (b at least as long), in the
// order dotF32Go spells out on every path.
func DotF32(a, b []float32) float32 {
	n := len(a) &^ (Block - 1)
	b = b[:len(a)]
	var s float32
	if n > 0 {
		switch {
		case hasAVX2:
			s = dotF32AVX2(&a[0], &b[0], n)
		case hasNEON:
			s = dotF32NEON(&a[0], &b[0], n)
		default:
			s = dotF32Go(a[:n], b[:n])
		}
	}
	for i := n; i < len(a); i++ {
		s += float32(a[i] * b[i])
	}
	return s
}

// DotF32x4 sets out[r] to DotF32(w, xs[r]) for four rows at once, reading w
// once for all of them (the batched path of prompts); every result equals
// DotF32's bit for bit.
func DotF32x4(w []float32, xs *[4][]float32, out *[4]float32) {
	n := len(w) &^ (Block - 1)
	for r := range xs {
		xs[r] = xs[r][:len(w)]
	}
	*out = [4]float32{}
	if n > 0 {
		switch {
		case hasAVX2:
			dotF32x4AVX2(&w[0], &[4]*float32{&xs[0][0], &xs[1][0], &xs[2][0], &xs[3][0]}, n, out)
		case hasNEON:
			dotF32x4NEON(&w[0], &[4]*float32{&xs[0][0], &xs[1][0], &xs[2][0], &xs[3][0]}, n, out)
		default:
			for r, x := range xs {
				out[r] = dotF32Go(w[:n], x[:n])
			}
		}
	}
	for r, x := range xs {
		for i := n; i < len(w); i++ {
			out[r] += float32(w[i] * x[i])
		}
	}
}

// DotF32Rows sets out[i·stride] to DotF32(w, x[i·k : (i+1)·k]) for the m
// rows of x, k being len(w): one weight row against every input row of a
// matrix product, in one call (AVX2: two rows at a time in registers, w's
// block loaded once for both; elsewhere DotF32x4's kernels four rows at a
// time). A batched decode step's products are many short dot products
// (stories260K's are 64 values), where a call per four rows cost more
// than the products. Every result equals DotF32's bit for bit.
func DotF32Rows(out []float32, stride int, w, x []float32, m int) {
	k := len(w)
	if m == 0 {
		return
	}
	_, _ = x[m*k-1], out[(m-1)*stride]
	n := k &^ (Block - 1)
	if n == 0 || !hasAVX2 {
		i := 0
		var o [4]float32
		for ; i+4 <= m; i += 4 {
			xs := [4][]float32{x[i*k : (i+1)*k], x[(i+1)*k : (i+2)*k], x[(i+2)*k : (i+3)*k], x[(i+3)*k : (i+4)*k]}
			DotF32x4(w, &xs, &o)
			for r, v := range o {
				out[(i+r)*stride] = v
			}
		}
		for ; i < m; i++ {
			out[i*stride] = DotF32(w, x[i*k:(i+1)*k])
		}
		return
	}
	dotF32RowsAVX2(&w[0], &x[0], n, k, m, &out[0], stride)
}

// DotF32Block sets out[i·stride + j] to DotF32(w[j·k : (j+1)·k],
// x[i·xstride : i·xstride+k]) for the nw weight rows of w (k = len(w)/nw)
// and m input rows of x: a block of a matrix product, or of attention's
// scores (weights: keys; inputs: queries), in one call. With AVX-512 it
// goes four weight rows by three input rows at a time, twelve sums in
// registers each in its own 32 lanes (dotF32TileAVX512): each weight block
// loaded once for three rows and each input block once for four, where
// DotF32Rows' pairs loaded a weight block per two sums. The rest, and
// every other path, is DotF32Rows (xstride k) or DotF32 one by one. Every
// result equals DotF32's bit for bit.
func DotF32Block(out []float32, stride int, w []float32, nw int, x []float32, xstride, m int) {
	dotBlock(out, stride, w, nw, x, xstride, m, dotF32TileAVX512, DotF32Rows, DotF32)
}

// DotF16Block is DotF32Block for weight rows of IEEE halves: each widens
// exactly, so out[i·stride + j] = DotF16(x_i, w_j), DotF32 of the f32
// values, bit for bit; the tile is the f32 one's body with the halves
// widened as they load (dotF16TileAVX512), the rest DotF16Rows or DotF16.
func DotF16Block(out []float32, stride int, w []uint16, nw int, x []float32, xstride, m int) {
	dotBlock(out, stride, w, nw, x, xstride, m, dotF16TileAVX512, DotF16Rows,
		func(w []uint16, x []float32) float32 { return DotF16(x, w) })
}

// dotBlock is DotF32Block and DotF16Block for weights of element T: the
// tile kernel over four weight rows and a multiple of three input rows,
// then rows (DotF32Rows' form, inputs k apart) or one (a single product)
// for the rest.
func dotBlock[T float32 | uint16](out []float32, stride int, w []T, nw int, x []float32, xstride, m int,
	tile func(w *T, x *float32, nb, k, xstride, m int, out *float32, stride int),
	rows func(out []float32, stride int, w []T, x []float32, m int),
	one func(w []T, x []float32) float32) {
	if nw == 0 || m == 0 {
		return
	}
	k := len(w) / nw
	_, _ = x[(m-1)*xstride+k-1], out[(m-1)*stride+nw-1]
	rest := func(out []float32, w []T, nw int, x []float32, m int) {
		for j := range nw {
			wj := w[j*k : (j+1)*k]
			if xstride == k {
				rows(out[j:], stride, wj, x, m)
				continue
			}
			for i := range m {
				out[i*stride+j] = one(wj, x[i*xstride:i*xstride+k])
			}
		}
	}
	nb := k &^ (Block - 1)
	j := 0
	if m3 := m - m%3; hasF32Tile && nb > 0 && m3 > 0 {
		for ; j+4 <= nw; j += 4 {
			tile(&w[j*k], &x[0], nb, k, xstride, m3, &out[j], stride)
		}
		if m3 < m && j > 0 {
			rest(out[m3*stride:], w[:j*k], j, x[m3*xstride:], m-m3)
		}
	}
	if j < nw {
		rest(out[j:], w[j*k:], nw-j, x, m)
	}
}

// KeysTile is how many keys DotF32Keys takes at once: a 512-bit
// register's lanes.
const KeysTile = 16

// TransposeKeys sets kt[d·KeysTile + at + t] to keys[t·k + d] for the n
// keys of k values in keys (at + n ≤ KeysTile), and zeroes the values of
// keys at + n and up: DotF32Keys' layout, a tile filled from one run of
// records or from several, one after the other.
func TransposeKeys(kt, keys []float32, at, n, k int) {
	kt = kt[:KeysTile*k]
	for d := range k {
		row := kt[d*KeysTile : (d+1)*KeysTile]
		for t := range n {
			row[at+t] = keys[t*k+d]
		}
		clear(row[at+n:])
	}
}

// KeysKernel reports whether DotF32Keys runs a vector kernel here
// (AVX-512); elsewhere it is DotF32 key by key, with the keys put back,
// and a caller does better with DotF32Rows over the keys as stored.
func KeysKernel() bool { return hasF32Tile }

// DotF32Keys sets out[i·stride + t] to DotF32(x[i·xstride : i·xstride+k],
// key t) for the first n of the KeysTile keys of k values that kt holds
// transposed (TransposeKeys) and m rows of x: attention's scores of a run
// of keys for many query rows. Where a row's dot products are short (a
// vision tower's heads are 72 values), DotF32's fold and tail cost more
// than its blocks; here each of the definition's 32 lanes is a register
// of sixteen keys, so the fold and the tail are sixteen keys' at a time
// (dotF32KeysAVX512, AVX-512, k of at least 32). Elsewhere it is DotF32
// on each key put back. Every result equals DotF32's bit for bit.
func DotF32Keys(out []float32, stride int, kt []float32, n, k int, x []float32, xstride, m int) {
	if m == 0 || n == 0 {
		return
	}
	kt = kt[:KeysTile*k]
	_, _ = x[(m-1)*xstride+k-1], out[(m-1)*stride+n-1]
	if nb := k &^ (Block - 1); hasF32Tile && nb > 0 {
		if n == KeysTile && stride >= KeysTile {
			dotF32KeysAVX512(&x[0], nb, k, xstride, m, &kt[0], &out[0], stride)
			return
		}
		var tmp [8 * KeysTile]float32 // a partial tile's scores, eight rows at a time
		for i := 0; i < m; i += 8 {
			rows := min(8, m-i)
			dotF32KeysAVX512(&x[i*xstride], nb, k, xstride, rows, &kt[0], &tmp[0], KeysTile)
			for r := range rows {
				copy(out[(i+r)*stride:(i+r)*stride+n], tmp[r*KeysTile:])
			}
		}
		return
	}
	key := make([]float32, k)
	for t := range n {
		for d := range k {
			key[d] = kt[d*KeysTile+t]
		}
		for i := range m {
			out[i*stride+t] = DotF32(x[i*xstride:i*xstride+k], key)
		}
	}
}

// DotF16Rows is DotF32Rows for w given as IEEE halves: out[i·stride] =
// DotF16(x[i·k : (i+1)·k], w): DotF16x4 four rows at a time, the rest one
// by one. Every result equals DotF32Rows' on the f32 values bit for bit.
// Measured and not kept: dotF32RowsAVX2's pairs of rows with w's blocks
// widened (BenchmarkAddLoRA, f16, 4×r64, interleaved runs). It was faster
// where the adapters stay in cache (stories260K: 0.27–0.31 against
// 0.34–0.38 ms) and slower where they stream from memory, the case halves
// are for (smollm2-135m: 9.5–10.5 against 7.9–8.6 ms): one row at a
// time, w's first pass has the fewer instructions per line and so more
// lines in flight, and the second reads it from L1.
func DotF16Rows(out []float32, stride int, w []uint16, x []float32, m int) {
	k := len(w)
	if m == 0 {
		return
	}
	_, _ = x[m*k-1], out[(m-1)*stride]
	i := 0
	var o [4]float32
	for ; i+4 <= m; i += 4 {
		xs := [4][]float32{x[i*k : (i+1)*k], x[(i+1)*k : (i+2)*k], x[(i+2)*k : (i+3)*k], x[(i+3)*k : (i+4)*k]}
		DotF16x4(w, &xs, &o)
		for r, v := range o {
			out[(i+r)*stride] = v
		}
	}
	for ; i < m; i++ {
		out[i*stride] = DotF16(x[i*k:(i+1)*k], w)
	}
}

// dotF32Go is the definition of DotF32 over a multiple of Block values:
// lane j sums the products i ≡ j (mod 32) in order; the four registers of
// 8 lanes are folded as (r0+r1) + (r2+r3), then the 8 lanes as
// ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)).
func dotF32Go(a, b []float32) float32 {
	var acc [Block]float32
	for i := 0; i < len(a); i += Block {
		for j := range Block {
			acc[j] += float32(a[i+j] * b[i+j])
		}
	}
	var r [Lanes]float32
	for j := range Lanes {
		r[j] = (acc[j] + acc[8+j]) + (acc[16+j] + acc[24+j])
	}
	return ((r[0] + r[4]) + (r[2] + r[6])) + ((r[1] + r[5]) + (r[3] + r[7]))
}

// SiLUMul sets g[i] to g[i]·(1/(1 + e[i]))·u[i], each operation rounded
// on its own, in that order: SwiGLU's product of SiLU(g) and u once e
// holds exp(-g) (runtime/cpu's GLU). Eight values at a time with AVX2
// (a division a value cost a prompt's GLU as much as its exps), the
// same bits as the loop (siluMulGo) on every path.
func SiLUMul(g, e, u []float32) {
	e, u = e[:len(g)], u[:len(g)]
	n := 0
	if hasAVX2 {
		n = len(g) &^ (Lanes - 1)
		if n > 0 {
			siluMulAVX2(&g[0], &e[0], &u[0], n)
		}
	}
	siluMulGo(g[n:], e[n:], u[n:])
}

// siluMulGo is the definition of SiLUMul.
func siluMulGo(g, e, u []float32) {
	e, u = e[:len(g)], u[:len(g)]
	for i, x := range g {
		g[i] = float32(x*float32(1/float32(1+e[i]))) * u[i]
	}
}

// Axpy sets dst[i] += a·x[i]. Each element is one product and one sum
// whatever the path, so it equals the plain loop bit for bit.
func Axpy(dst []float32, a float32, x []float32) {
	n := len(dst) &^ (Lanes - 1)
	x = x[:len(dst)]
	switch {
	case n > 0 && hasAVX2:
		axpyAVX2(&dst[0], a, &x[0], n)
	case n > 0 && hasNEON:
		axpyNEON(&dst[0], a, &x[0], n)
	default:
		n = 0
	}
	for i := n; i < len(dst); i++ {
		dst[i] += float32(a * x[i])
	}
}

// AxpyRows adds a[r]·x[r·stride : r·stride+len(dst)] to dst for each r in
// turn: Axpy row after row, in one call. Each element is one product and
// one sum per row, rows in order, so it equals that loop of Axpy calls bit
// for bit on every path; the vector paths keep 32 elements of dst in
// registers across all the rows. Attention uses it twice: the weighted sum
// of a run of value records (rows: positions), and the scores of a run of
// positions from a key tile stored a dimension per row (rows: the head's
// dimensions, a the query), whose sequential sums are DotF32's below
// Block values. LoRA's expand adds a row's h times Bᵀ with it.
func AxpyRows(dst, a, x []float32, stride int) {
	axpyRows(dst, a, x, stride, axpyRowsAVX2, axpyRowsNEON, same)
}

// AxpyRows4 is AxpyRows(dst[r], a[r], x, stride) for four sums over the
// same rows of x at once (the dst as long as dst[0], the a as a[0]): a
// block of query rows' weighted sums over a run of value records, each
// record read once for the four. With AVX-512, 64 columns of each sum at
// a time in registers; elsewhere AxpyRows four times. Each element is one
// product and one sum a row, rows in order, so every sum equals
// AxpyRows' bit for bit.
func AxpyRows4(dst, a *[4][]float32, x []float32, stride int) {
	n, rows := len(dst[0]), len(a[0])
	if n == 0 || rows == 0 {
		return
	}
	for r := range 4 {
		dst[r], a[r] = dst[r][:n], a[r][:rows]
	}
	_ = x[(rows-1)*stride+n-1]
	v := 0
	if hasF32Tile {
		v = n &^ (Lanes - 1)
	}
	if v > 0 {
		axpyRows4AVX512(&[4]*float32{&dst[0][0], &dst[1][0], &dst[2][0], &dst[3][0]},
			&[4]*float32{&a[0][0], &a[1][0], &a[2][0], &a[3][0]}, &x[0], rows, stride, v)
	}
	if v < n {
		for r := range 4 {
			AxpyRows(dst[r][v:], a[r], x[v:], stride)
		}
	}
}

// AxpyRowsF16 is AxpyRows for x given as IEEE halves: each widens exactly,
// so the result is AxpyRows' on the f32 values, bit for bit.
func AxpyRowsF16(dst, a []float32, x []uint16, stride int) {
	axpyRows(dst, a, x, stride, axpyRowsF16AVX2, axpyRowsF16NEON, half)
}

// AxpyRows2 is AxpyRows(dst0, a0, x, stride) and AxpyRows(dst1, a1, x,
// stride) in one pass over x, the two sums interleaved (two query heads
// of a GQA group reading their kv head's records once; two rows of one
// adapter reading its Bᵀ once). dst1 and a1 are as long as dst0 and a0.
func AxpyRows2(dst0, dst1, a0, a1, x []float32, stride int) {
	axpyRows2(dst0, dst1, a0, a1, x, stride, axpyRows2AVX2, axpyRows2NEON, same)
}

// AxpyRows2F16 is AxpyRows2 for x given as IEEE halves, equal to it on the
// f32 values bit for bit.
func AxpyRows2F16(dst0, dst1, a0, a1 []float32, x []uint16, stride int) {
	axpyRows2(dst0, dst1, a0, a1, x, stride, axpyRows2F16AVX2, axpyRows2F16NEON, half)
}

func same(v float32) float32 { return v }

// axpyRows is AxpyRows for x of element T: the vector kernel (avx or neon)
// over the columns in whole registers, then the rest in Go, each x value
// widened by f.
func axpyRows[T float32 | uint16](dst, a []float32, x []T, stride int, avx, neon func(dst, a *float32, x *T, rows, stride, n int), f func(T) float32) {
	if len(a) == 0 || len(dst) == 0 {
		return
	}
	_ = x[(len(a)-1)*stride+len(dst)-1]
	n := len(dst) &^ (Lanes - 1)
	switch {
	case n > 0 && hasAVX2:
		avx(&dst[0], &a[0], &x[0], len(a), stride, n)
	case n > 0 && hasNEON:
		neon(&dst[0], &a[0], &x[0], len(a), stride, n)
	default:
		n = 0
	}
	if n == len(dst) {
		return
	}
	for r, ar := range a {
		row := x[r*stride+n : r*stride+len(dst)]
		for i, v := range row {
			dst[n+i] += float32(ar * f(v))
		}
	}
}

// axpyRows2 is AxpyRows2 for x of element T, as axpyRows is AxpyRows.
func axpyRows2[T float32 | uint16](dst0, dst1, a0, a1 []float32, x []T, stride int, avx, neon func(dst0, dst1, a0, a1 *float32, x *T, rows, stride, n int), f func(T) float32) {
	if len(a0) == 0 || len(dst0) == 0 {
		return
	}
	dst1, a1 = dst1[:len(dst0)], a1[:len(a0)]
	_ = x[(len(a0)-1)*stride+len(dst0)-1]
	n := len(dst0) &^ (Lanes - 1)
	switch {
	case n > 0 && hasAVX2:
		avx(&dst0[0], &dst1[0], &a0[0], &a1[0], &x[0], len(a0), stride, n)
	case n > 0 && hasNEON:
		neon(&dst0[0], &dst1[0], &a0[0], &a1[0], &x[0], len(a0), stride, n)
	default:
		n = 0
	}
	if n == len(dst0) {
		return
	}
	for r := range a0 {
		row := x[r*stride+n : r*stride+len(dst0)]
		for i, v := range row {
			dst0[n+i] += float32(a0[r] * f(v))
			dst1[n+i] += float32(a1[r] * f(v))
		}
	}
}

// DotF16 returns DotF32(a, b) for b given as IEEE halves: each half widens
// exactly, so the result is that of the f32 values, bit for bit.
func DotF16(a []float32, b []uint16) float32 {
	n := len(a) &^ (Block - 1)
	b = b[:len(a)]
	var s float32
	if n > 0 {
		switch {
		case hasAVX2:
			return dotF16AVX2(&a[0], &b[0], n, len(a)) // the tail too
		case hasNEON:
			s = dotF16NEON(&a[0], &b[0], n)
		default:
			s = dotF32Go(a[:n], widen(b[:n]))
		}
	}
	for i := n; i < len(a); i++ {
		s += float32(a[i] * half(b[i]))
	}
	return s
}

// DotF16x4 is DotF32x4 for a row of halves.
func DotF16x4(w []uint16, xs *[4][]float32, out *[4]float32) {
	n := len(w) &^ (Block - 1)
	for r := range xs {
		xs[r] = xs[r][:len(w)]
	}
	*out = [4]float32{}
	if n > 0 {
		switch {
		case hasAVX2:
			dotF16x4AVX2(&w[0], &[4]*float32{&xs[0][0], &xs[1][0], &xs[2][0], &xs[3][0]}, n, out)
		case hasNEON:
			dotF16x4NEON(&w[0], &[4]*float32{&xs[0][0], &xs[1][0], &xs[2][0], &xs[3][0]}, n, out)
		default:
			wf := widen(w[:n])
			for r, x := range xs {
				out[r] = dotF32Go(wf, x[:n])
			}
		}
	}
	for r, x := range xs {
		for i := n; i < len(w); i++ {
			out[r] += float32(half(w[i]) * x[i])
		}
	}
}

func widen(h []uint16) []float32 {
	f := make([]float32, len(h))
	for i, v := range h {
		f[i] = half(v)
	}
	return f
}

// half is the f32 value of the IEEE half h, exactly: by its bits, not
// dtype.HalfValue's table, whose lazy set-up costs more per call than the
// conversion in the kernels' short tails.
func half(h uint16) float32 { return float16.Frombits(h).Float32() }
