package gpu_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
)

// weightAs uploads data as an f32 model tensor in storage s on both
// backends; both convert it with the same models/dtype code.
func (w *twins) weightAs(shape []int, data []float32, s backend.Storage) pair[backend.Weight] {
	w.t.Helper()
	raw := make([]byte, 4*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
	}
	mt := models.NewTensor("w", shape, dtype.F32, func() ([]byte, error) { return raw, nil })
	var p pair[backend.Weight]
	w.each(func(b backend.Backend, i int) {
		var err error
		if p[i], err = b.UploadAs(mt, s); err != nil {
			w.t.Fatal(err)
		}
	})
	if got := gpu.StorageOf(p[1]); got != s {
		w.t.Fatalf("uploaded as %v, want %v", got, s)
	}
	return p
}

// subnormalRows makes the first rows of data tiny, so that their groups'
// f16 scales (and some mins) are subnormal halves.
func subnormalRows(data []float32, cols, rows int) {
	for i := range data[:rows*cols] {
		data[i] *= 1e-5
	}
}

// TestQuantEmbed: an int4, int8 or f16 table expands on the GPU to exactly the
// reference's values (tolerance 0), for widths that are not whole groups,
// subnormal scales and tables split across bindings.
func TestQuantEmbed(t *testing.T) {
	for _, s := range []backend.Storage{backend.Int4, backend.Int8, backend.F16} {
		for _, tc := range []struct {
			vocab, dim, batch int
			binding           int64
		}{
			{512, 64, 1, 0}, {512, 172, 37, 0}, {1000, 96, 64, 0}, {1000, 96, 64, 32 << 10},
		} {
			t.Run(fmt.Sprintf("%v/%dx%d_batch%d_binding%d", s, tc.vocab, tc.dim, tc.batch, tc.binding), func(t *testing.T) {
				w := newTwins(t, 64, webgpu.Options{MaxStorageBinding: tc.binding})
				data := w.random(tc.vocab*tc.dim, 1)
				subnormalRows(data, tc.dim, 8)
				table := w.weightAs([]int{tc.vocab, tc.dim}, data, s)
				if tc.binding > 0 {
					if parts := gpu.Parts(table[1]); parts < 2 {
						t.Fatalf("table in %d parts under a %d-byte binding limit", parts, tc.binding)
					}
				}
				x := w.tensor(64, tc.dim, nil)
				toks := tokens(tc.batch, tc.vocab, w.rng)
				toks[0] = int32(tc.vocab - 1)
				if tc.batch > 1 {
					toks[1] = 3 // a row of subnormal scales
				}
				w.begin(toks, 0)
				w.each(func(b backend.Backend, i int) { b.Embed(x[i], table[i]) })
				w.compare("embed", x, tc.batch, 0)
			})
		}
	}
}

// TestQuantMatMul compares int4, int8 and f16 matmuls with the reference on
// awkward shapes: one row, row counts that are not multiples of any tile,
// widths that are an odd number of groups or not whole groups (or not a
// multiple of 4, which only the GEMM takes), odd column counts, and weights
// split across bindings; each through the plan, the GEMV (on CPU adapters:
// one invocation per four columns), the GEMV as planned for GPUs (several
// invocations per column) and the GEMM.
//
// Both backends multiply the same expanded weights (TestQuantEmbed shows
// the expansion is exact). For f16 and int8 (whose CPU products read f32
// activations) the only difference is the order of the sums: the bound is that of TestMatMul, 4e-6·sqrt(k) relative to 1 + |ref|.
// The CPU's int4 products round each input to 16 bits of its group's
// largest (|error| ≤ max/65534 per input, random in sign), so int4 adds
// 6e-5·sqrt(k) (the largest error seen: 2.9e-5·sqrt(k), at k 172).
func TestQuantMatMul(t *testing.T) {
	for _, s := range []backend.Storage{backend.Int4, backend.Int8, backend.F16} {
		for _, tc := range []struct {
			rows, batch, k, n int
			binding           int64
		}{
			{1, 1, 32, 1, 0}, {1, 1, 96, 129, 0}, {1, 1, 172, 64, 0}, {1, 1, 2048, 5632, 0},
			{8, 5, 224, 77, 0}, {64, 37, 288, 129, 0}, {64, 64, 172, 300, 0}, {4, 3, 30, 50, 0},
			{4, 3, 480, 1001, 32 << 10}, {1, 1, 160, 301, 4 << 10},
		} {
			for _, kernel := range []string{"", "gemv", "gemv-gpu", "gemm"} {
				name := fmt.Sprintf("%v/m%d_k%d_n%d_binding%d/%s", s, tc.batch, tc.k, tc.n, tc.binding, kernel)
				t.Run(name, func(t *testing.T) {
					w := newTwins(t, tc.rows, webgpu.Options{MaxStorageBinding: tc.binding})
					w.gpu.SetPlan(gpu.Plan{Quant: kernel})
					data := w.random(tc.n*tc.k, 1)
					subnormalRows(data, tc.k, 1)
					wt := w.weightAs([]int{tc.n, tc.k}, data, s)
					if tc.binding > 0 && gpu.Parts(wt[1]) < 2 {
						t.Fatalf("weight in %d parts under a %d-byte binding limit", gpu.Parts(wt[1]), tc.binding)
					}
					if wt[0].Bytes() != wt[1].Bytes() && s != backend.F16 {
						t.Errorf("%v bytes: cpu %d, gpu %d", s, wt[0].Bytes(), wt[1].Bytes())
					}
					x := w.tensor(tc.rows, tc.k, w.random(tc.rows*tc.k, 1))
					y := w.tensor(tc.rows, tc.n, nil)
					w.begin(tokens(tc.batch, 10, w.rng), 0)
					w.each(func(b backend.Backend, i int) { b.MatMul(y[i], x[i], wt[i]) })
					bound := 4e-6 * math.Sqrt(float64(tc.k))
					if s == backend.Int4 {
						bound += 6e-5 * math.Sqrt(float64(tc.k))
					}
					w.compare("matmul", y, tc.batch, bound)
				})
			}
		}
	}
}
