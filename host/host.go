// Package host runs Tessera plugins: WebAssembly modules, sandboxed by
// wazero, that use the embedder's loaded models through a small host API
// (list models, generate, tokenize, count tokens).
//
// A Host serves a set of named engines. Each plugin is loaded with a
// Policy that says which of those models it may use and how much it may
// take: a token budget, concurrent generations, a wall-clock limit, a
// memory limit, host calls, and whether WASI gives it any directory, the
// real clock or real randomness (none by default). Every generation a
// plugin opens is one more sequence in the engine's continuous-batching
// scheduler, so plugins share the engine, its KV cache and its batches with
// each other and with the embedder's own requests.
//
// Each plugin gets its own wazero runtime, because the memory limit and the
// termination checks are runtime settings; compiled code is shared through
// the Host's compilation cache, so loading a plugin twice compiles it once.
// Each Run instantiates the compiled module afresh: runs do not share
// memory, a crashed run leaves nothing behind, and runs of one plugin may
// proceed concurrently.
//
// The ABI itself is in docs/PLUGIN_ABI.md; the Go SDK for writing plugins
// is package github.com/tessera-llm/tessera/wasm/plugin.
package host

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/wasm/plugin/abi"
)

// Model is an engine served to plugins under a name.
type Model struct {
	Name   string
	Engine *runtime.Engine
}

// Host serves models to plugins. It is safe for concurrent use. Closing
// it closes its plugins but not the engines, which the embedder owns.
type Host struct {
	models map[string]*runtime.Engine
	names  []string
	cache  wazero.CompilationCache

	mu      sync.Mutex
	plugins map[*Plugin]struct{}
	closed  bool
}

// Options configure a Host.
type Options struct {
	// Models are the engines the host serves, under distinct non-empty
	// names. Which of them a plugin may use is up to its Policy.
	Models []Model
	// CacheDir, if set, keeps compiled plugins on disk there, so that a
	// plugin is compiled once across processes rather than once per Host.
	// Without it compiled code is cached in memory for the Host's life.
	CacheDir string
}

// New returns a host serving opts.Models.
func New(opts Options) (*Host, error) {
	h := &Host{models: map[string]*runtime.Engine{}, plugins: map[*Plugin]struct{}{}}
	for _, m := range opts.Models {
		switch {
		case m.Name == "":
			return nil, errors.New("host: a model needs a name")
		case m.Engine == nil:
			return nil, fmt.Errorf("host: model %q has no engine", m.Name)
		case h.models[m.Name] != nil:
			return nil, fmt.Errorf("host: two models are named %q", m.Name)
		}
		h.models[m.Name] = m.Engine
		h.names = append(h.names, m.Name)
	}
	if opts.CacheDir != "" {
		c, err := wazero.NewCompilationCacheWithDir(opts.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("host: %w", err)
		}
		h.cache = c
	} else {
		h.cache = wazero.NewCompilationCache()
	}
	return h, nil
}

// Models returns the names of the host's models.
func (h *Host) Models() []string { return slices.Clone(h.names) }

// Close closes every plugin (stopping their runs) and the compilation cache.
func (h *Host) Close(ctx context.Context) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	ps := make([]*Plugin, 0, len(h.plugins))
	for p := range h.plugins {
		ps = append(ps, p)
	}
	h.mu.Unlock()
	var errs []error
	for _, p := range ps {
		errs = append(errs, p.Close(ctx))
	}
	errs = append(errs, h.cache.Close(ctx))
	return errors.Join(errs...)
}

// Plugin is a compiled plugin with its policy, ready to run. It is safe
// for concurrent use: each Run has its own instance.
type Plugin struct {
	h        *Host
	name     string
	pol      Policy
	rt       wazero.Runtime
	compiled wazero.CompiledModule
	config   wazero.ModuleConfig
	roots    []*os.Root
	version  uint32
	models   []string // the policy's models, checked
	listing  []byte   // the models document

	mu     sync.Mutex
	closed bool
}

