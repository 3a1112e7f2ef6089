package webgpu

import "fmt"

// Pipelines, their layouts and bind groups, on either platform.

// pipeline is a compiled kernel of device d.
type pipeline[B, G, P, L any] struct {
	d      *device[B, G, P, L]
	name   string
	layout *layout[L]
	h      P
}

// layout is the explicit bind group and pipeline layout of one binding
// shape, shared by every kernel with that shape so that their bind groups
// are interchangeable. (WebGPU's "auto" layouts would tie each bind group to
// one pipeline.)
type layout[L any] struct {
	key      string
	bindings []Access
	h        L
}

// bindGroup is a BindGroup of device d, for kernels of layout.
type bindGroup[B, G, P, L any] struct {
	d        *device[B, G, P, L]
	layout   *layout[L]
	h        G
	buffers  []*buffer[B, G, P, L]
	released bool // guarded by d.mu
	// live is 1 + the device's releases when its buffers were last found
	// live (checkLive), 0 before: guarded by d.mu.
	live uint64
}

// groupEntry is one checked binding as the platform makes it: slot binding
// of its bind group is size bytes of buffer at offset.
type groupEntry[B any] struct {
	binding      int
	buffer       B
	offset, size int64
}

func (g *bindGroup[B, G, P, L]) Release() {
	g.d.release(&g.released, func() { g.d.api.releaseBindGroup(g.h) })
}

func (d *device[B, G, P, L]) Pipeline(k Kernel) (Pipeline, error) {
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
	lay, err := d.layout(k.Bindings)
	if err != nil {
		return nil, fmt.Errorf("gpu: kernel %q: %w", k.Name, err)
	}
	h, err := d.api.newPipeline(k, src, lay.h)
	if err != nil {
		return nil, err
	}
	p := &pipeline[B, G, P, L]{d: d, name: k.Name, layout: lay, h: h}
	d.pipelines[key] = p
	return p, nil
}

// layout returns the shared layout for a binding shape. Callers hold d.mu.
func (d *device[B, G, P, L]) layout(bindings []Access) (*layout[L], error) {
	key := LayoutKey(bindings)
	if l, ok := d.layouts[key]; ok {
		return l, nil
	}
	h, err := d.api.newLayout(key, bindings)
	if err != nil {
		return nil, err
	}
	l := &layout[L]{key: key, bindings: append([]Access(nil), bindings...), h: h}
	d.layouts[key] = l
	return l, nil
}

func (d *device[B, G, P, L]) BindGroup(p Pipeline, bindings []Binding) (BindGroup, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.usable(); err != nil {
		return nil, err
	}
	pl, ok := p.(*pipeline[B, G, P, L])
	if !ok || pl == nil || pl.d != d {
		return nil, fmt.Errorf("gpu: bind group: %T is not a pipeline of this device", p)
	}
	slots := pl.layout.bindings
	if len(bindings) != len(slots) {
		return nil, fmt.Errorf("gpu: bind group for kernel %q: %d bindings given, the kernel has %d",
			pl.name, len(bindings), len(slots))
	}
	buffers, entries := make([]*buffer[B, G, P, L], len(bindings)), make([]groupEntry[B], len(bindings))
	for i, bind := range bindings {
		b, size, err := d.checkBinding(slots[i], bind)
		if err != nil {
			return nil, fmt.Errorf("gpu: bind group for kernel %q, binding %d: %w", pl.name, i, err)
		}
		buffers[i] = b
		entries[i] = groupEntry[B]{binding: i, buffer: b.h, offset: b.off + bind.Offset, size: size}
	}
	// WebGPU rejects a dispatch that binds one buffer writable and also in
	// another way; sub-buffers of one buffer are that buffer.
	for i, b := range buffers {
		for j := range i {
			if buffers[j].root() == b.root() && (slots[i] == ReadWrite) != (slots[j] == ReadWrite) {
				return nil, fmt.Errorf("gpu: bind group for kernel %q: bindings %d (%v) and %d (%v) are one buffer, writable in one and not the other",
					pl.name, j, buffers[j], i, b)
			}
		}
	}
	h, err := d.api.newBindGroup(pl.name, pl.layout.h, entries)
	if err != nil {
		return nil, fmt.Errorf("gpu: bind group for kernel %q: %w", pl.name, err)
	}
	return &bindGroup[B, G, P, L]{d: d, layout: pl.layout, h: h, buffers: buffers}, nil
}

// checkBinding validates one binding against the slot's access and the
// device limits, so that mistakes come back as Go errors that name the
// buffer rather than as the platform's validation text (or, in a browser,
// console warnings). It returns the bound size. Callers hold d.mu.
func (d *device[B, G, P, L]) checkBinding(a Access, bind Binding) (*buffer[B, G, P, L], int64, error) {
	b, err := d.asBuffer(bind.Buffer)
	if err != nil {
		return nil, 0, err
	}
	size, err := b.bindingSize(a, bind, d.info, d.uniformAlign, d.maxUniformBinding)
	return b, size, err
}
