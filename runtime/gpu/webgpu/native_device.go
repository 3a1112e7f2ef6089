//go:build !js && cgo

package webgpu

import (
	"github.com/cogentcore/webgpu/wgpu"
)

// nativeDevice is the Device on wgpu-native, through cogentcore/webgpu:
// device.go's logic over the calls of wgpuAPI.
type nativeDevice = device[*wgpu.Buffer, *wgpu.BindGroup, *wgpu.ComputePipeline, nativeLayout]

var _ interface {
	Device
	Compiler
} = (*nativeDevice)(nil)

// wgpuAPI is wgpu-native's side of a device (see platform).
//
// Errors: every wgpu call that the binding wraps in an error scope returns
// its validation error, and the rest are made impossible by checks on the Go
// side, because wgpu-native has no uncaptured-error handler here and aborts
// the process on any error it cannot hand back (an invalid submission above
// all). Device loss is noticed when a buffer mapping fails, and is sticky.
// Like every call, its fields are guarded by the device's mu.
type wgpuAPI struct {
	instance *wgpu.Instance
	adapter  *wgpu.Adapter
	dev      *wgpu.Device
	queue    *wgpu.Queue
	lostErr  error // sticky: once the device is lost every call returns it
	staged   int64 // bytes written since the queue last ran its writes (write)
}

// stageLimit is how many bytes of writes the queue may hold before write
// makes it run them.
const stageLimit = 256 << 20

// nativeLayout is a binding shape's layouts (see layout).
type nativeLayout struct {
	group    *wgpu.BindGroupLayout
	pipeline *wgpu.PipelineLayout
}

func (w *wgpuAPI) lost() error { return w.lostErr }

// reported is always nil: what wgpu-native does not return from the call
// that caused it, it aborts on.
func (w *wgpuAPI) reported() error { return nil }

func (w *wgpuAPI) newBuffer(label string, alloc int64, usage Usage) (*wgpu.Buffer, error) {
	return w.dev.CreateBuffer(&wgpu.BufferDescriptor{
		Label: label,
		Size:  uint64(alloc),
		Usage: wgpu.BufferUsage(webgpuUsage(usage)),
	})
}

func (w *wgpuAPI) releaseBuffer(b *wgpu.Buffer) { b.Release() }

func (w *wgpuAPI) write(dst *wgpu.Buffer, offset int64, data []byte) error {
	// WebGPU writes whole words: write the aligned body as it is and the
	// ragged tail through a zero-padded word, so that big odd-sized uploads
	// are never copied on the host.
	body := len(data) &^ 3
	if body > 0 {
		if err := w.queue.WriteBuffer(dst, uint64(offset), data[:body]); err != nil {
			return err
		}
	}
	if tail := data[body:]; len(tail) > 0 {
		var word [4]byte
		copy(word[:], tail)
		if err := w.queue.WriteBuffer(dst, uint64(offset)+uint64(body), word[:]); err != nil {
			return err
		}
	}
	w.flushStaged(int64(len(data)))
	return nil
}

// flushStaged counts n bytes written and, past stageLimit, has the queue
// run its writes and waits for them. wgpu copies every write into a
// staging buffer that lives until a submission carries it and completes;
// loading a model submits nothing, so without this every weight was held
// twice until the first step: lavapipe's peak memory was 2.1x the file's.
func (w *wgpuAPI) flushStaged(n int64) {
	if w.staged += n; w.staged < stageLimit || w.lostErr != nil {
		return
	}
	w.staged = 0
	w.queue.Submit()
	w.dev.Poll(true, nil)
}

func (w *wgpuAPI) close(pipelines []*wgpu.ComputePipeline, layouts []nativeLayout) {
	if w.lostErr == nil {
		w.dev.Poll(true, nil) // let submitted work finish before tearing down
	}
	for _, p := range pipelines {
		p.Release()
	}
	for _, l := range layouts {
		l.pipeline.Release()
		l.group.Release()
	}
	w.queue.Release()
	w.dev.Release()
	w.adapter.Release()
	w.instance.Release()
}
