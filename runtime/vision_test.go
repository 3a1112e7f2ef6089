package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/x448/float16"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/models/vision"
	"github.com/tessera-llm/tessera/runtime"
)

// synthProjector writes a random projector of the named shape (changed
// by edit, if given) feeding the base model at base, and returns its path.
func synthProjector(t testing.TB, shape, base string, edit ...func(*vision.Config)) string {
	t.Helper()
	m, err := vision.Open(base) // never: base is a language model
	if err == nil {
		m.Close()
		t.Fatalf("%s opened as a projector", base)
	}
	eng, err := runtime.Load(base, runtime.Options{Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	dim := eng.Model().Config.Dim
	eng.Close()
	c, err := synth.ProjectorShape(shape, dim)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range edit {
		e(&c)
	}
	path := filepath.Join(t.TempDir(), shape+".mmproj.gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := synth.WriteProjector(f, c, dtype.F32, 1); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// gradient is a test picture: red across, green down, blue in stripes.
func gradient(w, h int) *vision.Image {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.NRGBA{uint8(x * 255 / max(w-1, 1)), uint8(y * 255 / max(h-1, 1)), uint8((x*7 + y*13) % 256), 255})
		}
	}
	out := vision.FromImage(img)
	out.Hash[0] = byte(w) // distinct pictures, distinct keys
	out.Hash[1] = byte(h)
	return out
}

// TestVisionTowerReference checks the engine's vision tower against a
// forward pass written here in float64 from the mmproj's raw tensors and
// the SigLIP, Gemma 3 and Idefics 3 projector definitions (transformers'
// modeling_siglip.py, Gemma3MultiModalProjector and Idefics3Connector):
// patch convolution, learned positions, pre-norm blocks with tanh GELU,
// the post LayerNorm, then a 2-D average pool, RMSNorm and the projection
// (gemma3) or the pixel shuffle and the projection (idefics3), for each of
// the pictures vision.Preprocess makes of the image. None of the engine's
// code takes part in the reference (the pictures are its input).
func TestVisionTowerReference(t *testing.T) {
	for _, tc := range []struct {
		name, shape string
		w, h        int
		edit        func(*vision.Config)
	}{
		{"tiny-gemma3", "tiny-gemma3", 32, 32, nil},
		{"mid-gemma3", "mid-gemma3", 56, 56, nil},
		{"tiny-idefics3", "tiny-idefics3", 50, 37, nil},
		{"mid-idefics3", "mid-idefics3", 128, 128, nil},
		// Tiles of 20 × 20 patches: 100 tokens each, more than a block of
		// the tower's scratch cache holds.
		{"tiny-idefics3-80", "tiny-idefics3", 100, 60, func(c *vision.Config) { c.ImageSize, c.LongestEdge = 80, 160 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := synthModel(t, visionBase(tc.shape), dtype.F32)
			var edits []func(*vision.Config)
			if tc.edit != nil {
				edits = append(edits, tc.edit)
			}
			mm := synthProjector(t, tc.shape, base, edits...)
			img := gradient(tc.w, tc.h)
			checkEncodesAsReference(t, base, mm, img, visionReference(t, mm, img, false))
		})
	}
}

// checkEncodesAsReference loads base with the projector mm on the CPU,
// encodes img and checks its embeddings against want, a float64
// reference's, within 1e-5 relative to 1+|want|; it returns an image
// token's width (the model's, and Qwen3-VL's deepstack slices after it).
func checkEncodesAsReference(t *testing.T, base, mm string, img *vision.Image, want []float64) (width int) {
	t.Helper()
	eng, err := runtime.Load(base, runtime.Options{Device: "cpu", MMProj: mm})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	got, err := eng.EncodeImage(context.Background(), img)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d values, want %d", len(got), len(want))
	}
	worst := 0.0
	for i := range got {
		worst = max(worst, math.Abs(float64(got[i])-want[i])/(1+math.Abs(want[i])))
	}
	width = eng.Model().Config.Dim * (1 + eng.Model().Config.Deepstack)
	t.Logf("%d×%d image: %d embeddings within %.2g of the reference", img.W, img.H, len(got)/width, worst)
	if worst > 1e-5 {
		t.Errorf("embeddings differ from the reference by up to %.3g", worst)
	}
	return width
}

// visionReference returns the embeddings of img by the projector at path,
// in float64, picture after picture (vision.Preprocess's); with ggml,
// rounded where llama.cpp's CPU rounds: the patch convolution's pixels and
// kernel to f16 (its im2col is f16) and GELU through an f16 table
// (GGML_GELU_FP16: argument and result in f16).
func visionReference(t *testing.T, path string, img *vision.Image, ggml bool) []float64 {
	t.Helper()
	m, err := vision.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var out []float64
	for _, planar := range vision.Preprocess(img, m.Config) {
		out = append(out, pictureReference(t, m, planar, ggml)...)
	}
	return out
}

// tensor64 is the tensor name of m (a model or a projector) in float64,
// for the float64 references.
func tensor64(t *testing.T, m interface {
	Tensor(name string, want ...int) (*models.Tensor, error)
}, name string) []float64 {
	t.Helper()
	tn, err := m.Tensor(name)
	if err != nil {
		t.Fatal(err)
	}
	f, err := tn.Float32()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float64, len(f))
	for i, v := range f {
		out[i] = float64(v)
	}
	return out
}

