//go:build js

package webgpu

import (
	"fmt"
	"strings"
	"syscall/js"
)

// The browser device talks to navigator.gpu through syscall/js rather than
// through cogentcore/webgpu's js backend, which drops requested limits and
// features, has no explicit pipeline layouts and hands writeBuffer a view of
// wasm memory that goes stale when the Go heap grows. See ../../web/README.md.

// errNoWebGPU explains a browser without navigator.gpu.
var errNoWebGPU = fmt.Errorf("%w: this browser has no WebGPU (navigator.gpu is missing). "+
	"Use a recent Chrome or Edge, Safari 26 or Firefox 141 or later, and serve the page over "+
	"https or from localhost; on Linux, Chrome needs --enable-unsafe-webgpu", ErrNoAdapter)

// Open requests an adapter and a device from navigator.gpu. Options.Adapter
// is "" or "high-performance" (the default), "low-power", "fallback", or a
// case-insensitive substring that the adapter's name must contain. The
// device is asked for the WebGPU default limits raised only where the
// engine needs more and the adapter allows it, as natively.
//
// Open blocks until the browser answers: call it from a goroutine, never
// from inside a js.FuncOf callback.
func Open(opts Options) (Device, error) {
	if opts.MaxStorageBinding > 0 && opts.MaxStorageBinding < 4 {
		return nil, fmt.Errorf("gpu: MaxStorageBinding %d is below 4 bytes", opts.MaxStorageBinding)
	}
	adapter, info, err := jsRequestAdapter(opts.Adapter)
	if err != nil {
		return nil, err
	}
	limits, features := jsDeviceRequest(adapter, opts)
	p, err := jsCall(adapter, "requestDevice", map[string]any{
		"label":            "tessera",
		"requiredLimits":   limits,
		"requiredFeatures": features,
	})
	var dev js.Value
	if err == nil {
		dev, err = jsAwait(p)
	}
	if err != nil {
		return nil, fmt.Errorf("gpu: requesting a device on %s: %w", info.Adapter, err)
	}

	info.ShaderF16 = jsHasFeature(dev, "shader-f16")
	info.TimestampQuery = jsHasFeature(dev, "timestamp-query")
	info.Subgroups = jsHasFeature(dev, "subgroups") && jsSubgroupID()
	got := dev.Get("limits")
	jsSetLimits(&info, got)
	if opts.MaxStorageBinding > 0 {
		// The browser keeps at least the default limit; below it the Go side
		// enforces the lower one in BindGroup and reports it here.
		info.MaxStorageBufferBindingSize = min(info.MaxStorageBufferBindingSize, opts.MaxStorageBinding&^3)
	}
	api := &browserAPI{adapter: adapter, dev: dev, queue: dev.Get("queue")}
	api.watch()
	return newDevice(api, info, int64(jsNumber(got, "maxUniformBufferBindingSize")),
		int64(jsNumber(got, "minUniformBufferOffsetAlignment"))), nil
}

// Adapters lists the adapter the browser offers by default. A browser shows
// a page one adapter per power preference and no way to enumerate them.
func Adapters() ([]Info, error) {
	_, info, err := jsRequestAdapter("")
	if err != nil {
		return nil, err
	}
	return []Info{info}, nil
}

// requestAdapter asks navigator.gpu for the adapter that choice names.
func jsRequestAdapter(choice string) (js.Value, Info, error) {
	gpu := js.Global().Get("navigator").Get("gpu")
	if gpu.IsUndefined() || gpu.IsNull() {
		return js.Value{}, Info{}, errNoWebGPU
	}
	req := map[string]any{"powerPreference": "high-performance"}
	filter := ""
	switch c := strings.ToLower(strings.TrimSpace(choice)); c {
	case "", "0", "high-performance":
	case "low-power":
		req["powerPreference"] = "low-power"
	case "fallback":
		req["forceFallbackAdapter"] = true
	default:
		filter = c
	}
	p, err := jsCall(gpu, "requestAdapter", req)
	var adapter js.Value
	if err == nil {
		adapter, err = jsAwait(p)
	}
	if err != nil {
		return js.Value{}, Info{}, fmt.Errorf("gpu: requesting an adapter: %w", err)
	}
	if adapter.IsNull() || adapter.IsUndefined() {
		return js.Value{}, Info{}, fmt.Errorf("%w: navigator.gpu.requestAdapter() found none. WebGPU may be "+
			"disabled (chrome://gpu tells why) or the GPU blocklisted", ErrNoAdapter)
	}
	info := jsAdapterInfo(adapter)
	if filter != "" && !strings.Contains(strings.ToLower(info.Adapter), filter) {
		return js.Value{}, Info{}, fmt.Errorf("gpu: no adapter matches %q; available adapters: 0: %s (%s, %s)",
			choice, info.Adapter, info.Backend, info.DeviceType)
	}
	return adapter, info, nil
}