// Load compiles a plugin and checks that it is one: it must export the
// reactor entry points and the ABI version function, import nothing but
// WASI preview 1 and the host's functions, and report an ABI major version
// this host serves. name identifies the plugin in errors.
func (h *Host) Load(ctx context.Context, name string, wasm []byte, pol Policy) (*Plugin, error) {
	pol, err := pol.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("plugin %q: policy: %w", name, err)
	}
	p := &Plugin{h: h, name: name, pol: pol}
	var listing []abi.Model
	for _, m := range pol.Models {
		eng := h.models[m]
		if eng == nil {
			return nil, fmt.Errorf("plugin %q: policy grants model %q, which the host does not serve (it has %s)", name, m, strings.Join(h.names, ", "))
		}
		if slices.Contains(p.models, m) {
			continue
		}
		p.models = append(p.models, m)
		c, tok := eng.Model().Config, eng.Tokenizer()
		listing = append(listing, abi.Model{Name: m, Context: c.Context, Vocab: c.Vocab, BOS: tok.BOS(), EOS: tok.EOS()})
	}
	if listing == nil {
		listing = []abi.Model{}
	}
	if p.listing, err = json.Marshal(listing); err != nil {
		return nil, err
	}

	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	cfg := wazero.NewRuntimeConfig().
		WithCloseOnContextDone(true).
		WithMemoryLimitPages(pol.MemoryPages).
		WithCompilationCache(h.cache)
	p.rt = wazero.NewRuntimeWithConfig(ctx, cfg)
	if err := p.setup(ctx, wasm); err != nil {
		p.release(ctx, 0)
		if _, ok := err.(*RunError); ok {
			return nil, err // it names the plugin already
		}
		return nil, fmt.Errorf("plugin %q: %w", name, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		p.release(ctx, exitClosed)
		return nil, ErrClosed
	}
	h.plugins[p] = struct{}{}
	return p, nil
}

// setup instantiates WASI and the host module in p's runtime, compiles
// wasm, checks its imports and exports, and asks a trial instance its ABI
// version.
func (p *Plugin) setup(ctx context.Context, wasm []byte) error {
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, p.rt); err != nil {
		return err
	}
	if err := instantiateHostModule(ctx, p.rt); err != nil {
		return err
	}
	compiled, err := p.rt.CompileModule(ctx, wasm)
	if err != nil {
		if msg := err.Error(); strings.Contains(msg, "section memory") && strings.Contains(msg, "over limit") {
			// Its initial memory alone is more than the policy allows.
			return fmt.Errorf("%w: %v", ErrMemoryLimit, err)
		}
		return fmt.Errorf("%w: %v", ErrNotPlugin, err)
	}
	p.compiled = compiled
	if err := checkImports(compiled); err != nil {
		return err
	}
	if err := checkExports(compiled); err != nil {
		return err
	}
	if err := p.buildConfig(); err != nil {
		return err
	}
	// A trial instance says which ABI the plugin speaks before anything
	// runs for real; Run asks every instance again, which costs nothing.
	r := p.newRun(ctx, nil)
	defer r.end()
	mod, err := p.rt.InstantiateModule(r.callCtx, compiled, p.config.WithStderr(r.stderr))
	if err != nil {
		return r.failure(err)
	}
	defer mod.Close(ctx)
	v, err := r.checkVersion(mod)
	p.version = v
	return err
}

// checkImports refuses a module that imports from anywhere but WASI and
// the host module, or a host function this host does not serve, so that
// such a plugin fails at Load with a clear message rather than at its
// first instantiation with a link error.
func checkImports(c wazero.CompiledModule) error {
	for _, f := range c.ImportedFunctions() {
		mod, name, _ := f.Import()
		switch mod {
		case wasi_snapshot_preview1.ModuleName:
		case abi.Module:
			if _, ok := hostFuncs[name]; !ok {
				return fmt.Errorf("%w: it imports %s.%s, which this host (ABI %d.%d) does not serve", ErrABIVersion, mod, name, abi.Major, abi.Minor)
			}
		default:
			return fmt.Errorf("%w: it imports %s.%s; a plugin may import only from %s and %s", ErrNotPlugin, mod, name, abi.Module, wasi_snapshot_preview1.ModuleName)
		}
	}
	if len(c.ImportedMemories()) > 0 {
		return fmt.Errorf("%w: it imports a memory; a plugin must define its own", ErrNotPlugin)
	}
	return nil
}

