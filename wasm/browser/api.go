//go:build js

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	goruntime "runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall/js"
	"time"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/models/gguf"
	"github.com/tessera-llm/tessera/models/lora"
	"github.com/tessera-llm/tessera/models/tokenizer"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
	"github.com/tessera-llm/tessera/runtime/grammar"
	"github.com/tessera-llm/tessera/runtime/wire"
)

var (
	errAborted = errors.New("aborted")
	errNoModel = errors.New("no model is loaded: call load first")
	errNetwork = errors.New("network error")
	errStorage = errors.New("browser storage error")
	errSource  = errors.New("bad source")
)

// codeOf names the kind of an error for the page, which words its message
// by it: "no-webgpu", "out-of-memory", "adapter-limits", "bad-model",
// "bad-request", "network", "storage", "aborted", "no-model", "bad-source",
// "integrity" or "error".
func codeOf(err error) string {
	var fe *gguf.FormatError
	msg := err.Error()
	switch {
	case errors.Is(err, errAborted) || errors.Is(err, context.Canceled):
		return "aborted"
	case errors.Is(err, webgpu.ErrNoAdapter):
		return "no-webgpu"
	case errors.Is(err, errNoModel):
		return "no-model"
	case errors.Is(err, errNetwork):
		return "network"
	case errors.Is(err, errStorage):
		return "storage"
	case errors.Is(err, errSource):
		return "bad-source"
	case errors.Is(err, errIntegrity):
		return "integrity"
	case errors.As(err, &fe) || errors.Is(err, models.ErrUnknownFormat) || errors.Is(err, models.ErrUnsupportedArch) ||
		errors.Is(err, models.ErrBadSplit) || errors.Is(err, lora.ErrBadAdapter):
		return "bad-model"
	case errors.Is(err, runtime.ErrBadRequest) || errors.Is(err, runtime.ErrContextFull) ||
		errors.Is(err, runtime.ErrUnknownAdapter) || errors.Is(err, runtime.ErrAdapterExists) ||
		errors.Is(err, runtime.ErrTooManyCombinations):
		return "bad-request"
	case strings.Contains(msg, "out of GPU memory") || strings.Contains(msg, "out of memory") ||
		strings.Contains(msg, "Out of memory") || errors.Is(err, webgpu.ErrDeviceLost):
		return "out-of-memory"
	case strings.Contains(msg, "limit"):
		return "adapter-limits"
	}
	return "error"
}

// api is the state behind globalThis.tessera: at most one model loaded,
// and any number of generations on it (the engine's scheduler runs them
// in turn or together, as its KV cache allows), each stopped by its id.
type api struct {
	loadMu sync.Mutex // one load or unload at a time

	mu         sync.Mutex // guards what follows; never held while waiting
	eng        *runtime.Engine
	emb        *runtime.Embedder // an embedding model, loaded instead of eng (embed.go)
	model      map[string]any    // ModelInfo of the loaded model
	loadCancel context.CancelFunc
	gens       map[int]context.CancelFunc // running generations by id
	genID      int                        // the last id given to one without its own
	adapter    map[string]any             // the adapter's description, once asked

	// The worker's WebGPU device, changed under loadMu and mu: opened by
	// the first load and kept for the next ones, so that a kernel compiles
	// once per worker rather than once per model (the device caches
	// pipelines, which the engine compiles as it first runs each kernel).
	dev      webgpu.Device
	devLimit int64 // the MaxStorageBinding it was opened with
	compiled int   // pipelines compiled by the devices closed before it
}

// optional reads property name of an options object as a number, or def.
func optional(o js.Value, name string, def float64) float64 {
	if o.Type() != js.TypeObject {
		return def
	}
	v := o.Get(name)
	if v.Type() != js.TypeNumber || math.IsNaN(v.Float()) {
		return def
	}
	return v.Float()
}

func optionalString(o js.Value, name, def string) string {
	if o.Type() != js.TypeObject || o.Get(name).Type() != js.TypeString {
		return def
	}
	return o.Get(name).String()
}

