package gpu_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/cpu"
	"github.com/tessera-llm/tessera/runtime/gpu"
	"github.com/tessera-llm/tessera/runtime/gpu/gputest"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
)

// twins runs every op on the WebGPU backend and on the CPU reference with
// the same inputs, so that a test states the op once and compares the two.
type twins struct {
	t   *testing.T
	rng *rand.Rand
	ref *cpu.Backend
	gpu *gpu.Backend
}

func newTwins(t *testing.T, maxRows int, opts ...webgpu.Options) *twins {
	t.Helper()
	var o webgpu.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	dev := gputest.OpenWith(t, o)
	g, err := gpu.NewBackend(dev, maxRows)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return &twins{t: t, rng: rand.New(rand.NewPCG(1, uint64(maxRows))), ref: cpu.New(0), gpu: g}
}

// pair is one value held by both backends: [0] on the CPU, [1] on the GPU.
type pair[T any] [2]T

// each runs f on the CPU reference (i = 0) and then on the GPU (i = 1).
func (w *twins) each(f func(b backend.Backend, i int)) {
	f(w.ref, 0)
	f(w.gpu, 1)
}

func (w *twins) random(n int, scale float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = (w.rng.Float32()*2 - 1) * scale
	}
	return v
}

// halves rounds v to IEEE halves in place and returns it: the values of
// an adapter stored in F16, which the backends keep in halves. Its first
// value becomes a subnormal half, which a GPU may flush to zero (WGSL
// lets it: 2⁻²⁰, a loss far within the tests' tolerances).
func (w *twins) halves(v []float32) []float32 {
	for i, x := range v {
		v[i] = dtype.HalfValue(dtype.HalfBits(x))
	}
	if len(v) > 0 {
		v[0] = 0x1p-20
	}
	return v
}

func (w *twins) tensor(rows, cols int, data []float32) pair[backend.Tensor] {
	w.t.Helper()
	var p pair[backend.Tensor]
	w.each(func(b backend.Backend, i int) {
		t, err := b.NewTensor(rows, cols)
		if err != nil {
			w.t.Fatal(err)
		}
		if data != nil {
			if err := b.Write(t, data); err != nil {
				w.t.Fatal(err)
			}
		}
		p[i] = t
	})
	return p
}

func (w *twins) weight(shape []int, data []float32) pair[backend.Weight] {
	w.t.Helper()
	raw := make([]byte, 4*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
	}
	mt := models.NewTensor("w", shape, dtype.F32, func() ([]byte, error) { return raw, nil })
	var p pair[backend.Weight]
	w.each(func(b backend.Backend, i int) {
		var err error
		if p[i], err = b.Upload(mt); err != nil {
			w.t.Fatal(err)
		}
	})
	return p
}

// kvTypes are the cache types every twin test of attention runs with.
var kvTypes = []backend.KVType{backend.KVF32, backend.KVF16, backend.KVInt8}

func (w *twins) kv(s backend.KVShape) pair[backend.KV] {
	w.t.Helper()
	var p pair[backend.KV]
	w.each(func(b backend.Backend, i int) {
		var err error
		if p[i], err = b.NewKV(s); err != nil {
			w.t.Fatal(err)
		}
	})
	return p
}

// begin starts a step of one sequence at positions pos0, pos0+1, ... whose
// block table is the identity (block size 16).
func (w *twins) begin(tokens []int32, pos0 int) {
	w.t.Helper()
	b := backend.Batch{Tokens: tokens, Pos: make([]int32, len(tokens)), Seq: make([]int32, len(tokens)), BlockSize: 16}
	table := make([]int32, (pos0+len(tokens)+15)/16)
	for i := range table {
		table[i] = int32(i)
	}
	b.Tables = [][]int32{table}
	for i := range b.Pos {
		b.Pos[i] = int32(pos0 + i)
	}
	w.beginBatch(b)
}

