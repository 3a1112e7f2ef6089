package webgpu

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/tessera-llm/tessera/models/dtype"
	"time"
)

// copySource copies one storage buffer into another with vec4<f32> loads
// and stores, the widest plain access WGSL has, so that it measures memory
// bandwidth rather than instruction overhead. The grid may be 2-D because
// one dimension holds at most 65535 workgroups.
const copySource = `
override WG: u32 = 256;

@group(0) @binding(0) var<storage, read> src: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<f32>>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) lane: u32) {
	let i = (wg.y * groups.x + wg.x) * WG + lane;
	if (i < arrayLength(&src)) {
		dst[i] = src[i];
	}
}
`

// CopyBandwidth measures device memory bandwidth by copying a storage
// buffer of size bytes (capped at the device's binding and buffer
// limits) iters times, one submission each, after one warm-up copy. Bytes
// read and bytes written both count, so the result compares directly with a
// decode step's weight traffic. It returns GB/s (10⁹ bytes per second).
func CopyBandwidth(d Device, size int64, iters int) (gbps float64, err error) {
	info := d.Info()
	requested := size
	size = min(size, info.MaxStorageBufferBindingSize, info.MaxBufferSize) &^ 15
	if size < 16 || iters < 1 {
		return 0, fmt.Errorf("gpu: copy bandwidth: need at least 16 bytes and 1 iteration, got %d bytes (capped to %d) and %d", requested, size, iters)
	}
	wg := min(256, info.MaxComputeInvocationsPerWorkgroup)
	groups := (size/16 + int64(wg) - 1) / int64(wg)
	x := min(groups, int64(info.MaxComputeWorkgroupsPerDimension))
	y := (groups + x - 1) / x
	if y > int64(info.MaxComputeWorkgroupsPerDimension) {
		return 0, fmt.Errorf("gpu: copy bandwidth: %s needs more workgroups than the device allows", dtype.FormatBytes(size))
	}

	p, err := d.Pipeline(Kernel{
		Name:      "copy_bandwidth",
		Source:    copySource,
		Bindings:  []Access{ReadOnly, ReadWrite},
		Constants: map[string]float64{"WG": float64(wg)},
	})
	if err != nil {
		return 0, err
	}
	src, err := d.NewBuffer("copy_bandwidth src", size, Storage|CopyDst)
	if err != nil {
		return 0, err
	}
	defer src.Release()
	dst, err := d.NewBuffer("copy_bandwidth dst", size, Storage|CopySrc)
	if err != nil {
		return 0, err
	}
	defer dst.Release()
	g, err := d.BindGroup(p, []Binding{{Buffer: src}, {Buffer: dst}})
	if err != nil {
		return 0, err
	}
	defer g.Release()

	// The warm-up also checks that the kernel really copies.
	marker := []byte("tessera copy bw.")
	if err := d.Write(src, 0, marker); err != nil {
		return 0, err
	}
	rec := d.Recorder()
	copyOnce := func() error {
		rec.Dispatch(p, g, uint32(x), uint32(y), 1)
		return rec.Submit()
	}
	if err := copyOnce(); err != nil {
		return 0, err
	}
	got, err := d.Read(dst, 0, int64(len(marker)))
	if err != nil {
		return 0, err
	}
	if !bytes.Equal(got, marker) {
		return 0, errors.New("gpu: copy bandwidth: the copy kernel did not copy")
	}

	start := time.Now()
	for range iters {
		if err := copyOnce(); err != nil {
			return 0, err
		}
	}
	if _, err := d.Read(dst, 0, 4); err != nil { // waits for the copies
		return 0, err
	}
	elapsed := time.Since(start).Seconds()
	return float64(2*size) * float64(iters) / elapsed / 1e9, nil
}
