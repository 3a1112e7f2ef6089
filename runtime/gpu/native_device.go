//go:build !js && cgo

package gpu

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cogentcore/webgpu/wgpu"
)

var errClosed = errors.New("gpu: device is closed")

// nativeDevice is the Device on wgpu-native, through cogentcore/webgpu.
//
// Errors: every wgpu call that the binding wraps in an error scope returns
// its validation error, and the rest are made impossible by checks on the Go
// side, because wgpu-native has no uncaptured-error handler here and aborts
// the process on any error it cannot hand back (an invalid submission above
// all). Device loss is noticed when a buffer mapping fails, and is sticky.
//
// Every wgpu call happens under mu. Besides guarding the caches, that is
// what makes the binding's error reporting correct: it wraps each call in a
// push/pop of the device's error scope, and wgpu-native keeps one scope
// stack per device, so two goroutines calling at once could swap errors.
type nativeDevice struct {
	mu       sync.Mutex
	instance *wgpu.Instance
	adapter  *wgpu.Adapter
	dev      *wgpu.Device
	queue    *wgpu.Queue
	info     Info

	maxUniformBinding int64
	uniformAlign      int64

	pipelines map[string]*nativePipeline // by Kernel.CacheKey
	layouts   map[string]*nativeLayout   // by LayoutKey

	staging     *wgpu.Buffer
	stagingSize uint64

	lost   error // sticky: once the device is lost every call returns it
	closed bool
}

type nativeBuffer struct {
	d   *nativeDevice
	buf *wgpu.Buffer
	bufferMeta
}

func (b *nativeBuffer) Release() {
	b.d.mu.Lock()
	defer b.d.mu.Unlock()
	if !b.released {
		b.released = true
		b.buf.Release()
	}
}

func (d *nativeDevice) Info() Info { return d.info }

// Compiled is how many pipelines the device has compiled (see Compiler).
func (d *nativeDevice) Compiled() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.pipelines)
}

// usable reports why the device cannot take new work, if it cannot.
// Callers hold d.mu.
func (d *nativeDevice) usable() error {
	if d.closed {
		return errClosed
	}
	return d.lost
}

// asBuffer checks that b is a live buffer of this device. Callers hold d.mu.
func (d *nativeDevice) asBuffer(b Buffer) (*nativeBuffer, error) {
	nb, ok := b.(*nativeBuffer)
	switch {
	case !ok || nb == nil:
		return nil, fmt.Errorf("gpu: %T is not a buffer of this device", b)
	case nb.d != d:
		return nil, fmt.Errorf("gpu: %v belongs to another device", nb)
	case nb.released:
		return nil, fmt.Errorf("gpu: %v is used after Release", nb)
	}
	return nb, nil
}

func (d *nativeDevice) NewBuffer(label string, size int64, usage Usage) (Buffer, error) {
	alloc, err := checkNewBuffer(label, size, usage, d.info)
	if err != nil {
		return nil, err
	}
	var wu wgpu.BufferUsage
	for _, f := range []struct {
		ours   Usage
		theirs wgpu.BufferUsage
	}{
		{Storage, wgpu.BufferUsageStorage}, {Uniform, wgpu.BufferUsageUniform},
		{CopySrc, wgpu.BufferUsageCopySrc}, {CopyDst, wgpu.BufferUsageCopyDst},
	} {
		if usage&f.ours != 0 {
			wu |= f.theirs
		}
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.usable(); err != nil {
		return nil, err
	}
	buf, err := d.dev.CreateBuffer(&wgpu.BufferDescriptor{Label: label, Size: uint64(alloc), Usage: wu})
	if err != nil {
		return nil, fmt.Errorf("gpu: creating buffer %q of %s: %w", label, FormatBytes(size), err)
	}
	return &nativeBuffer{d: d, buf: buf, bufferMeta: bufferMeta{label: label, size: size, alloc: alloc, usage: usage}}, nil
}

func (d *nativeDevice) Write(b Buffer, offset int64, data []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.usable(); err != nil {
		return err
	}
	nb, err := d.asBuffer(b)
	if err != nil {
		return err
	}
	if err := nb.checkRange(CopyDst, offset, int64(len(data))); err != nil {
		return fmt.Errorf("gpu: write: %w", err)
	}
	// WebGPU writes whole words: write the aligned body as it is and the
	// ragged tail through a zero-padded word, so that big odd-sized uploads
	// are never copied on the host.
	body := len(data) &^ 3
	if body > 0 {
		if err := d.queue.WriteBuffer(nb.buf, uint64(offset), data[:body]); err != nil {
			return fmt.Errorf("gpu: writing %d bytes to %v: %w", len(data), nb, err)
		}
	}
	if tail := data[body:]; len(tail) > 0 {
		var word [4]byte
		copy(word[:], tail)
		if err := d.queue.WriteBuffer(nb.buf, uint64(offset)+uint64(body), word[:]); err != nil {
			return fmt.Errorf("gpu: writing %d bytes to %v: %w", len(data), nb, err)
		}
	}
	return nil
}

func (d *nativeDevice) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	d.closed = true
	if d.lost == nil {
		d.dev.Poll(true, nil) // let submitted work finish before tearing down
	}
	for _, p := range d.pipelines {
		p.compute.Release()
	}
	for _, l := range d.layouts {
		l.pipeline.Release()
		l.group.Release()
	}
	d.pipelines, d.layouts = nil, nil
	if d.staging != nil {
		d.staging.Release()
		d.staging, d.stagingSize = nil, 0
	}
	d.queue.Release()
	d.dev.Release()
	d.adapter.Release()
	d.instance.Release()
}