// beginBatch starts a step over b on both backends.
func (w *twins) beginBatch(b backend.Batch) {
	w.t.Helper()
	w.each(func(be backend.Backend, _ int) {
		if err := be.Begin(b); err != nil {
			w.t.Fatal(err)
		}
	})
}

// compare reads the first n rows of both tensors and checks that every value
// is within tol·(1+|ref|) of the reference.
func (w *twins) compare(what string, p pair[backend.Tensor], n int, tol float64) {
	w.t.Helper()
	want, err := w.ref.Read(p[0], n)
	if err != nil {
		w.t.Fatal(err)
	}
	got, err := w.gpu.Read(p[1], n)
	if err != nil {
		w.t.Fatalf("%s: %v", what, err)
	}
	worst, at := 0.0, 0
	for i := range want {
		d := math.Abs(float64(got[i]-want[i])) / (1 + math.Abs(float64(want[i])))
		if d > worst || math.IsNaN(float64(got[i])) {
			worst, at = d, i
			if math.IsNaN(float64(got[i])) {
				worst = math.Inf(1)
			}
		}
	}
	if worst > tol {
		w.t.Errorf("%s: value %d (row %d): gpu %g, cpu %g: relative error %.3g > %.3g",
			what, at, at/p[0].Cols(), got[at], want[at], worst, tol)
	}
}

func tokens(n, vocab int, rng *rand.Rand) []int32 {
	t := make([]int32, n)
	for i := range t {
		t[i] = int32(rng.IntN(vocab))
	}
	return t
}

func TestElementwiseOps(t *testing.T) {
	for _, shape := range []struct{ rows, batch, cols int }{
		{1, 1, 1}, {1, 1, 64}, {4, 3, 172}, {64, 64, 257}, {64, 17, 1000}, {8, 8, 5632},
	} {
		t.Run(fmt.Sprintf("%dx%d_batch%d", shape.rows, shape.cols, shape.batch), func(t *testing.T) {
			w := newTwins(t, shape.rows)
			n := shape.rows * shape.cols
			x := w.tensor(shape.rows, shape.cols, w.random(n, 3))
			y := w.tensor(shape.rows, shape.cols, w.random(n, 3))
			z := w.tensor(shape.rows, shape.cols, w.random(n, 3))
			// GeGLU's inputs reach far into tanh's flat tails.
			g := w.tensor(shape.rows, shape.cols, w.random(n, 40))
			s := w.tensor(shape.rows, shape.cols, w.random(n, 200))
			q := w.tensor(shape.rows, shape.cols, w.random(n, 40)) // quick GELU's gate: into exp's tails
			qu := w.tensor(shape.rows, shape.cols, w.random(n, 3))
			norm := w.weight([]int{shape.cols}, w.random(shape.cols, 2))
			w.begin(tokens(shape.batch, 10, w.rng), 0)
			w.each(func(b backend.Backend, i int) {
				b.Add(x[i], y[i])
				b.GLU(z[i], x[i], models.SiLU)
				b.GLU(g[i], y[i], models.GELUTanh)
				b.GLU(q[i], qu[i], models.GELUQuick)
				b.RMSNorm(y[i], z[i], norm[i], 1e-5)
				b.Scale(x[i], 33.94)
				b.Softcap(s[i], 30)
			})
			w.compare("add and scale", x, shape.batch, 1e-6)
			w.compare("swiglu", z, shape.batch, 1e-5)
			w.compare("geglu", g, shape.batch, 1e-5)
			w.compare("geglu quick", q, shape.batch, 1e-5)
			w.compare("rmsnorm", y, shape.batch, 1e-5)
			w.compare("softcap", s, shape.batch, 1e-5)
		})
	}
}

