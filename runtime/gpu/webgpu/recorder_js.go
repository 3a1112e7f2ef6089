//go:build js

package webgpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"syscall/js"
)

// A step's commands reach the browser's WebGPU in one call: each crossing
// from wasm into JavaScript costs microseconds, and a step of a few
// hundred dispatches made three of them a dispatch (setPipeline,
// setBindGroup, dispatchWorkgroups). The commands are numbers instead —
// objects named by their index in the device's registry (jsObj) — that
// the page's tesseraReplay (web/pkg/worker.js) encodes and submits in a
// loop of its own:
//
//	0                                  begin a compute pass
//	1 pipeline                         set the pipeline
//	2 group                            set bind group 0
//	3 x y z                            dispatch workgroups
//	4 src srcOffset dst dstOffset size copy between buffers
//	5                                  end the pass
//
// Where the page defines no tesseraReplay (a host of its own), each
// command is a call, as before.
const (
	cmdBeginPass = iota
	cmdPipeline
	cmdBindGroup
	cmdDispatch
	cmdCopy
	cmdEndPass
)

func (b *browserAPI) submit(ops []command[*jsObj, *jsObj, *jsObj, jsLayout]) error {
	if b.replay.IsUndefined() {
		b.replay = js.Global().Get("tesseraReplay")
		if b.replay.Type() != js.TypeFunction {
			b.replay = js.Null()
		}
	}
	if b.replay.Type() == js.TypeFunction {
		return b.replayed(ops)
	}
	cmd, err := b.commandBuffer(ops)
	if err != nil {
		return fmt.Errorf("gpu: encoding %d commands: %w", len(ops), err)
	}
	if _, err := jsCall(b.queue, "submit", []any{cmd}); err != nil {
		return fmt.Errorf("gpu: submitting %d commands: %w", len(ops), err)
	}
	return nil
}

// replayed lists ops as numbers and has tesseraReplay encode and submit
// them.
func (b *browserAPI) replayed(ops []command[*jsObj, *jsObj, *jsObj, jsLayout]) error {
	e := &listEncoder{cmds: b.cmds[:0]}
	if err := encode(e, ops); err != nil {
		return err
	}
	b.cmds = e.cmds
	n := len(e.cmds)
	if b.cmdBuf.IsUndefined() || b.cmdBuf.IsNull() || b.cmdBuf.Get("length").Int() < n {
		b.cmdBuf = js.Global().Get("Float64Array").New(max(n, 4096))
		b.cmdU8 = js.Global().Get("Uint8Array").New(b.cmdBuf.Get("buffer"))
	}
	raw := slices.Grow(b.cmdRaw[:0], 8*n)[:8*n]
	b.cmdRaw = raw
	for i, v := range e.cmds {
		binary.LittleEndian.PutUint64(raw[8*i:], math.Float64bits(v))
	}
	js.CopyBytesToJS(b.cmdU8, raw)
	if _, err := jsCall(b.replay, "call", js.Null(), b.dev, b.queue, b.objs, b.cmdBuf, n); err != nil {
		return fmt.Errorf("gpu: submitting %d commands: %w", len(ops), err)
	}
	return nil
}

// listEncoder writes commands as tesseraReplay reads them.
type listEncoder struct{ cmds []float64 }

func (e *listEncoder) copy(src *jsObj, srcOff int64, dst *jsObj, dstOff int64, size int64) error {
	e.cmds = append(e.cmds, cmdCopy, float64(src.id), float64(srcOff), float64(dst.id), float64(dstOff), float64(size))
	return nil
}

func (e *listEncoder) beginPass()            { e.cmds = append(e.cmds, cmdBeginPass) }
func (e *listEncoder) setPipeline(p *jsObj)  { e.cmds = append(e.cmds, cmdPipeline, float64(p.id)) }
func (e *listEncoder) setBindGroup(g *jsObj) { e.cmds = append(e.cmds, cmdBindGroup, float64(g.id)) }
func (e *listEncoder) dispatch(x, y, z uint32) {
	e.cmds = append(e.cmds, cmdDispatch, float64(x), float64(y), float64(z))
}
func (e *listEncoder) endPass() error { e.cmds = append(e.cmds, cmdEndPass); return nil }

// commandBuffer encodes ops into one command buffer a call at a time,
// turning a JavaScript exception into an error.
func (b *browserAPI) commandBuffer(ops []command[*jsObj, *jsObj, *jsObj, jsLayout]) (cmd js.Value, err error) {
	defer func() {
		if p := recover(); p != nil {
			je, ok := p.(js.Error)
			if !ok {
				panic(p)
			}
			err = jsError(je.Value)
		}
	}()
	e := &jsEncoder{enc: b.dev.Call("createCommandEncoder")}
	encode(e, ops) // its calls throw rather than return errors
	return e.enc.Call("finish"), nil
}

// jsEncoder is a GPUCommandEncoder as encode drives it.
type jsEncoder struct{ enc, pass js.Value }

func (e *jsEncoder) copy(src *jsObj, srcOff int64, dst *jsObj, dstOff int64, size int64) error {
	e.enc.Call("copyBufferToBuffer", src.v, srcOff, dst.v, dstOff, size)
	return nil
}

func (e *jsEncoder) beginPass()              { e.pass = e.enc.Call("beginComputePass") }
func (e *jsEncoder) setPipeline(p *jsObj)    { e.pass.Call("setPipeline", p.v) }
func (e *jsEncoder) setBindGroup(g *jsObj)   { e.pass.Call("setBindGroup", 0, g.v) }
func (e *jsEncoder) dispatch(x, y, z uint32) { e.pass.Call("dispatchWorkgroups", x, y, z) }
func (e *jsEncoder) endPass() error          { e.pass.Call("end"); return nil }
