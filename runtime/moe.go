package runtime

import (
	"fmt"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/runtime/backend"
)

// The feed-forward of a mixture-of-experts layer (models.MoEConfig):
//
//	h = RMSNorm(x)
//	routes = Route(h · W_routerᵀ)                 k experts and weights a row
//	a_p = act(h·Gate_eᵀ) · (h·Up_eᵀ)              each (row, slot) pair p, expert e
//	y_p = a_p · Down_eᵀ
//	x += s · (Σ_slots w·y + sigmoid(h·g)·shared(h))   (shared: Qwen2-MoE)
//
// s being Granite's residual scale. Dispatches a layer: the norm, the
// router, Route, two expert products and Combine, and three for a shared
// expert (its gate and up, its down, its gate's product).

// moeWeights are a layer's experts.
type moeWeights struct {
	router, gateUp, down backend.Weight
	// The shared expert (Qwen2-MoE): gate and up fused for a GLU, down,
	// and its gate, a [1, dim] matrix.
	sharedGateUp, sharedDown, sharedGate backend.Weight
	// With biases (gpt-oss): gate and up apart (each adds its bias before
	// the GLU; gateUp is nil), the router's bias [E] and the experts'
	// [E, ffn] and [E, dim].
	gate, up, routerB, gateB, upB, downB backend.Weight
}

// all lists the weights, nil ones included.
func (w moeWeights) all() []backend.Weight {
	return []backend.Weight{w.router, w.gateUp, w.down, w.sharedGateUp, w.sharedDown, w.sharedGate,
		w.gate, w.up, w.routerB, w.gateB, w.upB, w.downB}
}

// moeActs are the activations the experts need, allocated once.
type moeActs struct {
	routes                     backend.Routes
	logits                     backend.Tensor // maxBatch × E
	act, out                   backend.Tensor // maxBatch·k rows: a_p and y_p
	up                         backend.Tensor // maxBatch·k rows, with biases: the up products
	sharedAct, shared, sharedG backend.Tensor // maxBatch rows, with a shared expert
}

