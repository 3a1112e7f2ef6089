package lora

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/gguf"
	"github.com/tessera-llm/tessera/models/safetensors"
)

// PEFT's file names in an adapter folder.
const (
	PEFTConfig  = "adapter_config.json"
	PEFTWeights = "adapter_model.safetensors"
)

// Open reads the adapter at path (a GGUF LoRA file or a PEFT folder) for a
// base model of config c, and checks it against c's shapes.
func Open(path string, c models.Config) (*Adapter, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("open adapter: %w", err)
	}
	var a *Adapter
	if st.IsDir() {
		a, err = openPEFT(path, c)
	} else {
		a, err = openGGUF(path, c)
	}
	if err != nil {
		if errors.Is(err, ErrBadAdapter) {
			return nil, err
		}
		return nil, fmt.Errorf("%w %s: %w", ErrBadAdapter, path, err)
	}
	a.Path = path
	if err := a.Check(c); err != nil {
		return nil, err
	}
	return a, nil
}

// openGGUF reads llama.cpp's LoRA GGUF as llama.cpp's loader does
// (llama-adapter.cpp): general.type = adapter, general.architecture the
// base's, adapter.type = lora, adapter.lora.alpha (absent: scale 1), and
// for each target W the tensors "W.lora_a" (ggml dims [in, r]: r rows of
// in) and "W.lora_b" (dims [r, out]: out rows of r). The scale of a target
// is alpha over its own rank (lora_b's first dimension). Norm vectors
// (*_norm.weight, which mergekit-extract-lora adds) are skipped, as
// llama.cpp skips them. Refused with a reason: activated LoRA
// (adapter.alora.invocation_tokens, applied only after an invocation
// sequence) and token-embedding adapters (token_embd.weight, whose
// lora_a llama.cpp's converter transposes), which Tessera does not apply.
func openGGUF(path string, c models.Config) (*Adapter, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if t, _ := f.String("general.type"); t != "adapter" {
		return nil, fmt.Errorf("general.type is %q, want \"adapter\" (a LoRA GGUF, not a model)", t)
	}
	if t, _ := f.String("adapter.type"); t != "lora" {
		return nil, fmt.Errorf("not a LoRA adapter (adapter.type %q, want \"lora\")", t)
	}
	if arch, _ := f.String("general.architecture"); arch != GGUFArch(c.Arch) {
		return nil, fmt.Errorf("the adapter is for a %q model, the base is %q", arch, GGUFArch(c.Arch))
	}
	if _, ok := f.Lookup("adapter.alora.invocation_tokens"); ok {
		return nil, errors.New("activated LoRA (adapter.alora.invocation_tokens) is not supported")
	}
	a := &Adapter{Format: "gguf", Targets: map[string]*Target{}}
	if v, ok := f.Float("adapter.lora.alpha"); ok {
		a.Alpha = float32(v)
	}
	pairs := map[string][2]*gguf.TensorInfo{}
	var names []string
	for i := range f.Tensors {
		t := &f.Tensors[i]
		base, which := "", 0
		switch {
		case strings.HasSuffix(t.Name, ".lora_a"):
			base = strings.TrimSuffix(t.Name, ".lora_a")
		case strings.HasSuffix(t.Name, ".lora_b"):
			base, which = strings.TrimSuffix(t.Name, ".lora_b"), 1
		case strings.HasSuffix(t.Name, "_norm.weight"):
			continue
		default:
			return nil, fmt.Errorf("tensor %s is neither a lora_a nor a lora_b", t.Name)
		}
		p, ok := pairs[base]
		if !ok {
			names = append(names, base)
		}
		p[which] = t
		pairs[base] = p
	}
	for _, name := range names {
		p := pairs[name]
		if p[0] == nil || p[1] == nil {
			return nil, fmt.Errorf("tensor %s has only one of lora_a and lora_b", name)
		}
		if name == models.TokenEmbedding {
			return nil, fmt.Errorf("tensor %s: token-embedding adapters are not supported", name)
		}
		if len(p[0].Dims) != 2 || len(p[1].Dims) != 2 {
			return nil, fmt.Errorf("tensor %s: lora_a dims %v and lora_b dims %v are not matrices", name, p[0].Dims, p[1].Dims)
		}
		in, r, rb, out := int(p[0].Dims[0]), int(p[0].Dims[1]), int(p[1].Dims[0]), int(p[1].Dims[1])
		if r != rb {
			return nil, fmt.Errorf("tensor %s: lora_a has rank %d, lora_b %d (lora_a must be transposed: ggml dims [in, rank])", name, r, rb)
		}
		A, err := f.ReadFloat32(p[0])
		if err != nil {
			return nil, err
		}
		B, err := f.ReadFloat32(p[1])
		if err != nil {
			return nil, err
		}
		a.Targets[name] = &Target{Name: name, Rank: r, In: in, Out: out, A: A, B: B, Scale: scaleFor(a.Alpha, false, rb)}
	}
	return a, nil
}

