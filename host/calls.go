package host

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/tessera-llm/tessera/host/internal/guestmem"
	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/models/vision"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/wire"
	"github.com/tessera-llm/tessera/wasm/plugin/abi"
)

// The host functions. Every one takes i32 arguments, returns an i32
// abi.Code (abi_version excepted) and validates each pointer and length
// against the guest's memory before it does anything with side effects.
// Their implementations take a guestmem.Memory rather than wazero's
// module, so that tests and the fuzzer can call them with a fake memory.

// hostFunc is one function of the host module.
type hostFunc struct {
	params int
	impl   func(r *run, m guestmem.Memory, a []uint64) abi.Code
}

// hostFuncs are the functions served under abi.Module, by name.
var hostFuncs = map[string]hostFunc{
	abi.FnABIVersion:  {0, nil}, // served separately: it returns a version
	abi.FnInput:       {3, (*run).input},
	abi.FnOutput:      {2, (*run).output},
	abi.FnSetError:    {2, (*run).setError},
	abi.FnLastError:   {3, (*run).lastError},
	abi.FnModels:      {3, (*run).models},
	abi.FnTokenize:    {8, (*run).tokenize},
	abi.FnDetokenize:  {7, (*run).detokenize},
	abi.FnCountTokens: {6, (*run).countTokens},
	abi.FnGenOpen:     {3, (*run).genOpen},
	abi.FnGenNext:     {5, (*run).genNext},
	abi.FnGenCancel:   {1, (*run).genCancel},
	abi.FnGenClose:    {1, (*run).genClose},
	abi.FnGenStats:    {4, (*run).genStats},
}

// Exit codes of instances the host ends: exitStopped for breaking the
// policy (the reason is kept in the run), exitClosed when the plugin is
// closed under them.
const (
	exitStopped = 0x7e55e7a
	exitClosed  = 0x7e55e7b
)

// instantiateHostModule defines the host module in rt.
func instantiateHostModule(ctx context.Context, rt wazero.Runtime) error {
	b := rt.NewHostModuleBuilder(abi.Module)
	i32 := api.ValueTypeI32
	b.NewFunctionBuilder().
		WithGoFunction(api.GoFunc(func(_ context.Context, stack []uint64) { stack[0] = abi.Version }), nil, []api.ValueType{i32}).
		Export(abi.FnABIVersion)
	for name, f := range hostFuncs {
		if f.impl == nil {
			continue
		}
		params := make([]api.ValueType, f.params)
		for i := range params {
			params[i] = i32
		}
		b.NewFunctionBuilder().WithGoModuleFunction(f.goFunc(name), params, []api.ValueType{i32}).Export(name)
	}
	_, err := b.Instantiate(ctx)
	return err
}

// goFunc adapts f to wazero: it finds the run in the call's context,
// dispatches, and terminates the instance if the call made the host stop
// the plugin, the way WASI's proc_exit does.
func (f hostFunc) goFunc(name string) api.GoModuleFunc {
	return func(ctx context.Context, mod api.Module, stack []uint64) {
		r, _ := ctx.Value(runKey{}).(*run)
		var mem guestmem.Memory
		if m := mod.Memory(); m != nil {
			mem = m
		}
		stack[0] = uint64(r.dispatch(name, f, mem, stack))
		if r != nil && r.killed != nil {
			_ = mod.CloseWithExitCode(ctx, exitStopped)
			panic(sys.NewExitError(exitStopped))
		}
	}
}

