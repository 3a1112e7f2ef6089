package runtime

import (
	"fmt"
	"slices"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/runtime/backend"
)

// Qwen3.5's linear-attention layers (models.LinearConfig) on the Llama
// forward pass: their weights, activations and recurrent states. The
// states are per sequence and cannot be rolled back: the engine gives
// each running sequence a slot (sequence.state), refuses speculative
// decoding on such a model, and takes a prefix-cache hit only where it
// kept a snapshot of the state at the hit's end (stateSlots).

// uploadLinear uploads linear layer l's weights into lw: its norms, the
// fused input projection, the convolution, the gate's parameters, the
// output norm and projection, and its feed-forward block.
func (n *llama) uploadLinear(m *models.Model, ws WeightStorage, lw *layerWeights, l int) error {
	c := n.cfg
	upload := func(name string) (backend.Weight, error) {
		t, err := m.Tensor(name)
		if err != nil {
			return nil, err
		}
		s := ws.For(t, c)
		if len(t.Shape) == 1 || name == models.LayerTensor(l, models.LinConv) {
			s = backend.F32 // vectors, and the taps the convolution reads as F32
		}
		w, err := n.be.UploadAs(t, s)
		if err != nil {
			return nil, fmt.Errorf("upload %s as %s: %w", name, s, err)
		}
		return w, nil
	}
	lin := &linearWeights{}
	for _, u := range []struct {
		dst  *backend.Weight
		name string
	}{
		{&lw.attnNorm, models.LayerTensor(l, models.AttnNorm)}, {&lw.ffnNorm, models.LayerTensor(l, models.FFNNorm)},
		{&lin.conv, models.LayerTensor(l, models.LinConv)}, {&lin.norm, models.LayerTensor(l, models.LinNorm)},
		{&lin.out, models.LayerTensor(l, models.LinOut)},
	} {
		var err error
		if *u.dst, err = upload(u.name); err != nil {
			return err
		}
	}
	var err error
	if lin.in, err = n.fuse(m, ws, false, models.LayerTensor(l, models.LinQKV), models.LayerTensor(l, models.LinGate)); err != nil {
		return err
	}
	// β's and α's rows as one F32 matrix, dt and a as one vector: one
	// output, one binding each.
	for _, u := range []struct {
		dst   *backend.Weight
		name  string
		parts []string
	}{
		{&lin.gates, models.LayerTensor(l, "ssm_beta_alpha"), []string{models.LayerTensor(l, models.LinBeta), models.LayerTensor(l, models.LinAlpha)}},
		{&lin.decay, models.LayerTensor(l, "ssm_dt_a"), []string{models.LayerBias(l, models.LinDT), models.LinearA(l)}},
	} {
		t, err := concatRows(m, u.name, u.parts...)
		if err != nil {
			return err
		}
		if *u.dst, err = n.be.UploadAs(t, backend.F32); err != nil {
			return fmt.Errorf("upload %s: %w", u.name, err)
		}
	}
	lin.index = c.Linear.CountBefore(l)
	lw.linear = lin
	if c.MoE.On() {
		lw.experts, err = n.uploadExperts(m, ws, l)
		return err
	}
	if lw.gateUp, err = n.fuse(m, ws, true, models.LayerTensor(l, models.FFNGate), models.LayerTensor(l, models.FFNUp)); err != nil {
		return err
	}
	if lw.down, err = upload(models.LayerTensor(l, models.FFNDown)); err != nil {
		return err
	}
	return nil
}