// GGUFArch is the general.architecture llama.cpp gives a model of
// architecture arch: its converter writes Mistral as llama.
func GGUFArch(arch string) string {
	if arch == "mistral" {
		return "llama"
	}
	return arch
}

// peftConfig is what Tessera reads of adapter_config.json.
type peftConfig struct {
	PeftType      string          `json:"peft_type"`
	R             int             `json:"r"`
	Alpha         float32         `json:"lora_alpha"`
	RSLoRA        bool            `json:"use_rslora"`
	TargetModules json.RawMessage `json:"target_modules"`
	RankPattern   map[string]int  `json:"rank_pattern"`
	AlphaPattern  map[string]any  `json:"alpha_pattern"`
	UseDoRA       bool            `json:"use_dora"`
}

// openPEFT reads a PEFT folder. Tensor names are the Hugging Face model's
// with PEFT's prefix (base_model.model.) and lora_A/lora_B; the scale is
// lora_alpha/r (or /sqrt(r) with use_rslora) for every target. For a base
// whose q and k rows are in GGUF's pairs layout (a converted Llama), the
// rows of q's and k's B are reordered as llama.cpp's converter reorders the
// base weights.
func openPEFT(dir string, c models.Config) (*Adapter, error) {
	data, err := os.ReadFile(filepath.Join(dir, PEFTConfig))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("a PEFT adapter folder needs %s", PEFTConfig)
	}
	if err != nil {
		return nil, err
	}
	var pc peftConfig
	if err := json.Unmarshal(data, &pc); err != nil {
		return nil, fmt.Errorf("%s: %w", PEFTConfig, err)
	}
	switch {
	case pc.PeftType != "" && pc.PeftType != "LORA":
		return nil, fmt.Errorf("%s: peft_type %q (want LORA)", PEFTConfig, pc.PeftType)
	case pc.UseDoRA:
		return nil, fmt.Errorf("%s: DoRA adapters are not supported", PEFTConfig)
	case len(pc.RankPattern) > 0 || len(pc.AlphaPattern) > 0:
		return nil, fmt.Errorf("%s: rank_pattern and alpha_pattern are not supported", PEFTConfig)
	case pc.R <= 0:
		return nil, fmt.Errorf("%s: r %d", PEFTConfig, pc.R)
	}
	f, err := safetensors.Open(filepath.Join(dir, PEFTWeights))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	a := &Adapter{Format: "peft", Alpha: pc.Alpha, RSLoRA: pc.RSLoRA, Targets: map[string]*Target{}}
	if a.Alpha == 0 {
		a.Alpha = 8 // PEFT's default lora_alpha
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
	type pair struct{ a, b *safetensors.Tensor }
	pairs := map[string]*pair{}
	for _, t := range f.Tensors {
		name := strings.Replace(t.Name, ".default.", ".", 1)
		switch {
		case strings.HasSuffix(name, ".base_layer.weight") || strings.HasSuffix(name, "norm.weight"):
			// Base weights and the norm vectors mergekit-extract-lora adds:
			// llama.cpp's converter drops the first and its loader the
			// second.
			continue
		case strings.Contains(name, ".lora_embedding_"):
			return nil, fmt.Errorf("tensor %s: token-embedding adapters are not supported", t.Name)
		}
		base, which, ok := peftName(name)
		if !ok {
			return nil, fmt.Errorf("tensor %s is not a LoRA tensor of a projection or the head", t.Name)
		}
		p := pairs[base]
		if p == nil {
			p = &pair{}
			pairs[base] = p
		}
		if which == "A" {
			p.a = t
		} else {
			p.b = t
		}
	}
	for name, p := range pairs {
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
		r := p.a.Shape[0]
		t := &Target{Name: name, Rank: r, In: p.a.Shape[1], Out: p.b.Shape[0], A: A, B: B, Scale: scaleFor(a.Alpha, a.RSLoRA, r)}
		if heads := qkHeads(c, name); heads > 0 && c.Rope == models.RopePairs && len(B) == heads*c.HeadDim*r {
			t.B = PairsFromHalves(B, heads, c.HeadDim)
		}
		a.Targets[name] = t
	}
	return a, nil
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

// peftTensorName is the inverse of peftName.
func peftTensorName(base, which string) string {
	if base == models.Output {
		return "base_model.model.lm_head.lora_" + which + ".weight"
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
	return fmt.Sprintf("base_model.model.model.layers.%d.%s.lora_%s.weight", l, kind, which)
}

// PairsFromHalves reorders the rows of a q or k projection (heads of
// headDim rows) from Hugging Face's halves layout to GGUF's pairs: row
// h·d + 2j + s of the result is row h·d + s·d/2 + j of vals.
func PairsFromHalves(vals []float32, heads, headDim int) []float32 {
	return permuteRows(vals, heads, headDim, false)
}

// HalvesFromPairs is the inverse of PairsFromHalves.
func HalvesFromPairs(vals []float32, heads, headDim int) []float32 {
	return permuteRows(vals, heads, headDim, true)
}

func permuteRows(vals []float32, heads, headDim int, toHalves bool) []float32 {
	cols := len(vals) / (heads * headDim)
	out := make([]float32, len(vals))
	for h := range heads {
		for j := range headDim / 2 {
			for s := range 2 {
				pairs := (h*headDim + 2*j + s) * cols
				halves := (h*headDim + s*headDim/2 + j) * cols
				src, dst := halves, pairs
				if toHalves {
					src, dst = pairs, halves
				}
				copy(out[dst:dst+cols], vals[src:src+cols])
			}
		}
	}
	return out
}

// writeType is a's Type, checked: the writers write F32, F16 or BF16.
func (a *Adapter) writeType() (dtype.Type, error) {
	switch a.Type {
	case dtype.F32, dtype.F16, dtype.BF16:
		return a.Type, nil
	}
	return 0, fmt.Errorf("lora: cannot write an adapter's tensors as %s (want F32, F16 or BF16)", a.Type)
}

// WriteGGUF writes a in llama.cpp's LoRA GGUF format for a base of
// architecture arch. Targets keep a common rank and scale alpha/r there, so
// a's alpha is written as is; an rsLoRA adapter is written with the alpha
// that gives the same scale.
func WriteGGUF(path string, a *Adapter, arch string) error {
	alpha := a.Alpha
	if a.RSLoRA {
		r := a.MaxRank()
		alpha = scaleFor(a.Alpha, true, r) * float32(r)
	}
	kv := []gguf.KV{
		{Key: "general.architecture", Value: gguf.StringValue(GGUFArch(arch))},
		{Key: "general.type", Value: gguf.StringValue("adapter")},
		{Key: "adapter.type", Value: gguf.StringValue("lora")},
		{Key: "adapter.lora.alpha", Value: gguf.Float32Value(alpha)},
	}
	typ, err := a.writeType()
	if err != nil {
		return err
	}
	var ts []gguf.WriteTensor
	for _, name := range a.Names() {
		t := a.Targets[name]
		da, _ := dtype.Quantize(typ, t.A)
		db, _ := dtype.Quantize(typ, t.B)
		ts = append(ts,
			gguf.WriteTensor{Name: name + ".lora_a", Dims: []uint64{uint64(t.In), uint64(t.Rank)}, Type: typ, Data: da},
			gguf.WriteTensor{Name: name + ".lora_b", Dims: []uint64{uint64(t.Rank), uint64(t.Out)}, Type: typ, Data: db})
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := gguf.Write(f, kv, ts); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// WritePEFT writes a as a PEFT folder for a base of config c (whose q and
// k rows, in the pairs layout, go back to Hugging Face's halves). Every
// target must share one rank.
func WritePEFT(dir string, a *Adapter, c models.Config) error {
	typ, err := a.writeType()
	if err != nil {
		return err
	}
	st := map[dtype.Type]safetensors.DType{dtype.F32: safetensors.F32, dtype.F16: safetensors.F16, dtype.BF16: safetensors.BF16}[typ]
	r := a.MaxRank()
	var mods []string
	seen := map[string]bool{}
	var ts []safetensors.WriteTensor
	for _, name := range a.Names() {
		t := a.Targets[name]
		if t.Rank != r {
			return fmt.Errorf("lora: PEFT needs one rank; %s has %d, others %d", name, t.Rank, r)
		}
		B := t.B
		if heads := qkHeads(c, name); heads > 0 && c.Rope == models.RopePairs {
			B = HalvesFromPairs(B, heads, c.HeadDim)
		}
		da, _ := dtype.Quantize(typ, t.A)
		db, _ := dtype.Quantize(typ, B)
		ts = append(ts,
			safetensors.WriteTensor{Name: peftTensorName(name, "A"), DType: st, Shape: []int{t.Rank, t.In}, Data: da},
			safetensors.WriteTensor{Name: peftTensorName(name, "B"), DType: st, Shape: []int{t.Out, t.Rank}, Data: db})
		mod := "lm_head"
		if name != models.Output {
			n := peftTensorName(name, "A")
			n = strings.TrimSuffix(n, ".lora_A.weight")
			mod = n[strings.LastIndex(n, ".")+1:]
		}
		if !seen[mod] {
			seen[mod] = true
			mods = append(mods, mod)
		}
	}
	cfg, _ := json.MarshalIndent(map[string]any{
		"peft_type": "LORA", "r": r, "lora_alpha": a.Alpha, "use_rslora": a.RSLoRA,
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
