//go:build !purego

package kernel

import "golang.org/x/sys/cpu"

// hasAVX2 chooses the AVX2 kernels: they need AVX2 for the integer
// products and F16C for the f16 scales (every AVX2 CPU has it); hasAVX512
// the int4 kernels that take two groups per 512-bit register (AVX-512 F
// and BW, with the OS saving the registers, which x/sys/cpu checks).
var (
	hasAVX2   = cpu.X86.HasAVX2 && cpu.X86.HasF16C
	hasAVX512 = hasAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW
	// hasF32Tile chooses DotF32Block's AVX-512 register tile, whose folds
	// take 256- and 128-bit halves of registers 16..31 (AVX-512 VL).
	hasF32Tile = hasAVX512 && cpu.X86.HasAVX512VL
)

//go:noescape
func dotQ4AVX2(codes, scales *uint32, xq *int16, ds *float32, groups int) float32

//go:noescape
func dotQ4AVX512(codes, scales *uint32, xq *int16, ds *float32, groups int) float32

//go:noescape
func dotQ4x4AVX512(codes, scales *uint32, groups int, xq *[4]*int16, ds *[4]*float32, out *[4]float32)

//go:noescape
func dotF32AVX2(a, b *float32, n int) float32

//go:noescape
func dotF32x4AVX2(w *float32, xs *[4]*float32, n int, out *[4]float32)

//go:noescape
func axpyAVX2(dst *float32, a float32, x *float32, n int)

//go:noescape
func quantizeAVX2(x *float32, codes *int16, ds *float32, pairs int)

//go:noescape
func quantizeKAVX2(x *float32, codes *int16, kd *float32, blocks int)

//go:noescape
func dotF16AVX2(a *float32, b *uint16, n, k int) float32

//go:noescape
func dotF16x4AVX2(w *uint16, xs *[4]*float32, n int, out *[4]float32)

//go:noescape
func dotQ8AVX2(codes, scales *uint32, x, sums *float32, groups int, acc *[2][Lanes]float32) float32

//go:noescape
func axpyRowsAVX2(dst, a, x *float32, rows, stride, n int)

//go:noescape
func expShiftAVX2(x *float32, m float32, n int)

//go:noescape
func expShiftAVX512(x *float32, m float32, n int)

//go:noescape
func axpyRows2AVX2(dst0, dst1, a0, a1, x *float32, rows, stride, n int)

//go:noescape
func axpyRowsF16AVX2(dst, a *float32, x *uint16, rows, stride, n int)

//go:noescape
func axpyRows2F16AVX2(dst0, dst1, a0, a1 *float32, x *uint16, rows, stride, n int)

//go:noescape
func siluMulAVX2(x, e, u *float32, n int)

//go:noescape
func dotF32RowsAVX2(w, x *float32, nb, k, m int, out *float32, stride int)

//go:noescape
func scaleMaxAVX2(x *float32, scale float32, n int) float32

//go:noescape
func dotF32TileAVX512(w, x *float32, nb, k, xstride, m int, out *float32, stride int)

//go:noescape
func dotF32KeysAVX512(x *float32, nb, k, xstride, m int, kt, out *float32, stride int)

//go:noescape
func axpyRows4AVX512(dst, a *[4]*float32, x *float32, rows, stride, n int)

//go:noescape
func dotF16TileAVX512(w *uint16, x *float32, nb, k, xstride, m int, out *float32, stride int)

//go:noescape
func maxAVX2(x *float32, n int) float32

//go:noescape
func findAVX2(x *float32, n int, v float32) int
