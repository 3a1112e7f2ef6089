package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/tensor"
	"github.com/tessera-llm/tessera/runtime/backend"
)

// TestMatMulBlocksRows: a product of m rows with a matrix at its file's
// bits gives each row the bits of that row's product alone, for every m
// (the tile kernels take rows eight and four at a time, the rest one by
// one; wide rows in blocks of columns),
// on one worker and on three, for types with a min per group (Q4_K), per
// half group (Q2_K) and without (Q4_0, Q6_K), at widths with a lone last
// group and a short last chunk (and a K quant's rows wider than the wide
// kernel's block of columns).
func TestMatMulBlocksRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct {
		typ        dtype.Type
		rows, cols int
	}{{dtype.Q4_0, 37, 224}, {dtype.Q4_0, 5, 32}, {dtype.Q4_0, 21, 1600}, {dtype.Q4_0, 70, 1600}, {dtype.MXFP4, 9, 800}, {dtype.Q4_K, 19, 512}, {dtype.Q4_K, 35, 1280}, {dtype.Q2_K, 21, 256}, {dtype.Q6_K, 17, 768}, {dtype.Q8_0, 40, 288}} {
		vals := make([]float32, c.rows*c.cols)
		for i := range vals {
			vals[i] = float32(rng.NormFloat64())
		}
		raw, err := dtype.Quantize(c.typ, vals)
		if err != nil {
			t.Fatal(err)
		}
		bl, err := dtype.BlocksFromGGML(c.typ, raw, c.rows, c.cols)
		if err != nil {
			t.Fatal(err)
		}
		w := &QWeight{shape: []int{c.rows, c.cols}, storage: backend.Blocks, Blocks: bl}
		// 1..11 rows, 24: at 1600 columns enough to share the packing of
		// the rows' tiles among the workers, and 70: the wide kernel's
		// calls of several blocks of weight rows (kernel.WideBlocksFor),
		// two rows left over.
		ms := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 24, 70}
		const maxM = 70
		x := make([]float32, maxM*c.cols)
		for i := range x {
			x[i] = float32(rng.NormFloat64()) * float32(1+i/c.cols)
		}
		solo := make([]float32, maxM*c.rows)
		for i := range maxM {
			MatMulQ(solo[i*c.rows:(i+1)*c.rows], x[i*c.cols:(i+1)*c.cols], w, 1, c.cols, c.rows, 1)
		}
		for _, workers := range []int{1, 3} {
			for _, m := range ms {
				got := make([]float32, m*c.rows)
				MatMulQ(got, x[:m*c.cols], w, m, c.cols, c.rows, workers)
				for i, v := range got {
					if math.Float32bits(v) != math.Float32bits(solo[i]) {
						t.Fatalf("%v %d×%d, %d rows on %d workers: [%d][%d] = %g, alone %g", c.typ, c.rows, c.cols, m, workers, i/c.rows, i%c.rows, v, solo[i])
					}
				}
			}
		}
	}
}

