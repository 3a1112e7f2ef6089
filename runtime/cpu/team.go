package cpu

import (
	"runtime"
	"sync/atomic"
	"time"
)

// A team runs the parts of one operation on up to size cores: the calling
// goroutine and size-1 helpers that stay awake between operations.
//
// Why helpers stay awake: waking a parked thread takes the Go scheduler
// and, on a virtual machine, the hypervisor tens of microseconds, as long
// as a whole decode matrix product (13 µs for smollm2's 576×576 in int4).
// A goroutine started per operation therefore began after the caller had
// finished its half, and two workers were slower than one
// (BenchmarkMatMulInt4Decode). Helpers that spin for a short while after
// their last part are there when the next operation comes, a few
// microseconds later within a forward pass; after helperIdle without work
// they exit, so an idle engine burns no core and leaks no goroutine.
//
// Why parts are claimed rather than handed out: a helper that is late (just
// started, or descheduled on a loaded machine) must not hold up the caller
// with a fixed share of the work. Each operation is cut into a few parts
// per worker; each worker first claims its own share in order, as a fixed
// split would give it (so that a product run again finds its rows in the
// same core's cache), then takes what others have not started, from the
// far end. Part bounds depend only on n, so every element is computed by
// the same code whoever claims it: results do not depend on timing.
type team struct {
	size    int
	helpers atomic.Int32        // helper goroutines alive
	current atomic.Pointer[job] // the operation helpers should join
}

// A job is one operation being run by a team.
type job struct {
	f        func(lo, hi int)
	n, parts int
	claimed  []atomic.Bool // per part
	finished atomic.Int32  // parts done
}

const (
	// partsPerWorker trades the cost of a claim (an atomic swap and a call,
	// well under a microsecond) against how finely a late helper can share.
	partsPerWorker = 4
	// helperIdle is how long a helper waits for the next operation before
	// it exits: far longer than the gap between the operations of a forward
	// pass or two decode steps, far shorter than a person notices.
	helperIdle = 200 * time.Microsecond
	// spinCheck is how many spins (a runtime.Gosched each, well under a
	// microsecond) a helper makes between looks at the clock.
	spinCheck = 32
)

func newTeam(size int) *team {
	if size <= 0 {
		size = runtime.GOMAXPROCS(0)
	}
	return &team{size: size}
}

// minWork is the work (about multiply-adds) below which an operation stays
// on the calling goroutine: waking the helpers and waiting for them would
// cost more than the work saves.
const minWork = 1 << 15

// over is run for an operation of about work multiply-adds: below minWork
// it runs on the calling goroutine alone.
func (t *team) over(work, n int, f func(lo, hi int)) {
	if work < minWork {
		t = nil
	}
	t.run(n, f)
}

// run calls f over [0, n) in contiguous parts and returns when all are done.
func (t *team) run(n int, f func(lo, hi int)) {
	if t == nil || t.size <= 1 || n < 2 {
		f(0, n)
		return
	}
	parts := min(n, partsPerWorker*t.size)
	j := &job{f: f, n: n, parts: parts, claimed: make([]atomic.Bool, parts)}
	t.current.Store(j)
	for h := t.helpers.Load(); h < int32(t.size-1); h = t.helpers.Load() {
		if t.helpers.CompareAndSwap(h, h+1) {
			go t.help(int(h) + 1)
		}
	}
	j.work(0, t.size)
	// The caller waits spinning, not parked: a helper finishing its last
	// part would otherwise pay the wake-up this type exists to avoid.
	for spins := 0; int(j.finished.Load()) < j.parts; spins++ {
		pause(spins)
	}
	t.current.CompareAndSwap(j, nil)
}

// work runs the parts of j that worker w of size claims: its own share
// first, then every other part not yet claimed, from the last.
func (j *job) work(w, size int) {
	own := j.parts * w / size
	end := j.parts * (w + 1) / size
	for p := own; p < end; p++ {
		j.try(p)
	}
	for p := j.parts - 1; p >= 0; p-- {
		if p < own || p >= end {
			j.try(p)
		}
	}
}

func (j *job) try(p int) {
	if j.claimed[p].Swap(true) {
		return
	}
	j.f(j.n*p/j.parts, j.n*(p+1)/j.parts)
	j.finished.Add(1)
}

// help is worker w: it joins each new operation until none comes for
// helperIdle.
func (t *team) help(w int) {
	defer t.helpers.Add(-1)
	var last *job
	idle := time.Now()
	for spins := 1; ; spins++ {
		if j := t.current.Load(); j != nil && j != last {
			last = j
			j.work(w, t.size)
			idle, spins = time.Now(), 0
			continue
		}
		// The clock is read every spinCheck spins, not each: reading it
		// was 3% of a 32-row decode step's CPU (a quiet machine's
		// profile), all of it a helper waiting for the next operation.
		if spins%spinCheck == 0 && time.Since(idle) > helperIdle {
			return
		}
		pause(spins)
	}
}

// pause is one spin of a worker waiting for the others or for the next
// operation. The first spins only yield to the Go scheduler (a server's
// goroutines may need the P). Later ones also give the thread's core to
// the OS (osYield): on a loaded machine the worker waited for is often
// runnable but without a core, and a spinner holding one then delays it
// and burns the process's CPU; profiles of a loaded server at 32 streams
// had 13% of the CPU in the team's spinning.
func pause(spins int) {
	runtime.Gosched()
	if spins >= yieldAfter {
		osYield()
	}
}

// yieldAfter is how many spins (a Gosched is about 0.1 µs with nothing
// else to run) a waiting worker makes before it also yields its core:
// about 200 µs, longer than the parts of a decode step's jobs, so that
// mostly a wait for a worker without a core yields (on a quiet machine
// the yield returns at once: nothing else wants the core).
// Shorter waits (16 and 256 spins) saved a little more CPU in a loaded
// server at 32 streams (84-92 output tokens a CPU second against 80-85
// here, 64-79 spinning alone), but gave away so much of its share of the
// cores that its wall throughput fell below spinning's in some runs.
const yieldAfter = 2048

// parallel runs f over [0, n) on a team of workers that lives for this call
// only: for the exported kernels, which have no backend to hold one.
func parallel(n, workers int, f func(lo, hi int)) { newTeam(workers).run(n, f) }
