package hubtest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Blackhole starts a TCP listener that accepts every connection and never
// answers, closed when the test ends, and returns its host:port. A client
// pointed at "http://"+addr waits forever for response headers, one
// pointed at "https://"+addr for the TLS handshake: what a firewall that
// drops packets after the handshake, or a wedged server, looks like.
func Blackhole(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			// Read what the client sends, so its writes never block,
			// and answer nothing.
			wg.Go(func() { io.Copy(io.Discard, c) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// A Tampered is a model cache whose index.json was edited to point
// outside it (and at another model's file), beside the directory it
// points into: for tests that nothing follows such an index, in-process
// or through the tessera binary (set TESSERA_CACHE to Dir).
type Tampered struct {
	Dir    string // the cache
	Victim string // the sibling directory the index points into
	// Keep is Victim/keep.gguf, which no command may delete or load.
	Keep string
	// Refs maps each tampered entry's reference to how it was tampered.
	Refs map[string]string
	// Good is the reference of a sound entry, whose file
	// (hf.co/acme/good/good-Q4_0.gguf, holding the same bytes as Keep)
	// must survive too.
	Good, GoodPath string
}

// TamperedCache builds a cache with one sound entry and one entry for
// each way an index can be tampered with; keep is the victim file's
// content (a real model makes a test show that it is not loaded, rather
// than failing to parse). Every tampered entry records keep's size, so a
// cache that followed it would find it complete.
func TamperedCache(t testing.TB, keep []byte) *Tampered {
	base := t.TempDir()
	tc := &Tampered{
		Dir:      filepath.Join(base, "cache"),
		Victim:   filepath.Join(base, "victim"),
		Good:     "hf.co/acme/good:Q4_0",
		GoodPath: "hf.co/acme/good/good-Q4_0.gguf",
		Refs: map[string]string{
			"hf.co/evil/dotdot:Q4_0":   "a path with ..",
			"hf.co/evil/absolute:Q4_0": "an absolute path",
			"hf.co/evil/inner:Q4_0":    "a path that climbs out from inside",
			"hf.co/evil/other:Q4_0":    "another model's file",
			"hf.co/evil/dirlink:Q4_0":  "a symlinked directory",
			"hf.co/evil/filelink:Q4_0": "a symlinked file",
			"hf.co/evil/shape:Q4_0":    "a malformed record",
		},
	}
	tc.Keep = filepath.Join(tc.Victim, "keep.gguf")
	must := func(err error) {
		if err != nil {
			t.Helper()
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(tc.Victim, 0o755))
	must(os.WriteFile(tc.Keep, keep, 0o644))
	good := filepath.Join(tc.Dir, filepath.FromSlash(tc.GoodPath))
	must(os.MkdirAll(filepath.Dir(good), 0o755))
	must(os.WriteFile(good, keep, 0o644))
	evil := filepath.Join(tc.Dir, "hf.co", "evil")
	must(os.MkdirAll(filepath.Join(evil, "filelink"), 0o755))
	must(os.Symlink(tc.Victim, filepath.Join(evil, "dirlink")))
	must(os.Symlink(tc.Keep, filepath.Join(evil, "filelink", "keep.gguf")))

	sum := sha256.Sum256(keep)
	sha := hex.EncodeToString(sum[:])
	entry := func(ref, repo, name, path string) map[string]any {
		return map[string]any{
			"ref": ref, "repo": repo, "size": len(keep), "time": time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
			"files": []map[string]any{{"name": name, "path": path, "size": len(keep), "sha256": sha, "verified": true,
				"url": "https://huggingface.co/" + repo + "/resolve/main/" + name}},
		}
	}
	models := []any{
		entry(tc.Good, "acme/good", "good-Q4_0.gguf", tc.GoodPath),
		entry("hf.co/evil/dotdot:Q4_0", "evil/dotdot", "keep.gguf", "../victim/keep.gguf"),
		entry("hf.co/evil/absolute:Q4_0", "evil/absolute", "keep.gguf", filepath.ToSlash(tc.Keep)),
		entry("hf.co/evil/inner:Q4_0", "evil/inner", "keep.gguf", "hf.co/evil/inner/../../../../victim/keep.gguf"),
		entry("hf.co/evil/other:Q4_0", "evil/other", "good-Q4_0.gguf", tc.GoodPath),
		entry("hf.co/evil/dirlink:Q4_0", "evil/dirlink", "keep.gguf", "hf.co/evil/dirlink/keep.gguf"),
		entry("hf.co/evil/filelink:Q4_0", "evil/filelink", "keep.gguf", "hf.co/evil/filelink/keep.gguf"),
		map[string]any{"ref": "hf.co/evil/shape:Q4_0", "repo": "evil/shape", "files": "../victim/keep.gguf", "size": len(keep)},
	}
	b, err := json.MarshalIndent(map[string]any{"version": 1, "models": models}, "", "  ")
	must(err)
	must(os.WriteFile(filepath.Join(tc.Dir, "index.json"), b, 0o644))
	return tc
}

// Intact fails the test unless the victim's file and the sound entry's
// are still there, unchanged.
func (tc *Tampered) Intact(t testing.TB, keep []byte) {
	t.Helper()
	for _, p := range []string{tc.Keep, filepath.Join(tc.Dir, filepath.FromSlash(tc.GoodPath))} {
		got, err := os.ReadFile(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
		} else if string(got) != string(keep) {
			t.Errorf("%s was changed", p)
		}
	}
}
