//go:build !js && cgo

package gpu

import (
	"fmt"

	"github.com/cogentcore/webgpu/wgpu"
)

// nativeRecorder encodes the commands it recorded (recorder.go) at Submit.
type nativeRecorder struct {
	recording[*nativePipeline, *nativeBindGroup, *nativeBuffer]
	d *nativeDevice
}

type nativeCommand = command[*nativePipeline, *nativeBindGroup, *nativeBuffer]

func (d *nativeDevice) Recorder() Recorder {
	r := &nativeRecorder{d: d}
	r.dev, r.maxGroups = d, d.info.MaxComputeWorkgroupsPerDimension
	return r
}

func (p *nativePipeline) owner() any        { return p.d }
func (p *nativePipeline) kernel() string    { return p.name }
func (p *nativePipeline) layoutKey() string { return p.layout.key }

func (g *nativeBindGroup) owner() any             { return g.d }
func (g *nativeBindGroup) layoutKey() string      { return g.layout.key }
func (g *nativeBindGroup) isReleased() bool       { return g.released }
func (g *nativeBindGroup) bound() []*nativeBuffer { return g.buffers }

func (b *nativeBuffer) owner() any       { return b.d }
func (b *nativeBuffer) isReleased() bool { return b.released }

func (r *nativeRecorder) Submit() error {
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
