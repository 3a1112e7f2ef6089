package capture_test

import (
	"slices"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/gptq"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/capture"
	"github.com/tessera-llm/tessera/runtime/cpu"
)

func f32Tensor(name string, shape []int, vals []float32) *models.Tensor {
	raw, _ := dtype.Quantize(dtype.F32, vals)
	return models.NewTensor(name, shape, dtype.F32, func() ([]byte, error) { return raw, nil })
}

// TestCapture: MatMul's result is the wrapped backend's; the Hessian of a
// captured weight adds up xᵀx over the batch's rows (of an activation) or
// its Out rows (of an output tensor), and nothing while capture is off.
func TestCapture(t *testing.T) {
	be := capture.New(cpu.New(1))
	w, err := be.Upload(f32Tensor("w", []int{2, 3}, []float32{1, 2, 3, 4, 5, 6}))
	if err != nil {
		t.Fatal(err)
	}
	x, _ := be.NewTensor(4, 3)
	out, _ := be.NewOutputTensor(4, 3)
	dst, _ := be.NewTensor(4, 2)
	odst, _ := be.NewOutputTensor(4, 2)
	rows := []float32{1, 0, 2, 0, 3, 1, -1, 1, 1, 9, 9, 9}
	if err := be.Write(x, rows); err != nil {
		t.Fatal(err)
	}
	if err := be.Write(out, rows); err != nil {
		t.Fatal(err)
	}
	// Three tokens; two outputs.
	b := backend.Batch{Tokens: []int32{0, 0, 0}, Pos: []int32{0, 1, 2}, Seq: []int32{0, 0, 0},
		Tables: [][]int32{{0}}, BlockSize: 4, Out: []int32{0, 2}}
	if err := be.Begin(b); err != nil {
		t.Fatal(err)
	}
	be.MatMul(dst, x, w) // not captured
	h := gptq.NewHessian(3)
	be.Capture(map[string]*gptq.Hessian{"w": h})
	be.MatMul(dst, x, w)
	if h.Samples != 3 {
		t.Errorf("%d rows captured from an activation, want the batch's 3", h.Samples)
	}
	be.MatMul(odst, out, w)
	if h.Samples != 5 {
		t.Errorf("%d rows captured in all, want 3 + the 2 outputs", h.Samples)
	}
	be.Capture(nil)
	be.MatMul(dst, x, w)
	if err := be.Err(); err != nil {
		t.Fatal(err)
	}
	// Rows 0..2, then rows 0 and 1 of the output tensor.
	var want [9]float64
	for _, r := range [][]float32{rows[0:3], rows[3:6], rows[6:9], rows[0:3], rows[3:6]} {
		for i := range 3 {
			for j := range 3 {
				want[i*3+j] += float64(r[i] * r[j])
			}
		}
	}
	for i := range 3 {
		for j := 0; j <= i; j++ {
			if h.H[i*3+j] != want[i*3+j] {
				t.Errorf("H[%d][%d] = %g, want %g", i, j, h.H[i*3+j], want[i*3+j])
			}
		}
	}
	got, _ := be.Read(dst, 3)
	if want := []float32{7, 16, 9, 21, 4, 7}; !slices.Equal(got, want) { // x·wᵀ
		t.Errorf("product %v, want %v", got, want)
	}
}