// randomBlocks is a rows × cols weight of normal random values quantized
// to typ and kept as blocks, as a GGUF's quantized matrix is.
func randomBlocks(t *testing.T, rng *rand.Rand, typ dtype.Type, rows, cols int) *QWeight {
	t.Helper()
	vals := make([]float32, rows*cols)
	for i := range vals {
		vals[i] = float32(rng.NormFloat64())
	}
	raw, err := dtype.Quantize(typ, vals)
	if err != nil {
		t.Fatal(err)
	}
	bl, err := dtype.BlocksFromGGML(typ, raw, rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	return &QWeight{shape: []int{rows, cols}, storage: backend.Blocks, Blocks: bl}
}

// TestMatMulReusesRows: the backend's products of one input by several
// block weights in a row (q, k and v; gate and up), which share its
// quantized rows and their tiles, give each product's bits alone, when a
// K quant's weight (whose per-super-block codes the rows gain on the way)
// comes first, between or last, at row counts with and without tiles.
func TestMatMulReusesRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const cols = 512
	weight := func(typ dtype.Type, rows int) *QWeight { return randomBlocks(t, rng, typ, rows, cols) }
	q40, q6k, q4k := weight(dtype.Q4_0, 19), weight(dtype.Q6_K, 23), weight(dtype.Q4_K, 17)
	for _, order := range [][]*QWeight{{q40, q6k, q40}, {q6k, q40, q4k}, {q40, q40, q4k}} {
		for _, m := range []int{1, 4, 9} {
			x := make([]float32, m*cols)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			be := New(2)
			if err := be.Begin(backend.Batch{Tokens: make([]int32, m), Pos: make([]int32, m), Seq: make([]int32, m), BlockSize: 1, Tables: [][]int32{make([]int32, m)}}); err != nil {
				t.Fatal(err)
			}
			xt := NewTensor(m, cols, x)
			for k, w := range order {
				n := w.Blocks.Rows
				got := NewTensor(m, n, make([]float32, m*n))
				be.MatMul(got, xt, w)
				want := make([]float32, m*n)
				MatMulQ(want, x, w, m, cols, n, 1)
				for i := range want {
					if math.Float32bits(got.Data[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%d rows, product %d (%v): [%d] = %g, alone %g", m, k, w.Blocks.Type, i, got.Data[i], want[i])
					}
				}
			}
		}
	}
}

// TestProjectBlocks: Project of weights kept as blocks (norm, quantizing
// and packing in one job; every part's products in one; a residual add or
// a GLU joined to them) gives the bits of its composition of plain ops,
// with parts of a K quant, of Q2_K's half-group mins and of Q4_0 together,
// with and without a norm and a bias, at row counts with and without
// tiles, on one worker and on three.
func TestProjectBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	const cols = 512
	weight := func(typ dtype.Type, rows int) *QWeight { return randomBlocks(t, rng, typ, rows, cols) }
	vec := func(n int) *Weight {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return NewWeight([]int{n}, v)
	}
	q40, q4k, q2k, q6k := weight(dtype.Q4_0, 19), weight(dtype.Q4_K, 17), weight(dtype.Q2_K, 21), weight(dtype.Q6_K, cols)
	gate, up := weight(dtype.Q4_0, 40), weight(dtype.Q4_K, 40)
	norm := vec(cols)
	cases := []struct {
		name  string
		parts []*QWeight
		norm  bool
		bias  bool
		add   bool
		act   tensor.Activation // with glu
		glu   bool
	}{
		{name: "qkv", parts: []*QWeight{q40, q4k, q2k}, norm: true},
		{name: "qkv bias", parts: []*QWeight{q2k, q40, q4k}, norm: true, bias: true},
		{name: "one, no norm", parts: []*QWeight{q4k}},
		{name: "residual", parts: []*QWeight{q6k}, add: true},
		{name: "residual norm bias", parts: []*QWeight{q6k}, add: true, norm: true, bias: true},
		{name: "glu silu", parts: []*QWeight{gate, up}, norm: true, glu: true, act: tensor.SiLU},
		{name: "glu gelu bias", parts: []*QWeight{gate, up}, glu: true, bias: true, act: tensor.GELUTanh},
	}
	for _, m := range []int{1, 4, 9, 32} {
		x := make([]float32, m*cols)
		for i := range x {
			x[i] = 3 * float32(rng.NormFloat64())
		}
		res := make([]float32, m*cols)
		for i := range res {
			res[i] = float32(rng.NormFloat64())
		}
		batch := backend.Batch{Tokens: make([]int32, m), Pos: make([]int32, m), Seq: make([]int32, m), BlockSize: 1, Tables: [][]int32{make([]int32, m)}}
		for _, c := range cases {
			var rows []int
			var parts []backend.Weight
			width := 0
			for _, w := range c.parts {
				rows, parts = append(rows, w.Blocks.Rows), append(parts, w)
				width += w.Blocks.Rows
			}
			var bias *Weight
			if c.bias {
				bias = vec(width)
			}
			// The composition, op by op on one worker.
			ref := New(1)
			if err := ref.Begin(batch); err != nil {
				t.Fatal(err)
			}
			h := NewTensor(m, cols, append([]float32(nil), x...))
			if c.norm {
				ref.RMSNorm(h, NewTensor(m, cols, append([]float32(nil), x...)), norm, 1e-5)
			}
			var want [][]float32
			off := 0
			for i, w := range c.parts {
				d := make([]float32, m*rows[i])
				MatMulQ(d, h.Data, w, m, cols, rows[i], 1)
				dt := NewTensor(m, rows[i], d)
				if bias != nil {
					ref.AddBias(dt, NewWeight([]int{rows[i]}, bias.Data[off:off+rows[i]]))
				}
				off += rows[i]
				want = append(want, dt.Data)
			}
			switch {
			case c.add:
				r := NewTensor(m, cols, append([]float32(nil), res...))
				ref.Add(r, NewTensor(m, cols, want[0]))
				want = want[:1]
				want[0] = r.Data
			case c.glu:
				g := NewTensor(m, rows[0], want[0])
				ref.GLU(g, NewTensor(m, rows[1], want[1]), c.act)
				want = want[:1]
			}
			for _, workers := range []int{1, 3} {
				be := New(workers)
				if err := be.Begin(batch); err != nil {
					t.Fatal(err)
				}
				p := backend.Projection{X: NewTensor(m, cols, append([]float32(nil), x...)), Eps: 1e-5, W: &Fused{shape: []int{width, cols}, Parts: parts}, Add: c.add, GLU: c.glu, Act: c.act}
				if len(parts) == 1 {
					p.W = parts[0]
				}
				if c.norm {
					p.Norm = norm
				}
				if bias != nil {
					p.Bias = bias
				}
				switch {
				case c.add:
					p.Out = []backend.Tensor{NewTensor(m, cols, append([]float32(nil), res...))}
				case c.glu:
					p.Out = []backend.Tensor{NewTensor(m, rows[0], make([]float32, m*rows[0]))}
				default:
					for _, r := range rows {
						p.Out = append(p.Out, NewTensor(m, r, make([]float32, m*r)))
					}
				}
				be.Project(p)
				for k, o := range p.Out {
					for i, v := range o.(*Tensor).Data {
						if math.Float32bits(v) != math.Float32bits(want[k][i]) {
							t.Fatalf("%s, %d rows on %d workers: output %d [%d][%d] = %g, composed %g", c.name, m, workers, k, i/o.Cols(), i%o.Cols(), v, want[k][i])
						}
					}
				}
			}
		}
	}
}
