package webgpu

import (
	"fmt"
	"time"
)

// The Recorder of both devices, which differ only in the calls that encode
// the commands: each command is checked as it is recorded (wgpu-native
// treats an invalid submission as fatal, a browser only warns on the
// console), and the commands wait on the Go side for Submit, so that
// recording takes no lock and holds no platform objects.

// command is a dispatch (pipeline set) or a copy.
type command[B, G, P, L any] struct {
	pipeline *pipeline[B, G, P, L]
	group    *bindGroup[B, G, P, L]
	x, y, z  uint32

	src, dst       *buffer[B, G, P, L]
	srcOff, dstOff int64
	size           int64
}

// recorder collects the commands of device d until Submit.
type recorder[B, G, P, L any] struct {
	d          *device[B, G, P, L]
	maxGroups  uint32 // the device's workgroups per dimension
	ops        []command[B, G, P, L]
	dispatches int
	platform   time.Duration // in d.api.submit, so far
	err        error         // the first invalid command since the last Submit
}

func (r *recorder[B, G, P, L]) Dispatches() int { return r.dispatches }

func (r *recorder[B, G, P, L]) PlatformTime() time.Duration { return r.platform }

func (r *recorder[B, G, P, L]) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("gpu: "+format, args...)
	}
}

func (r *recorder[B, G, P, L]) Dispatch(p Pipeline, g BindGroup, x, y, z uint32) {
	pl, ok := p.(*pipeline[B, G, P, L])
	if !ok || pl == nil || pl.d != r.d {
		r.fail("dispatch: %T is not a pipeline of this device", p)
		return
	}
	bg, ok := g.(*bindGroup[B, G, P, L])
	if !ok || bg == nil || bg.d != r.d {
		r.fail("dispatch of kernel %q: %T is not a bind group of this device", pl.name, g)
		return
	}
	if bg.layout.key != pl.layout.key {
		r.fail("dispatch of kernel %q: its bindings are %q, the bind group's %q",
			pl.name, pl.layout.key, bg.layout.key)
		return
	}
	if limit := r.maxGroups; x > limit || y > limit || z > limit {
		r.fail("dispatch of kernel %q: %d×%d×%d workgroups exceed the device's %d per dimension",
			pl.name, x, y, z, limit)
		return
	}
	r.ops = append(r.ops, command[B, G, P, L]{pipeline: pl, group: bg, x: x, y: y, z: z})
	r.dispatches++
}

func (r *recorder[B, G, P, L]) Copy(src Buffer, srcOff int64, dst Buffer, dstOff int64, size int64) {
	s, ok1 := src.(*buffer[B, G, P, L])
	t, ok2 := dst.(*buffer[B, G, P, L])
	switch {
	case !ok1 || !ok2 || s == nil || t == nil || s.d != r.d || t.d != r.d:
		r.fail("copy: %T to %T are not buffers of this device", src, dst)
	case s.root() == t.root():
		r.fail("copy: source %v and destination %v are the same platform buffer", s, t)
	case size%4 != 0:
		r.fail("copy: size %d is not a multiple of 4", size)
	default:
		if err := s.checkRange(CopySrc, srcOff, size); err != nil {
			r.fail("copy: %v", err)
		} else if err := t.checkRange(CopyDst, dstOff, size); err != nil {
			r.fail("copy: %v", err)
		} else {
			r.ops = append(r.ops, command[B, G, P, L]{src: s, dst: t, srcOff: srcOff, dstOff: dstOff, size: size})
		}
	}
}

func (r *recorder[B, G, P, L]) Submit() error {
	ops, err := r.ops, r.err
	// The next step records into the same array: platforms encode the
	// commands before submit returns and keep none of them.
	r.ops, r.err = ops[:0], nil
	defer clear(ops) // nor do the commands keep what they name alive
	if err != nil {
		return err
	}
	d := r.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.usable(); err != nil {
		return err
	}
	// An error the platform reported since the last Submit or Read belongs
	// to earlier work; say so before queueing more.
	if err := d.api.reported(); err != nil {
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
	start := time.Now()
	err = d.api.submit(ops)
	r.platform += time.Since(start)
	return err
}

// checkLive rejects commands that use a released buffer or bind group.
// Callers hold the device's lock.
func checkLive[B, G, P, L any](ops []command[B, G, P, L]) error {
	for _, o := range ops {
		if o.pipeline == nil {
			for _, b := range []*buffer[B, G, P, L]{o.src, o.dst} {
				if b.dead() {
					return fmt.Errorf("gpu: copy uses %v after Release", b)
				}
			}
			continue
		}
		g := o.group
		if g.released {
			return fmt.Errorf("gpu: dispatch of kernel %q uses a bind group after Release", o.pipeline.name)
		}
		if g.live == g.d.releases+1 {
			continue // no buffer was released since its buffers were found live
		}
		for _, b := range g.buffers {
			if b.dead() {
				return fmt.Errorf("gpu: dispatch of kernel %q uses %v after Release", o.pipeline.name, b)
			}
		}
		g.live = g.d.releases + 1
	}
	return nil
}

// commandEncoder is a platform's command encoder, as encode drives it.
type commandEncoder[B, G, P any] interface {
	copy(src B, srcOff int64, dst B, dstOff int64, size int64) error
	beginPass()
	setPipeline(P)
	setBindGroup(G)
	dispatch(x, y, z uint32)
	endPass() error
}

// encode records ops into enc: consecutive dispatches share one compute
// pass (WebGPU makes each dispatch's writes visible to the next inside a
// pass), and a copy ends the pass because copies live outside passes. A
// pipeline or bind group that is already set is not set again: in a browser
// each call crosses into JavaScript.
func encode[B, G, P, L any](enc commandEncoder[B, G, P], ops []command[B, G, P, L]) error {
	var (
		inPass    bool
		lastPipe  *pipeline[B, G, P, L]
		lastGroup *bindGroup[B, G, P, L]
	)
	for _, o := range ops {
		if o.pipeline == nil {
			if inPass {
				inPass, lastPipe, lastGroup = false, nil, nil
				if err := enc.endPass(); err != nil {
					return err
				}
			}
			if err := enc.copy(o.src.h, o.src.off+o.srcOff, o.dst.h, o.dst.off+o.dstOff, o.size); err != nil {
				return err
			}
			continue
		}
		if !inPass {
			enc.beginPass()
			inPass = true
		}
		if o.pipeline != lastPipe {
			enc.setPipeline(o.pipeline.h)
			lastPipe = o.pipeline
		}
		if o.group != lastGroup {
			enc.setBindGroup(o.group.h)
			lastGroup = o.group
		}
		enc.dispatch(o.x, o.y, o.z)
	}
	if inPass {
		return enc.endPass()
	}
	return nil
}
