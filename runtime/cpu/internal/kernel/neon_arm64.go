//go:build !purego

package kernel

import "golang.org/x/sys/cpu"

// hasNEON chooses the NEON kernels (Advanced SIMD, which every arm64 CPU Go
// runs on has; x/sys/cpu reports it everywhere). They use no later
// extension: FCVTL widens halves in base NEON, and the dot-product
// extension (SDOT) does not serve int16 activations (dot_arm64.s says why),
// so cpu.ARM64.HasASIMDDP chooses nothing.
var hasNEON = cpu.ARM64.HasASIMD

//go:noescape
func dotQ4NEON(codes, scales *uint32, xq *int16, ds *float32, groups int) float32

//go:noescape
func dotQ4x2NEON(codes, scales *uint32, groups int, xa, xb *int16, da, db *float32, out *[2]float32)

//go:noescape
func dotF32NEON(a, b *float32, n int) float32

//go:noescape
func dotF32x4NEON(w *float32, xs *[4]*float32, n int, out *[4]float32)

//go:noescape
func axpyNEON(dst *float32, a float32, x *float32, n int)

//go:noescape
func quantizeNEON(x *float32, codes *int16, ds *float32, pairs int)

//go:noescape
func dotF16NEON(a *float32, b *uint16, n int) float32

//go:noescape
func dotF16x4NEON(w *uint16, xs *[4]*float32, n int, out *[4]float32)

//go:noescape
func dotQ8NEON(codes, scales *uint32, x, sums *float32, groups int, acc *[2][Lanes]float32) float32

//go:noescape
func axpyRowsNEON(dst, a, x *float32, rows, stride, n int)

//go:noescape
func expShiftNEON(x *float32, m float32, n int)

//go:noescape
func axpyRows2NEON(dst0, dst1, a0, a1, x *float32, rows, stride, n int)

//go:noescape
func axpyRowsF16NEON(dst, a *float32, x *uint16, rows, stride, n int)

//go:noescape
func axpyRows2F16NEON(dst0, dst1, a0, a1 *float32, x *uint16, rows, stride, n int)

//go:noescape
func scaleMaxNEON(x *float32, scale float32, n int) float32
