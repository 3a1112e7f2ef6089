package webgpu_test

import (
	"bytes"
	"encoding/binary"
	"strings"
	"sync"
	"testing"

	"github.com/tessera-llm/tessera/runtime/gpu/gputest"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
)

// Helpers shared by the device tests. Names carry a dev prefix so they do
// not collide with other test files of package gpu_test.

func devWords(v ...uint32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], x)
	}
	return b
}

func devUnwords(b []byte) []uint32 {
	v := make([]uint32, len(b)/4)
	for i := range v {
		v[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return v
}

func devBuffer(t testing.TB, d webgpu.Device, size int64, usage webgpu.Usage) webgpu.Buffer {
	t.Helper()
	b, err := d.NewBuffer(t.Name(), size, usage)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Release)
	return b
}

func devReadWords(t testing.TB, d webgpu.Device, b webgpu.Buffer, offset int64, n int) []uint32 {
	t.Helper()
	data, err := d.Read(b, offset, int64(4*n))
	if err != nil {
		t.Fatal(err)
	}
	return devUnwords(data)
}

func devPipeline(t testing.TB, d webgpu.Device, k webgpu.Kernel) webgpu.Pipeline {
	t.Helper()
	p, err := d.Pipeline(k)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func devBindGroup(t testing.TB, d webgpu.Device, p webgpu.Pipeline, b ...webgpu.Binding) webgpu.BindGroup {
	t.Helper()
	g, err := d.BindGroup(p, b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Release)
	return g
}

const devRW = webgpu.Storage | webgpu.CopySrc | webgpu.CopyDst

func TestWriteReadRoundTrip(t *testing.T) {
	d := gputest.Open(t)
	tests := []struct {
		name         string
		size, offset int64
		n            int // bytes written at offset and read back
	}{
		{"word", 4, 0, 4},
		{"one byte", 1, 0, 1},
		{"odd size", 7, 0, 7},
		{"odd tail at offset", 64, 8, 13},
		{"large odd", 1<<20 + 3, 0, 1<<20 + 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := devBuffer(t, d, tc.size, devRW)
			if got := b.Size(); got != tc.size {
				t.Errorf("Size() = %d, want %d", got, tc.size)
			}
			data := make([]byte, tc.n)
			for i := range data {
				data[i] = byte(i*7 + 1)
			}
			if err := d.Write(b, tc.offset, data); err != nil {
				t.Fatal(err)
			}
			got, err := d.Read(b, tc.offset, int64(tc.n))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Errorf("read back %d bytes differ from those written", tc.n)
			}
		})
	}
}

