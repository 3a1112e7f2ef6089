package models_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/gguf"
)

// writeSplit writes the GGUF at src as n parts in dir, named as gguf-split
// names them, and returns their paths.
func writeSplit(t *testing.T, src, dir, prefix string, n int) []string {
	t.Helper()
	whole, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer whole.Close()
	bufs := make([]bytes.Buffer, n)
	ws := make([]io.Writer, n)
	for i := range bufs {
		ws[i] = &bufs[i]
	}
	if err := whole.WriteSplit(ws); err != nil {
		t.Fatal(err)
	}
	paths := make([]string, n)
	for i := range bufs {
		paths[i] = gguf.SplitName(filepath.Join(dir, prefix), i, n)
		if err := os.WriteFile(paths[i], bufs[i].Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return paths
}

// TestOpenSplit: a model split by gguf-split opens from its first part
// (from disk, or from readers in order) as the whole file does: the same
// config, tokenizer and tensor bytes. Other parts, a missing part and
// parts out of order are errors.
func TestOpenSplit(t *testing.T) {
	src := filepath.Join("..", "..", "shared", "models", "stories260K.gguf")
	whole, err := models.Open(src, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer whole.Close()
	dir := t.TempDir()
	paths := writeSplit(t, src, dir, "stories", 3)

	split, err := models.Open(paths[0], models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer split.Close()
	var parts []models.Part
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, models.Part{R: bytes.NewReader(b), Size: int64(len(b))})
	}
	fromReaders, err := models.OpenParts(parts, "stories")
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]*models.Model{"files": split, "readers": fromReaders} {
		if m.Config.Arch != whole.Config.Arch || m.Config.Layers != whole.Config.Layers || m.Config.Vocab != whole.Config.Vocab ||
			m.Tokenizer.VocabSize() != whole.Tokenizer.VocabSize() || len(m.Tensors) != len(whole.Tensors) {
			t.Fatalf("%s: config %+v, %d tensors; the whole file: %+v, %d tensors", name, m.Config, len(m.Tensors), whole.Config, len(whole.Tensors))
		}
		for _, tn := range whole.TensorNames() {
			want, err := whole.Tensors[tn].Raw()
			if err != nil {
				t.Fatal(err)
			}
			got, err := m.Tensors[tn].Raw()
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s: tensor %s differs (%v)", name, tn, err)
			}
		}
	}

	if _, err := models.Open(paths[1], models.Options{}); !errors.Is(err, models.ErrBadSplit) {
		t.Errorf("opening the second part: %v, want ErrBadSplit", err)
	}
	if _, err := models.OpenParts([]models.Part{parts[0], parts[2], parts[1]}, "stories"); !errors.Is(err, models.ErrBadSplit) {
		t.Errorf("parts out of order: %v, want ErrBadSplit", err)
	}
	if _, err := models.OpenParts(parts[:2], "stories"); !errors.Is(err, models.ErrBadSplit) {
		t.Errorf("two parts of three: %v, want ErrBadSplit", err)
	}
	os.Remove(paths[2])
	if _, err := models.Open(paths[0], models.Options{}); err == nil {
		t.Error("a missing third part: no error")
	}
}
