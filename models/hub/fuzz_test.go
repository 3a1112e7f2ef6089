package hub_test

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models/hub"
	"github.com/tessera-llm/tessera/models/hub/hubtest"
)

// FuzzCacheIndex feeds arbitrary index.json bytes to a cache that sits
// beside a victim directory and holds symlinks out to it, and runs what
// the commands do with an index (Entries, Lookup, Path, Remove of every
// entry and of a few fixed references): nothing may panic, no path handed
// out may resolve outside the cache, and the victim must come through
// untouched.
//
//	go test -run='^$' -fuzz=FuzzCacheIndex -fuzztime=2m ./models/hub/
func FuzzCacheIndex(f *testing.F) {
	keep := []byte("GGUF victim")
	tc := hubtest.TamperedCache(f, keep)
	whole, err := os.ReadFile(filepath.Join(tc.Dir, "index.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(whole)
	// Each record of the tampered index alone, and the sound one.
	var idx struct{ Models []json.RawMessage }
	if err := json.Unmarshal(whole, &idx); err != nil {
		f.Fatal(err)
	}
	for _, m := range idx.Models {
		f.Add([]byte(`{"version":1,"models":[` + string(m) + `]}`))
	}
	f.Add([]byte(`{"version":1,"models":[null,{},{"ref":"hf.co/a/b:Q4_0","files":[{}]}]}`))
	f.Add([]byte(`{"models":[{"ref":"https://h/x.gguf","files":[{"name":"x.gguf","path":"url/h/x.gguf","url":"https://h/x.gguf"}]}]}`))
	f.Add([]byte(`{`))

	f.Fuzz(func(t *testing.T, index []byte) {
		base := t.TempDir()
		cache, victim := filepath.Join(base, "cache"), filepath.Join(base, "victim")
		want := map[string]string{"keep.gguf": "keep", "sub/other.gguf": "other", "hf.co/evil/x.gguf": "deep"}
		for name, data := range want {
			p := filepath.Join(victim, filepath.FromSlash(name))
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		good := filepath.Join(cache, "hf.co", "acme", "good", "good-Q4_0.gguf")
		os.MkdirAll(filepath.Join(cache, "hf.co", "evil"), 0o755)
		os.MkdirAll(filepath.Dir(good), 0o755)
		os.WriteFile(good, []byte("good"), 0o644)
		os.Symlink(victim, filepath.Join(cache, "hf.co", "evil", "abs"))
		os.Symlink("../../../victim", filepath.Join(cache, "hf.co", "evil", "rel"))
		os.Symlink(filepath.Join(victim, "keep.gguf"), filepath.Join(cache, "hf.co", "acme", "good", "link.gguf"))
		os.Symlink("../victim/hf.co", filepath.Join(cache, "url"))
		if err := os.WriteFile(filepath.Join(cache, "index.json"), index, 0o644); err != nil {
			t.Fatal(err)
		}

		c := hub.Cache{Dir: cache}
		realCache, err := filepath.EvalSymlinks(cache)
		if err != nil {
			t.Fatal(err)
		}
		confined := func(what, p string) {
			real, err := filepath.EvalSymlinks(p)
			if err != nil {
				t.Fatalf("%s: Path returned %q, which does not resolve: %v", what, p, err)
			}
			if !strings.HasPrefix(real, realCache+string(filepath.Separator)) {
				t.Fatalf("%s: Path returned %q, which resolves to %q outside the cache", what, p, real)
			}
		}
		entries, _ := c.Entries()
		refs := []string{"hf.co/acme/good:Q4_0", "hf.co/acme/good/good-Q4_0.gguf", "hf.co/evil/abs/keep.gguf", "hf.co/a/b:Q4_0"}
		for _, e := range entries {
			if p, err := c.Path(e); err == nil {
				confined(e.Ref, p)
			}
			refs = append(refs, e.Ref)
		}
		for _, s := range refs {
			r, err := hub.Parse(s)
			if err != nil {
				continue
			}
			if e, ok, err := c.Lookup(r); ok && err == nil {
				p, err := c.Path(e)
				if err != nil {
					t.Fatalf("Lookup(%s) found %+v, whose Path fails: %v", s, e, err)
				}
				confined(s, p)
			}
			c.Remove(r)
		}

		// The victim holds what it held, and nothing appeared beside the
		// cache and the victim.
		got := map[string]string{}
		filepath.WalkDir(victim, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				rel, _ := filepath.Rel(victim, p)
				b, _ := os.ReadFile(p)
				got[filepath.ToSlash(rel)] = string(b)
			}
			return nil
		})
		if len(got) != len(want) {
			t.Fatalf("the victim holds %v, want %v", got, want)
		}
		for name, data := range want {
			if got[name] != data {
				t.Fatalf("the victim's %s: %q, want %q", name, got[name], data)
			}
		}
		if left, _ := os.ReadDir(base); len(left) != 2 {
			t.Fatalf("beside the cache: %v", left)
		}
		// The index, if rewritten, still reads.
		if b, err := os.ReadFile(filepath.Join(cache, "index.json")); err == nil && !bytes.Equal(b, index) {
			if _, err := c.Entries(); err != nil {
				t.Fatalf("the rewritten index does not read: %v\n%s", err, b)
			}
		}
	})
}