// dispatch counts the call against the policy and runs it, turning a
// panic in the host into ErrInternal rather than a crash.
func (r *run) dispatch(name string, f hostFunc, mem guestmem.Memory, stack []uint64) (code abi.Code) {
	if r == nil || !r.ready {
		// During _initialize, before the version is known, or outside a run.
		if r != nil {
			r.lastErr = "host functions are available only inside " + abi.ExportRun
		}
		return abi.ErrState
	}
	r.calls++
	if r.p.pol.MaxCalls > 0 && r.calls > r.p.pol.MaxCalls {
		return r.stop(ErrCallLimit, "it made more than %d host calls", r.p.pol.MaxCalls)
	}
	if mem == nil {
		mem = guestmem.Fake(nil) // a module without memory: every pointer is out of range
	}
	r.lastPages = mem.Size() / 65536
	defer func() {
		if e := recover(); e != nil {
			code = r.fail(abi.ErrInternal, "host fault in %s: %v", name, e)
		}
	}()
	return f.impl(r, mem, stack[:f.params])
}

// memErr is the code for a failed memory access: a length over a limit is
// refused, anything else is a bad argument.
func (r *run) memErr(what string, err error) abi.Code {
	if errors.Is(err, guestmem.ErrTooLong) {
		return r.fail(abi.ErrLimit, "%s: %v", what, err)
	}
	return r.fail(abi.ErrArgument, "%s: %v", what, err)
}

// writeOut writes data to the buffer (buf, capacity) and its length to
// lenOut; if the buffer is too small it writes only the length needed and
// returns ErrBuffer, so the guest can retry with a bigger one.
func (r *run) writeOut(m guestmem.Memory, buf, capacity, lenOut uint32, data []byte) abi.Code {
	if err := guestmem.Check(m, lenOut, 4); err != nil {
		return r.memErr("len_out", err)
	}
	if err := guestmem.Check(m, buf, capacity); err != nil {
		return r.memErr("buffer", err)
	}
	n := uint32(len(data))
	if uint64(len(data)) > uint64(capacity) {
		guestmem.PutUint32(m, lenOut, n)
		return r.fail(abi.ErrBuffer, "%d bytes do not fit in a buffer of %d", len(data), capacity)
	}
	guestmem.Put(m, buf, data)
	guestmem.PutUint32(m, lenOut, n)
	return abi.OK
}

func u32(a uint64) uint32 { return api.DecodeU32(a) }

// input(buf, cap, len_out): the run's input.
func (r *run) input(m guestmem.Memory, a []uint64) abi.Code {
	return r.writeOut(m, u32(a[0]), u32(a[1]), u32(a[2]), r.in)
}

// output(ptr, len): append to the run's output.
func (r *run) output(m guestmem.Memory, a []uint64) abi.Code {
	n := u32(a[1])
	if uint64(len(r.out))+uint64(n) > uint64(r.p.pol.MaxOutput) {
		return r.fail(abi.ErrLimit, "output of %d bytes would pass the plugin's limit of %d", len(r.out)+int(n), r.p.pol.MaxOutput)
	}
	b, err := guestmem.Bytes(m, u32(a[0]), n, n)
	if err != nil {
		return r.memErr("output", err)
	}
	r.out = append(r.out, b...)
	return abi.OK
}

// maxErrorText bounds the message a plugin can report.
const maxErrorText = 4 << 10

// setError(ptr, len): the message of the plugin's failure.
func (r *run) setError(m guestmem.Memory, a []uint64) abi.Code {
	ptr, n := u32(a[0]), u32(a[1])
	if err := guestmem.Check(m, ptr, n); err != nil {
		return r.memErr("message", err)
	}
	b, err := guestmem.Bytes(m, ptr, min(n, maxErrorText), maxErrorText)
	if err != nil {
		return r.memErr("message", err)
	}
	r.pluginErr = string(b)
	return abi.OK
}

// lastError(buf, cap, len_out): why the last failed call failed.
func (r *run) lastError(m guestmem.Memory, a []uint64) abi.Code {
	msg := r.lastErr
	code := r.writeOut(m, u32(a[0]), u32(a[1]), u32(a[2]), []byte(msg))
	r.lastErr = msg // reading it must not replace it, even when the buffer is small
	return code
}

// models(buf, cap, len_out): the JSON list of the plugin's models.
func (r *run) models(m guestmem.Memory, a []uint64) abi.Code {
	return r.writeOut(m, u32(a[0]), u32(a[1]), u32(a[2]), r.p.listing)
}