func TestWriteReadErrors(t *testing.T) {
	d := gputest.Open(t)
	b := devBuffer(t, d, 16, devRW)
	noCopy := devBuffer(t, d, 16, webgpu.Storage)
	released := devBuffer(t, d, 16, devRW)
	released.Release()
	tests := []struct {
		name string
		op   func() error
		want string
	}{
		{"write unaligned offset", func() error { return d.Write(b, 2, []byte{1, 2, 3, 4}) }, "multiple of 4"},
		{"write past end", func() error { return d.Write(b, 12, make([]byte, 8)) }, "do not fit"},
		{"write without CopyDst", func() error { return d.Write(noCopy, 0, make([]byte, 4)) }, "lacks CopyDst"},
		{"write released", func() error { return d.Write(released, 0, make([]byte, 4)) }, "after Release"},
		{"read unaligned offset", func() error { _, err := d.Read(b, 1, 4); return err }, "multiple of 4"},
		{"read past end", func() error { _, err := d.Read(b, 8, 12); return err }, "do not fit"},
		{"read without CopySrc", func() error { _, err := d.Read(noCopy, 0, 4); return err }, "lacks CopySrc"},
		{"zero-size buffer", func() error { _, err := d.NewBuffer("empty", 0, devRW); return err }, "must be positive"},
		{"no usage", func() error { _, err := d.NewBuffer("none", 4, 0); return err }, "invalid usage"},
		{"too big", func() error { _, err := d.NewBuffer("huge", d.Info().MaxBufferSize+4, devRW); return err }, "exceeds"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.op()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// fillSource writes its workgroup size into every element it covers.
const fillSource = `
override WG: u32 = 64;
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
	out[id.x] = WG;
}
`

func TestOverrideConstants(t *testing.T) {
	d := gputest.Open(t)
	const n = 512
	tests := []struct {
		name      string
		constants map[string]float64
		want      uint32
	}{
		{"default", nil, 64},
		{"32", map[string]float64{"WG": 32}, 32},
		{"256", map[string]float64{"WG": 256}, 256},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := devBuffer(t, d, 4*n, devRW)
			p := devPipeline(t, d, webgpu.Kernel{Name: "fill", Source: fillSource,
				Bindings: []webgpu.Access{webgpu.ReadWrite}, Constants: tc.constants})
			rec := d.Recorder()
			rec.Dispatch(p, devBindGroup(t, d, p, webgpu.Binding{Buffer: out}), n/tc.want, 1, 1)
			if err := rec.Submit(); err != nil {
				t.Fatal(err)
			}
			for i, v := range devReadWords(t, d, out, 0, n) {
				if v != tc.want {
					t.Fatalf("out[%d] = %d, want %d", i, v, tc.want)
				}
			}
		})
	}
}

const scaleSource = `
struct Params { scale: u32, n: u32 }
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
	if (id.x < params.n) {
		dst[id.x] = src[id.x] * params.scale;
	}
}
`

func TestUniformBinding(t *testing.T) {
	d := gputest.Open(t)
	const n = 100
	params := devBuffer(t, d, 8, webgpu.Uniform|webgpu.CopyDst)
	src := devBuffer(t, d, 4*n, devRW)
	dst := devBuffer(t, d, 4*n, devRW)
	in := make([]uint32, n)
	for i := range in {
		in[i] = uint32(i)
	}
	if err := d.Write(src, 0, devWords(in...)); err != nil {
		t.Fatal(err)
	}
	if err := d.Write(params, 0, devWords(3, n)); err != nil {
		t.Fatal(err)
	}
	p := devPipeline(t, d, webgpu.Kernel{Name: "scale", Source: scaleSource,
		Bindings: []webgpu.Access{webgpu.UniformBinding, webgpu.ReadOnly, webgpu.ReadWrite}})
	rec := d.Recorder()
	rec.Dispatch(p, devBindGroup(t, d, p, webgpu.Binding{Buffer: params}, webgpu.Binding{Buffer: src}, webgpu.Binding{Buffer: dst}), 2, 1, 1)
	if err := rec.Submit(); err != nil {
		t.Fatal(err)
	}
	for i, v := range devReadWords(t, d, dst, 0, n) {
		if v != 3*uint32(i) {
			t.Fatalf("dst[%d] = %d, want %d", i, v, 3*i)
		}
	}
}

// markSource writes 1000+i into element i of the range it is bound to.
const markSource = `
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
	if (id.x < arrayLength(&out)) {
		out[id.x] = 1000u + id.x;
	}
}
`

func TestBindGroupOffsets(t *testing.T) {
	d := gputest.Open(t)
	align := int64(d.Info().MinStorageBufferOffsetAlignment)
	words := int(align / 4)
	buf := devBuffer(t, d, 3*align, devRW)
	p := devPipeline(t, d, webgpu.Kernel{Name: "mark", Source: markSource, Bindings: []webgpu.Access{webgpu.ReadWrite}})

	// Bind only the middle slice: the first and last stay zero.
	rec := d.Recorder()
	rec.Dispatch(p, devBindGroup(t, d, p, webgpu.Binding{Buffer: buf, Offset: align, Size: align}), uint32(words+63)/64, 1, 1)
	if err := rec.Submit(); err != nil {
		t.Fatal(err)
	}
	got := devReadWords(t, d, buf, 0, 3*words)
	for i, v := range got {
		want := uint32(0)
		if i >= words && i < 2*words {
			want = 1000 + uint32(i-words)
		}
		if v != want {
			t.Fatalf("word %d = %d, want %d", i, v, want)
		}
	}

	// Size 0 binds the rest of the buffer from the offset.
	rec.Dispatch(p, devBindGroup(t, d, p, webgpu.Binding{Buffer: buf, Offset: 2 * align}), uint32(words+63)/64, 1, 1)
	if err := rec.Submit(); err != nil {
		t.Fatal(err)
	}
	if got := devReadWords(t, d, buf, 2*align, 1)[0]; got != 1000 {
		t.Errorf("first word of the last slice = %d, want 1000", got)
	}

	for _, tc := range []struct {
		name string
		bind webgpu.Binding
		want string
	}{
		{"misaligned", webgpu.Binding{Buffer: buf, Offset: 4}, "alignment"},
		{"past end", webgpu.Binding{Buffer: buf, Offset: 2 * align, Size: 2 * align}, "do not fit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := d.BindGroup(p, []webgpu.Binding{tc.bind}); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

const incrementSource = `
@group(0) @binding(0) var<storage, read_write> x: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
	if (id.x < arrayLength(&x)) {
		x[id.x] = x[id.x] + 1u;
	}
}
`

// TestManyDispatchesOneSubmit checks that dependent dispatches in one pass
// see each other's writes, and that a copy in the middle is ordered.
func TestManyDispatchesOneSubmit(t *testing.T) {
	d := gputest.Open(t)
	const n = 256
	x := devBuffer(t, d, 4*n, devRW)
	half := devBuffer(t, d, 4*n, devRW)
	p := devPipeline(t, d, webgpu.Kernel{Name: "increment", Source: incrementSource, Bindings: []webgpu.Access{webgpu.ReadWrite}})
	g := devBindGroup(t, d, p, webgpu.Binding{Buffer: x})
	rec := d.Recorder()
	for i := range 100 {
		if i == 50 {
			rec.Copy(x, 0, half, 0, 4*n)
		}
		rec.Dispatch(p, g, n/64, 1, 1)
	}
	if got := rec.Dispatches(); got != 100 {
		t.Errorf("Dispatches() = %d, want 100", got)
	}
	if err := rec.Submit(); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		b    webgpu.Buffer
		want uint32
	}{"x": {x, 100}, "copy after 50": {half, 50}} {
		for i, v := range devReadWords(t, d, tc.b, 0, n) {
			if v != tc.want {
				t.Fatalf("%s[%d] = %d, want %d", name, i, v, tc.want)
			}
		}
	}

	// The recorder is reusable and keeps counting.
	rec.Dispatch(p, g, n/64, 1, 1)
	if err := rec.Submit(); err != nil {
		t.Fatal(err)
	}
	if got := rec.Dispatches(); got != 101 {
		t.Errorf("Dispatches() after a second submit = %d, want 101", got)
	}
	if got := devReadWords(t, d, x, 0, 1)[0]; got != 101 {
		t.Errorf("x[0] = %d, want 101", got)
	}
}

func TestRecorderErrors(t *testing.T) {
	d := gputest.Open(t)
	p := devPipeline(t, d, webgpu.Kernel{Name: "increment", Source: incrementSource, Bindings: []webgpu.Access{webgpu.ReadWrite}})
	other := devPipeline(t, d, webgpu.Kernel{Name: "scale", Source: scaleSource,
		Bindings: []webgpu.Access{webgpu.UniformBinding, webgpu.ReadOnly, webgpu.ReadWrite}})
	tests := []struct {
		name   string
		record func(rec webgpu.Recorder)
		want   string
	}{
		{"released buffer", func(rec webgpu.Recorder) {
			b := devBuffer(t, d, 64, devRW)
			rec.Dispatch(p, devBindGroup(t, d, p, webgpu.Binding{Buffer: b}), 1, 1, 1)
			b.Release()
		}, "after Release"},
		{"released bind group", func(rec webgpu.Recorder) {
			g, err := d.BindGroup(p, []webgpu.Binding{{Buffer: devBuffer(t, d, 64, devRW)}})
			if err != nil {
				t.Fatal(err)
			}
			rec.Dispatch(p, g, 1, 1, 1)
			g.Release()
		}, "after Release"},
		{"bind group of another shape", func(rec webgpu.Recorder) {
			rec.Dispatch(other, devBindGroup(t, d, p, webgpu.Binding{Buffer: devBuffer(t, d, 64, devRW)}), 1, 1, 1)
		}, "bindings are"},
		{"too many workgroups", func(rec webgpu.Recorder) {
			rec.Dispatch(p, devBindGroup(t, d, p, webgpu.Binding{Buffer: devBuffer(t, d, 64, devRW)}), 1<<31, 1, 1)
		}, "exceed"},
		{"copy to itself", func(rec webgpu.Recorder) {
			b := devBuffer(t, d, 64, devRW)
			rec.Copy(b, 0, b, 32, 32)
		}, "same"},
		{"copy past end", func(rec webgpu.Recorder) {
			rec.Copy(devBuffer(t, d, 64, devRW), 0, devBuffer(t, d, 16, devRW), 0, 64)
		}, "do not fit"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := d.Recorder()
			tc.record(rec)
			err := rec.Submit()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Submit error = %v, want one containing %q", err, tc.want)
			}
			if err := rec.Submit(); err != nil {
				t.Errorf("Submit after a failed one = %v, want nil (the recorder starts over)", err)
			}
		})
	}
}

func TestPipelineCache(t *testing.T) {
	d := gputest.Open(t)
	k := webgpu.Kernel{Name: "fill", Source: fillSource, Bindings: []webgpu.Access{webgpu.ReadWrite},
		Constants: map[string]float64{"WG": 32}}
	a, b := devPipeline(t, d, k), devPipeline(t, d, k)
	if a != b {
		t.Error("the same kernel compiled twice gave two pipelines")
	}
	k.Constants = map[string]float64{"WG": 128}
	if c := devPipeline(t, d, k); c == a {
		t.Error("different constants gave the same pipeline")
	}
}

func TestCompileErrors(t *testing.T) {
	d := gputest.Open(t)
	tests := []struct {
		name   string
		kernel webgpu.Kernel
		want   []string
	}{
		{"syntax", webgpu.Kernel{Name: "broken", Source: "fn main( {"}, []string{`"broken"`, "expected"}},
		{"type", webgpu.Kernel{Name: "typo", Source: "@compute @workgroup_size(1) fn main() { let x: u32 = 1.5; }"},
			[]string{`"typo"`}},
		{"missing entry point", webgpu.Kernel{Name: "noentry", Entry: "absent",
			Source: "@compute @workgroup_size(1) fn main() {}"}, []string{`"noentry"`}},
		{"unknown constant", webgpu.Kernel{Name: "fill", Source: fillSource, Bindings: []webgpu.Access{webgpu.ReadWrite},
			Constants: map[string]float64{"NOPE": 1}}, []string{`"fill"`, "NOPE"}},
		{"no name", webgpu.Kernel{Source: fillSource}, []string{"no Name"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := d.Pipeline(tc.kernel)
			if err == nil {
				t.Fatal("no error")
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
	// The device still works afterwards.
	devPipeline(t, d, webgpu.Kernel{Name: "fill", Source: fillSource, Bindings: []webgpu.Access{webgpu.ReadWrite}})
}

// TestConcurrentUse runs independent write/dispatch/read loops at once.
func TestConcurrentUse(t *testing.T) {
	d := gputest.Open(t)
	p := devPipeline(t, d, webgpu.Kernel{Name: "increment", Source: incrementSource, Bindings: []webgpu.Access{webgpu.ReadWrite}})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		x := devBuffer(t, d, 256, devRW)
		g := devBindGroup(t, d, p, webgpu.Binding{Buffer: x})
		wg.Go(func() {
			if err := d.Write(x, 0, devWords(uint32(w))); err != nil {
				errs <- err
				return
			}
			rec := d.Recorder()
			for range 10 {
				rec.Dispatch(p, g, 1, 1, 1)
			}
			if err := rec.Submit(); err != nil {
				errs <- err
				return
			}
			got, err := d.Read(x, 0, 4)
			if err != nil {
				errs <- err
				return
			}
			if v := devUnwords(got)[0]; v != uint32(w)+10 {
				t.Errorf("worker %d read %d, want %d", w, v, w+10)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
