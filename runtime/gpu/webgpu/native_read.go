//go:build !js && cgo

package webgpu

import (
	"fmt"

	"github.com/cogentcore/webgpu/wgpu"
)

// maxPolls bounds the wait for a buffer mapping. One blocking poll finishes
// all submitted work, so needing more means the device stopped answering.
const maxPolls = 8

func (w *wgpuAPI) newStaging(size int64) (*wgpu.Buffer, error) {
	return w.dev.CreateBuffer(&wgpu.BufferDescriptor{
		Label: "tessera read staging",
		Size:  uint64(size),
		Usage: wgpu.BufferUsageMapRead | wgpu.BufferUsageCopyDst,
	})
}

func (w *wgpuAPI) read(src *wgpu.Buffer, offset int64, staging *wgpu.Buffer, n int64, out []byte) error {
	enc, err := w.dev.CreateCommandEncoder(nil)
	if err != nil {
		return err
	}
	defer enc.Release()
	if err := enc.CopyBufferToBuffer(src, uint64(offset), staging, 0, uint64(n)); err != nil {
		return err
	}
	cmd, err := enc.Finish(nil)
	if err != nil {
		return err
	}
	defer cmd.Release()
	w.queue.Submit(cmd)

	if err := w.mapRead(staging, uint64(n)); err != nil {
		return err
	}
	copy(out, staging.GetMappedRange(0, uint(n)))
	return staging.Unmap()
}

// mapRead maps the first n bytes of staging for reading and waits for it.
//
// wgpu-native calls MapAsync's callback only from inside Device.Poll, on the
// polling goroutine; a blocking Poll returns once all submitted work is done,
// so the callback has run by then unless the device is gone.
func (w *wgpuAPI) mapRead(staging *wgpu.Buffer, n uint64) error {
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
			w.lostErr = fmt.Errorf("%w: a buffer mapping never completed", ErrDeviceLost)
			return w.lostErr
		}
		w.dev.Poll(true, nil)
	}
	switch status {
	case wgpu.BufferMapAsyncStatusSuccess:
		return nil
	case wgpu.BufferMapAsyncStatusDeviceLost:
		w.lostErr = fmt.Errorf("%w while mapping a buffer", ErrDeviceLost)
		return w.lostErr
	}
	return fmt.Errorf("mapping the read-back buffer failed: %v", status)
}
