//go:build !js && cgo

package webgpu

import (
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/cogentcore/webgpu/wgpu"
)

// backends are the APIs we take adapters from. The GL backend is left out:
// its compute support is partial, and an error that says "no Vulkan driver"
// is more useful than a half-working OpenGL device.
const backends = wgpu.InstanceBackendPrimary

// maxStorageBuffers caps how many storage buffers per shader stage we ask
// for; the engine's widest kernels need fewer than that.
const maxStorageBuffers = 10

var (
	setLogLevel sync.Once
	wgpuLog     wgpu.LogLevel
)

// newInstance creates a wgpu instance, turning the binding's panic on failure
// into an error.
//
// It passes no descriptor: cogentcore/webgpu v0.23.0 builds the instance
// extras in malloc'd memory without setting every field, and the garbage in
// gles3MinorVersion makes wgpu-native abort ("Unknown gles3 minor version").
// The instance therefore has all backends; adapters are filtered to
// backends when they are enumerated.
func newInstance() (inst *wgpu.Instance, err error) {
	ensureRuntimeDir()
	setLogLevel.Do(func() {
		// wgpu-native logs every error it also returns to us, and warns about
		// surface extensions a compute-only program never uses; by default
		// only errors are printed. TESSERA_WGPU_LOG=warn|info|debug|trace|off
		// changes that.
		wgpuLog = logLevel(os.Getenv("TESSERA_WGPU_LOG"))
		wgpu.SetLogLevel(wgpuLog)
	})
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("gpu: creating a WebGPU instance: %v", r)
		}
	}()
	return wgpu.CreateInstance(nil), nil
}

func logLevel(s string) wgpu.LogLevel {
	switch strings.ToLower(s) {
	case "off":
		return wgpu.LogLevelOff
	case "warn":
		return wgpu.LogLevelWarn
	case "info":
		return wgpu.LogLevelInfo
	case "debug":
		return wgpu.LogLevelDebug
	case "trace":
		return wgpu.LogLevelTrace
	}
	return wgpu.LogLevelError
}

// errNoAdapter explains what to install, since the usual cause on a server
// or in CI is a missing Vulkan driver.
var errNoAdapter = fmt.Errorf("%w: is a Vulkan driver installed? On Debian/Ubuntu "+
	"`apt-get install mesa-vulkan-drivers` provides lavapipe, a Vulkan driver "+
	"that runs on the CPU; for a GPU, install its vendor's Vulkan driver", ErrNoAdapter)

// Open opens a device on the adapter that opts chooses, asking for the
// WebGPU default limits raised only where the engine needs more and the
// adapter allows it. Asking for every limit the adapter has fails on some
// drivers (lavapipe) and would hide from tests what a default device cannot do.
func Open(opts Options) (Device, error) {
	if opts.MaxStorageBinding > 0 && opts.MaxStorageBinding < 4 {
		return nil, fmt.Errorf("gpu: MaxStorageBinding %d is below 4 bytes", opts.MaxStorageBinding)
	}
	inst, err := newInstance()
	if err != nil {
		return nil, err
	}
	adapter, err := pickAdapter(inst, opts.Adapter)
	if err != nil {
		inst.Release()
		return nil, err
	}
	info := adapterInfo(adapter)
	limits, features := deviceRequest(adapter, opts)
	// No DeviceLostCallback: cogentcore/webgpu v0.23.0 passes it to C inside
	// a Go-allocated descriptor, which panics under the default cgocheck. A
	// lost device shows instead as a failed buffer mapping in Read.
	dev, err := adapter.RequestDevice(&wgpu.DeviceDescriptor{
		Label:            "tessera",
		RequiredFeatures: features,
		RequiredLimits:   &wgpu.RequiredLimits{Limits: limits},
	})
	if err != nil {
		adapter.Release()
		inst.Release()
		return nil, fmt.Errorf("gpu: requesting a device on %s: %w", info.Adapter, err)
	}

	got := dev.GetLimits().Limits
	info.ShaderF16 = dev.HasFeature(wgpu.FeatureNameShaderF16) && compilesF16(dev)
	info.TimestampQuery = dev.HasFeature(wgpu.FeatureNameTimestampQuery)
	info.SubgroupsNote = nativeSubgroups
	setLimits(&info, got)
	if opts.MaxStorageBinding > 0 {
		info.MaxStorageBufferBindingSize = min(info.MaxStorageBufferBindingSize, opts.MaxStorageBinding&^3)
	}
	api := &wgpuAPI{instance: inst, adapter: adapter, dev: dev, queue: dev.GetQueue()}
	return newDevice(api,
		info, int64(got.MaxUniformBufferBindingSize), int64(got.MinUniformBufferOffsetAlignment)), nil
}

