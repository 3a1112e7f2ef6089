package host

import (
	"context"
	"fmt"
	"time"

	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/wasm/plugin/abi"
)

// run is the state of one instance of a plugin, from instantiation to the
// end of its tessera_run call. Host functions find it in the context of
// the call. A wasm instance runs on one goroutine at a time, so its host
// calls never overlap and the fields need no lock.
type run struct {
	p       *Plugin
	start   time.Time
	ctx     context.Context // ends when the run does; generations live in it
	cancel  context.CancelCauseFunc
	stopT   context.CancelFunc
	callCtx context.Context // ctx carrying the run, for wazero calls
	in      []byte
	stderr  *tail

	ready        bool // the version was checked: host functions may be called
	calls        int64
	tokens       int // generated tokens delivered
	opened       int
	promptTokens int // the prompt tokens of the generations opened
	out          []byte
	pluginErr    string // what the plugin reported with set_error
	lastErr      string // what last_error reports
	lastPages    uint32
	gens         map[uint32]*generation
	nextGen      uint32
	killed       *RunError // set when the host stops the plugin
}

type runKey struct{}

// newRun starts the state of a run under ctx, with the policy's timeout.
func (p *Plugin) newRun(ctx context.Context, input []byte) *run {
	r := &run{p: p, start: time.Now(), in: input, gens: map[uint32]*generation{},
		stderr: &tail{w: p.pol.Stderr}}
	r.ctx, r.cancel = context.WithCancelCause(ctx)
	r.stopT = func() {}
	if p.pol.Timeout > 0 {
		r.ctx, r.stopT = context.WithTimeoutCause(r.ctx, p.pol.Timeout, ErrTimeout)
	}
	r.callCtx = context.WithValue(r.ctx, runKey{}, r)
	return r
}

// end cancels whatever generations are left and releases the contexts.
func (r *run) end() {
	r.cancel(nil)
	r.stopT()
	for _, g := range r.gens {
		g.st.Cancel()
	}
	r.gens = nil
}

// stop ends the run for reason: the calling host function returns, and
// its wrapper then terminates the instance. Generations end too.
func (r *run) stop(reason error, format string, args ...any) abi.Code {
	if r.killed == nil {
		r.killed = &RunError{Plugin: r.p.name, Err: reason, Detail: fmt.Sprintf(format, args...), Stderr: r.stderr.String()}
		r.cancel(reason)
	}
	r.lastErr = r.killed.Error()
	return abi.ErrLimit
}

// fail records why a call failed, for last_error, and returns code.
func (r *run) fail(code abi.Code, format string, args ...any) abi.Code {
	r.lastErr = fmt.Sprintf(format, args...)
	return code
}

// generation is one generation a plugin opened.
type generation struct {
	st        *runtime.Stream
	model     string
	prompt    int
	delivered int
	pending   runtime.Token // pulled but not yet handed over (buffer too small)
	hasToken  bool
	cancelled bool // by the plugin
}

// done reports whether the engine has finished the generation.
func (g *generation) done() bool {
	select {
	case <-g.st.Done():
		return true
	default:
		return false
	}
}
