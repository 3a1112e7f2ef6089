package gpu_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu"
)

// TestNarrowWorkgroups checks the narrow forms (Plan.Workgroups, which
// SwiftShader takes by default) of rmsnorm, argmax and the CPU adapters'
// GEMVs against the CPU reference, and the wide ones beside them, on
// widths that do and do not divide the workgroups: one kernel body at two
// workgroup sizes. On a GPU adapter the GEMVs take the TPC > 1 form,
// which has no narrow one, so there their rows check the plan's GEMV.
func TestNarrowWorkgroups(t *testing.T) {
	for _, wg := range []string{"narrow", "wide"} {
		t.Run(wg+"/reductions", func(t *testing.T) {
			for _, tc := range []struct{ rows, batch, cols int }{
				{1, 1, 1}, {1, 1, 7}, {1, 1, 64}, {4, 3, 257}, {2, 2, 5632}, {1, 1, 32000},
			} {
				w := newTwins(t, tc.rows)
				w.gpu.SetPlan(gpu.Plan{Workgroups: wg})
				data := w.random(tc.rows*tc.cols, 3)
				x := w.tensor(tc.rows, tc.cols, data)
				if tc.cols > 1 {
					data[tc.cols/2] = 10                              // row 0: a clear winner in the middle
					data[tc.cols-1], data[tc.cols-2] = 20, 20         // a tie picks the lower index
					data[(tc.rows-1)*tc.cols] = float32(math.Inf(-1)) // a masked value
				}
				ties := w.tensor(tc.rows, tc.cols, data)
				y := w.tensor(tc.rows, tc.cols, nil)
				norm := w.weight([]int{tc.cols}, w.random(tc.cols, 2))
				w.begin(tokens(tc.batch, 10, w.rng), 0)
				w.each(func(b backend.Backend, i int) { b.RMSNorm(y[i], x[i], norm[i], 1e-5) })
				w.compare(fmt.Sprintf("rmsnorm %dx%d", tc.batch, tc.cols), y, tc.batch, 1e-5)
				want, _ := w.ref.Argmax(y[0], tc.batch)
				got, err := w.gpu.Argmax(y[1], tc.batch)
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("argmax of %dx%d: gpu %v, cpu %v", tc.batch, tc.cols, got, want)
				}
				want, _ = w.ref.Argmax(ties[0], tc.batch)
				if got, err = w.gpu.Argmax(ties[1], tc.batch); err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("argmax of %dx%d with ties: gpu %v, cpu %v", tc.batch, tc.cols, got, want)
				}
			}
		})
		for _, s := range []backend.Storage{backend.F32, backend.Int4} {
			t.Run(fmt.Sprintf("%s/gemv_%v", wg, s), func(t *testing.T) {
				for _, tc := range []struct{ rows, batch, k, n int }{
					{1, 1, 64, 64}, {1, 1, 172, 63}, {1, 1, 64, 517}, {8, 5, 96, 129}, {4, 4, 2048, 300},
				} {
					w := newTwins(t, tc.rows)
					w.gpu.SetPlan(gpu.Plan{Workgroups: wg})
					wt := w.weightAs([]int{tc.n, tc.k}, w.random(tc.n*tc.k, 1), s)
					x := w.tensor(tc.rows, tc.k, w.random(tc.rows*tc.k, 1))
					y := w.tensor(tc.rows, tc.n, nil)
					w.begin(tokens(tc.batch, 10, w.rng), 0)
					w.each(func(b backend.Backend, i int) { b.MatMul(y[i], x[i], wt[i]) })
					bound := 4e-6 * math.Sqrt(float64(tc.k))
					if s == backend.Int4 {
						bound += 6e-5 * math.Sqrt(float64(tc.k))
					}
					w.compare(fmt.Sprintf("matmul m%d k%d n%d", tc.batch, tc.k, tc.n), y, tc.batch, bound)
				}
			})
		}
	}
}
