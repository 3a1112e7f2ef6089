package webgpu_test

import (
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/runtime/gpu/gputest"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
)

func TestAdapters(t *testing.T) {
	infos := gputest.Adapters(t)
	if len(infos) == 0 {
		t.Fatal("Adapters() returned no adapter and no error")
	}
	for i, info := range infos {
		t.Logf("adapter %d:\n%s", i, info)
		if info.Adapter == "" || info.Backend == "" || info.MaxStorageBufferBindingSize <= 0 {
			t.Errorf("adapter %d is missing its name, backend or limits: %+v", i, info)
		}
		if strings.Contains(info.Adapter, "llvmpipe") && (info.Backend != "Vulkan" || info.DeviceType != "cpu") {
			t.Errorf("lavapipe reported as %s/%s, want Vulkan/cpu", info.Backend, info.DeviceType)
		}
	}
}

// TestOpenAdapter chooses adapters by name and by index. It asks for
// "llvmpipe" where lavapipe is installed, and otherwise for part of the first
// adapter's name, so that it runs on real GPUs too.
func TestOpenAdapter(t *testing.T) {
	infos := gputest.Adapters(t)
	name := strings.ToUpper(strings.Fields(infos[0].Adapter)[0])
	for _, info := range infos {
		if strings.Contains(info.Adapter, "llvmpipe") {
			name = "llvmpipe"
		}
	}
	tests := []struct {
		choice string
		want   string // in Info.Adapter, or in the error when wantErr
		err    bool
	}{
		{choice: name, want: strings.ToLower(name)},
		{choice: "0", want: infos[0].Adapter},
		{choice: "nonexistent", want: "no adapter matches", err: true},
		{choice: "99", want: "available adapters", err: true},
	}
	for _, tc := range tests {
		t.Run(tc.choice, func(t *testing.T) {
			d, err := webgpu.Open(webgpu.Options{Adapter: tc.choice})
			if tc.err {
				if err == nil {
					d.Close()
					t.Fatal("no error")
				}
				if !strings.Contains(err.Error(), tc.want) {
					t.Errorf("error %q does not contain %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if got := strings.ToLower(d.Info().Adapter); !strings.Contains(got, strings.ToLower(tc.want)) {
				t.Errorf("opened %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDeviceLimits(t *testing.T) {
	d := gputest.Open(t)
	info := d.Info()
	t.Logf("device:\n%s", info)
	// A WebGPU device has at least the default limits.
	for _, c := range []struct {
		name      string
		got, want int64
	}{
		{"MaxStorageBufferBindingSize", info.MaxStorageBufferBindingSize, 128 << 20},
		{"MaxBufferSize", info.MaxBufferSize, 256 << 20},
		{"MaxComputeWorkgroupStorageSize", int64(info.MaxComputeWorkgroupStorageSize), 16 << 10},
		{"MaxComputeInvocationsPerWorkgroup", int64(info.MaxComputeInvocationsPerWorkgroup), 256},
		{"MaxStorageBuffersPerShaderStage", int64(info.MaxStorageBuffersPerShaderStage), 8},
	} {
		if c.got < c.want {
			t.Errorf("%s = %d, want at least %d", c.name, c.got, c.want)
		}
	}
	if info.MaxStorageBuffersPerShaderStage > 10 {
		t.Errorf("MaxStorageBuffersPerShaderStage = %d, want at most the 10 requested", info.MaxStorageBuffersPerShaderStage)
	}
}

func TestLoweredStorageBinding(t *testing.T) {
	const limit = 1 << 20
	d := gputest.OpenWith(t, webgpu.Options{MaxStorageBinding: limit})
	if got := d.Info().MaxStorageBufferBindingSize; got != limit {
		t.Fatalf("MaxStorageBufferBindingSize = %d, want %d", got, limit)
	}
	big := devBuffer(t, d, 2*limit, devRW)
	p := devPipeline(t, d, webgpu.Kernel{Name: "mark", Source: markSource, Bindings: []webgpu.Access{webgpu.ReadWrite}})
	if _, err := d.BindGroup(p, []webgpu.Binding{{Buffer: big}}); err == nil || !strings.Contains(err.Error(), "binding limit") {
		t.Errorf("binding 2 MiB under a 1 MiB limit: error = %v, want a binding limit error", err)
	}
	devBindGroup(t, d, p, webgpu.Binding{Buffer: big, Size: limit})
}

const f16Source = `
enable f16;
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(1)
fn main() {
	let h = f16(1.5);
	out[0] = f32(h * f16(2.0));
}
`

// TestShaderF16 checks that ShaderF16 means what it says: f16 kernels
// compile and run where it is true, and fail with an error (not a crash)
// where it is false.
func TestShaderF16(t *testing.T) {
	k := webgpu.Kernel{Name: "f16", Source: f16Source, Bindings: []webgpu.Access{webgpu.ReadWrite}}
	off := gputest.OpenWith(t, webgpu.Options{DisableF16: true})
	if off.Info().ShaderF16 {
		t.Error("DisableF16 left shader-f16 enabled")
	}
	if _, err := off.Pipeline(k); err == nil {
		t.Error("an f16 kernel compiled on a device without shader-f16")
	}

	d := gputest.Open(t)
	if !d.Info().ShaderF16 {
		t.Skip("shader-f16 is not usable on this device (adapter or WGSL compiler lacks it)")
	}
	out := devBuffer(t, d, 4, devRW)
	p := devPipeline(t, d, k)
	rec := d.Recorder()
	rec.Dispatch(p, devBindGroup(t, d, p, webgpu.Binding{Buffer: out}), 1, 1, 1)
	if err := rec.Submit(); err != nil {
		t.Fatal(err)
	}
	if got := devReadWords(t, d, out, 0, 1)[0]; got != 0x40400000 { // 3.0
		t.Errorf("f16 kernel wrote %#x, want 3.0 (0x40400000)", got)
	}
}

func TestCopyBandwidth(t *testing.T) {
	d := gputest.Open(t)
	gbps, err := webgpu.CopyBandwidth(d, 4<<20, 3)
	if err != nil {
		t.Fatal(err)
	}
	if gbps <= 0 {
		t.Errorf("bandwidth %v GB/s", gbps)
	}
	t.Logf("copy bandwidth: %.2f GB/s", gbps)
}

func BenchmarkCopyBandwidth(b *testing.B) {
	d := gputest.Open(b)
	gbps, err := webgpu.CopyBandwidth(d, 64<<20, b.N)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(gbps, "GB/s")
}
