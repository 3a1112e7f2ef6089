//go:build !js && !cgo

package webgpu

import "fmt"

// errNoCgo is what a CPU-only build (CGO_ENABLED=0) says instead of opening
// WebGPU: natively, WebGPU is wgpu-native, a C library reached through cgo.
// It wraps ErrNoAdapter, so that --device auto falls back to the CPU as it
// does on a machine without a driver.
var errNoCgo = fmt.Errorf("%w: this binary was built without cgo (CGO_ENABLED=0), "+
	"so it cannot load wgpu-native; use --device cpu, or build with cgo for WebGPU", ErrNoAdapter)

// Open fails in a CPU-only build: see errNoCgo.
func Open(opts Options) (Device, error) { return nil, errNoCgo }

// Adapters fails in a CPU-only build: see errNoCgo.
func Adapters() ([]Info, error) { return nil, errNoCgo }