// pictureReference is visionReference for one preprocessed picture.
func pictureReference(t *testing.T, m *vision.Model, planar []float32, ggml bool) []float64 {
	c := m.Config
	get := func(name string) []float64 { return tensor64(t, m, name) }
	n, p, d := c.Patches(), c.PatchSize, c.Dim
	rows := n * n
	// Pixels: (v/255 - mean)/std, channel-major, as preprocessed.
	sz := c.ImageSize
	f16 := func(v float64) float64 {
		if !ggml {
			return v
		}
		return float64(float16.Fromfloat32(float32(v)).Float32())
	}
	px := func(ch, x, y int) float64 { return f16(float64(planar[(ch*sz+y)*sz+x])) }
	// Conv2d(3 → d, kernel p, stride p) + bias + position embedding.
	conv, bias, pos := get(vision.PatchEmbd), get(vision.PatchBias), get(vision.PositionEmbd)
	x := make([][]float64, rows)
	for py := range n {
		for pxi := range n {
			r := make([]float64, d)
			for o := range d {
				s := bias[o]
				for ch := range 3 {
					for ky := range p {
						for kx := range p {
							s += f16(conv[((o*3+ch)*p+ky)*p+kx]) * px(ch, pxi*p+kx, py*p+ky)
						}
					}
				}
				r[o] = s + pos[(py*n+pxi)*d+o]
			}
			x[py*n+pxi] = r
		}
	}
	layerNorm := func(v, w, b []float64) []float64 { return refLayerNorm(v, w, b, float64(c.Eps)) }
	linear := refLinear
	hd := c.HeadDim()
	for l := range c.Layers {
		w := func(kind, s string) []float64 { return get(vision.LayerTensor(l, kind, s)) }
		q, k, v := make([][]float64, rows), make([][]float64, rows), make([][]float64, rows)
		for i := range rows {
			h := layerNorm(x[i], w("ln1", "weight"), w("ln1", "bias"))
			q[i], k[i], v[i] = linear(w("attn_q", "weight"), w("attn_q", "bias"), h), linear(w("attn_k", "weight"), w("attn_k", "bias"), h), linear(w("attn_v", "weight"), w("attn_v", "bias"), h)
		}
		wo, bo := w("attn_out", "weight"), w("attn_out", "bias")
		next := make([][]float64, rows)
		for i := range rows {
			att := refAttend(q[i], k, v, c.Heads, hd)
			r := linear(wo, bo, att)
			for e := range d {
				r[e] += x[i][e]
			}
			h := layerNorm(r, w("ln2", "weight"), w("ln2", "bias"))
			u := linear(w("ffn_up", "weight"), w("ffn_up", "bias"), h)
			for e, a := range u { // gelu_pytorch_tanh
				switch {
				case ggml && a <= -10:
					u[e] = 0
				case ggml && a >= 10:
				default:
					a = f16(a)
					u[e] = f16(0.5 * a * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(a+0.044715*a*a*a))))
				}
			}
			o := linear(w("ffn_down", "weight"), w("ffn_down", "bias"), u)
			for e := range d {
				o[e] += r[e]
			}
			next[i] = o
		}
		x = next
	}
	pw, pb := get(vision.PostLN+".weight"), get(vision.PostLN+".bias")
	for i := range rows {
		x[i] = layerNorm(x[i], pw, pb)
	}
	k, side := c.Merge, n/c.Merge
	var out []float64
	if c.Projector == vision.Idefics3 {
		// Pixel shuffle (Idefics3Connector.pixel_shuffle): token (oy, ox)
		// is its k×k window's patches side by side, in raster order; then
		// fc, [out, k²·d], no bias.
		fc := get(vision.FC)
		for oy := range side {
			for ox := range side {
				var cat []float64
				for ky := range k {
					for kx := range k {
						cat = append(cat, x[(oy*k+ky)*n+ox*k+kx]...)
					}
				}
				for o := range c.OutDim {
					var s float64
					for e, a := range cat {
						s += fc[o*len(cat)+e] * a
					}
					out = append(out, s)
				}
			}
		}
		return out
	}
	// Average pool k×k (windows in row-major order), RMSNorm with the soft
	// embedding norm's weight as stored, projection [d, out].
	soft, proj := get(vision.SoftEmbNorm), get(vision.InputProj)
	for oy := range side {
		for ox := range side {
			pooled := make([]float64, d)
			for ky := range k {
				for kx := range k {
					for e := range d {
						pooled[e] += x[(oy*k+ky)*n+ox*k+kx][e] / float64(k*k)
					}
				}
			}
			var ss float64
			for _, a := range pooled {
				ss += a * a
			}
			inv := 1 / math.Sqrt(ss/float64(d)+float64(c.Eps))
			for o := range c.OutDim {
				var s float64
				for e := range d {
					s += pooled[e] * inv * soft[e] * proj[e*c.OutDim+o]
				}
				out = append(out, s)
			}
		}
	}
	return out
}

