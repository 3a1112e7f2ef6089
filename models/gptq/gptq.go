// Package gptq quantizes weight matrices into Tessera's int4 format
// (dtype.Int4) by GPTQ (Frantar et al., 2022, "GPTQ: Accurate
// Post-Training Quantization for Generative Pre-trained Transformers").
//
// Rounding each weight to its nearest code (dtype.QuantizeInt4) minimises
// the error in the weights. What matters is the error in the matrix's
// outputs, x·wᵀ, for the inputs x the model actually sees, and those
// inputs are far from isotropic: some input dimensions are large, many are
// correlated. GPTQ minimises the output error ‖X(w−q)ᵀ‖² of each row w
// given H = XᵀX, gathered from calibration text: it quantizes the columns
// in order and after each one moves the columns not yet quantized to
// compensate for its rounding error, the compensation taken from the
// inverse of H (the optimal brain surgeon update).
//
// The int4 format fixes groups of 32 consecutive inputs sharing a scale
// and a min, so the columns go in their natural order (GPTQ's act-order
// heuristic would need groups to follow the permutation), and each group's
// scale and min are chosen when the group starts, from the weights as the
// earlier groups' compensation has left them.
package gptq

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/tessera-llm/tessera/models/dtype"
)

// Hessian accumulates H = Σ xᵀx over the input rows x of one matrix (the
// Hessian of the output's squared error with respect to a row of weights,
// up to a factor 2), in float64: sums over thousands of tokens in float32
// would lose the small eigenvalues the inverse depends on.
type Hessian struct {
	N       int       // inputs per row (the matrix's columns)
	H       []float64 // N × N; only the lower triangle is kept up to date
	Samples int64     // rows added
}

// NewHessian returns an empty accumulator for rows of n inputs.
func NewHessian(n int) *Hessian { return &Hessian{N: n, H: make([]float64, n*n)} }

// Add accumulates the rows of x, a row-major matrix of rows of N values.
func (h *Hessian) Add(x []float32) {
	n := h.N
	row := make([]float64, n)
	for r := 0; r+n <= len(x); r += n {
		for i, v := range x[r : r+n] {
			row[i] = float64(v)
		}
		for i, a := range row {
			if a == 0 {
				continue
			}
			hi := h.H[i*n : i*n+i+1]
			for j, b := range row[:i+1] {
				hi[j] += float64(a * b)
			}
		}
		h.Samples++
	}
}

// full returns H with both triangles filled.
func (h *Hessian) full() []float64 {
	n := h.N
	m := make([]float64, n*n)
	for i := range n {
		for j := 0; j <= i; j++ {
			m[i*n+j], m[j*n+i] = h.H[i*n+j], h.H[i*n+j]
		}
	}
	return m
}

// Options tune Quantize.
type Options struct {
	// Damp is added to H's diagonal as a fraction of its mean, so that H
	// is safely invertible when the calibration text leaves directions
	// unexplored (0 means DefaultDamp).
	Damp float64
	// Workers bounds the goroutines that quantize rows (0: one per core).
	Workers int
}

// DefaultDamp is the GPTQ paper's dampening: 1% of the mean diagonal.
const DefaultDamp = 0.01

// ErrNoSamples is returned when the Hessian has seen no input.
var ErrNoSamples = errors.New("gptq: no calibration inputs")

// Quantize quantizes the row-major rows × cols matrix w into Int4 so as to
// minimise the output error over the inputs h has gathered.
//
// An input that was zero on every calibration token (H_ii = 0) gets
// H_ii = 1 before dampening: its column is then rounded on its own and no
// error flows into or out of it, as the calibration says nothing of it.
func Quantize(w []float32, rows, cols int, h *Hessian, o Options) (*dtype.Int4, error) {
	if h.N != cols || len(w) != rows*cols {
		return nil, fmt.Errorf("gptq: %d×%d matrix (%d values) with a Hessian of %d inputs", rows, cols, len(w), h.N)
	}
	if h.Samples == 0 {
		return nil, ErrNoSamples
	}
	damp := o.Damp
	if damp <= 0 {
		damp = DefaultDamp
	}
	u, err := inverseFactor(h, damp)
	if err != nil {
		return nil, err
	}
	m := dtype.NewInt4(rows, cols)
	workers := o.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = max(1, min(workers, rows*cols*cols/(1<<16), rows))
	var wg sync.WaitGroup
	for k := range workers {
		r0, r1 := rows*k/workers, rows*(k+1)/workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			row := make([]float64, cols)
			for r := r0; r < r1; r++ {
				for i, v := range w[r*cols : (r+1)*cols] {
					row[i] = float64(v)
				}
				quantizeRow(row, u, m, r)
			}
		}()
	}
	wg.Wait()
	return m, nil
}

