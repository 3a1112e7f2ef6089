//go:build js

package gpu

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall/js"
)

var errJSClosed = errors.New("gpu: device is closed")

// WebGPU's GPUBufferUsage and GPUMapMode bits.
const (
	usageMapRead  = 0x0001
	usageCopySrc  = 0x0004
	usageCopyDst  = 0x0008
	usageUniform  = 0x0040
	usageStorage  = 0x0080
	mapModeRead   = 0x0001
	writeChunk    = 4 << 20  // bytes copied to JavaScript per writeBuffer
	jsStagingKeep = 16 << 20 // the largest read-back buffer kept between Reads
	scopedAlloc   = 16 << 20 // buffers at least this big are created inside error scopes
	maxUncaptured = 8        // validation messages kept for the next Submit or Read
)

// jsDevice is the Device on the browser's navigator.gpu, called through
// syscall/js.
//
// Every call into WebGPU happens under mu, also across the awaits of Read
// and Pipeline: that keeps the device's error scopes from interleaving, and
// makes the methods safe for concurrent use as the interface requires. A
// goroutine parked on mu is fine in wasm: the others and the browser's event
// loop go on.
//
// Errors: WebGPU reports most validation errors asynchronously. Pipeline
// compiles inside an error scope and awaits it, so WGSL errors come back
// from Pipeline; big buffers are created in scopes too, so running out of
// memory comes back from NewBuffer. Everything else that WebGPU could reject
// is checked on the Go side first, as natively, and any error that still
// gets through (an "uncapturederror" event) is returned by the next Submit
// or Read. The browser also prints it to the console.
type jsDevice struct {
	mu      sync.Mutex
	adapter js.Value
	dev     js.Value
	queue   js.Value
	info    Info

	maxUniformBinding int64
	uniformAlign      int64

	pipelines map[string]*jsPipeline // by Kernel.CacheKey
	layouts   map[string]*jsLayout   // by LayoutKey

	staging     js.Value // map-read buffer for Read, kept when small
	stagingSize int64
	scratch     js.Value // Uint8Array that Write copies through
	closed      bool

	// errMu guards what the browser's event callbacks set. It is never held
	// across an await, so a callback never waits on a parked goroutine.
	errMu      sync.Mutex
	lost       error // sticky: once the device is lost every call returns it
	uncaptured []string
	onError    js.Func
}

type jsBuffer struct {
	d   *jsDevice
	buf js.Value
	bufferMeta
}

func (b *jsBuffer) Release() {
	b.d.mu.Lock()
	defer b.d.mu.Unlock()
	if !b.released {
		b.released = true
		b.buf.Call("destroy")
	}
}

func (d *jsDevice) Info() Info { return d.info }

// Compiled is how many pipelines the device has compiled (see Compiler).
func (d *jsDevice) Compiled() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.pipelines)
}

// watch listens for the device's loss and its uncaptured errors.
func (d *jsDevice) watch() {
	d.onError = js.FuncOf(func(_ js.Value, args []js.Value) any {
		msg := "unknown WebGPU error"
		if len(args) > 0 {
			if e := args[0].Get("error"); !e.IsUndefined() {
				msg = jsStr(e, "message")
			}
		}
		d.errMu.Lock()
		if len(d.uncaptured) < maxUncaptured {
			d.uncaptured = append(d.uncaptured, msg)
		}
		d.errMu.Unlock()
		return nil
	})
	d.dev.Call("addEventListener", "uncapturederror", d.onError)
	go func() {
		info, err := jsAwait(d.dev.Get("lost"))
		reason := "unknown"
		if err == nil {
			reason = jsStr(info, "reason") + ": " + jsStr(info, "message")
		}
		d.errMu.Lock()
		d.lost = fmt.Errorf("%w (%s)", ErrDeviceLost, strings.TrimRight(reason, ": "))
		d.errMu.Unlock()
	}()
}

