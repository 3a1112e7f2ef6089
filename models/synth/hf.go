package synth

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/safetensors"
)

// HFOptions adjust WriteHF.
type HFOptions struct {
	// Shards splits the weights over that many files listed by a
	// model.safetensors.index.json, as large checkpoints are; 0 or 1
	// writes one model.safetensors.
	Shards int
}

// hfArchitectures names each family's class in config.json.
var hfArchitectures = map[string]string{
	"llama":   "LlamaForCausalLM",
	"mistral": "MistralForCausalLM",
	"qwen2":   "Qwen2ForCausalLM",
	"qwen3":   "Qwen3ForCausalLM",
	"gemma2":  "Gemma2ForCausalLM",
	"gemma3":  "Gemma3ForCausalLM",
	"smollm3": "SmolLM3ForCausalLM",
	"qwen35":  "Qwen3_5ForConditionalGeneration", // hf_qwen35.go
	"gemma4":  "Gemma4ForConditionalGeneration",  // gemma4.go
}

// WriteHF writes shape s as a Hugging Face folder in dir (created if
// needed): config.json, the weights as safetensors under Hugging Face's
// names, tokenizer.json and tokenizer_config.json. Weight matrices have
// type t (F32, F16 or BF16); norms and biases stay F32, as in Write.
//
// The weights are those Write draws for the same seed, so the folder and
// the GGUF describe the same model. GGUF's Llama files rotate adjacent
// pairs (RopePairs) because llama.cpp's converter permutes the q and k rows
// of each head of a Hugging Face checkpoint: w.reshape(heads, 2, d/2, in)
// .swapaxes(1, 2), which puts row h·d + s·d/2 + j of the checkpoint at row
// h·d + 2j + s. WriteHF applies the inverse to the GGUF rows of q and k
// (weights, biases and norms alike), so that the folder, read with
// RopeHalves like every Hugging Face checkpoint, rotates the same pairs of
// values. Attention scores are dot products over a head, which the order
// of its rows does not change: the two files give the same logits, up to
// the rounding of sums taken in another order. Families whose GGUF already
// uses halves (Qwen) are written unpermuted, bit for bit the same.
func WriteHF(dir string, s Shape, t dtype.Type, seed uint64, opts HFOptions) error {
	return WriteHFContext(context.Background(), dir, s, t, seed, opts)
}