// visionGolden is testdata/vision/llamacpp*.json (see its README).
type visionGolden struct {
	Cases map[string]visionCase `json:"cases"`
}

type visionCase struct {
	Prompt       string     `json:"prompt"`
	PromptTokens int        `json:"prompt_tokens"`
	Tokens       []int32    `json:"tokens"`
	Logprobs     []float64  `json:"logprobs"`
	Embeddings   pictureLog `json:"embeddings"` // the first picture's
	// Tiles are every picture's, in order, for an image of several
	// (idefics3's tiles and overview).
	Tiles []pictureLog `json:"tiles"`
}

// pictureLog is what llama.cpp's MTMD_DEBUG_EMBEDDINGS logs of a
// picture's embeddings.
type pictureLog struct {
	First16, Last16          []float64
	Mean, Std, Min, Max, Sum float64
}

// visionCases name each recorded case's image in testdata/vision and its
// projector's synth shape. Real shapes (a 1 GB tower whose image takes
// minutes on two cores) run only with TESSERA_VISION_REAL set (to 1, or
// to the shapes to run).
var visionCases = map[string]struct{ image, shape string }{
	"tiny-gemma3":         {"gradient32.png", "tiny-gemma3"},
	"tiny-gemma3-resized": {"gradient50x37.png", "tiny-gemma3"},
	"mid-gemma3":          {"gradient56.png", "mid-gemma3"},
	"gemma3-real":         {"gradient896.png", "gemma3"},
	// Qwen2-VL: images at their own aspect, 6×5 and 4×3 tokens.
	"tiny-qwen2vl-resized": {"gradient50x37.png", "tiny-qwen2vl"},
	"tiny-qwen2vl-small":   {"gradient13x7.png", "tiny-qwen2vl"},
	"mid-qwen2vl":          {"gradient50x37.png", "mid-qwen2vl"},
	"qwen2vl-real":         {"gradient50x37.png", "qwen2vl"},
	// Qwen3-VL: the same images; the tiny tower's 8×8 position table
	// stretched to 12×10 patches and shrunk to 8×6, the mid one's 4×4 to
	// 8×6, the real one's (Qwen3-VL 2B/4B's) 48×48 shrunk to 8×6.
	"tiny-qwen3vl-resized": {"gradient50x37.png", "tiny-qwen3vl"},
	"tiny-qwen3vl-small":   {"gradient13x7.png", "tiny-qwen3vl"},
	"mid-qwen3vl":          {"gradient50x37.png", "mid-qwen3vl"},
	"qwen3vl-2b-tower":     {"gradient50x37.png", "qwen3vl"}, // with tokens, on tiny-qwen3vl-deep
	// Qwen2.5-VL: the tiny tower's windows of 14×14 tokens hold a 6×5
	// image whole; the mid one's of 4×4 cut gradient300x150's 11×5 tokens
	// into 6 windows (the last 3×1).
	"tiny-qwen25vl-resized": {"gradient50x37.png", "tiny-qwen2.5vl"},
	"mid-qwen25vl":          {"gradient50x37.png", "mid-qwen2.5vl"},
	"mid-qwen25vl-windows":  {"gradient300x150.png", "mid-qwen2.5vl"},
	"qwen25vl-3b-tower":     {"gradient300x150.png", "qwen2.5vl"}, // the real tower, 6 windows, on tiny-qwen2vl
	// idefics3 resizes every image to its longest edge (tiny: 64, 2×2
	// tiles of 32 at most; mid: 256, tiles of 128): gradient32 upscaled
	// to 2×2 tiles, gradient50x37 upscaled and padded to 64×64,
	// gradient70x20 to 64×32 (2×1 tiles, padded), gradient300x150
	// downscaled to 256×128 (2×1).
	"tiny-idefics3":         {"gradient32.png", "tiny-idefics3"},
	"tiny-idefics3-resized": {"gradient50x37.png", "tiny-idefics3"},
	"tiny-idefics3-wide":    {"gradient70x20.png", "tiny-idefics3"},
	"mid-idefics3":          {"gradient300x150.png", "mid-idefics3"},
	// SmolVLM-256M's tower on its language model's shape
	// (smolvlm-256m): gradient400x100 to 2048 × 512, 4 × 1 tiles of 512.
	"idefics3-256m": {"gradient400x100.png", "idefics3"},
	// Gemma 4: images at their own aspect, 40 to 280 tokens of 3×3
	// patches: gradient50x37 and gradient13x7 scaled up to the least
	// tokens (8×6 and 9×5), gradient300x150 down under the most (23×11,
	// embeddings only: more than tiny-gemma4's context), for the mid
	// tower (patches of 14) up to 9×5; the real E2B tower over
	// gradient50x37 (8×6 tokens of 48 pixels).
	"tiny-gemma4v-resized":          {"gradient50x37.png", "tiny-gemma4v"},
	"tiny-gemma4v-small":            {"gradient13x7.png", "tiny-gemma4v"},
	"tiny-gemma4v-large-embeddings": {"gradient300x150.png", "tiny-gemma4v"},
	"mid-gemma4v":                   {"gradient300x150.png", "mid-gemma4v"},
	"gemma4v-real":                  {"gradient50x37.png", "gemma4v"},
}