// maxModelName bounds a model name argument.
const maxModelName = 256

// engine resolves the model named at (ptr, n): "" is the plugin's first.
func (r *run) engine(m guestmem.Memory, ptr, n uint32) (*runtime.Engine, string, abi.Code) {
	name, err := guestmem.String(m, ptr, n, maxModelName)
	if err != nil {
		return nil, "", r.memErr("model name", err)
	}
	return r.engineNamed(name)
}

func (r *run) engineNamed(name string) (*runtime.Engine, string, abi.Code) {
	if name == "" {
		if len(r.p.models) == 0 {
			return nil, "", r.fail(abi.ErrNotFound, "this plugin may use no model")
		}
		name = r.p.models[0]
	}
	for _, allowed := range r.p.models {
		if allowed == name {
			return r.p.h.models[name], name, abi.OK
		}
	}
	return nil, "", r.fail(abi.ErrNotFound, "model %q is not available to this plugin", name)
}

// text reads text for the tokenizer, within the policy's MaxText.
func (r *run) text(m guestmem.Memory, ptr, n uint32) (string, abi.Code) {
	s, err := guestmem.String(m, ptr, n, uint32(r.p.pol.MaxText))
	if err != nil {
		return "", r.memErr("text", err)
	}
	return s, abi.OK
}

// flags checks the tokenize flags.
func (r *run) flags(f uint32) (bos bool, code abi.Code) {
	if f&^abi.FlagBOS != 0 {
		return false, r.fail(abi.ErrArgument, "unknown flags %#x", f&^abi.FlagBOS)
	}
	return f&abi.FlagBOS != 0, abi.OK
}

// tokenize(model, model_len, text, text_len, flags, ids, ids_cap, n_out).
func (r *run) tokenize(m guestmem.Memory, a []uint64) abi.Code {
	eng, _, code := r.engine(m, u32(a[0]), u32(a[1]))
	if code != abi.OK {
		return code
	}
	bos, code := r.flags(u32(a[4]))
	if code != abi.OK {
		return code
	}
	ids, idsCap, nOut := u32(a[5]), u32(a[6]), u32(a[7])
	if err := guestmem.Check(m, nOut, 4); err != nil {
		return r.memErr("n_out", err)
	}
	if err := guestmem.CheckN(m, ids, idsCap, 4); err != nil {
		return r.memErr("ids", err)
	}
	text, code := r.text(m, u32(a[2]), u32(a[3]))
	if code != abi.OK {
		return code
	}
	enc := eng.Tokenizer().Encode(text, bos)
	guestmem.PutUint32(m, nOut, uint32(len(enc)))
	if uint64(len(enc)) > uint64(idsCap) {
		return r.fail(abi.ErrBuffer, "%d ids do not fit in room for %d", len(enc), idsCap)
	}
	out := make([]int32, len(enc))
	for i, id := range enc {
		out[i] = int32(id)
	}
	guestmem.PutInt32s(m, ids, out)
	return abi.OK
}

// detokenize(model, model_len, ids, n, buf, cap, len_out). Ids outside
// the vocabulary add nothing, as in the engine.
func (r *run) detokenize(m guestmem.Memory, a []uint64) abi.Code {
	eng, _, code := r.engine(m, u32(a[0]), u32(a[1]))
	if code != abi.OK {
		return code
	}
	buf, capacity, lenOut := u32(a[4]), u32(a[5]), u32(a[6])
	if err := guestmem.Check(m, lenOut, 4); err != nil {
		return r.memErr("len_out", err)
	}
	if err := guestmem.Check(m, buf, capacity); err != nil {
		return r.memErr("buffer", err)
	}
	ids, err := guestmem.Int32s(m, u32(a[2]), u32(a[3]), uint32(r.p.pol.MaxText))
	if err != nil {
		return r.memErr("ids", err)
	}
	in := make([]int, len(ids))
	for i, id := range ids {
		in[i] = int(id)
	}
	return r.writeOut(m, buf, capacity, lenOut, []byte(eng.Tokenizer().Decode(in)))
}