func optionalBool(o js.Value, name string, def bool) bool {
	if o.Type() != js.TypeObject || o.Get(name).Type() != js.TypeBoolean {
		return def
	}
	return o.Get(name).Bool()
}

// load implements tessera.load(source, options, onProgress).
func (a *api) load(args []js.Value) any {
	source, opts, onProgress := arg(args, 0), arg(args, 1), arg(args, 2)
	ctx, cancel := context.WithCancel(context.Background())
	a.mu.Lock()
	if a.loadCancel != nil {
		a.loadCancel() // a newer load wins
	}
	a.loadCancel = cancel
	a.mu.Unlock()
	return promise(func() (any, error) {
		defer cancel()
		a.loadMu.Lock()
		defer a.loadMu.Unlock()
		if ctx.Err() != nil {
			return nil, errAborted
		}
		a.dropEngine()
		info, err := a.loadFrom(ctx, source, opts, newReporter(onProgress))
		if err != nil {
			return nil, err
		}
		return info, nil
	})
}

// reporter sends progress events to a JavaScript callback, at most one
// every 50 ms per phase except the last.
type reporter struct {
	fn    js.Value
	phase string
	last  time.Time
}

func newReporter(fn js.Value) *reporter { return &reporter{fn: fn} }

func (r *reporter) report(phase string, done, total int64) {
	if r.fn.Type() != js.TypeFunction {
		return
	}
	now := time.Now()
	if phase == r.phase && done != total && now.Sub(r.last) < 50*time.Millisecond {
		return
	}
	r.phase, r.last = phase, now
	r.fn.Invoke(map[string]any{"phase": phase, "done": done, "total": total})
}

