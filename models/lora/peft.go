package lora

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/safetensors"
)

// peftConfig is what Tessera reads of adapter_config.json.
type peftConfig struct {
	PeftType      string          `json:"peft_type"`
	R             int             `json:"r"`
	Alpha         *float32        `json:"lora_alpha"`
	RSLoRA        bool            `json:"use_rslora"`
	TargetModules json.RawMessage `json:"target_modules"`
	RankPattern   json.RawMessage `json:"rank_pattern"`
	AlphaPattern  json.RawMessage `json:"alpha_pattern"`
	UseDoRA       bool            `json:"use_dora"`
}

// openPEFT reads a PEFT folder. Tensor names are the Hugging Face model's
// with PEFT's prefix (base_model.model.) and lora_A/lora_B. A module's
// rank and alpha are r and lora_alpha unless a key of rank_pattern or
// alpha_pattern matches its name (patterns); its scale is alpha/rank, or
// alpha/sqrt(rank) with use_rslora. For a base whose q and k rows are in
// GGUF's pairs layout (a converted Llama), the rows of q's and k's B are
// reordered as llama.cpp's converter reorders the base weights.
func openPEFT(dir string, c models.Config) (*Adapter, error) {
	data, err := os.ReadFile(filepath.Join(dir, PEFTConfig))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("a PEFT adapter folder needs %s", PEFTConfig)
	}
	if err != nil {
		return nil, err
	}
	return readPEFT(data, func() (*safetensors.File, error) { return safetensors.Open(filepath.Join(dir, PEFTWeights)) }, c)
}

