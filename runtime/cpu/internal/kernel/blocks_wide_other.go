//go:build !amd64 || purego

package kernel

import (
	"unsafe"

	"github.com/tessera-llm/tessera/models/dtype"
)

// No wide kernel in this build: DotBlocksWide reports false.
func wideFormFor(t dtype.Type) wideForm { return wideNone }

func wideForms() []wideForm { return nil }

func wideTakes(f wideForm, t dtype.Type) bool { return false }

func wideDirect(t dtype.Type) bool { return false }

func expandWide(f wideForm, t dtype.Type, codes, scales *uint32, cstride, sstride, groups int, dst *int32, dsc *float32) {
	panic("kernel: no wide kernel in this build")
}

func transposeWideOf(f wideForm, p unsafe.Pointer, n int) {
	panic("kernel: no wide kernel in this build")
}

func dotWide(f wideForm, w *int32, sc *float32, xq *int16, groups int, acc *float32, mode int, out *float32, ostride int) {
	panic("kernel: no wide kernel in this build")
}

func expandKWide(f wideForm, t dtype.Type, codes, scales *uint32, G, g0, cstride, sstride, groups int, dst *int32, dsc *float32) {
	panic("kernel: no wide kernel in this build")
}

func dotWideK(f wideForm, w *int32, sc *float32, xq *int16, xstride int, kd, sums *float32, groups int, acc *float32, mode int, out *float32, ostride int) {
	panic("kernel: no wide kernel in this build")
}
