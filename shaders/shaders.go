// Package shaders holds Tessera's WGSL compute kernels. Each kernel is one
// .wgsl file; Source prepends common.wgsl, which declares what every kernel
// shares (the per-step uniform), since WGSL has no include.
package shaders

import (
	"embed"
	"fmt"
)

//go:embed *.wgsl
var files embed.FS

// Source returns the WGSL of the named kernel ("rmsnorm" for rmsnorm.wgsl),
// with the common declarations in front.
func Source(name string) (string, error) {
	common, err := files.ReadFile("common.wgsl")
	if err != nil {
		return "", err
	}
	body, err := files.ReadFile(name + ".wgsl")
	if err != nil {
		return "", fmt.Errorf("shader %s: %w", name, err)
	}
	return string(common) + "\n" + string(body), nil
}

// Names lists the kernels.
func Names() []string {
	entries, _ := files.ReadDir(".")
	var names []string
	for _, e := range entries {
		if n := e.Name(); n != "common.wgsl" {
			names = append(names, n[:len(n)-len(".wgsl")])
		}
	}
	return names
}