// usable reports why the device cannot take new work, if it cannot.
// Callers hold d.mu.
func (d *jsDevice) usable() error {
	if d.closed {
		return errJSClosed
	}
	d.errMu.Lock()
	defer d.errMu.Unlock()
	return d.lost
}

// takeUncaptured returns the validation errors the browser reported since
// the last call, as one error. Callers hold d.mu.
func (d *jsDevice) takeUncaptured() error {
	d.errMu.Lock()
	defer d.errMu.Unlock()
	if d.lost != nil {
		return d.lost
	}
	if len(d.uncaptured) == 0 {
		return nil
	}
	msgs := d.uncaptured
	d.uncaptured = nil
	return fmt.Errorf("gpu: WebGPU reported: %s", strings.Join(msgs, "; "))
}

// asBuffer checks that b is a live buffer of this device. Callers hold d.mu.
func (d *jsDevice) asBuffer(b Buffer) (*jsBuffer, error) {
	jb, ok := b.(*jsBuffer)
	switch {
	case !ok || jb == nil:
		return nil, fmt.Errorf("gpu: %T is not a buffer of this device", b)
	case jb.d != d:
		return nil, fmt.Errorf("gpu: %v belongs to another device", jb)
	case jb.released:
		return nil, fmt.Errorf("gpu: %v is used after Release", jb)
	}
	return jb, nil
}

