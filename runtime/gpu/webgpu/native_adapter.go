//go:build !js && cgo

package webgpu

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/cogentcore/webgpu/wgpu"
)

// Adapters lists every adapter of the machine, in the order that
// Options.Adapter indexes. Features and limits are the adapter's own, not
// those of a device opened on it.
func Adapters() ([]Info, error) {
	inst, err := newInstance()
	if err != nil {
		return nil, err
	}
	defer inst.Release()
	adapters := inst.EnumerateAdapters(&wgpu.InstanceEnumerateAdapterOptons{Backends: backends})
	if len(adapters) == 0 {
		return nil, errNoAdapter
	}
	infos := make([]Info, len(adapters))
	for i, a := range adapters {
		infos[i] = adapterInfo(a)
		a.Release()
	}
	return infos, nil
}

// pickAdapter resolves Options.Adapter to an adapter.
func pickAdapter(inst *wgpu.Instance, choice string) (*wgpu.Adapter, error) {
	adapters := inst.EnumerateAdapters(&wgpu.InstanceEnumerateAdapterOptons{Backends: backends})
	if len(adapters) == 0 {
		return nil, errNoAdapter
	}
	infos := make([]Info, len(adapters))
	for i, a := range adapters {
		infos[i] = adapterInfo(a)
	}
	chosen := -1
	if choice == "" {
		chosen = fastest(infos)
	} else if i, err := strconv.Atoi(choice); err == nil {
		if i >= 0 && i < len(adapters) {
			chosen = i
		}
	} else {
		for i, info := range infos {
			if strings.Contains(strings.ToLower(info.Adapter), strings.ToLower(choice)) {
				chosen = i
				break
			}
		}
	}
	for i, a := range adapters {
		if i != chosen {
			a.Release()
		}
	}
	if chosen < 0 {
		var list []string
		for i, info := range infos {
			list = append(list, fmt.Sprintf("%d: %s (%s, %s)", i, info.Adapter, info.Backend, info.DeviceType))
		}
		return nil, fmt.Errorf("gpu: no adapter matches %q; available adapters: %s",
			choice, strings.Join(list, "; "))
	}
	return adapters[chosen], nil
}

// fastest is the default choice, with the preference that WebGPU calls
// high-performance: a discrete GPU over an integrated one over the rest, and
// a CPU driver such as lavapipe last. Among equals the first listed wins.
// (RequestAdapter would rank the same but also return OpenGL adapters.)
func fastest(infos []Info) int {
	rank := map[string]int{"discrete": 0, "integrated": 1, "unknown": 2, "cpu": 3}
	best := 0
	for i, info := range infos {
		if rank[info.DeviceType] < rank[infos[best].DeviceType] {
			best = i
		}
	}
	return best
}

// adapterInfo describes an adapter with its own features and limits.
func adapterInfo(a *wgpu.Adapter) Info {
	ai := a.GetInfo()
	info := Info{
		Adapter:        adapterName(ai),
		Vendor:         vendorName(ai.VendorId, ai.VendorName),
		Architecture:   ai.Architecture,
		Driver:         ai.DriverDescription,
		Backend:        backendName(ai.BackendType),
		DeviceType:     deviceType(ai.AdapterType),
		ShaderF16:      a.HasFeature(wgpu.FeatureNameShaderF16),
		TimestampQuery: a.HasFeature(wgpu.FeatureNameTimestampQuery),
		SubgroupsNote:  nativeSubgroups,
	}
	setLimits(&info, a.GetLimits().Limits)
	return info
}

func setLimits(info *Info, l wgpu.Limits) {
	info.MaxStorageBufferBindingSize = int64(l.MaxStorageBufferBindingSize)
	info.MaxBufferSize = int64(l.MaxBufferSize)
	info.MaxComputeWorkgroupStorageSize = l.MaxComputeWorkgroupStorageSize
	info.MaxComputeInvocationsPerWorkgroup = l.MaxComputeInvocationsPerWorkgroup
	info.MaxComputeWorkgroupsPerDimension = l.MaxComputeWorkgroupsPerDimension
	info.MinStorageBufferOffsetAlignment = l.MinStorageBufferOffsetAlignment
	info.MaxStorageBuffersPerShaderStage = l.MaxStorageBuffersPerShaderStage
}

// adapterName picks the human-readable name. wgpu-native (as bundled with
// cogentcore/webgpu v0.23.0) puts the device id ("0x0") where the name should
// be and the name in the description field.
func adapterName(ai wgpu.AdapterInfo) string {
	switch {
	case ai.Name != "" && !isHex(ai.Name):
		return ai.Name
	case ai.DriverDescription != "":
		return ai.DriverDescription
	}
	return fmt.Sprintf("device %#x", ai.DeviceId)
}

// vendorName names the PCI vendor, since wgpu-native reports only its id.
func vendorName(id uint32, name string) string {
	if name != "" && !isHex(name) {
		return name
	}
	known := map[uint32]string{
		0x1002: "AMD", 0x1022: "AMD", 0x10de: "NVIDIA", 0x8086: "Intel", 0x106b: "Apple",
		0x13b5: "ARM", 0x5143: "Qualcomm", 0x1010: "Imagination", 0x14e4: "Broadcom",
		0x1ae0: "Google", 0x10005: "Mesa", 0x1414: "Microsoft",
	}
	if n, ok := known[id]; ok {
		return fmt.Sprintf("%s (%#x)", n, id)
	}
	return fmt.Sprintf("%#x", id)
}

// isHex reports whether s is a hex number such as "0x10005".
func isHex(s string) bool {
	digits, ok := strings.CutPrefix(strings.ToLower(s), "0x")
	_, err := strconv.ParseUint(digits, 16, 64)
	return ok && err == nil
}

func backendName(b wgpu.BackendType) string {
	switch b {
	case wgpu.BackendTypeVulkan:
		return "Vulkan"
	case wgpu.BackendTypeMetal:
		return "Metal"
	case wgpu.BackendTypeD3D12:
		return "D3D12"
	case wgpu.BackendTypeD3D11:
		return "D3D11"
	case wgpu.BackendTypeOpenGL:
		return "OpenGL"
	case wgpu.BackendTypeOpenGLES:
		return "OpenGL ES"
	case wgpu.BackendTypeWebGPU:
		return "WebGPU"
	}
	return b.String()
}

func deviceType(t wgpu.AdapterType) string {
	switch t {
	case wgpu.AdapterTypeDiscreteGPU:
		return "discrete"
	case wgpu.AdapterTypeIntegratedGPU:
		return "integrated"
	case wgpu.AdapterTypeCPU:
		return "cpu"
	}
	return "unknown"
}
