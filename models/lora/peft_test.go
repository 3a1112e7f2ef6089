package lora_test

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/lora"
	"github.com/tessera-llm/tessera/models/safetensors"
)

// peftModules are tinyLlama's modules that writePEFT adapts: PEFT's name,
// the GGUF tensor and the base shape [out, in].
var peftModules = []struct {
	module, tensor string
	out, in        int
}{
	{"model.layers.0.self_attn.q_proj", models.LayerTensor(0, models.AttnQ), 8, 8},
	{"model.layers.0.self_attn.k_proj", models.LayerTensor(0, models.AttnK), 4, 8},
	{"model.layers.0.mlp.down_proj", models.LayerTensor(0, models.FFNDown), 8, 12},
	{"lm_head", models.Output, 16, 8},
}

// writePEFT writes a PEFT folder by hand, as PEFT's save_pretrained lays
// it out: config (adapter_config.json's object) and, for each of
// peftModules, lora_A [rank, in] and lora_B [out, rank] of the rank ranks
// gives it.
func writePEFT(t *testing.T, config map[string]any, ranks map[string]int) string {
	t.Helper()
	dir := t.TempDir()
	cfg, err := json.Marshal(config)
	if err != nil {
		t.Fatal(err)
	}
	// json.Marshal sorts a map's keys: patterns whose order matters come
	// as json.RawMessage, written as they are.
	if err := os.WriteFile(filepath.Join(dir, lora.PEFTConfig), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	var ts []safetensors.WriteTensor
	for _, m := range peftModules {
		r := ranks[m.module]
		prefix := "base_model.model." + m.module
		ts = append(ts,
			safetensors.WriteTensor{Name: prefix + ".lora_A.weight", DType: safetensors.F32, Shape: []int{r, m.in}, Data: f32(t, seq(r*m.in, -1, 0.01))},
			safetensors.WriteTensor{Name: prefix + ".lora_B.weight", DType: safetensors.F32, Shape: []int{m.out, r}, Data: f32(t, seq(m.out*r, 1, -0.01))})
	}
	f, err := os.Create(filepath.Join(dir, lora.PEFTWeights))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := safetensors.Write(f, nil, ts); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestPEFTPatterns: a module's rank and alpha are rank_pattern's and
// alpha_pattern's for the first key (in the file's order) that matches it
// as PEFT's get_pattern_key matches, re.match(rf"(.*\.)?({key})$",
// module), else r and lora_alpha; its scale is alpha/rank, or
// alpha/sqrt(rank) with use_rslora.
func TestPEFTPatterns(t *testing.T) {
	ranks := map[string]int{"model.layers.0.self_attn.q_proj": 2, "model.layers.0.self_attn.k_proj": 4,
		"model.layers.0.mlp.down_proj": 2, "lm_head": 2}
	// "proj" matches no module: a key matches at a dot or the start.
	// q_proj matches "self_attn\.q_proj" before "self_attn\..*".
	rankPattern := json.RawMessage(`{"proj": 7, "k_proj": 4}`)
	alphaPattern := json.RawMessage(`{"proj": 99, "self_attn\\.q_proj": 16, "self_attn\\..*": 3, "layers.0.mlp.down_proj": 2}`)
	for _, tc := range []struct {
		name   string
		config map[string]any
		want   map[string]float64 // scale by module
	}{
		{"patterns", map[string]any{"peft_type": "LORA", "r": 2, "lora_alpha": 8, "rank_pattern": rankPattern, "alpha_pattern": alphaPattern},
			map[string]float64{"model.layers.0.self_attn.q_proj": 16.0 / 2, "model.layers.0.self_attn.k_proj": 3.0 / 4,
				"model.layers.0.mlp.down_proj": 2.0 / 2, "lm_head": 8.0 / 2}},
		{"patterns, rsLoRA", map[string]any{"r": 2, "lora_alpha": 8, "use_rslora": true, "rank_pattern": rankPattern, "alpha_pattern": alphaPattern},
			map[string]float64{"model.layers.0.self_attn.q_proj": 16 / math.Sqrt2, "model.layers.0.self_attn.k_proj": 3.0 / 2,
				"model.layers.0.mlp.down_proj": 2 / math.Sqrt2, "lm_head": 8 / math.Sqrt2}},
		{"no lora_alpha: PEFT's 8", map[string]any{"r": 2, "rank_pattern": map[string]int{"k_proj": 4}},
			map[string]float64{"model.layers.0.self_attn.q_proj": 4, "model.layers.0.self_attn.k_proj": 2,
				"model.layers.0.mlp.down_proj": 4, "lm_head": 4}},
		{"lora_alpha 0: scale 0, as in PEFT", map[string]any{"r": 2, "lora_alpha": 0, "rank_pattern": map[string]int{"k_proj": 4}},
			map[string]float64{"model.layers.0.self_attn.q_proj": 0, "model.layers.0.self_attn.k_proj": 0,
				"model.layers.0.mlp.down_proj": 0, "lm_head": 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := lora.Open(writePEFT(t, tc.config, ranks), tinyLlama)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range peftModules {
				got := a.Targets[m.tensor]
				if got.Rank != ranks[m.module] || math.Abs(float64(got.Scale)-tc.want[m.module]) > 1e-6 {
					t.Errorf("%s: rank %d scale %g, want %d and %g", m.module, got.Rank, got.Scale, ranks[m.module], tc.want[m.module])
				}
			}
		})
	}

	for _, tc := range []struct {
		name  string
		field string
		value any
		want  string
	}{
		{"a tensor of another rank", "rank_pattern", map[string]int{"q_proj": 4, "k_proj": 4}, "rank 2, but adapter_config.json gives model.layers.0.self_attn.q_proj rank 4"},
		{"a rank of no tensor", "rank_pattern", map[string]int{}, "rank 4, but adapter_config.json gives model.layers.0.self_attn.k_proj rank 2"},
		{"a rank that is not a whole number", "rank_pattern", map[string]float64{"k_proj": 4.5}, `rank_pattern: the rank of "k_proj" is 4.5`},
		{"a rank of 0", "rank_pattern", map[string]int{"k_proj": 0}, `rank_pattern: the rank of "k_proj" is 0`},
		{"a pattern RE2 cannot read", "alpha_pattern", map[string]int{"(?=q)q_proj": 4}, `alpha_pattern: key "(?=q)q_proj"`},
		{"an alpha that is not a number", "alpha_pattern", map[string]string{"q_proj": "4"}, `alpha_pattern: the value of "q_proj" is not a number`},
		{"not an object", "alpha_pattern", []int{4}, "alpha_pattern: not an object"},
	} {
		config := map[string]any{"r": 2, "lora_alpha": 8, "rank_pattern": map[string]int{"k_proj": 4}}
		config[tc.field] = tc.value
		_, err := lora.Open(writePEFT(t, config, ranks), tinyLlama)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

// peftPatterns is what adapter_config.json says of ranks and alphas.
type peftPatterns struct {
	R      int                `json:"r"`
	Alpha  float32            `json:"lora_alpha"`
	Ranks  map[string]int     `json:"rank_pattern"`
	Alphas map[string]float32 `json:"alpha_pattern"`
}

// kProj is k_proj's key in patterns that WritePEFT writes: the module's
// full name, its dots escaped.
const kProj = `model\.layers\.0\.self_attn\.k_proj`

// TestWriteScales: an adapter whose targets differ in rank and scale
// (what a GGUF of mixed ranks or a PEFT folder with patterns holds) is
// written by WritePEFT with rank_pattern and alpha_pattern entries and
// reads back target for target; WriteGGUF, whose file has one alpha,
// writes it when one alpha gives every scale and refuses it, naming two
// targets, when none does.
func TestWriteScales(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	adapter := func(rs bool, scale func(m, rank int) float32) *lora.Adapter {
		a := &lora.Adapter{Alpha: 8, RSLoRA: rs, Targets: map[string]*lora.Target{}}
		for i, m := range peftModules {
			rank := []int{2, 4, 2, 3}[i]
			a.Targets[m.tensor] = randomTarget(rng, m.tensor, rank, m.in, m.out, scale(i, rank))
		}
		return a
	}
	for _, tc := range []struct {
		name   string
		a      *lora.Adapter
		gguf   bool // one alpha gives every scale
		config peftPatterns
	}{
		{"one alpha over mixed ranks", adapter(false, func(_, r int) float32 { return 8 / float32(r) }), true,
			peftPatterns{R: 2, Alpha: 8, Ranks: map[string]int{"lm_head": 3, kProj: 4}, Alphas: map[string]float32{}}},
		{"rsLoRA over mixed ranks", adapter(true, func(_, r int) float32 { return 8 / float32(math.Sqrt(float64(r))) }), false,
			peftPatterns{R: 2, Alpha: 8, Ranks: map[string]int{"lm_head": 3, kProj: 4}, Alphas: map[string]float32{}}},
		{"a scale of its own", adapter(false, func(m, r int) float32 { return []float32{4, 2, 4, 1}[m] }), false,
			peftPatterns{R: 2, Alpha: 8, Ranks: map[string]int{"lm_head": 3, kProj: 4}, Alphas: map[string]float32{"lm_head": 3}}},
		{"scale 1 at every rank (a GGUF without alpha)", adapter(false, func(int, int) float32 { return 1 }), true,
			peftPatterns{R: 2, Alpha: 2, Ranks: map[string]int{"lm_head": 3, kProj: 4}, Alphas: map[string]float32{"lm_head": 3, kProj: 4}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			same := func(back *lora.Adapter) {
				t.Helper()
				for name, want := range tc.a.Targets {
					got := back.Targets[name]
					if got == nil || got.Rank != want.Rank || math.Abs(float64(got.Scale-want.Scale)) > 1e-6*float64(want.Scale) ||
						!slices.Equal(got.A, want.A) || !slices.Equal(got.B, want.B) {
						t.Errorf("%s read back as rank %d scale %g, want %d and %g", name, got.Rank, got.Scale, want.Rank, want.Scale)
					}
				}
			}
			dir := filepath.Join(t.TempDir(), "peft")
			if err := lora.WritePEFT(dir, tc.a, tinyLlama); err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(filepath.Join(dir, lora.PEFTConfig))
			if err != nil {
				t.Fatal(err)
			}
			var got peftPatterns
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.config) {
				t.Errorf("adapter_config.json holds %+v, want %+v", got, tc.config)
			}
			back, err := lora.Open(dir, tinyLlama)
			if err != nil {
				t.Fatal(err)
			}
			same(back)

			path := filepath.Join(t.TempDir(), "a.gguf")
			err = lora.WriteGGUF(path, tc.a, "llama")
			if !tc.gguf {
				if err == nil || !strings.Contains(err.Error(), "cannot both be written") {
					t.Errorf("WriteGGUF: %v, want a refusal", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			back, err = lora.Open(path, tinyLlama)
			if err != nil {
				t.Fatal(err)
			}
			same(back)
		})
	}
}

// TestEmbeddingAdapter: a token-embedding target survives both writers
// (GGUF's lora_a transposed, PEFT's lora_embedding_A/B), and DeltaT, which
// merges it into a table of a row per token, adds to token t's row the
// column t of what Delta adds to the [Dim, Vocab] product.
func TestEmbeddingAdapter(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	c := tinyLlama
	q := models.LayerTensor(0, models.AttnQ)
	a := &lora.Adapter{Alpha: 6, Targets: map[string]*lora.Target{
		models.TokenEmbedding: randomTarget(rng, models.TokenEmbedding, 3, c.Vocab, c.Dim, 2),
		q:                     randomTarget(rng, q, 3, 8, 8, 2),
	}}
	dir := t.TempDir()
	gg, peft := filepath.Join(dir, "a.gguf"), filepath.Join(dir, "peft")
	if err := lora.WriteGGUF(gg, a, c.Arch); err != nil {
		t.Fatal(err)
	}
	if err := lora.WritePEFT(peft, a, c); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{gg, peft} {
		back, err := lora.Open(path, c)
		if err != nil {
			t.Fatal(err)
		}
		for name, want := range a.Targets {
			got := back.Targets[name]
			if got == nil || got.Rank != want.Rank || got.In != want.In || got.Out != want.Out || got.Scale != want.Scale ||
				!slices.Equal(got.A, want.A) || !slices.Equal(got.B, want.B) {
				t.Errorf("%s: %s read back as %+v", path, name, got)
			}
		}
	}

	e := a.Targets[models.TokenEmbedding]
	product := make([]float32, c.Dim*c.Vocab) // [Dim, Vocab]
	e.Delta(product, 0.5)
	table := make([]float32, c.Vocab*c.Dim) // [Vocab, Dim]
	e.DeltaT(table, 0.5)
	for tok := range c.Vocab {
		for d := range c.Dim {
			if got, want := table[tok*c.Dim+d], product[d*c.Vocab+tok]; math.Abs(float64(got-want)) > 1e-6 {
				t.Fatalf("token %d, column %d: DeltaT %g, Delta %g", tok, d, got, want)
			}
		}
	}
}