// WriteHFContext is WriteHF that stops between tensors once ctx is done
// (Ctrl-C on a large shape, drawn for minutes), returning ctx's error;
// the caller removes what it wrote.
func WriteHFContext(ctx context.Context, dir string, s Shape, t dtype.Type, seed uint64, opts HFOptions) error {
	dt, ok := safetensors.DTypeOf(t)
	if !ok || (t != dtype.F32 && t != dtype.F16 && t != dtype.BF16) {
		return fmt.Errorf("synth: weight type %s (want F32, F16 or BF16)", t)
	}
	c := s.Config
	arch, ok := hfArchitectures[c.Arch]
	if c.MoE.On() && c.Gemma4 == nil { // Gemma 4's experts are in its own class
		arch, ok = hfMoEArchitectures[c.Arch][0], c.Arch != "mistral"
	}
	if !ok {
		return fmt.Errorf("synth: %s: no Hugging Face architecture for %q", s.Name, c.Arch)
	}
	permute := c.Rope == models.RopePairs
	gemma := strings.HasPrefix(c.Arch, "gemma")
	if permute && c.RopeDim != c.HeadDim {
		return fmt.Errorf("synth: %s: partial RoPE (%d of %d dimensions) has no Hugging Face layout", s.Name, c.RopeDim, c.HeadDim)
	}
	config, err := hfConfigJSON(s, arch, t)
	if err != nil {
		return err
	}
	var tensors []safetensors.WriteTensor
	pending := map[int][]float32{} // Granite's gate experts, until their up
	put := func(t safetensors.WriteTensor) { tensors = append(tensors, t) }
	tensor := func(name string, shape []int, vals []float32) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if c.Linear.On() {
			name, shape, vals = qwen35HFTensor(c, name, shape, vals)
		}
		quantize := func(v []float32) ([]byte, error) { return dtype.Quantize(t, v) }
		if done, err := hfMoETensors(c, name, shape, quantize, vals, dt, pending, put); done || err != nil {
			return err
		}
		if strings.HasSuffix(name, models.FFNRouterShexp+".weight") {
			shape = []int{1, shape[0]} // a Linear(dim, 1)
		}
		hfName, ok := models.GGUFToHFName(c.Arch, name)
		if !ok {
			return fmt.Errorf("synth: no Hugging Face name for %s", name)
		}
		if permute {
			switch kind := layerKind(name); kind {
			case models.AttnQ + ".weight", models.AttnQ + ".bias":
				vals = models.HalvesFromPairs(vals, c.Heads, c.HeadDim)
			case models.AttnK + ".weight", models.AttnK + ".bias":
				vals = models.HalvesFromPairs(vals, c.KVHeads, c.HeadDim)
			case models.AttnQNorm + ".weight", models.AttnKNorm + ".weight":
				vals = models.HalvesFromPairs(vals, 1, c.HeadDim)
			}
		}
		if (gemma && c.Gemma4 == nil || c.Linear.On()) && strings.HasSuffix(name, "norm.weight") && layerKind(name) != models.LinNorm+".weight" {
			// Gemma 2/3's checkpoints store w of their (1 + w) norms (Gemma
			// 4's store them as they multiply); the subtraction is exact
			// for weights between 1/2 and 2.
			vals = slices.Clone(vals)
			for i := range vals {
				vals[i]--
			}
		}
		typ, sdt := t, dt
		if len(shape) == 1 || strings.HasSuffix(name, models.FFNRouterShexp+".weight") { // f32 in the GGUF too
			typ, sdt = dtype.F32, safetensors.F32
		}
		data, err := dtype.Quantize(typ, vals)
		if err != nil {
			return fmt.Errorf("synth %s: %w", name, err)
		}
		tensors = append(tensors, safetensors.WriteTensor{Name: hfName, DType: sdt, Shape: shape, Data: data})
		return nil
	}
	if c.Linear.On() { // q and gate interleaved, A negative: as the GGUF's
		tensor = (&qwen35Writer{put: tensor, c: c}).tensor
	}
	if c.Gemma4 != nil && c.MoE.On() { // experts.gate_up_proj: gate and up fused, as the GGUF's
		tensor = gemma4ExpertsWhole(tensor)
	}
	err = weights(c, seed, tensor)
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return err
	}
	tokenizerJSON := hfTokenizerJSON
	if c.Gemma4 != nil { // Gemma 4's own kind, as its GGUF's
		tokenizerJSON = gemma4TokenizerJSON
	}
	tok, err := tokenizerJSON(c.Vocab)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	files := map[string][]byte{
		"config.json":           config,
		"tokenizer.json":        tok,
		"tokenizer_config.json": hfTokenizerConfig(c.Context),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return writeWeights(dir, tensors, opts.Shards)
}

// layerKind returns "attn_q.weight" for "blk.3.attn_q.weight", or "".
func layerKind(name string) string {
	var l int
	var kind string
	if n, _ := fmt.Sscanf(name, "blk.%d.%s", &l, &kind); n == 2 {
		return kind
	}
	return ""
}

// weights draws the tensors of config c from a generator seeded by seed,
// in the order of models.LlamaTensors, and hands each to put whole by its
// GGUF name: Write and WriteHF both draw through draw, so a GGUF and a
// folder of one seed hold the same model.
func weights(c models.Config, seed uint64, put func(name string, shape []int, vals []float32) error) error {
	return draw(c, seed, math.MaxInt, false, func(name string, shape []int, _ int, vals []float32) error {
		return put(name, shape, vals)
	})
}

// drawChunk is the most values draw hands on at once when Write draws a
// GGUF: whole rows, 64 MB of f32. A real shape's largest tensors (Gemma
// 4's per-layer token table, 11 GB of f32 for E4B; an embedding table;
// a stack of experts) then never stand whole in memory. A variable so
// that a test can force small chunks.
var drawChunk = 1 << 24

