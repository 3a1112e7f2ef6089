package gpu_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
)

// blocksTensor is data quantized to typ by dtype.Quantize, as a GGUF
// file's tensor of that type; its first row is tiny (f16-subnormal
// scales).
func blocksTensor(t *testing.T, name string, shape []int, data []float32, typ dtype.Type) *models.Tensor {
	t.Helper()
	for i := range data[:shape[1]] {
		data[i] *= 1e-6
	}
	raw, err := dtype.Quantize(typ, data)
	if err != nil {
		t.Fatal(err)
	}
	return models.NewTensor(name, shape, typ, func() ([]byte, error) { return raw, nil })
}

// blocksWeight uploads a tensor of block type typ at its bits (Blocks) on
// both backends.
func (w *twins) blocksWeight(mt *models.Tensor) pair[backend.Weight] {
	w.t.Helper()
	var p pair[backend.Weight]
	w.each(func(b backend.Backend, i int) {
		var err error
		if p[i], err = b.UploadAs(mt, backend.Blocks); err != nil {
			w.t.Fatal(err)
		}
	})
	if p[0].Bytes() != p[1].Bytes() {
		w.t.Errorf("%v bytes: cpu %d, gpu %d", mt.Type, p[0].Bytes(), p[1].Bytes())
	}
	return p
}

// blockK is a row width of whole blocks of typ: odd numbers of groups for
// the legacy types, odd numbers of super-blocks for the K types.
func blockK(typ dtype.Type, groups int) int {
	if typ.BlockSize() == 256 {
		return 256 * (groups/4 + 1)
	}
	return 32 * groups
}

// TestBlocksEmbed: a table of every block type expands on the GPU to
// exactly the reference's values (ggml's: dtype.TestBlocksMatchGGML),
// split across bindings too.
func TestBlocksEmbed(t *testing.T) {
	for _, typ := range dtype.BlockTypes {
		for _, binding := range []int64{0, 16 << 10} {
			t.Run(fmt.Sprintf("%v/binding%d", typ, binding), func(t *testing.T) {
				w := newTwins(t, 8, webgpu.Options{MaxStorageBinding: binding})
				vocab, dim := 1000, blockK(typ, 3)
				table := w.blocksWeight(blocksTensor(t, "table", []int{vocab, dim}, w.random(vocab*dim, 1), typ))
				if binding > 0 && gpu.Parts(table[1]) < 2 {
					t.Fatalf("table in %d parts under a %d-byte binding limit", gpu.Parts(table[1]), binding)
				}
				x := w.tensor(8, dim, nil)
				toks := tokens(7, vocab, w.rng)
				toks[0], toks[1] = int32(vocab-1), 0 // the last row, and the tiny one
				w.begin(toks, 0)
				w.each(func(b backend.Backend, i int) { b.Embed(x[i], table[i]) })
				w.compare("embed", x, len(toks), 0)
			})
		}
	}
}

// TestBlocksMatMul compares the products of every block type with the
// reference on awkward shapes (one row; row counts and columns that are
// not multiples of any tile; odd numbers of groups and super-blocks;
// weights split across bindings), through the plan, the GEMV (on CPU
// adapters one invocation per four columns), the GEMV as planned for GPUs
// and the GEMM. The CPU rounds each input to 16 bits of its group's
// largest, as for int4 (TestQuantMatMul): the bound is int4's.
func TestBlocksMatMul(t *testing.T) {
	for _, typ := range dtype.BlockTypes {
		for _, tc := range []struct {
			rows, batch, groups, n int
			binding                int64
		}{
			{1, 1, 3, 129, 0}, {8, 5, 7, 77, 0}, {4, 3, 5, 301, 8 << 10},
		} {
			for _, kernel := range []string{"", "gemv-gpu", "gemm"} {
				k := blockK(typ, tc.groups)
				t.Run(fmt.Sprintf("%v/m%d_k%d_n%d_binding%d/%s", typ, tc.batch, k, tc.n, tc.binding, kernel), func(t *testing.T) {
					w := newTwins(t, tc.rows, webgpu.Options{MaxStorageBinding: tc.binding})
					w.gpu.SetPlan(gpu.Plan{Quant: kernel})
					wt := w.blocksWeight(blocksTensor(t, "w", []int{tc.n, k}, w.random(tc.n*k, 1), typ))
					if tc.binding > 0 && gpu.Parts(wt[1]) < 2 {
						t.Fatalf("weight in %d parts under a %d-byte binding limit", gpu.Parts(wt[1]), tc.binding)
					}
					x := w.tensor(tc.rows, k, w.random(tc.rows*k, 1))
					y := w.tensor(tc.rows, tc.n, nil)
					w.begin(tokens(tc.batch, 10, w.rng), 0)
					w.each(func(b backend.Backend, i int) { b.MatMul(y[i], x[i], wt[i]) })
					w.compare("matmul", y, tc.batch, 6.4e-5*math.Sqrt(float64(k)))
				})
			}
		}
	}
}
