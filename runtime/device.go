package runtime

// This file is where the engine chooses its hardware, and the only file
// of the package that imports a backend (runtime/cpu, runtime/gpu) or the
// WebGPU device layer (runtime/gpu/webgpu): everything else talks to runtime/backend, the seam,
// and asks a backend what it runs on through its optional interfaces
// (backend.Describe, backend.CopyBandwidth, backend.NewSibling), as
// ggml's registry asks a device for its properties. A new backend is
// added here and in its own package, nowhere else.
//
// The GPU half of the load-time self-check lives here too (checkKernels,
// webgpuChecked): its verdict is a choice of backend (a plan of kernels
// on the adapter, or the CPU), and its rungs are the WGSL backend's
// kernel plans (gpu.Plainer). selfcheck.go keeps what knows no device:
// the report, its cache, and running and comparing the twin.

import (
	"context"
	"fmt"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/cpu"
	"github.com/tessera-llm/tessera/runtime/gpu"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
)

// GPUDevice is a WebGPU device already open (the device layer's,
// runtime/gpu/webgpu.Device), as Options.GPU takes one. It is declared
// here, as an alias, so that the engine's options name the device layer's
// type while this file stays the package's one import of it.
type GPUDevice = webgpu.Device

// GPUPlan is the WGSL backend's choice of kernels (runtime/gpu's Plan),
// as Options.Plan forces one and SelfCheck.Forced reports the one the
// self-check chose.
type GPUPlan = gpu.Plan

// The errors of the WebGPU device layer a caller may need to tell apart
// (see errors.go), returned wrapped: test them with errors.Is.
var (
	// ErrDeviceLost: the GPU went away; the engine must be loaded again.
	ErrDeviceLost = webgpu.ErrDeviceLost
	// ErrNoAdapter: Device "webgpu" was asked for and no adapter exists.
	ErrNoAdapter = webgpu.ErrNoAdapter
)

// newCPU opens the CPU backend with up to threads goroutines (0: one per
// core): the reference every kernel is checked against, and where the
// engine runs when WebGPU cannot.
func newCPU(threads int) backend.Backend { return cpu.New(threads) }

// legacyTypes are the block types that device ("cpu" or "webgpu") would
// multiply at their file's bits only in the plain-Go twin
// (WeightStorage.Legacy): none on a GPU, and on a CPU those it has no
// vector kernels for.
func legacyTypes(device string) map[dtype.Type]bool {
	var out map[dtype.Type]bool
	for _, t := range dtype.BlockTypes {
		if device == "cpu" && !cpu.BlockKernels(t) {
			if out == nil {
				out = map[dtype.Type]bool{}
			}
			out[t] = true
		}
	}
	return out
}

// onDeviceOf points o at the device be runs on, for a second model
// loaded beside be's (a draft): the CPU, or the very WebGPU device.
func onDeviceOf(o *Options, be backend.Backend) {
	switch be := backend.Unwrap(be).(type) {
	case *cpu.Backend:
		o.Device = "cpu"
	case *gpu.Backend:
		o.GPU = be.Device()
	}
}

// openBackend picks the backend for opts.Device.
func openBackend(opts Options, maxRows int) (be backend.Backend, note string, err error) {
	switch opts.Device {
	case "cpu":
		return newCPU(opts.Threads), "", nil
	case "webgpu":
		be, err := openWebGPU(opts, maxRows)
		if err != nil {
			return nil, "", fmt.Errorf("webgpu: %w", err)
		}
		return be, "", nil
	case "", "auto":
		// A software adapter (lavapipe, SwiftShader) runs the kernels on
		// the CPU far slower than the CPU backend does (14x for lavapipe
		// on a 2-core machine), so auto takes one only when named.
		if soft, ok := softwareOnly(opts); ok {
			return newCPU(opts.Threads), fmt.Sprintf("device auto: the CPU backend, since the only WebGPU adapter is %s, a software one (slower than the CPU backend); --device webgpu uses it anyway", soft), nil
		}
		be, err := openWebGPU(opts, maxRows)
		if err != nil {
			return newCPU(opts.Threads), fmt.Sprintf("device auto: the CPU backend, since WebGPU has no adapter: %v", err), nil
		}
		if gb, ok := be.(*gpu.Backend); ok {
			i := gb.Device().Info()
			note = fmt.Sprintf("device auto: WebGPU on %s, a %s GPU", i.Adapter, i.DeviceType)
		}
		return be, note, nil
	default:
		return nil, "", fmt.Errorf("unknown device %q (want cpu, webgpu or auto)", opts.Device)
	}
}

