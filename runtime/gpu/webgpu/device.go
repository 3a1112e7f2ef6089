package webgpu

import (
	"errors"
	"fmt"
	"github.com/tessera-llm/tessera/models/dtype"
	"sync"
)

// The Device both platforms implement, written once: the native device
// (native_*.go: wgpu-native through cogentcore/webgpu) and the browser's
// (*_js.go: navigator.gpu through syscall/js) differ only in the calls that
// reach their API, which each gives as a platform. Everything else (the
// lock, the checks that turn mistakes into Go errors, the caches, the
// read-back staging buffer, the recorder) is here and in bindgroup.go,
// buffer.go and recorder.go.

var errClosed = errors.New("gpu: device is closed")

// platform is one WebGPU API's calls. B, G, P and L are its handles of a
// buffer, a bind group, a compute pipeline and the layouts of one binding
// shape. The device makes every call under its lock, after its checks, and
// wraps their errors with what it knows (the buffer, the kernel), but for
// newPipeline's and submit's: how a compiler's messages or a failed
// submission are best told differs by platform, so those come finished.
type platform[B, G, P, L any] interface {
	// lost says why the device is gone, or nil while it works.
	lost() error
	// reported returns the errors the platform reported on its own since
	// the last call, as one error (a browser's "uncapturederror" events).
	reported() error

	newBuffer(label string, alloc int64, usage Usage) (B, error)
	// newStaging makes a buffer of size bytes that read maps.
	newStaging(size int64) (B, error)
	releaseBuffer(B)
	// write queues data, a multiple of 4 bytes but for a ragged tail that
	// write pads with zeros, into dst at offset.
	write(dst B, offset int64, data []byte) error
	// read copies len(out) bytes of src at offset through staging, n bytes
	// (len(out) rounded up to a word) from its start, waiting for all work
	// submitted before.
	read(src B, offset int64, staging B, n int64, out []byte) error

	newLayout(key string, bindings []Access) (L, error)
	newBindGroup(label string, layout L, entries []groupEntry[B]) (G, error)
	releaseBindGroup(G)
	newPipeline(k Kernel, src string, layout L) (P, error)
	// submit encodes ops, checked and live, and submits them at once.
	submit(ops []command[B, G, P, L]) error
	// close releases the pipelines, the layouts and the device itself.
	close(pipelines []P, layouts []L)
}

// device is a Device on platform api.
//
// Every call into the platform happens under mu (in the browser also across
// its awaits): wgpu-native keeps one error scope stack per device and the
// binding pushes and pops a scope around each call, and a browser's error
// scopes would interleave likewise, so two goroutines calling at once could
// swap errors. The lock also guards the caches and every object's released
// flag. A goroutine parked on mu is fine in wasm: the others and the
// browser's event loop go on.
type device[B, G, P, L any] struct {
	mu   sync.Mutex
	api  platform[B, G, P, L]
	info Info

	maxUniformBinding int64
	uniformAlign      int64

	pipelines map[string]*pipeline[B, G, P, L] // by Kernel.CacheKey
	layouts   map[string]*layout[L]            // by LayoutKey

	staging     B // map-read buffer for Read, kept when small
	stagingSize int64

	// releases counts the buffers released so far: a bind group checked
	// since the last one still binds live buffers (checkLive).
	releases uint64

	closed bool
}

// stagingKeep is the largest read-back staging buffer kept between Reads:
// decode reads a few bytes per token and should not allocate each time, but
// a one-off read of a big tensor should not pin its size for good.
const stagingKeep = 16 << 20

func newDevice[B, G, P, L any](api platform[B, G, P, L], info Info, maxUniformBinding, uniformAlign int64) *device[B, G, P, L] {
	return &device[B, G, P, L]{
		api:               api,
		info:              info,
		maxUniformBinding: maxUniformBinding,
		uniformAlign:      uniformAlign,
		pipelines:         make(map[string]*pipeline[B, G, P, L]),
		layouts:           make(map[string]*layout[L]),
	}
}

func (d *device[B, G, P, L]) Info() Info { return d.info }

// Compiled is how many pipelines the device has compiled (see Compiler).
func (d *device[B, G, P, L]) Compiled() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.pipelines)
}

// usable reports why the device cannot take new work, if it cannot.
// Callers hold d.mu.
func (d *device[B, G, P, L]) usable() error {
	if d.closed {
		return errClosed
	}
	return d.api.lost()
}

// release marks an object released, under the lock, and frees its
// handle the first time only: Release is safe to call twice.
func (d *device[B, G, P, L]) release(released *bool, free func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !*released {
		*released = true
		free()
	}
}

// asBuffer checks that b is a live buffer of this device. Callers hold d.mu.
func (d *device[B, G, P, L]) asBuffer(b Buffer) (*buffer[B, G, P, L], error) {
	db, ok := b.(*buffer[B, G, P, L])
	switch {
	case !ok || db == nil:
		return nil, fmt.Errorf("gpu: %T is not a buffer of this device", b)
	case db.d != d:
		return nil, fmt.Errorf("gpu: %v belongs to another device", db)
	case db.dead():
		return nil, fmt.Errorf("gpu: %v is used after Release", db)
	}
	return db, nil
}

// transferable checks a Write or Read (op) of size bytes of b at offset,
// which needs usage need. Callers hold d.mu.
func (d *device[B, G, P, L]) transferable(op string, b Buffer, need Usage, offset, size int64) (*buffer[B, G, P, L], error) {
	if err := d.usable(); err != nil {
		return nil, err
	}
	db, err := d.asBuffer(b)
	if err != nil {
		return nil, err
	}
	if err := db.checkRange(need, offset, size); err != nil {
		return nil, fmt.Errorf("gpu: %s: %w", op, err)
	}
	return db, nil
}

