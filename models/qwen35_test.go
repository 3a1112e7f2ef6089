package models_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/gguf"
	"github.com/tessera-llm/tessera/models/synth"
)

// TestQwen35GGUF: synth's tiny-qwen35 file opens with llama.cpp's layout
// read back (full attention every fourth layer, the linear layers' shapes,
// q's gate half split off head by head), and files that say what the
// forward pass cannot do are refused by name.
func TestQwen35GGUF(t *testing.T) {
	s, err := synth.Lookup("tiny-qwen35")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "q.gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := synth.Write(f, s, dtype.F32, 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	m, err := models.Open(path, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := m.Config
	want := s.Config.Linear
	if !c.AttnGate || !c.QKNorm || c.Linear.Conv != want.Conv || c.Linear.KHeads != want.KHeads ||
		c.Linear.VHeads != want.VHeads || c.Linear.HeadDim != want.HeadDim || c.Linear.Count() != 6 || c.LayerLinear(3) || c.LayerLinear(7) {
		t.Errorf("config %+v (linear %+v), want linear %+v", c, c.Linear, want)
	}
	// Head 1's gate rows of layer 3 are rows 2·HeadDim.. of the file's
	// attn_q (q of head 0, gate of head 0, q of head 1, gate of head 1).
	gate, err := m.Tensors[models.LayerTensor(3, models.AttnQGate)].Float32()
	if err != nil {
		t.Fatal(err)
	}
	file, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	ti, _ := file.Tensor(models.LayerTensor(3, models.AttnQ))
	all, err := file.ReadFloat32(ti)
	if err != nil {
		t.Fatal(err)
	}
	hd, dim := c.HeadDim, c.Dim
	if got, want := gate[hd*dim], all[3*hd*dim]; got != want {
		t.Errorf("head 1's first gate value %g, want the file's row %d: %g", got, 3*hd, want)
	}
	m.Close()

	for _, tc := range []struct {
		key   string
		value gguf.Value
		err   string
	}{
		{"qwen35.ssm.inner_size", gguf.Uint32Value(100), "ssm.inner_size 100"},
		{"qwen35.attention.recurrent_layers", gguf.ArrayValue([]bool{true}), "recurrent_layers is not supported"},
		{"qwen35.full_attention_interval", gguf.Uint32Value(0), "full_attention_interval 0"},
	} {
		t.Run(tc.key, func(t *testing.T) {
			kv := append([]gguf.KV(nil), file.KV...)
			found := false
			for i := range kv {
				if kv[i].Key == tc.key {
					kv[i].Value, found = tc.value, true
				}
			}
			if !found {
				kv = append(kv, gguf.KV{Key: tc.key, Value: tc.value})
			}
			var tensors []gguf.WriteTensor
			for _, ti := range file.Tensors {
				data, err := file.ReadTensor(&ti)
				if err != nil {
					t.Fatal(err)
				}
				tensors = append(tensors, gguf.WriteTensor{Name: ti.Name, Dims: ti.Dims, Type: ti.Type, Data: data})
			}
			bad := filepath.Join(t.TempDir(), "bad.gguf")
			out, err := os.Create(bad)
			if err != nil {
				t.Fatal(err)
			}
			if err := gguf.Write(out, kv, tensors); err != nil {
				t.Fatal(err)
			}
			out.Close()
			_, err = models.Open(bad, models.Options{})
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("open: %v, want an error with %q", err, tc.err)
			}
		})
	}
}
