//go:build !js && cgo

package webgpu

import (
	"fmt"
	"strings"

	"github.com/cogentcore/webgpu/wgpu"
)

func (w *wgpuAPI) newPipeline(k Kernel, src string, lay nativeLayout) (*wgpu.ComputePipeline, error) {
	module, err := w.dev.CreateShaderModule(&wgpu.ShaderModuleDescriptor{
		Label:          k.Name,
		WGSLDescriptor: &wgpu.ShaderModuleWGSLDescriptor{Code: src},
	})
	if err != nil {
		return nil, fmt.Errorf("gpu: kernel %q does not compile:\n%s", k.Name, compilerMessage(err))
	}
	defer module.Release()
	compute, err := w.dev.CreateComputePipeline(&wgpu.ComputePipelineDescriptor{
		Label:   k.Name,
		Layout:  lay.pipeline,
		Compute: wgpu.ProgrammableStageDescriptor{Module: module, EntryPoint: k.EntryPoint()},
	})
	if err != nil {
		return nil, fmt.Errorf("gpu: kernel %q: creating its pipeline:\n%s", k.Name, compilerMessage(err))
	}
	return compute, nil
}

func (w *wgpuAPI) newLayout(key string, bindings []Access) (nativeLayout, error) {
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
	group, err := w.dev.CreateBindGroupLayout(&wgpu.BindGroupLayoutDescriptor{Label: key, Entries: entries})
	if err != nil {
		return nativeLayout{}, fmt.Errorf("creating bind group layout: %w", err)
	}
	pl, err := w.dev.CreatePipelineLayout(&wgpu.PipelineLayoutDescriptor{
		Label:            key,
		BindGroupLayouts: []*wgpu.BindGroupLayout{group},
	})
	if err != nil {
		group.Release()
		return nativeLayout{}, fmt.Errorf("creating pipeline layout: %w", err)
	}
	return nativeLayout{group: group, pipeline: pl}, nil
}

func (w *wgpuAPI) newBindGroup(label string, lay nativeLayout, entries []groupEntry[*wgpu.Buffer]) (*wgpu.BindGroup, error) {
	desc := &wgpu.BindGroupDescriptor{Label: label, Layout: lay.group, Entries: make([]wgpu.BindGroupEntry, len(entries))}
	for i, e := range entries {
		desc.Entries[i] = wgpu.BindGroupEntry{Binding: uint32(e.binding), Buffer: e.buffer, Offset: uint64(e.offset), Size: uint64(e.size)}
	}
	return w.dev.CreateBindGroup(desc)
}

func (w *wgpuAPI) releaseBindGroup(g *wgpu.BindGroup) { g.Release() }

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