func TestEmbed(t *testing.T) {
	for _, tc := range []struct {
		vocab, dim, batch int
		binding           int64 // lowered storage binding limit: splits the table
	}{
		{512, 64, 1, 0}, {512, 64, 37, 0}, {1000, 96, 64, 0}, {1000, 96, 64, 96 * 4 * 300},
	} {
		t.Run(fmt.Sprintf("%dx%d_batch%d_binding%d", tc.vocab, tc.dim, tc.batch, tc.binding), func(t *testing.T) {
			w := newTwins(t, 64, webgpu.Options{MaxStorageBinding: tc.binding})
			table := w.weight([]int{tc.vocab, tc.dim}, w.random(tc.vocab*tc.dim, 1))
			if tc.binding > 0 {
				if parts := gpu.Parts(table[1]); parts < 2 {
					t.Fatalf("table in %d parts under a %d-byte binding limit", parts, tc.binding)
				}
			}
			x := w.tensor(64, tc.dim, nil)
			toks := tokens(tc.batch, tc.vocab, w.rng)
			toks[0] = int32(tc.vocab - 1)
			w.begin(toks, 0)
			w.each(func(b backend.Backend, i int) { b.Embed(x[i], table[i]) })
			w.compare("embed", x, tc.batch, 0)
		})
	}
}

func TestRope(t *testing.T) {
	for _, tc := range []struct {
		heads, headDim, dim, pos0, batch int
		layout                           models.RopeLayout
		theta                            float64
	}{
		{8, 8, 8, 0, 1, models.RopePairs, 10000},
		{8, 8, 8, 511, 1, models.RopePairs, 10000},
		{4, 64, 64, 100, 33, models.RopeHalves, 500000},
		{2, 128, 64, 2000, 5, models.RopeHalves, 10000},
		{3, 32, 32, 7, 64, models.RopePairs, 1e6},
	} {
		t.Run(fmt.Sprintf("%s_h%d_d%d_pos%d", tc.layout, tc.heads, tc.headDim, tc.pos0), func(t *testing.T) {
			w := newTwins(t, 64)
			cols := tc.heads * tc.headDim
			x := w.tensor(64, cols, w.random(64*cols, 2))
			w.begin(tokens(tc.batch, 10, w.rng), tc.pos0)
			r := backend.Rope{Heads: tc.heads, HeadDim: tc.headDim, Dim: tc.dim, Theta: tc.theta, Layout: tc.layout}
			w.each(func(b backend.Backend, i int) { b.Rope(x[i], r) })
			// Angles reach pos·1 radian: f32 sin/cos of large arguments
			// differ in the last bits between implementations.
			w.compare("rope", x, tc.batch, 5e-4)
		})
	}
}

func TestArgmax(t *testing.T) {
	w := newTwins(t, 4)
	for _, cols := range []int{1, 7, 512, 32000, 151936} {
		data := w.random(4*cols, 5)
		if cols > 1 {
			data[cols+cols/2] = 100                      // row 1: a clear winner in the middle
			data[2*cols+3], data[2*cols+cols-1] = 50, 50 // row 2: a tie picks the lower index
		}
		x := w.tensor(4, cols, data)
		want, _ := w.ref.Argmax(x[0], 4)
		got, err := w.gpu.Argmax(x[1], 4)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%d columns: gpu %v, cpu %v", cols, got, want)
		}
	}
}

// TestMatMul covers one token (GEMV), prompt chunks (GEMM) whose row count
// and widths are not multiples of any tile, and weights split across
// bindings.
func TestMatMul(t *testing.T) {
	for _, tc := range []struct {
		rows, batch, k, n int
		binding           int64
	}{
		{1, 1, 1, 1, 0}, {1, 1, 64, 64, 0}, {1, 1, 64, 512, 0}, {1, 1, 172, 64, 0},
		{1, 1, 2048, 5632, 0}, {64, 64, 64, 172, 0}, {64, 37, 257, 129, 0},
		{64, 5, 1000, 300, 0}, {16, 16, 96, 1000, 96 * 4 * 256},
	} {
		t.Run(fmt.Sprintf("m%d_k%d_n%d_binding%d", tc.batch, tc.k, tc.n, tc.binding), func(t *testing.T) {
			w := newTwins(t, tc.rows, webgpu.Options{MaxStorageBinding: tc.binding})
			wt := w.weight([]int{tc.n, tc.k}, w.random(tc.n*tc.k, 1))
			x := w.tensor(tc.rows, tc.k, w.random(tc.rows*tc.k, 1))
			y := w.tensor(tc.rows, tc.n, nil)
			w.begin(tokens(tc.batch, 10, w.rng), 0)
			w.each(func(b backend.Backend, i int) { b.MatMul(y[i], x[i], wt[i]) })
			// Sums of k products in a different order: the error grows
			// like sqrt(k) ulps of the terms.
			w.compare("matmul", y, tc.batch, 1e-6*math.Sqrt(float64(tc.k))*4)
		})
	}
}