func newMoEActs(be backend.Backend, c models.Config, maxBatch int) (*moeActs, error) {
	m, a := c.MoE, &moeActs{}
	var err error
	if a.routes, err = be.NewRoutes(maxBatch, m.Used); err != nil {
		return nil, err
	}
	type alloc struct {
		dst        *backend.Tensor
		rows, cols int
	}
	ts := []alloc{{&a.logits, maxBatch, m.Experts}, {&a.act, maxBatch * m.Used, m.FFN}, {&a.out, maxBatch * m.Used, c.Dim}}
	if m.Biases {
		ts = append(ts, alloc{&a.up, maxBatch * m.Used, m.FFN})
	}
	if m.SharedFFN > 0 {
		ts = append(ts, alloc{&a.sharedAct, maxBatch, m.SharedFFN}, alloc{&a.shared, maxBatch, c.Dim}, alloc{&a.sharedG, maxBatch, 1})
	}
	for _, t := range ts {
		if *t.dst, err = be.NewTensor(t.rows, t.cols); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// uploadExperts uploads layer l's router, experts and shared expert. The
// experts take the storage their matrices would alone (gate and up the
// wider of theirs, as fused matrices do: a mix may give them two types);
// the router stays f32, as llama.cpp's converters and quantize keep it
// (it is small, and its logits decide which experts run).
func (n *llama) uploadExperts(m *models.Model, ws WeightStorage, l int) (moeWeights, error) {
	var w moeWeights
	c := n.cfg
	router, err := m.Tensor(models.LayerTensor(l, models.FFNRouter))
	if err != nil {
		return w, err
	}
	if w.router, err = n.be.Upload(router); err != nil {
		return w, fmt.Errorf("upload %s: %w", router.Name, err)
	}
	experts := func(kinds ...string) (backend.Weight, error) {
		ts := make([]*models.Tensor, len(kinds))
		for i, kind := range kinds {
			if ts[i], err = m.Tensor(models.LayerTensor(l, kind)); err != nil {
				return nil, err
			}
		}
		ms := make([]*models.Tensor, len(ts))
		for i, t := range ts {
			ms[i] = expertMatrix(t)
		}
		t, s := ts[0], ws.Fused(ms, c)
		up, err := n.be.UploadExperts(ts, s)
		if err != nil {
			return nil, fmt.Errorf("upload %s as %s: %w", t.Name, s, err)
		}
		return up, nil
	}
	if c.MoE.Biases { // gate and up apart, each with its bias before the GLU
		if w.gate, err = experts(models.FFNGateExps); err != nil {
			return w, err
		}
		if w.up, err = experts(models.FFNUpExps); err != nil {
			return w, err
		}
		for _, b := range []struct {
			dst  *backend.Weight
			kind string
		}{{&w.routerB, models.FFNRouter}, {&w.gateB, models.FFNGateExps}, {&w.upB, models.FFNUpExps}, {&w.downB, models.FFNDownExps}} {
			t, err := m.Tensor(models.LayerBias(l, b.kind))
			if err != nil {
				return w, err
			}
			if *b.dst, err = n.be.Upload(t); err != nil {
				return w, fmt.Errorf("upload %s: %w", t.Name, err)
			}
		}
	} else if w.gateUp, err = experts(models.FFNGateExps, models.FFNUpExps); err != nil {
		return w, err
	}
	if w.down, err = experts(models.FFNDownExps); err != nil {
		return w, err
	}
	if c.MoE.SharedFFN == 0 {
		return w, nil
	}
	if w.sharedGateUp, err = n.fuse(m, ws, true, models.LayerTensor(l, models.FFNGateShexp), models.LayerTensor(l, models.FFNUpShexp)); err != nil {
		return w, err
	}
	down, err := m.Tensor(models.LayerTensor(l, models.FFNDownShexp))
	if err != nil {
		return w, err
	}
	if w.sharedDown, err = n.be.UploadAs(down, ws.For(down, c)); err != nil {
		return w, fmt.Errorf("upload %s: %w", down.Name, err)
	}
	g, err := m.Tensor(models.LayerTensor(l, models.FFNRouterShexp))
	if err != nil {
		return w, err
	}
	if w.sharedGate, err = n.be.Upload(models.NewTensor(g.Name, []int{1, c.Dim}, g.Type, g.Raw)); err != nil {
		return w, fmt.Errorf("upload %s: %w", g.Name, err)
	}
	return w, nil
}

// experts queues the feed-forward block of layer w through its experts
// (see the top of this file).
func (n *llama) experts(w layerWeights) {
	be, c, a, e := n.be, n.cfg, n.moe, w.experts
	be.RMSNorm(n.xb, n.x, w.ffnNorm, c.NormEps)
	be.MatMul(a.logits, n.xb, e.router)
	if e.routerB != nil {
		be.AddBias(a.logits, e.routerB)
	}
	be.Route(a.routes, a.logits, c.MoE.NormTopK)
	if e.gateUp != nil {
		be.ExpertProject(backend.ExpertProjection{X: n.xb, W: e.gateUp, R: a.routes, Out: a.act, GLU: true, Act: c.Act})
	} else { // gpt-oss: gate and up with their biases, then the GLU
		be.ExpertProject(backend.ExpertProjection{X: n.xb, W: e.gate, R: a.routes, Out: a.act})
		be.ExpertBias(a.act, e.gateB, a.routes)
		be.ExpertProject(backend.ExpertProjection{X: n.xb, W: e.up, R: a.routes, Out: a.up})
		be.ExpertBias(a.up, e.upB, a.routes)
		be.ExpertGLU(a.act, a.up, a.routes, c.Act)
	}
	be.ExpertProject(backend.ExpertProjection{X: a.act, Slots: true, W: e.down, R: a.routes, Out: a.out})
	if e.downB != nil {
		be.ExpertBias(a.out, e.downB, a.routes)
	}
	comb := backend.MoECombine{Dst: n.x, Y: a.out, R: a.routes, Scale: c.ResidualScale}
	if e.sharedGateUp != nil {
		be.Project(backend.Projection{X: n.xb, W: e.sharedGateUp, Out: []backend.Tensor{a.sharedAct}, GLU: true, Act: c.Act})
		be.Project(backend.Projection{X: a.sharedAct, W: e.sharedDown, Out: []backend.Tensor{a.shared}})
		be.MatMul(a.sharedG, n.xb, e.sharedGate)
		comb.Shared, comb.SharedGate = a.shared, a.sharedG
	}
	be.Combine(comb)
}

// idleExpertBytes is what a decode token leaves unread of the experts: all
// but the k of E its rows route to, in every layer.
func (n *llama) idleExpertBytes() int64 {
	m := n.cfg.MoE
	if !m.On() {
		return 0
	}
	var all int64
	for _, w := range n.layers {
		for _, x := range []backend.Weight{w.experts.gateUp, w.experts.gate, w.experts.up, w.experts.down} {
			if x != nil {
				all += x.Bytes()
			}
		}
	}
	return all - all*int64(m.Used)/int64(m.Experts)
}
