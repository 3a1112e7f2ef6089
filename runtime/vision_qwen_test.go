package runtime_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/x448/float16"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/models/vision"
	"github.com/tessera-llm/tessera/runtime"
)

// TestQwenVisionReference checks Qwen2-VL's tower against a forward pass
// written here in float64 from the mmproj's raw tensors and
// transformers' Qwen2-VL vision model: the two frames' convolutions,
// pre-norm blocks whose q and k turn by the patch's row (the first
// quarter of each head's pairs) and column (the second), quick GELU, the
// merger's LayerNorm, then each 2×2 block of patches through Linear,
// GELU, Linear. The image's pixels come from vision.PreprocessSized (the
// resize is llama.cpp's, checked against it in TestVisionMatchesLlamaCpp);
// nothing else of the engine takes part. Rounded as llama.cpp's CPU
// rounds (its im2col in f16, both GELUs from f16 tables), the reference
// gives llama.cpp's recorded embeddings: the gap between them and
// Tessera's is that rounding.
func TestQwenVisionReference(t *testing.T) {
	golden := readVisionGolden(t)
	for _, tc := range []struct {
		shape, golden string
		img           *vision.Image
	}{
		{"tiny-qwen2vl", "tiny-qwen2vl-resized", readTestImage(t, "gradient50x37.png")},
		{"tiny-qwen2vl", "", gradient(48, 40)}, // the tower's size: no resize
		{"mid-qwen2vl", "mid-qwen2vl", readTestImage(t, "gradient50x37.png")},
		// Qwen3-VL: positions stretched (12×10 patches from 8×8), shrunk
		// along one axis (8×6), at the table's size (8×8: no resize).
		{"tiny-qwen3vl", "tiny-qwen3vl-resized", readTestImage(t, "gradient50x37.png")},
		{"tiny-qwen3vl", "tiny-qwen3vl-small", readTestImage(t, "gradient13x7.png")},
		{"tiny-qwen3vl", "", gradient(32, 32)},
		// (mid-qwen3vl's reference rounded as llama.cpp is 2.8e-4 from its
		// recording, Tessera 7.4e-4: a rounding not modelled here.)
		{"mid-qwen3vl", "", readTestImage(t, "gradient50x37.png")},
		// Qwen2.5-VL: one window (tiny), six (mid, 11×5 tokens).
		{"tiny-qwen2.5vl", "tiny-qwen25vl-resized", readTestImage(t, "gradient50x37.png")},
		{"mid-qwen2.5vl", "mid-qwen25vl-windows", readTestImage(t, "gradient300x150.png")},
	} {
		t.Run(fmt.Sprintf("%s/%dx%d", tc.shape, tc.img.W, tc.img.H), func(t *testing.T) {
			base, mm := visionFiles(t, t.TempDir(), tc.shape)
			dim := checkEncodesAsReference(t, base, mm, tc.img, qwenVisionReference(t, mm, tc.img, false)) // an image token's values
			if tc.golden == "" {
				return
			}
			c, ok := golden.Cases[tc.golden]
			if !ok {
				t.Fatalf("no recorded case %s", tc.golden)
			}
			ref := qwenVisionReference(t, mm, tc.img, true)
			for _, r := range []struct {
				what      string
				got, want []float64
			}{
				{"rounded as llama.cpp, first 16", ref[:16], c.Embeddings.First16},
				{"rounded as llama.cpp, last 16", ref[dim-16 : dim], c.Embeddings.Last16},
			} {
				v := make([]float32, len(r.got))
				for i, x := range r.got {
					v[i] = float32(x)
				}
				checkRelative(t, r.what, v, r.want, 2e-5)
			}
		})
	}
}

