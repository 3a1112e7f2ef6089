package web

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// TestNpmPack packs the JavaScript package as `make pkg` does (npm pack of
// web/pkg with the wasm built into it): the tarball must hold the module,
// its types, the worker, Go's loader and the wasm, and package.json must
// point at them. Skipped without npm.
func TestNpmPack(t *testing.T) {
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("no npm")
	}
	var pkg struct {
		Name    string         `json:"name"`
		Type    string         `json:"type"`
		Types   string         `json:"types"`
		Exports map[string]any `json:"exports"`
		Files   []string       `json:"files"`
		Private bool           `json:"private"`
	}
	raw, err := fs.ReadFile(embedded, "pkg/package.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &pkg); err != nil {
		t.Fatal(err)
	}
	dot, _ := pkg.Exports["."].(map[string]any)
	if pkg.Type != "module" || pkg.Types != "./index.d.ts" || dot["types"] != "./index.d.ts" || dot["import"] != "./index.js" || !pkg.Private {
		t.Errorf("package.json: type %q, types %q, exports %v, private %v", pkg.Type, pkg.Types, pkg.Exports, pkg.Private)
	}
	root, ok := FindModuleRoot(".")
	if !ok {
		t.Fatal("not inside the Tessera module")
	}
	dir := t.TempDir()
	src := filepath.Join(root, "web", Package)
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Type().IsRegular() && slices.Contains(pkg.Files, e.Name()) && e.Name() != WasmFile && e.Name() != WasmExec {
			b, _ := os.ReadFile(filepath.Join(src, e.Name()))
			os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644)
		}
	}
	os.WriteFile(filepath.Join(dir, "package.json"), raw, 0o644)
	if err := BuildWasm(context.Background(), root, dir); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd := exec.Command(npm, "pack", "--json", "--pack-destination", out)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "npm_config_cache="+t.TempDir(), "npm_config_offline=true", "npm_config_update_notifier=false", "npm_config_fund=false", "npm_config_audit=false")
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("npm pack: %v\n%s", err, b)
	}
	var packed []struct {
		Filename     string `json:"filename"`
		Size         int64  `json:"size"`
		UnpackedSize int64  `json:"unpackedSize"`
		Files        []struct {
			Path string `json:"path"`
			Size int64  `json:"size"`
		} `json:"files"`
	}
	if err := json.Unmarshal(b, &packed); err != nil || len(packed) != 1 {
		t.Fatalf("npm pack --json: %v\n%s", err, b)
	}
	var got []string
	for _, f := range packed[0].Files {
		got = append(got, f.Path)
	}
	for _, want := range append(pkg.Files, "package.json") {
		if !slices.Contains(got, want) {
			t.Errorf("the tarball lacks %s (it has %v)", want, got)
		}
	}
	if _, err := os.Stat(filepath.Join(out, packed[0].Filename)); err != nil {
		t.Error(err)
	}
	t.Logf("%s: %.2f MB packed (gzipped), %.2f MB unpacked, %d files", packed[0].Filename, float64(packed[0].Size)/1e6, float64(packed[0].UnpackedSize)/1e6, len(got))
}
