package runtime

// The load-time self-check: WebGPU drivers return wrong values on some
// machines, and nothing in a user's browser or desktop would notice. So
// before an engine runs a model on a WebGPU adapter it runs a twin of the
// model (twin.go: the same architecture, flags and weight types at a few
// hundred columns, random weights) through the very forward pass, on the
// adapter and on the CPU backend, which is every kernel's reference, and
// compares the logits. A plan of kernels that disagrees is replaced by a
// plainer one (plainer, below), and if none agrees the engine runs on the
// CPU. Either way the outcome is reported (Engine.SelfCheck): `tessera
// info`, the server's /health and metrics, the browser's engine.info().
//
// A result depends only on the adapter, its driver, the engine's version
// and the twin, so it is cached under a key of those (SelfCheckCache):
// a second load on the same machine costs a file read.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/lora"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/shaders"
)

// SelfCheck is what the load-time self-check found on a WebGPU adapter.
type SelfCheck struct {
	Adapter string // the adapter and its driver, as the device reports them
	Driver  string
	// Kernels are the kernel variants the twin ran (name and fusion, as
	// the GPU backend labels its pipelines), under the plan that passed.
	Kernels []string
	// Failed lists the plans that disagreed with the CPU, in the order
	// tried, each with its first mismatch; empty when the adapter's own
	// plan passed.
	Failed []PlanFailure
	// Plan names the plan the engine runs with ("the adapter's kernels",
	// or the plainest rung of plainer that passed), and Forced is that
	// plan as GPUPlan fields.
	Plan   string
	Forced GPUPlan
	// CPU is true when no plan passed: the engine runs on the CPU backend.
	CPU bool
	// Skipped says why the check did not run (no twin of this model), or
	// is empty.
	Skipped string
	// Cached is true when the result came from the cache; Elapsed is what
	// the check (or the cache read) cost this load.
	Cached  bool          `json:"-"`
	Elapsed time.Duration `json:"-"`
}

// PlanFailure is one plan that failed the self-check.
type PlanFailure struct {
	Plan  string // the plan, as plainer names it
	Error string // the first mismatch (step, row, column, values) or error
}

// Passed reports whether the engine runs on the adapter with kernels
// that agreed with the CPU.
func (s SelfCheck) Passed() bool { return s.Skipped == "" && !s.CPU }

// Status is one word for metrics and logs: "passed", "fallback" (a
// plainer plan passed), "cpu" (none did), or "skipped".
func (s SelfCheck) Status() string {
	switch {
	case s.Skipped != "":
		return "skipped"
	case s.CPU:
		return "cpu"
	case len(s.Failed) > 0:
		return "fallback"
	}
	return "passed"
}

// String is a one-line report.
func (s SelfCheck) String() string {
	how := s.Elapsed.Round(time.Millisecond).String()
	if s.Cached {
		how = "cached, " + how
	}
	switch s.Status() {
	case "skipped":
		return fmt.Sprintf("self-check on %s: skipped: %s", s.Adapter, s.Skipped)
	case "passed":
		return fmt.Sprintf("self-check on %s: passed (%d kernel variants agree with the CPU; %s)", s.Adapter, len(s.Kernels), how)
	}
	var failed []string
	for _, f := range s.Failed {
		failed = append(failed, fmt.Sprintf("%s: %s", f.Plan, f.Error))
	}
	if s.CPU {
		return fmt.Sprintf("self-check on %s: FAILED, running on the CPU backend (%s; %s)", s.Adapter, strings.Join(failed, "; "), how)
	}
	return fmt.Sprintf("self-check on %s: %s failed, running with %s (%d kernel variants agree; %s)", s.Adapter, strings.Join(failed, "; "), s.Plan, len(s.Kernels), how)
}

// SelfCheckCache keeps self-check results across loads, by a key of the
// adapter, driver, engine version and twin.
type SelfCheckCache interface {
	Get(key string) ([]byte, bool)
	Put(key string, data []byte) error
}

