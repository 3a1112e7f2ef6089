package cpu

import (
	"fmt"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/runtime/backend"
)

// QWeight is a matrix kept compressed, as int4 (dtype.Int4) or f16, and
// expanded to f32 one row at a time as MatMul and Embed read it. The
// expansion is the arithmetic of the WGSL kernels (scale·q + min, the
// product exact), so both backends see the same weight values bit for bit.
type QWeight struct {
	shape   []int
	storage backend.Storage
	Int4    *dtype.Int4 // for Int4
	F16     []uint16    // for F16: rows × cols halves
}

func (w *QWeight) Shape() []int { return w.shape }

func (w *QWeight) Bytes() int64 {
	if w.Int4 != nil {
		return w.Int4.Bytes()
	}
	return 2 * int64(len(w.F16))
}

// Storage says how the weight is kept.
func (w *QWeight) Storage() backend.Storage { return w.storage }

func (w *QWeight) cols() int { return w.shape[len(w.shape)-1] }

// Row writes the f32 values of row r into dst (len ≥ cols).
func (w *QWeight) Row(r int, dst []float32) {
	if w.Int4 != nil {
		w.Int4.DequantizeRow(r, dst)
		return
	}
	k := w.cols()
	for i, h := range w.F16[r*k : (r+1)*k] {
		dst[i] = dtype.HalfValue(h)
	}
}

func (b *Backend) UploadAs(t *models.Tensor, s backend.Storage) (backend.Weight, error) {
	if s == backend.F32 {
		return b.Upload(t)
	}
	w, err := NewQWeight(t, s)
	if err != nil {
		return nil, err
	}
	b.stats.Memory += w.Bytes()
	return w, nil
}

// NewQWeight converts the matrix t to storage s (F16 or Int4).
func NewQWeight(t *models.Tensor, s backend.Storage) (*QWeight, error) {
	if len(t.Shape) != 2 {
		return nil, fmt.Errorf("cpu: %s storage of %s needs a matrix, not shape %v", s, t.Name, t.Shape)
	}
	w := &QWeight{shape: t.Shape, storage: s}
	switch s {
	case backend.Int4:
		var err error
		if w.Int4, err = t.Int4(); err != nil {
			return nil, fmt.Errorf("cpu: %w", err)
		}
	case backend.F16:
		data, err := t.Float32()
		if err != nil {
			return nil, err
		}
		w.F16 = make([]uint16, len(data))
		for i, v := range data {
			w.F16[i] = dtype.HalfBits(v)
		}
	default:
		return nil, fmt.Errorf("cpu: unknown storage %v", s)
	}
	return w, nil
}

// MatMulQ sets dst[m×n] = x[m×k] · w[n×k]ᵀ for a compressed w: each worker
// expands one row of w at a time and takes its dot products with the m rows
// of x exactly as MatMul does, so the result equals MatMul over the
// expanded weights bit for bit.
func MatMulQ(dst, x []float32, w *QWeight, m, k, n, workers int) {
	if m*n*k < 1<<15 {
		workers = 1
	}
	parallel(n, workers, func(lo, hi int) {
		wr := make([]float32, k)
		for j := lo; j < hi; j++ {
			w.Row(j, wr)
			for i := 0; i < m; i++ {
				dst[i*n+j] = Dot(x[i*k:(i+1)*k], wr)
			}
		}
	})
}
