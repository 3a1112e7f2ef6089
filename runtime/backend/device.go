package backend

import (
	"fmt"
	"math"
)

// What the engine may ask a backend about the hardware under it, as
// ggml's backend registry asks a device for its properties: optional
// interfaces a backend implements and functions that find them through
// decorators (Unwrap), so that the engine never type-switches on a
// concrete backend. A backend that implements none of them is described
// by its Name alone.

// Info describes the device a backend runs on.
type Info struct {
	// Device names it for people and fingerprints: "cpu", or "webgpu:"
	// and the adapter with its API ("webgpu:llvmpipe (Vulkan)").
	Device string
	// GPU is true for a device with a queue of its own (WebGPU): the
	// engine sizes its budgets for it, chains decoding steps into one
	// submission, and checks its kernels at load (runtime/selfcheck.go).
	GPU bool
	// Kernels names the CPU's vector kernels ("avx2", "avx512", "neon",
	// "go"); empty on a GPU, whose kernels are WGSL.
	Kernels string
	// Threads is how many goroutines share a CPU backend's products; 0 on
	// a GPU.
	Threads int
	// MaxBinding is the largest storage buffer one kernel may bind, in
	// bytes (a GPU's limit, which bounds an activation); 0 for none.
	MaxBinding int64
}

// Describer is the optional interface of a backend that says what it
// runs on.
type Describer interface {
	Describe() Info
}

// BandwidthProber is the optional interface of a backend that measures
// its device's memory bandwidth by copying bytes iters times: the roof
// that decoding, which reads every weight once a token, is compared with.
type BandwidthProber interface {
	CopyBandwidth(bytes int64, iters int) (float64, error)
}

// Sibling is the optional interface of a backend that opens another on
// its device, taking batches of up to maxRows rows: a model part with a
// KV cache and batches of its own (a vision tower beside the language
// model) shares the device, its memory and, on a GPU, the compiled
// pipelines.
type Sibling interface {
	NewSibling(maxRows int) (Backend, error)
}

// Unwrap returns the backend under decorators (backends with an Unwrap
// method, as runtime/profile's and runtime/capture's), which is the one
// that knows the device.
func Unwrap(be Backend) Backend {
	for {
		u, ok := be.(interface{ Unwrap() Backend })
		if !ok {
			return be
		}
		be = u.Unwrap()
	}
}

// Describe says what be runs on: its Describer's Info, or for a backend
// without one just its Name.
func Describe(be Backend) Info {
	if d, ok := Unwrap(be).(Describer); ok {
		return d.Describe()
	}
	return Info{Device: be.Name()}
}

// CopyBandwidth probes the memory bandwidth of be's device in bytes a
// second, copying bytes iters times; 0 (and no error) where the backend
// has no probe.
func CopyBandwidth(be Backend, bytes int64, iters int) (float64, error) {
	if p, ok := Unwrap(be).(BandwidthProber); ok {
		return p.CopyBandwidth(bytes, iters)
	}
	return 0, nil
}

// NewSibling opens a backend on be's device for batches of up to maxRows
// rows, and false where be cannot (it implements no Sibling).
func NewSibling(be Backend, maxRows int) (Backend, bool, error) {
	s, ok := Unwrap(be).(Sibling)
	if !ok {
		return nil, false, nil
	}
	sib, err := s.NewSibling(maxRows)
	return sib, true, err
}

// MaskRow applies a token mask to one row of logits on the host, as
// Backend.Mask does on the device: bit i%32 of mask[i/32] clear sends
// x[i] to -Inf. It is the definition the backends' Mask follows and what
// the engine runs for rows it holds on the host.
func MaskRow(x []float32, mask []uint32) {
	inf := float32(math.Inf(-1))
	for i := range x {
		if mask[i>>5]>>(i&31)&1 == 0 {
			x[i] = inf
		}
	}
}

// ArgmaxRow returns the index of the largest value of x, the lowest
// among equals: Backend.Argmax of one row on the host.
func ArgmaxRow(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

// Viewer is a backend whose activations can be seen as another shape of
// the same values.
type Viewer interface {
	// View returns t's first rows·cols values as a rows × cols tensor
	// that shares t's storage: writing one writes the other. Qwen-VL's
	// merger reads four consecutive patch rows as one token's row.
	View(t Tensor, rows, cols int) (Tensor, error)
}

// View is be's Viewer.View, and an error where be has none.
func View(be Backend, t Tensor, rows, cols int) (Tensor, error) {
	v, ok := Unwrap(be).(Viewer)
	if !ok {
		return nil, fmt.Errorf("backend %s cannot view a tensor as another shape", be.Name())
	}
	if rows <= 0 || cols <= 0 || rows*cols > t.Rows()*t.Cols() {
		return nil, fmt.Errorf("a view of %d × %d of a tensor of %d × %d", rows, cols, t.Rows(), t.Cols())
	}
	return v.View(t, rows, cols)
}
