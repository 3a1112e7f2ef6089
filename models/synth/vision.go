package synth

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/gguf"
	"github.com/tessera-llm/tessera/models/tensor"
	"github.com/tessera-llm/tessera/models/vision"
)

// visionShapes are the vision towers WriteProjector imitates, by
// projector type and size: the real ones at their published configs (the
// projection's width comes from the base model), tiny ones for tests.
var visionShapes = map[string]vision.Config{
	// Gemma 3 4B/12B/27B's SigLIP-So400m at 896 pixels: 4096 patches of
	// 14, pooled 4×4 into 256 tokens.
	"gemma3": {Projector: vision.Gemma3, ImageSize: 896, PatchSize: 14, Dim: 1152, FFN: 4304, Layers: 27, Heads: 16,
		Eps: 1e-6, Merge: 4, Mean: [3]float32{0.5, 0.5, 0.5}, Std: [3]float32{0.5, 0.5, 0.5}},
	// Real-shape widths where tiny shapes round them away: patches of 14
	// (rows of 588 values), heads of 72, a feed-forward of 430; 16
	// patches pooled 2×2 into 4 tokens.
	"mid-gemma3": {Projector: vision.Gemma3, ImageSize: 56, PatchSize: 14, Dim: 144, FFN: 430, Layers: 2, Heads: 2,
		Eps: 1e-6, Merge: 2, Mean: [3]float32{0.5, 0.5, 0.5}, Std: [3]float32{0.5, 0.5, 0.5}},
	// 64 patches of 4 pixels pooled 2×2 into 16 tokens.
	"tiny-gemma3": {Projector: vision.Gemma3, ImageSize: 32, PatchSize: 4, Dim: 32, FFN: 48, Layers: 2, Heads: 2,
		Eps: 1e-6, Merge: 2, Mean: [3]float32{0.5, 0.5, 0.5}, Std: [3]float32{0.5, 0.5, 0.5}},
	// SmolVLM-256M/500M's SigLIP (base, patch 16, 512 pixels): tiles of
	// 1024 patches shuffled 4×4 into 64 tokens; images resized to 2048 on
	// the longer side, so up to 4×4 tiles and the overview.
	"idefics3": {Projector: vision.Idefics3, ImageSize: 512, PatchSize: 16, Dim: 768, FFN: 3072, Layers: 12, Heads: 12,
		Eps: 1e-6, Merge: 4, LongestEdge: 2048, Act: tensor.GELUTanh, Mean: [3]float32{0.5, 0.5, 0.5}, Std: [3]float32{0.5, 0.5, 0.5}},
	// The real one's patches of 16 and shuffle of 4 (a projection from
	// 16·192 = 3072 values), heads of 64, an awkward feed-forward of 430:
	// tiles of 8×8 patches into 4 tokens, 2×2 tiles at most.
	"mid-idefics3": {Projector: vision.Idefics3, ImageSize: 128, PatchSize: 16, Dim: 192, FFN: 430, Layers: 2, Heads: 3,
		Eps: 1e-6, Merge: 4, LongestEdge: 256, Act: tensor.GELUTanh, Mean: [3]float32{0.5, 0.5, 0.5}, Std: [3]float32{0.5, 0.5, 0.5}},
	// Tiles of 64 patches of 4 pixels shuffled 2×2 into 16 tokens, 2×2
	// tiles at most.
	"tiny-idefics3": {Projector: vision.Idefics3, ImageSize: 32, PatchSize: 4, Dim: 32, FFN: 48, Layers: 2, Heads: 2,
		Eps: 1e-6, Merge: 2, LongestEdge: 64, Act: tensor.GELUTanh, Mean: [3]float32{0.5, 0.5, 0.5}, Std: [3]float32{0.5, 0.5, 0.5}},
	// Qwen2-VL 2B/7B's ViT (675M): patches of 14, 32 layers of 1280
	// with heads of 80, merged 2×2; images at their own aspect.
	"qwen2vl": qwenVL(vision.Config{Projector: vision.Qwen2VL, ImageSize: 560, PatchSize: 14, Dim: 1280, FFN: 5120, Layers: 32, Heads: 16}),
	// The real widths that tiny shapes round away: patches of 14, heads
	// of 72 (18 rotation pairs an axis), a feed-forward of 430.
	"mid-qwen2vl": qwenVL(vision.Config{Projector: vision.Qwen2VL, ImageSize: 56, PatchSize: 14, Dim: 144, FFN: 430, Layers: 2, Heads: 2}),
	// Patches of 4 pixels, heads of 16.
	"tiny-qwen2vl": qwenVL(vision.Config{Projector: vision.Qwen2VL, ImageSize: 32, PatchSize: 4, Dim: 32, FFN: 48, Layers: 2, Heads: 2}),
	// Qwen3-VL 2B/4B's ViT: patches of 16, 24 layers of 1024 with heads of
	// 64, learned positions for 48×48 patches (768 pixels) resized to each
	// image, deepstack taps after layers 5, 11 and 17.
	"qwen3vl": qwen3VL(vision.Config{ImageSize: 768, PatchSize: 16, Dim: 1024, FFN: 4096, Layers: 24, Heads: 16, Deepstack: []int{5, 11, 17}}),
	// The real patches of 16, heads of 72, a feed-forward of 430, a
	// position table of 4×4 patches; three taps as the real one.
	"mid-qwen3vl": qwen3VL(vision.Config{ImageSize: 64, PatchSize: 16, Dim: 144, FFN: 430, Layers: 4, Heads: 2, Deepstack: []int{0, 1, 2}}),
	// Patches of 4 pixels, heads of 16, a table of 8×8 patches; the last
	// layer untapped, as the real one's.
	"tiny-qwen3vl": qwen3VL(vision.Config{ImageSize: 32, PatchSize: 4, Dim: 32, FFN: 48, Layers: 4, Heads: 2, Deepstack: []int{0, 1, 2}}),
}