// readPEFT reads a PEFT adapter from its adapter_config.json (data) and
// its weights, which weights opens once the configuration is checked.
func readPEFT(data []byte, weights func() (*safetensors.File, error), c models.Config) (*Adapter, error) {
	var pc peftConfig
	if err := json.Unmarshal(data, &pc); err != nil {
		// A syntax error's message quotes the byte at fault: say where it
		// is instead, so that a file which is not JSON at all is not
		// echoed to whoever named it.
		if se := (*json.SyntaxError)(nil); errors.As(err, &se) {
			return nil, fmt.Errorf("%s is not valid JSON (at byte %d)", PEFTConfig, se.Offset)
		}
		return nil, fmt.Errorf("%s: %w", PEFTConfig, err)
	}
	switch {
	case pc.PeftType != "" && pc.PeftType != "LORA":
		return nil, fmt.Errorf("%s: peft_type %q (want LORA)", PEFTConfig, pc.PeftType)
	case pc.UseDoRA:
		return nil, fmt.Errorf("%s: DoRA adapters are not supported", PEFTConfig)
	case pc.R <= 0:
		return nil, fmt.Errorf("%s: r %d", PEFTConfig, pc.R)
	}
	ranks, err := readPatterns("rank_pattern", pc.RankPattern)
	if err != nil {
		return nil, err
	}
	alphas, err := readPatterns("alpha_pattern", pc.AlphaPattern)
	if err != nil {
		return nil, err
	}
	f, err := weights()
	if err != nil {
		return nil, err
	}
	defer f.Close()
	a := &Adapter{Format: "peft", Alpha: 8, RSLoRA: pc.RSLoRA, Targets: map[string]*Target{}} // 8: PEFT's default lora_alpha
	if pc.Alpha != nil {
		a.Alpha = *pc.Alpha
	}
	read := func(t *safetensors.Tensor) ([]float32, error) {
		typ, ok := t.DType.Type()
		if !ok || (typ != dtype.F32 && typ != dtype.F16 && typ != dtype.BF16) {
			return nil, fmt.Errorf("tensor %s has dtype %s (supported: F32, F16, BF16)", t.Name, t.DType)
		}
		raw, err := t.Bytes()
		if err != nil {
			return nil, err
		}
		out := make([]float32, t.Elements())
		return out, dtype.Dequantize(typ, raw, out)
	}
	type pair struct {
		a, b   *safetensors.Tensor
		module string // PEFT's name of the adapted module, as patterns match it
	}
	pairs := map[string]*pair{}
	for _, t := range f.Tensors {
		// PEFT's adapter name, where a state dict kept it.
		name := strings.TrimSuffix(strings.Replace(t.Name, ".default.", ".", 1), ".default")
		switch {
		case strings.HasSuffix(name, ".base_layer.weight") || strings.HasSuffix(name, "norm.weight"):
			// Base weights and the norm vectors mergekit-extract-lora adds:
			// llama.cpp's converter drops the first and its loader the
			// second.
			continue
		}
		base, which, ok := peftName(name)
		if !ok {
			return nil, fmt.Errorf("tensor %s is not a LoRA tensor of a projection, the token embeddings or the head", t.Name)
		}
		p := pairs[base]
		if p == nil {
			p = &pair{module: peftModuleOf(name)}
			pairs[base] = p
		}
		if which == "A" {
			p.a = t
		} else {
			p.b = t
		}
	}
	// In order, so that of several faults the same one is reported.
	for _, name := range slices.Sorted(maps.Keys(pairs)) {
		p := pairs[name]
		if p.a == nil || p.b == nil {
			h, _ := models.GGUFToHFName(c.Arch, name)
			return nil, fmt.Errorf("tensor %s (%s) has only one of lora_A and lora_B", h, name)
		}
		if len(p.a.Shape) != 2 || len(p.b.Shape) != 2 || p.a.Shape[0] != p.b.Shape[1] {
			return nil, fmt.Errorf("tensor %s: lora_A of shape %v and lora_B of shape %v", name, p.a.Shape, p.b.Shape)
		}
		A, err := read(p.a)
		if err != nil {
			return nil, err
		}
		B, err := read(p.b)
		if err != nil {
			return nil, err
		}
		r, alpha := p.a.Shape[0], a.Alpha
		want := pc.R
		if v, ok := match(ranks, p.module); ok {
			want = int(v)
		}
		if r != want {
			return nil, fmt.Errorf("tensor %s: rank %d, but %s gives %s rank %d", p.a.Name, r, PEFTConfig, p.module, want)
		}
		if v, ok := match(alphas, p.module); ok {
			alpha = float32(v)
		}
		t := &Target{Name: name, Rank: r, In: p.a.Shape[1], Out: p.b.Shape[0], A: A, B: B, Scale: peftScale(alpha, a.RSLoRA, r)}
		if heads := qkHeads(c, name); heads > 0 && c.Rope == models.RopePairs && len(B) == heads*c.HeadDim*r {
			t.B = models.PairsFromHalves(B, heads, c.HeadDim)
		}
		a.Targets[name] = t
	}
	return a, nil
}

// peftScale is PEFT's scaling of a module of rank r: lora_alpha/r, or
// lora_alpha/sqrt(r) with use_rslora (no special case for alpha 0, unlike
// a GGUF's).
func peftScale(alpha float32, rs bool, r int) float32 {
	if rs {
		return alpha / float32(math.Sqrt(float64(r)))
	}
	return alpha / float32(r)
}

// pattern is a key of rank_pattern or alpha_pattern, compiled as PEFT
// matches it (get_pattern_key: re.match(rf"(.*\.)?({key})$", module)),
// and its value.
type pattern struct {
	re  *regexp.Regexp
	val float64
}

