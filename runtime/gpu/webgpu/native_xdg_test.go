//go:build linux || freebsd

package webgpu

import (
	"os"
	"path/filepath"
	"testing"
)

// TestPrivateDir: the default runtime directory is used only if it is a
// directory of ours that nobody else may enter, and narrowed to 0700 if
// it is wider.
func TestPrivateDir(t *testing.T) {
	base := t.TempDir()
	fresh := filepath.Join(base, "fresh")
	if got, err := privateDir(fresh); err != nil || got != fresh {
		t.Fatalf("privateDir(new) = %q, %v", got, err)
	}
	wide := filepath.Join(base, "wide")
	if err := os.Mkdir(wide, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(wide, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := privateDir(wide); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{fresh, wide} {
		if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v %v, want mode 0700", dir, st.Mode(), err)
		}
	}
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(fresh, link); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{file, link} {
		if got, err := privateDir(bad); err == nil {
			t.Errorf("privateDir(%s) = %q, want an error", bad, got)
		}
	}
}
