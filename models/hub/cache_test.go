package hub_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models/hub"
	"github.com/tessera-llm/tessera/models/hub/hubtest"
)

// TestRemove: two references to one file share it; removing one keeps the
// file, removing the other deletes it and its empty folders.
func TestRemove(t *testing.T) {
	h := hubtest.New(t)
	h.Add("acme/m", "m-Q4_0.gguf", blob(70, 5_000))
	h.Add("acme/m", "m-Q8_0.gguf", blob(71, 6_000))
	c, _ := client(t, h)
	for _, s := range []string{"hf.co/acme/m:Q4_0", "hf.co/acme/m/m-Q4_0.gguf", "hf.co/acme/m:Q8_0"} {
		if _, err := c.Pull(timeout(t), mustParse(t, s)); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := c.Cache.Entries()
	if err != nil || len(entries) != 3 {
		t.Fatalf("Entries = %+v, %v; want three", entries, err)
	}
	if entries[0].Ref != "hf.co/acme/m/m-Q4_0.gguf" || entries[1].Ref != "hf.co/acme/m:Q4_0" {
		t.Errorf("entries not in order: %s, %s", entries[0].Ref, entries[1].Ref)
	}
	q4 := filepath.Join(c.Cache.Dir, "hf.co", "acme", "m", "m-Q4_0.gguf")
	if _, err := c.Cache.Remove(mustParse(t, "hf.co/acme/m:q4_0")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(q4); err != nil {
		t.Fatalf("removing one of two references deleted the file: %v", err)
	}
	for _, s := range []string{"acme/m/m-Q4_0.gguf", "hf.co/acme/m:Q8_0"} {
		if _, err := c.Cache.Remove(mustParse(t, s)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(c.Cache.Dir, "hf.co")); !os.IsNotExist(err) {
		t.Errorf("the emptied folders are left: %v", err)
	}
	if entries, _ := c.Cache.Entries(); len(entries) != 0 {
		t.Errorf("entries left: %+v", entries)
	}
	if _, err := c.Cache.Remove(mustParse(t, "hf.co/acme/m:Q8_0")); err == nil || !strings.Contains(err.Error(), "not in the cache") {
		t.Errorf("removing it twice: %v", err)
	}
}

// TestIndexDamage: a damaged index is an error that says what to do, and
// a model whose file was deleted by hand is not found.
func TestIndexDamage(t *testing.T) {
	h := hubtest.New(t)
	h.Add("acme/m", "m.gguf", blob(80, 1_000))
	c, _ := client(t, h)
	ref := mustParse(t, "acme/m/m.gguf")
	e, err := c.Pull(timeout(t), ref)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(cachedPath(t, c, e))
	if _, ok, err := c.Cache.Lookup(ref); ok || err != nil {
		t.Errorf("Lookup of a deleted file: %v, %v", ok, err)
	}
	os.WriteFile(filepath.Join(c.Cache.Dir, "index.json"), []byte("{"), 0o644)
	if _, _, err := c.Cache.Lookup(ref); err == nil || !strings.Contains(err.Error(), "delete it") {
		t.Errorf("Lookup with a damaged index: %v", err)
	}
	matches, _ := filepath.Glob(filepath.Join(c.Cache.Dir, "*.tmp"))
	if len(matches) != 0 {
		t.Errorf("temporary files left: %v", matches)
	}
}

func TestFromEnv(t *testing.T) {
	t.Setenv("TESSERA_CACHE", "/tmp/tc")
	t.Setenv("HF_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("HF_TOKEN", " hf_x\n")
	t.Setenv("TESSERA_OFFLINE", "1")
	c, err := hub.FromEnv()
	if err != nil || c.Cache.Dir != "/tmp/tc" || c.Endpoint != "http://127.0.0.1:1" || c.Token != "hf_x" || !c.Offline {
		t.Errorf("FromEnv = %+v, %v", c, err)
	}
	t.Setenv("TESSERA_CACHE", "")
	t.Setenv("TESSERA_OFFLINE", "0")
	c, err = hub.FromEnv()
	if base, e := os.UserCacheDir(); e == nil && (err != nil || c.Cache.Dir != filepath.Join(base, "tessera") || c.Offline) {
		t.Errorf("FromEnv defaults = %+v, %v", c, err)
	}
}
