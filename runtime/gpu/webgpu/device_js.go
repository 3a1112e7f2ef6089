//go:build js

package webgpu

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall/js"
)

const (
	mapModeRead   = 0x0001   // GPUMapMode.READ
	writeChunk    = 4 << 20  // bytes copied to JavaScript per writeBuffer
	scopedAlloc   = 16 << 20 // buffers at least this big are created inside error scopes
	maxUncaptured = 8        // validation messages kept for the next Submit or Read
)

// jsDevice is the Device on the browser's navigator.gpu: device.go's logic
// over the calls of browserAPI.
type jsDevice = device[*jsObj, *jsObj, *jsObj, jsLayout]

var _ interface {
	Device
	Compiler
} = (*jsDevice)(nil)

// browserAPI is navigator.gpu's side of a device (see platform), called
// through syscall/js.
//
// Errors: WebGPU reports most validation errors asynchronously. Pipeline
// compiles inside an error scope and awaits it, so WGSL errors come back
// from Pipeline; big buffers are created in scopes too, so running out of
// memory comes back from NewBuffer. Everything else that WebGPU could reject
// is checked on the Go side first, as natively, and any error that still
// gets through (an "uncapturederror" event) is returned by the next Submit
// or Read. The browser also prints it to the console.
type browserAPI struct {
	adapter js.Value
	dev     js.Value
	queue   js.Value
	scratch js.Value // Uint8Array that write copies through

	// The registry of the device's buffers, bind groups and pipelines
	// (a JavaScript array, by jsObj.id) and the command replayer that
	// reads it (recorder_js.go).
	objs   js.Value
	free   []int
	replay js.Value
	cmds   []float64
	cmdRaw []byte   // the commands' bytes, reused from step to step
	cmdBuf js.Value // Float64Array the commands cross in, and cmdU8 a byte view of it
	cmdU8  js.Value

	// errMu guards what the browser's event callbacks set. It is never held
	// across an await, so a callback never waits on a parked goroutine.
	errMu      sync.Mutex
	lostErr    error // sticky: once the device is lost every call returns it
	uncaptured []string
	onError    js.Func
}

// jsObj is a WebGPU buffer, bind group or pipeline, and its index in the
// device's registry, by which a step's command list names it.
type jsObj struct {
	v  js.Value
	id int
}

// register puts v in the registry.
func (b *browserAPI) register(v js.Value) *jsObj {
	if b.objs.IsUndefined() {
		b.objs = js.Global().Get("Array").New()
	}
	id := b.objs.Length()
	if n := len(b.free); n > 0 {
		id, b.free = b.free[n-1], b.free[:n-1]
	}
	b.objs.SetIndex(id, v)
	return &jsObj{v: v, id: id}
}

// unregister drops o from the registry, for the garbage collector.
func (b *browserAPI) unregister(o *jsObj) {
	if o == nil || o.id < 0 {
		return
	}
	b.objs.SetIndex(o.id, js.Null())
	b.free = append(b.free, o.id)
	o.id = -1
}

// jsLayout is a binding shape's layouts (see layout).
type jsLayout struct {
	group    js.Value
	pipeline js.Value
}

// watch listens for the device's loss and its uncaptured errors.
func (b *browserAPI) watch() {
	b.onError = js.FuncOf(func(_ js.Value, args []js.Value) any {
		msg := "unknown WebGPU error"
		if len(args) > 0 {
			if e := args[0].Get("error"); !e.IsUndefined() {
				msg = jsStr(e, "message")
			}
		}
		b.errMu.Lock()
		if len(b.uncaptured) < maxUncaptured {
			b.uncaptured = append(b.uncaptured, msg)
		}
		b.errMu.Unlock()
		return nil
	})
	b.dev.Call("addEventListener", "uncapturederror", b.onError)
	go func() {
		info, err := jsAwait(b.dev.Get("lost"))
		reason := "unknown"
		if err == nil {
			reason = jsStr(info, "reason") + ": " + jsStr(info, "message")
		}
		b.errMu.Lock()
		b.lostErr = fmt.Errorf("%w (%s)", ErrDeviceLost, strings.TrimRight(reason, ": "))
		b.errMu.Unlock()
	}()
}

func (b *browserAPI) lost() error {
	b.errMu.Lock()
	defer b.errMu.Unlock()
	return b.lostErr
}

// reported returns the validation errors the browser reported since the
// last call, as one error.
func (b *browserAPI) reported() error {
	b.errMu.Lock()
	defer b.errMu.Unlock()
	if b.lostErr != nil {
		return b.lostErr
	}
	if len(b.uncaptured) == 0 {
		return nil
	}
	msgs := b.uncaptured
	b.uncaptured = nil
	return fmt.Errorf("gpu: WebGPU reported: %s", strings.Join(msgs, "; "))
}