// countTokens(model, model_len, text, text_len, flags, n_out).
func (r *run) countTokens(m guestmem.Memory, a []uint64) abi.Code {
	eng, _, code := r.engine(m, u32(a[0]), u32(a[1]))
	if code != abi.OK {
		return code
	}
	bos, code := r.flags(u32(a[4]))
	if code != abi.OK {
		return code
	}
	nOut := u32(a[5])
	if err := guestmem.Check(m, nOut, 4); err != nil {
		return r.memErr("n_out", err)
	}
	text, code := r.text(m, u32(a[2]), u32(a[3]))
	if code != abi.OK {
		return code
	}
	guestmem.PutUint32(m, nOut, uint32(len(eng.Tokenizer().Encode(text, bos))))
	return abi.OK
}

// maxHandles bounds the generation handles a run holds (open or finished
// but not closed), so that a plugin that never closes them cannot grow
// the table without end.
const maxHandles = 256

// genOpen(req, req_len, handle_out): start a generation.
func (r *run) genOpen(m guestmem.Memory, a []uint64) abi.Code {
	hOut := u32(a[2])
	if err := guestmem.Check(m, hOut, 4); err != nil {
		return r.memErr("handle_out", err)
	}
	// JSON escapes can take six bytes per byte of text.
	// Images come as base64: four bytes for three.
	raw, err := guestmem.Bytes(m, u32(a[0]), u32(a[1]), uint32(min(8*r.p.pol.MaxText+64<<10+4*max(r.p.pol.MaxImageBytes, 0)/3+4, 1<<30)))
	if err != nil {
		return r.memErr("request", err)
	}
	var req abi.Request
	if err := wire.Unmarshal(raw, &req); err != nil { // worded as every home words it
		return r.fail(abi.ErrArgument, "request: %v", err)
	}
	eng, name, code := r.engineNamed(req.Model)
	if code != abi.OK {
		return code
	}
	active := 0
	for _, g := range r.gens {
		if !g.done() {
			active++
		}
	}
	switch {
	case active >= r.p.pol.MaxGenerations:
		return r.fail(abi.ErrLimit, "%d generations are in progress, the plugin's limit", active)
	case len(r.gens) >= maxHandles:
		return r.fail(abi.ErrLimit, "%d generation handles are open: close some", len(r.gens))
	}
	ereq, code := r.request(eng, req)
	if code != abi.OK {
		return code
	}
	st, err := eng.Start(r.ctx, ereq)
	if err != nil {
		switch {
		case errors.Is(err, runtime.ErrContextFull) || errors.Is(err, runtime.ErrOutOfKV) || errors.Is(err, runtime.ErrTooManyCombinations):
			return r.fail(abi.ErrLimit, "%v", err)
		case errors.Is(err, runtime.ErrUnknownAdapter) || errors.Is(err, runtime.ErrBadRequest):
			return r.fail(abi.ErrArgument, "%v", err)
		}
		return r.fail(abi.ErrFailed, "%v", err)
	}
	r.nextGen++
	for r.gens[r.nextGen] != nil || r.nextGen == 0 {
		r.nextGen++
	}
	r.gens[r.nextGen] = &generation{st: st, model: name, prompt: len(ereq.Tokens)}
	r.opened++
	r.promptTokens += len(ereq.Tokens)
	guestmem.PutUint32(m, hOut, r.nextGen)
	return abi.OK
}

