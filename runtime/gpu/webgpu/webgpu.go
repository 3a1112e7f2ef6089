// Package webgpu is the WebGPU device layer under the WGSL backend
// (runtime/gpu): adapters and devices, buffers, compute pipelines compiled
// once from WGSL and cached, bind groups, and a Recorder that queues a
// whole step's dispatches into one submission. It knows nothing of models
// or of the ops of a forward pass: its one user in the engine is
// runtime/gpu, and the engine itself talks only to runtime/backend.
//
// The Device interface keeps WebGPU's own types out, and is written once
// (device.go, bindgroup.go, buffer.go, recorder.go) over a platform
// interface of the API calls that differ: native_*.go implement it with
// cogentcore/webgpu (wgpu-native: Vulkan, Metal, D3D12), *_js.go with the
// browser's navigator.gpu through syscall/js, so that native builds and
// GOOS=js share one layer.
package webgpu

import (
	"errors"
	"time"
)

// Usage says how a buffer may be used. The flags combine with |.
//
// Mappable staging buffers are not part of the interface: Read hides them, so
// that every implementation is free to read back however its platform wants.
type Usage uint32

const (
	// Storage lets a buffer be bound as a storage binding (ReadOnly or ReadWrite).
	Storage Usage = 1 << iota
	// Uniform lets a buffer be bound as a uniform binding (UniformBinding).
	Uniform
	// CopySrc lets a buffer be the source of Read and Recorder.Copy.
	CopySrc
	// CopyDst lets a buffer be the destination of Write and Recorder.Copy.
	CopyDst
)

// Buffer is a region of device memory.
type Buffer interface {
	// Size is the size in bytes as requested from NewBuffer.
	Size() int64
	// Release gives the buffer back. The device keeps the memory alive for
	// work already submitted; using a released buffer in new work is an error.
	Release()
}

// Access is the kind of one binding slot of a kernel. Slot i of
// Kernel.Bindings is @group(0) @binding(i) in the WGSL source.
type Access uint8

const (
	// ReadOnly is var<storage, read>.
	ReadOnly Access = iota
	// ReadWrite is var<storage, read_write>.
	ReadWrite
	// UniformBinding is var<uniform>.
	UniformBinding
)

// Kernel describes a WGSL compute shader and the shape of its bindings.
//
// Bind group layouts are built from Bindings rather than reflected from the
// shader ("auto" layout), because the browser backend cannot reflect them and
// explicit layouts let equal binding shapes share one layout.
type Kernel struct {
	// Name identifies the kernel in errors and in the pipeline cache.
	Name string
	// Source is the WGSL source.
	Source string
	// Entry is the @compute entry point; "" means "main".
	Entry string
	// Bindings lists the slots of @group(0), binding i at index i.
	Bindings []Access
	// Constants sets WGSL override constants by name, for example the
	// workgroup size. See Specialize for how they are applied.
	Constants map[string]float64
}

// Pipeline is a compiled kernel, ready to dispatch. Only the Device that made
// it knows what is inside.
type Pipeline interface{}

// Binding is one buffer range bound to a slot.
type Binding struct {
	Buffer Buffer
	// Offset must be a multiple of Info.MinStorageBufferOffsetAlignment.
	Offset int64
	// Size 0 binds the whole buffer from Offset.
	Size int64
}

// BindGroup is a set of buffers bound to the slots of a pipeline. It may be
// used with any pipeline whose Kernel.Bindings are the same.
type BindGroup interface {
	Release()
}

// Device is a compute device. Its methods are safe for concurrent use.
type Device interface {
	// Info reports the adapter and the limits the device was opened with.
	Info() Info
	// NewBuffer allocates size bytes (rounded up to a multiple of 4).
	NewBuffer(label string, size int64, usage Usage) (Buffer, error)
	// SubBuffer is size bytes of b from offset (a multiple of the device's
	// MinStorageBufferOffsetAlignment) as a buffer of its own, with b's
	// usage: it binds, writes, reads and copies as a buffer does, while the
	// platform sees b alone. Many small tensors in one buffer cost the
	// platform one buffer to track at every submission instead of many.
	// Releasing it frees nothing; releasing b ends it.
	SubBuffer(b Buffer, label string, offset, size int64) (Buffer, error)
	// Write queues a copy of data into b at offset (a multiple of 4). It is
	// ordered before the next Submit or Read. A length that is not a multiple
	// of 4 is padded with zeros, which overwrite the bytes after data.
	Write(b Buffer, offset int64, data []byte) error
	// Read copies size bytes from b at offset (a multiple of 4) back to the
	// host, waiting for all work submitted before it.
	Read(b Buffer, offset, size int64) ([]byte, error)
	// Pipeline compiles k, once: later calls with the same kernel return the
	// same Pipeline. WGSL errors name the kernel and carry the compiler's text.
	Pipeline(k Kernel) (Pipeline, error)
	// BindGroup binds buffers to the slots of p, b[i] to slot i.
	BindGroup(p Pipeline, b []Binding) (BindGroup, error)
	// Recorder starts a new batch of work.
	Recorder() Recorder
	// Close releases the device. Buffers, pipelines and bind groups made by
	// it must not be used afterwards.
	Close()
}

// Recorder batches dispatches and copies into one command buffer, so that a
// whole decode step costs one submission. Errors in recorded commands are
// reported by Submit. A Recorder is not safe for concurrent use.
type Recorder interface {
	// Dispatch runs p over x×y×z workgroups with the buffers of g. Writes of
	// one dispatch are visible to the next.
	Dispatch(p Pipeline, g BindGroup, x, y, z uint32)
	// Copy copies size bytes (offsets and size multiples of 4) between
	// buffers, ordered with the dispatches around it.
	Copy(src Buffer, srcOff int64, dst Buffer, dstOff int64, size int64)
	// Dispatches counts the dispatches recorded since the Recorder was made,
	// across submissions.
	Dispatches() int
	// PlatformTime is the wall time Submit spent in the platform (encoding
	// and submitting the commands) since the Recorder was made.
	PlatformTime() time.Duration
	// Submit encodes what was recorded and submits it once. The Recorder is
	// empty afterwards and may record the next batch.
	Submit() error
}

// Options select and shape the device that Open returns.
type Options struct {
	// Adapter chooses the adapter: "" for the default (high-performance
	// preference), an index into Adapters() ("0", "1"), or a case-insensitive
	// substring of the adapter's name.
	Adapter string
	// MaxStorageBinding, when > 0, lowers the storage binding size limit
	// that the device enforces and reports, to exercise the splitting of
	// tensors too big for one binding.
	MaxStorageBinding int64
	// DisableF16 leaves shader-f16 off even where the adapter has it.
	DisableF16 bool
	// DisableSubgroups leaves subgroups off even where the adapter has
	// them: the plain kernels run.
	DisableSubgroups bool
}

// Compiler is a Device that says how many pipelines it has compiled. A
// device compiles each kernel once (Device.Pipeline caches them), so an
// engine that loads model after model on one device compiles only the
// kernels it has not seen: this count shows it.
type Compiler interface {
	Compiled() int
}

var (
	// ErrNoAdapter is returned (wrapped) by Open and Adapters when the
	// machine has no usable WebGPU adapter.
	ErrNoAdapter = errors.New("gpu: no WebGPU adapter found")
	// ErrDeviceLost is returned (wrapped) by every call after the device was lost.
	ErrDeviceLost = errors.New("gpu: device lost")
	// ErrNotImplemented is returned where a platform has no implementation yet.
	ErrNotImplemented = errors.New("gpu: not implemented")
)
