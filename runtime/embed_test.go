package runtime_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/tokenizer"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/gpu/gputest"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
)

// embedTexts are inputs of many lengths, from one word to past the
// attention kernels' tiles, with accents, CJK and punctuation.
var embedTexts = []string{
	"a",
	"the quick brown fox jumps over the lazy dog.",
	"Héllo, wörld! naïve café — 中文字 日本語?",
	strings.Repeat("abc def, ghi; jkl! ", 12),
	"x y",
	strings.Repeat("mn op qr st uv wx yz ", 9),
}

func loadEmbedder(t *testing.T, path string, opts runtime.Options) *runtime.Embedder {
	t.Helper()
	if opts.Quant == "" {
		opts.Quant = "f32"
	}
	e, err := runtime.LoadEmbedder(path, opts)
	if opts.Device == "webgpu" && errors.Is(err, webgpu.ErrNoAdapter) {
		gputest.NoDevice(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func embed(t *testing.T, e *runtime.Embedder, texts []string) [][]float32 {
	t.Helper()
	v, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	if len(v) != len(texts) {
		t.Fatalf("%d embeddings for %d texts", len(v), len(texts))
	}
	return v
}

// cosineDistance is 1 - cos(a, b), in float64.
func cosineDistance[A, B float32 | float64](a []A, b []B) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	return 1 - ab/math.Sqrt(aa*bb)
}

// TestEmbedWebGPUMatchesCPU: on synthetic encoders, tiny and at real
// shapes, WebGPU's embeddings are the CPU reference's within 1e-5 cosine
// distance, and embedding the texts together gives what embedding each
// alone gives.
func TestEmbedWebGPUMatchesCPU(t *testing.T) {
	for _, tc := range []struct {
		shape string
		typ   dtype.Type
		texts int // of embedTexts: nomic-embed-text's 137M parameters take a minute on two cores
	}{{"tiny-bert", dtype.F32, 6}, {"tiny-bert-cls", dtype.F32, 6}, {"tiny-nomic-bert", dtype.F16, 6},
		{"all-minilm-l6", dtype.F32, 6}, {"nomic-embed-text", dtype.F16, 3}} {
		t.Run(tc.shape, func(t *testing.T) {
			if testing.Short() && tc.shape == "nomic-embed-text" {
				t.Skip("-short")
			}
			texts := embedTexts[:tc.texts]
			path := synthModel(t, tc.shape, tc.typ)
			c := loadEmbedder(t, path, runtime.Options{Device: "cpu"})
			g := loadEmbedder(t, path, runtime.Options{Device: "webgpu"})
			want, got := embed(t, c, texts), embed(t, g, texts)
			for i := range want {
				if len(want[i]) != c.Dim() || len(got[i]) != c.Dim() {
					t.Fatalf("text %d: %d and %d values, want %d", i, len(want[i]), len(got[i]), c.Dim())
				}
				if d := cosineDistance(got[i], want[i]); !(d < 1e-5) {
					t.Errorf("text %d: webgpu and cpu at cosine distance %.3g", i, d)
				}
			}
			if tc.texts < len(embedTexts) {
				return // batching is tested on the smaller models
			}
			for i, text := range texts {
				alone := [][]float32{embed(t, c, []string{text})[0], embed(t, g, []string{text})[0]}
				for b, batched := range [][][]float32{want, got} {
					if d := cosineDistance(alone[b], batched[i]); !(d < 1e-7) {
						t.Errorf("%s: text %d alone and batched at cosine distance %.3g", c.Backend().Name(), i, d)
					}
				}
			}
		})
	}
}

// TestEmbedMatchesReference: the encoders' embeddings are those of a
// float64 forward written from transformers' BertModel and nomic's
// NomicBertModel (post-norm blocks, exact GELU or SwiGLU, learned
// positions or rotary halves, mean or CLS pooling).
func TestEmbedMatchesReference(t *testing.T) {
	for _, shape := range []string{"tiny-bert", "tiny-bert-cls", "tiny-nomic-bert"} {
		t.Run(shape, func(t *testing.T) {
			path := synthModel(t, shape, dtype.F32)
			e := loadEmbedder(t, path, runtime.Options{Device: "cpu"})
			got := embed(t, e, embedTexts)
			for i, text := range embedTexts {
				ids := e.Tokenize(text)
				want := referenceEncoder(t, e.Model(), ids, nil)
				if d := cosineDistance(got[i], want); !(d < 1e-9) {
					t.Errorf("text %d: engine and reference at cosine distance %.3g", i, d)
				}
			}
		})
	}
}

// TestRerank: a synthetic cross-encoder scores pairs as the reference's
// classification head does, on both backends, and refuses to embed.
func TestRerank(t *testing.T) {
	path := synthModel(t, "tiny-reranker", dtype.F32)
	docs := []string{"the cat sat on the mat", "a", strings.Repeat("dogs bark at night. ", 8), "café"}
	c := loadEmbedder(t, path, runtime.Options{Device: "cpu"})
	want, err := c.Rerank(context.Background(), "where did the cat sit?", docs)
	if err != nil {
		t.Fatal(err)
	}
	wp := c.Tokenizer().(*tokenizer.WordPiece)
	for i, d := range docs {
		ids, types := wp.EncodePair("where did the cat sit?", d)
		ref := referenceEncoder(t, c.Model(), toInt32(ids), toInt32(types))
		if math.Abs(float64(want[i])-ref[0]) > 1e-5*(1+math.Abs(ref[0])) {
			t.Errorf("doc %d: score %g, reference %g", i, want[i], ref[0])
		}
	}
	g := loadEmbedder(t, path, runtime.Options{Device: "webgpu"})
	got, err := g.Rerank(context.Background(), "where did the cat sit?", docs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if math.Abs(float64(got[i]-want[i])) > 1e-4*(1+math.Abs(float64(want[i]))) {
			t.Errorf("doc %d: webgpu %g, cpu %g", i, got[i], want[i])
		}
	}
	if _, err := c.Embed(context.Background(), docs); !errors.Is(err, runtime.ErrNotEmbedding) {
		t.Errorf("embedding with a reranker: %v", err)
	}
}

func toInt32(v []int) []int32 {
	out := make([]int32, len(v))
	for i, x := range v {
		out[i] = int32(x)
	}
	return out
}

// referenceEncoder is an encoder's forward pass in float64 for one input,
// straight from the modeling code: embeddings (+ token types, + learned
// positions) and a LayerNorm; per layer, attention over every position,
// the residual and a LayerNorm, the feed-forward, the residual and a
// LayerNorm; then the model's pooling (a reranker: CLS, dense, tanh,
// output layer). Mean and CLS embeddings come back L2-normalised.
func referenceEncoder(t *testing.T, m *models.Model, ids, types []int32) []float64 {
	t.Helper()
	c := m.Config
	get := func(name string) []float64 { return tensor64(t, m, name) }
	has := func(name string) bool { _, ok := m.Tensors[name]; return ok }
	n, d := len(ids), c.Dim
	linear := func(x []float64, w, b string, out int) []float64 {
		wv := get(w)
		var bv []float64
		if has(b) {
			bv = get(b)
		}
		in := len(wv) / out
		y := make([]float64, len(x)/in*out)
		for r := range len(x) / in {
			for o := range out {
				s := 0.0
				for i := range in {
					s += x[r*in+i] * wv[o*in+i]
				}
				if bv != nil {
					s += bv[o]
				}
				y[r*out+o] = s
			}
		}
		return y
	}
	layerNorm := func(x []float64, name string) []float64 {
		w, b := get(name+".weight"), get(name+".bias")
		y := make([]float64, len(x))
		for r := range len(x) / d {
			row := x[r*d : (r+1)*d]
			mean, vr := 0.0, 0.0
			for _, v := range row {
				mean += v
			}
			mean /= float64(d)
			for _, v := range row {
				vr += (v - mean) * (v - mean)
			}
			inv := 1 / math.Sqrt(vr/float64(d)+float64(c.NormEps))
			for i, v := range row {
				y[r*d+i] = (v-mean)*inv*w[i] + b[i]
			}
		}
		return y
	}
	x := make([]float64, n*d)
	tok := get(models.TokenEmbedding)
	for p, id := range ids {
		copy(x[p*d:], tok[int(id)*d:int(id+1)*d])
		if has(models.TokenTypes) {
			ty := 0
			if types != nil {
				ty = int(types[p])
			}
			tt := get(models.TokenTypes)
			for i := range d {
				x[p*d+i] += tt[ty*d+i]
			}
		}
		if has(models.PositionEmbed) {
			pe := get(models.PositionEmbed)
			for i := range d {
				x[p*d+i] += pe[p*d+i]
			}
		}
	}
	x = layerNorm(x, models.TokenEmbedNorm)
	hd, heads := c.HeadDim, c.Heads
	rotate := func(v []float64) {
		for p := range n {
			for h := range heads {
				head := v[p*d+h*hd : p*d+(h+1)*hd]
				for i := range hd / 2 {
					f := math.Pow(c.RopeTheta, -float64(2*i)/float64(hd))
					cs, sn := math.Cos(float64(p)*f), math.Sin(float64(p)*f)
					a, b := head[i], head[i+hd/2]
					head[i], head[i+hd/2] = a*cs-b*sn, a*sn+b*cs
				}
			}
		}
	}
	for l := range c.Layers {
		w := func(k string) string { return models.LayerTensor(l, k) }
		b := func(k string) string { return models.LayerBias(l, k) }
		q, k, v := linear(x, w(models.AttnQ), b(models.AttnQ), d), linear(x, w(models.AttnK), b(models.AttnK), d), linear(x, w(models.AttnV), b(models.AttnV), d)
		if !c.Encoder.Positions {
			rotate(q)
			rotate(k)
		}
		att := make([]float64, n*d)
		for h := range heads {
			for i := range n {
				scores := make([]float64, n)
				mx := math.Inf(-1)
				for j := range n {
					s := 0.0
					for e := range hd {
						s += q[i*d+h*hd+e] * k[j*d+h*hd+e]
					}
					scores[j] = s / math.Sqrt(float64(hd))
					mx = math.Max(mx, scores[j])
				}
				sum := 0.0
				for j := range scores {
					scores[j] = math.Exp(scores[j] - mx)
					sum += scores[j]
				}
				for j := range n {
					for e := range hd {
						att[i*d+h*hd+e] += scores[j] / sum * v[j*d+h*hd+e]
					}
				}
			}
		}
		o := linear(att, w(models.AttnOutput), b(models.AttnOutput), d)
		for i := range o {
			o[i] += x[i]
		}
		x = layerNorm(o, strings.TrimSuffix(w(models.AttnOutputNorm), ".weight"))
		up := linear(x, w(models.FFNUp), b(models.FFNUp), c.FFN)
		if c.Encoder.Gated {
			gate := linear(x, w(models.FFNGate), b(models.FFNGate), c.FFN)
			for i := range up {
				up[i] *= gate[i] / (1 + math.Exp(-gate[i]))
			}
		} else {
			for i, u := range up {
				up[i] = 0.5 * u * (1 + math.Erf(u/math.Sqrt2))
			}
		}
		down := linear(up, w(models.FFNDown), b(models.FFNDown), d)
		for i := range down {
			down[i] += x[i]
		}
		x = layerNorm(down, strings.TrimSuffix(w(models.LayerOutputNorm), ".weight"))
	}
	pooled := make([]float64, d)
	switch c.Pooling {
	case models.PoolMean:
		for p := range n {
			for i := range d {
				pooled[i] += x[p*d+i] / float64(n)
			}
		}
	case models.PoolCLS, models.PoolRank:
		copy(pooled, x[:d])
	}
	if c.Pooling == models.PoolRank {
		h := linear(pooled, models.ClassifierHidden+".weight", models.ClassifierHidden+".bias", d)
		for i := range h {
			h[i] = math.Tanh(h[i])
		}
		return linear(h, models.ClassifierOutput+".weight", models.ClassifierOutput+".bias", c.Encoder.Classes)
	}
	norm := 0.0
	for _, v := range pooled {
		norm += v * v
	}
	for i := range pooled {
		pooled[i] /= math.Sqrt(norm)
	}
	return pooled
}

// TestDecoderEmbedder: a Qwen3 with last-token pooling embeds with the
// final norm's row of its last token, the row the head turns into that
// position's logits, on both backends.
func TestDecoderEmbedder(t *testing.T) {
	path := synthModel(t, "tiny-qwen3-embedding", dtype.F32)
	c := loadEmbedder(t, path, runtime.Options{Device: "cpu"})
	texts := []string{"abc def ghi", "a", strings.Repeat("xyz uvw ", 30)}
	want := embed(t, c, texts)
	g := loadEmbedder(t, path, runtime.Options{Device: "webgpu"})
	for i, v := range embed(t, g, texts) {
		if d := cosineDistance(v, want[i]); !(d < 1e-5) {
			t.Errorf("text %d: webgpu and cpu at cosine distance %.3g", i, d)
		}
	}
	// The logits after the last token are the tied head times the raw
	// (unnormalised) embedding.
	eng, err := runtime.Load(path, runtime.Options{Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	table, err := eng.Model().Tensors[models.TokenEmbedding].Float32()
	if err != nil {
		t.Fatal(err)
	}
	dim := eng.Model().Config.Dim
	for i, text := range texts {
		ids := c.Tokenize(text)
		raw, err := c.EmbedTokens(context.Background(), [][]int32{ids}, false)
		if err != nil {
			t.Fatal(err)
		}
		err = eng.Score(context.Background(), append(ids, 0), func(pos int, logits []float32) error {
			if pos != len(ids)-1 {
				return nil
			}
			for tok := range logits {
				var s float64
				for j := range dim {
					s += float64(table[tok*dim+j]) * float64(raw[0][j])
				}
				if math.Abs(s-float64(logits[tok])) > 1e-4*(1+math.Abs(s)) {
					return errors.New("logits are not the head of the embedding")
				}
			}
			return nil
		})
		if err != nil {
			t.Errorf("text %d: %v", i, err)
		}
	}
}

// TestEmbedBadInput: inputs the model cannot take are refused with the
// engine's errors, and a closed embedder refuses work.
func TestEmbedBadInput(t *testing.T) {
	path := synthModel(t, "tiny-bert", dtype.F32)
	e, err := runtime.LoadEmbedder(path, runtime.Options{Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		in   [][]int32
		want error
	}{
		{[][]int32{{}}, runtime.ErrBadRequest},
		{[][]int32{{101, 1 << 20}}, runtime.ErrBadRequest},
		{[][]int32{{101, -1}}, runtime.ErrBadRequest},
		{[][]int32{make([]int32, 513)}, runtime.ErrContextFull},
	} {
		if _, err := e.EmbedTokens(ctx, tc.in, true); !errors.Is(err, tc.want) {
			t.Errorf("%d tokens: %v, want %v", len(tc.in[0]), err, tc.want)
		}
	}
	if _, err := e.Rerank(ctx, "q", []string{"d"}); !errors.Is(err, runtime.ErrNotEmbedding) {
		t.Errorf("rerank with an embedding model: %v", err)
	}
	e.Close()
	if _, err := e.Embed(ctx, []string{"x"}); !errors.Is(err, runtime.ErrEngineClosed) {
		t.Errorf("after Close: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestEmbedStorage: an encoder kept in f16 (WebGPU's default for
// encoders) or int4 on the CPU stays near its f32 embeddings.
func TestEmbedStorage(t *testing.T) {
	path := synthModel(t, "tiny-bert", dtype.F32)
	want := embed(t, loadEmbedder(t, path, runtime.Options{Device: "cpu"}), embedTexts)
	for quant, tol := range map[string]float64{"f16": 1e-5, "int4": 0.05} {
		got := embed(t, loadEmbedder(t, path, runtime.Options{Device: "cpu", Quant: quant}), embedTexts)
		for i := range want {
			if d := cosineDistance(got[i], want[i]); !(d < tol) || d == 0 {
				t.Errorf("%s text %d: cosine distance %.3g from f32 (want in (0, %g))", quant, i, d, tol)
			}
		}
	}
}
