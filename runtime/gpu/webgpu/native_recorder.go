//go:build !js && cgo

package webgpu

import (
	"fmt"

	"github.com/cogentcore/webgpu/wgpu"
)

// nativeCommand is a recorded command of the native device.
type nativeCommand = command[*wgpu.Buffer, *wgpu.BindGroup, *wgpu.ComputePipeline, nativeLayout]

func (w *wgpuAPI) submit(ops []nativeCommand) error {
	cmd, err := w.commandBuffer(ops)
	if err != nil {
		return fmt.Errorf("gpu: encoding %d commands: %w", len(ops), err)
	}
	defer cmd.Release()
	w.queue.Submit(cmd)
	return nil
}

// commandBuffer encodes ops into one command buffer.
func (w *wgpuAPI) commandBuffer(ops []nativeCommand) (*wgpu.CommandBuffer, error) {
	enc, err := w.dev.CreateCommandEncoder(nil)
	if err != nil {
		return nil, err
	}
	defer enc.Release()
	e := &nativeEncoder{enc: enc}
	if err := encode(e, ops); err != nil {
		if e.pass != nil {
			e.pass.Release()
		}
		return nil, err
	}
	return enc.Finish(nil)
}

// nativeEncoder is a wgpu command encoder as encode drives it.
type nativeEncoder struct {
	enc  *wgpu.CommandEncoder
	pass *wgpu.ComputePassEncoder
}

func (e *nativeEncoder) copy(src *wgpu.Buffer, srcOff int64, dst *wgpu.Buffer, dstOff int64, size int64) error {
	return e.enc.CopyBufferToBuffer(src, uint64(srcOff), dst, uint64(dstOff), uint64(size))
}

func (e *nativeEncoder) beginPass()                          { e.pass = e.enc.BeginComputePass(nil) }
func (e *nativeEncoder) setPipeline(p *wgpu.ComputePipeline) { e.pass.SetPipeline(p) }
func (e *nativeEncoder) setBindGroup(g *wgpu.BindGroup)      { e.pass.SetBindGroup(0, g, nil) }
func (e *nativeEncoder) dispatch(x, y, z uint32)             { e.pass.DispatchWorkgroups(x, y, z) }

func (e *nativeEncoder) endPass() error {
	err := e.pass.End()
	e.pass.Release()
	e.pass = nil
	return err
}