// TestAttention stores keys and values for prompts and then attends, as
// the scheduler's steps do: prompt chunks and decode tokens of several
// sequences in one batch, each sequence's cache scattered over the pool
// through a shuffled block table, for GQA ratios 1, 2, 4 and 8, block sizes
// that do and do not divide the kernels' tiles, and a filled context.
func TestAttention(t *testing.T) {
	type chunk struct{ seq, n int }
	for _, tc := range []struct {
		heads, kvHeads, headDim, blockSize, context int
		steps                                       [][]chunk
		softcap                                     float32 // Gemma 2's score cap
		window                                      int     // sliding window
	}{
		{8, 4, 8, 16, 512, [][]chunk{{{0, 1}}, {{0, 1}}, {{0, 1}}}, 0, 0},
		{8, 8, 16, 16, 64, [][]chunk{{{0, 17}}, {{0, 1}}, {{0, 1}}}, 0, 0},
		{8, 4, 8, 16, 512, [][]chunk{{{0, 64}}, {{0, 64}}, {{0, 64}}, {{0, 1}}, {{0, 1}}}, 0, 0},
		{16, 4, 64, 16, 300, [][]chunk{{{0, 50}, {1, 14}}, {{1, 30}, {0, 1}}, {{0, 1}, {1, 1}}, {{0, 33}, {1, 1}}}, 0, 0},
		{8, 1, 128, 7, 128, [][]chunk{{{0, 3}, {1, 5}, {2, 40}}, {{0, 60}, {1, 1}, {2, 1}}, {{0, 1}, {1, 1}, {2, 1}}}, 0, 0},
		{32, 4, 64, 16, 200, [][]chunk{{{0, 20}, {1, 40}}, {{0, 1}, {1, 1}}, {{1, 1}, {0, 1}}}, 0, 0},
		{4, 2, 32, 16, 1024, append(repeat([]chunk{{0, 64}}, 15), []chunk{{0, 63}}, []chunk{{0, 1}}), 0, 0}, // fills the context
		// Gemma: soft-capped scores, sliding windows shorter than a
		// prompt chunk, than a tile and than the context, with decoding
		// and prompts of several sequences past the window.
		{8, 4, 256, 16, 128, [][]chunk{{{0, 40}, {1, 3}}, {{0, 1}, {1, 30}}, {{0, 1}, {1, 1}}}, 5, 0},
		{8, 2, 16, 16, 300, [][]chunk{{{0, 50}, {1, 14}}, {{1, 30}, {0, 1}}, {{0, 1}, {1, 1}}, {{0, 33}, {1, 1}}}, 0, 7},
		{4, 4, 64, 7, 512, [][]chunk{{{0, 64}}, {{0, 44}, {1, 20}}, {{0, 3}, {1, 1}}, {{0, 1}, {1, 63}}, {{0, 1}, {1, 1}}}, 50, 40},
		{4, 2, 32, 16, 1024, append(repeat([]chunk{{0, 64}}, 15), []chunk{{0, 63}}, []chunk{{0, 1}}), 0, 512},
	} {
		for _, kt := range kvTypes {
			if kt != backend.KVF32 && tc.context > 512 {
				continue // the long contexts read the cache as the short ones do
			}
			t.Run(fmt.Sprintf("%v_h%d_kv%d_d%d_bs%d_ctx%d_cap%g_win%d", kt, tc.heads, tc.kvHeads, tc.headDim, tc.blockSize, tc.context, tc.softcap, tc.window), func(t *testing.T) {
				w := newTwins(t, 64)
				kvDim, qDim := tc.kvHeads*tc.headDim, tc.heads*tc.headDim
				perSeq := (tc.context + tc.blockSize - 1) / tc.blockSize
				nseq := 3
				blocks := w.rng.Perm(nseq * perSeq)
				tables := make([][]int32, nseq)
				for s := range tables {
					for _, b := range blocks[s*perSeq : (s+1)*perSeq] {
						tables[s] = append(tables[s], int32(b))
					}
				}
				cache := w.kv(backend.KVShape{Layers: 2, Blocks: nseq * perSeq, BlockSize: tc.blockSize, Heads: tc.kvHeads, HeadDim: tc.headDim, Type: kt})
				a := backend.Attention{Heads: tc.heads, KVHeads: tc.kvHeads, HeadDim: tc.headDim,
					Scale: float32(1 / math.Sqrt(float64(tc.headDim))), Softcap: tc.softcap, Window: tc.window}
				if tc.softcap > 0 {
					a.Scale *= 8 // scores large enough for the cap to bend them
				}
				lens := make([]int, nseq)
				for step, chunks := range tc.steps {
					b := backend.Batch{BlockSize: tc.blockSize, Tables: tables}
					for _, c := range chunks {
						for range c.n {
							b.Tokens = append(b.Tokens, 0)
							b.Pos = append(b.Pos, int32(lens[c.seq]))
							b.Seq = append(b.Seq, int32(c.seq))
							lens[c.seq]++
						}
					}
					n := len(b.Tokens)
					q := w.tensor(64, qDim, w.random(64*qDim, 2))
					k := w.tensor(64, kvDim, w.random(64*kvDim, 2))
					v := w.tensor(64, kvDim, w.random(64*kvDim, 2))
					out := w.tensor(64, qDim, nil)
					w.beginBatch(b)
					w.each(func(be backend.Backend, i int) {
						be.StoreKV(cache[i], 1, k[i], v[i])
						be.Attend(out[i], q[i], cache[i], 1, a)
					})
					w.compare(fmt.Sprintf("step %d (%v)", step, chunks), out, n, 2e-5)
				}
			})
		}
	}
}