// chunkFunc receives the values of tensor name (shape outermost
// dimension first) from element at on, whole rows of it.
type chunkFunc func(name string, shape []int, at int, vals []float32) error

// draw draws the tensors of config c from a generator seeded by seed, in
// the order of models.LlamaTensors, and hands them to put in chunks of
// whole rows, at most chunk values (or one row) each, in order. The
// generator's sequence does not depend on chunk, so neither do the
// values. dry hands on zeros without drawing (a chunk's slice then is
// reused), for a pass that only needs the tensors' names and shapes.
// Norm weights are near one; the shared expert's gate (Qwen2-MoE), a
// vector too, is a row of a matrix.
func draw(c models.Config, seed uint64, chunk int, dry bool, put chunkFunc) error {
	rng := rand.New(rand.NewPCG(seed, 0x5e17))
	var zeros []float32
	for _, want := range models.LlamaTensors(c) {
		n := want.Elements()
		in := want.Shape[len(want.Shape)-1]
		step := max(1, chunk/in) * in
		norm := len(want.Shape) == 1 && !strings.HasSuffix(want.Name, models.FFNRouterShexp+".weight")
		a := float32(math.Sqrt(3 / float64(in)))
		for at := 0; at < n; at += step {
			m := min(step, n-at)
			var vals []float32
			switch {
			case dry:
				if len(zeros) < m {
					zeros = make([]float32, m)
				}
				vals = zeros[:m]
			case norm:
				vals = make([]float32, m)
				for i := range vals {
					vals[i] = 1 + float32(0.1*(rng.Float32()-0.5))
				}
			default:
				vals = make([]float32, m)
				for i := range vals {
					vals[i] = a * (2*rng.Float32() - 1)
				}
			}
			if err := put(want.Name, want.Shape, at, vals); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeWeights writes model.safetensors, or shards and their index.
func writeWeights(dir string, tensors []safetensors.WriteTensor, shards int) error {
	if shards <= 1 {
		return writeSafetensors(filepath.Join(dir, safetensors.SingleFile), tensors)
	}
	if shards > len(tensors) {
		return fmt.Errorf("synth: %d shards for %d tensors", shards, len(tensors))
	}
	weightMap := map[string]string{}
	var total int64
	for i := range shards {
		part := tensors[i*len(tensors)/shards : (i+1)*len(tensors)/shards]
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, shards)
		for _, t := range part {
			weightMap[t.Name] = name
			total += int64(len(t.Data))
		}
		if err := writeSafetensors(filepath.Join(dir, name), part); err != nil {
			return err
		}
	}
	var buf bytes.Buffer
	if err := safetensors.WriteIndex(&buf, weightMap, total); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, safetensors.IndexFile), buf.Bytes(), 0o644)
}

func writeSafetensors(path string, tensors []safetensors.WriteTensor) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	err = safetensors.Write(w, map[string]string{"format": "pt"}, tensors)
	if err == nil {
		err = w.Flush()
	}
	return errors.Join(err, f.Close())
}

