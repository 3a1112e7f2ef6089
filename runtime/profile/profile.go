// Package profile times the ops of a forward pass on any backend: where a
// decode step's time goes, op by op and layer by layer. It is a
// backend.Backend decorator (as runtime/capture is): the engine's own
// forward pass runs, and while recording, every op is made to finish
// before the next begins (a one-value read back after it, which on a GPU
// backend submits what the op recorded and waits for it), so that the
// wall time around it, less that of a read back with nothing queued, is
// its time.
//
// The time is taken on the CPU side: cogentcore/webgpu v0.23.0 has no
// timestamp writes in its compute pass descriptor, so GPU timestamp
// queries are out of reach through it. An op's time thus includes one
// submission and one read back, which is what the forward pass without
// fusion pays per op anyway on a CPU adapter and a small part of it on a
// GPU; Report compares the sum with the step's time unprofiled.
package profile

import (
	"github.com/tessera-llm/tessera/runtime/internal/cputime"
	"time"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/runtime/backend"
)

// Op is one timed op of a decode step.
type Op struct {
	Kind  string // what it computes: "qkv", "rope+kv+attend" (or "rope+kv", "attend"), "o", "gate+up", "down", "head", "embed", ...
	Layer int    // -1 before the first layer, Layers for the head
	Time  time.Duration
	// Bytes is what a matrix product reads and writes: its weight, its
	// input and output rows (0 for other ops).
	Bytes int64
	// CPU is the process's CPU time over the op (less an empty sync's):
	// on a CPU adapter such as lavapipe, the driver threads' work, which
	// other processes on shared cores disturb less than Time.
	CPU time.Duration
}

// Backend wraps a backend and times its ops on decode steps while On:
// batches of Rows rows (0 counts as 1), each of another sequence, so that
// a batched decode step (tessera profile --concurrency) is timed and
// prompt chunks are not.
type Backend struct {
	backend.Backend
	On   bool
	Rows int

	ops    []Op
	steps  int
	timing bool // the current step is a decode step and On
	layer  int
	adds   int  // residual projections seen in the current layer
	head   bool // the step's layers are done: the output rows and head follow
	probe  backend.Tensor
	err    error

	// The decode steps of Rows rows while not On, each from its Begin to
	// the next where that is one too: what such a step costs unprofiled,
	// the engine's host work between steps included (StepTime).
	begun     time.Time // the current step's Begin
	untimed   bool      // the current step is one of them
	stepTotal time.Duration
	stepCount int
}

// New wraps inner.
func New(inner backend.Backend) *Backend { return &Backend{Backend: inner} }

// Unwrap returns the wrapped backend.
func (b *Backend) Unwrap() backend.Backend { return b.Backend }

// Ops returns the timed ops so far and the decode steps they came from.
func (b *Backend) Ops() ([]Op, int) { return b.ops, b.steps }

// Reset forgets the ops timed so far.
func (b *Backend) Reset() { b.ops, b.steps = nil, 0 }

// StepTime is the mean wall time of the decode steps of Rows rows seen
// while not On, each from its Begin to the next step's where that is one
// too (the last of a run may be followed by anything, an idle engine
// included), or 0 for none: a step's time unprofiled, against which the
// ops' sum is set. It is the mean, not the median, because chained GPU
// steps are recorded in quick succession and the last of a chain waits
// for them all. A batched decode step must be timed so: a sequence's own
// decode rate, the bench's figure, also counts the prompt steps of the
// others that arrive while it decodes.
func (b *Backend) StepTime() time.Duration {
	if b.stepCount == 0 {
		return 0
	}
	return b.stepTotal / time.Duration(b.stepCount)
}

// Err reports the first failure of a read back that timing needed.
func (b *Backend) Err() error { return b.err }

func (b *Backend) Begin(batch backend.Batch) error {
	b.start(batch)
	return b.Backend.Begin(batch)
}

func (b *Backend) BeginChained(batch backend.Batch) error {
	b.start(batch)
	return b.Backend.BeginChained(batch)
}