// adapterInfo describes an adapter with its own features and limits.
func jsAdapterInfo(a js.Value) Info {
	ai := a.Get("info") // GPUAdapterInfo; older browsers lack it
	if ai.IsUndefined() || ai.IsNull() {
		ai = js.ValueOf(map[string]any{})
	}
	vendor, arch, device, desc := jsStr(ai, "vendor"), jsStr(ai, "architecture"), jsStr(ai, "device"), jsStr(ai, "description")
	name := desc
	if name == "" {
		var parts []string
		for _, s := range []string{vendor, arch, device} {
			if s != "" {
				parts = append(parts, s)
			}
		}
		name = strings.Join(parts, " ")
	}
	fallback := ai.Get("isFallbackAdapter").Truthy() || a.Get("isFallbackAdapter").Truthy()
	kind := "unknown"
	if fallback || arch == "swiftshader" {
		kind = "cpu"
	}
	info := Info{
		Adapter:        name,
		Vendor:         vendor,
		Architecture:   arch,
		Driver:         device,
		Backend:        "WebGPU (browser)",
		DeviceType:     kind,
		ShaderF16:      jsHasFeature(a, "shader-f16"),
		TimestampQuery: jsHasFeature(a, "timestamp-query"),
		Subgroups:      jsHasFeature(a, "subgroups") && jsSubgroupID(),
	}
	info.SubgroupMinSize, info.SubgroupMaxSize = uint32(jsNumber(ai, "subgroupMinSize")), uint32(jsNumber(ai, "subgroupMaxSize"))
	jsSetLimits(&info, a.Get("limits"))
	return info
}

// jsSubgroupID reports whether the browser's WGSL has the subgroup_id
// language feature (subgroup_id and num_subgroups), which the subgroup
// kernels use to give each subgroup its own slot of workgroup memory.
func jsSubgroupID() bool {
	f := js.Global().Get("navigator").Get("gpu").Get("wgslLanguageFeatures")
	return !f.IsUndefined() && !f.IsNull() && f.Call("has", "subgroup_id").Bool()
}

func jsHasFeature(v js.Value, name string) bool {
	f := v.Get("features")
	return !f.IsUndefined() && f.Call("has", name).Bool()
}

func jsSetLimits(info *Info, l js.Value) {
	info.MaxStorageBufferBindingSize = int64(jsNumber(l, "maxStorageBufferBindingSize"))
	info.MaxBufferSize = int64(jsNumber(l, "maxBufferSize"))
	info.MaxComputeWorkgroupStorageSize = uint32(jsNumber(l, "maxComputeWorkgroupStorageSize"))
	info.MaxComputeInvocationsPerWorkgroup = uint32(jsNumber(l, "maxComputeInvocationsPerWorkgroup"))
	info.MaxComputeWorkgroupsPerDimension = uint32(jsNumber(l, "maxComputeWorkgroupsPerDimension"))
	info.MinStorageBufferOffsetAlignment = uint32(jsNumber(l, "minStorageBufferOffsetAlignment"))
	info.MaxStorageBuffersPerShaderStage = uint32(jsNumber(l, "maxStorageBuffersPerShaderStage"))
}

// jsMaxStorageBuffers caps how many storage buffers per shader stage we ask
// for; the engine's widest kernels need fewer than that.
const jsMaxStorageBuffers = 10

// deviceRequest picks the limits and features to ask for: the adapter's own
// where the engine can use more than the default, nothing else.
func jsDeviceRequest(a js.Value, opts Options) (map[string]any, []any) {
	have := a.Get("limits")
	get := func(name string) float64 { return jsNumber(have, name) }
	invocations := get("maxComputeInvocationsPerWorkgroup")
	limits := map[string]any{
		"maxBufferSize":                     get("maxBufferSize"),
		"maxStorageBufferBindingSize":       get("maxStorageBufferBindingSize"),
		"maxComputeWorkgroupStorageSize":    get("maxComputeWorkgroupStorageSize"),
		"maxComputeInvocationsPerWorkgroup": invocations,
		"maxComputeWorkgroupSizeX":          min(get("maxComputeWorkgroupSizeX"), invocations),
		"maxComputeWorkgroupSizeY":          min(get("maxComputeWorkgroupSizeY"), invocations),
		"maxStorageBuffersPerShaderStage":   min(get("maxStorageBuffersPerShaderStage"), jsMaxStorageBuffers),
	}
	if opts.MaxStorageBinding > 0 {
		// Asked for, the lower limit is the browser's to enforce, as on an
		// adapter that has no more (below WebGPU's 128 MiB default the
		// browser keeps the default, and only the Go side enforces it).
		limits["maxStorageBufferBindingSize"] = min(get("maxStorageBufferBindingSize"), float64(opts.MaxStorageBinding&^3))
	}
	for k, v := range limits {
		if v.(float64) <= 0 { // a limit this browser does not report
			delete(limits, k)
		}
	}
	var features []any
	if !opts.DisableF16 && jsHasFeature(a, "shader-f16") {
		features = append(features, "shader-f16")
	}
	if !opts.DisableSubgroups && jsHasFeature(a, "subgroups") && jsSubgroupID() {
		features = append(features, "subgroups")
	}
	return limits, features
}
