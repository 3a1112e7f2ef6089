// Package vision reads the image encoders that llama.cpp's clip/mtmd code
// loads: "mmproj" GGUF files, whose clip.* keys describe a ViT and a
// projector into a language model's embedding space. The same files that
// serve llama-server's and llama-mtmd-cli's --mmproj serve Tessera's.
//
// Projector types read: "gemma3" and "idefics3", both on one SigLIP tower
// (gemma3: a 2-D average pool, the soft embedding RMSNorm and a linear
// projection, Gemma 3 4B and up, one fixed-size image; idefics3: a pixel
// shuffle and a linear projection, SmolVLM, whose images are cut into
// tiles plus an overview with marker tokens between them), and
// "qwen2vl_merger" (qwen.go: Qwen2-VL's dynamic resolution, 2-D RoPE and
// 2×2 merger) and "qwen3vl_merger" (qwen3.go: Qwen3-VL's, with learned
// positions resized per image and deepstack features).
// The forward pass is runtime/vision.go; this package holds the file's
// description, its tensors, image decoding and preprocessing (Preprocess,
// Patches), and where an image's tiles and markers go in a prompt
// (Layout).
package vision

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/gguf"
	"github.com/tessera-llm/tessera/models/tensor"
)

// Projector names a projector type as clip.projector_type spells it.
type Projector string

// Gemma3 is Gemma 3's projector: SigLIP, a Merge×Merge average pool, an
// RMSNorm (mm.soft_emb_norm) and a linear projection.
const Gemma3 Projector = "gemma3"

// Idefics3 is SmolVLM's projector (Idefics 3's): SigLIP, a Merge×Merge
// pixel shuffle (each token the concatenation of a window's patches) and
// a linear projection (mm.model.fc), on each tile of the image and on its
// overview.
const Idefics3 Projector = "idefics3"

// Projectors are the projector types this package reads.
var Projectors = []Projector{Gemma3, Idefics3, Qwen2VL, Qwen3VL}

// ErrUnsupported is returned (wrapped) for a projector type this package
// does not read.
var ErrUnsupported = errors.New("unsupported projector")

// Config is a vision tower's description, as clip.cpp's hparams hold it.
type Config struct {
	Projector Projector
	ImageSize int // the square the image is resized to (clip.vision.image_size)
	PatchSize int
	Dim       int // ViT width (clip.vision.embedding_length)
	FFN       int
	Layers    int
	Heads     int
	Eps       float32 // LayerNorm's (and gemma3's soft embedding RMSNorm's) epsilon
	// Merge is how many patches per side become one output token: gemma3's
	// average-pool kernel, idefics3's pixel-shuffle factor
	// (clip.vision.projector.scale_factor, default 4).
	Merge int
	// LongestEdge is idefics3's preprocessing size
	// (clip.vision.preproc_image_size): the image is resized so that its
	// longer side is this, both sides rounded up to whole tiles of
	// ImageSize. 0 (the key absent) encodes the overview alone, as
	// llama.cpp does.
	LongestEdge int
	Mean, Std   [3]float32 // normalisation of pixels in [0, 1]
	// OutDim is the projector's output width: the language model's
	// embedding width (clip.cpp's n_mmproj_embd).
	OutDim int
	// Act is the feed-forward's activation: GELU's tanh approximation
	// (clip.use_gelu) or quick GELU (Qwen2-VL).
	Act tensor.Activation
	// MinPixels and MaxPixels bound a dynamic tower's resized image
	// (Size; Qwen-VL, whose Merge is 2).
	MinPixels, MaxPixels int
	// Deepstack are the tower layers (0-based, ascending) after which
	// Qwen3-VL taps the hidden state for a deepstack merger of its own.
	Deepstack []int
}

// Patches is the number of patches per side of a preprocessed image.
func (c Config) Patches() int { return c.ImageSize / c.PatchSize }

// Tokens is how many embeddings one tile (or a gemma3 image) becomes.
func (c Config) Tokens() int {
	side := c.Patches() / c.Merge
	return side * side
}

