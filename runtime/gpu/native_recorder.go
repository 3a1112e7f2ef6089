//go:build !js

package gpu

import (
	"fmt"

	"github.com/cogentcore/webgpu/wgpu"
)

// nativeRecorder collects commands on the Go side and encodes them all at Submit.
// Deferring the encoding keeps the device lock out of the hot recording path,
// and a recorder that is dropped without Submit holds no wgpu objects.
type nativeRecorder struct {
	d          *nativeDevice
	ops        []nativeCommand
	dispatches int
	err        error // the first invalid command since the last Submit
}

// nativeCommand is a dispatch (pipeline set) or a copy.
type nativeCommand struct {
	pipeline *nativePipeline
	group    *nativeBindGroup
	x, y, z  uint32

	src, dst       *nativeBuffer
	srcOff, dstOff int64
	size           int64
}

func (d *nativeDevice) Recorder() Recorder { return &nativeRecorder{d: d} }

func (r *nativeRecorder) Dispatches() int { return r.dispatches }

func (r *nativeRecorder) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("gpu: "+format, args...)
	}
}

func (r *nativeRecorder) Dispatch(p Pipeline, g BindGroup, x, y, z uint32) {
	pl, ok := p.(*nativePipeline)
	if !ok || pl == nil || pl.d != r.d {
		r.fail("dispatch: %T is not a pipeline of this device", p)
		return
	}
	bg, ok := g.(*nativeBindGroup)
	if !ok || bg == nil || bg.d != r.d {
		r.fail("dispatch of kernel %q: %T is not a bind group of this device", pl.name, g)
		return
	}
	if bg.layout != pl.layout {
		r.fail("dispatch of kernel %q: its bindings are %q, the bind group's %q",
			pl.name, pl.layout.key, bg.layout.key)
		return
	}
	if limit := r.d.info.MaxComputeWorkgroupsPerDimension; x > limit || y > limit || z > limit {
		r.fail("dispatch of kernel %q: %d×%d×%d workgroups exceed the device's %d per dimension",
			pl.name, x, y, z, limit)
		return
	}
	r.ops = append(r.ops, nativeCommand{pipeline: pl, group: bg, x: x, y: y, z: z})
	r.dispatches++
}

func (r *nativeRecorder) Copy(src Buffer, srcOff int64, dst Buffer, dstOff int64, size int64) {
	s, ok1 := src.(*nativeBuffer)
	t, ok2 := dst.(*nativeBuffer)
	switch {
	case !ok1 || !ok2 || s == nil || t == nil || s.d != r.d || t.d != r.d:
		r.fail("copy: %T to %T are not buffers of this device", src, dst)
	case s == t:
		r.fail("copy: source and destination are the same %v", s)
	case size%4 != 0:
		r.fail("copy: size %d is not a multiple of 4", size)
	default:
		if err := s.checkRange(CopySrc, srcOff, size); err != nil {
			r.fail("copy: %v", err)
		} else if err := t.checkRange(CopyDst, dstOff, size); err != nil {
			r.fail("copy: %v", err)
		} else {
			r.ops = append(r.ops, nativeCommand{src: s, dst: t, srcOff: srcOff, dstOff: dstOff, size: size})
		}
	}
}

func (r *nativeRecorder) Submit() error {
	ops, err := r.ops, r.err
	r.ops, r.err = nil, nil
	if err != nil {
		return err
	}
	d := r.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.usable(); err != nil {
		return err
	}
	if len(ops) == 0 {
		return nil
	}
	// wgpu-native treats an invalid submission as fatal and aborts the
	// process, so everything a submission could trip over is checked here.
	if err := checkLive(ops); err != nil {
		return err
	}
	cmd, err := d.encode(ops)
	if err != nil {
		return fmt.Errorf("gpu: encoding %d commands: %w", len(ops), err)
	}
	defer cmd.Release()
	d.queue.Submit(cmd)
	return nil
}

// checkLive rejects commands that use a released buffer or bind group.
// Callers hold d.mu.
func checkLive(ops []nativeCommand) error {
	for _, o := range ops {
		if o.pipeline == nil {
			for _, b := range []*nativeBuffer{o.src, o.dst} {
				if b.released {
					return fmt.Errorf("gpu: copy uses %v after Release", b)
				}
			}
			continue
		}
		if o.group.released {
			return fmt.Errorf("gpu: dispatch of kernel %q uses a bind group after Release", o.pipeline.name)
		}
		for _, b := range o.group.buffers {
			if b.released {
				return fmt.Errorf("gpu: dispatch of kernel %q uses %v after Release", o.pipeline.name, b)
			}
		}
	}
	return nil
}

// encode records ops into one command encoder: consecutive dispatches share
// one compute pass (WebGPU makes each dispatch's writes visible to the next
// inside a pass), and a copy ends the pass because copies live outside passes.
// Callers hold d.mu.
func (d *nativeDevice) encode(ops []nativeCommand) (*wgpu.CommandBuffer, error) {
	enc, err := d.dev.CreateCommandEncoder(nil)
	if err != nil {
		return nil, err
	}
	defer enc.Release()

	var (
		pass      *wgpu.ComputePassEncoder
		lastPipe  *nativePipeline
		lastGroup *nativeBindGroup
	)
	endPass := func() error {
		if pass == nil {
			return nil
		}
		err := pass.End()
		pass.Release()
		pass, lastPipe, lastGroup = nil, nil, nil
		return err
	}
	for _, o := range ops {
		if o.pipeline == nil {
			if err := endPass(); err != nil {
				return nil, err
			}
			if err := enc.CopyBufferToBuffer(o.src.buf, uint64(o.srcOff), o.dst.buf, uint64(o.dstOff), uint64(o.size)); err != nil {
				return nil, err
			}
			continue
		}
		if pass == nil {
			pass = enc.BeginComputePass(nil)
		}
		if o.pipeline != lastPipe {
			pass.SetPipeline(o.pipeline.compute)
			lastPipe = o.pipeline
		}
		if o.group != lastGroup {
			pass.SetBindGroup(0, o.group.group, nil)
			lastGroup = o.group
		}
		pass.DispatchWorkgroups(o.x, o.y, o.z)
	}
	if err := endPass(); err != nil {
		return nil, err
	}
	return enc.Finish(nil)
}