// visionBases are the language models of projector shapes that feed
// another than tiny-gemma3 (visionFiles): SmolVLM's for idefics3, whose
// images are marked with tokens of its vocabulary.
var visionBases = map[string]string{"tiny-qwen2vl": "tiny-qwen2vl", "mid-qwen2vl": "tiny-qwen2vl", "qwen2vl": "tiny-qwen2vl",
	"tiny-qwen3vl": "tiny-qwen3vl-deep", "tiny-qwen2.5vl": "tiny-qwen2vl", "mid-qwen2.5vl": "tiny-qwen2vl", "qwen2.5vl": "tiny-qwen2vl", "mid-qwen3vl": "tiny-qwen3vl-deep", "qwen3vl": "tiny-qwen3vl-deep",
	"tiny-idefics3": "tiny-smolvlm", "mid-idefics3": "tiny-smolvlm", "idefics3": "smolvlm-256m",
	"tiny-gemma4v": "tiny-gemma4", "mid-gemma4v": "tiny-gemma4", "gemma4v": "tiny-gemma4"}

// visionBase is the synth shape of the language model a projector shape
// feeds (visionBases, else tiny-gemma3).
func visionBase(shape string) string {
	if b, ok := visionBases[shape]; ok {
		return b
	}
	return "tiny-gemma3"
}

// realShape reports whether a projector shape is a real tower's (not
// tiny- or mid-).
func realShape(shape string) bool {
	return !strings.HasPrefix(shape, "tiny-") && !strings.HasPrefix(shape, "mid-")
}

// TestVisionMatchesLlamaCpp checks, for each case recorded from
// llama.cpp's tools (testdata/vision), the image's embeddings (the first
// token's first and last 16 values and the statistics of all, which is
// what llama.cpp's MTMD_DEBUG_EMBEDDINGS logs) within 1e-3 relative, and
// the greedy tokens llama-server generates from the prompt with the image,
// position by position, with log-probabilities within 1e-3; on the CPU and
// on WebGPU. llama.cpp's CPU rounds the patch convolution's inputs to f16
// (im2col) and takes GELU from an f16 table, where Tessera stays in f32:
// the reference with those roundings agrees with llama.cpp to 1e-5
// (TestVisionReferenceExplainsLlamaCpp).
func TestVisionMatchesLlamaCpp(t *testing.T) {
	golden := readVisionGolden(t)
	dir := t.TempDir()
	files := map[string][2]string{} // projector shape: base, mmproj
	// TESSERA_VISION_REAL=1 runs every real shape; a comma-separated list
	// of projector shapes (TESSERA_VISION_REAL=qwen3vl) only those, whose
	// files alone are written (each is gigabytes).
	real := os.Getenv("TESSERA_VISION_REAL")
	realShapes := func(shape string) bool {
		return real == "1" || real != "" && slices.Contains(strings.Split(real, ","), shape)
	}
	for name := range golden.Cases { // the files of the recorded cases
		vc := visionCases[name]
		if _, ok := files[vc.shape]; !ok && vc.shape != "" && (realShapes(vc.shape) || !realShape(vc.shape)) {
			var f [2]string
			f[0], f[1] = visionFiles(t, filepath.Join(dir, vc.shape), vc.shape)
			files[vc.shape] = f
		}
	}
	for _, device := range []string{"cpu", "webgpu"} {
		t.Run(device, func(t *testing.T) {
			engines := map[string]*runtime.Engine{}
			for shape, f := range files {
				if device == "webgpu" {
					engines[shape] = loadWebGPU(t, f[0], runtime.Options{MMProj: f[1]})
					continue
				}
				eng, err := runtime.Load(f[0], runtime.Options{Device: "cpu", MMProj: f[1]})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { eng.Close() })
				engines[shape] = eng
			}
			for name, c := range golden.Cases {
				t.Run(name, func(t *testing.T) {
					vc, ok := visionCases[name]
					if !ok {
						t.Fatalf("case %s: no image", name)
					}
					eng := engines[vc.shape]
					if eng == nil {
						t.Skip("a real-shape tower: set TESSERA_VISION_REAL=1 (or =" + vc.shape + ")")
					}
					// Gemma 4: llama.cpp's f16 im2col puts its embeddings up to
					// 1.5e-3 from the exact ones (TestGemma4VisionExplainsLlamaCpp:
					// rounded so, the float64 reference gives them to 6e-6), and
					// its language model's f16 GELU table moves log-probabilities
					// by up to 4e-3 alone (TestGemma4LlamaCppGELU), which the
					// image's embeddings carry further.
					tol, lpTol := 1e-3, 1e-3
					if strings.Contains(vc.shape, "gemma4v") {
						tol, lpTol = 2e-3, 2e-2
					}
					img := readTestImage(t, vc.image)
					emb, err := eng.EncodeImage(context.Background(), img)
					if err != nil {
						t.Fatal(err)
					}
					// An image token's values: the model's width, and
					// Qwen3-VL's deepstack slices after it, as llama.cpp
					// logs them.
					dim := eng.Model().Config.Dim * (1 + eng.Model().Config.Deepstack)
					pictures := c.Tiles
					if pictures == nil {
						pictures = []pictureLog{c.Embeddings}
					}
					// Every picture is as many tokens (a Qwen-VL image, at
					// its own size, is one picture).
					n := len(emb) / dim / len(pictures)
					if len(emb) != len(pictures)*n*dim || len(pictures) > 1 && n != eng.ImageTokens() {
						t.Fatalf("%d embeddings, llama.cpp's %d pictures (of %d tokens each for tiles)", len(emb)/dim, len(pictures), eng.ImageTokens())
					}
					for k, e := range pictures {
						pic := emb[k*n*dim : (k+1)*n*dim]
						checkRelative(t, fmt.Sprintf("picture %d, token 0's first 16 values", k), pic[:16], e.First16, tol)
						checkRelative(t, fmt.Sprintf("picture %d, token 0's last 16 values", k), pic[dim-16:dim], e.Last16, tol)
						var sum float64
						for _, v := range pic {
							sum += float64(v)
						}
						if mean := sum / float64(len(pic)); math.Abs(mean-e.Mean) > 1e-3 {
							t.Errorf("picture %d: mean %.6f, llama.cpp's %.6f", k, mean, e.Mean)
						}
					}
					if len(c.Tokens) == 0 { // embeddings only
						return
					}
					var ids []int32
					var lps []float64
					var tops [][]runtime.Alternative
					st, err := eng.Generate(context.Background(), runtime.Request{Prompt: c.Prompt, Images: []*vision.Image{img},
						MaxTokens: len(c.Tokens), IgnoreEOS: true, Logprobs: true, TopLogprobs: 2}, func(tk runtime.Token) error {
						ids, lps, tops = append(ids, tk.ID), append(lps, float64(tk.Logprob)), append(tops, tk.Top)
						return nil
					})
					if err != nil {
						t.Fatal(err)
					}
					if st.PromptTokens != c.PromptTokens {
						t.Errorf("%d prompt tokens, llama.cpp's %d", st.PromptTokens, c.PromptTokens)
					}
					// A real tower's depth carries llama.cpp's f16 rounding
					// (its embeddings' 5e-4) into the log-probabilities a
					// little further: Qwen3-VL's 24 layers into 1.0e-3.
					if realShape(vc.shape) {
						lpTol = max(lpTol, 2e-3)
					}
					worst, same := 0.0, 0
					for i := range c.Tokens {
						if i < len(ids) && ids[i] != c.Tokens[i] {
							// A near tie, within the log-probabilities' tolerance,
							// that the rounding decides otherwise: the
							// continuations part from here.
							if d, ok := tie(tops[i], ids[i], c.Tokens[i], lpTol); ok {
								t.Logf("token %d: %d, llama.cpp's %d, %.2g apart here; the texts part", i, ids[i], c.Tokens[i], d)
								break
							}
						}
						if i >= len(ids) || ids[i] != c.Tokens[i] {
							t.Fatalf("token %d: %v, llama.cpp's %v", i, ids, c.Tokens)
						}
						worst = max(worst, math.Abs(lps[i]-c.Logprobs[i]))
						same++
					}
					t.Logf("%d tokens as llama.cpp's, log-probabilities within %.3g", same, worst)
					if worst > lpTol {
						t.Errorf("log-probabilities differ from llama.cpp's by up to %.3g", worst)
					}
				})
			}
		})
	}
}