// loadFrom reads the model that source names and loads it onto the device.
func (a *api) loadFrom(ctx context.Context, source, opts js.Value, rep *reporter) (map[string]any, error) {
	start := time.Now()
	var blobs []js.Value // the model's files: one, or the parts of a split model
	var want []string    // the published SHA-256 of each, which the download was checked against
	info := map[string]any{}
	switch {
	case source.Type() != js.TypeObject:
		return nil, fmt.Errorf("%w: load wants {url}, {file}, {files} or {buffer}", errSource)
	case source.Get("url").Type() == js.TypeString:
		url := source.Get("url").String()
		var err error
		want, err = sha256Option(opts)
		if err != nil {
			return nil, err
		}
		f, err := fetchModel(ctx, url, optionalBool(opts, "cache", true), want, rep.report)
		if err != nil {
			return nil, err
		}
		if f.discarded != "" {
			info["discarded"] = f.discarded
		}
		info["verified"] = want != nil // against the published SHA-256
		blobs = f.blobs
		info["parts"] = len(f.blobs)
		info["source"], info["url"], info["name"], info["hash"] = "url", url, f.name, f.hash
		info["cached"], info["stored"] = f.cached, f.stored
	case source.Get("file").Type() == js.TypeObject:
		blobs = []js.Value{source.Get("file")}
		info["source"], info["name"] = "file", optionalString(source, "name", optionalString(blobs[0], "name", "file"))
	case source.Get("files").Type() == js.TypeObject:
		var err error
		if blobs, err = splitFiles(source.Get("files")); err != nil {
			return nil, err
		}
		info["source"], info["name"] = "file", optionalString(blobs[0], "name", "file")
	case source.Get("buffer").Type() == js.TypeObject:
		blobs = []js.Value{js.Global().Get("Blob").New([]any{source.Get("buffer")})}
		info["source"], info["name"] = "buffer", "buffer"
	default:
		return nil, fmt.Errorf("%w: load wants {url}, {file} or {buffer}", errSource)
	}
	fetchedAt := time.Now()
	if ctx.Err() != nil {
		return nil, errAborted
	}

	readers := make([]*blobReader, len(blobs))
	parts := make([]models.Part, len(blobs))
	var size int64
	for i, b := range blobs {
		readers[i] = newBlobReader(b)
		parts[i] = models.Part{R: readers[i], Size: readers[i].size}
		size += readers[i].size
	}
	read := func() int64 {
		var n int64
		for _, r := range readers {
			n += r.read.Load()
		}
		return n
	}
	name, _ := info["name"].(string)
	m, err := models.OpenParts(parts, name)
	if err != nil {
		return nil, err
	}
	if embeddingModel(m) {
		return a.loadEmbedder(ctx, m, opts, info, start)
	}
	c := m.Config
	context := int(optional(opts, "context", 0))
	if context <= 0 {
		context = min(c.Context, runtime.DefaultContext)
	}
	context = min(context, c.Context)
	var params int64
	for _, t := range m.Tensors {
		params += int64(t.Elements())
	}
	quant := optionalString(opts, "quant", "")
	kvType, err := backend.ParseKVType(optionalString(opts, "kvType", ""))
	if err != nil {
		return nil, err
	}
	// "auto" (Node's default, where a machine may have no adapter) takes
	// the adapter there is, else the CPU backend.
	device := optionalString(opts, "device", "webgpu")
	if device != "webgpu" && device != "cpu" && device != "auto" {
		return nil, badRequest("device", "device must be webgpu, cpu or auto, not %q", device)
	}
	budgets := runtime.Budgets{MaxBatchTokens: int(optional(opts, "maxBatchTokens", 0)), MaxSeqs: int(optional(opts, "maxSeqs", 0))}
	if err := budgets.Check(); err != nil {
		param := "maxSeqs"
		if budgets.MaxBatchTokens < 0 || budgets.MaxBatchTokens > runtime.MaxBatchTokensLimit {
			param = "maxBatchTokens"
		}
		return nil, badRequest(param, "%v", err)
	}
	draft := optionalString(opts, "draft", "")
	if draft != "" && draft != "ngram" {
		return nil, badRequest("draft", `draft must be "ngram" (speculative decoding by prompt lookup), not %q`, draft)
	}
	var dev webgpu.Device
	if device != "cpu" {
		var err error
		dev, err = a.device(int64(optional(opts, "maxStorageBinding", 0)))
		switch {
		case device == "auto" && errors.Is(err, webgpu.ErrNoAdapter):
			device = "cpu"
		case err != nil:
			return nil, err
		default:
			device = "webgpu"
		}
	}

	projector, err := openProjector(ctx, opts, info, rep.report)
	if err != nil {
		return nil, err
	}

	// Report upload progress as the engine reads the tensors through r.
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
				rep.report("upload", read(), size)
			}
		}
	}()
	rep.report("upload", read(), size)
	// wasm memory grows but never shrinks: while tensors stream through the
	// heap, collect early so that the peak stays near the biggest tensor
	// rather than twice what is live.
	gc := debug.SetGCPercent(20)
	defer func() {
		debug.SetGCPercent(gc)
		goruntime.GC()
	}()
	var yield func() // WebGPU waits on the browser at every step already
	if device == "cpu" {
		yield = yieldToEventLoop
	}
	selfCheck := optionalBool(opts, "selfCheck", true)
	eng, err := runtime.LoadModel(m, runtime.Options{
		Projector: projector,
		Device:    device,
		GPU:       dev,
		Yield:     yield,
		Quant:     quant,
		Context:   context,
		Draft:     draft,
		Budgets:   budgets,
		KV:        runtime.KVOptions{Tokens: context, Type: kvType}, // one full context: n samples share it (and the prompt's blocks)
		// The self-check of the kernels against the CPU, its results kept
		// in the origin's storage; kernelFault is its test hook.
		NoSelfCheck:    !selfCheck,
		SelfCheckCache: opfsSelfChecks{},
		Plan:           runtime.GPUPlan{Fault: optionalString(opts, "kernelFault", "")},
	})
	close(done)
	if err == nil && len(want) == 1 {
		eng.SetModelHash(want[0]) // checked: transcripts name it
	}
	if err != nil {
		if errors.Is(err, webgpu.ErrDeviceLost) {
			a.closeDevice() // the next load opens a fresh one
		}
		if errors.Is(err, webgpu.ErrNoAdapter) {
			return nil, err
		}
		if codeOf(err) == "adapter-limits" {
			return nil, fmt.Errorf("this GPU cannot hold the model: %w", err)
		}
		return nil, err
	}
	rep.report("upload", size, size)
	if ctx.Err() != nil {
		eng.Close()
		return nil, errAborted
	}

	info["size"] = size
	info["format"], info["arch"] = m.Format, c.Arch
	info["params"], info["layers"], info["dim"], info["heads"], info["kvHeads"] = params, c.Layers, c.Dim, c.Heads, c.KVHeads
	info["vocab"], info["context"], info["modelContext"] = c.Vocab, context, c.Context
	info["quant"] = quant
	if quant == "" {
		info["quant"] = "default"
	}
	info["weightBytes"] = eng.WeightBytes()
	info["kvType"], info["kvBytes"] = eng.KVType().String(), eng.KVBytes()
	info["kvWindowBytes"] = eng.WindowBytes() // the sliding layers' rings, part of kvBytes
	info["maxBatchTokens"], info["maxSeqs"] = eng.Budgets().MaxBatchTokens, eng.Budgets().MaxSeqs
	_, plain := eng.Chat().(chat.Plain)
	info["chatTemplate"] = !plain
	tok := eng.Tokenizer()
	info["bos"], info["eos"] = tok.BOS(), tok.EOS()
	info["backend"] = eng.Backend().Name()
	info["draft"] = draft
	info["vision"] = eng.HasVision()
	info["fetchMs"] = ms(fetchedAt.Sub(start))
	info["uploadMs"] = ms(time.Since(fetchedAt))
	info["loadMs"] = ms(time.Since(start))
	if dev, ok := eng.GPU(); ok {
		di := dev.Info()
		info["adapter"] = describe(di)
		info["path"] = kernelPath(eng.Backend(), di)
	} else {
		info["adapter"] = nil
		info["path"] = "cpu"
	}
	if c, ok := eng.SelfCheck(); ok {
		info["selfCheck"] = selfCheckInfo(c)
	}
	a.mu.Lock()
	a.eng, a.model = eng, info
	if ad, ok := info["adapter"].(map[string]any); ok {
		a.adapter = ad
	}
	a.mu.Unlock()
	return info, nil
}

