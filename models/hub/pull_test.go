package hub_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/models/hub"
	"github.com/tessera-llm/tessera/models/hub/hubtest"
)

// blob is n bytes of reproducible noise, standing in for a model file.
func blob(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// client is a client of the fake with a fresh cache and no pause between
// retries.
func client(t *testing.T, h *hubtest.Hub) (*hub.Client, *bytes.Buffer) {
	var log bytes.Buffer
	return &hub.Client{Endpoint: h.URL, Cache: hub.Cache{Dir: t.TempDir()}, Log: &log, RetryWait: time.Millisecond}, &log
}

func timeout(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustParse(t *testing.T, s string) hub.Ref {
	t.Helper()
	r, err := hub.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// cachedPath is the entry's file, which must be in the cache.
func cachedPath(t *testing.T, c *hub.Client, e hub.Entry) string {
	t.Helper()
	p, err := c.Cache.Path(e)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// checkFile fails unless the cache holds want at the entry's path.
func checkFile(t *testing.T, c *hub.Client, e hub.Entry, want []byte) {
	t.Helper()
	got, err := os.ReadFile(cachedPath(t, c, e))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: the cached file differs from the served one (%d bytes, want %d)", e.Ref, len(got), len(want))
	}
}

// TestPull pulls each shape of reference from a fake Hub that redirects to
// its CDN, as the real one does.
func TestPull(t *testing.T) {
	h := hubtest.New(t)
	q4 := blob(1, 70_000)
	q8 := blob(2, 90_000)
	h.Add("acme/tiny-GGUF", "tiny-Q4_K_M.gguf", q4)
	h.Add("acme/tiny-GGUF", "tiny-Q8_0.gguf", q8)
	h.Add("acme/tiny-GGUF", "mmproj-tiny-f16.gguf", blob(3, 100))
	_, plainURL := h.AddPlain("x/plain.gguf", q8)
	tests := []struct {
		ref, name string
		data      []byte
		verified  bool
		note      string
	}{
		{"hf.co/acme/tiny-GGUF:Q4_K_M", "tiny-Q4_K_M.gguf", q4, true, ""},
		{"hf.co/acme/tiny-GGUF:q8_0", "tiny-Q8_0.gguf", q8, true, ""},
		{"acme/tiny-GGUF:Q8_0", "tiny-Q8_0.gguf", q8, true, ""},
		{"hf.co/acme/tiny-GGUF", "tiny-Q4_K_M.gguf", q4, true, "picked tiny-Q4_K_M.gguf"},
		{"hf.co/acme/tiny-GGUF/tiny-Q8_0.gguf", "tiny-Q8_0.gguf", q8, true, ""},
		{"acme/tiny-GGUF/tiny-Q4_K_M.gguf", "tiny-Q4_K_M.gguf", q4, true, ""},
		{h.URL + "/acme/tiny-GGUF/resolve/main/tiny-Q8_0.gguf", "acme/tiny-GGUF/resolve/main/tiny-Q8_0.gguf", q8, true, ""},
		{plainURL, "plain/x/plain.gguf", q8, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			c, log := client(t, h)
			e, err := c.Pull(timeout(t), mustParse(t, tt.ref))
			if err != nil {
				t.Fatal(err)
			}
			checkFile(t, c, e, tt.data)
			f := e.Files[0]
			if len(e.Files) != 1 || f.Name != tt.name || f.Verified != tt.verified || e.Size != int64(len(tt.data)) {
				t.Errorf("entry %+v: want one file %s of %d bytes, verified %v", e, tt.name, len(tt.data), tt.verified)
			}
			if !strings.Contains(log.String(), tt.note) || !strings.Contains(log.String(), "sha256 verified") != !tt.verified {
				t.Errorf("log %q: want %q, verified %v", log, tt.note, tt.verified)
			}
			// The index knows it now, by the reference it was pulled with.
			got, ok, err := c.Cache.Lookup(mustParse(t, tt.ref))
			if err != nil || !ok || got.Ref != mustParse(t, tt.ref).String() || got.Files[0].SHA256 != f.SHA256 {
				t.Errorf("Lookup after the pull: %+v, %v, %v", got, ok, err)
			}
		})
	}
	// Every Hub download went through the redirect to the CDN.
	var cdn int
	for _, r := range h.Requests() {
		if strings.HasPrefix(r.Path, "/cdn/") {
			cdn++
		}
	}
	if cdn != len(tests)-1 {
		t.Errorf("%d downloads from the CDN, want %d", cdn, len(tests)-1)
	}
}

// TestFaults injects the ways a download goes wrong and checks each ends
// with the right file or the right error.
func TestFaults(t *testing.T) {
	const size, cut = 200_000, 70_001
	tests := []struct {
		name    string
		fault   func(*hubtest.File)
		part    []byte // a .part file left by an earlier attempt
		retries int
		err     error
		ranges  []string // the Range headers the content requests carry
	}{
		{name: "clean", fault: func(*hubtest.File) {}, ranges: []string{""}},
		{name: "corrupt", fault: func(f *hubtest.File) { f.Corrupt = true }, err: hub.ErrChecksum, ranges: []string{""}},
		{name: "dropped connection resumes", fault: func(f *hubtest.File) { f.DropAfter = cut },
			ranges: []string{"", "bytes=70001-"}},
		{name: "dropped connection resumes from a part file", fault: func(f *hubtest.File) {}, part: blob(7, size)[:cut],
			ranges: []string{"bytes=70001-"}},
		{name: "server ignores the range", fault: func(f *hubtest.File) { f.IgnoreRange = true }, part: blob(7, size)[:cut],
			ranges: []string{"bytes=70001-"}},
		{name: "part longer than the file", fault: func(*hubtest.File) {}, part: blob(8, size+10),
			ranges: []string{"bytes=200010-", ""}},
		{name: "stale part fails the checksum", fault: func(*hubtest.File) {}, part: blob(9, cut), err: hub.ErrChecksum,
			ranges: []string{"bytes=70001-"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := hubtest.New(t)
			data := blob(7, size)
			tt.fault(h.Add("acme/m", "m.gguf", data))
			c, log := client(t, h)
			dst := filepath.Join(c.Cache.Dir, "hf.co", "acme", "m", "m.gguf")
			if tt.part != nil {
				os.MkdirAll(filepath.Dir(dst), 0o755)
				os.WriteFile(dst+".part", tt.part, 0o644)
			}
			e, err := c.Pull(timeout(t), mustParse(t, "acme/m/m.gguf"))
			var got []string
			for _, r := range h.ContentRequests() {
				got = append(got, r.Range)
			}
			if strings.Join(got, ",") != strings.Join(tt.ranges, ",") {
				t.Errorf("content requests had ranges %q, want %q", got, tt.ranges)
			}
			if tt.err != nil {
				if !errors.Is(err, tt.err) || !strings.Contains(err.Error(), "deleted") {
					t.Fatalf("err = %v, want %v saying the download was deleted", err, tt.err)
				}
				for _, p := range []string{dst, dst + ".part"} {
					if _, err := os.Stat(p); err == nil {
						t.Errorf("%s is left behind", p)
					}
				}
				if _, ok, _ := c.Cache.Lookup(mustParse(t, "acme/m/m.gguf")); ok {
					t.Error("the index records the rejected download")
				}
				return
			}
			if err != nil {
				t.Fatalf("%v\n%s", err, log)
			}
			checkFile(t, c, e, data)
			if !e.Files[0].Verified {
				t.Error("not verified")
			}
			if _, err := os.Stat(dst + ".part"); err == nil {
				t.Error("the .part file is left behind")
			}
		})
	}
}

// TestResumeNextRun: with no retries, a dropped connection fails the pull
// but keeps what arrived, and the next pull asks only for the rest.
func TestResumeNextRun(t *testing.T) {
	h := hubtest.New(t)
	data := blob(11, 150_000)
	h.Add("acme/m", "m.gguf", data).DropAfter = 50_000
	c, _ := client(t, h)
	c.Retries = -1
	ref := mustParse(t, "hf.co/acme/m/m.gguf")
	if _, err := c.Pull(timeout(t), ref); err == nil {
		t.Fatal("a dropped connection without retries succeeded")
	}
	part := filepath.Join(c.Cache.Dir, "hf.co", "acme", "m", "m.gguf.part")
	if st, err := os.Stat(part); err != nil || st.Size() != 50_000 {
		t.Fatalf("part file after the drop: %v, %v; want 50000 bytes", st, err)
	}
	e, err := c.Pull(timeout(t), ref)
	if err != nil {
		t.Fatal(err)
	}
	checkFile(t, c, e, data)
	rs := h.ContentRequests()
	if len(rs) != 2 || rs[1].Range != "bytes=50000-" {
		t.Errorf("content requests %+v: want the second to ask for bytes=50000-", rs)
	}
}

// TestToken: HF_TOKEN goes to the Hub and not to a CDN on another host; a
// gated repository without it says to set it.
func TestToken(t *testing.T) {
	h := hubtest.New(t)
	h.SeparateCDN()
	h.RequireToken("hf_secret")
	data := blob(5, 30_000)
	h.Add("acme/gated", "g-Q4_0.gguf", data)
	c, _ := client(t, h)
	ref := mustParse(t, "hf.co/acme/gated:Q4_0")
	if _, err := c.Pull(timeout(t), ref); err == nil || !strings.Contains(err.Error(), "HF_TOKEN") {
		t.Fatalf("without a token: %v, want an error that mentions HF_TOKEN", err)
	}
	c.Token = "hf_secret"
	e, err := c.Pull(timeout(t), ref)
	if err != nil {
		t.Fatal(err)
	}
	checkFile(t, c, e, data)
	var hubSeen, cdnSeen int
	for _, r := range h.Requests() {
		switch {
		case r.Server == "cdn" && r.Authorization != "":
			t.Errorf("the CDN received %q for %s", r.Authorization, r.Path)
		case r.Server == "cdn":
			cdnSeen++
		case r.Authorization == "Bearer hf_secret":
			hubSeen++
		}
	}
	if hubSeen < 2 || cdnSeen != 1 {
		t.Errorf("%d Hub requests with the token (want the listing and the resolve), %d CDN requests (want 1)", hubSeen, cdnSeen)
	}
}

// TestOffline: an offline client serves what the cache has and refuses the
// rest without a request.
func TestOffline(t *testing.T) {
	h := hubtest.New(t)
	data := blob(6, 20_000)
	h.Add("acme/m", "m-Q4_0.gguf", data)
	c, _ := client(t, h)
	ref := mustParse(t, "hf.co/acme/m:Q4_0")
	c.Offline = true
	if _, err := c.Get(timeout(t), ref); !errors.Is(err, hub.ErrOffline) || !strings.Contains(err.Error(), "not in the cache") {
		t.Fatalf("offline Get of a model not in the cache: %v", err)
	}
	if _, err := c.Pull(timeout(t), ref); !errors.Is(err, hub.ErrOffline) {
		t.Fatalf("offline Pull: %v", err)
	}
	if n := len(h.Requests()); n != 0 {
		t.Fatalf("offline made %d requests", n)
	}
	c.Offline = false
	if _, err := c.Get(timeout(t), ref); err != nil {
		t.Fatal(err)
	}
	before := len(h.Requests())
	c.Offline = true
	for _, s := range []string{"hf.co/acme/m:q4_0", "acme/m/m-Q4_0.gguf"} {
		e, err := c.Get(timeout(t), mustParse(t, s))
		if err != nil {
			t.Fatalf("offline Get of %s after the pull: %v", s, err)
		}
		checkFile(t, c, e, data)
	}
	if n := len(h.Requests()) - before; n != 0 {
		t.Errorf("Get of a cached model made %d requests", n)
	}
}

// TestSharded: a split GGUF brings all its shards, and the entry opens at
// the first.
func TestSharded(t *testing.T) {
	h := hubtest.New(t)
	var shards [][]byte
	for i, name := range []string{"Q4_0/big-Q4_0-00001-of-00003.gguf", "Q4_0/big-Q4_0-00002-of-00003.gguf", "Q4_0/big-Q4_0-00003-of-00003.gguf"} {
		shards = append(shards, blob(uint64(20+i), 10_000+i))
		h.Add("acme/big", name, shards[i])
	}
	h.Add("acme/big", "big-Q8_0.gguf", blob(30, 100))
	for _, ref := range []string{"hf.co/acme/big:Q4_0", "acme/big/Q4_0/big-Q4_0-00002-of-00003.gguf"} {
		c, _ := client(t, h)
		e, err := c.Pull(timeout(t), mustParse(t, ref))
		if err != nil {
			t.Fatal(err)
		}
		if len(e.Files) != 3 || !strings.HasSuffix(cachedPath(t, c, e), "big-Q4_0-00001-of-00003.gguf") {
			t.Fatalf("%s: entry %+v, want three shards opening at the first", ref, e)
		}
		for i, f := range e.Files {
			got, err := os.ReadFile(filepath.Join(c.Cache.Dir, filepath.FromSlash(f.Path)))
			if err != nil || !bytes.Equal(got, shards[i]) || !f.Verified {
				t.Errorf("%s: shard %d (%s) differs or is unverified: %v", ref, i+1, f.Name, err)
			}
		}
		if e.Size != 30_003 {
			t.Errorf("size %d, want 30003", e.Size)
		}
	}
}

// TestUpToDate: pulling again downloads nothing when the Hub reports the
// checksum the index holds, and again when it changed.
func TestUpToDate(t *testing.T) {
	h := hubtest.New(t)
	h.Add("acme/m", "m.gguf", blob(40, 10_000))
	c, log := client(t, h)
	ref := mustParse(t, "acme/m/m.gguf")
	for range 2 {
		if _, err := c.Pull(timeout(t), ref); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(h.ContentRequests()); n != 1 || !strings.Contains(log.String(), "up to date") {
		t.Errorf("%d content requests, log %q; want one download, then up to date", n, log)
	}
	newer := blob(41, 12_000)
	h.Add("acme/m", "m.gguf", newer)
	e, err := c.Pull(timeout(t), ref)
	if err != nil {
		t.Fatal(err)
	}
	checkFile(t, c, e, newer)
}

// TestCancel: cancelling stops a download that has stalled, and keeps
// what arrived for the next attempt.
func TestCancel(t *testing.T) {
	h := hubtest.New(t)
	h.Add("acme/m", "m.gguf", blob(50, 100_000)).Stall = 30_000
	c, _ := client(t, h)
	ctx, cancel := context.WithCancel(timeout(t))
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	_, err := c.Pull(ctx, mustParse(t, "acme/m/m.gguf"))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("cancelling took %s", d)
	}
	part := filepath.Join(c.Cache.Dir, "hf.co", "acme", "m", "m.gguf.part")
	if st, err := os.Stat(part); err != nil || st.Size() != 30_000 {
		t.Errorf("part file: %v, %v; want the 30000 bytes that arrived", st, err)
	}
}

// TestErrors: what a user sees when the reference names nothing.
func TestErrors(t *testing.T) {
	h := hubtest.New(t)
	h.Add("acme/m", "m-Q4_0.gguf", blob(60, 100))
	tests := []struct{ ref, want string }{
		{"hf.co/acme/none:Q4_0", "no such repository"},
		{"hf.co/acme/m:Q5_K_M", "no GGUF file matches :Q5_K_M; the repository has m-Q4_0.gguf"},
		{"acme/m/missing.gguf", "no such repository or file"},
		{"acme/m/m-00001-of-00002.gguf", "no such repository or file"},
	}
	for _, tt := range tests {
		c, _ := client(t, h)
		_, err := c.Pull(timeout(t), mustParse(t, tt.ref))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error with %q", tt.ref, err, tt.want)
		}
	}
}
