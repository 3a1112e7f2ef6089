package models_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/gguf"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/models/tokenizer"
)

// openTinyGemma4 writes and opens tiny-gemma4 (seed 1, f32).
func openTinyGemma4(t *testing.T) *models.Model { return openGemma4(t, "tiny-gemma4") }

// openGemma4 writes and opens a Gemma 4 shape (seed 1, f32).
func openGemma4(t *testing.T, shape string) *models.Model {
	t.Helper()
	s, err := synth.Lookup(shape)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), shape+".gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := synth.Write(f, s, dtype.F32, 1); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	m, err := models.Open(path, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestGemma4Config: tiny-gemma4's file reads back as the shape synth
// describes, per-layer arrays and shared layers included.
func TestGemma4Config(t *testing.T) {
	m := openTinyGemma4(t)
	s, _ := synth.Lookup("tiny-gemma4")
	got, want := m.Config, s.Config
	if got.Gemma4 == nil {
		t.Fatal("no Gemma 4 config")
	}
	g, w := *got.Gemma4, *want.Gemma4
	if !slices.Equal(g.FFNs, w.FFNs) || g.LocalHeadDim != w.LocalHeadDim || g.LocalKVHeads != w.LocalKVHeads ||
		g.LocalRopeDim != w.LocalRopeDim || g.SharedKV != w.SharedKV || g.PerLayer != w.PerLayer {
		t.Errorf("gemma4 config %+v, want %+v", g, w)
	}
	if got.FFN != want.FFN || got.KVHeads != want.KVHeads || got.HeadDim != want.HeadDim || got.RopeDim != want.RopeDim ||
		!slices.Equal(got.Sliding, want.Sliding) || got.SlidingWindow != want.SlidingWindow || got.LocalRopeTheta != want.LocalRopeTheta ||
		got.FinalSoftcap != want.FinalSoftcap || got.QueryScale != 1 || !slices.Equal(got.RopeFactors, want.RopeFactors) {
		t.Errorf("config %+v, want %+v", got, want)
	}
	for l, src := range []int{0, 1, 2, 3, 4, 5, 4, 4, 5} {
		if got.KVSource(l) != src {
			t.Errorf("layer %d reads layer %d's keys and values, want %d", l, got.KVSource(l), src)
		}
	}
}

// TestGemma4VFromK: a file whose global layers have no attn_v (the 31B's
// kind) reads back with those layers' values taken from their keys, and
// every other layer's from its own attn_v.
func TestGemma4VFromK(t *testing.T) {
	m := openGemma4(t, "tiny-gemma4-kv")
	g := m.Config.Gemma4
	for l := range m.Config.Layers {
		_, hasV := m.Tensors[models.LayerTensor(l, models.AttnV)]
		if g.LayerVFromK(l) != !m.Config.LayerSliding(l) || hasV == g.LayerVFromK(l) {
			t.Errorf("layer %d (sliding %v): values from keys %v, attn_v %v", l, m.Config.LayerSliding(l), g.LayerVFromK(l), hasV)
		}
	}
	if tiny := openTinyGemma4(t); tiny.Config.Gemma4.VFromK != nil {
		t.Errorf("tiny-gemma4 read with values from keys %v", tiny.Config.Gemma4.VFromK)
	}
}

