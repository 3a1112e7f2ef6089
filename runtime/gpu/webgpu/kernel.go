package webgpu

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// EntryPoint is the entry point name, "main" when Entry is empty.
func (k Kernel) EntryPoint() string {
	if k.Entry == "" {
		return "main"
	}
	return k.Entry
}

// CacheKey identifies a compiled kernel: two kernels with the same key
// compile to the same pipeline. Besides the name and the constants it covers
// the source, entry point and bindings, so that a kernel whose source was
// specialised by hand under the same name never gets a stale pipeline.
func (k Kernel) CacheKey() string {
	names := make([]string, 0, len(k.Constants))
	for name := range k.Constants {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString(k.Name)
	for _, name := range names {
		b.WriteString("\x00" + name + "=" + strconv.FormatFloat(k.Constants[name], 'g', -1, 64))
	}
	b.WriteString("\x00" + k.EntryPoint() + "\x00" + LayoutKey(k.Bindings) + "\x00" + k.Source)
	return b.String()
}

// LayoutKey names the shape of a binding list; kernels with equal keys can
// share bind group layouts and so bind groups.
func LayoutKey(bindings []Access) string {
	b := make([]byte, len(bindings))
	for i, a := range bindings {
		b[i] = "rwu?"[min(int(a), 3)]
	}
	return string(b)
}

// Validate checks what can be checked without compiling.
func (k Kernel) Validate() error {
	if k.Name == "" {
		return errors.New("kernel has no Name")
	}
	if strings.TrimSpace(k.Source) == "" {
		return fmt.Errorf("kernel %q has no Source", k.Name)
	}
	for i, a := range k.Bindings {
		if a > UniformBinding {
			return fmt.Errorf("kernel %q: binding %d has unknown access %d", k.Name, i, a)
		}
	}
	return nil
}

// String names an access kind as WGSL spells it.
func (a Access) String() string {
	switch a {
	case ReadOnly:
		return "storage, read"
	case ReadWrite:
		return "storage, read_write"
	case UniformBinding:
		return "uniform"
	}
	return "Access(" + strconv.Itoa(int(a)) + ")"
}

// String lists the usage flags, e.g. "Storage|CopyDst".
func (u Usage) String() string {
	var parts []string
	for _, f := range []struct {
		bit  Usage
		name string
	}{{Storage, "Storage"}, {Uniform, "Uniform"}, {CopySrc, "CopySrc"}, {CopyDst, "CopyDst"}} {
		if u&f.bit != 0 {
			parts = append(parts, f.name)
			u &^= f.bit
		}
	}
	if u != 0 {
		parts = append(parts, fmt.Sprintf("%#x", uint32(u)))
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, "|")
}

// kernelKey validates k and returns its cache key: the first steps of
// every device's Pipeline.
func kernelKey(k Kernel) (string, error) {
	if err := k.Validate(); err != nil {
		return "", fmt.Errorf("gpu: %w", err)
	}
	return k.CacheKey(), nil
}

// kernelSource checks k against the limits of a device of info and returns
// the source it compiles: k's with its constants applied (Specialize).
func kernelSource(k Kernel, info Info) (string, error) {
	if n := StorageCount(k.Bindings); n > int(info.MaxStorageBuffersPerShaderStage) {
		return "", fmt.Errorf("gpu: kernel %q has %d storage bindings; the device allows %d",
			k.Name, n, info.MaxStorageBuffersPerShaderStage)
	}
	src, err := Specialize(k.Source, k.Constants)
	if err != nil {
		return "", fmt.Errorf("gpu: kernel %q: %w", k.Name, err)
	}
	return src, nil
}