// concatRows is the named tensors' rows one after the other, as one F32
// tensor named name (vectors make a longer vector).
func concatRows(m *models.Model, name string, names ...string) (*models.Tensor, error) {
	var all []float32
	var shape []int
	for _, part := range names {
		t, err := m.Tensor(part)
		if err != nil {
			return nil, err
		}
		switch {
		case shape == nil:
			shape = slices.Clone(t.Shape)
		case len(t.Shape) != len(shape) || !slices.Equal(t.Shape[1:], shape[1:]):
			return nil, fmt.Errorf("tensor %s of shape %v cannot follow rows of shape %v", part, t.Shape, shape)
		default:
			shape[0] += t.Shape[0]
		}
		vals, err := t.Float32()
		if err != nil {
			return nil, err
		}
		all = append(all, vals...)
	}
	data, err := dtype.Quantize(dtype.F32, all)
	if err != nil {
		return nil, err
	}
	return models.NewTensor(name, shape, dtype.F32, func() ([]byte, error) { return data, nil }), nil
}

// newLinear allocates the linear layers' activations and the recurrent
// states: a slot for each sequence a step can run (maxOut), the scratch
// slot and the snapshots (stateSlots).
func (n *llama) newLinear(maxBatch int) error {
	lc, be := n.cfg.Linear, n.be
	a := &linearActs{}
	for _, t := range []struct {
		dst  *backend.Tensor
		cols int
	}{
		{&a.mixed, lc.Channels()}, {&a.conv, lc.Channels()}, {&a.z, lc.Inner()}, {&a.o, lc.Inner()},
		{&a.gates, 2 * lc.VHeads},
	} {
		var err error
		if *t.dst, err = be.NewTensor(maxBatch, t.cols); err != nil {
			return err
		}
	}
	n.lin = a
	rec, err := be.NewRecurrent(recurrentShape(n.cfg, n.maxOut))
	if err != nil {
		return err
	}
	n.rec = rec
	return nil
}

// maxRecurrent is how many sequences run at once on a model with linear
// layers: each holds a state slot (Qwen3.5-0.8B's are 20 MB), so fewer
// than a step's outputs.
const maxRecurrent = 8

// recurrentShape is the states of c's linear layers for a net of maxOut
// outputs: a slot per sequence that runs (maxRunning), the scratch slot and
// the snapshots (stateSlots); zero without linear layers.
func recurrentShape(c models.Config, maxOut int) backend.RecurrentShape {
	lc := c.Linear
	if !lc.On() {
		return backend.RecurrentShape{}
	}
	return backend.RecurrentShape{Layers: lc.Count(), Slots: min(maxOut, maxRecurrent) + 1 + stateSnapshots, Conv: lc.Conv,
		Channels: lc.Channels(), Heads: lc.VHeads, HeadDim: lc.HeadDim}
}

// maxRunning is how many sequences may run at once: one per output row of
// a step, fewer with linear layers (maxRecurrent) or where the rings of a
// windowed cache run out (planWindows).
func (n *llama) maxRunning() int {
	switch {
	case n.recurrent():
		return min(n.maxOut, maxRecurrent)
	case n.win != nil:
		return min(n.maxOut, n.winRunning)
	}
	return n.maxOut
}

// kvLayers is how many layers keep keys and values: not the linear ones.
func kvLayers(c models.Config) int { return c.Layers - c.Linear.Count() }

// stateBytes is one sequence's recurrent state in every linear layer.
func (n *llama) stateBytes() int64 {
	if !n.recurrent() {
		return 0
	}
	s := n.rec.Shape()
	return 4 * int64(s.Layers) * int64(s.ConvFloats()+s.MatrixFloats())
}

// recurrent reports whether the model keeps recurrent states: its cache
// cannot be rolled back, nor shared by prefix.
func (n *llama) recurrent() bool { return n.rec != nil }

// slotted reports whether each running sequence needs a sequence slot
// (stateSlots): for its recurrent states, or for its ring in a windowed
// cache (window.go). Prefix-cache hits on such a model restore the slot
// from a snapshot, or are not taken.
func (n *llama) slotted() bool { return n.rec != nil || n.win != nil }

// slots is how many sequence slots the model keeps: the running
// sequences', the scratch slot and the snapshots.
func (n *llama) slots() int {
	switch {
	case n.recurrent():
		return n.rec.Shape().Slots
	case n.win != nil:
		return n.win.Shape().Blocks / n.ring
	}
	return 0
}