// tie reports whether Tessera's top alternatives at a position hold both
// its token and llama.cpp's other one, their log-probabilities within tol,
// and how far apart they are.
func tie(top []runtime.Alternative, ours, theirs int32, tol float64) (float64, bool) {
	lp := map[int32]float64{}
	for _, a := range top {
		lp[a.ID] = float64(a.Logprob)
	}
	a, okA := lp[ours]
	b, okB := lp[theirs]
	return math.Abs(a - b), okA && okB && math.Abs(a-b) <= tol
}

// checkRelative fails unless ‖got − want‖ ≤ tol·‖want‖.
func checkRelative(t *testing.T, what string, got []float32, want []float64, tol float64) {
	t.Helper()
	var d, w float64
	for i := range want {
		d += (float64(got[i]) - want[i]) * (float64(got[i]) - want[i])
		w += want[i] * want[i]
	}
	rel := math.Sqrt(d / w)
	t.Logf("%s within %.2g (relative) of llama.cpp's", what, rel)
	if rel > tol {
		t.Errorf("%s: %v, llama.cpp's %v (%.3g relative)", what, got, want, rel)
	}
}

// readVisionGolden reads the cases of testdata/vision/llamacpp.json
// (gemma3, qwen2vl), llamacpp-idefics3.json and llamacpp-qwen3vl.json,
// each as record.py wrote it.
func readVisionGolden(t *testing.T) visionGolden {
	t.Helper()
	all := visionGolden{Cases: map[string]visionCase{}}
	for _, name := range []string{"llamacpp.json", "llamacpp-idefics3.json", "llamacpp-qwen3vl.json", "llamacpp-qwen25vl.json", "llamacpp-gemma4v.json"} {
		raw, err := os.ReadFile(filepath.Join("..", "testdata", "vision", name))
		if err != nil {
			t.Fatal(err)
		}
		var g visionGolden
		if err := json.Unmarshal(raw, &g); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		maps.Copy(all.Cases, g.Cases)
	}
	return all
}