// checkExports makes sure the entry points exist with the right types.
func checkExports(c wazero.CompiledModule) error {
	exports := c.ExportedFunctions()
	for _, name := range []string{abi.ExportVersion, abi.ExportRun} {
		f, ok := exports[name]
		if !ok {
			return fmt.Errorf("%w: it does not export %s (build it with the plugin SDK, GOOS=wasip1 and -buildmode=c-shared)", ErrNotPlugin, name)
		}
		if len(f.ParamTypes()) != 0 || !slices.Equal(f.ResultTypes(), []api.ValueType{api.ValueTypeI32}) {
			return fmt.Errorf("%w: %s must take nothing and return an i32", ErrNotPlugin, name)
		}
	}
	if _, ok := exports["_start"]; ok {
		return fmt.Errorf("%w: it is a WASI command (it exports _start); build it as a reactor with -buildmode=c-shared", ErrNotPlugin)
	}
	if len(c.ExportedMemories()) == 0 {
		return fmt.Errorf("%w: it exports no memory", ErrNotPlugin)
	}
	return nil
}

// buildConfig is the module configuration every instance shares: WASI
// with exactly what the policy grants.
func (p *Plugin) buildConfig() error {
	argv0 := p.name
	if argv0 == "" {
		argv0 = "plugin" // wazero refuses empty arguments
	}
	cfg := wazero.NewModuleConfig().
		WithName(""). // anonymous: many instances of one plugin at once
		WithStartFunctions(abi.ExportInitialize).
		WithArgs(argv0)
	if len(p.pol.Mounts) > 0 {
		fsc := wazero.NewFSConfig()
		for _, m := range p.pol.Mounts {
			if m.Writable {
				fsc = fsc.WithDirMount(m.Dir, m.Guest)
				continue
			}
			root, err := os.OpenRoot(m.Dir)
			if err != nil {
				return fmt.Errorf("mount: %w", err)
			}
			p.roots = append(p.roots, root)
			fsc = fsc.WithFSMount(root.FS(), m.Guest)
		}
		cfg = cfg.WithFSConfig(fsc)
	}
	if p.pol.Clock {
		cfg = cfg.WithSysWalltime().WithSysNanotime().WithSysNanosleep()
	}
	if p.pol.Random {
		cfg = cfg.WithRandSource(rand.Reader)
	}
	if p.pol.Stdout != nil {
		cfg = cfg.WithStdout(p.pol.Stdout)
	}
	p.config = cfg
	return nil
}

// Name is the name the plugin was loaded under.
func (p *Plugin) Name() string { return p.name }

// ABIVersion is the ABI version the plugin reported, as major and minor.
func (p *Plugin) ABIVersion() (major, minor uint16) { return abi.SplitVersion(p.version) }

// Policy is the plugin's policy, with its defaults filled in.
func (p *Plugin) Policy() Policy { return p.pol }

// Close stops the plugin's runs and frees its compiled code.
func (p *Plugin) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	p.h.mu.Lock()
	delete(p.h.plugins, p)
	p.h.mu.Unlock()
	return p.release(ctx, exitClosed) // runs in progress end with ErrClosed
}

// release closes p's runtime, ending its instances with exit code, and
// its mounted directories.
func (p *Plugin) release(ctx context.Context, code uint32) error {
	err := p.rt.CloseWithExitCode(ctx, code)
	for _, r := range p.roots {
		r.Close()
	}
	return err
}

// Result is what a run produced and used.
type Result struct {
	// Output is what the plugin output, which on failure is what it
	// output before failing.
	Output []byte
	// Tokens is how many generated tokens the plugin received.
	Tokens int
	// PromptTokens is how many prompt tokens its generations were given
	// (BOS included), which Tokens does not count.
	PromptTokens int
	// Generations is how many generations it opened.
	Generations int
	// Calls is how many host calls it made.
	Calls int64
	// MemoryPages is the size of its linear memory at the end, in 64 KiB pages.
	MemoryPages uint32
	// Elapsed is the run's wall-clock time, instantiation included.
	Elapsed time.Duration
}

// Run runs the plugin once on input, in a fresh instance, and returns what
// it output. A run that fails returns a *RunError along with the Result
// so far.
func (p *Plugin) Run(ctx context.Context, input []byte) (Result, error) {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return Result{}, &RunError{Plugin: p.name, Err: ErrClosed}
	}
	r := p.newRun(ctx, input)
	defer r.end()
	mod, err := p.rt.InstantiateModule(r.callCtx, p.compiled, p.config.WithStderr(r.stderr))
	if err != nil {
		return r.result(nil), r.failure(err)
	}
	defer mod.Close(context.Background())
	if _, err := r.checkVersion(mod); err != nil {
		return r.result(mod), err
	}
	r.ready = true
	res, err := mod.ExportedFunction(abi.ExportRun).Call(r.callCtx)
	r.ready = false
	if err != nil {
		var exit *sys.ExitError
		if errors.As(err, &exit) && exit.ExitCode() == 0 && r.killed == nil {
			// The plugin called exit(0) while running: it is finished.
			return r.result(mod), nil
		}
		out := r.result(mod) // first: it notes the memory's final size, which failure reads
		return out, r.failure(err)
	}
	if res[0] != 0 {
		msg := r.pluginErr
		if msg == "" {
			msg = fmt.Sprintf("%s returned %d", abi.ExportRun, int32(res[0]))
		}
		return r.result(mod), &RunError{Plugin: p.name, Err: ErrPluginFailed, Detail: msg, Stderr: r.stderr.String()}
	}
	return r.result(mod), nil
}

