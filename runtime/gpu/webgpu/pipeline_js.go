//go:build js

package webgpu

import (
	"fmt"
	"regexp"
	"strings"
	"syscall/js"
)

// jsFloatMax matches the float32 maximum spelled 3.4028235e38, the shortest
// decimal that rounds to it. As an abstract float that value lies just above
// the largest f32, which WGSL makes an error: naga (natively) rounds it, but
// Chrome's Tint rejects the shader ("cannot be represented as 'f32'"). Until
// every kernel spells it exactly, the browser device rewrites it.
var jsFloatMax = regexp.MustCompile(`(^|[^0-9.])3\.4028235[eE]\+?38\b`)

func (b *browserAPI) newPipeline(k Kernel, src string, lay jsLayout) (*jsObj, error) {
	src = jsFloatMax.ReplaceAllString(src, "${1}3.4028234663852886e38")
	// One error scope covers the module and the pipeline: one round trip to
	// the GPU process per kernel. On failure the module's compilation
	// messages tell a WGSL error from a pipeline one.
	var module js.Value
	compute, err := b.scoped(func() (js.Value, error) {
		var err error
		module, err = jsCall(b.dev, "createShaderModule", map[string]any{"label": k.Name, "code": src})
		if err != nil {
			return js.Value{}, err
		}
		return jsCall(b.dev, "createComputePipeline", map[string]any{
			"label":   k.Name,
			"layout":  lay.pipeline,
			"compute": map[string]any{"module": module, "entryPoint": k.EntryPoint()},
		})
	})
	if err != nil {
		if msg := jsCompileErrors(module); msg != "" {
			return nil, fmt.Errorf("gpu: kernel %q does not compile:\n%s", k.Name, msg)
		}
		return nil, fmt.Errorf("gpu: kernel %q: creating its pipeline: %w", k.Name, err)
	}
	return b.register(compute), nil
}

// compileErrors lists the error messages of a shader module as
// "line:column: message", or "" if it compiled.
func jsCompileErrors(module js.Value) string {
	if module.IsUndefined() || module.Get("getCompilationInfo").IsUndefined() {
		return ""
	}
	info, err := jsAwait(module.Call("getCompilationInfo"))
	if err != nil {
		return ""
	}
	msgs := info.Get("messages")
	var lines []string
	for i := range msgs.Length() {
		m := msgs.Index(i)
		if jsStr(m, "type") != "error" {
			continue
		}
		lines = append(lines, fmt.Sprintf("%d:%d: %s", int(jsNumber(m, "lineNum")), int(jsNumber(m, "linePos")), jsStr(m, "message")))
	}
	return strings.Join(lines, "\n")
}

func (b *browserAPI) newLayout(key string, bindings []Access) (jsLayout, error) {
	const computeStage = 0x4 // GPUShaderStage.COMPUTE
	entries := make([]any, len(bindings))
	for i, a := range bindings {
		typ := "read-only-storage"
		switch a {
		case ReadWrite:
			typ = "storage"
		case UniformBinding:
			typ = "uniform"
		}
		entries[i] = map[string]any{
			"binding":    i,
			"visibility": computeStage,
			"buffer":     map[string]any{"type": typ},
		}
	}
	group, err := jsCall(b.dev, "createBindGroupLayout", map[string]any{"label": key, "entries": entries})
	if err != nil {
		return jsLayout{}, fmt.Errorf("creating bind group layout: %w", err)
	}
	pl, err := jsCall(b.dev, "createPipelineLayout", map[string]any{"label": key, "bindGroupLayouts": []any{group}})
	if err != nil {
		return jsLayout{}, fmt.Errorf("creating pipeline layout: %w", err)
	}
	return jsLayout{group: group, pipeline: pl}, nil
}

func (b *browserAPI) newBindGroup(label string, lay jsLayout, entries []groupEntry[*jsObj]) (*jsObj, error) {
	list := make([]any, len(entries))
	for i, e := range entries {
		list[i] = map[string]any{
			"binding":  e.binding,
			"resource": map[string]any{"buffer": e.buffer.v, "offset": e.offset, "size": e.size},
		}
	}
	g, err := jsCall(b.dev, "createBindGroup", map[string]any{"label": label, "layout": lay.group, "entries": list})
	if err != nil {
		return nil, err
	}
	return b.register(g), nil
}

// releaseBindGroup drops g from the registry: WebGPU has no explicit
// release for bind groups, the garbage collector frees one once unused.
func (b *browserAPI) releaseBindGroup(g *jsObj) { b.unregister(g) }