// quantizeRow quantizes one row into row r of m, group by group: the
// group's scale and min come from its current (compensated) values; then
// each value is rounded and its error, scaled by U, is subtracted from the
// values after it. row is overwritten.
func quantizeRow(row []float64, u []float64, m *dtype.Int4, r int) {
	n := len(row)
	G := m.Groups()
	var q [dtype.Int4GroupSize]uint8
	var x [dtype.Int4GroupSize]float32
	for g := range G {
		lo, hi := g*dtype.Int4GroupSize, min(n, (g+1)*dtype.Int4GroupSize)
		for i := lo; i < hi; i++ {
			x[i-lo] = float32(row[i])
		}
		q = [dtype.Int4GroupSize]uint8{}
		sm := dtype.QuantizeInt4Group(x[:hi-lo], &q)
		s, mn := dtype.UnpackScaleMin(sm)
		for i := lo; i < hi; i++ {
			c := dtype.Int4Code(float32(row[i]), s, mn)
			q[i-lo] = c
			ui := u[i*n : (i+1)*n]
			e := (row[i] - float64(dtype.Int4Value(s, mn, c))) / ui[i]
			for j := i + 1; j < n; j++ {
				row[j] -= float64(e * ui[j])
			}
		}
		at := r*G + g
		m.Scales[at] = sm
		dtype.PackNibbles(&q, m.Codes[4*at:4*at+4])
	}
}

// inverseFactor returns the upper triangular U with Uᵀ·U = (H + λI)⁻¹, λ =
// damp × mean diagonal: row i of U, divided by U_ii, is how the error of
// column i is spread over the columns after it. If H + λI is not positive
// definite in floating point, λ grows tenfold, up to three times.
func inverseFactor(h *Hessian, damp float64) ([]float64, error) {
	n := h.N
	a := h.full()
	var mean float64
	for i := range n {
		if a[i*n+i] == 0 {
			a[i*n+i] = 1 // a dead input
		}
		mean += a[i*n+i]
	}
	mean /= float64(n)
	for try := 0; try < 4; try++ {
		d := append([]float64(nil), a...)
		for i := range n {
			d[i*n+i] += float64(damp * mean)
		}
		if l, ok := cholesky(d, n); ok {
			if li, ok := cholesky(invertFromCholesky(l, n), n); ok {
				return transpose(li, n), nil
			}
		}
		damp *= 10
	}
	return nil, fmt.Errorf("gptq: the %d×%d Hessian is not positive definite even with dampening %g", n, n, damp/10)
}

// cholesky factors the symmetric n × n matrix a as L·Lᵀ, L lower
// triangular, in place; ok is false if a is not positive definite.
func cholesky(a []float64, n int) (l []float64, ok bool) {
	for j := range n {
		rj := a[j*n : j*n+j]
		s := a[j*n+j]
		for _, v := range rj {
			s -= float64(v * v)
		}
		if !(s > 0) {
			return nil, false
		}
		d := math.Sqrt(s)
		a[j*n+j] = d
		for i := j + 1; i < n; i++ {
			ri := a[i*n : i*n+j]
			t := a[i*n+j]
			for k, v := range ri {
				t -= float64(v * rj[k])
			}
			a[i*n+j] = t / d
		}
	}
	for i := range n { // clear the upper triangle
		for j := i + 1; j < n; j++ {
			a[i*n+j] = 0
		}
	}
	return a, true
}

// invertFromCholesky returns A⁻¹ = L⁻ᵀ·L⁻¹ for A = L·Lᵀ.
func invertFromCholesky(l []float64, n int) []float64 {
	// Invert L by forward substitution, column by column.
	li := make([]float64, n*n)
	for j := range n {
		li[j*n+j] = 1 / l[j*n+j]
		for i := j + 1; i < n; i++ {
			var s float64
			for k := j; k < i; k++ {
				s -= float64(l[i*n+k] * li[k*n+j])
			}
			li[i*n+j] = s / l[i*n+i]
		}
	}
	// A⁻¹[i][j] = Σ_k L⁻¹[k][i]·L⁻¹[k][j], k ≥ max(i, j).
	inv := make([]float64, n*n)
	for i := range n {
		for j := 0; j <= i; j++ {
			var s float64
			for k := i; k < n; k++ {
				s += float64(li[k*n+i] * li[k*n+j])
			}
			inv[i*n+j], inv[j*n+i] = s, s
		}
	}
	return inv
}

func transpose(a []float64, n int) []float64 {
	t := make([]float64, n*n)
	for i := range n {
		for j := range n {
			t[j*n+i] = a[i*n+j]
		}
	}
	return t
}

// OutputError is the squared error that replacing w by q adds to the
// matrix's outputs over the inputs h has gathered: Σ_x ‖x·(w−q)ᵀ‖² =
// Σ_rows (w−q)·H·(w−q)ᵀ, the objective GPTQ minimises.
func OutputError(w []float32, q *dtype.Int4, h *Hessian) float64 {
	n := h.N
	a := h.full()
	d := make([]float32, n)
	e := make([]float64, n)
	var total float64
	for r := range q.Rows {
		q.DequantizeRow(r, d)
		for i := range n {
			e[i] = float64(w[r*n+i]) - float64(d[i])
		}
		for i, ei := range e {
			if ei == 0 {
				continue
			}
			var s float64
			for j, ej := range e {
				s += a[i*n+j] * ej
			}
			total += ei * s
		}
	}
	return total
}