// softwareOnly reports, for auto with no device or adapter chosen, whether
// every WebGPU adapter is a software rasteriser (device type "cpu"), and
// names the first.
func softwareOnly(opts Options) (string, bool) {
	if opts.GPU != nil || opts.Adapter != "" {
		return "", false
	}
	infos, err := webgpu.Adapters()
	if err != nil || len(infos) == 0 {
		return "", false
	}
	for _, i := range infos {
		if i.DeviceType != "cpu" {
			return "", false
		}
	}
	return fmt.Sprintf("%s (%s)", infos[0].Adapter, infos[0].Backend), true
}

// openWebGPU opens the adapter opts names and a backend on it.
func openWebGPU(opts Options, maxRows int) (backend.Backend, error) {
	if opts.GPU != nil {
		return gpu.NewBackend(opts.GPU, maxRows)
	}
	dev, err := webgpu.Open(webgpu.Options{Adapter: opts.Adapter, MaxStorageBinding: opts.MaxStorageBinding})
	if err != nil {
		return nil, err
	}
	be, err := gpu.NewBackend(dev, maxRows)
	if err != nil {
		dev.Close()
		return nil, err
	}
	be.OwnDevice()
	return be, nil
}

// checkKernels runs the load-time self-check where be is WebGPU and
// opts do not turn it off, and sets the plan it found on be; it reports
// whether it ran.
func checkKernels(m *models.Model, ws WeightStorage, be backend.Backend, opts Options) (SelfCheck, bool) {
	gb, ok := be.(*gpu.Backend)
	if !ok {
		return SelfCheck{}, false
	}
	gb.SetPlan(opts.Plan)
	if opts.NoSelfCheck {
		return SelfCheck{}, false
	}
	cache := opts.SelfCheckCache
	if cache == nil {
		cache = defaultSelfCheckCache()
	}
	withLoRA := len(opts.Adapters) > 0 && !opts.LoRAMerge
	c := selfCheck(context.Background(), m, ws, opts.KV.Type, webgpuChecked(gb, opts.Plan), withLoRA, opts.Threads, cache)
	if c.Passed() {
		gb.SetPlan(c.Forced)
	}
	return c, true
}

// webgpuChecked is gb's device as the self-check runs on it: the
// adapter's names, the ladder of plans from base (gpu.Plainer), and a
// backend of its own on the device for each plan it tries.
func webgpuChecked(gb *gpu.Backend, base GPUPlan) checkedDevice {
	dev := gb.Device()
	i := dev.Info()
	c := checkedDevice{adapter: i.Adapter, driver: i.Driver, base: base,
		identity: fmt.Sprintf("%s|%s|%s|%s|%s|%s", i.Adapter, i.Vendor, i.Architecture, i.Driver, i.Backend, i.DeviceType)}
	for _, r := range gpu.Plainer(base, i) {
		c.rungs = append(c.rungs, planRung{name: r.Name, plan: r.Plan})
	}
	c.open = func(plan GPUPlan, maxRows int) (backend.Backend, func() []string, error) {
		b, err := gpu.NewBackend(dev, maxRows)
		if err != nil {
			return nil, nil, err
		}
		b.SetPlan(plan)
		return b, b.Kernels, nil
	}
	return c
}

// GPU returns the WebGPU device the engine runs on, and false on the CPU
// backend: for the homes that share one device between engines or show
// its adapter, without reaching past the seam for the backend's type.
func (e *Engine) GPU() (GPUDevice, bool) { return gpuOf(e.be) }

// GPU returns the WebGPU device the embedder runs on, as Engine.GPU.
func (e *Embedder) GPU() (GPUDevice, bool) { return gpuOf(e.be) }

func gpuOf(be backend.Backend) (GPUDevice, bool) {
	if g, ok := backend.Unwrap(be).(*gpu.Backend); ok {
		return g.Device(), true
	}
	return nil, false
}
