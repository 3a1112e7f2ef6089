package hub_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models/hub"
	"github.com/tessera-llm/tessera/models/hub/hubtest"
)

// TestTamperedIndex: an index entry that points outside the cache, at
// another model's file or through a symlink, or that is malformed, is
// listed as damaged, never looked up or opened, and removing it drops it
// from the index and deletes nothing.
func TestTamperedIndex(t *testing.T) {
	keep := blob(90, 4_000)
	refs := hubtest.TamperedCache(t, keep).Refs
	names := make([]string, 0, len(refs))
	for ref := range refs {
		names = append(names, ref)
	}
	sort.Strings(names)
	for _, ref := range names {
		t.Run(refs[ref], func(t *testing.T) {
			tc := hubtest.TamperedCache(t, keep)
			c := hub.Cache{Dir: tc.Dir}
			r := mustParse(t, ref)

			entries, err := c.Entries()
			if err != nil {
				t.Fatalf("Entries: %v; want the listing with the entry marked damaged", err)
			}
			var got *hub.Entry
			for i, e := range entries {
				if e.Ref == ref {
					got = &entries[i]
				} else if (e.Ref == tc.Good) != (e.Damaged == nil) {
					t.Errorf("entry %s: damaged = %v", e.Ref, e.Damaged)
				}
			}
			if got == nil || !errors.Is(got.Damaged, hub.ErrDamaged) || !strings.Contains(got.Damaged.Error(), ref) {
				t.Fatalf("Entries lists %+v; want %s marked damaged, naming it", got, ref)
			}
			if _, err := c.Path(*got); !errors.Is(err, hub.ErrDamaged) {
				t.Errorf("Path = %v, want ErrDamaged", err)
			}

			// Looking it up, as run --offline does, is an error that
			// names the entry and its path.
			e, ok, err := c.Lookup(r)
			if ok || !errors.Is(err, hub.ErrDamaged) || !strings.Contains(err.Error(), ref) {
				t.Errorf("Lookup = %+v, %v, %v; want ErrDamaged naming %s", e, ok, err, ref)
			}
			if p := got.Damaged.(*hub.DamagedError).Path; p != "" && !strings.Contains(err.Error(), p) {
				t.Errorf("Lookup's error %q does not name the path %q", err, p)
			}
			cl := &hub.Client{Cache: c, Offline: true}
			if _, err := cl.Get(timeout(t), r); !errors.Is(err, hub.ErrDamaged) {
				t.Errorf("offline Get = %v, want ErrDamaged", err)
			}

			gone, err := c.Remove(r)
			if !errors.Is(err, hub.ErrDamaged) || !strings.Contains(err.Error(), "deleted none") || gone.Ref != ref {
				t.Errorf("Remove = %s, %v; want it removed from the index, saying nothing was deleted", gone.Ref, err)
			}
			tc.Intact(t, keep)
			entries, err = c.Entries()
			if err != nil || len(entries) != len(refs) {
				t.Errorf("after Remove: %d entries, %v; want %d", len(entries), err, len(refs))
			}
			for _, e := range entries {
				if e.Ref == ref {
					t.Errorf("%s is still in the index", ref)
				}
			}
			// The sound entry is untouched and still opens.
			e, ok, err = c.Lookup(mustParse(t, tc.Good))
			if !ok || err != nil {
				t.Fatalf("Lookup of the sound entry: %v, %v", ok, err)
			}
			if p, err := c.Path(e); err != nil || p != filepath.Join(tc.Dir, filepath.FromSlash(tc.GoodPath)) {
				t.Errorf("Path of the sound entry = %q, %v", p, err)
			}
		})
	}
}

// TestRemoveEveryEntry: removing every entry of a tampered cache, the
// sound one last, deletes the sound one's file and nothing outside.
func TestRemoveEveryEntry(t *testing.T) {
	keep := blob(91, 3_000)
	tc := hubtest.TamperedCache(t, keep)
	c := hub.Cache{Dir: tc.Dir}
	for ref := range tc.Refs {
		if _, err := c.Remove(mustParse(t, ref)); !errors.Is(err, hub.ErrDamaged) {
			t.Errorf("Remove(%s) = %v, want ErrDamaged", ref, err)
		}
	}
	tc.Intact(t, keep)
	if _, err := c.Remove(mustParse(t, tc.Good)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(tc.Dir, "hf.co", "acme")); !os.IsNotExist(err) {
		t.Errorf("the sound entry's file or folder is left: %v", err)
	}
	if b, err := os.ReadFile(tc.Keep); err != nil || !bytes.Equal(b, keep) {
		t.Errorf("the victim's file: %v", err)
	}
	// The symlinks that led out are inside the cache: left for the
	// operator to see, their targets untouched.
	if _, err := os.Lstat(filepath.Join(tc.Dir, "hf.co", "evil", "dirlink")); err != nil {
		t.Errorf("dirlink: %v", err)
	}
	if entries, err := c.Entries(); err != nil || len(entries) != 0 {
		t.Errorf("entries left: %+v, %v", entries, err)
	}
}

