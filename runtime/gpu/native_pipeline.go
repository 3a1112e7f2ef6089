//go:build !js && cgo

package gpu

import (
	"fmt"
	"strings"

	"github.com/cogentcore/webgpu/wgpu"
)

type nativePipeline struct {
	d       *nativeDevice
	name    string
	layout  *nativeLayout
	compute *wgpu.ComputePipeline
}

// layout is the explicit bind group and pipeline layout of one binding
// shape, shared by every kernel with that shape so that their bind groups
// are interchangeable.
type nativeLayout struct {
	key      string
	bindings []Access
	group    *wgpu.BindGroupLayout
	pipeline *wgpu.PipelineLayout
}

type nativeBindGroup struct {
	d        *nativeDevice
	layout   *nativeLayout
	group    *wgpu.BindGroup
	buffers  []*nativeBuffer
	released bool // guarded by d.mu
}

func (g *nativeBindGroup) Release() {
	g.d.mu.Lock()
	defer g.d.mu.Unlock()
	if !g.released {
		g.released = true
		g.group.Release()
	}
}

func (d *nativeDevice) Pipeline(k Kernel) (Pipeline, error) {
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
	module, err := d.dev.CreateShaderModule(&wgpu.ShaderModuleDescriptor{
		Label:          k.Name,
		WGSLDescriptor: &wgpu.ShaderModuleWGSLDescriptor{Code: src},
	})
	if err != nil {
		return nil, fmt.Errorf("gpu: kernel %q does not compile:\n%s", k.Name, compilerMessage(err))
	}
	defer module.Release()
	lay, err := d.layout(k.Bindings)
	if err != nil {
		return nil, fmt.Errorf("gpu: kernel %q: %w", k.Name, err)
	}
	compute, err := d.dev.CreateComputePipeline(&wgpu.ComputePipelineDescriptor{
		Label:   k.Name,
		Layout:  lay.pipeline,
		Compute: wgpu.ProgrammableStageDescriptor{Module: module, EntryPoint: k.EntryPoint()},
	})
	if err != nil {
		return nil, fmt.Errorf("gpu: kernel %q: creating its pipeline:\n%s", k.Name, compilerMessage(err))
	}
	p := &nativePipeline{d: d, name: k.Name, layout: lay, compute: compute}
	d.pipelines[key] = p
	return p, nil
}

// layout returns the shared layout for a binding shape. Callers hold d.mu.
func (d *nativeDevice) layout(bindings []Access) (*nativeLayout, error) {
	key := LayoutKey(bindings)
	if l, ok := d.layouts[key]; ok {
		return l, nil
	}
	entries := make([]wgpu.BindGroupLayoutEntry, len(bindings))
	for i, a := range bindings {
		typ := wgpu.BufferBindingTypeReadOnlyStorage
		switch a {
		case ReadWrite:
			typ = wgpu.BufferBindingTypeStorage
		case UniformBinding:
			typ = wgpu.BufferBindingTypeUniform
		}
		entries[i] = wgpu.BindGroupLayoutEntry{
			Binding:    uint32(i),
			Visibility: wgpu.ShaderStageCompute,
			Buffer:     wgpu.BufferBindingLayout{Type: typ},
		}
	}
	group, err := d.dev.CreateBindGroupLayout(&wgpu.BindGroupLayoutDescriptor{Label: key, Entries: entries})
	if err != nil {
		return nil, fmt.Errorf("creating bind group layout: %w", err)
	}
	pl, err := d.dev.CreatePipelineLayout(&wgpu.PipelineLayoutDescriptor{
		Label:            key,
		BindGroupLayouts: []*wgpu.BindGroupLayout{group},
	})
	if err != nil {
		group.Release()
		return nil, fmt.Errorf("creating pipeline layout: %w", err)
	}
	l := &nativeLayout{key: key, bindings: append([]Access(nil), bindings...), group: group, pipeline: pl}
	d.layouts[key] = l
	return l, nil
}

func (d *nativeDevice) BindGroup(p Pipeline, bindings []Binding) (BindGroup, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.usable(); err != nil {
		return nil, err
	}
	pl, ok := p.(*nativePipeline)
	if !ok || pl == nil || pl.d != d {
		return nil, fmt.Errorf("gpu: bind group: %T is not a pipeline of this device", p)
	}
	buffers, entries, err := bindEntries(pl.name, pl.layout.bindings, bindings, d.checkBinding,
		func(i int, b *nativeBuffer, bind Binding, size int64) wgpu.BindGroupEntry {
			return wgpu.BindGroupEntry{Binding: uint32(i), Buffer: b.buf, Offset: uint64(bind.Offset), Size: uint64(size)}
		})
	if err != nil {
		return nil, err
	}
	group, err := d.dev.CreateBindGroup(&wgpu.BindGroupDescriptor{
		Label:   pl.name,
		Layout:  pl.layout.group,
		Entries: entries,
	})
	if err != nil {
		return nil, fmt.Errorf("gpu: bind group for kernel %q: %w", pl.name, err)
	}
	return &nativeBindGroup{d: d, layout: pl.layout, group: group, buffers: buffers}, nil
}

// checkBinding validates one binding against the slot's access and the
// device limits, so that mistakes come back as Go errors that name the
// buffer rather than as wgpu validation text. It returns the bound size.
func (d *nativeDevice) checkBinding(a Access, bind Binding) (*nativeBuffer, int64, error) {
	b, err := d.asBuffer(bind.Buffer)
	if err != nil {
		return nil, 0, err
	}
	size, err := b.bindingSize(a, bind, d.info, d.uniformAlign, d.maxUniformBinding)
	return b, size, err
}

// compilerMessage strips the binding's call-site framing ("wgpu.(*Device)
// .CreateShaderModule(): Validation Error / Caused by: / In wgpuDevice...",
// the label note)
// from a wgpu error, leaving naga's message with its source excerpt.
func compilerMessage(err error) string {
	lines := strings.Split(err.Error(), "\n")
	var keep []string
	for _, line := range lines {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "wgpu.(") || t == "Caused by:" || strings.HasPrefix(t, "In wgpu") ||
			strings.HasPrefix(t, "note: label =") {
			continue
		}
		keep = append(keep, strings.TrimRight(line, " \t"))
	}
	return strings.Trim(strings.Join(keep, "\n"), "\n")
}