// qwenVisionReference returns img's embeddings by the Qwen2-VL,
// Qwen2.5-VL (RMSNorms, a gated SiLU feed-forward, attention within
// windows of tokens but in the full-attention layers) or Qwen3-VL
// projector at path (transformers' Qwen3-VL vision model: a
// patch bias, learned positions interpolated to the image, q, k and v
// from one projection, tanh GELU, and a deepstack merger after each
// tapped layer whose outputs follow the merger's), in float64; with
// ggml, rounded where llama.cpp's CPU rounds.
func qwenVisionReference(t *testing.T, path string, img *vision.Image, ggml bool) []float64 {
	t.Helper()
	m, err := vision.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c := m.Config
	get := func(name string) []float64 { return tensor64(t, m, name) }
	f16 := func(v float64) float64 {
		if !ggml {
			return v
		}
		return float64(float16.Fromfloat32(float32(v)).Float32())
	}
	planar, w, h := vision.PreprocessSized(img, c)
	p, d, hd := c.PatchSize, c.Dim, c.HeadDim()
	nx, ny := w/p, h/p
	rows := nx * ny
	qwen3 := c.Projector == vision.Qwen3VL
	// Two convolutions over the same pixels, added; patches row-major.
	k0, k1 := get(vision.PatchEmbd), get(vision.PatchEmbd1)
	var bias, posEmb []float64
	if qwen3 { // Qwen3-VL: the patch bias and the positions resized to the image
		bias = get(vision.PatchBias)
		posEmb = refResizePositions(get(vision.PositionEmbd), c.Patches(), nx, ny, d)
	}
	x := make([][]float64, rows)
	for py := range ny {
		for px := range nx {
			r := make([]float64, d)
			for o := range d {
				var s0, s1 float64
				for ch := range 3 {
					for ky := range p {
						for kx := range p {
							v := f16(float64(planar[ch*w*h+(py*p+ky)*w+px*p+kx]))
							at := ((o*3+ch)*p+ky)*p + kx
							s0 += f16(k0[at]) * v
							s1 += f16(k1[at]) * v
						}
					}
				}
				r[o] = s0 + s1
				if qwen3 {
					r[o] += bias[o] + posEmb[(py*nx+px)*d+o]
				}
			}
			x[py*nx+px] = r
		}
	}
	qwen25 := c.Projector == vision.Qwen25VL
	// layerNorm is the towers' norm: Qwen2.5-VL's an RMSNorm (b nil).
	layerNorm := func(v, w, b []float64) []float64 {
		if !qwen25 {
			return refLayerNorm(v, w, b, float64(c.Eps))
		}
		var ss float64
		for _, a := range v {
			ss += a * a
		}
		inv := 1 / math.Sqrt(ss/float64(len(v))+float64(c.Eps))
		out := make([]float64, len(v))
		for i, a := range v {
			out[i] = a * inv * w[i]
		}
		return out
	}
	// window is the attention window of patch i (Qwen2.5-VL's windows of
	// WindowTokens() tokens a side, row by row), or 0 for every patch.
	window := func(i int) int {
		if !qwen25 {
			return 0
		}
		g, tx := c.WindowTokens(), nx/2
		ty, tc := i/nx/2, i%nx/2
		return (ty/g)*((tx+g-1)/g) + tc/g
	}
	linear := refLinear
	// rope turns each head of v (of the patch at row py, column px): the
	// first quarter of its pairs by py, the second by px, each quarter's
	// frequencies 10000^(-2j/(hd/2)).
	rope := func(v []float64, py, px int) {
		for hh := range c.Heads {
			head := v[hh*hd : (hh+1)*hd]
			for i := range hd / 2 {
				pos, j := py, i
				if i >= hd/4 {
					pos, j = px, i-hd/4
				}
				angle := float64(pos) * math.Pow(10000, -2*float64(j)/float64(hd/2))
				a, b := head[i], head[i+hd/2]
				head[i], head[i+hd/2] = a*math.Cos(angle)-b*math.Sin(angle), a*math.Sin(angle)+b*math.Cos(angle)
			}
		}
	}
	// gelu is the tower's and mergers' GELU (tanh's; llama.cpp's from an f16
	// table, clamped where its table is); quick GELU, x·σ(1.702x), for
	// Qwen2-VL's tower.
	gelu := func(a float64) float64 {
		switch {
		case ggml && a <= -10:
			return 0
		case ggml && a >= 10:
			return a
		}
		a = f16(a)
		return f16(0.5 * a * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(a+0.044715*a*a*a))))
	}
	act := func(a float64) float64 {
		if qwen3 {
			return gelu(a)
		}
		a = f16(a)
		return f16(a / (1 + math.Exp(-1.702*a)))
	}
	// merged is token (bx, by)'s four patches of x side by side (the 2×2
	// block at patch column bx, row by), each through norm when given.
	merged := func(x [][]float64, bx, by int, norm func([]float64) []float64) []float64 {
		var m []float64
		for _, dd := range [][2]int{{0, 0}, {0, 1}, {1, 0}, {1, 1}} {
			r := x[(by+dd[0])*nx+bx+dd[1]]
			if norm != nil {
				r = norm(r)
			}
			m = append(m, r...)
		}
		return m
	}
	// mlp is a merger's Linear, GELU, Linear.
	mlp := func(w1, b1, w2, b2, in []float64) []float64 {
		hid := linear(w1, b1, in)
		for e, a := range hid {
			hid[e] = gelu(a)
		}
		return linear(w2, b2, hid)
	}
	var deep [][][]float64 // Qwen3-VL: each deepstack merger's output, token by token
	for l := range c.Layers {
		lw := func(kind, s string) []float64 { return get(vision.LayerTensor(l, kind, s)) }
		var wq, bq, wk, bk, wv, bv []float64
		if qwen3 { // one fused projection: q's rows, then k's, then v's
			w, b := lw(vision.AttnQKV, "weight"), lw(vision.AttnQKV, "bias")
			wq, wk, wv = w[:d*d], w[d*d:2*d*d], w[2*d*d:]
			bq, bk, bv = b[:d], b[d:2*d], b[2*d:]
		} else {
			wq, bq, wk, bk, wv, bv = lw("attn_q", "weight"), lw("attn_q", "bias"), lw("attn_k", "weight"), lw("attn_k", "bias"), lw("attn_v", "weight"), lw("attn_v", "bias")
		}
		// lnB is a norm's bias (none for Qwen2.5-VL's RMSNorms).
		lnB := func(kind string) []float64 {
			if qwen25 {
				return nil
			}
			return lw(kind, "bias")
		}
		q, k, v := make([][]float64, rows), make([][]float64, rows), make([][]float64, rows)
		for i := range rows {
			hn := layerNorm(x[i], lw("ln1", "weight"), lnB("ln1"))
			q[i], k[i], v[i] = linear(wq, bq, hn), linear(wk, bk, hn), linear(wv, bv, hn)
			rope(q[i], i/nx, i%nx)
			rope(k[i], i/nx, i%nx)
		}
		next := make([][]float64, rows)
		for i := range rows {
			kk, vv := k, v
			if !c.FullAttention(l) { // Qwen2.5-VL: only the patches of i's window
				kk, vv = nil, nil
				for j := range rows {
					if window(j) == window(i) {
						kk, vv = append(kk, k[j]), append(vv, v[j])
					}
				}
			}
			att := refAttend(q[i], kk, vv, c.Heads, hd)
			r := linear(lw("attn_out", "weight"), lw("attn_out", "bias"), att)
			for e := range d {
				r[e] += x[i][e]
			}
			hn := layerNorm(r, lw("ln2", "weight"), lnB("ln2"))
			u := linear(lw("ffn_up", "weight"), lw("ffn_up", "bias"), hn)
			if qwen25 { // gated: silu(W_gate·h)·(W_up·h)
				for e, a := range linear(lw("ffn_gate", "weight"), lw("ffn_gate", "bias"), hn) {
					u[e] *= a / (1 + math.Exp(-a))
				}
			} else {
				for e, a := range u {
					u[e] = act(a)
				}
			}
			o := linear(lw("ffn_down", "weight"), lw("ffn_down", "bias"), u)
			for e := range d {
				o[e] += r[e]
			}
			next[i] = o
		}
		x = next
		if qwen3 && slices.Contains(c.Deepstack, l) {
			// A deepstack merger: LayerNorm over each token's four
			// patches together, then its MLP.
			ds := func(kind, s string) []float64 { return get(vision.DeepstackTensor(l, kind, s)) }
			nw, nb := ds(vision.DeepstackNorm, "weight"), ds(vision.DeepstackNorm, "bias")
			var toks [][]float64
			for by := 0; by < ny; by += 2 {
				for bx := 0; bx < nx; bx += 2 {
					toks = append(toks, mlp(ds(vision.DeepstackFC1, "weight"), ds(vision.DeepstackFC1, "bias"),
						ds(vision.DeepstackFC2, "weight"), ds(vision.DeepstackFC2, "bias"), layerNorm(merged(x, bx, by, nil), nw, nb)))
				}
			}
			deep = append(deep, toks)
		}
	}
	pw := get(vision.PostLN + ".weight")
	var pb []float64
	if !qwen25 {
		pb = get(vision.PostLN + ".bias")
	}
	upW, upB := get(vision.MergerUp+".weight"), get(vision.MergerUp+".bias")
	dnW, dnB := get(vision.MergerDown+".weight"), get(vision.MergerDown+".bias")
	var out []float64
	tok := 0
	for by := 0; by < ny; by += 2 {
		for bx := 0; bx < nx; bx += 2 {
			norm := func(r []float64) []float64 { return layerNorm(r, pw, pb) }
			out = append(out, mlp(upW, upB, dnW, dnB, merged(x, bx, by, norm))...)
			for _, ds := range deep { // after the merger's, each deepstack merger's
				out = append(out, ds[tok]...)
			}
			tok++
		}
	}
	return out
}