// TestSymlinkInsideCache: a symlink that stays inside the cache is refused
// too, so that the path a loader opens by name leads where the check did.
func TestSymlinkInsideCache(t *testing.T) {
	h := hubtest.New(t)
	data := blob(92, 2_000)
	h.Add("acme/m", "m.gguf", data)
	c, _ := client(t, h)
	ref := mustParse(t, "acme/m/m.gguf")
	e, err := c.Pull(timeout(t), ref)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(c.Cache.Dir, "hf.co", "acme")
	if err := os.Rename(dir, filepath.Join(c.Cache.Dir, "elsewhere")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../elsewhere", dir); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cache.Path(e); !errors.Is(err, hub.ErrDamaged) || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("Path through a symlink inside the cache = %v", err)
	}
	if _, ok, err := c.Cache.Lookup(ref); ok || !errors.Is(err, hub.ErrDamaged) {
		t.Errorf("Lookup = %v, %v", ok, err)
	}
}

// TestPullRefusesSymlinkedDir: a pull whose folder in the cache is a
// symlink out writes nothing there.
func TestPullRefusesSymlinkedDir(t *testing.T) {
	h := hubtest.New(t)
	h.Add("acme/m", "m.gguf", blob(93, 2_000))
	c, _ := client(t, h)
	victim := t.TempDir()
	if err := os.MkdirAll(filepath.Join(c.Cache.Dir, "hf.co"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(c.Cache.Dir, "hf.co", "acme")); err != nil {
		t.Fatal(err)
	}
	_, err := c.Pull(timeout(t), mustParse(t, "acme/m/m.gguf"))
	if err == nil || !strings.Contains(err.Error(), "hf.co/acme is a symlink") {
		t.Fatalf("err = %v; want the pull refused, naming the symlink", err)
	}
	if left, _ := os.ReadDir(victim); len(left) != 0 {
		t.Errorf("the pull wrote %v outside the cache", left)
	}
}

// TestMalformedRecordKept: pulling another model rewrites the index and
// keeps a record it cannot read as it was, so that nothing is lost.
func TestMalformedRecordKept(t *testing.T) {
	h := hubtest.New(t)
	h.Add("acme/m", "m.gguf", blob(94, 1_000))
	c, _ := client(t, h)
	odd := `{"ref":"hf.co/x/y:Q4_0","files":"what","extra":[1,2,3]}`
	index := filepath.Join(c.Cache.Dir, "index.json")
	if err := os.WriteFile(index, []byte(`{"version":1,"models":[`+odd+`]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pull(timeout(t), mustParse(t, "acme/m/m.gguf")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(index)
	if err != nil {
		t.Fatal(err)
	}
	var idx struct{ Models []json.RawMessage }
	if err := json.Unmarshal(b, &idx); err != nil || len(idx.Models) != 2 {
		t.Fatalf("index after the pull: %v, %s", err, b)
	}
	var kept bytes.Buffer
	json.Compact(&kept, idx.Models[1])
	if kept.String() != odd {
		t.Errorf("the malformed record became %s, want %s", kept.String(), odd)
	}
	entries, err := c.Cache.Entries()
	if err != nil || len(entries) != 2 || entries[0].Damaged != nil || !errors.Is(entries[1].Damaged, hub.ErrDamaged) {
		t.Errorf("Entries = %+v, %v", entries, err)
	}
}

// TestIndexSymlinkOut: an index.json that is a symlink out of the cache is
// neither read nor written through.
func TestIndexSymlinkOut(t *testing.T) {
	h := hubtest.New(t)
	h.Add("acme/m", "m.gguf", blob(95, 1_000))
	c, _ := client(t, h)
	victim := filepath.Join(t.TempDir(), "index.json")
	const theirs = `{"version":1,"models":[]}`
	if err := os.WriteFile(victim, []byte(theirs), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(c.Cache.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(c.Cache.Dir, "index.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cache.Entries(); err == nil || !strings.Contains(err.Error(), "index.json") {
		t.Errorf("Entries through a symlinked index: %v", err)
	}
	if _, err := c.Pull(timeout(t), mustParse(t, "acme/m/m.gguf")); err == nil {
		t.Error("a pull recorded its model through a symlinked index")
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != theirs {
		t.Errorf("the file the index linked to: %q, %v", b, err)
	}
}