// nativeSubgroups says why the native device runs no subgroup kernels:
// the binding has no subgroups feature to ask for (nor subgroup_id in its
// WGSL compiler), so the plain kernels run until a binding that exposes
// them is available.
const nativeSubgroups = "wgpu-native in cogentcore/webgpu v0.23.0 exposes none; the plain kernels run"

// f16Probe is the smallest kernel that uses f16 the way WGSL specifies it.
const f16Probe = `enable f16;
@compute @workgroup_size(1) fn main() { var h = f16(1.0); h = h * h; }`

// compilesF16 reports whether the device's WGSL compiler takes f16 code.
// Enabling the feature is not enough: the naga in wgpu-native as bundled with
// cogentcore/webgpu v0.23.0 knows neither `enable f16;` nor the f16 type, so
// ShaderF16 stays false there and kernels take their f32 path.
func compilesF16(dev *wgpu.Device) bool {
	// A failed probe is expected; keep wgpu from logging it as an error.
	wgpu.SetLogLevel(wgpu.LogLevelOff)
	defer wgpu.SetLogLevel(wgpuLog)
	m, err := dev.CreateShaderModule(&wgpu.ShaderModuleDescriptor{
		Label:          "f16 probe",
		WGSLDescriptor: &wgpu.ShaderModuleWGSLDescriptor{Code: f16Probe},
	})
	if err != nil {
		return false
	}
	m.Release()
	return true
}

// deviceRequest picks the limits and features to ask for.
func deviceRequest(a *wgpu.Adapter, opts Options) (wgpu.Limits, []wgpu.FeatureName) {
	have := a.GetLimits().Limits
	l := wgpu.DefaultLimits() // every limit undefined: wgpu-native fills in the defaults
	l.MaxBufferSize = have.MaxBufferSize
	l.MaxStorageBufferBindingSize = have.MaxStorageBufferBindingSize
	if opts.MaxStorageBinding > 0 {
		// Natively a lower limit is really enforced by wgpu, not only by us.
		l.MaxStorageBufferBindingSize = min(have.MaxStorageBufferBindingSize, uint64(opts.MaxStorageBinding)&^3)
	}
	l.MaxComputeWorkgroupStorageSize = have.MaxComputeWorkgroupStorageSize
	l.MaxComputeInvocationsPerWorkgroup = have.MaxComputeInvocationsPerWorkgroup
	// Without these a 1-D workgroup could not use the invocations just raised.
	l.MaxComputeWorkgroupSizeX = min(have.MaxComputeWorkgroupSizeX, have.MaxComputeInvocationsPerWorkgroup)
	l.MaxComputeWorkgroupSizeY = min(have.MaxComputeWorkgroupSizeY, have.MaxComputeInvocationsPerWorkgroup)
	l.MaxStorageBuffersPerShaderStage = min(have.MaxStorageBuffersPerShaderStage, maxStorageBuffers)

	var features []wgpu.FeatureName
	if !opts.DisableF16 && a.HasFeature(wgpu.FeatureNameShaderF16) {
		features = append(features, wgpu.FeatureNameShaderF16)
	}
	if a.HasFeature(wgpu.FeatureNameTimestampQuery) {
		features = append(features, wgpu.FeatureNameTimestampQuery)
	}
	return l, features
}