func (b *Backend) start(batch backend.Batch) {
	now := time.Now()
	decode := batch.Len() == max(b.Rows, 1) && decodeStep(batch)
	if b.untimed && decode && !b.On { // one of two such steps in a row: not a gap between runs
		b.stepTotal += now.Sub(b.begun)
		b.stepCount++
	}
	b.timing = b.On && decode
	b.untimed, b.begun = !b.On && decode, now
	b.layer, b.adds, b.head = -1, 0, false
	if b.timing {
		b.steps++
	}
}

// decodeStep says whether every row of batch is another sequence's.
func decodeStep(batch backend.Batch) bool {
	seen := make(map[int32]bool, batch.Len())
	for _, s := range batch.Seq {
		if seen[s] {
			return false
		}
		seen[s] = true
	}
	return true
}

// timed runs op to completion and records it as kind.
func (b *Backend) timed(kind string, bytes int64, op func()) {
	if !b.timing || b.err != nil {
		op()
		return
	}
	if b.probe == nil {
		if b.probe, b.err = b.Backend.NewTensor(1, 1); b.err != nil {
			op()
			return
		}
	}
	b.sync() // what came before is not this op's
	start, cpu := time.Now(), cputime.Process()
	b.sync() // an empty one: the read back's own cost, not the op's
	empty, emptyCPU := time.Since(start), cputime.Process()-cpu
	start, cpu = time.Now(), cputime.Process()
	op()
	b.sync()
	b.ops = append(b.ops, Op{Kind: kind, Layer: b.layer, Time: max(time.Since(start)-empty, 0), Bytes: bytes,
		CPU: max(cputime.Process()-cpu-emptyCPU, 0)})
}

// sync waits for everything queued so far.
func (b *Backend) sync() {
	if _, err := b.Backend.Read(b.probe, 1); err != nil && b.err == nil {
		b.err = err
	}
}

// toHead counts the ops from here as the head's (a layer past the last).
func (b *Backend) toHead() {
	if !b.head {
		b.layer++
		b.head = true
	}
}

// tensorBytes is the size of the rows of t the step covers (one row).
func tensorBytes(t backend.Tensor) int64 { return 4 * int64(t.Cols()) }

func (b *Backend) Project(p backend.Projection) {
	kind := "matmul"
	switch {
	case len(p.Out) == 3:
		kind = "qkv"
		b.layer++
		b.adds = 0
	case p.GLU || len(p.Out) == 2:
		kind = "gate+up"
	case p.Add && b.adds == 0:
		kind, b.adds = "o", 1
	case p.Add:
		kind = "down"
	case p.Norm != nil:
		kind = "head"
		b.toHead()
	}
	bytes := p.W.Bytes() + tensorBytes(p.X)
	for _, o := range p.Out {
		bytes += tensorBytes(o)
	}
	b.timed(kind, bytes, func() { b.Backend.Project(p) })
}

func (b *Backend) MatMul(dst, x backend.Tensor, w backend.Weight) {
	b.timed("matmul", w.Bytes()+tensorBytes(x)+tensorBytes(dst), func() { b.Backend.MatMul(dst, x, w) })
}

func (b *Backend) RopeStore(q, k, v backend.Tensor, kv backend.KV, l int, rq, rk backend.Rope) {
	b.timed("rope+kv", 0, func() { b.Backend.RopeStore(q, k, v, kv, l, rq, rk) })
}

func (b *Backend) RopeAttend(dst, q, k, v backend.Tensor, kv backend.KV, l int, rq, rk backend.Rope, a backend.Attention) {
	b.timed("rope+kv+attend", 0, func() { b.Backend.RopeAttend(dst, q, k, v, kv, l, rq, rk, a) })
}

func (b *Backend) Attend(dst, q backend.Tensor, kv backend.KV, l int, a backend.Attention) {
	b.timed("attend", 0, func() { b.Backend.Attend(dst, q, kv, l, a) })
}