func repeat[T any](x T, n int) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = x
	}
	return out
}

// TestCopyBlock copies a block of a paged cache and attends over it.
func TestCopyBlock(t *testing.T) {
	for _, kt := range kvTypes {
		t.Run(kt.String(), func(t *testing.T) { testCopyBlock(t, kt) })
	}
}

func testCopyBlock(t *testing.T, kt backend.KVType) {
	w := newTwins(t, 16)
	const kvDim, hd = 32, 16
	cache := w.kv(backend.KVShape{Layers: 3, Blocks: 4, BlockSize: 8, Heads: kvDim / hd, HeadDim: hd, Type: kt})
	k := w.tensor(16, kvDim, w.random(16*kvDim, 1))
	v := w.tensor(16, kvDim, w.random(16*kvDim, 1))
	// Fill block 2 of every layer through a table [2, 0].
	b := backend.Batch{BlockSize: 8, Tables: [][]int32{{2, 0}, {3, 1}}}
	for i := range 8 {
		b.Tokens, b.Pos, b.Seq = append(b.Tokens, 0), append(b.Pos, int32(i)), append(b.Seq, 0)
	}
	w.beginBatch(b)
	w.each(func(be backend.Backend, i int) {
		for l := range 3 {
			be.StoreKV(cache[i], l, k[i], v[i])
		}
		be.CopyBlock(cache[i], 2, 3)
	})
	// Sequence 1 reads block 3 as its first block: it must see the copy.
	q := w.tensor(16, 2*hd, w.random(16*2*hd, 1))
	out := w.tensor(16, 2*hd, nil)
	b = backend.Batch{BlockSize: 8, Tables: b.Tables, Tokens: []int32{0}, Pos: []int32{7}, Seq: []int32{1}}
	w.beginBatch(b)
	a := backend.Attention{Heads: 2, KVHeads: 2, HeadDim: hd, Scale: 0.25}
	w.each(func(be backend.Backend, i int) { be.Attend(out[i], q[i], cache[i], 2, a) })
	w.compare("attend over a copied block", out, 1, 2e-5)
}

