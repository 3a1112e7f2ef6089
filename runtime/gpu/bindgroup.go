package gpu

import "fmt"

// bindEntries checks a bind group's bindings against its kernel's layout
// (their number, then each through check, which returns the device's
// buffer and the bound size) and makes each entry: what the native and
// browser devices share before each calls its own API.
func bindEntries[B, E any](kernel string, layout []Access, bindings []Binding,
	check func(Access, Binding) (B, int64, error), entry func(i int, b B, bind Binding, size int64) E) ([]B, []E, error) {
	if len(bindings) != len(layout) {
		return nil, nil, fmt.Errorf("gpu: bind group for kernel %q: %d bindings given, the kernel has %d",
			kernel, len(bindings), len(layout))
	}
	buffers, entries := make([]B, len(bindings)), make([]E, len(bindings))
	for i, bind := range bindings {
		b, size, err := check(layout[i], bind)
		if err != nil {
			return nil, nil, fmt.Errorf("gpu: bind group for kernel %q, binding %d: %w", kernel, i, err)
		}
		buffers[i], entries[i] = b, entry(i, b, bind, size)
	}
	return buffers, entries, nil
}