func (b *browserAPI) newBuffer(label string, alloc int64, usage Usage) (*jsObj, error) {
	desc := map[string]any{"label": label, "size": alloc, "usage": webgpuUsage(usage)}
	var v js.Value
	var err error
	if alloc >= scopedAlloc {
		v, err = b.scoped(func() (js.Value, error) { return jsCall(b.dev, "createBuffer", desc) })
	} else {
		v, err = jsCall(b.dev, "createBuffer", desc)
	}
	if err != nil {
		return nil, err
	}
	return b.register(v), nil
}

func (b *browserAPI) newStaging(size int64) (*jsObj, error) {
	v, err := jsCall(b.dev, "createBuffer", map[string]any{
		"label": "tessera read staging",
		"size":  size,
		"usage": usageMapRead | usageCopyDst,
	})
	if err != nil {
		return nil, err
	}
	return &jsObj{v: v, id: -1}, nil // read maps it; no command names it
}

func (b *browserAPI) releaseBuffer(buf *jsObj) {
	buf.v.Call("destroy")
	b.unregister(buf)
}

// scoped runs f inside out-of-memory and validation error scopes and waits
// for them: the browser's error, if any, becomes f's.
func (b *browserAPI) scoped(f func() (js.Value, error)) (js.Value, error) {
	b.dev.Call("pushErrorScope", "out-of-memory")
	b.dev.Call("pushErrorScope", "validation")
	v, err := f()
	validation := b.dev.Call("popErrorScope")
	oom := b.dev.Call("popErrorScope")
	for _, p := range []js.Value{validation, oom} {
		e, perr := jsAwait(p)
		if err == nil && perr != nil {
			err = perr
		}
		if err == nil && !e.IsNull() && !e.IsUndefined() {
			err = errors.New(jsStr(e, "message"))
			if e.Get("constructor").Get("name").String() == "GPUOutOfMemoryError" {
				err = fmt.Errorf("out of GPU memory: %w", err)
			}
		}
	}
	return v, err
}

func (b *browserAPI) write(dst *jsObj, offset int64, data []byte) error {
	// writeBuffer copies its source when called, so one scratch array in
	// JavaScript memory carries a big upload piece by piece. It is never a
	// view of wasm memory, which moves when the Go heap grows.
	for done := 0; done < len(data); {
		n := min(len(data)-done, writeChunk)
		padded := (n + 3) &^ 3 // WebGPU writes whole words; the tail word is zero-padded
		scratch := b.scratchArray(padded)
		js.CopyBytesToJS(scratch, data[done:done+n])
		for i := n; i < padded; i++ {
			scratch.SetIndex(i, 0)
		}
		if _, err := jsCall(b.queue, "writeBuffer", dst.v, offset+int64(done), scratch, 0, padded); err != nil {
			return err
		}
		done += n
	}
	return nil
}

// scratchArray returns a Uint8Array of at least n bytes.
func (b *browserAPI) scratchArray(n int) js.Value {
	if b.scratch.IsUndefined() || b.scratch.Get("length").Int() < n {
		size := 64 << 10 // most writes are small: grow on the first big one
		if n > size {
			size = writeChunk
		}
		b.scratch = js.Global().Get("Uint8Array").New(size)
	}
	return b.scratch
}

func (b *browserAPI) read(src *jsObj, offset int64, stagingObj *jsObj, n int64, out []byte) error {
	staging := stagingObj.v
	enc := b.dev.Call("createCommandEncoder")
	enc.Call("copyBufferToBuffer", src.v, offset, staging, 0, n)
	b.queue.Call("submit", []any{enc.Call("finish")})

	p, err := jsCall(staging, "mapAsync", mapModeRead, 0, n)
	if err == nil {
		_, err = jsAwait(p)
	}
	if err != nil {
		return fmt.Errorf("mapping the read-back buffer: %w", err)
	}
	mapped := staging.Call("getMappedRange", 0, n)
	js.CopyBytesToGo(out, js.Global().Get("Uint8Array").New(mapped, 0, len(out)))
	staging.Call("unmap")
	return nil
}

// close drops the pipelines and layouts to the garbage collector and
// destroys the device, which frees every buffer and settles device.lost.
func (b *browserAPI) close([]*jsObj, []jsLayout) {
	b.scratch, b.objs, b.cmdBuf, b.cmdU8 = js.Value{}, js.Value{}, js.Value{}, js.Value{}
	b.dev.Call("removeEventListener", "uncapturederror", b.onError)
	b.onError.Release()
	b.dev.Call("destroy")
}