// qwen3VL gives c what every Qwen3-VL tower has: the 2×2 merger, tanh
// GELU, normalisation by 0.5 and 0.5, and the language model's RMSNorm
// epsilon (1e-6) for its LayerNorms, as the converter writes it.
func qwen3VL(c vision.Config) vision.Config {
	c.Projector, c.Eps, c.Merge, c.Act = vision.Qwen3VL, 1e-6, 2, tensor.GELUTanh
	c.Mean = [3]float32{0.5, 0.5, 0.5}
	c.Std = [3]float32{0.5, 0.5, 0.5}
	return c
}

// qwenVL gives c what every Qwen-VL tower has: CLIP's normalisation,
// LayerNorms of epsilon 1e-6, the 2×2 merger.
func qwenVL(c vision.Config) vision.Config {
	c.Eps, c.Merge = 1e-6, 2
	c.Mean = [3]float32{0.48145466, 0.4578275, 0.40821073}
	c.Std = [3]float32{0.26862954, 0.26130258, 0.27577711}
	return c
}

// visionBases are language models for the projectors whose images are
// marked with tokens of their own (idefics3: SmolVLM's; their
// vocabularies end with those tokens, visionVocabulary) or that take
// more than tokens (Qwen3-VL's deepstack slices).
var visionBases = []Shape{
	// SmolVLM-256M's language model: SmolLM2-135M with SmolVLM's
	// vocabulary of 49280.
	{"smolvlm-256m", models.Config{Arch: "llama", Dim: 576, FFN: 1536, Layers: 30, Heads: 9, KVHeads: 3, HeadDim: 64,
		Vocab: 49280, Context: 8192, NormEps: 1e-5, RopeTheta: 100000, RopeDim: 64, TiedEmbeddings: true}},
	{"tiny-smolvlm", models.Config{Arch: "llama", Dim: 64, FFN: 96, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16,
		Vocab: 384, Context: 512, NormEps: 1e-5, RopeTheta: 10000, RopeDim: 16, TiedEmbeddings: true}},
	// tiny-qwen3vl with four layers and Qwen3-VL's three deepstack slices
	// (llama.cpp needs more layers than slices), for Qwen3-VL's
	// projectors.
	{"tiny-qwen3vl-deep", models.Config{Arch: "qwen3vl", Dim: 64, FFN: 96, Layers: 4, Heads: 4, KVHeads: 2, HeadDim: 32,
		Vocab: 300, Context: 512, NormEps: 1e-6, RopeTheta: 5000000, RopeDim: 32, Rope: models.RopeHalves,
		TiedEmbeddings: true, QKNorm: true, RopeSections: [4]int{6, 5, 5, 0}, RopeInterleaved: true, Deepstack: 3}},
}

