package webgpu

import (
	"fmt"
	"github.com/tessera-llm/tessera/models/dtype"
	"strings"
)

// Info describes an adapter and, for an open Device, the limits and features
// that the device actually has (not merely what the adapter could offer).
type Info struct {
	Adapter      string // adapter name, e.g. "llvmpipe (LLVM 15.0.6, 256 bits)"
	Vendor       string
	Architecture string
	Driver       string
	Backend      string // "Vulkan", "Metal", "D3D12", "WebGPU", ...
	DeviceType   string // "discrete", "integrated", "cpu", "virtual", "unknown"

	// ShaderF16 and TimestampQuery are true when the feature is present and
	// enabled on the device; ShaderF16 also needs the device's WGSL compiler
	// to accept f16 code, since kernels choose their f16 path by it. For
	// Adapters() they say what the adapter offers.
	ShaderF16, TimestampQuery bool

	// Subgroups is true when the device has the subgroups feature enabled
	// and its WGSL has the subgroup_id language feature, which the subgroup
	// kernels need (shaders.Fusion.Subgroups); SubgroupMinSize and
	// SubgroupMaxSize are the adapter's subgroup sizes (0 where it does not
	// say). Only the browser's device has them: wgpu-native as bundled with
	// cogentcore/webgpu v0.23.0 exposes no subgroups, so the native device
	// runs the plain kernels (SubgroupsNote says why).
	Subgroups                        bool
	SubgroupMinSize, SubgroupMaxSize uint32
	// SubgroupsNote says why a device has no subgroups where that is the
	// binding's doing rather than the adapter's.
	SubgroupsNote string

	MaxStorageBufferBindingSize, MaxBufferSize int64

	MaxComputeWorkgroupStorageSize    uint32
	MaxComputeInvocationsPerWorkgroup uint32
	MaxComputeWorkgroupsPerDimension  uint32
	MinStorageBufferOffsetAlignment   uint32
	MaxStorageBuffersPerShaderStage   uint32
}

// String renders a multi-line report, for `tessera info --device`.
func (i Info) String() string {
	var b strings.Builder
	line := func(key, format string, args ...any) {
		fmt.Fprintf(&b, "%-30s %s\n", key+":", fmt.Sprintf(format, args...))
	}
	line("adapter", "%s", orUnknown(i.Adapter))
	line("vendor", "%s", orUnknown(i.Vendor))
	if i.Architecture != "" {
		line("architecture", "%s", i.Architecture)
	}
	if i.Driver != "" && i.Driver != i.Adapter {
		line("driver", "%s", i.Driver)
	}
	line("backend", "%s", orUnknown(i.Backend))
	line("device type", "%s", orUnknown(i.DeviceType))
	line("shader-f16", "%s", yesNo(i.ShaderF16))
	line("timestamp-query", "%s", yesNo(i.TimestampQuery))
	switch {
	case i.Subgroups:
		line("subgroups", "yes (sizes %d to %d)", i.SubgroupMinSize, i.SubgroupMaxSize)
	case i.SubgroupsNote != "":
		line("subgroups", "no (%s)", i.SubgroupsNote)
	default:
		line("subgroups", "no")
	}
	line("max storage binding size", "%s", dtype.FormatBytes(i.MaxStorageBufferBindingSize))
	line("max buffer size", "%s", dtype.FormatBytes(i.MaxBufferSize))
	line("max workgroup storage", "%s", dtype.FormatBytes(int64(i.MaxComputeWorkgroupStorageSize)))
	line("max invocations per workgroup", "%d", i.MaxComputeInvocationsPerWorkgroup)
	line("max workgroups per dimension", "%d", i.MaxComputeWorkgroupsPerDimension)
	line("storage offset alignment", "%d B", i.MinStorageBufferOffsetAlignment)
	line("max storage buffers per stage", "%d", i.MaxStorageBuffersPerShaderStage)
	return b.String()
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