// DirCache is a SelfCheckCache of one small JSON file per key in a
// directory.
type DirCache string

func (d DirCache) Get(key string) ([]byte, bool) {
	b, err := os.ReadFile(filepath.Join(string(d), key+".json"))
	return b, err == nil
}

func (d DirCache) Put(key string, data []byte) error {
	if err := os.MkdirAll(string(d), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(string(d), key+".*.tmp")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(string(d), key+".json"))
}

// defaultSelfCheckCache is a directory under the user's cache directory,
// or nil where there is none (a browser, a sandbox without HOME).
func defaultSelfCheckCache() SelfCheckCache {
	dir, err := os.UserCacheDir()
	if err != nil {
		return nil
	}
	return DirCache(filepath.Join(dir, "tessera", "selfcheck"))
}

// selfCheckTolerance bounds the difference of a twin logit between the
// adapter and the CPU, relative to the largest logit of its row (at
// least 1): twin tests hold each kernel to 1e-4 of its CPU twin and
// quantized products to about 1e-3, and the twin's two to six layers
// compound that to a few 1e-4 (TestSelfCheckPassesEveryFamily passes
// every tiny family in f32 and int4 with it). A miscompiled kernel is off
// by far more.
const selfCheckTolerance = 5e-3

// checkedDevice is the device the self-check runs on, as device.go
// describes a WebGPU backend's: the check itself knows no backend, only
// the adapter's names, the ladder of plans to try, and how to open a
// backend on the device that runs a plan.
type checkedDevice struct {
	adapter, driver string
	// identity is everything of the adapter a result depends on (name,
	// vendor, architecture, driver, API, device type).
	identity string
	base     GPUPlan
	rungs    []planRung
	// open opens a backend on the device running plan; kernels lists the
	// kernel variants it has run so far.
	open func(plan GPUPlan, maxRows int) (be backend.Backend, kernels func() []string, err error)
}

// planRung is one plan of the ladder: the plan and what it gives up.
type planRung struct {
	name string
	plan GPUPlan
}

// selfCheck runs the self-check of model m, stored as ws with the cache
// type kvType, on dev; the reference runs on a CPU backend of threads
// threads; cache may be nil.
func selfCheck(ctx context.Context, m *models.Model, ws WeightStorage, kvType backend.KVType, dev checkedDevice, withLoRA bool, threads int, cache SelfCheckCache) SelfCheck {
	start := time.Now()
	r := SelfCheck{Adapter: dev.adapter, Driver: dev.driver}
	key := selfCheckKey(dev.identity, m, ws, kvType, dev.base, withLoRA)
	if cache != nil {
		if b, ok := cache.Get(key); ok {
			var c SelfCheck
			if json.Unmarshal(b, &c) == nil && c.Plan != "" {
				c.Cached, c.Elapsed = true, time.Since(start)
				return c
			}
		}
	}
	tw, err := newTwin(m, ws, withLoRA)
	if err != nil {
		r.Skipped = err.Error()
		r.Elapsed = time.Since(start)
		return r
	}
	ref := newCPU(threads)
	want, err := runTwin(ctx, ref, tw, kvType)
	ref.Close()
	if err != nil {
		r.Skipped = fmt.Sprintf("the twin on the CPU: %v", err)
		r.Elapsed = time.Since(start)
		return r
	}
	r.CPU = true
	for _, rung := range dev.rungs {
		if ctx.Err() != nil { // not a verdict on the kernels
			r.Skipped, r.CPU = ctx.Err().Error(), false
			break
		}
		kernels, err := checkPlan(ctx, dev, rung.plan, tw, kvType, want)
		if err != nil {
			r.Failed = append(r.Failed, PlanFailure{Plan: rung.name, Error: err.Error()})
			continue
		}
		r.CPU, r.Plan, r.Forced, r.Kernels = false, rung.name, rung.plan, kernels
		break
	}
	if r.CPU {
		r.Plan = "the CPU backend"
	}
	if cache != nil && r.Skipped == "" {
		if b, err := json.Marshal(r); err == nil {
			cache.Put(key, b) // best effort: a read-only cache only costs the next load a check
		}
	}
	r.Elapsed = time.Since(start)
	return r
}