// readPatterns reads the object field of adapter_config.json in the order
// of its keys, since the first key that matches a module wins. A rank must
// be a positive integer, an alpha a number.
func readPatterns(field string, raw json.RawMessage) ([]pattern, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	bad := func(err error) ([]pattern, error) { return nil, fmt.Errorf("%s: %s: %w", PEFTConfig, field, err) }
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return bad(errors.New("not an object"))
	}
	var ps []pattern
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return bad(err)
		}
		key := tok.(string) // an object's keys are strings
		var v float64
		if err := dec.Decode(&v); err != nil {
			return bad(fmt.Errorf("the value of %q is not a number", key))
		}
		if field == "rank_pattern" && (v < 1 || v != math.Trunc(v)) {
			return bad(fmt.Errorf("the rank of %q is %v", key, v))
		}
		// Python's re and Go's RE2 agree on the patterns that name
		// modules; one RE2 cannot read (a lookahead) is refused here.
		re, err := regexp.Compile(`^(?:.*\.)?(?:` + key + `)$`)
		if err != nil {
			return bad(fmt.Errorf("key %q: %w", key, err))
		}
		ps = append(ps, pattern{re, v})
	}
	return ps, nil
}

// match is the value of the first of ps that matches module.
func match(ps []pattern, module string) (float64, bool) {
	for _, p := range ps {
		if p.re.MatchString(module) {
			return p.val, true
		}
	}
	return 0, false
}

// qkHeads is the head count of a q or k projection name, else 0.
func qkHeads(c models.Config, name string) int {
	switch {
	case strings.HasSuffix(name, "."+models.AttnQ+".weight"):
		return c.Heads
	case strings.HasSuffix(name, "."+models.AttnK+".weight"):
		return c.KVHeads
	}
	return 0
}

// peftName maps a PEFT tensor name to its base tensor's GGUF name and "A"
// or "B".
func peftName(name string) (base, which string, ok bool) {
	rest, ok := strings.CutPrefix(name, "base_model.model.")
	if !ok {
		return "", "", false
	}
	switch {
	case strings.HasSuffix(rest, ".lora_A.weight"):
		rest, which = strings.TrimSuffix(rest, ".lora_A.weight"), "A"
	case strings.HasSuffix(rest, ".lora_B.weight"):
		rest, which = strings.TrimSuffix(rest, ".lora_B.weight"), "B"
	case rest == embedModule+".lora_embedding_A": // an nn.Embedding's: A [r, vocab], B [dim, r]
		return models.TokenEmbedding, "A", true
	case rest == embedModule+".lora_embedding_B":
		return models.TokenEmbedding, "B", true
	default:
		return "", "", false
	}
	if rest == "lm_head" {
		return models.Output, which, true
	}
	rest, ok = strings.CutPrefix(rest, "model.layers.")
	if !ok {
		return "", "", false
	}
	num, kind, ok := strings.Cut(rest, ".")
	l, err := strconv.Atoi(num)
	if !ok || err != nil || l < 0 {
		return "", "", false
	}
	for _, k := range Kinds {
		if k.PEFT == kind {
			return models.LayerTensor(l, k.GGUF), which, true
		}
	}
	return "", "", false
}

// peftModule is PEFT's name of the module of base tensor base (GGUF's
// name): "model.layers.3.self_attn.q_proj", "lm_head".
func peftModule(base string) string {
	switch base {
	case models.Output:
		return "lm_head"
	case models.TokenEmbedding:
		return embedModule
	}
	var l int
	var kind string
	fmt.Sscanf(base, "blk.%d.%s", &l, &kind)
	kind = strings.TrimSuffix(kind, ".weight")
	for _, k := range Kinds {
		if k.GGUF == kind {
			kind = k.PEFT
		}
	}
	return fmt.Sprintf("model.layers.%d.%s", l, kind)
}

// peftModuleOf is the module of a PEFT tensor name that peftName accepts.
func peftModuleOf(name string) string {
	name = strings.TrimPrefix(name, "base_model.model.")
	return name[:strings.LastIndex(name, ".lora_")]
}

// peftTensorName is the inverse of peftName.
func peftTensorName(base, which string) string {
	if base == models.TokenEmbedding {
		return "base_model.model." + embedModule + ".lora_embedding_" + which
	}
	return "base_model.model." + peftModule(base) + ".lora_" + which + ".weight"
}