// snapshots is how many prefix snapshots the slots hold.
func (n *llama) snapshots() int { return n.slots() - n.maxRunning() - 1 }

// scratchSlot is the state slot of one-off forward passes (scoring,
// embedding, calibration), which run under the step lock and so never
// overlap: no running sequence holds it.
func (n *llama) scratchSlot() int32 { return int32(n.maxRunning()) }

// solo gives a one-sequence batch of a one-off pass the scratch slot (its
// tables set).
func (n *llama) solo(b *backend.Batch) {
	if n.slotted() {
		b.States = []int32{n.scratchSlot()}
		n.windows(b)
	}
}

// checkStates refuses a batch whose sequences have no valid slot on a
// model with linear layers or a windowed cache.
func (n *llama) checkStates(b backend.Batch) error {
	if !n.slotted() {
		return nil
	}
	if err := b.ValidateStates(n.slots()); err != nil {
		if n.win != nil {
			return fmt.Errorf("sliding-window rings: %w", err)
		}
		return fmt.Errorf("linear attention: %w", err)
	}
	if n.win != nil && b.Windows == nil {
		return fmt.Errorf("sliding-window rings: a batch without window tables")
	}
	return nil
}

// StateBytes is what the recurrent states take (0 without linear layers).
func (e *Engine) StateBytes() int64 {
	if !e.net.recurrent() {
		return 0
	}
	return e.net.rec.Shape().Bytes()
}

// stateSnapshots is how many prompt-prefix states an engine keeps for
// the prefix cache (linear layers' states are large: Qwen3.5-0.8B's are
// 20 MB a slot).
const stateSnapshots = 4

// stateSlots hands out the sequence slots of a model with recurrent states
// or a windowed cache (slotted): one per running sequence
// (0..maxRunning-1), the scratch slot (maxRunning), then the snapshots: a
// state (or ring) at the end of a prompt's last whole block, which is
// where a prefix-cache hit of that prompt resumes (kvcache.Seq.Share never
// shares the block of the last token).
type stateSlots struct {
	free  []int32 // sequence slots not in use
	first int32   // the first snapshot slot
	snaps []snapshot
	clock uint64
	hits  int // sequences resumed from a snapshot
}

// snapshot is one kept state: of the sequence whose tokens began with
// prefix, after them.
type snapshot struct {
	prefix []int32 // nil: the slot is free
	pins   int     // admitted sequences waiting to restore it
	used   uint64
}

func newStateSlots(running, snapshots int) *stateSlots {
	r := &stateSlots{first: int32(running) + 1, snaps: make([]snapshot, snapshots)}
	for slot := range running {
		r.free = append(r.free, int32(slot))
	}
	return r
}

// find returns the snapshot slot (0-based among the snapshots) of prefix.
func (r *stateSlots) find(prefix []int32) (int, bool) {
	for i, sn := range r.snaps {
		if sn.prefix != nil && slices.Equal(sn.prefix, prefix) {
			return i, true
		}
	}
	return 0, false
}

// takeState gives s a sequence slot as it starts running, on a model
// with linear layers or a windowed cache. admit runs at most maxRunning sequences, so a
// slot is always free. Called with e.mu held.
func (e *Engine) takeState(s *sequence) {
	if e.rs == nil || s.state != 0 {
		return
	}
	last := len(e.rs.free) - 1
	s.state = e.rs.free[last] + 1
	e.rs.free = e.rs.free[:last]
}

// releaseState frees s's slot (finished or preempted: a preempted
// sequence is recomputed from position 0, where its state starts afresh)
// and its claim on a snapshot. Called with e.mu held.
func (e *Engine) releaseState(s *sequence) {
	if s.restore != 0 {
		e.rs.snaps[s.restore-1].pins--
		s.restore = 0
	}
	s.snapAt = 0
	if s.state == 0 {
		return
	}
	e.rs.free = append(e.rs.free, s.state-1)
	s.state = 0
}