// HeadDim is the width of one attention head.
func (c Config) HeadDim() int { return c.Dim / c.Heads }

// Tensor names, as llama.cpp's clip-impl.h spells them.
const (
	PatchEmbd    = "v.patch_embd.weight"
	PatchBias    = "v.patch_embd.bias"
	PositionEmbd = "v.position_embd.weight"
	PostLN       = "v.post_ln"
	InputProj    = "mm.input_projection.weight" // gemma3: [Dim, OutDim] as HF stores it
	SoftEmbNorm  = "mm.soft_emb_norm.weight"    // gemma3
	FC           = "mm.model.fc.weight"         // idefics3: [OutDim, Merge²·Dim], no bias
)

// LayerTensor names a tensor of ViT block l: attn_q, attn_k, attn_v,
// attn_out, ln1, ln2, ffn_up, ffn_down, each with suffix weight or bias.
func LayerTensor(l int, kind, suffix string) string {
	return fmt.Sprintf("v.blk.%d.%s.%s", l, kind, suffix)
}

// Model is an opened mmproj file: its Config and its tensors, read lazily.
type Model struct {
	Config  Config
	Path    string
	Tensors map[string]*models.Tensor
	file    *gguf.File
}

// Close releases the file.
func (m *Model) Close() error {
	if m.file == nil {
		return nil
	}
	return m.file.Close()
}

// Tensor returns the named tensor, checking its shape (row-major,
// outermost first) when want is given.
func (m *Model) Tensor(name string, want ...int) (*models.Tensor, error) {
	t, ok := m.Tensors[name]
	if !ok {
		return nil, fmt.Errorf("mmproj %s: no tensor %s", m.Path, name)
	}
	if len(want) > 0 && !slices.Equal(t.Shape, want) {
		return nil, fmt.Errorf("mmproj %s: tensor %s is %v, want %v", m.Path, name, t.Shape, want)
	}
	return t, nil
}

// Open reads the mmproj file at path.
func Open(path string) (*Model, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open mmproj: %w", err)
	}
	m, err := FromGGUF(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open mmproj %s: %w", path, err)
	}
	m.Path = path
	return m, nil
}

// OpenReader reads an mmproj file of size bytes from r (a browser's
// file, a buffer), which must stay readable until Model.Close; name is
// what errors call it.
func OpenReader(r io.ReaderAt, size int64, name string) (*Model, error) {
	f, err := gguf.Read(r, size)
	if err != nil {
		return nil, fmt.Errorf("open mmproj %s: %w", name, err)
	}
	m, err := FromGGUF(f)
	if err != nil {
		return nil, fmt.Errorf("open mmproj %s: %w", name, err)
	}
	m.Path = name
	return m, nil
}

// limits on a file's dimensions: far past any published vision tower, near
// enough that a hostile file cannot ask for absurd allocations.
const (
	maxImageSize = 4096
	maxDim       = 16384
	maxLayers    = 256
	maxTileSide  = 16 // idefics3's tiles a side (SmolVLM's are 4)
)