// sha256Option reads options.sha256: the model file's published SHA-256
// (hex), or a list of them for the parts of a split model; nil for none.
func sha256Option(opts js.Value) ([]string, error) {
	if opts.Type() != js.TypeObject {
		return nil, nil
	}
	v := opts.Get("sha256")
	var list []string
	switch v.Type() {
	case js.TypeUndefined, js.TypeNull:
		return nil, nil
	case js.TypeString:
		if v.String() == "" {
			return nil, nil
		}
		list = []string{v.String()}
	case js.TypeObject:
		for i := range v.Length() {
			list = append(list, v.Index(i).String())
		}
	default:
		return nil, badRequest("sha256", "sha256 must be a hex string, or a list of them for a split model's parts")
	}
	for i, h := range list {
		h = strings.ToLower(strings.TrimSpace(h))
		if len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
			return nil, badRequest("sha256", "sha256 %q is not a SHA-256 in hex (64 digits)", list[i])
		}
		list[i] = h
	}
	return list, nil
}

// device returns the worker's WebGPU device, opening it on first use, or
// again when a load asks for another storage-binding limit. Callers hold
// loadMu.
func (a *api) device(limit int64) (webgpu.Device, error) {
	if a.dev != nil && a.devLimit == limit {
		return a.dev, nil
	}
	a.closeDevice()
	dev, err := webgpu.Open(webgpu.Options{MaxStorageBinding: limit})
	if err != nil {
		return nil, fmt.Errorf("webgpu: %w", err)
	}
	a.mu.Lock()
	a.dev, a.devLimit = dev, limit
	a.mu.Unlock()
	return dev, nil
}

