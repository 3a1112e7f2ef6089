//go:build js

package gpu

import (
	"fmt"
	"syscall/js"
)

// jsRecorder encodes the commands it recorded (recorder.go) at Submit,
// into one command encoder and one submission, as natively.
type jsRecorder struct {
	recording[*jsPipeline, *jsBindGroup, *jsBuffer]
	d *jsDevice
}

type jsCommand = command[*jsPipeline, *jsBindGroup, *jsBuffer]

func (d *jsDevice) Recorder() Recorder {
	r := &jsRecorder{d: d}
	r.dev, r.maxGroups = d, d.info.MaxComputeWorkgroupsPerDimension
	return r
}

func (p *jsPipeline) owner() any        { return p.d }
func (p *jsPipeline) kernel() string    { return p.name }
func (p *jsPipeline) layoutKey() string { return p.layout.key }

func (g *jsBindGroup) owner() any         { return g.d }
func (g *jsBindGroup) layoutKey() string  { return g.layout.key }
func (g *jsBindGroup) isReleased() bool   { return g.released }
func (g *jsBindGroup) bound() []*jsBuffer { return g.buffers }

func (b *jsBuffer) owner() any       { return b.d }
func (b *jsBuffer) isReleased() bool { return b.released }

func (r *jsRecorder) Submit() error {
	ops, err := r.take()
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
	if err := checkLive(ops); err != nil {
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
