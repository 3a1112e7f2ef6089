//go:build !amd64 || purego

package kernel

// Without AVX assembly (another architecture, or -tags purego) the amd64
// kernels are never chosen.
const hasAVX2, hasAVX512, hasF32Tile = false, false, false

func dotQ4AVX2(codes, scales *uint32, xq *int16, ds *float32, groups int) float32 {
	panic("kernel: no AVX2 kernels in this build")
}

func dotQ4AVX512(codes, scales *uint32, xq *int16, ds *float32, groups int) float32 {
	panic("kernel: no AVX-512 kernels in this build")
}

func dotQ4x4AVX512(codes, scales *uint32, groups int, xq *[4]*int16, ds *[4]*float32, out *[4]float32) {
	panic("kernel: no AVX-512 kernels in this build")
}

func dotF32AVX2(a, b *float32, n int) float32 { panic("kernel: no AVX2 kernels in this build") }

func dotF32x4AVX2(w *float32, xs *[4]*float32, n int, out *[4]float32) {
	panic("kernel: no AVX2 kernels in this build")
}

func axpyAVX2(dst *float32, a float32, x *float32, n int) {
	panic("kernel: no AVX2 kernels in this build")
}

func quantizeAVX2(x *float32, codes *int16, ds *float32, pairs int) {
	panic("kernel: no AVX2 kernels in this build")
}

func quantizeKAVX2(x *float32, codes *int16, kd *float32, blocks int) {
	panic("kernel: no AVX2 kernels in this build")
}

func dotF16AVX2(a *float32, b *uint16, n, k int) float32 {
	panic("kernel: no AVX2 kernels in this build")
}

func dotF16x4AVX2(w *uint16, xs *[4]*float32, n int, out *[4]float32) {
	panic("kernel: no AVX2 kernels in this build")
}

func dotQ8AVX2(codes, scales *uint32, x, sums *float32, groups int, acc *[2][Lanes]float32) float32 {
	panic("kernel: no AVX2 kernels in this build")
}

func axpyRowsAVX2(dst, a, x *float32, rows, stride, n int) {
	panic("kernel: no AVX2 kernels in this build")
}

func expShiftAVX2(x *float32, m float32, n int) { panic("kernel: no AVX2 kernels in this build") }

func expShiftAVX512(x *float32, m float32, n int) { panic("kernel: no AVX-512 kernels in this build") }

func axpyRows2AVX2(dst0, dst1, a0, a1, x *float32, rows, stride, n int) {
	panic("kernel: no AVX2 kernels in this build")
}

func axpyRowsF16AVX2(dst, a *float32, x *uint16, rows, stride, n int) {
	panic("kernel: no AVX2 kernels in this build")
}

func axpyRows2F16AVX2(dst0, dst1, a0, a1 *float32, x *uint16, rows, stride, n int) {
	panic("kernel: no AVX2 kernels in this build")
}

func siluMulAVX2(x, e, u *float32, n int) {
	panic("kernel: no AVX2 kernels in this build")
}

func dotF32RowsAVX2(w, x *float32, nb, k, m int, out *float32, stride int) {
	panic("kernel: no AVX2 kernels in this build")
}

func scaleMaxAVX2(x *float32, scale float32, n int) float32 {
	panic("kernel: no AVX2 kernels in this build")
}

func dotF32TileAVX512(w, x *float32, nb, k, xstride, m int, out *float32, stride int) {
	panic("kernel: no AVX-512 kernels in this build")
}

func dotF32KeysAVX512(x *float32, nb, k, xstride, m int, kt, out *float32, stride int) {
	panic("kernel: no AVX-512 kernels in this build")
}

func axpyRows4AVX512(dst, a *[4]*float32, x *float32, rows, stride, n int) {
	panic("kernel: no AVX-512 kernels in this build")
}

func dotF16TileAVX512(w *uint16, x *float32, nb, k, xstride, m int, out *float32, stride int) {
	panic("kernel: no AVX-512 kernels in this build")
}

func maxAVX2(x *float32, n int) float32 { panic("kernel: no AVX2 kernels in this build") }

func findAVX2(x *float32, n int, v float32) int { panic("kernel: no AVX2 kernels in this build") }