// closeDevice closes the worker's device, if open. Callers hold loadMu,
// with no engine left on the device.
func (a *api) closeDevice() {
	a.mu.Lock()
	dev := a.dev
	if dev != nil {
		a.compiled += compiled(dev)
		a.dev = nil
	}
	a.mu.Unlock()
	if dev != nil {
		dev.Close()
	}
}

// compiled is how many pipelines dev has compiled, if it counts them.
func compiled(dev webgpu.Device) int {
	if c, ok := dev.(webgpu.Compiler); ok {
		return c.Compiled()
	}
	return 0
}

// splitFiles reads source.files, the parts of a split model picked as
// local files, in the order of the numbers in their names
// (NAME-00001-of-00003.gguf…) when they all have one, else as given.
func splitFiles(list js.Value) ([]js.Value, error) {
	n := list.Length()
	if n == 0 {
		return nil, fmt.Errorf("%w: files is empty", errSource)
	}
	blobs := make([]js.Value, n)
	nos := make([]int, n)
	named := true
	for i := range n {
		blobs[i] = list.Index(i)
		if blobs[i].Type() != js.TypeObject || blobs[i].Get("size").Type() != js.TypeNumber {
			return nil, fmt.Errorf("%w: files[%d] is not a File or Blob", errSource, i)
		}
		_, no, _, ok := gguf.ParseSplitName(optionalString(blobs[i], "name", ""))
		nos[i], named = no, named && ok
	}
	if named {
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		slices.SortFunc(idx, func(a, b int) int { return nos[a] - nos[b] })
		sorted := make([]js.Value, n)
		for i, j := range idx {
			sorted[i] = blobs[j]
		}
		blobs = sorted
	}
	return blobs, nil
}

// shaderPath names the kernels that run on a device described by i before
// a model is loaded: "f32", or "f32+subgroups" where the device has
// subgroups and the reductions take their subgroup variants. shader-f16
// (describe's shaderF16) alone changes no kernel: only f16 weights and
// caches have f16 forms, and a model's label (kernelPath) says "+f16" once
// they ran. The label once said "f16" for such adapters, naming kernels
// that did not run (issue 49).
func shaderPath(i webgpu.Info) string {
	if i.Subgroups {
		return "f32+subgroups"
	}
	return "f32"
}

// kernelPath names the kernels a loaded model's backend runs: its own
// account (gpu.Backend.KernelPath: the self-check may have turned the
// subgroup kernels off), else the device's.
func kernelPath(be any, i webgpu.Info) string {
	if k, ok := be.(interface{ KernelPath() string }); ok {
		return k.KernelPath()
	}
	return shaderPath(i)
}

