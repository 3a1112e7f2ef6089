package webgpu

import (
	"fmt"
	"github.com/tessera-llm/tessera/models/dtype"
)

// The checks every Device implementation makes the same way, whatever
// platform API sits behind it.

// align4 rounds n up to a multiple of 4: buffer sizes and copies are in
// whole 32-bit words.
func align4(n int64) int64 { return (n + 3) &^ 3 }

// checkNewBuffer validates a NewBuffer request against a device's limits
// and returns the size to allocate.
func checkNewBuffer(label string, size int64, usage Usage, info Info) (int64, error) {
	if size <= 0 {
		return 0, fmt.Errorf("gpu: buffer %q: size %d must be positive", label, size)
	}
	if usage == 0 || usage&^(Storage|Uniform|CopySrc|CopyDst) != 0 {
		return 0, fmt.Errorf("gpu: buffer %q: invalid usage %v", label, usage)
	}
	alloc := align4(size)
	if alloc > info.MaxBufferSize {
		return 0, fmt.Errorf("gpu: buffer %q: %s exceeds the device's buffer size limit %s",
			label, dtype.FormatBytes(size), dtype.FormatBytes(info.MaxBufferSize))
	}
	return alloc, nil
}

// buffer is a Buffer of device d: the platform's handle h and what the
// device keeps of it.
type buffer[B, G, P, L any] struct {
	d *device[B, G, P, L]
	h B
	// A sub-buffer (Device.SubBuffer) is the bytes of base from off: h is
	// base's handle, and every offset given to the platform is moved by off.
	base *buffer[B, G, P, L]
	off  int64
	bufferMeta
}

func (b *buffer[B, G, P, L]) Release() {
	b.d.release(&b.released, func() {
		b.d.releases++
		if b.base == nil {
			b.d.api.releaseBuffer(b.h)
		}
	})
}

// root is the buffer the platform sees: b's base, or b.
func (b *buffer[B, G, P, L]) root() *buffer[B, G, P, L] {
	if b.base != nil {
		return b.base
	}
	return b
}

// dead reports whether b, or the buffer it is part of, was released.
// Callers hold the device's lock.
func (b *buffer[B, G, P, L]) dead() bool {
	return b.released || b.base != nil && b.base.released
}

// bufferMeta is what a device keeps of a buffer besides its platform
// handle: the checks below read only it.
type bufferMeta struct {
	label    string
	size     int64 // as requested
	alloc    int64 // size rounded up to a multiple of 4
	usage    Usage
	released bool // guarded by the device's mu
}

func (b *bufferMeta) Size() int64 { return b.size }

func (b *bufferMeta) String() string { return fmt.Sprintf("buffer %q", b.label) }

// checkRange validates size bytes at offset for a copy that needs usage
// need (CopySrc or CopyDst).
func (b *bufferMeta) checkRange(need Usage, offset, size int64) error {
	switch {
	case b.usage&need == 0:
		return fmt.Errorf("%v has usage %v, which lacks %v", b, b.usage, need)
	case offset < 0 || offset%4 != 0:
		return fmt.Errorf("offset %d into %v is not a non-negative multiple of 4", offset, b)
	case size < 0 || offset+align4(size) > b.alloc:
		return fmt.Errorf("%d bytes at offset %d do not fit %v of %d bytes", size, offset, b, b.size)
	}
	return nil
}

// bindingSize validates bind, of this buffer, for a slot of access a on a
// device of info whose uniform bindings start at multiples of uniformAlign
// and hold at most uniformLimit bytes, so that mistakes come back as Go
// errors that name the buffer rather than as the platform's validation
// text. It returns the bound size.
func (b *bufferMeta) bindingSize(a Access, bind Binding, info Info, uniformAlign, uniformLimit int64) (int64, error) {
	align, limit := int64(info.MinStorageBufferOffsetAlignment), info.MaxStorageBufferBindingSize
	if a == UniformBinding {
		align, limit = uniformAlign, uniformLimit
	}
	need := Storage
	if a == UniformBinding {
		need = Uniform
	}
	size := bind.Size
	if size == 0 {
		size = b.alloc - bind.Offset
	}
	switch {
	case b.usage&need == 0:
		return 0, fmt.Errorf("%v has usage %v, which lacks %v for a %s binding", b, b.usage, need, a)
	case bind.Offset < 0 || bind.Offset%align != 0:
		return 0, fmt.Errorf("offset %d into %v is not a multiple of the device's alignment %d", bind.Offset, b, align)
	case size <= 0 || size%4 != 0 || bind.Offset+size > b.alloc:
		return 0, fmt.Errorf("%d bytes at offset %d do not fit %v of %d bytes", size, bind.Offset, b, b.size)
	case size > limit:
		return 0, fmt.Errorf("%s of %v exceed the device's %s binding limit of %s; split the tensor across bindings",
			dtype.FormatBytes(size), b, a, dtype.FormatBytes(limit))
	}
	return size, nil
}

// StorageCount is how many of a kernel's bindings are storage buffers,
// which the device's MaxStorageBuffersPerShaderStage bounds.
func StorageCount(bindings []Access) int {
	n := 0
	for _, a := range bindings {
		if a != UniformBinding {
			n++
		}
	}
	return n
}
