package safetensors

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, path string, tensors []WriteTensor) {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, nil, tensors); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeIndex(t *testing.T, dir string, weightMap map[string]string) {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteIndex(&buf, weightMap, 123); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, IndexFile), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestOpenDirSingle(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, SingleFile), sampleTensors(t))
	s, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.TensorNames(); len(got) != len(sampleTensors(t)) {
		t.Errorf("tensors %v", got)
	}
	if _, ok := s.Tensor("h"); !ok {
		t.Error("tensor h missing")
	}
}

// TestOpenDirSharded splits the sample over two shards: the set holds every
// tensor of the index, reads each from its shard, and ignores a tensor the
// index does not list.
func TestOpenDirSharded(t *testing.T) {
	dir := t.TempDir()
	ts := sampleTensors(t)
	const a, b = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
	writeFile(t, filepath.Join(dir, a), ts[:3])
	writeFile(t, filepath.Join(dir, b), ts[3:])
	weightMap := map[string]string{}
	for i, tt := range ts {
		weightMap[tt.Name] = a
		if i >= 3 {
			weightMap[tt.Name] = b
		}
	}
	delete(weightMap, "mask")
	writeIndex(t, dir, weightMap)
	s, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(s.Files) != 2 || s.Names[0] != a || s.Names[1] != b {
		t.Errorf("files %v", s.Names)
	}
	if _, ok := s.Tensor("mask"); ok {
		t.Error("tensor outside the index was loaded")
	}
	for _, tt := range ts {
		if tt.Name == "mask" {
			continue
		}
		got, ok := s.Tensor(tt.Name)
		if !ok {
			t.Fatalf("tensor %s missing", tt.Name)
		}
		data, err := got.Bytes()
		if err != nil || !bytes.Equal(data, tt.Data) {
			t.Errorf("%s: %v, data %v want %v", tt.Name, err, data, tt.Data)
		}
	}
}

func TestOpenDirErrors(t *testing.T) {
	ts := sampleTensors(t)
	for _, tc := range []struct {
		name  string
		setup func(dir string)
		want  string
	}{
		{"empty folder", func(string) {}, "has neither"},
		{"corrupt single file", func(dir string) {
			os.WriteFile(filepath.Join(dir, SingleFile), []byte("garbage!garbage!"), 0o644)
		}, "exceeds the maximum"},
		{"bad index JSON", func(dir string) {
			os.WriteFile(filepath.Join(dir, IndexFile), []byte("{"), 0o644)
		}, IndexFile},
		{"empty weight map", func(dir string) { writeIndex(t, dir, nil) }, "empty or missing weight_map"},
		{"missing shard", func(dir string) {
			writeIndex(t, dir, map[string]string{"h": "model-00001-of-00001.safetensors"})
		}, "model-00001-of-00001.safetensors"},
		{"escaping shard", func(dir string) {
			writeIndex(t, dir, map[string]string{"h": "../evil.safetensors"})
		}, "not a file name in the folder"},
		{"absolute shard", func(dir string) {
			writeIndex(t, dir, map[string]string{"h": "/etc/passwd"})
		}, "not a file name in the folder"},
		{"shard in a subfolder", func(dir string) {
			writeIndex(t, dir, map[string]string{"h": "sub/x.safetensors"})
		}, "not a file name in the folder"},
		{"tensor not in its shard", func(dir string) {
			writeFile(t, filepath.Join(dir, "s.safetensors"), ts[:1])
			writeIndex(t, dir, map[string]string{"h": "s.safetensors"})
		}, `puts tensor "h" in s.safetensors, which does not hold it`},
	} {
		dir := t.TempDir()
		tc.setup(dir)
		_, err := OpenDir(dir)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	_, err := OpenDir(t.TempDir())
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("empty folder: %v does not wrap fs.ErrNotExist", err)
	}
}