func (d *jsDevice) NewBuffer(label string, size int64, usage Usage) (Buffer, error) {
	alloc, err := checkNewBuffer(label, size, usage, d.info)
	if err != nil {
		return nil, err
	}
	wu := 0
	for _, f := range []struct {
		ours   Usage
		theirs int
	}{{Storage, usageStorage}, {Uniform, usageUniform}, {CopySrc, usageCopySrc}, {CopyDst, usageCopyDst}} {
		if usage&f.ours != 0 {
			wu |= f.theirs
		}
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.usable(); err != nil {
		return nil, err
	}
	desc := map[string]any{"label": label, "size": alloc, "usage": wu}
	var buf js.Value
	if alloc >= scopedAlloc {
		buf, err = d.scoped(func() (js.Value, error) { return jsCall(d.dev, "createBuffer", desc) })
	} else {
		buf, err = jsCall(d.dev, "createBuffer", desc)
	}
	if err != nil {
		return nil, fmt.Errorf("gpu: creating buffer %q of %s: %w", label, FormatBytes(size), err)
	}
	return &jsBuffer{d: d, buf: buf, bufferMeta: bufferMeta{label: label, size: size, alloc: alloc, usage: usage}}, nil
}

// scoped runs f inside out-of-memory and validation error scopes and waits
// for them: the browser's error, if any, becomes f's. Callers hold d.mu.
func (d *jsDevice) scoped(f func() (js.Value, error)) (js.Value, error) {
	d.dev.Call("pushErrorScope", "out-of-memory")
	d.dev.Call("pushErrorScope", "validation")
	v, err := f()
	validation := d.dev.Call("popErrorScope")
	oom := d.dev.Call("popErrorScope")
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

func (d *jsDevice) Write(b Buffer, offset int64, data []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.usable(); err != nil {
		return err
	}
	jb, err := d.asBuffer(b)
	if err != nil {
		return err
	}
	if err := jb.checkRange(CopyDst, offset, int64(len(data))); err != nil {
		return fmt.Errorf("gpu: write: %w", err)
	}
	// writeBuffer copies its source when called, so one scratch array in
	// JavaScript memory carries a big upload piece by piece. It is never a
	// view of wasm memory, which moves when the Go heap grows.
	for done := 0; done < len(data); {
		n := min(len(data)-done, writeChunk)
		padded := (n + 3) &^ 3 // WebGPU writes whole words; the tail word is zero-padded
		scratch := d.scratchArray(padded)
		js.CopyBytesToJS(scratch, data[done:done+n])
		for i := n; i < padded; i++ {
			scratch.SetIndex(i, 0)
		}
		if _, err := jsCall(d.queue, "writeBuffer", jb.buf, offset+int64(done), scratch, 0, padded); err != nil {
			return fmt.Errorf("gpu: writing %d bytes to %v: %w", len(data), jb, err)
		}
		done += n
	}
	return nil
}

// scratchArray returns a Uint8Array of at least n bytes. Callers hold d.mu.
func (d *jsDevice) scratchArray(n int) js.Value {
	if d.scratch.IsUndefined() || d.scratch.Get("length").Int() < n {
		size := 64 << 10 // most writes are small: grow on the first big one
		if n > size {
			size = writeChunk
		}
		d.scratch = js.Global().Get("Uint8Array").New(size)
	}
	return d.scratch
}

func (d *jsDevice) Read(b Buffer, offset, size int64) ([]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.usable(); err != nil {
		return nil, err
	}
	jb, err := d.asBuffer(b)
	if err != nil {
		return nil, err
	}
	if err := jb.checkRange(CopySrc, offset, size); err != nil {
		return nil, fmt.Errorf("gpu: read: %w", err)
	}
	if size == 0 {
		return []byte{}, nil
	}
	n := align4(size)
	staging, err := d.stagingBuffer(n)
	if err != nil {
		return nil, err
	}
	if n > jsStagingKeep {
		defer staging.Call("destroy")
	}
	enc := d.dev.Call("createCommandEncoder")
	enc.Call("copyBufferToBuffer", jb.buf, offset, staging, 0, n)
	d.queue.Call("submit", []any{enc.Call("finish")})

	p, err := jsCall(staging, "mapAsync", mapModeRead, 0, n)
	if err == nil {
		_, err = jsAwait(p)
	}
	if err != nil {
		if lost := d.usable(); lost != nil {
			return nil, lost
		}
		return nil, fmt.Errorf("gpu: reading %v: mapping the read-back buffer: %w", jb, err)
	}
	out := make([]byte, size)
	mapped := staging.Call("getMappedRange", 0, n)
	js.CopyBytesToGo(out, js.Global().Get("Uint8Array").New(mapped, 0, size))
	staging.Call("unmap")
	if err := d.takeUncaptured(); err != nil {
		return nil, err
	}
	return out, nil
}

// stagingBuffer returns a map-read buffer of at least n bytes: the kept one
// if it is big enough, else a new one, kept if it is small. Callers hold d.mu
// and destroy buffers bigger than jsStagingKeep themselves.
func (d *jsDevice) stagingBuffer(n int64) (js.Value, error) {
	if n <= d.stagingSize {
		return d.staging, nil
	}
	size := n
	if n <= jsStagingKeep {
		size = max(4096, jsNextPow2(n))
	}
	buf, err := jsCall(d.dev, "createBuffer", map[string]any{
		"label": "tessera read staging",
		"size":  size,
		"usage": usageMapRead | usageCopyDst,
	})
	if err != nil {
		return js.Value{}, fmt.Errorf("gpu: creating a %s read-back buffer: %w", FormatBytes(size), err)
	}
	if size <= jsStagingKeep {
		if d.stagingSize > 0 {
			d.staging.Call("destroy")
		}
		d.staging, d.stagingSize = buf, size
	}
	return buf, nil
}

func (d *jsDevice) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	d.closed = true
	d.pipelines, d.layouts = nil, nil
	if d.stagingSize > 0 {
		d.staging.Call("destroy")
		d.staging, d.stagingSize = js.Value{}, 0
	}
	d.scratch = js.Value{}
	d.dev.Call("removeEventListener", "uncapturederror", d.onError)
	d.onError.Release()
	d.dev.Call("destroy") // frees every buffer and settles device.lost
}

func jsNextPow2(n int64) int64 {
	p := int64(1)
	for p < n {
		p <<= 1
	}
	return p
}
