package runtime

import (
	"fmt"

	"github.com/tessera-llm/tessera/runtime/cpu"
	"github.com/tessera-llm/tessera/runtime/gpu"
)

// The facts about the engine's backend that measurements report
// (runtime/eval's Bench, transcripts), asked of the concrete backends in
// this one file. BACKEND-SPECIFIC: when runtime/backend's seam offers
// these as methods or optional interfaces (issue 45's "one door to the
// hardware"), this file's type switches become calls on e.be and nothing
// outside it changes.

// BackendInfo is what a benchmark says of the hardware under an engine.
type BackendInfo struct {
	// Device names the device: "cpu", or "webgpu:" and the adapter.
	Device string
	// On the CPU: the goroutines of a matrix product and the kernels
	// chosen for this CPU (cpu.Kernels); zero elsewhere.
	Threads int
	Kernels string
}

// BackendInfo describes the engine's backend, for reports that compare
// runs across machines (runtime/eval's Bench).
func (e *Engine) BackendInfo() BackendInfo {
	info := BackendInfo{Device: e.DeviceName()}
	if be, ok := e.be.(*cpu.Backend); ok {
		info.Threads, info.Kernels = be.Threads(), cpu.Kernels()
	}
	return info
}

// CopyBandwidth probes the memory bandwidth of the engine's device in
// GB/s (copying 64 MiB ten times), against which a benchmark compares
// decoding's bytes a second; 0 for a backend that cannot say.
func (e *Engine) CopyBandwidth() (float64, error) {
	switch be := unwrap(e.be).(type) {
	case *gpu.Backend:
		return gpu.CopyBandwidth(be.Device(), 64<<20, 10)
	case *cpu.Backend:
		return cpu.CopyBandwidth(64<<20, 10), nil
	}
	return 0, nil
}

// DeviceName names the device the engine runs on: "cpu", or "webgpu:" and
// the adapter.
func (e *Engine) DeviceName() string {
	if be, ok := unwrap(e.be).(*gpu.Backend); ok {
		info := be.Device().Info()
		return fmt.Sprintf("webgpu:%s (%s)", info.Adapter, info.Backend)
	}
	return e.be.Name()
}