func describe(i webgpu.Info) map[string]any {
	return map[string]any{
		"name":                        i.Adapter,
		"vendor":                      i.Vendor,
		"architecture":                i.Architecture,
		"deviceType":                  i.DeviceType,
		"backend":                     i.Backend,
		"shaderF16":                   i.ShaderF16,
		"subgroups":                   i.Subgroups,
		"maxBufferSize":               i.MaxBufferSize,
		"maxStorageBufferBindingSize": i.MaxStorageBufferBindingSize,
		"maxWorkgroupStorage":         int64(i.MaxComputeWorkgroupStorageSize),
		"maxInvocations":              int64(i.MaxComputeInvocationsPerWorkgroup),
		"path":                        shaderPath(i),
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// request reads what to generate from: a string (a prompt, with BOS), or
// an object {prompt}, {tokens: [ids]} or a chat, {messages} with OpenAI's
// further fields (readChat), rendered with the model's chat template; a
// chat comes back with its input, which says how its reply is read.
func request(v js.Value) (runtime.Request, *chatInput, error) {
	var req runtime.Request
	switch v.Type() {
	case js.TypeString:
		req.Prompt = v.String()
	case js.TypeUndefined, js.TypeNull:
	case js.TypeObject:
		switch {
		case !v.Get("messages").IsUndefined():
			return readChat(v)
		case v.Get("tokens").Type() == js.TypeObject:
			ts := v.Get("tokens")
			req.Tokens = make([]int32, ts.Length())
			for i := range req.Tokens {
				req.Tokens[i] = int32(ts.Index(i).Int())
			}
		default:
			req.Prompt = optionalString(v, "prompt", "")
		}
	default:
		return req, nil, fmt.Errorf("%w: want a prompt string or {prompt}, {messages} or {tokens}", runtime.ErrBadRequest)
	}
	return req, nil, nil
}

// stops reads options.stop: a string or a list of them.
func stops(o js.Value) []string {
	if o.Type() != js.TypeObject {
		return nil
	}
	v := o.Get("stop")
	switch v.Type() {
	case js.TypeString:
		if v.String() != "" {
			return []string{v.String()}
		}
	case js.TypeObject:
		var out []string
		for i := range v.Length() {
			if e := v.Index(i); e.Type() == js.TypeString && e.String() != "" {
				out = append(out, e.String())
			}
		}
		return out
	}
	return nil
}

// compileConstraint reads options.constraint, the JSON of an OpenAI-style
// request's structured-output fields (response_format, grammar, regex,
// guided_json…), as the HTTP server reads them: "" is none.
func compileConstraint(fields string) (*grammar.Grammar, error) {
	if fields == "" {
		return nil, nil
	}
	var f wire.Fields
	if err := json.Unmarshal([]byte(fields), &f); err != nil {
		return nil, fmt.Errorf("%w: structured output: %v", runtime.ErrBadRequest, err)
	}
	g, err := f.Compile()
	if pe, ok := wire.AsParam(err); ok {
		return nil, fmt.Errorf("%w: %s: %s", runtime.ErrBadRequest, pe.Param, pe.Msg)
	}
	return g, err
}

// tokenize implements tessera.tokenize(input, options): the ids of a
// prompt as generate would run them (input as request reads it; a string
// gets BOS unless options.bos is false, and its special tokens' text stays
// text unless options.special), and the text the ids spell.
func (a *api) tokenize(args []js.Value) any {
	in, opts := arg(args, 0), arg(args, 1)
	req, chatIn, reqErr := request(in)
	return promise(func() (any, error) {
		if reqErr != nil {
			return nil, reqErr
		}
		eng, err := a.engine()
		if err != nil {
			return nil, err
		}
		tok := eng.Tokenizer()
		var ids []int
		if in.Type() == js.TypeString {
			bos := optionalBool(opts, "bos", true)
			if optionalBool(opts, "special", false) {
				ids = tokenizer.EncodeSpecial(tok, in.String(), bos)
			} else {
				ids = tok.Encode(in.String(), bos)
			}
		} else {
			if chatIn != nil { // the tools, and a required call's prefill
				if req, _, err = prepareChat(context.Background(), eng, req, chatIn); err != nil {
					return nil, err
				}
			}
			p, err := eng.PromptTokens(req)
			if err != nil {
				return nil, err
			}
			for _, id := range p {
				ids = append(ids, int(id))
			}
		}
		out := make([]any, len(ids))
		for i, id := range ids {
			out[i] = id
		}
		return map[string]any{"ids": out, "text": tok.Decode(ids)}, nil
	})
}

// detokenize implements tessera.detokenize(ids): their text.
func (a *api) detokenize(args []js.Value) any {
	v := arg(args, 0)
	return promise(func() (any, error) {
		eng, err := a.engine()
		if err != nil {
			return nil, err
		}
		if v.Type() != js.TypeObject {
			return nil, fmt.Errorf("%w: detokenize wants a list of ids", runtime.ErrBadRequest)
		}
		ids := make([]int, v.Length())
		vocab := eng.Tokenizer().VocabSize()
		for i := range ids {
			ids[i] = v.Index(i).Int()
			if ids[i] < 0 || ids[i] >= vocab {
				return nil, fmt.Errorf("%w: id %d is outside the vocabulary of %d", runtime.ErrBadRequest, ids[i], vocab)
			}
		}
		return eng.Tokenizer().Decode(ids), nil
	})
}

// abort implements tessera.abort(id): it stops generation id, or with no
// id every generation and a load in progress, and reports whether one ran.
func (a *api) abort(args []js.Value) any {
	a.mu.Lock()
	defer a.mu.Unlock()
	if v := arg(args, 0); v.Type() == js.TypeNumber {
		cancel := a.gens[v.Int()]
		if cancel != nil {
			cancel()
		}
		return cancel != nil
	}
	stopped := false
	for _, cancel := range a.gens {
		cancel()
		stopped = true
	}
	if a.loadCancel != nil {
		a.loadCancel()
		a.loadCancel = nil
		stopped = true
	}
	return stopped
}

// engine is the loaded model's engine, or errNoModel.
func (a *api) engine() (*runtime.Engine, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.eng == nil {
		return nil, errNoModel
	}
	return a.eng, nil
}

// dropEngine stops the generation and closes the loaded model, if any.
func (a *api) dropEngine() {
	a.dropEmbedder()
	a.mu.Lock()
	eng := a.eng
	a.eng, a.model = nil, nil
	for _, cancel := range a.gens {
		cancel()
	}
	a.mu.Unlock()
	if eng != nil {
		eng.Close() // its buffers; the worker's device stays for the next load
		eng.Model().Close()
		goruntime.GC() // give the model's memory back before the next one
	}
}

// unload implements tessera.unload().
func (a *api) unload([]js.Value) any {
	return promise(func() (any, error) {
		a.loadMu.Lock()
		defer a.loadMu.Unlock()
		a.dropEngine()
		return nil, nil
	})
}

// info implements tessera.info(): the adapter (asked for once), the model
// loaded, and the size of the wasm memory.
func (a *api) info([]js.Value) any {
	return promise(func() (any, error) {
		a.mu.Lock()
		adapter, model, total, eng := a.adapter, a.model, a.compiled, a.eng
		if a.dev != nil {
			total += compiled(a.dev)
		}
		a.mu.Unlock()
		// compiled counts the pipelines this worker has compiled: it stays
		// put when another model needs only kernels compiled before.
		out := map[string]any{"version": version, "webgpu": true, "wasmMemory": wasmMemory(), "compiled": total}
		if adapter == nil {
			infos, err := webgpu.Adapters()
			if err != nil {
				out["webgpu"] = false
				out["error"] = err.Error()
				out["code"] = codeOf(err)
			} else {
				adapter = describe(infos[0])
				a.mu.Lock()
				a.adapter = adapter
				a.mu.Unlock()
			}
		}
		if adapter != nil {
			out["adapter"] = adapter
			out["path"] = adapter["path"]
		}
		if model != nil {
			out["model"] = model
		}
		if eng != nil {
			out["adapters"] = adapterInfos(eng)
		}
		return out, nil
	})
}

// wasmMemory is the size of the wasm linear memory, which only grows.
func wasmMemory() float64 {
	if w := js.Global().Get("wasm"); w.Type() == js.TypeObject {
		if mem := w.Get("instance").Get("exports").Get("mem"); mem.Type() == js.TypeObject {
			return mem.Get("buffer").Get("byteLength").Float()
		}
	}
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return float64(ms.Sys)
}

// cached implements tessera.cached().
func (a *api) cached([]js.Value) any {
	return promise(func() (any, error) {
		list, err := cachedModels()
		if err != nil {
			return nil, err
		}
		out := make([]any, len(list))
		for i, m := range list {
			out[i] = map[string]any{"url": m.URL, "size": m.Size, "hash": m.Hash, "saved": m.Saved}
		}
		return out, nil
	})
}

// clearCache implements tessera.clearCache().
func (a *api) clearCache([]js.Value) any {
	return promise(func() (any, error) {
		n, bytes, err := clearCache()
		if err != nil {
			return nil, err
		}
		return map[string]any{"removed": n, "bytes": bytes}, nil
	})
}
