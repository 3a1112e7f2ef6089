package synth_test

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/safetensors"
	"github.com/tessera-llm/tessera/models/synth"
)

var tinyShapes = []string{"tiny", "tiny-llama3", "tiny-qwen2", "tiny-qwen3", "tiny-gemma2", "tiny-gemma3",
	"tiny-mixtral", "tiny-qwen2moe", "tiny-qwen3moe", "tiny-olmoe", "tiny-granitemoe", "tiny-smollm3", "tiny-qwen35"}

// gemma4TinyShapes are Gemma 4's tiny shapes (their folders' tokenizer.json
// is Gemma 4's kind, as their GGUFs' tokenizer).
var gemma4TinyShapes = []string{"tiny-gemma4", "tiny-gemma4-kv", "tiny-gemma4-wide", "tiny-gemma4-moe"}

// ggufOnlyShapes are written as GGUF only (the files people run).
var ggufOnlyShapes = []string{"tiny-phi3", "tiny-phi3-short", "tiny-yarn", "tiny-gpt-oss", "tiny-gemma3-swa"}

func writeGGUF(t *testing.T, s synth.Shape, typ dtype.Type, seed uint64) *models.Model {
	t.Helper()
	path := filepath.Join(t.TempDir(), s.Name+".gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := synth.Write(f, s, typ, seed); err != nil {
		t.Fatal(err)
	}
	f.Close()
	m, err := models.Open(path, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func writeHF(t *testing.T, s synth.Shape, typ dtype.Type, seed uint64, opts synth.HFOptions) *models.Model {
	t.Helper()
	dir := filepath.Join(t.TempDir(), s.Name)
	if err := synth.WriteHF(dir, s, typ, seed, opts); err != nil {
		t.Fatal(err)
	}
	m, err := models.Open(dir, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestWriteHFMatchesGGUF: the folder and the GGUF of one synthetic model
// have the same config (but for the RoPE layout of Llama), the same
// weights (Llama's q and k rows permuted within each head), and tokenizers
// that agree on every text.
func TestWriteHFMatchesGGUF(t *testing.T) {
	for _, name := range slices.Concat(tinyShapes, gemma4TinyShapes) {
		s, err := synth.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, typ := range []dtype.Type{dtype.F32, dtype.F16} {
			for _, shards := range []int{1, 3} {
				g := writeGGUF(t, s, typ, 5)
				h := writeHF(t, s, typ, 5, synth.HFOptions{Shards: shards})
				want := g.Config
				want.Rope = models.RopeHalves
				if !reflect.DeepEqual(h.Config, want) {
					t.Errorf("%s %s: config\n%+v, want\n%+v", name, typ, h.Config, want)
				}
				if h.Format != "hf" {
					t.Errorf("format %q", h.Format)
				}
				compareWeights(t, name, g, h)
				compareTokenizers(t, name, g, h)
			}
		}
	}
}

func compareWeights(t *testing.T, name string, g, h *models.Model) {
	t.Helper()
	c := g.Config
	for _, tn := range g.TensorNames() {
		if tn == "rope_freqs.weight" {
			continue // config.json's rope_scaling
		}
		gt, ht := g.Tensors[tn], h.Tensors[tn]
		if ht == nil {
			t.Errorf("%s: HF folder lacks %s", name, tn)
			continue
		}
		if gt.Type != ht.Type || !slices.Equal(gt.Shape, ht.Shape) {
			t.Errorf("%s: %s is %s %v in the folder, %s %v in the GGUF", name, tn, ht.Type, ht.Shape, gt.Type, gt.Shape)
			continue
		}
		gv, err := gt.Float32()
		if err != nil {
			t.Fatal(err)
		}
		hv, err := ht.Float32()
		if err != nil {
			t.Fatal(err)
		}
		if c.Rope == models.RopePairs {
			heads := 0
			switch {
			case strings.Contains(tn, ".attn_q."):
				heads = c.Heads
			case strings.Contains(tn, ".attn_k."):
				heads = c.KVHeads
			}
			if heads > 0 { // the GGUF row h·d+2j+s is the folder's h·d+s·d/2+j
				d, cols := c.HeadDim, len(gv)/(heads*c.HeadDim)
				perm := make([]float32, len(gv))
				for hd := range heads {
					for j := range d / 2 {
						for s := range 2 {
							copy(perm[(hd*d+2*j+s)*cols:][:cols], hv[(hd*d+s*d/2+j)*cols:][:cols])
						}
					}
				}
				hv = perm
				if !slices.Equal(gv, hv) {
					t.Errorf("%s: %s differs after undoing the permutation", name, tn)
				}
				continue
			}
		}
		if strings.HasSuffix(tn, "."+models.LinA) { // the folder's A_log, −exp'd at load: a rounding apart
			for i := range gv {
				if math.Abs(float64(gv[i]-hv[i])) > 1e-6*math.Abs(float64(gv[i])) {
					t.Errorf("%s: %s[%d] %g, GGUF %g", name, tn, i, hv[i], gv[i])
				}
			}
			continue
		}
		if !slices.Equal(gv, hv) {
			t.Errorf("%s: %s differs", name, tn)
		}
	}
	if len(h.Tensors) != len(g.Tensors)-boolInt(g.Config.RopeFactors != nil) {
		t.Errorf("%s: %d tensors in the folder, %d in the GGUF", name, len(h.Tensors), len(g.Tensors))
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func compareTokenizers(t *testing.T, name string, g, h *models.Model) {
	t.Helper()
	texts := []string{"", "a", "abc def ghi", "hello tessera, abc xyz", "  two  spaces ", "trailing\n", "Ünïcödé ✓ 😀 ▁a ▁",
		"<s> </s> <unk>", "tabs\tand\r\nlines", "zzzz qqqq", "\xff\xfe invalid", strings.Repeat("ab", 50)}
	for _, text := range texts {
		for _, bos := range []bool{false, true} {
			want := g.Tokenizer.Encode(text, bos)
			got := h.Tokenizer.Encode(text, bos)
			if !slices.Equal(got, want) {
				t.Errorf("%s: Encode(%q, %v) = %v in the folder, %v in the GGUF", name, text, bos, got, want)
			}
			if d := h.Tokenizer.Decode(got); d != g.Tokenizer.Decode(want) {
				t.Errorf("%s: Decode of %q: %q, GGUF %q", name, text, d, g.Tokenizer.Decode(want))
			}
		}
	}
	for id := 1; id < g.Config.Vocab; id++ { // <unk> (0) decodes to "<unk>" in SentencePiece, "" in BPE
		if a, b := h.Tokenizer.Decode([]int{5, id}), g.Tokenizer.Decode([]int{5, id}); a != b {
			t.Errorf("%s: id %d decodes to %q, GGUF %q", name, id, a, b)
		}
	}
	if h.Tokenizer.BOS() != g.Tokenizer.BOS() || h.Tokenizer.EOS() != g.Tokenizer.EOS() {
		t.Errorf("%s: BOS/EOS %d/%d, GGUF %d/%d", name, h.Tokenizer.BOS(), h.Tokenizer.EOS(), g.Tokenizer.BOS(), g.Tokenizer.EOS())
	}
}

// TestWriteHFLayout checks the files: one model.safetensors, or shards and
// an index; matrices in the chosen type (BF16 too), norms in F32, under
// Hugging Face's names.
func TestWriteHFLayout(t *testing.T) {
	s, err := synth.Lookup("tiny-qwen2")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := synth.WriteHF(dir, s, dtype.BF16, 1, synth.HFOptions{Shards: 2}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.json", "tokenizer.json", "tokenizer_config.json", safetensors.IndexFile,
		"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	set, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	for name, want := range map[string]safetensors.DType{
		"model.embed_tokens.weight":              safetensors.BF16,
		"model.layers.1.self_attn.q_proj.weight": safetensors.BF16,
		"model.layers.1.self_attn.q_proj.bias":   safetensors.F32,
		"model.layers.0.input_layernorm.weight":  safetensors.F32,
		"model.norm.weight":                      safetensors.F32,
	} {
		if st, ok := set.Tensor(name); !ok || st.DType != want {
			t.Errorf("%s: %v %v, want %s", name, st, ok, want)
		}
	}
	if _, ok := set.Tensor("lm_head.weight"); ok {
		t.Error("tied model has lm_head.weight")
	}
	m, err := models.Open(dir, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if typ := m.Tensors[models.LayerTensor(0, models.FFNUp)].Type; typ != dtype.BF16 {
		t.Errorf("type %s", typ)
	}
	if err := synth.WriteHF(t.TempDir(), s, dtype.Q4_K, 1, synth.HFOptions{}); err == nil {
		t.Error("Q4_K accepted")
	}
}

// TestWriteHFTokenizerMerges: with a vocabulary large enough to hold
// multi-letter pieces, the folder's BPE merges them exactly as the GGUF's
// SentencePiece does.
func TestWriteHFTokenizerMerges(t *testing.T) {
	s, err := synth.Lookup("tiny")
	if err != nil {
		t.Fatal(err)
	}
	s.Name, s.Config.Vocab = "tiny-vocab", 5000
	g := writeGGUF(t, s, dtype.F16, 5)
	h := writeHF(t, s, dtype.F16, 5, synth.HFOptions{})
	compareTokenizers(t, s.Name, g, h)
	for _, text := range []string{"the quick brown fox jumps over the lazy dog", strings.Repeat("abcab zq", 20), "aaaaaaaaa bbbbbbb abababab"} {
		ids := g.Tokenizer.Encode(text, false)
		if len(ids) >= len(text) {
			t.Errorf("%q: %d tokens, nothing merged", text, len(ids))
		}
		if got := h.Tokenizer.Encode(text, false); !slices.Equal(got, ids) {
			t.Errorf("%q: %v in the folder, %v in the GGUF", text, got, ids)
		}
	}
}