func (d *device[B, G, P, L]) NewBuffer(label string, size int64, usage Usage) (Buffer, error) {
	alloc, err := checkNewBuffer(label, size, usage, d.info)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.usable(); err != nil {
		return nil, err
	}
	h, err := d.api.newBuffer(label, alloc, usage)
	if err != nil {
		return nil, fmt.Errorf("gpu: creating buffer %q of %s: %w", label, dtype.FormatBytes(size), err)
	}
	return &buffer[B, G, P, L]{d: d, h: h, bufferMeta: bufferMeta{label: label, size: size, alloc: alloc, usage: usage}}, nil
}

func (d *device[B, G, P, L]) SubBuffer(b Buffer, label string, offset, size int64) (Buffer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.usable(); err != nil {
		return nil, err
	}
	base, err := d.asBuffer(b)
	if err != nil {
		return nil, err
	}
	if base.base != nil {
		return nil, fmt.Errorf("gpu: sub-buffer %q of %v, itself a sub-buffer", label, base)
	}
	alloc := align4(size)
	if align := int64(d.info.MinStorageBufferOffsetAlignment); size <= 0 || offset < 0 || align > 0 && offset%align != 0 || offset+alloc > base.alloc {
		return nil, fmt.Errorf("gpu: sub-buffer %q: %d bytes at offset %d of %v (%d bytes, offsets multiples of %d)",
			label, size, offset, base, base.size, align)
	}
	return &buffer[B, G, P, L]{d: d, h: base.h, base: base, off: offset,
		bufferMeta: bufferMeta{label: label, size: size, alloc: alloc, usage: base.usage}}, nil
}

func (d *device[B, G, P, L]) Write(b Buffer, offset int64, data []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	db, err := d.transferable("write", b, CopyDst, offset, int64(len(data)))
	if err != nil {
		return err
	}
	if err := d.api.write(db.h, db.off+offset, data); err != nil {
		return fmt.Errorf("gpu: writing %d bytes to %v: %w", len(data), db, err)
	}
	return nil
}

func (d *device[B, G, P, L]) Read(b Buffer, offset, size int64) ([]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	db, err := d.transferable("read", b, CopySrc, offset, size)
	if err != nil {
		return nil, err
	}
	if size == 0 {
		return []byte{}, nil
	}
	n := align4(size)
	staging, err := d.stagingBuffer(n)
	if err != nil {
		return nil, err
	}
	if n > stagingKeep {
		defer d.api.releaseBuffer(staging)
	}
	out := make([]byte, size)
	if err := d.api.read(db.h, db.off+offset, staging, n, out); err != nil {
		// A read that failed because the device is gone says so, as every
		// later call will.
		if lost := d.api.lost(); lost != nil {
			return nil, lost
		}
		return nil, fmt.Errorf("gpu: reading %v: %w", db, err)
	}
	// A validation error the platform reported meanwhile may have spoilt
	// what was read.
	if err := d.api.reported(); err != nil {
		return nil, err
	}
	return out, nil
}

// stagingBuffer returns a map-read buffer of at least n bytes: the kept one
// if it is big enough, else a new one, kept if it is small. Callers hold d.mu
// and release buffers bigger than stagingKeep themselves.
func (d *device[B, G, P, L]) stagingBuffer(n int64) (B, error) {
	if n <= d.stagingSize {
		return d.staging, nil
	}
	size := n
	if n <= stagingKeep {
		size = max(4096, nextPow2(n))
	}
	buf, err := d.api.newStaging(size)
	if err != nil {
		var none B
		return none, fmt.Errorf("gpu: creating a %s read-back buffer: %w", dtype.FormatBytes(size), err)
	}
	if size <= stagingKeep {
		d.dropStaging()
		d.staging, d.stagingSize = buf, size
	}
	return buf, nil
}

// dropStaging releases the kept staging buffer. Callers hold d.mu.
func (d *device[B, G, P, L]) dropStaging() {
	if d.stagingSize > 0 {
		d.api.releaseBuffer(d.staging)
		var none B
		d.staging, d.stagingSize = none, 0
	}
}

func (d *device[B, G, P, L]) Recorder() Recorder {
	return &recorder[B, G, P, L]{d: d, maxGroups: d.info.MaxComputeWorkgroupsPerDimension}
}

func (d *device[B, G, P, L]) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	d.closed = true
	d.dropStaging()
	pipelines := make([]P, 0, len(d.pipelines))
	for _, p := range d.pipelines {
		pipelines = append(pipelines, p.h)
	}
	layouts := make([]L, 0, len(d.layouts))
	for _, l := range d.layouts {
		layouts = append(layouts, l.h)
	}
	d.pipelines, d.layouts = nil, nil
	d.api.close(pipelines, layouts)
}

func nextPow2(n int64) int64 {
	p := int64(1)
	for p < n {
		p <<= 1
	}
	return p
}

// WebGPU's GPUBufferUsage bits, which webgpu.h (and so wgpu-native) numbers
// the same.
const (
	usageMapRead = 0x0001
	usageCopySrc = 0x0004
	usageCopyDst = 0x0008
	usageUniform = 0x0040
	usageStorage = 0x0080
)

// webgpuUsage is u as GPUBufferUsage bits.
func webgpuUsage(u Usage) uint32 {
	var bits uint32
	for _, f := range []struct {
		ours   Usage
		theirs uint32
	}{{Storage, usageStorage}, {Uniform, usageUniform}, {CopySrc, usageCopySrc}, {CopyDst, usageCopyDst}} {
		if u&f.ours != 0 {
			bits |= f.theirs
		}
	}
	return bits
}
