package backend

import (
	"fmt"
	"slices"

	"github.com/tessera-llm/tessera/models/tensor"
)

// Fused ops. A decoding step of a small model is bound by the number of
// kernels a GPU runs, not by their work: these ops let a backend do in one
// kernel what the plain ops do in several, and each is defined as the
// composition of plain ops it replaces (the CPU backend runs exactly that
// composition; the GPU's kernels are tested against it).

// Projection is one matrix product with what comes before and after it:
//
//	h = X, or RMSNorm(X, Norm, Eps) when Norm is set (the norm's weights
//	    and the row's 1/rms are applied on the fly; h is never stored)
//	y = h · Wᵀ + Bias (Bias optional, as wide as W has rows)
//	y_i += the adapters of LoRA's weight i, for the rows that run one:
//	    AddLoRA(h, LoRA, y_0, y_1, ...) (LoRA optional, of W's parts)
//
// W is an uploaded matrix or, from Fuse, several matrices of the same width
// one after the other (q, k, v; gate, up); y splits into one part per
// matrix. Then, by the epilogue:
//
//	plain:  Out[i] = y_i for each part
//	Add:    Out[0] += y (a residual add; W has one part)
//	GLU:    Out[0] = act(y_0) · y_1 (W has two parts: gate and up)
//
// Out never aliases X.
//
// Next, on a residual projection, is a hint: the Norm of the projection
// that comes right after it and reads Out[0]. A backend may prepare that
// norm's input in this projection's epilogue (runtime/gpu does on CPU
// adapters, where applying the norm's weights in the next product costs
// more than a dispatch); results differ at most by rounding.
type Projection struct {
	X    Tensor
	Norm Weight
	Eps  float32
	W    Weight
	Bias Weight
	Out  []Tensor
	Add  bool
	GLU  bool
	Act  tensor.Activation
	Next Weight
	// LoRA adds unmerged adapters to the products before the epilogue;
	// nil: none.
	LoRA LoRA
}

// Check reports a projection whose parts do not fit together: parts are
// W's row counts (one entry for an ordinary weight).
func (p Projection) Check(parts []int) error {
	width := 0
	for _, n := range parts {
		width += n
	}
	switch {
	case p.X == nil || p.W == nil || len(p.Out) == 0:
		return fmt.Errorf("projection without input, weight or output")
	case p.Add && p.GLU:
		return fmt.Errorf("projection with both a residual add and a GLU")
	case p.Next != nil && (!p.Add || p.Next.Shape()[0] != p.Out[0].Cols()):
		return fmt.Errorf("a next norm of %v for a projection into %d columns (residual add %v)", p.Next.Shape(), p.Out[0].Cols(), p.Add)
	case p.Add && (len(parts) != 1 || len(p.Out) != 1):
		return fmt.Errorf("residual projection of %d parts into %d outputs", len(parts), len(p.Out))
	case p.GLU && (len(parts) != 2 || parts[0] != parts[1] || len(p.Out) != 1):
		return fmt.Errorf("GLU projection of parts %v into %d outputs", parts, len(p.Out))
	case !p.Add && !p.GLU && len(parts) != len(p.Out):
		return fmt.Errorf("projection of %d parts into %d outputs", len(parts), len(p.Out))
	case p.Bias != nil && p.Bias.Shape()[0] != width:
		return fmt.Errorf("bias of %d values for a projection of %d", p.Bias.Shape()[0], width)
	}
	if p.LoRA != nil && !slices.Equal(p.LoRA.Outs(), parts) {
		return fmt.Errorf("adapters of weights %v for a projection of parts %v", p.LoRA.Outs(), parts)
	}
	for i, o := range p.Out {
		want := parts[min(i, len(parts)-1)]
		if o.Cols() != want {
			return fmt.Errorf("output %d of %d columns for a part of %d", i, o.Cols(), want)
		}
	}
	return nil
}

// Fuser is implemented by backends with the fused ops; see Backend.
type Fuser interface {
	// Fuse uploads matrices of the same width as one weight of their
	// rows one after the other, in storage s, for Project to read in one
	// pass; vectors (biases) are joined likewise. glu says the weight
	// feeds a GLU (two parts: gate and up), which lets a backend lay them
	// out for it.
	Fuse(ts []*tensor.Tensor, s Storage, glu bool) (Weight, error)
	// Project runs p (see Projection).
	Project(p Projection)
	// RopeStore is Rope(q, rq), Rope(k, rk), StoreKV(kv, l, k, v): q is
	// rotated in place, the rotated keys and the values go to the cache,
	// and k is left unspecified.
	RopeStore(q, k, v Tensor, kv KV, l int, rq, rk Rope)
	// RopeAttend is RopeStore(q, k, v, kv, l, rq, rk) then Attend(dst, q,
	// kv, l, a): the attention of a layer from its projection's q, k and
	// v. q and k are left unspecified. A backend may do it in one kernel
	// where every row of the step attends to no position stored by
	// another row of it (decoding: one row a sequence), which saves a
	// dispatch a layer where dispatches, not work, set a step's pace (the
	// browser on SwiftShader).
	RopeAttend(dst, q, k, v Tensor, kv KV, l int, rq, rk Rope, a Attention)
}