func TestTopK(t *testing.T) {
	w := newTwins(t, 1)
	for _, tc := range []struct{ cols, k int }{{1, 1}, {10, 10}, {512, 40}, {32000, 256}, {151936, 50}} {
		data := w.random(tc.cols, 4)
		if tc.cols > 8 {
			data[3], data[7] = data[5], data[5] // ties keep the lower index first
		}
		x := w.tensor(1, tc.cols, data)
		wantIDs, wantVals, err := w.ref.TopK(x[0], 0, tc.k)
		if err != nil {
			t.Fatal(err)
		}
		ids, vals, err := w.gpu.TopK(x[1], 0, tc.k)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(ids, vals) != fmt.Sprint(wantIDs, wantVals) {
			t.Errorf("top-%d of %d:\n gpu %v %v\n cpu %v %v", tc.k, tc.cols, ids, vals, wantIDs, wantVals)
		}
	}
}

// TestMask: the mask kernel sets exactly the masked values of each row to
// -Inf (rows masked in one submission keep their own masks), and argmax
// and top-k after it pick among the allowed tokens only.
func TestMask(t *testing.T) {
	for _, cols := range []int{1, 33, 512, 151936} {
		w := newTwins(t, 3)
		x := w.tensor(3, cols, w.random(3*cols, 4))
		words := (cols + 31) / 32
		masks := make([][]uint32, 3)
		for r := range masks {
			masks[r] = make([]uint32, words)
			for i := range cols {
				if w.rng.IntN(5+r*40) == 0 {
					masks[r][i/32] |= 1 << (i % 32)
				}
			}
		}
		masks[0][0] |= 1 // a row never masks everything
		w.begin(tokens(3, 10, w.rng), 0)
		w.each(func(b backend.Backend, i int) {
			for r := range masks {
				b.Mask(x[i], r, masks[r])
			}
		})
		w.compare(fmt.Sprintf("mask of %d columns", cols), x, 3, 0)
		want, _ := w.ref.Argmax(x[0], 1)
		got, err := w.gpu.Argmax(x[1], 1)
		if err != nil {
			t.Fatal(err)
		}
		if got[0] != want[0] || masks[0][want[0]/32]>>(want[0]%32)&1 == 0 {
			t.Errorf("%d columns: argmax gpu %d cpu %d, allowed %v", cols, got[0], want[0], masks[0][want[0]/32]>>(want[0]%32)&1)
		}
	}
}

// TestBiasAndHeadNorm covers the ops of Qwen2's q/k/v biases and Qwen3's
// per-head q/k norms.
func TestBiasAndHeadNorm(t *testing.T) {
	for _, tc := range []struct{ batch, heads, headDim int }{{1, 2, 8}, {17, 14, 64}, {64, 3, 128}, {5, 1, 256}} {
		w := newTwins(t, 64)
		cols := tc.heads * tc.headDim
		x := w.tensor(64, cols, w.random(64*cols, 3))
		bias := w.weight([]int{cols}, w.random(cols, 1))
		norm := w.weight([]int{tc.headDim}, w.random(tc.headDim, 2))
		w.begin(tokens(tc.batch, 10, w.rng), 0)
		w.each(func(b backend.Backend, i int) {
			b.AddBias(x[i], bias[i])
			b.HeadNorm(x[i], norm[i], tc.headDim, 1e-6)
		})
		w.compare(fmt.Sprintf("bias+headnorm %+v", tc), x, tc.batch, 1e-5)
	}
}