// TestGemma4Experts: the 26B-A4B's kind reads back with its experts
// (top k renormalised, as llama.cpp's gemma4 graph always does), the
// fused ffn_gate_up_exps split into gate and up of each expert's rows, and
// global layers without attn_v.
func TestGemma4Experts(t *testing.T) {
	m := openGemma4(t, "tiny-gemma4-moe")
	s, _ := synth.Lookup("tiny-gemma4-moe")
	if m.Config.MoE != s.Config.MoE || !m.Config.MoE.NormTopK {
		t.Errorf("experts read as %+v, want %+v", m.Config.MoE, s.Config.MoE)
	}
	if !slices.Equal(m.Config.Gemma4.VFromK, s.Config.Gemma4.VFromK) {
		t.Errorf("values from keys %v, want %v", m.Config.Gemma4.VFromK, s.Config.Gemma4.VFromK)
	}
	e, f, d := s.Config.MoE.Experts, s.Config.MoE.FFN, s.Config.Dim
	if _, ok := m.Tensors[models.LayerTensor(0, models.FFNGateUpExps)]; ok {
		t.Error("the fused gate and up are still listed")
	}
	gate, err := m.Tensor(models.LayerTensor(0, models.FFNGateExps), e, f, d)
	if err != nil {
		t.Fatal(err)
	}
	up, err := m.Tensor(models.LayerTensor(0, models.FFNUpExps), e, f, d)
	if err != nil {
		t.Fatal(err)
	}
	g, err1 := gate.Float32()
	u, err2 := up.Float32()
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	// The file's fused tensor, read directly: expert x's gate rows, then
	// its up rows.
	file, err := gguf.Open(m.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	ti, ok := file.Tensor(models.LayerTensor(0, models.FFNGateUpExps))
	if !ok {
		t.Fatal("synth wrote no ffn_gate_up_exps")
	}
	fused, err := file.ReadFloat32(ti)
	if err != nil {
		t.Fatal(err)
	}
	for x := range e {
		at := x * 2 * f * d
		if !slices.Equal(g[x*f*d:(x+1)*f*d], fused[at:at+f*d]) || !slices.Equal(u[x*f*d:(x+1)*f*d], fused[at+f*d:at+2*f*d]) {
			t.Fatalf("expert %d's gate or up is not its rows of the fused tensor", x)
		}
	}
}

// TestGemma4Tokenizer: Gemma 4's vocabulary kind (tokenizer.ggml.model
// "gemma4") gives llama.cpp's ids. The ids are llama-tokenize's (../shared/
// peers, commit 3f545bec) on tiny-gemma4's file: spaces as ▁, merges over
// characters, byte pieces for what the vocabulary lacks (capitals, digits,
// é), runs of newlines apart, the turn tokens as special tokens, a BOS.
func TestGemma4Tokenizer(t *testing.T) {
	m := openTinyGemma4(t)
	tok, ok := m.Tokenizer.(tokenizer.SpecialEncoder)
	if !ok {
		t.Fatalf("tokenizer %T does not encode special tokens", m.Tokenizer)
	}
	for _, tc := range []struct {
		text string
		want []int
	}{
		{"hello world", []int{1, 275, 543, 283, 289, 304, 289, 295, 283, 267}},
		{"ab cd  ef", []int{1, 315, 422, 259, 530}},
		{"Hello, World! 123 é ü", []int{1, 75, 543, 283, 289, 47, 259, 90, 289, 295, 283, 267, 36, 259, 52, 53, 54, 259, 198, 172, 259, 198, 191}},
		{"a\nb\n\nc\n\n\nd", []int{1, 261, 13, 263, 13, 13, 265, 13, 13, 13, 267}},
		{"  lead and trail  ", []int{1, 259, 282, 269, 319, 338, 267, 298, 295, 329, 283, 259, 259}},
		{"<|turn>user\nhi<turn|>", []int{1, 598, 301, 297, 555, 13, 275, 277, 599}},
	} {
		got := tok.EncodeSpecial(tc.text, true)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%q: %v, llama.cpp %v", tc.text, got, tc.want)
		}
		if dec, ok := m.Tokenizer.(tokenizer.SpecialDecoder); ok {
			if back := dec.DecodeSpecial(got[1:]); back != tc.text {
				t.Errorf("%q decodes back to %q", tc.text, back)
			}
		}
	}
	if e, ok := m.Tokenizer.(tokenizer.EndChecker); !ok || !e.IsEnd(599) {
		t.Errorf("<turn|> (599) does not end a generation")
	}
}

// TestSplitTensor: SplitColumns and SplitRows give the parts' values, in
// f32 and in Q8_0 blocks, from one read of the whole; a split that cuts a
// block is refused.
func TestSplitTensor(t *testing.T) {
	const rows, cols = 6, 128
	vals := make([]float32, rows*cols)
	for i := range vals {
		vals[i] = float32(i%37) - 18
	}
	for _, typ := range []dtype.Type{dtype.F32, dtype.Q8_0} {
		raw, err := dtype.Quantize(typ, vals)
		if err != nil {
			t.Fatal(err)
		}
		reads := 0
		whole := models.NewTensor("w", []int{rows, cols}, typ, func() ([]byte, error) { reads++; return raw, nil })
		all, err := whole.Float32()
		if err != nil {
			t.Fatal(err)
		}
		reads = 0
		for _, tc := range []struct {
			cols bool
			n    int
		}{{true, 2}, {true, 4}, {false, 3}} {
			split := models.SplitRows
			if tc.cols {
				split = models.SplitColumns
			}
			parts, err := split(whole, tc.n)
			if err != nil {
				t.Fatal(err)
			}
			for i, p := range parts {
				got, err := p.Float32()
				if err != nil {
					t.Fatal(err)
				}
				for r := range p.Shape[0] {
					for c := range p.Shape[1] {
						wr, wc := r, c+i*cols/tc.n
						if !tc.cols {
							wr, wc = r+i*rows/tc.n, c
						}
						if got[r*p.Shape[1]+c] != all[wr*cols+wc] {
							t.Fatalf("%s cols %v part %d [%d %d]: %g, want %g", typ, tc.cols, i, r, c, got[r*p.Shape[1]+c], all[wr*cols+wc])
						}
					}
				}
			}
			if reads != 1 {
				t.Errorf("%s cols %v: the whole read %d times for %d parts, want once", typ, tc.cols, reads, tc.n)
			}
			reads = 0
		}
	}
	q, _ := dtype.Quantize(dtype.Q8_0, vals)
	whole := models.NewTensor("w", []int{rows, cols}, dtype.Q8_0, func() ([]byte, error) { return q, nil })
	if _, err := models.SplitColumns(whole, 8); err == nil { // 16 columns cut Q8_0's blocks of 32
		t.Error("a split of Q8_0 rows into 16-column parts was not refused")
	}
}