// embedModule is the Hugging Face Llama's token embeddings (an
// nn.Embedding, whose PEFT tensors are lora_embedding_A and _B).
const embedModule = "model.embed_tokens"

// WritePEFT writes a as a PEFT folder for a base of config c (whose q and
// k rows, in the pairs layout, go back to Hugging Face's halves). r is the
// rank most targets have and lora_alpha the alpha that gives the first of
// them its scale (a's own alpha where it does); a target of another rank
// or scale gets an entry in rank_pattern or alpha_pattern, keyed by its
// module's full name, as PEFT writes one for a module the user named.
func WritePEFT(dir string, a *Adapter, c models.Config) error {
	typ, err := a.writeType()
	if err != nil {
		return err
	}
	st := map[dtype.Type]safetensors.DType{dtype.F32: safetensors.F32, dtype.F16: safetensors.F16, dtype.BF16: safetensors.BF16}[typ]
	// alphaOf is the lora_alpha that gives t its scale.
	alphaOf := func(t *Target) float32 {
		if a.RSLoRA {
			return t.Scale * float32(math.Sqrt(float64(t.Rank)))
		}
		return t.Scale * float32(t.Rank)
	}
	r, alpha := a.commonRank(), a.Alpha
	for _, name := range a.Names() {
		if t := a.Targets[name]; t.Rank == r {
			if !near(alphaOf(t), alpha) {
				alpha = alphaOf(t)
			}
			break
		}
	}
	var mods []string
	seen := map[string]bool{}
	ranks, alphas := map[string]int{}, map[string]float32{}
	var ts []safetensors.WriteTensor
	for _, name := range a.Names() {
		t := a.Targets[name]
		module := peftModule(name)
		if t.Rank != r {
			ranks[regexp.QuoteMeta(module)] = t.Rank
		}
		if at := alphaOf(t); !near(at, alpha) {
			alphas[regexp.QuoteMeta(module)] = at
		}
		B := t.B
		if heads := qkHeads(c, name); heads > 0 && c.Rope == models.RopePairs {
			B = models.HalvesFromPairs(B, heads, c.HeadDim)
		}
		da, _ := dtype.Quantize(typ, t.A)
		db, _ := dtype.Quantize(typ, B)
		ts = append(ts,
			safetensors.WriteTensor{Name: peftTensorName(name, "A"), DType: st, Shape: []int{t.Rank, t.In}, Data: da},
			safetensors.WriteTensor{Name: peftTensorName(name, "B"), DType: st, Shape: []int{t.Out, t.Rank}, Data: db})
		mod := module[strings.LastIndex(module, ".")+1:] // target_modules: q_proj, lm_head
		if !seen[mod] {
			seen[mod] = true
			mods = append(mods, mod)
		}
	}
	cfg, _ := json.MarshalIndent(map[string]any{
		"peft_type": "LORA", "r": r, "lora_alpha": alpha, "use_rslora": a.RSLoRA,
		"rank_pattern": ranks, "alpha_pattern": alphas,
		"target_modules": mods, "lora_dropout": 0.0, "bias": "none", "task_type": "CAUSAL_LM",
	}, "", "  ")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, PEFTConfig), cfg, 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, PEFTWeights))
	if err != nil {
		return err
	}
	if err := safetensors.Write(f, nil, ts); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// commonRank is the rank most of a's targets have, the larger of a tie.
func (a *Adapter) commonRank() int {
	count := map[int]int{}
	r := 0
	for _, t := range a.Targets {
		count[t.Rank]++
		if n := count[t.Rank]; n > count[r] || n == count[r] && t.Rank > r {
			r = t.Rank
		}
	}
	return r
}

// near reports whether two alphas (or scales) are one up to the rounding
// of the float32 arithmetic that went between them.
func near(x, y float32) bool {
	return math.Abs(float64(x-y)) <= 1e-6*math.Max(math.Abs(float64(x)), math.Abs(float64(y)))
}