func (b *Backend) Embed(dst backend.Tensor, table backend.Weight) {
	b.timed("embed", 0, func() { b.Backend.Embed(dst, table) })
}

func (b *Backend) RMSNorm(dst, x backend.Tensor, w backend.Weight, eps float32) {
	b.timed("rmsnorm", 0, func() { b.Backend.RMSNorm(dst, x, w, eps) })
}

func (b *Backend) Rope(x backend.Tensor, r backend.Rope) {
	b.timed("rope", 0, func() { b.Backend.Rope(x, r) })
}

func (b *Backend) StoreKV(kv backend.KV, l int, k, v backend.Tensor) {
	b.timed("store-kv", 0, func() { b.Backend.StoreKV(kv, l, k, v) })
}

func (b *Backend) HeadNorm(x backend.Tensor, w backend.Weight, headDim int, eps float32) {
	b.timed("head-norm", 0, func() { b.Backend.HeadNorm(x, w, headDim, eps) })
}

func (b *Backend) GLU(gate, up backend.Tensor, act models.Activation) {
	b.timed("glu", 0, func() { b.Backend.GLU(gate, up, act) })
}

func (b *Backend) Add(dst, x backend.Tensor) {
	b.timed("add", 0, func() { b.Backend.Add(dst, x) })
}

func (b *Backend) Scale(x backend.Tensor, s float32) {
	b.timed("scale", 0, func() { b.Backend.Scale(x, s) })
}

func (b *Backend) Softcap(x backend.Tensor, cap float32) {
	b.timed("softcap", 0, func() { b.Backend.Softcap(x, cap) })
}

func (b *Backend) AddBias(x backend.Tensor, bias backend.Weight) {
	b.timed("bias", 0, func() { b.Backend.AddBias(x, bias) })
}

func (b *Backend) AddLoRA(x backend.Tensor, l backend.LoRA, dsts ...backend.Tensor) {
	b.timed("lora", 0, func() { b.Backend.AddLoRA(x, l, dsts...) })
}

func (b *Backend) EmbedLoRA(dst backend.Tensor, l backend.LoRA) {
	b.timed("lora", 0, func() { b.Backend.EmbedLoRA(dst, l) })
}

func (b *Backend) CopyRow(t backend.Tensor, dst int, x backend.Tensor, src int) {
	b.toHead()
	b.timed("copy-row", 0, func() { b.Backend.CopyRow(t, dst, x, src) })
}

func (b *Backend) Mask(x backend.Tensor, row int, mask []uint32) {
	b.timed("mask", 0, func() { b.Backend.Mask(x, row, mask) })
}

func (b *Backend) Keep(x backend.Tensor, n int) {
	b.timed("argmax", 0, func() { b.Backend.Keep(x, n) })
}

func (b *Backend) Argmax(x backend.Tensor, n int) ([]int32, error) {
	var ids []int32
	var err error
	b.timed("argmax", 0, func() { ids, err = b.Backend.Argmax(x, n) })
	return ids, err
}

func (b *Backend) Route(r backend.Routes, logits backend.Tensor, norm bool) {
	b.timed("route", 0, func() { b.Backend.Route(r, logits, norm) })
}

// ExpertProject counts the bytes of the experts a decode row chose: its k
// slots name k distinct experts (a top-k), each 1/E of the stacked weight,
// and the products read nothing of the others; each slot reads an input
// row and writes an output row.
func (b *Backend) ExpertProject(p backend.ExpertProjection) {
	kind := "moe-down"
	if p.GLU {
		kind = "moe-gateup"
	}
	e, k := int64(p.W.Shape()[0]), int64(p.R.K())
	bytes := p.W.Bytes()*k/e + k*(tensorBytes(p.X)+tensorBytes(p.Out))
	b.timed(kind, bytes, func() { b.Backend.ExpertProject(p) })
}

func (b *Backend) Combine(c backend.MoECombine) {
	b.timed("combine", 0, func() { b.Backend.Combine(c) })
}