// TestRopeFactors: Llama 3.1's scaled frequencies on both backends.
func TestRopeFactors(t *testing.T) {
	w := newTwins(t, 64)
	factors := models.Llama3RopeFactors(64, 500000, 8, 1, 4, 8192)
	x := w.tensor(64, 4*64, w.random(64*4*64, 2))
	w.begin(tokens(40, 10, w.rng), 3000)
	r := backend.Rope{Heads: 4, HeadDim: 64, Dim: 64, Theta: 500000, Layout: models.RopeHalves, Factors: factors}
	w.each(func(b backend.Backend, i int) { b.Rope(x[i], r) })
	w.compare("rope with llama3 factors", x, 40, 2e-4)
}

// TestRopeScale: YaRN's and LongRoPE's attention factor scales the
// rotated dimensions only (a partial rotation leaves the rest), and a
// rotation of no dimensions (SmolLM3's NoPE layers) leaves x as it is.
func TestRopeScale(t *testing.T) {
	w := newTwins(t, 16)
	x := w.tensor(16, 3*40, w.random(16*3*40, 2))
	w.begin(tokens(11, 10, w.rng), 4000)
	r := backend.Rope{Heads: 3, HeadDim: 40, Dim: 24, Theta: 10000, Layout: models.RopeHalves,
		Factors: []float32{1, 1.5, 2, 4, 8, 9, 16, 30, 32, 32, 32, 32}, Scale: 1.19}
	w.each(func(b backend.Backend, i int) { b.Rope(x[i], r) })
	w.compare("rope with a scale", x, 11, 2e-4)
	none := backend.Rope{Heads: 3, HeadDim: 40, Theta: 10000}
	w.each(func(b backend.Backend, i int) { b.Rope(x[i], none) })
	w.compare("rope of no dimensions", x, 11, 2e-4)
}

// TestRopeMulti: multi-axis rotations (Qwen-VL's M-RoPE: the language
// model's contiguous and interleaved sections, the vision tower's row and
// column) turn each pair by its axis's position on both backends, rows of
// four positions each; without RopePos a multi-axis rotation turns by Pos
// as a plain one of its frequencies does.
func TestRopeMulti(t *testing.T) {
	for _, tc := range []struct {
		name           string
		heads, headDim int
		sections       [4]int
		axes           backend.RopeAxes
		rows           int
	}{
		{"mrope", 3, 16, [4]int{2, 3, 3, 0}, backend.MRope, 37},
		{"mrope-qwen2vl", 2, 128, [4]int{16, 24, 24, 0}, backend.MRope, 5},
		{"imrope-qwen3vl", 2, 128, [4]int{24, 20, 20, 0}, backend.IMRope, 19},
		{"imrope-odd", 5, 24, [4]int{5, 4, 3, 0}, backend.IMRope, 1},
		{"vision", 4, 24, [4]int{6, 6, 6, 6}, backend.VisionRope, 64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newTwins(t, 64)
			cols := tc.heads * tc.headDim
			x := w.tensor(64, cols, w.random(64*cols, 2))
			b := backend.Batch{Tokens: tokens(tc.rows, 10, w.rng), Pos: make([]int32, tc.rows), Seq: make([]int32, tc.rows),
				BlockSize: 16, Tables: [][]int32{{0, 1, 2, 3}}, RopePos: make([]int32, 4*tc.rows)}
			for i := range tc.rows {
				b.Pos[i] = int32(i)
				for a := range 4 {
					b.RopePos[4*i+a] = int32(w.rng.IntN(300))
				}
			}
			w.beginBatch(b)
			r := backend.Rope{Heads: tc.heads, HeadDim: tc.headDim, Dim: tc.headDim, Theta: 10000, Layout: models.RopeHalves,
				Sections: tc.sections, Axes: tc.axes}
			w.each(func(b backend.Backend, i int) { b.Rope(x[i], r) })
			w.compare("multi-axis rope", x, tc.rows, 5e-4)
			b.RopePos = nil
			w.beginBatch(b)
			w.each(func(b backend.Backend, i int) { b.Rope(x[i], r) })
			w.compare("multi-axis rope by Pos", x, tc.rows, 5e-4)
		})
	}
}