// request turns the plugin's request into the engine's, tokenizing the
// prompt here so that the text limit applies and the prompt's length is
// known.
func (r *run) request(eng *runtime.Engine, req abi.Request) (runtime.Request, abi.Code) {
	given := 0
	for _, set := range []bool{req.Prompt != "", len(req.Messages) > 0, len(req.Tokens) > 0} {
		if set {
			given++
		}
	}
	if given > 1 {
		return runtime.Request{}, r.fail(abi.ErrArgument, "give one of prompt, messages and tokens")
	}
	images, code := r.images(req.Images)
	if code != abi.OK {
		return runtime.Request{}, code
	}
	var ids []int32
	if len(req.Tokens) > 0 {
		if len(images) > 0 {
			return runtime.Request{}, r.fail(abi.ErrArgument, "images go with a prompt or messages that mark where they go (%s), not with tokens", runtime.ImageMarker)
		}
		ids = req.Tokens
	} else {
		size := len(req.Prompt)
		for _, m := range req.Messages {
			size += len(m.Role) + len(m.Content)
		}
		if size > r.p.pol.MaxText {
			return runtime.Request{}, r.fail(abi.ErrLimit, "a prompt of %d bytes is over the plugin's limit of %d", size, r.p.pol.MaxText)
		}
		var msgs []chat.Message
		if len(req.Messages) > 0 {
			var err error
			if msgs, err = wire.PluginMessages(req.Messages); err != nil {
				return runtime.Request{}, r.fail(abi.ErrArgument, "%v", err)
			}
		}
		// The engine renders messages with the model's chat template.
		var err error
		if ids, err = eng.PromptTokens(runtime.Request{Prompt: req.Prompt, Messages: msgs, Images: images}); err != nil {
			if errors.Is(err, runtime.ErrContextFull) {
				return runtime.Request{}, r.fail(abi.ErrLimit, "%v", err)
			}
			return runtime.Request{}, r.fail(abi.ErrArgument, "prompt: %v", err)
		}
	}
	// The sampling fields are checked as every home checks them (wire).
	params, lim := wire.PluginParams(req)
	ereq, _, err := params.Request(lim)
	if err != nil {
		return runtime.Request{}, r.fail(abi.ErrArgument, "%v", err)
	}
	maxTokens := ereq.MaxTokens
	if budget := r.p.pol.TokenBudget; budget >= 0 {
		left := budget - r.tokens
		switch {
		case left <= 0:
			return runtime.Request{}, r.fail(abi.ErrLimit, "the token budget of %d is spent", budget)
		case maxTokens == 0:
			maxTokens = left
		case maxTokens > left:
			// One past the budget: pulling it stops the plugin, which
			// asked for more than it may have.
			maxTokens = left + 1
		}
	} else if maxTokens == 0 {
		maxTokens = eng.Model().Config.Context
	}
	adapters, err := wire.Adapters("adapters", wire.PluginAdapters(req.Adapters))
	if err != nil {
		return runtime.Request{}, r.fail(abi.ErrArgument, "%v", err)
	}
	ereq.Tokens, ereq.Images, ereq.MaxTokens, ereq.Adapters = ids, images, maxTokens, adapters
	return ereq, abi.OK
}

// images decodes a request's images within the policy's MaxImageBytes.
func (r *run) images(files [][]byte) ([]*vision.Image, abi.Code) {
	total := 0
	for _, f := range files {
		total += len(f)
	}
	if len(files) > 0 && total > r.p.pol.MaxImageBytes {
		return nil, r.fail(abi.ErrLimit, "images of %d bytes are over the plugin's limit of %d", total, max(r.p.pol.MaxImageBytes, 0))
	}
	var out []*vision.Image
	for i, f := range files {
		img, err := vision.Decode(f, vision.Limits{MaxBytes: r.p.pol.MaxImageBytes, MaxPixels: 16 << 20, MaxSide: 8192})
		if err != nil {
			return nil, r.fail(abi.ErrArgument, "image %d: %v", i, err)
		}
		out = append(out, img)
	}
	return out, abi.OK
}

// gen looks up a handle.
func (r *run) gen(h uint32) (*generation, abi.Code) {
	g := r.gens[h]
	if g == nil {
		return nil, r.fail(abi.ErrNotFound, "no generation %d", h)
	}
	return g, abi.OK
}