// checkPlan runs the twin on a backend of dev with plan and compares its
// outputs with the CPU's, returning the kernel variants it ran.
func checkPlan(ctx context.Context, dev checkedDevice, plan GPUPlan, tw *twin, kvType backend.KVType, want []twinStep) ([]string, error) {
	be, kernels, err := dev.open(plan, twinRows)
	if err != nil {
		return nil, err
	}
	defer be.Close()
	got, err := runTwin(ctx, be, tw, kvType)
	if err != nil {
		return nil, err
	}
	if err := compareTwin(got, want); err != nil {
		return nil, err
	}
	return kernels(), nil
}

// selfCheckKey names a result: everything it depends on, hashed (the
// model's shape and tensor types, which make its twin, rather than the
// twin itself, so that a cached result costs no twin).
func selfCheckKey(identity string, m *models.Model, ws WeightStorage, kvType backend.KVType, base GPUPlan, withLoRA bool) string {
	h := sha256.New()
	config, _ := json.Marshal(m.Config) // by value: %v would print a pointer's address
	fmt.Fprintf(h, "%s %s\n%s\n%s\n%v\n%+v\nlora %v\n", Version(), shaders.Digest(), identity,
		config, kvType, base, withLoRA)
	for _, name := range m.TensorNames() {
		t := m.Tensors[name]
		fmt.Fprintf(h, "%s %v %v %v\n", name, t.Shape, t.Type, ws.For(t, m.Config))
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// twinStep is what one step of the twin gave: its logits, and the ids
// the backend's argmax picked (on the device, as decoding does).
type twinStep struct {
	name   string
	logits []float32 // rows × vocab
	argmax []int32
}

// twinRows is the batch the twin's backend takes.
const twinRows = 16

// runTwin runs the twin's steps on be: a prompt step of two sequences
// scoring the last row (as a prompt does), a decode step of the first
// that keeps its argmax on the device, and a chained step reading it
// (multi-step decoding). The rows are a prompt's and a single stream's,
// so that the kernels the twin compiles, specialised by row count, are
// those the model's first generation runs: on a software adapter
// compiling is most of the cost. The windows of the twin's sliding
// layers are shorter than its sequences, so they slide.
func runTwin(ctx context.Context, be backend.Backend, tw *twin, kvType backend.KVType) ([]twinStep, error) {
	c := tw.model.Config
	const block = DefaultBlockSize
	n, err := newLlama(tw.model, be, tw.ws, twinRows, twinRows, backend.KVShape{Layers: c.Layers, Blocks: 4, BlockSize: block,
		Heads: c.KVHeads, HeadDim: c.HeadDim, Type: kvType}, windowing{}) // the kernels of a windowed cache are these, bound to rings
	if err != nil {
		return nil, err
	}
	tables := [][]int32{{0, 1}, {2, 3}}
	tok := func(i int) int32 { return int32((7*i + 3) % c.Vocab) }
	var prompt backend.Batch
	for s, length := range []int{9, 5} {
		for p := range length {
			prompt.Tokens = append(prompt.Tokens, tok(len(prompt.Tokens)))
			prompt.Pos = append(prompt.Pos, int32(p))
			prompt.Seq = append(prompt.Seq, int32(s))
		}
	}
	prompt.Tables, prompt.BlockSize, prompt.Out = tables, block, []int32{13}
	decode := backend.Batch{Tokens: []int32{tok(20)}, Pos: []int32{9}, Seq: []int32{0},
		Tables: tables, BlockSize: block, Out: []int32{0}}
	chained := decode
	chained.Tokens, chained.Pos = []int32{0}, []int32{10} // its tokens are the kept ids
	if n.recurrent() {                                    // a state slot for each sequence
		for _, b := range []*backend.Batch{&prompt, &decode, &chained} {
			b.States = []int32{0, 1}
		}
	}
	if tw.lora != nil { // the first sequence with the adapter, the second without
		if err := n.setLoRA([]*lora.Adapter{tw.lora}); err != nil {
			return nil, err
		}
		for _, s := range prompt.Seq {
			prompt.Adapter = append(prompt.Adapter, -s)
			prompt.AdapterScale = append(prompt.AdapterScale, 1)
		}
		decode.Adapter, decode.AdapterScale = []int32{0}, []float32{1}
		chained.Adapter, chained.AdapterScale = decode.Adapter, decode.AdapterScale
	}

	var steps []twinStep
	read := func(name string, rows int, argmax bool) error {
		st := twinStep{name: name}
		if st.logits, err = be.Read(n.logits, rows); err == nil && argmax {
			st.argmax, err = be.Argmax(n.logits, rows)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		steps = append(steps, st)
		return ctx.Err()
	}
	if err := n.forward(prompt); err != nil {
		return nil, err
	}
	if err := read("the prompt step", len(prompt.Out), true); err != nil {
		return nil, err
	}
	// The decode step keeps its argmax on the device for the chained
	// step, as multi-step decoding does; Kept returns it after.
	if err := n.forward(decode); err != nil {
		return nil, err
	}
	be.Keep(n.logits, len(decode.Out))
	if err := read("the decode step", len(decode.Out), false); err != nil {
		return nil, err
	}
	if err := n.forwardChained(chained); err != nil {
		return nil, err
	}
	if err := read("the chained step", len(chained.Out), false); err != nil {
		return nil, err
	}
	if steps[1].argmax, err = be.Kept(); err != nil {
		return nil, err
	}
	if steps[2].argmax, err = be.Argmax(n.logits, len(chained.Out)); err != nil {
		return nil, err
	}
	return steps, nil
}

// compareTwin reports the first output of got that differs from want's
// beyond selfCheckTolerance, or an argmax that differs where want's best
// logit is ahead of the next by more than the tolerance.
func compareTwin(got, want []twinStep) error {
	for s, w := range want {
		g := got[s]
		if s > 0 && !slices.Equal(got[s-1].argmax, want[s-1].argmax) {
			break // the steps after read different ids (near ties, passed above)
		}
		vocab := len(w.logits) / len(w.argmax)
		for r := range w.argmax {
			gr, wr := g.logits[r*vocab:(r+1)*vocab], w.logits[r*vocab:(r+1)*vocab]
			scale := 1.0
			for _, v := range wr {
				scale = max(scale, math.Abs(float64(v)))
			}
			for j := range wr {
				d := math.Abs(float64(gr[j]) - float64(wr[j]))
				if !(d <= selfCheckTolerance*scale) { // NaN fails too
					return fmt.Errorf("%s, row %d, logit %d: %.6g on the GPU, %.6g on the CPU", w.name, r, j, gr[j], wr[j])
				}
			}
			if g.argmax[r] != w.argmax[r] && clearWinner(wr, selfCheckTolerance*scale) {
				return fmt.Errorf("%s, row %d: argmax %d on the GPU, %d on the CPU", w.name, r, g.argmax[r], w.argmax[r])
			}
		}
	}
	return nil
}

// clearWinner reports whether the largest value of row leads the next by
// more than tol (else two backends within tolerance may pick either).
func clearWinner(row []float32, tol float64) bool {
	s := slices.Clone(row)
	slices.Sort(s)
	return len(s) < 2 || float64(s[len(s)-1]-s[len(s)-2]) > tol
}

// SelfCheck reports the load-time self-check of the engine's WebGPU
// kernels, and false where none ran (a CPU engine, or NoSelfCheck). An
// engine the check moved to the CPU reports it too.
func (e *Engine) SelfCheck() (SelfCheck, bool) {
	if e.selfCheck == nil {
		return SelfCheck{}, false
	}
	return *e.selfCheck, true
}