// refResizePositions is transformers' Qwen3-VL position interpolation
// (fast_pos_embed_interpolate) of a side×side table of rows of d to
// nx×ny, in float64: output (ox, oy) at table coordinates along a
// linspace from 0 to side−1, bilinear between its four neighbours.
func refResizePositions(table []float64, side, nx, ny, d int) []float64 {
	if nx == side && ny == side {
		return table
	}
	at := func(o, out int) (i0, i1 int, f float64) {
		x := 0.0
		if out > 1 {
			x = float64(o) * float64(side-1) / float64(out-1)
		}
		i0 = int(math.Floor(x))
		return i0, min(i0+1, side-1), x - float64(i0)
	}
	out := make([]float64, nx*ny*d)
	for oy := range ny {
		y0, y1, fy := at(oy, ny)
		for ox := range nx {
			x0, x1, fx := at(ox, nx)
			for e := range d {
				v := func(y, x int) float64 { return table[(y*side+x)*d+e] }
				out[(oy*nx+ox)*d+e] = (1-fy)*((1-fx)*v(y0, x0)+fx*v(y0, x1)) + fy*((1-fx)*v(y1, x0)+fx*v(y1, x1))
			}
		}
	}
	return out
}

// TestQwenProjectorRefused: Qwen2-VL files that llama.cpp would read
// otherwise than Tessera are refused: a feed-forward as wide as the
// tower (clip.cpp would take its up and down for swapped) and heads whose
// width the 2-D RoPE cannot split in four; the right pairing of
// projector and language model (Qwen3-VL's deepstack slices included) is
// checked at load.
func TestQwenProjectorRefused(t *testing.T) {
	dir := t.TempDir()
	base, _, err := synth.WriteVisionFiles(dir, "tiny-qwen2vl", "tiny-qwen2vl", dtype.F32, 1)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, edit func(*vision.Config)) string {
		c, err := synth.ProjectorShape("tiny-qwen2vl", 64)
		if err != nil {
			t.Fatal(err)
		}
		edit(&c)
		path := filepath.Join(dir, name)
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := synth.WriteProjector(f, c, dtype.F32, 1); err != nil {
			t.Fatal(err)
		}
		f.Close()
		return path
	}
	for _, tc := range []struct {
		what, want string
		edit       func(*vision.Config)
	}{
		{"a feed-forward as wide as the tower", "ffn ≠", func(c *vision.Config) { c.FFN = c.Dim }},
		{"heads of 2", "multiple of 4", func(c *vision.Config) { c.Heads = 16 }},
	} {
		_, err := runtime.Load(base, runtime.Options{Device: "cpu", MMProj: write(tc.want+".gguf", tc.edit)})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.what, err, tc.want)
		}
	}
	gemma, _, err := synth.WriteVisionFiles(dir, "tiny-gemma3", "tiny-gemma3", dtype.F32, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runtime.Load(gemma, runtime.Options{Device: "cpu", MMProj: write("ok.gguf", func(*vision.Config) {})}); err == nil {
		t.Error("Qwen2-VL's projector with Gemma 3: loaded")
	}
	// Qwen3-VL's projector feeds a qwen3vl model taking as many deepstack
	// slices as it gives (llama.cpp: the model's input width is the
	// projector's output width), and no other.
	for _, sub := range []string{"deep", "plain"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	deep, q3, err := synth.WriteVisionFiles(filepath.Join(dir, "deep"), "tiny-qwen3vl-deep", "tiny-qwen3vl", dtype.F32, 1)
	if err != nil {
		t.Fatal(err)
	}
	plain, q25, err := synth.WriteVisionFiles(filepath.Join(dir, "plain"), "tiny-qwen3vl", "tiny-qwen2.5vl", dtype.F32, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ what, base, mm, want string }{
		{"Qwen3-VL's projector with Qwen2-VL", base, q3, "not qwen3vl"},
		{"Qwen3-VL's projector with a model without deepstack", plain, q3, "deepstack"},
		{"Qwen2.5-VL's projector with Qwen3-VL without deepstack", plain, q25, "not qwen2vl"},
		{"Qwen2-VL's projector with Qwen3-VL", deep, write("ok.gguf", func(*vision.Config) {}), "not qwen2vl"},
		{"Qwen2.5-VL's projector with Qwen3-VL", deep, q25, "not qwen2vl"},
	} {
		e, err := runtime.Load(tc.base, runtime.Options{Device: "cpu", MMProj: tc.mm})
		if err == nil {
			e.Close()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.what, err, tc.want)
		}
	}
}
