package backend

import (
	"fmt"
	"slices"

	"github.com/tessera-llm/tessera/models/tensor"
)

// Mixture-of-experts ops (models.MoEConfig). A layer's feed-forward is E
// experts, of which a router picks k per token:
//
//	Route:          for each token row, its k experts and their weights,
//	                from the router's logits (kept by the backend: on a GPU
//	                they never leave the device)
//	ExpertProject:  for each (row, slot) pair, the product of the slot's
//	                expert's matrix, or its GLU of gate and up
//	Combine:        each row adds the weighted sum of its k outputs (and a
//	                shared expert's) to the residual stream
//
// A backend reads only the chosen experts' weights; a GPU groups the pairs
// of a batch by expert, so that one expert's weights serve all the rows
// that chose it.

// Routes is the routing of a step's token rows, Rows() at most, among
// experts: K() (expert, weight) slots a row. Pair p = i·K + s is row i's
// slot s; ExpertProject's outputs have a row per pair.
type Routes interface {
	Rows() int
	K() int
}

// ExpertProjection is one expert product per (row, slot) pair p = i·K+s
// of R, e being the slot's expert:
//
//	x_p = X[i], or X[p] with Slots (the input is itself per pair)
//	Out[p] = x_p · W_eᵀ, or act(x_p·Gate_eᵀ) · (x_p·Up_eᵀ) with GLU
//
// W comes from UploadExperts: one stacked matrix, or gate and up for a
// GLU. Out never aliases X.
type ExpertProjection struct {
	X     Tensor
	Slots bool
	W     Weight
	R     Routes
	Out   Tensor
	GLU   bool
	Act   tensor.Activation
}

// MoECombine adds the experts' outputs to Dst, row by row:
//
//	y_i = Σ_s w_{i,s} · c_e · Y[i·K+s]  (+ sigmoid(SharedGate[i, 0]) · Shared[i])
//	Dst[i] += Scale · y_i               (Scale 0 means 1), or = with Set
//
// the sum taken in slot order, the shared expert (Qwen2-MoE) last; c_e is
// row e of ExpertScale ([E], F32) for the slot's expert e, or 1 without
// one (Gemma 4's per-expert output scale). Set writes Dst instead of
// adding to it: Gemma 4 normalises the experts' sum before it joins the
// residual stream.
type MoECombine struct {
	Dst, Y             Tensor
	R                  Routes
	Scale              float32
	Shared, SharedGate Tensor
	ExpertScale        Weight
	Set                bool
}

// Experts is implemented by backends with the mixture-of-experts ops; see
// Backend.
type Experts interface {
	// UploadExperts uploads stacked expert matrices, each of shape [E,
	// rows, in], in storage s: one (a down projection) or two of one
	// shape (gate and up, for a GLU). The weight's Shape is theirs.
	UploadExperts(ts []*tensor.Tensor, s Storage) (Weight, error)
	// NewRoutes allocates the routing of up to rows token rows, k slots
	// each.
	NewRoutes(rows, k int) (Routes, error)
	// Route sets r from the router's logits (a row of E per token): p =
	// softmax(logits_i); the k experts of largest logit, the lower index
	// first among equal ones, in that order; weight p_e, divided by the
	// sum of the k when norm. The ids are in range whatever the logits
	// (NaNs included). Twin: runtime/cpu Route.
	Route(r Routes, logits Tensor, norm bool)
	// ExpertProject runs p (see ExpertProjection).
	ExpertProject(p ExpertProjection)
	// Combine runs c (see MoECombine).
	Combine(c MoECombine)
	// ExpertBias adds to each pair row p of x (an ExpertProject output)
	// row e of b ([E, x's cols], F32), e being the pair's expert
	// (gpt-oss's expert biases).
	ExpertBias(x Tensor, b Weight, r Routes)
	// ExpertGLU is GLU over the pair rows of two ExpertProject outputs:
	// gate = act(gate, up) for every (row, slot) pair of the step.
	ExpertGLU(gate, up Tensor, r Routes, act tensor.Activation)
}

// ExpertMatrices views stacked expert tensors of shape [E, rows, in] as
// matrices of E·rows rows (their bytes are the same), checking that there
// are one or two (gate and up) of one shape. Both backends upload them so.
func ExpertMatrices(ts []*tensor.Tensor) (parts []*tensor.Tensor, e, rows int, err error) {
	if len(ts) != 1 && len(ts) != 2 {
		return nil, 0, 0, fmt.Errorf("experts of %d matrices (want 1, or gate and up)", len(ts))
	}
	for _, t := range ts {
		if len(t.Shape) != 3 || !slices.Equal(t.Shape, ts[0].Shape) {
			return nil, 0, 0, fmt.Errorf("experts %s of shape %v (want [E, rows, in], all alike)", t.Name, t.Shape)
		}
		sh := t.Shape
		parts = append(parts, tensor.New(t.Name, []int{sh[0] * sh[1], sh[2]}, t.Type, t.Raw))
	}
	return parts, ts[0].Shape[0], ts[0].Shape[1], nil
}
