//go:build js

package webgpu

import (
	"fmt"
	"syscall/js"
)

func (b *browserAPI) submit(ops []command[js.Value, js.Value, js.Value, jsLayout]) error {
	cmd, err := b.commandBuffer(ops)
	if err != nil {
		return fmt.Errorf("gpu: encoding %d commands: %w", len(ops), err)
	}
	if _, err := jsCall(b.queue, "submit", []any{cmd}); err != nil {
		return fmt.Errorf("gpu: submitting %d commands: %w", len(ops), err)
	}
	return nil
}

// commandBuffer encodes ops into one command buffer, turning a JavaScript
// exception into an error.
func (b *browserAPI) commandBuffer(ops []command[js.Value, js.Value, js.Value, jsLayout]) (cmd js.Value, err error) {
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

func (e *jsEncoder) copy(src js.Value, srcOff int64, dst js.Value, dstOff int64, size int64) error {
	e.enc.Call("copyBufferToBuffer", src, srcOff, dst, dstOff, size)
	return nil
}

func (e *jsEncoder) beginPass()              { e.pass = e.enc.Call("beginComputePass") }
func (e *jsEncoder) setPipeline(p js.Value)  { e.pass.Call("setPipeline", p) }
func (e *jsEncoder) setBindGroup(g js.Value) { e.pass.Call("setBindGroup", 0, g) }
func (e *jsEncoder) dispatch(x, y, z uint32) { e.pass.Call("dispatchWorkgroups", x, y, z) }
func (e *jsEncoder) endPass() error          { e.pass.Call("end"); return nil }
