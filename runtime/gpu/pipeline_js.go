//go:build js

package gpu

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

type jsPipeline struct {
	d       *jsDevice
	name    string
	layout  *jsLayout
	compute js.Value
}

// jsLayout is the explicit bind group and pipeline layout of one binding
// shape, shared by every kernel with that shape so that their bind groups
// are interchangeable. (WebGPU's "auto" layouts would tie each bind group to
// one pipeline.)
type jsLayout struct {
	key      string
	bindings []Access
	group    js.Value
	pipeline js.Value
}

type jsBindGroup struct {
	d        *jsDevice
	layout   *jsLayout
	group    js.Value
	buffers  []*jsBuffer
	released bool // guarded by d.mu
}

// Release drops the bind group. WebGPU has no explicit release for bind
// groups: the garbage collector frees it once unused.
func (g *jsBindGroup) Release() {
	g.d.mu.Lock()
	defer g.d.mu.Unlock()
	g.released = true
}

func (d *jsDevice) Pipeline(k Kernel) (Pipeline, error) {
	key, err := kernelKey(k)
	if err != nil {
		return nil, err
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.usable(); err != nil {
		return nil, err
	}
	if p, ok := d.pipelines[key]; ok {
		return p, nil
	}
	src, err := kernelSource(k, d.info)
	if err != nil {
		return nil, err
	}
	src = jsFloatMax.ReplaceAllString(src, "${1}3.4028234663852886e38")
	lay, err := d.layout(k.Bindings)
	if err != nil {
		return nil, fmt.Errorf("gpu: kernel %q: %w", k.Name, err)
	}
	// One error scope covers the module and the pipeline: one round trip to
	// the GPU process per kernel. On failure the module's compilation
	// messages tell a WGSL error from a pipeline one.
	var module js.Value
	compute, err := d.scoped(func() (js.Value, error) {
		var err error
		module, err = jsCall(d.dev, "createShaderModule", map[string]any{"label": k.Name, "code": src})
		if err != nil {
			return js.Value{}, err
		}
		return jsCall(d.dev, "createComputePipeline", map[string]any{
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
	p := &jsPipeline{d: d, name: k.Name, layout: lay, compute: compute}
	d.pipelines[key] = p
	return p, nil
}

// compileErrors lists the error messages of a shader module as
// "line:column: message", or "" if it compiled. Callers hold d.mu.
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

// layout returns the shared layout for a binding shape. Callers hold d.mu.
func (d *jsDevice) layout(bindings []Access) (*jsLayout, error) {
	key := LayoutKey(bindings)
	if l, ok := d.layouts[key]; ok {
		return l, nil
	}
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
	group, err := jsCall(d.dev, "createBindGroupLayout", map[string]any{"label": key, "entries": entries})
	if err != nil {
		return nil, fmt.Errorf("creating bind group layout: %w", err)
	}
	pl, err := jsCall(d.dev, "createPipelineLayout", map[string]any{"label": key, "bindGroupLayouts": []any{group}})
	if err != nil {
		return nil, fmt.Errorf("creating pipeline layout: %w", err)
	}
	l := &jsLayout{key: key, bindings: append([]Access(nil), bindings...), group: group, pipeline: pl}
	d.layouts[key] = l
	return l, nil
}

func (d *jsDevice) BindGroup(p Pipeline, bindings []Binding) (BindGroup, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.usable(); err != nil {
		return nil, err
	}
	pl, ok := p.(*jsPipeline)
	if !ok || pl == nil || pl.d != d {
		return nil, fmt.Errorf("gpu: bind group: %T is not a pipeline of this device", p)
	}
	buffers, entries, err := bindEntries(pl.name, pl.layout.bindings, bindings, d.checkBinding,
		func(i int, b *jsBuffer, bind Binding, size int64) any {
			return map[string]any{
				"binding":  i,
				"resource": map[string]any{"buffer": b.buf, "offset": bind.Offset, "size": size},
			}
		})
	if err != nil {
		return nil, err
	}
	group, err := jsCall(d.dev, "createBindGroup", map[string]any{
		"label":   pl.name,
		"layout":  pl.layout.group,
		"entries": entries,
	})
	if err != nil {
		return nil, fmt.Errorf("gpu: bind group for kernel %q: %w", pl.name, err)
	}
	return &jsBindGroup{d: d, layout: pl.layout, group: group, buffers: buffers}, nil
}

// checkBinding validates one binding against the slot's access and the
// device limits, so that mistakes come back as Go errors that name the
// buffer rather than as console warnings. It returns the bound size.
func (d *jsDevice) checkBinding(a Access, bind Binding) (*jsBuffer, int64, error) {
	b, err := d.asBuffer(bind.Buffer)
	if err != nil {
		return nil, 0, err
	}
	size, err := b.bindingSize(a, bind, d.info, d.uniformAlign, d.maxUniformBinding)
	return b, size, err
}
