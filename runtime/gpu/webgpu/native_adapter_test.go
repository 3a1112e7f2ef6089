//go:build !js && cgo

package webgpu

import (
	"testing"

	"github.com/cogentcore/webgpu/wgpu"
)

func TestFastestAdapter(t *testing.T) {
	tests := []struct {
		name  string
		types []string
		want  int
	}{
		{"only lavapipe", []string{"cpu"}, 0},
		{"discrete over cpu", []string{"cpu", "discrete"}, 1},
		{"discrete over integrated", []string{"integrated", "discrete", "cpu"}, 1},
		{"integrated over cpu", []string{"cpu", "integrated"}, 1},
		{"first of equals", []string{"discrete", "discrete"}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			infos := make([]Info, len(tc.types))
			for i, typ := range tc.types {
				infos[i].DeviceType = typ
			}
			if got := fastest(infos); got != tc.want {
				t.Errorf("fastest(%v) = %d, want %d", tc.types, got, tc.want)
			}
		})
	}
}

func TestAdapterNames(t *testing.T) {
	tests := []struct {
		info         wgpu.AdapterInfo
		name, vendor string
	}{
		{wgpu.AdapterInfo{Name: "0x0", VendorName: "0x10005", VendorId: 0x10005,
			DriverDescription: "llvmpipe (LLVM 15.0.6, 256 bits)"}, "llvmpipe (LLVM 15.0.6, 256 bits)", "Mesa (0x10005)"},
		{wgpu.AdapterInfo{Name: "NVIDIA H200", VendorId: 0x10de}, "NVIDIA H200", "NVIDIA (0x10de)"},
		{wgpu.AdapterInfo{Name: "Apple M2", VendorName: "apple"}, "Apple M2", "apple"},
		{wgpu.AdapterInfo{DeviceId: 0x2335, VendorId: 0x1234}, "device 0x2335", "0x1234"},
	}
	for _, tc := range tests {
		if got := adapterName(tc.info); got != tc.name {
			t.Errorf("adapterName(%+v) = %q, want %q", tc.info, got, tc.name)
		}
		if got := vendorName(tc.info.VendorId, tc.info.VendorName); got != tc.vendor {
			t.Errorf("vendorName(%+v) = %q, want %q", tc.info, got, tc.vendor)
		}
	}
}

// TestWebGPUUsageBits checks that webgpuUsage's GPUBufferUsage bits, which
// the native device hands wgpu-native as they are, are webgpu.h's.
func TestWebGPUUsageBits(t *testing.T) {
	tests := []struct {
		usage Usage
		want  wgpu.BufferUsage
	}{
		{Storage, wgpu.BufferUsageStorage},
		{Uniform, wgpu.BufferUsageUniform},
		{CopySrc, wgpu.BufferUsageCopySrc},
		{CopyDst, wgpu.BufferUsageCopyDst},
		{Storage | CopySrc | CopyDst, wgpu.BufferUsageStorage | wgpu.BufferUsageCopySrc | wgpu.BufferUsageCopyDst},
	}
	for _, tc := range tests {
		if got := wgpu.BufferUsage(webgpuUsage(tc.usage)); got != tc.want {
			t.Errorf("webgpuUsage(%v) = %#x, want %#x", tc.usage, got, tc.want)
		}
	}
	if usageMapRead != wgpu.BufferUsageMapRead {
		t.Errorf("usageMapRead = %#x, want %#x", usageMapRead, wgpu.BufferUsageMapRead)
	}
}