func init() { shapes = append(shapes, visionBases...) }

// visionVocabulary puts SmolVLM's image tokens at the end of the
// vocabulary of the shapes named smolvlm: control tokens
// <fake_token_around_image>, <image>, <global-img>, <end_of_utterance>
// and <row_R_col_C> for R, C up to 6 (as its tokenizer has them), and
// the piece "\n\n" (its tokenizer's ĊĊ), which mtmd looks up by text.
func visionVocabulary(name string, pieces []string, types []int32) {
	if !strings.Contains(name, "smolvlm") {
		return
	}
	add := []string{"<fake_token_around_image>", "<image>", "<global-img>", "<end_of_utterance>"}
	for r := 1; r <= 6; r++ {
		for c := 1; c <= 6; c++ {
			add = append(add, fmt.Sprintf("<row_%d_col_%d>", r, c))
		}
	}
	at := len(pieces) - len(add) - 1
	pieces[at], types[at] = "\n\n", 1
	for i, p := range add {
		pieces[at+1+i], types[at+1+i] = p, 3
	}
}

// ProjectorShapes lists the names WriteProjector takes.
func ProjectorShapes() []string {
	var n []string
	for k := range visionShapes {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// ProjectorShape returns the vision tower called name ("gemma3",
// "mid-gemma3", "tiny-gemma3") projecting into outDim, the base model's
// width.
func ProjectorShape(name string, outDim int) (vision.Config, error) {
	c, ok := visionShapes[name]
	if !ok {
		return vision.Config{}, fmt.Errorf("synth: unknown projector shape %q (known: %s)", name, strings.Join(ProjectorShapes(), ", "))
	}
	c.OutDim = outDim
	return c, nil
}

// WriteProjector writes an mmproj GGUF of tower c with weights of type t
// (F32 or F16; vectors stay F32) drawn from a seeded generator, with
// llama.cpp's keys and tensor names, so that llama-mtmd-cli reads it with
// the base model whose width is c.OutDim. Matrices are uniform in
// ±sqrt(3/in), biases and position embeddings small, norms near one.
func WriteProjector(w io.Writer, c vision.Config, t dtype.Type, seed uint64) error {
	if t != dtype.F32 && t != dtype.F16 {
		return fmt.Errorf("synth: weight type %s (want F32 or F16)", t)
	}
	if c.OutDim <= 0 {
		return fmt.Errorf("synth: projector of width %d", c.OutDim)
	}
	rng := rand.New(rand.NewPCG(seed, 0x715e))
	var tensors []gguf.WriteTensor
	for _, want := range c.TensorShapes() {
		n := 1
		for _, d := range want.Shape {
			n *= d
		}
		vals := make([]float32, n)
		name := want.Name
		switch {
		case strings.HasSuffix(name, "ln1.weight") || strings.HasSuffix(name, "ln2.weight") ||
			name == vision.PostLN+".weight" || name == vision.SoftEmbNorm || strings.HasSuffix(name, ".norm.weight"):
			for i := range vals {
				vals[i] = 1 + float32(0.1*(rng.Float32()-0.5))
			}
		case len(want.Shape) == 1 || name == vision.PositionEmbd:
			for i := range vals {
				vals[i] = 0.1 * (2*rng.Float32() - 1)
			}
		default:
			in := n / want.Shape[0]
			if name == vision.InputProj { // [Dim, OutDim]: HF's orientation, its input first
				in = c.Dim
			}
			a := float32(math.Sqrt(3 / float64(in)))
			for i := range vals {
				vals[i] = a * (2*rng.Float32() - 1)
			}
		}
		typ := t
		if len(want.Shape) == 1 || name == vision.PositionEmbd {
			typ = dtype.F32
		}
		data, err := dtype.Quantize(typ, vals)
		if err != nil {
			return fmt.Errorf("synth %s: %w", name, err)
		}
		dims := make([]uint64, len(want.Shape))
		for i, d := range want.Shape { // GGUF lists the innermost dimension first
			dims[len(dims)-1-i] = uint64(d)
		}
		tensors = append(tensors, gguf.WriteTensor{Name: name, Dims: dims, Type: typ, Data: data})
	}
	u := func(v int) gguf.Value { return gguf.Uint32Value(uint32(v)) }
	f3 := func(v [3]float32) gguf.Value { return gguf.ArrayValue(v[:]) }
	kv := []gguf.KV{
		{Key: "general.architecture", Value: gguf.StringValue("clip")},
		{Key: "general.name", Value: gguf.StringValue("synthetic " + string(c.Projector) + " projector")},
		{Key: "clip.projector_type", Value: gguf.StringValue(string(c.Projector))},
		{Key: "clip.has_vision_encoder", Value: gguf.BoolValue(true)},
		{Key: "clip.vision.image_size", Value: u(c.ImageSize)},
		{Key: "clip.vision.patch_size", Value: u(c.PatchSize)},
		{Key: "clip.vision.embedding_length", Value: u(c.Dim)},
		{Key: "clip.vision.feed_forward_length", Value: u(c.FFN)},
		{Key: "clip.vision.projection_dim", Value: u(c.OutDim)},
		{Key: "clip.vision.block_count", Value: u(c.Layers)},
		{Key: "clip.vision.attention.head_count", Value: u(c.Heads)},
		{Key: "clip.vision.attention.layer_norm_epsilon", Value: gguf.Float32Value(c.Eps)},
		{Key: "clip.vision.image_mean", Value: f3(c.Mean)},
		{Key: "clip.vision.image_std", Value: f3(c.Std)},
	}
	switch c.Projector {
	case vision.Qwen2VL: // quick GELU: no clip.use_gelu
		kv = append(kv, gguf.KV{Key: "clip.vision.spatial_merge_size", Value: u(c.Merge)})
	case vision.Qwen3VL: // the converter's keys: tanh GELU, the layers with deepstack mergers
		taps := make([]bool, c.Layers)
		for _, l := range c.Deepstack {
			taps[l] = true
		}
		kv = append(kv, gguf.KV{Key: "clip.vision.spatial_merge_size", Value: u(c.Merge)},
			gguf.KV{Key: "clip.use_gelu", Value: gguf.BoolValue(true)},
			gguf.KV{Key: "clip.vision.is_deepstack_layers", Value: gguf.ArrayValue(taps)})
	default:
		kv = append(kv, gguf.KV{Key: "clip.use_gelu", Value: gguf.BoolValue(true)},
			gguf.KV{Key: "clip.vision.projector.scale_factor", Value: u(c.Merge)})
	}
	if c.LongestEdge > 0 {
		kv = append(kv, gguf.KV{Key: "clip.vision.preproc_image_size", Value: u(c.LongestEdge)})
	}
	return gguf.Write(w, kv, tensors)
}

// WriteVisionFiles writes a random language model of synth shape base
// (Lookup) and a projector of shape projector (ProjectorShape) fitted to
// its width, both with weights of type t and the given seed, as
// base.gguf and base.mmproj.gguf in dir: the pair that `tessera synth
// --shape BASE` and `tessera synth --mmproj TYPE --base BASE` write, for
// tests of every home that takes images.
func WriteVisionFiles(dir, base, projector string, t dtype.Type, seed uint64) (model, mmproj string, err error) {
	s, err := Lookup(base)
	if err != nil {
		return "", "", err
	}
	c, err := ProjectorShape(projector, s.Config.Dim)
	if err != nil {
		return "", "", err
	}
	model, mmproj = filepath.Join(dir, base+".gguf"), filepath.Join(dir, base+".mmproj.gguf")
	for _, f := range []struct {
		path  string
		write func(io.Writer) error
	}{
		{model, func(w io.Writer) error { return Write(w, s, t, seed) }},
		{mmproj, func(w io.Writer) error { return WriteProjector(w, c, t, seed) }},
	} {
		if err := writeFile(f.path, f.write); err != nil {
			return "", "", err
		}
	}
	return model, mmproj, nil
}

// writeFile writes path through a buffer.
func writeFile(path string, write func(io.Writer) error) error {
	out, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	w := bufio.NewWriterSize(out, 1<<20)
	if err := write(w); err != nil {
		out.Close()
		return fmt.Errorf("synth: writing %s: %w", path, err)
	}
	if err := w.Flush(); err != nil {
		out.Close()
		return fmt.Errorf("synth: writing %s: %w", path, err)
	}
	return out.Close()
}