// sharePrefix is the prefix cache for a model with linear layers: s takes
// the cached blocks of its prompt only where a snapshot holds the state
// at their end (restored before its first step: restores); otherwise it
// computes everything, and the state at its last whole block is kept as
// a snapshot on the way (plan stops a prompt chunk there, keepSnapshot).
// Sequences with adapters neither take nor leave snapshots. Called with
// e.mu held.
func (e *Engine) sharePrefix(s *sequence) {
	bs := e.pool.BlockSize()
	at := (len(s.tokens) - 1) / bs * bs
	if s.adapter != nil || at == 0 || len(e.rs.snaps) == 0 { // no snapshot kept: nothing to resume from
		return
	}
	if i, ok := e.rs.find(s.tokens[:at]); ok {
		if got := s.kv.Share(s.tokens); got == at {
			s.stored, s.restore = at, int32(i)+1
			e.rs.snaps[i].pins++
			return
		}
		s.kv.Release() // its later blocks were evicted: no state to resume from
		s.stored = 0
	}
	s.snapAt = at
}

// restores lists the state copies the planned sequences need before the
// step (a snapshot into the sequence's slot), and releases their claims.
// Called with e.mu held.
func (e *Engine) restores(plan []work) [][2]int {
	var cps [][2]int
	for _, w := range plan {
		if r := w.s.restore; r != 0 {
			cps = append(cps, [2]int{int(e.rs.first + r - 1), int(w.s.state - 1)})
			e.rs.snaps[r-1].pins--
			w.s.restore = 0
			e.rs.hits++
		}
	}
	return cps
}

// keepSnapshot copies s's state, s having stored exactly its snapAt
// tokens, into a snapshot slot: a free one, else the least recently used
// one no sequence waits for. Called with e.mu held, after s's step.
func (e *Engine) keepSnapshot(s *sequence) {
	prefix := s.tokens[:s.snapAt]
	s.snapAt = 0
	r := e.rs
	r.clock++
	if i, ok := r.find(prefix); ok {
		r.snaps[i].used = r.clock
		return
	}
	pick := -1 // a free slot, else the least recently used one no sequence waits for
	for i, sn := range r.snaps {
		switch {
		case sn.pins > 0:
		case sn.prefix == nil:
			if pick < 0 || r.snaps[pick].prefix != nil {
				pick = i
			}
		case pick < 0 || r.snaps[pick].prefix != nil && sn.used < r.snaps[pick].used:
			pick = i
		}
	}
	if pick < 0 {
		return
	}
	r.snaps[pick] = snapshot{prefix: slices.Clone(prefix), used: r.clock}
	e.net.copySlot(int(s.state-1), int(r.first)+pick)
}

// copySlot copies sequence slot src to dst: the recurrent states, or the
// ring of every windowed layer.
func (n *llama) copySlot(src, dst int) {
	if n.recurrent() {
		n.be.CopyState(n.rec, src, dst)
	}
	if n.win != nil {
		n.copyRing(src, dst)
	}
}

// lendStates takes n free slots for a lockstep pass outside the scheduler
// (calibration text), which holds the step lock: the running sequences
// keep theirs. It returns nil on a model without linear layers.
func (e *Engine) lendStates(n int) ([]int32, error) {
	if e.rs == nil {
		return nil, nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if n > len(e.rs.free) {
		return nil, fmt.Errorf("%d sequences at once need %d recurrent states; %d are free", n, n, len(e.rs.free))
	}
	at := len(e.rs.free) - n
	lent := slices.Clone(e.rs.free[at:])
	e.rs.free = e.rs.free[:at]
	return lent, nil
}

// returnStates gives back lendStates's slots.
func (e *Engine) returnStates(slots []int32) {
	if len(slots) == 0 {
		return
	}
	e.mu.Lock()
	e.rs.free = append(e.rs.free, slots...)
	e.mu.Unlock()
}
