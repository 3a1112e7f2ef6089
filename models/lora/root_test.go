package lora_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/lora"
)

// TestOpenIn: OpenIn reads a GGUF file and a PEFT folder inside its root
// as Open reads them, and refuses at once, with an error that names the
// file and the fault and never quotes its bytes, what a client must not
// make a server read: a FIFO (which would block an ordinary open until a
// writer came), a path out of the root by "..", by an absolute name or by
// a symlink, a file that is not an adapter, one over the size bound, a
// folder without adapter_config.json.
func TestOpenIn(t *testing.T) {
	k := models.LayerTensor(0, models.AttnK)
	a := &lora.Adapter{Alpha: 8, Targets: map[string]*lora.Target{
		k: {Name: k, Rank: 2, In: 8, Out: 4, A: seq(2*8, -1, 0.125), B: seq(4*2, 0.5, -0.25), Scale: 4},
	}}
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(lora.WriteGGUF(filepath.Join(dir, "a.gguf"), a, "llama"))
	must(lora.WritePEFT(filepath.Join(dir, "peft"), a, tinyLlama))
	// What a client should never read back: a secret outside the root,
	// and a text file inside it.
	const secret = "root:x:0:0:secret"
	outside := filepath.Join(t.TempDir(), "passwd")
	must(os.WriteFile(outside, []byte(secret+"\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "passwd"), []byte(secret+"\n"), 0o644))
	must(os.Symlink(outside, filepath.Join(dir, "link-out")))
	must(os.Symlink("a.gguf", filepath.Join(dir, "link-in")))
	must(syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644))
	must(os.MkdirAll(filepath.Join(dir, "peft-fifo"), 0o755))
	cfg, err := os.ReadFile(filepath.Join(dir, "peft", lora.PEFTConfig))
	must(err)
	must(os.WriteFile(filepath.Join(dir, "peft-fifo", lora.PEFTConfig), cfg, 0o644))
	must(syscall.Mkfifo(filepath.Join(dir, "peft-fifo", lora.PEFTWeights), 0o644))
	must(os.MkdirAll(filepath.Join(dir, "empty"), 0o755))
	must(os.MkdirAll(filepath.Join(dir, "peft-text"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "peft-text", lora.PEFTConfig), []byte(secret), 0o644))
	root, err := os.OpenRoot(dir)
	must(err)
	defer root.Close()

	for _, name := range []string{"a.gguf", "peft", "link-in"} {
		got, err := lora.OpenIn(root, name, tinyLlama, 1<<20)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if tg := got.Targets[k]; tg == nil || !slices.Equal(tg.A, a.Targets[k].A) || tg.Scale != 4 || got.Path != name {
			t.Errorf("%s read as %+v (path %q)", name, got.Targets, got.Path)
		}
	}

	for _, tc := range []struct {
		name    string
		max     int64
		is      error
		message string
	}{
		{"fifo", 1 << 20, lora.ErrRefusedPath, "fifo is a named pipe (FIFO), not a regular file"},
		{"peft-fifo", 1 << 20, lora.ErrRefusedPath, "peft-fifo/adapter_model.safetensors is a named pipe"},
		{"../" + filepath.Base(filepath.Dir(outside)) + "/passwd", 1 << 20, lora.ErrRefusedPath, "not a path inside the adapter directory"},
		{outside, 1 << 20, lora.ErrRefusedPath, "not a path inside the adapter directory"},
		{"link-out", 1 << 20, lora.ErrRefusedPath, "link-out cannot be opened inside the adapter directory"},
		{"passwd", 1 << 20, lora.ErrBadAdapter, "bad magic: not a GGUF file"},
		{"a.gguf", 100, lora.ErrRefusedPath, "a.gguf is "},
		{"none.gguf", 1 << 20, fs.ErrNotExist, "none.gguf does not exist in the adapter directory"},
		{"empty", 1 << 20, lora.ErrBadAdapter, "empty: a PEFT adapter folder needs adapter_config.json"},
		{"peft-text", 1 << 20, lora.ErrBadAdapter, "adapter_config.json is not valid JSON (at byte 1)"},
	} {
		t.Run(strings.ReplaceAll(tc.name, "/", "_"), func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				_, err := lora.OpenIn(root, tc.name, tinyLlama, tc.max)
				done <- err
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("OpenIn still blocks after 10 s")
			}
			t.Log(err)
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.message) {
				t.Errorf("error %v, want one wrapping %v that says %q", err, tc.is, tc.message)
			}
			if err != nil && (strings.Contains(err.Error(), "root:") || strings.Contains(err.Error(), "secret")) {
				t.Errorf("the error quotes the file: %v", err)
			}
		})
	}
}
