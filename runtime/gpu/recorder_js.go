//go:build js

package gpu

import (
	"fmt"
	"syscall/js"
)

// jsRecorder collects commands on the Go side and encodes them all at
// Submit, into one command encoder and one submission, as natively.
type jsRecorder struct {
	d          *jsDevice
	ops        []jsCommand
	dispatches int
	err        error // the first invalid command since the last Submit
}

// jsCommand is a dispatch (pipeline set) or a copy.
type jsCommand struct {
	pipeline *jsPipeline
	group    *jsBindGroup
	x, y, z  uint32

	src, dst       *jsBuffer
	srcOff, dstOff int64
	size           int64
}

func (d *jsDevice) Recorder() Recorder { return &jsRecorder{d: d} }

func (r *jsRecorder) Dispatches() int { return r.dispatches }

func (r *jsRecorder) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("gpu: "+format, args...)
	}
}

func (r *jsRecorder) Dispatch(p Pipeline, g BindGroup, x, y, z uint32) {
	pl, ok := p.(*jsPipeline)
	if !ok || pl == nil || pl.d != r.d {
		r.fail("dispatch: %T is not a pipeline of this device", p)
		return
	}
	bg, ok := g.(*jsBindGroup)
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
	r.ops = append(r.ops, jsCommand{pipeline: pl, group: bg, x: x, y: y, z: z})
	r.dispatches++
}

func (r *jsRecorder) Copy(src Buffer, srcOff int64, dst Buffer, dstOff int64, size int64) {
	s, ok1 := src.(*jsBuffer)
	t, ok2 := dst.(*jsBuffer)
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
			r.ops = append(r.ops, jsCommand{src: s, dst: t, srcOff: srcOff, dstOff: dstOff, size: size})
		}
	}
}

func (r *jsRecorder) Submit() error {
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
	// A validation error the browser reported since the last Submit or
	// Read belongs to earlier work; say so before queueing more.
	if err := d.takeUncaptured(); err != nil {
		return err
	}
	if len(ops) == 0 {
		return nil
	}
	if err := jsCheckLive(ops); err != nil {
		return err
	}
	cmd, err := d.encode(ops)
	if err != nil {
		return fmt.Errorf("gpu: encoding %d commands: %w", len(ops), err)
	}
	if _, err := jsCall(d.queue, "submit", []any{cmd}); err != nil {
		return fmt.Errorf("gpu: submitting %d commands: %w", len(ops), err)
	}
	return nil
}

// checkLive rejects commands that use a released buffer or bind group.
// Callers hold d.mu.
func jsCheckLive(ops []jsCommand) error {
	for _, o := range ops {
		if o.pipeline == nil {
			for _, b := range []*jsBuffer{o.src, o.dst} {
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
// inside a pass), and a copy ends the pass because copies live outside
// passes. Each call crosses into JavaScript, so a pipeline or bind group
// that is already set is not set again. Callers hold d.mu.
func (d *jsDevice) encode(ops []jsCommand) (cmd js.Value, err error) {
	defer func() {
		if p := recover(); p != nil {
			je, ok := p.(js.Error)
			if !ok {
				panic(p)
			}
			err = jsError(je.Value)
		}
	}()
	enc := d.dev.Call("createCommandEncoder")
	var (
		pass      js.Value
		inPass    bool
		lastPipe  *jsPipeline
		lastGroup *jsBindGroup
	)
	for _, o := range ops {
		if o.pipeline == nil {
			if inPass {
				pass.Call("end")
				inPass, lastPipe, lastGroup = false, nil, nil
			}
			enc.Call("copyBufferToBuffer", o.src.buf, o.srcOff, o.dst.buf, o.dstOff, o.size)
			continue
		}
		if !inPass {
			pass = enc.Call("beginComputePass")
			inPass = true
		}
		if o.pipeline != lastPipe {
			pass.Call("setPipeline", o.pipeline.compute)
			lastPipe = o.pipeline
		}
		if o.group != lastGroup {
			pass.Call("setBindGroup", 0, o.group.group)
			lastGroup = o.group
		}
		pass.Call("dispatchWorkgroups", o.x, o.y, o.z)
	}
	if inPass {
		pass.Call("end")
	}
	return enc.Call("finish"), nil
}
