package backend_test

// The layering this package exists for, checked from the source: the
// engine reaches the hardware only through this seam, and the backends
// under it never pull in a model file's parsers. Imports are read with
// go/parser from every non-test file of a directory, whatever its build
// constraints (a js-only or cgo-only import counts too), so the check needs
// neither the network nor a build.

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/tessera-llm/tessera"

// root is the module's directory: this package is runtime/backend.
var root = filepath.Join("..", "..")

// imports returns, for each non-test Go file of the package at path (a
// directory relative to the module root), the paths it imports.
func imports(t *testing.T, path string) map[string][]string {
	t.Helper()
	dir := filepath.Join(root, filepath.FromSlash(path))
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]string{}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, spec := range f.Imports {
			p, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				t.Fatal(err)
			}
			files[name] = append(files[name], p)
		}
	}
	if len(files) == 0 {
		t.Fatalf("no Go files in %s", dir)
	}
	return files
}

// deps returns every import path that the package at path reaches,
// following the module's own packages (others are listed, not followed),
// each with the chain of packages that leads to it.
func deps(t *testing.T, path string) map[string][]string {
	t.Helper()
	via := map[string][]string{}
	queue := []string{path}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, ps := range imports(t, p) {
			for _, imp := range ps {
				if _, seen := via[imp]; seen || imp == module+"/"+path {
					continue
				}
				via[imp] = append(slices.Clone(via[module+"/"+p]), module+"/"+p)
				if rel, ok := strings.CutPrefix(imp, module+"/"); ok {
					queue = append(queue, rel)
				}
			}
		}
	}
	return via
}

// TestEngineHasOneDoor: of the engine's files, only device.go, which
// chooses the backend, imports a backend or the WebGPU device layer.
func TestEngineHasOneDoor(t *testing.T) {
	hardware := []string{module + "/runtime/cpu", module + "/runtime/gpu", module + "/runtime/gpu/webgpu"}
	for file, ps := range imports(t, "runtime") {
		for _, p := range ps {
			if slices.Contains(hardware, p) && file != "device.go" {
				t.Errorf("runtime/%s imports %s: the engine reaches the hardware through runtime/backend, and only runtime/device.go opens a backend", file, p)
			}
		}
	}
}

// TestBackendsParseNoFiles: the seam and the backends under it depend on
// the leaves models/tensor and models/dtype, never on the model
// description or a format's parser, tokenizer or protobuf; and the WebGPU
// device layer knows neither the seam nor the WGSL backend above it.
func TestBackendsParseNoFiles(t *testing.T) {
	forbidden := func(p string) bool {
		if strings.Contains(p, "protobuf") {
			return true
		}
		rel, ok := strings.CutPrefix(p, module+"/")
		return ok && (rel == "models" || strings.HasPrefix(rel, "models/") && rel != "models/tensor" && rel != "models/dtype" ||
			rel == "runtime" || strings.HasPrefix(rel, "runtime/server") || strings.HasPrefix(rel, "wasm") || strings.HasPrefix(rel, "host"))
	}
	for _, pkg := range []string{"runtime/backend", "runtime/cpu", "runtime/gpu", "runtime/gpu/webgpu", "models/tensor"} {
		for p, chain := range deps(t, pkg) {
			if forbidden(p) {
				t.Errorf("%s imports %s (via %s)", pkg, p, strings.Join(chain, " → "))
			}
		}
	}
	for p, chain := range deps(t, "runtime/gpu/webgpu") {
		if p == module+"/runtime/backend" || p == module+"/runtime/gpu" {
			t.Errorf("the device layer runtime/gpu/webgpu imports %s (via %s)", p, strings.Join(chain, " → "))
		}
	}
}

// TestLayeringCheckSees makes sure the checks above can fail: the engine's
// device.go does import both backends, and runtime/cpu reaches the seam.
func TestLayeringCheckSees(t *testing.T) {
	got := imports(t, "runtime")["device.go"]
	for _, want := range []string{module + "/runtime/cpu", module + "/runtime/gpu"} {
		if !slices.Contains(got, want) {
			t.Errorf("runtime/device.go does not import %s; is the check reading the right files?", want)
		}
	}
	if _, ok := deps(t, "runtime/cpu")[module+"/runtime/backend"]; !ok {
		t.Error("runtime/cpu does not reach runtime/backend; is the check following imports?")
	}
}