// hfConfigJSON is config.json for shape s, as transformers writes it.
func hfConfigJSON(s Shape, arch string, t dtype.Type) ([]byte, error) {
	c := s.Config
	if c.Gemma4 != nil {
		cfg, err := gemma4ConfigJSON(c, t)
		if err != nil {
			return nil, fmt.Errorf("synth: %s: %w", s.Name, err)
		}
		b, err := json.MarshalIndent(cfg, "", "  ")
		return append(b, '\n'), err
	}
	cfg := map[string]any{
		"architectures":           []string{arch},
		"model_type":              c.Arch,
		"hidden_size":             c.Dim,
		"intermediate_size":       c.FFN,
		"num_hidden_layers":       c.Layers,
		"num_attention_heads":     c.Heads,
		"num_key_value_heads":     c.KVHeads,
		"head_dim":                c.HeadDim,
		"vocab_size":              c.Vocab,
		"max_position_embeddings": c.Context,
		"rms_norm_eps":            c.NormEps,
		"rope_theta":              c.RopeTheta,
		"tie_word_embeddings":     c.TiedEmbeddings,
		"hidden_act":              "silu",
		"bos_token_id":            1,
		"eos_token_id":            2,
		"torch_dtype":             map[dtype.Type]string{dtype.F32: "float32", dtype.F16: "float16", dtype.BF16: "bfloat16"}[t],
		"rope_scaling":            nil,
	}
	switch c.Arch {
	case "llama", "qwen3", "qwen3moe", "olmoe", "granitemoe":
		cfg["attention_bias"] = false
	case "mistral":
		cfg["sliding_window"] = nil
		if c.SlidingWindow > 0 {
			cfg["sliding_window"] = c.SlidingWindow
		}
	case "qwen2":
		cfg["use_sliding_window"] = false
	case "smollm3":
		cfg["attention_bias"], cfg["use_sliding_window"] = false, false
		rope := make([]int, c.Layers)
		for l := range rope {
			if c.LayerRope(l) {
				rope[l] = 1
			}
		}
		cfg["no_rope_layers"], cfg["no_rope_layer_interval"] = rope, 4
	}
	if strings.HasPrefix(c.Arch, "gemma") {
		if err := gemmaConfigJSON(cfg, c); err != nil {
			return nil, fmt.Errorf("synth: %s: %w", s.Name, err)
		}
	}
	if c.MoE.On() {
		if err := moeConfigJSON(cfg, c); err != nil {
			return nil, fmt.Errorf("synth: %s: %w", s.Name, err)
		}
	}
	if c.QKVBias != (c.Arch == "qwen2" || c.Arch == "qwen2moe") || c.QKNorm != (c.Arch == "qwen3" || c.Arch == "gemma3" || c.Arch == "qwen3moe" || c.Arch == "olmoe" || c.Arch == "qwen35") ||
		c.QKNormFull != (c.Arch == "olmoe") {
		return nil, fmt.Errorf("synth: %s: %s with q/k/v biases %v and q/k norms %v has no Hugging Face config", s.Name, c.Arch, c.QKVBias, c.QKNorm)
	}
	if c.RopeFactors != nil {
		rs, err := ropeScaling(c)
		if err != nil {
			return nil, fmt.Errorf("synth: %s: %w", s.Name, err)
		}
		cfg["rope_scaling"] = rs
	}
	if c.Linear.On() {
		cfg = qwen35ConfigJSON(cfg, c)
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	return append(b, '\n'), err
}

// qwen35ConfigJSON is Qwen3.5's config.json as Qwen publishes it: the text
// model's keys (cfg, with the linear layers' and the partial rotation's)
// under text_config of a Qwen3_5ForConditionalGeneration.
func qwen35ConfigJSON(cfg map[string]any, c models.Config) map[string]any {
	lc := c.Linear
	types := make([]string, c.Layers)
	for l := range types {
		types[l] = map[bool]string{true: "linear_attention", false: "full_attention"}[c.LayerLinear(l)]
	}
	arch, tied := cfg["architectures"], cfg["tie_word_embeddings"]
	delete(cfg, "architectures")
	delete(cfg, "rope_theta")
	delete(cfg, "rope_scaling")
	cfg["model_type"] = "qwen3_5_text"
	cfg["attn_output_gate"] = true
	cfg["layer_types"] = types
	cfg["full_attention_interval"] = qwen35Interval(c)
	cfg["linear_conv_kernel_dim"] = lc.Conv
	cfg["linear_key_head_dim"], cfg["linear_value_head_dim"] = lc.HeadDim, lc.HeadDim
	cfg["linear_num_key_heads"], cfg["linear_num_value_heads"] = lc.KHeads, lc.VHeads
	pairs := c.RopeDim / 2
	cfg["rope_parameters"] = map[string]any{"rope_type": "default", "rope_theta": c.RopeTheta,
		"partial_rotary_factor": float64(c.RopeDim) / float64(c.HeadDim),
		"mrope_interleaved":     true, "mrope_section": []int{pairs - 2*(pairs/3), pairs / 3, pairs / 3}}
	return map[string]any{"architectures": arch, "model_type": "qwen3_5", "tie_word_embeddings": tied, "text_config": cfg}
}

// gemmaConfigJSON adds Gemma 2's or 3's keys to cfg, failing for a config
// whose choices those keys cannot express.
func gemmaConfigJSON(cfg map[string]any, c models.Config) error {
	pattern := 6
	if c.Arch == "gemma2" {
		pattern = 2
	}
	var types []string
	for l := range c.Layers {
		if (l+1)%pattern != 0 != c.LayerSliding(l) {
			return fmt.Errorf("sliding layers %v do not follow %s's pattern", c.Sliding, c.Arch)
		}
		types = append(types, map[bool]string{true: "sliding_attention", false: "full_attention"}[c.LayerSliding(l)])
	}
	switch {
	case c.EmbedScale != float32(math.Sqrt(float64(c.Dim))) || c.Act != models.GELUTanh || !c.PostNorms || !c.TiedEmbeddings:
		return errors.New("not Gemma's embedding scale, activation, post-norms and tied head")
	case c.Arch == "gemma2" && c.LocalRopeTheta != c.RopeTheta:
		return fmt.Errorf("gemma2 has one RoPE base, not %g and %g", c.RopeTheta, c.LocalRopeTheta)
	}
	scalar := 1 / (float64(c.QueryScale) * float64(c.QueryScale))
	cfg["hidden_act"] = "gelu_pytorch_tanh"
	cfg["hidden_activation"] = "gelu_pytorch_tanh"
	cfg["query_pre_attn_scalar"] = math.Round(scalar)
	cfg["sliding_window"] = c.SlidingWindow
	cfg["layer_types"] = types
	cfg["attn_logit_softcapping"] = nullIfZero(c.AttnSoftcap)
	cfg["final_logit_softcapping"] = nullIfZero(c.FinalSoftcap)
	if c.Arch == "gemma3" {
		cfg["model_type"] = "gemma3_text"
		cfg["rope_local_base_freq"] = c.LocalRopeTheta
		cfg["sliding_window_pattern"] = pattern
	}
	return nil
}

// nullIfZero is v, or JSON null for 0 (a soft cap turned off).
func nullIfZero(v float32) any {
	if v == 0 {
		return nil
	}
	return float64(v)
}

// ropeScaling finds the rope_scaling entry that reproduces c.RopeFactors
// exactly: linear when every factor is the same, else llama3 with the
// factor, the frequency factors and the original context of Llama 3.1's
// release (low 1, high 4) or others, searched over a few common values.
func ropeScaling(c models.Config) (map[string]any, error) {
	f := c.RopeFactors
	factor := slices.Max(f)
	if slices.Min(f) == factor {
		return map[string]any{"rope_type": "linear", "factor": float64(factor)}, nil
	}
	for _, low := range []float64{1, 2} {
		for _, high := range []float64{4, 2, 8} {
			for orig := 16; orig <= 1<<20 && high > low; orig *= 2 {
				got := models.Llama3RopeFactors(c.RopeDim, c.RopeTheta, float64(factor), low, high, orig)
				if slices.Equal(got, f) {
					return map[string]any{"rope_type": "llama3", "factor": float64(factor), "low_freq_factor": low,
						"high_freq_factor": high, "original_max_position_embeddings": orig}, nil
				}
			}
		}
	}
	return nil, errors.New("no llama3 or linear rope_scaling reproduces the RoPE factors")
}

// hfTokenizerJSON is a tokenizer.json that encodes and decodes like the
// SentencePiece tokenizer Write stores in the GGUF, as Llama 2's does: the
// same Vocabulary, spaces normalised to ▁ with the dummy prefix before
// them, a BPE whose merges are SentencePiece's (each piece made of two
// pieces, in the order of the pieces' scores), byte fallback, and the
// dummy prefix's space stripped when decoding. Its pieces hold ▁ only at
// their start, so no merge crosses the start of a ▁: splitting the text
// there changes nothing and keeps words short.
func hfTokenizerJSON(vocab int) ([]byte, error) {
	pieces, _, types := Vocabulary(vocab)
	ids := make(map[string]int, len(pieces))
	for id, p := range pieces {
		ids[p] = id
	}
	// SentencePiece merges the pair whose product has the best score; a
	// BPE applies merges in rank order, so rank them by their product.
	var merges [][2]string
	for id, p := range pieces {
		if types[id] != 1 {
			continue
		}
		for i := range p {
			if i == 0 {
				continue
			}
			l, r := p[:i], p[i:]
			if a, ok := ids[l]; ok && types[a] == 1 {
				if b, ok := ids[r]; ok && types[b] == 1 {
					merges = append(merges, [2]string{l, r})
				}
			}
		}
	}
	type added struct {
		ID         int    `json:"id"`
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		LStrip     bool   `json:"lstrip"`
		RStrip     bool   `json:"rstrip"`
		Normalized bool   `json:"normalized"`
		Special    bool   `json:"special"`
	}
	var addedTokens []added
	for id, p := range pieces[:min(3, len(pieces))] {
		addedTokens = append(addedTokens, added{ID: id, Content: p, Special: true})
	}
	if merges == nil {
		merges = [][2]string{}
	}
	tok := map[string]any{
		"version":      "1.0",
		"truncation":   nil,
		"padding":      nil,
		"added_tokens": addedTokens,
		"normalizer": map[string]any{
			"type": "Sequence",
			"normalizers": []any{
				map[string]any{"type": "Prepend", "prepend": "▁"},
				map[string]any{"type": "Replace", "pattern": map[string]string{"String": " "}, "content": "▁"},
			},
		},
		"pre_tokenizer": map[string]any{
			"type": "Split", "pattern": map[string]string{"String": "▁"}, "behavior": "MergedWithNext", "invert": false,
		},
		"post_processor": map[string]any{
			"type":   "TemplateProcessing",
			"single": []any{map[string]any{"SpecialToken": map[string]any{"id": "<s>", "type_id": 0}}, map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}}},
			"pair": []any{map[string]any{"SpecialToken": map[string]any{"id": "<s>", "type_id": 0}}, map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}},
				map[string]any{"SpecialToken": map[string]any{"id": "<s>", "type_id": 1}}, map[string]any{"Sequence": map[string]any{"id": "B", "type_id": 1}}},
			"special_tokens": map[string]any{"<s>": map[string]any{"id": "<s>", "ids": []int{1}, "tokens": []string{"<s>"}}},
		},
		"decoder": map[string]any{
			"type": "Sequence",
			"decoders": []any{
				map[string]any{"type": "Replace", "pattern": map[string]string{"String": "▁"}, "content": " "},
				map[string]any{"type": "ByteFallback"},
				map[string]any{"type": "Fuse"},
				map[string]any{"type": "Strip", "content": " ", "start": 1, "stop": 0},
			},
		},
		"model": map[string]any{
			"type":                      "BPE",
			"dropout":                   nil,
			"unk_token":                 "<unk>",
			"continuing_subword_prefix": nil,
			"end_of_word_suffix":        nil,
			"fuse_unk":                  true,
			"byte_fallback":             true,
			"ignore_merges":             false,
			"vocab":                     ids,
			"merges":                    merges,
		},
	}
	b, err := json.MarshalIndent(tok, "", "  ")
	return append(b, '\n'), err
}

// hfTokenizerConfig is tokenizer_config.json: the special tokens, and BOS
// before every prompt as the GGUF's SentencePiece tokenizer adds it.
func hfTokenizerConfig(context int) []byte {
	b, _ := json.MarshalIndent(map[string]any{
		"tokenizer_class":              "LlamaTokenizerFast",
		"bos_token":                    "<s>",
		"eos_token":                    "</s>",
		"unk_token":                    "<unk>",
		"add_bos_token":                true,
		"add_eos_token":                false,
		"model_max_length":             context,
		"clean_up_tokenization_spaces": false,
	}, "", "  ")
	return append(b, '\n')
}