// genNext(handle, id_out, buf, cap, len_out): the next token, waiting for
// it. The token's id goes to *id_out (-1 for text that completes a
// character but is no token of its own) and its text to the buffer.
func (r *run) genNext(m guestmem.Memory, a []uint64) abi.Code {
	g, code := r.gen(u32(a[0]))
	if code != abi.OK {
		return code
	}
	idOut, buf, capacity, lenOut := u32(a[1]), u32(a[2]), u32(a[3]), u32(a[4])
	if err := guestmem.Check(m, idOut, 4); err != nil {
		return r.memErr("id_out", err)
	}
	if err := guestmem.Check(m, lenOut, 4); err != nil {
		return r.memErr("len_out", err)
	}
	if err := guestmem.Check(m, buf, capacity); err != nil {
		return r.memErr("buffer", err)
	}
	if !g.hasToken {
		t, ok := g.st.Next()
		if !ok {
			return r.ended(g)
		}
		if t.ID >= 0 {
			if budget := r.p.pol.TokenBudget; budget >= 0 && r.tokens >= budget {
				return r.stop(ErrTokenBudget, "it asked for more than its %d tokens", budget)
			}
			r.tokens++
			g.delivered++
		}
		g.pending, g.hasToken = t, true
	}
	t := g.pending
	if uint64(len(t.Text)) > uint64(capacity) {
		guestmem.PutUint32(m, lenOut, uint32(len(t.Text)))
		return r.fail(abi.ErrBuffer, "a token of %d bytes does not fit in a buffer of %d", len(t.Text), capacity)
	}
	g.hasToken = false
	guestmem.PutUint32(m, idOut, uint32(t.ID))
	guestmem.PutUint32(m, lenOut, uint32(len(t.Text)))
	guestmem.Put(m, buf, []byte(t.Text))
	return abi.OK
}

// ended is gen_next's answer once a generation has no more tokens.
func (r *run) ended(g *generation) abi.Code {
	err := g.st.Err()
	switch {
	case err == nil:
		return abi.Done
	case g.cancelled:
		return r.fail(abi.ErrCanceled, "the plugin cancelled the generation")
	case r.ctx.Err() != nil:
		return r.fail(abi.ErrCanceled, "the run is ending: %v", context.Cause(r.ctx))
	}
	return r.fail(abi.ErrFailed, "generation failed: %v", err)
}

// genCancel(handle): stop a generation; its handle stays until closed.
func (r *run) genCancel(_ guestmem.Memory, a []uint64) abi.Code {
	g, code := r.gen(u32(a[0]))
	if code != abi.OK {
		return code
	}
	if !g.done() {
		g.cancelled = true
		g.st.Cancel()
	}
	return abi.OK
}

// genClose(handle): stop a generation if need be and free its handle.
func (r *run) genClose(_ guestmem.Memory, a []uint64) abi.Code {
	g, code := r.gen(u32(a[0]))
	if code != abi.OK {
		return code
	}
	g.st.Cancel()
	delete(r.gens, u32(a[0]))
	return abi.OK
}

// genStats(handle, buf, cap, len_out): the generation's statistics as JSON.
func (r *run) genStats(m guestmem.Memory, a []uint64) abi.Code {
	g, code := r.gen(u32(a[0]))
	if code != abi.OK {
		return code
	}
	s := abi.Stats{PromptTokens: g.prompt, Generated: g.delivered, Done: g.done()}
	if s.Done {
		es := g.st.Stats()
		s.StoppedAtEOS, s.StoppedAtLength = es.StoppedAtEOS, es.StoppedAtLength
		s.PrefillMillis = float64(es.Prefill.Microseconds()) / 1e3
		s.DecodeMillis = float64(es.Decode.Microseconds()) / 1e3
	}
	doc, err := json.Marshal(s)
	if err != nil {
		return r.fail(abi.ErrInternal, "stats: %v", err)
	}
	return r.writeOut(m, u32(a[1]), u32(a[2]), u32(a[3]), doc)
}