// FromGGUF reads a vision tower from a parsed GGUF file, which it keeps
// for reading tensors (Model.Close closes it).
func FromGGUF(f *gguf.File) (*Model, error) {
	if has, ok := f.Bool("clip.has_vision_encoder"); ok && !has {
		return nil, fmt.Errorf("%w: the file has no vision encoder (clip.has_vision_encoder is false)", ErrUnsupported)
	}
	p, ok := f.String("clip.vision.projector_type")
	if !ok {
		p, ok = f.String("clip.projector_type")
	}
	if !ok {
		return nil, fmt.Errorf("%w: no clip.projector_type: not an mmproj file", ErrUnsupported)
	}
	c := Config{Projector: Projector(p)}
	if !slices.Contains(Projectors, c.Projector) {
		var names []string
		for _, q := range Projectors {
			names = append(names, string(q))
		}
		return nil, fmt.Errorf("%w %q (read: %s)", ErrUnsupported, p, strings.Join(names, ", "))
	}
	var errs []error
	u := func(key string, def int) int {
		v, ok := f.Uint(key)
		if !ok {
			if def < 0 {
				errs = append(errs, fmt.Errorf("missing key %s", key))
			}
			return def
		}
		if v > 1<<30 {
			errs = append(errs, fmt.Errorf("%s = %d is out of range", key, v))
			return 0
		}
		return int(v)
	}
	c.ImageSize = u("clip.vision.image_size", -1)
	c.PatchSize = u("clip.vision.patch_size", -1)
	c.Dim = u("clip.vision.embedding_length", -1)
	c.FFN = u("clip.vision.feed_forward_length", -1)
	c.Layers = u("clip.vision.block_count", -1)
	c.Heads = u("clip.vision.attention.head_count", -1)
	eps, ok := f.Float("clip.vision.attention.layer_norm_epsilon")
	if !ok {
		errs = append(errs, errors.New("missing key clip.vision.attention.layer_norm_epsilon"))
	}
	c.Eps = float32(eps)
	c.Merge = u("clip.vision.projector.scale_factor", 4)
	switch c.Projector {
	case Idefics3:
		c.LongestEdge = u("clip.vision.preproc_image_size", 0)
	case Qwen2VL, Qwen3VL:
		c.Merge = 2 // qwenGGUF checks the file's
	}
	for i, key := range []string{"clip.vision.image_mean", "clip.vision.image_std"} {
		v, ok := f.Float32s(key)
		if !ok || len(v) != 3 {
			errs = append(errs, fmt.Errorf("%s: want 3 floats", key))
			continue
		}
		dst := &c.Mean
		if i == 1 {
			dst = &c.Std
		}
		copy(dst[:], v)
	}
	if gelu, ok := f.Bool("clip.use_gelu"); !c.Dynamic() && (!ok || !gelu) {
		// clip.cpp takes GELU-quick (x·σ(1.702x)) without the key; no
		// SigLIP file is written so.
		errs = append(errs, errors.New("clip.use_gelu is not true: only SigLIP's GELU feed-forward is read"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	c.Act = tensor.GELUTanh
	m := &Model{Config: c, Tensors: map[string]*models.Tensor{}, file: f}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		shape := make([]int, len(ti.Dims))
		for j, d := range ti.Dims { // GGUF lists the innermost dimension first
			shape[len(shape)-1-j] = int(d)
		}
		m.Tensors[ti.Name] = models.NewTensor(ti.Name, shape, ti.Type, func() ([]byte, error) { return f.ReadTensor(ti) })
	}
	// The projector's output width comes from its weight, as clip.cpp's
	// n_mmproj_embd does.
	switch c.Projector {
	case Qwen2VL, Qwen3VL:
		if err := qwenGGUF(m, f); err != nil {
			return nil, err
		}
		if c.Projector == Qwen3VL {
			if err := qwen3GGUF(m); err != nil {
				return nil, err
			}
		}
	case Gemma3:
		t, err := m.Tensor(InputProj)
		if err != nil || len(t.Shape) != 2 || t.Shape[0] != c.Dim {
			return nil, fmt.Errorf("%s must be [%d, out]: %v", InputProj, c.Dim, err)
		}
		m.Config.OutDim = t.Shape[1]
	case Idefics3:
		in := c.Merge * c.Merge * c.Dim
		t, err := m.Tensor(FC)
		if err != nil || len(t.Shape) != 2 || t.Shape[1] != in {
			return nil, fmt.Errorf("%s must be [out, %d]: %v", FC, in, err)
		}
		m.Config.OutDim = t.Shape[0]
	}
	if m.Config.OutDim <= 0 || m.Config.OutDim > maxDim {
		return nil, fmt.Errorf("projection width %d is out of range", m.Config.OutDim)
	}
	for _, want := range m.Config.TensorShapes() {
		if _, err := m.Tensor(want.Name, want.Shape...); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// check refuses dimensions that do not make a ViT.
func (c Config) check() error {
	switch {
	case c.ImageSize <= 0 || c.ImageSize > maxImageSize:
		return fmt.Errorf("image size %d is out of range", c.ImageSize)
	case c.PatchSize <= 0 || c.ImageSize%c.PatchSize != 0:
		return fmt.Errorf("patch size %d does not divide image size %d", c.PatchSize, c.ImageSize)
	case c.Dim <= 0 || c.Dim > maxDim || c.FFN <= 0 || c.FFN > 4*maxDim:
		return fmt.Errorf("widths %d and %d are out of range", c.Dim, c.FFN)
	case c.Layers <= 0 || c.Layers > maxLayers:
		return fmt.Errorf("%d layers is out of range", c.Layers)
	case c.Heads <= 0 || c.Dim%c.Heads != 0:
		return fmt.Errorf("%d heads do not divide width %d", c.Heads, c.Dim)
	case c.Merge <= 0 || c.Patches()%c.Merge != 0:
		return fmt.Errorf("merge factor %d does not divide %d patches a side", c.Merge, c.Patches())
	case !(c.Eps > 0) || c.Eps > 1:
		return fmt.Errorf("epsilon %g is out of range", c.Eps)
	case c.LongestEdge < 0 || c.LongestEdge > maxImageSize || ceilDiv(c.LongestEdge, c.ImageSize) > maxTileSide:
		return fmt.Errorf("preprocessing size %d is out of range (at most %d tiles of %d a side)", c.LongestEdge, maxTileSide, c.ImageSize)
	}
	for i := range 3 {
		if !(c.Std[i] > 0) {
			return fmt.Errorf("image std %v must be positive", c.Std)
		}
	}
	return nil
}

// Want is a tensor a vision tower needs: its name and row-major shape.
type Want struct {
	Name  string
	Shape []int
}

// TensorShapes lists every tensor of c's tower and projector, in the
// order synth writes them.
func (c Config) TensorShapes() []Want {
	switch c.Projector {
	case Qwen2VL:
		return c.qwenShapes()
	case Qwen3VL:
		return c.qwen3Shapes()
	}
	p, n := c.PatchSize, c.Patches()
	w := []Want{
		{PatchEmbd, []int{c.Dim, 3, p, p}},
		{PatchBias, []int{c.Dim}},
		{PositionEmbd, []int{n * n, c.Dim}},
	}
	w = append(w, c.blockShapes()...)
	w = append(w, Want{PostLN + ".weight", []int{c.Dim}}, Want{PostLN + ".bias", []int{c.Dim}})
	if c.Projector == Idefics3 {
		return append(w, Want{FC, []int{c.OutDim, c.Merge * c.Merge * c.Dim}})
	}
	return append(w, Want{SoftEmbNorm, []int{c.Dim}}, Want{InputProj, []int{c.Dim, c.OutDim}})
}

// blockShapes lists the tensors of the ViT's blocks.
func (c Config) blockShapes() []Want {
	var w []Want
	for l := range c.Layers {
		for _, k := range []struct {
			kind    string
			out, in int
		}{{"attn_q", c.Dim, c.Dim}, {"attn_k", c.Dim, c.Dim}, {"attn_v", c.Dim, c.Dim}, {"attn_out", c.Dim, c.Dim},
			{"ffn_up", c.FFN, c.Dim}, {"ffn_down", c.Dim, c.FFN}} {
			w = append(w, Want{LayerTensor(l, k.kind, "weight"), []int{k.out, k.in}}, Want{LayerTensor(l, k.kind, "bias"), []int{k.out}})
		}
		for _, k := range []string{"ln1", "ln2"} {
			w = append(w, Want{LayerTensor(l, k, "weight"), []int{c.Dim}}, Want{LayerTensor(l, k, "bias"), []int{c.Dim}})
		}
	}
	return w
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