// checkVersion calls the plugin's version export and refuses a major
// version this host does not serve.
func (r *run) checkVersion(mod api.Module) (uint32, error) {
	res, err := mod.ExportedFunction(abi.ExportVersion).Call(r.callCtx)
	if err != nil {
		return 0, r.failure(err)
	}
	v := uint32(res[0])
	if major, minor := abi.SplitVersion(v); major != abi.Major {
		return v, &RunError{Plugin: r.p.name, Err: ErrABIVersion,
			Detail: fmt.Sprintf("the plugin speaks ABI %d.%d, this host serves %d.x (up to %d.%d)", major, minor, abi.Major, abi.Major, abi.Minor)}
	}
	return v, nil
}

// result summarizes the run; mod may be nil.
func (r *run) result(mod api.Module) Result {
	res := Result{Output: r.out, Tokens: r.tokens, PromptTokens: r.promptTokens, Generations: r.opened, Calls: r.calls, Elapsed: time.Since(r.start)}
	res.MemoryPages = r.pages(mod)
	return res
}

// pages is the size of mod's memory in pages, or what the last host call
// saw if mod is gone.
func (r *run) pages(mod api.Module) uint32 {
	if mod != nil {
		if m := mod.Memory(); m != nil {
			if n := m.Size() / 65536; n > 0 {
				r.lastPages = n
			}
		}
	}
	return r.lastPages
}

// failure turns the error of an instantiation or a call into a *RunError.
func (r *run) failure(err error) error {
	if r.killed != nil {
		return r.killed
	}
	re := &RunError{Plugin: r.p.name, Stderr: r.stderr.String(), cause: err}
	var exit *sys.ExitError
	isExit := errors.As(err, &exit)
	r.p.mu.Lock()
	closed := r.p.closed
	r.p.mu.Unlock()
	switch {
	case closed || isExit && exit.ExitCode() == exitClosed:
		re.Err, re.Detail = ErrClosed, "the plugin was closed while it ran"
	case r.ctx.Err() != nil:
		if cause := context.Cause(r.ctx); errors.Is(cause, ErrTimeout) {
			re.Err, re.Detail = ErrTimeout, fmt.Sprintf("it ran for %s, the limit is %s", time.Since(r.start).Round(time.Millisecond), r.p.pol.Timeout)
		} else {
			re.Err, re.Detail = r.ctx.Err(), "the run was cancelled"
		}
	case r.outOfMemory(err):
		re.Err, re.Detail = ErrMemoryLimit, fmt.Sprintf("it used %d of its %d pages", r.lastPages, r.p.pol.MemoryPages)
	case isExit:
		re.Err, re.Detail = ErrCrashed, fmt.Sprintf("it exited with code %d", exit.ExitCode())
	default:
		first, _, _ := strings.Cut(err.Error(), "\n")
		re.Err, re.Detail = ErrCrashed, first
	}
	return re
}

// outOfMemory guesses whether a failure came from the memory limit: the
// guest cannot tell the host that a memory.grow failed, but Go's runtime
// says so on standard error before it exits, and any guest that failed
// within 4 MiB (Go's heap arena) of its limit most likely hit it.
func (r *run) outOfMemory(err error) bool {
	if strings.Contains(r.stderr.String(), "out of memory") || strings.Contains(err.Error(), "out of memory") {
		return true
	}
	return r.lastPages+64 >= r.p.pol.MemoryPages
}

// tail keeps the last bytes written to it, and passes everything on.
type tail struct {
	mu  sync.Mutex
	buf []byte
	w   io.Writer
}

const tailSize = 8 << 10

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > tailSize {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailSize:]...)
	}
	t.mu.Unlock()
	if t.w != nil {
		t.w.Write(b) // the embedder's writer failing must not fail the plugin
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
