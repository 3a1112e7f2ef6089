//go:build !arm64 || purego

package kernel

// Without NEON assembly (another architecture, or -tags purego) the arm64
// kernels are never chosen.
const hasNEON = false

func dotQ4NEON(codes, scales *uint32, xq *int16, ds *float32, groups int) float32 {
	panic("kernel: no NEON kernels in this build")
}

func dotQ4x2NEON(codes, scales *uint32, groups int, xa, xb *int16, da, db *float32, out *[2]float32) {
	panic("kernel: no NEON kernels in this build")
}

func dotF32NEON(a, b *float32, n int) float32 { panic("kernel: no NEON kernels in this build") }

func dotF32x4NEON(w *float32, xs *[4]*float32, n int, out *[4]float32) {
	panic("kernel: no NEON kernels in this build")
}

func axpyNEON(dst *float32, a float32, x *float32, n int) {
	panic("kernel: no NEON kernels in this build")
}

func quantizeNEON(x *float32, codes *int16, ds *float32, pairs int) {
	panic("kernel: no NEON kernels in this build")
}

func dotF16NEON(a *float32, b *uint16, n int) float32 { panic("kernel: no NEON kernels in this build") }

func dotF16x4NEON(w *uint16, xs *[4]*float32, n int, out *[4]float32) {
	panic("kernel: no NEON kernels in this build")
}

func dotQ8NEON(codes, scales *uint32, x, sums *float32, groups int, acc *[2][Lanes]float32) float32 {
	panic("kernel: no NEON kernels in this build")
}

func axpyRowsNEON(dst, a, x *float32, rows, stride, n int) {
	panic("kernel: no NEON kernels in this build")
}

func expShiftNEON(x *float32, m float32, n int) { panic("kernel: no NEON kernels in this build") }

func axpyRows2NEON(dst0, dst1, a0, a1, x *float32, rows, stride, n int) {
	panic("kernel: no NEON kernels in this build")
}

func axpyRowsF16NEON(dst, a *float32, x *uint16, rows, stride, n int) {
	panic("kernel: no NEON kernels in this build")
}

func axpyRows2F16NEON(dst0, dst1, a0, a1 *float32, x *uint16, rows, stride, n int) {
	panic("kernel: no NEON kernels in this build")
}

func scaleMaxNEON(x *float32, scale float32, n int) float32 {
	panic("kernel: no NEON kernels in this build")
}
