//go:build !js && cgo

package gpu

import (
	"fmt"

	"github.com/cogentcore/webgpu/wgpu"
)

// stagingKeep is the largest read-back staging buffer kept between Reads:
// decode reads a few bytes per token and should not allocate each time, but
// a one-off read of a big tensor should not pin its size for good.
const stagingKeep = 16 << 20

// maxPolls bounds the wait for a buffer mapping. One blocking poll finishes
// all submitted work, so needing more means the device stopped answering.
const maxPolls = 8

func (d *nativeDevice) Read(b Buffer, offset, size int64) ([]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.usable(); err != nil {
		return nil, err
	}
	nb, err := d.asBuffer(b)
	if err != nil {
		return nil, err
	}
	if err := nb.checkRange(CopySrc, offset, size); err != nil {
		return nil, fmt.Errorf("gpu: read: %w", err)
	}
	if size == 0 {
		return []byte{}, nil
	}
	n := uint64(align4(size))
	staging, err := d.stagingBuffer(n)
	if err != nil {
		return nil, err
	}
	if n > stagingKeep {
		defer staging.Release()
	}

	enc, err := d.dev.CreateCommandEncoder(nil)
	if err != nil {
		return nil, fmt.Errorf("gpu: reading %v: %w", nb, err)
	}
	defer enc.Release()
	if err := enc.CopyBufferToBuffer(nb.buf, uint64(offset), staging, 0, n); err != nil {
		return nil, fmt.Errorf("gpu: reading %v: %w", nb, err)
	}
	cmd, err := enc.Finish(nil)
	if err != nil {
		return nil, fmt.Errorf("gpu: reading %v: %w", nb, err)
	}
	defer cmd.Release()
	d.queue.Submit(cmd)

	if err := d.mapRead(staging, n); err != nil {
		return nil, fmt.Errorf("gpu: reading %v: %w", nb, err)
	}
	out := make([]byte, size)
	copy(out, staging.GetMappedRange(0, uint(n)))
	if err := staging.Unmap(); err != nil {
		return nil, fmt.Errorf("gpu: reading %v: %w", nb, err)
	}
	return out, nil
}

// stagingBuffer returns a map-read buffer of at least n bytes: the kept one
// if it is big enough, else a new one, kept if it is small. Callers hold d.mu
// and release buffers bigger than stagingKeep themselves.
func (d *nativeDevice) stagingBuffer(n uint64) (*wgpu.Buffer, error) {
	if n <= d.stagingSize {
		return d.staging, nil
	}
	size := n
	if n <= stagingKeep {
		size = max(4096, nextPow2(n))
	}
	buf, err := d.dev.CreateBuffer(&wgpu.BufferDescriptor{
		Label: "tessera read staging",
		Size:  size,
		Usage: wgpu.BufferUsageMapRead | wgpu.BufferUsageCopyDst,
	})
	if err != nil {
		return nil, fmt.Errorf("gpu: creating a %s read-back buffer: %w", FormatBytes(int64(size)), err)
	}
	if size <= stagingKeep {
		if d.staging != nil {
			d.staging.Release()
		}
		d.staging, d.stagingSize = buf, size
	}
	return buf, nil
}

// mapRead maps the first n bytes of staging for reading and waits for it.
//
// wgpu-native calls MapAsync's callback only from inside Device.Poll, on the
// polling goroutine; a blocking Poll returns once all submitted work is done,
// so the callback has run by then unless the device is gone.
func (d *nativeDevice) mapRead(staging *wgpu.Buffer, n uint64) error {
	var status wgpu.BufferMapAsyncStatus
	done := false
	err := staging.MapAsync(wgpu.MapModeRead, 0, n, func(s wgpu.BufferMapAsyncStatus) {
		status, done = s, true
	})
	if err != nil {
		return err
	}
	for i := 0; !done; i++ {
		if i == maxPolls {
			d.lost = fmt.Errorf("%w: a buffer mapping never completed", ErrDeviceLost)
			return d.lost
		}
		d.dev.Poll(true, nil)
	}
	switch status {
	case wgpu.BufferMapAsyncStatusSuccess:
		return nil
	case wgpu.BufferMapAsyncStatusDeviceLost:
		d.lost = fmt.Errorf("%w while mapping a buffer", ErrDeviceLost)
		return d.lost
	}
	return fmt.Errorf("mapping the read-back buffer failed: %v", status)
}

func nextPow2(n uint64) uint64 {
	p := uint64(1)
	for p < n {
		p <<= 1
	}
	return p
}