func readTestImage(t *testing.T, name string) *vision.Image {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "testdata", "vision", name))
	if err != nil {
		t.Fatal(err)
	}
	img, err := vision.Decode(data, vision.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// visionFiles writes the recording's files: tessera synth --shape
// tiny-gemma3 --seed 1 (or visionBase's model), and its projector of the
// given synth shape, tessera synth --mmproj gemma3|idefics3|qwen2vl
// [--shape tiny|mid] --seed 1.
func visionFiles(t *testing.T, dir, shape string) (base, mm string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	base, mm, err := synth.WriteVisionFiles(dir, visionBase(shape), shape, dtype.F32, 1)
	if err != nil {
		t.Fatal(err)
	}
	if n := visionContexts[shape]; n > 0 { // as tessera synth --context n
		s, err := synth.Lookup(visionBase(shape))
		if err != nil {
			t.Fatal(err)
		}
		s.Config.Context = n
		f, err := os.Create(base)
		if err != nil {
			t.Fatal(err)
		}
		if err := errors.Join(synth.Write(f, s, dtype.F32, 1), f.Close()); err != nil {
			t.Fatal(err)
		}
	}
	return base, mm
}

// visionContexts are the context lengths of the language models whose
// projector shapes make more image tokens than the base shape's context
// holds (Gemma 3's real tower: 256).
var visionContexts = map[string]int{"gemma3": 1024}

// TestVisionReferenceExplainsLlamaCpp: the float64 reference, rounded
// where llama.cpp's CPU rounds (visionReference's ggml), gives llama.cpp's
// recorded embeddings to 1e-5: the 4e-4 between them and Tessera's is
// llama.cpp's f16 convolution and GELU table, not a difference of
// method.
func TestVisionReferenceExplainsLlamaCpp(t *testing.T) {
	golden := readVisionGolden(t)
	_, mm := visionFiles(t, t.TempDir(), "tiny-gemma3")
	c := golden.Cases["tiny-gemma3"]
	ref := visionReference(t, mm, readTestImage(t, visionCases["tiny-gemma3"].image), true)
	exact := visionReference(t, mm, readTestImage(t, visionCases["tiny-gemma3"].image), false)
	dim := len(ref) / 16
	for _, r := range []struct {
		what      string
		got, want []float64
		tol       float64
	}{
		{"rounded as llama.cpp, first 16", ref[:16], c.Embeddings.First16, 1e-5},
		{"rounded as llama.cpp, last 16", ref[dim-16 : dim], c.Embeddings.Last16, 1e-5},
	} {
		got := make([]float32, len(r.got))
		for i, v := range r.got {
			got[i] = float32(v)
		}
		checkRelative(t, r.what, got, r.want, r.tol)
	}
	var d, w float64
	for i, v := range c.Embeddings.First16 {
		d += (exact[i] - v) * (exact[i] - v)
		w += v * v
	}
	t.Logf("the exact reference is %.2g (relative) from llama.cpp's", math.Sqrt(d/w))
}

// TestImagePrefixCache: an image's positions are keyed by the image, so a
// second request with the same image finds its blocks cached (and gives
// the same tokens and log-probabilities as the first), while a request
// with another image of the same size shares nothing past the text
// before it and reads different log-probabilities: for Gemma 3's
// projector (one span an image), Qwen2-VL's (whose text after an image
// turns by M-RoPE positions the image sets) and idefics3's (a span a tile,
// with markers between them).
func TestImagePrefixCache(t *testing.T) {
	for _, shape := range []string{"tiny-gemma3", "tiny-qwen2vl", "tiny-idefics3", "tiny-qwen3vl", "mid-qwen2.5vl", "tiny-gemma4v"} {
		t.Run(shape, func(t *testing.T) { testImagePrefixCache(t, shape) })
	}
}

func testImagePrefixCache(t *testing.T, shape string) {
	base, mm := visionFiles(t, t.TempDir(), shape)
	eng, err := runtime.Load(base, runtime.Options{Device: "cpu", MMProj: mm})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	prompt := "Look: " + runtime.ImageMarker + " What is it?"
	run := func(img *vision.Image) ([]int32, []float32) {
		var ids []int32
		var lps []float32
		_, err := eng.Generate(context.Background(), runtime.Request{Prompt: prompt, Images: []*vision.Image{img}, MaxTokens: 8, IgnoreEOS: true, Logprobs: true},
			func(tk runtime.Token) error {
				ids, lps = append(ids, tk.ID), append(lps, tk.Logprob)
				return nil
			})
		if err != nil {
			t.Fatal(err)
		}
		return ids, lps
	}
	a, b := readTestImage(t, "gradient32.png"), gradient(32, 32)
	b.Pix[0] ^= 0xff // another picture
	// Where the image's tokens start and end: the first and last ids where
	// a's prompt and b's differ.
	idsA, err := eng.PromptTokens(runtime.Request{Prompt: prompt, Images: []*vision.Image{a}})
	if err != nil {
		t.Fatal(err)
	}
	idsB, err := eng.PromptTokens(runtime.Request{Prompt: prompt, Images: []*vision.Image{b}})
	if err != nil {
		t.Fatal(err)
	}
	if len(idsA) != len(idsB) {
		t.Fatalf("prompts of %d and %d tokens for images of one size", len(idsA), len(idsB))
	}
	at, end := 0, len(idsA)
	for at < len(idsA) && idsA[at] == idsB[at] {
		at++
	}
	for end > at && idsA[end-1] == idsB[end-1] {
		end--
	}
	if end-at < eng.ImageTokens() {
		t.Fatalf("the prompts differ in %d tokens, an image takes %d at least: %v, %v", end-at, eng.ImageTokens(), idsA, idsB)
	}
	ids1, lp1 := run(a)
	hits := eng.Metrics().KV.PrefixHits
	ids2, lp2 := run(a)
	reused := eng.Metrics().KV.PrefixHits - hits // tokens
	if !slices.Equal(ids1, ids2) || !slices.Equal(lp1, lp2) || reused < end {
		t.Errorf("same image again: %v %v (was %v %v), %d tokens reused, want the image's end at %d at least", ids2, lp2, ids1, lp1, reused, end)
	}
	hits = eng.Metrics().KV.PrefixHits
	_, lp3 := run(b)
	if reused := eng.Metrics().KV.PrefixHits - hits; reused > at || slices.Equal(lp1, lp3) {
		t.Errorf("another image: %d tokens reused (its tokens start at %d), log-probabilities %v (the first image's %v)", reused, at, lp3, lp1)
	}
	t.Logf("the image at %d..%d; the same image again reused %d tokens", at, end, reused)
}

// TestImageMarkersMissing: an idefics3 projector on a language model
// whose vocabulary lacks SmolVLM's image tokens is refused at load, by
// name, rather than marking images with tokens it does not have.
func TestImageMarkersMissing(t *testing.T) {
	dir := t.TempDir()
	base, _, err := synth.WriteVisionFiles(dir, "tiny-gemma3", "tiny-gemma3", dtype.F32, 1)
	if err != nil {
		t.Fatal(err)
	}
	mm := synthProjector(t, "tiny-idefics3", base) // the same width, 64
	_, err = runtime.Load(base, runtime.Options{Device: "cpu", MMProj: mm})
	if err == nil || !strings.Contains(err.Error(), "has no token") {
		t.Errorf("an idefics3 projector on tiny-gemma3: %v", err)
	}
}

// TestProjectorFromReader: a projector read from memory (as a browser
// reads its files) encodes as the same file opened by path; a path and an
// opened projector together are refused.
func TestProjectorFromReader(t *testing.T) {
	base, mm := visionFiles(t, t.TempDir(), "tiny-gemma3")
	raw, err := os.ReadFile(mm)
	if err != nil {
		t.Fatal(err)
	}
	img := readTestImage(t, "gradient32.png")
	var got [2][]float32
	for i, opts := range []runtime.Options{{Device: "cpu", MMProj: mm}, {Device: "cpu"}} {
		if i == 1 {
			if opts.Projector, err = vision.OpenReader(bytes.NewReader(raw), int64(len(raw)), "in memory"); err != nil {
				t.Fatal(err)
			}
		}
		eng, err := runtime.Load(base, opts)
		if err != nil {
			t.Fatal(err)
		}
		if got[i], err = eng.EncodeImage(context.Background(), img); err != nil {
			t.Fatal(err)
		}
		eng.Close()
	}
	if !slices.Equal(got[0], got[1]) {
		t.Error("the projector read from memory encodes differently")
	}
	vm, err := vision.OpenReader(bytes.NewReader(raw), int64(len(raw)), "in memory")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runtime.Load(base, runtime.Options{Device: "cpu", MMProj: mm, Projector: vm}); err == nil {
		t.Error("a path and an opened projector: loaded")
	}
	if _, err := vision.OpenReader(bytes.NewReader(raw[:len(raw)/2]), int64(len(raw)/2), "half"); err == nil {
		t.Error("half a file opened")
	}
}

// TestTowerBytes: a tower's weights are its tensors in f32, and its
// activations what buildTower allocates for tiny-gemma3's 64 patches
// (written out here: patches of 48 values, seven rows of the width and
// one of the feed-forward a patch, three of 32, 32 and 64 an image token,
// and the keys and values of 64 positions) and for Qwen's power-of-two
// steps no less than the largest's.
func TestTowerBytes(t *testing.T) {
	dir := t.TempDir()
	_, mm := visionFiles(t, filepath.Join(dir, "g"), "tiny-gemma3")
	vm, err := vision.Open(mm)
	if err != nil {
		t.Fatal(err)
	}
	defer vm.Close()
	var params int64
	for _, tt := range vm.Tensors {
		params += int64(tt.Elements())
	}
	w, a := runtime.TowerBytes(vm)
	c := vm.Config
	if c.ImageSize != 32 || c.PatchSize != 4 || c.Dim != 32 || c.FFN != 48 || c.Merge != 2 || c.OutDim != 64 {
		t.Fatalf("tiny-gemma3's tower changed shape (%+v): update the figures here", c)
	}
	wantActs := int64(4 * (64*(48+7*32+48) + 16*(32+32+64) + 2*64*32))
	if w != 4*params || a != wantActs {
		t.Errorf("tiny-gemma3: weights %d, activations %d; want %d and %d", w, a, 4*params, wantActs)
	}

	_, mm = visionFiles(t, filepath.Join(dir, "q"), "tiny-qwen2vl")
	qm, err := vision.Open(mm)
	if err != nil {
		t.Fatal(err)
	}
	defer qm.Close()
	qc := qm.Config
	rows := qc.MaxPixels / (qc.PatchSize * qc.PatchSize)
	_, qa := runtime.TowerBytes(qm)
	if least := int64(4 * rows * (3*qc.PatchSize*qc.PatchSize + 7*qc.Dim + qc.FFN)); qa < least {
		t.Errorf("tiny-qwen2vl: activations %d, less than its largest step's %d", qa, least)
	}
}

// refLayerNorm is LayerNorm in float64, for the towers' references.
func refLayerNorm(v, w, b []float64, eps float64) []float64 {
	var mean, vr float64
	for _, a := range v {
		mean += a
	}
	mean /= float64(len(v))
	for _, a := range v {
		vr += (a - mean) * (a - mean)
	}
	inv := 1 / math.Sqrt(vr/float64(len(v))+eps)
	out := make([]float64, len(v))
	for i, a := range v {
		out[i] = (a-mean)*inv*w[i] + b[i]
	}
	return out
}

// refLinear is b + w·v in float64, w [out, in] row-major.
func refLinear(w, b, v []float64) []float64 {
	out := make([]float64, len(w)/len(v))
	for o := range out {
		s := b[o]
		for i, a := range v {
			s += w[o*len(v)+i] * a
		}
		out[o] = s
	}
	return out
}

// refAttend is bidirectional attention in float64 of the query row q
// over every row of k and v, heads of hd.
func refAttend(q []float64, k, v [][]float64, heads, hd int) []float64 {
	att := make([]float64, heads*hd)
	for h := range heads {
		scores := make([]float64, len(k))
		mx := math.Inf(-1)
		for j := range k {
			var s float64
			for e := range hd {
				s += q[h*hd+e] * k[j][h*hd+e]
			}
			scores[j] = s / math.Sqrt(float64(hd))
			mx = math.Max(mx, scores[j])
		}
		var sum float64
		for j := range scores {
			scores[j] = math.Exp(scores[j] - mx)
			sum += scores[j]
		}
		for j := range k {
			for e := range hd {
				att[h*hd+e] += scores[j] / sum * v[j][h*hd+e]
			}
		}
	}
	return att
}

// TestImageEncodeTime: bench's image encode time covers an image's every
// picture (idefics3's tiles and overview), and a cancelled context stops
// it rather than letting a slow tower run on (a SIGTERM to `tessera bench`).
func TestImageEncodeTime(t *testing.T) {
	base, mm := visionFiles(t, t.TempDir(), "tiny-idefics3")
	eng, err := runtime.Load(base, runtime.Options{Device: "cpu", MMProj: mm})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	ms, tokens, err := eng.ImageEncodeTime(context.Background())
	if err != nil || ms <= 0 || tokens <= eng.ImageTokens() || tokens%eng.ImageTokens() != 0 {
		t.Errorf("ImageEncodeTime: %.3g ms, %d tokens, %v; want a time and whole pictures of %d tokens, more than one", ms, tokens, err, eng.ImageTokens())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := eng.ImageEncodeTime(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v, want context.Canceled", err)
	}
}

// TestImageChained: on WebGPU a sequence whose image M-RoPE places
// (Qwen2-VL, Qwen3-VL) decodes in chains of steps, each later step
// turning its row by the rotary position the image leaves it (fewer than
// the positions the sequence holds), and draws the CPU's tokens, greedy
// and sampled (the draws follow the whole distribution, so a row turned
// by its cache position instead would change them).
func TestImageChained(t *testing.T) {
	for _, shape := range []string{"tiny-qwen2vl", "tiny-qwen3vl"} {
		t.Run(shape, func(t *testing.T) {
			base, mm := visionFiles(t, t.TempDir(), shape)
			cpu, err := runtime.Load(base, runtime.Options{Device: "cpu", MMProj: mm})
			if err != nil {
				t.Fatal(err)
			}
			defer cpu.Close()
			gpu := loadWebGPU(t, base, runtime.Options{MMProj: mm, MultiStep: 4})
			img := readTestImage(t, "gradient50x37.png")
			for i, o := range []runtime.SamplerOptions{{}, {Temperature: 1.5, Seed: 11}, {Temperature: 3, Seed: 12}} {
				req := runtime.Request{Prompt: "Look: " + runtime.ImageMarker + " What is it?", Images: []*vision.Image{img},
					MaxTokens: 32, IgnoreEOS: true, Sampler: o}
				want, _, _ := generate(t, cpu, req)
				got, _, st := generate(t, gpu, req)
				if !equal(got, want) {
					t.Errorf("options %d %+v:\nwebgpu %v\n   cpu %v", i, o, got, want)
				}
				if st.Steps > st.Generated/2 {
					t.Errorf("options %d: %d tokens in %d round trips: the sequence with an image did not chain", i, st.Generated, st.Steps)
				}
			}
		})
	}
}
