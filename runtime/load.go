package runtime

import (
	"context"
	"fmt"
	"github.com/tessera-llm/tessera/models/vision"
	"runtime/debug"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/runtime/backend"
)

// Options choose how Load opens a model.
type Options struct {
	// Wrap, if set, wraps the backend the engine runs on (a decorator
	// such as runtime/profile's); the device is still the backend's.
	Wrap func(backend.Backend) backend.Backend
	// Tokenizer overrides the model's tokenizer with a file.
	Tokenizer string
	// Device is "cpu", "webgpu" or "auto" (the default: WebGPU on a
	// hardware adapter, else the CPU; a software adapter only by "webgpu"
	// or by name in Adapter). DeviceNote says what auto chose and why.
	Device string
	// Adapter picks the WebGPU adapter: an index or a name substring.
	Adapter string
	// MaxStorageBinding, if > 0, lowers the GPU's storage binding limit
	// (to test how weights are split across bindings).
	MaxStorageBinding int64
	// Threads caps the CPU backend's goroutines (0: one per core; at
	// most MaxThreads).
	Threads int
	// Budgets bound a forward step: MaxBatchTokens tokens and MaxSeqs
	// sequences (0: the device's defaults, see Budgets).
	Budgets
	// KV sizes the paged KV cache (see KVOptions).
	KV KVOptions
	// Context caps the sequence length (and so the KV cache); 0 means the
	// model's own, up to DefaultContext.
	Context int
	// Quant is how weight matrices and the embedding table are stored.
	// Every quantized matrix keeps its file's type at its bits (Native:
	// Blocks for every GGUF block type but Q4_1, which is int4's own
	// groups) and is never widened. "int4", "int8", "f16" or "f32" is a
	// ceiling chosen by the user: every matrix stored wider is narrowed to
	// it, and float matrices take it ("int4" is pure 4-bit). "mixed" puts
	// float matrices in int4 but for the head, the embeddings and the
	// most sensitive ones, in int8 (MixedInt8). "" means mixed on WebGPU
	// for models of at least 32 MiB of f32 weights (smaller ones decode at
	// the speed of their dispatches and gain nothing), and float matrices
	// as the file keeps them elsewhere (F16 as f16, F32 and BF16 as f32).
	// Norm weights stay f32. See WeightStorage.
	//
	// Int4 matrices are calibrated (GPTQ over text the model samples
	// itself, see CalibrateInt4) when the model has at most
	// MaxCalibratedAtLoad matrix parameters, and otherwise rounded group by
	// group (dtype.QuantizeInt4); Q4_0, Q4_1 and Q4_K matrices keep their
	// codes either way. Calibrate a large model once with the quantize
	// command (--type q4_1) instead.
	Quant string
	// HeadFloat keeps the output head in f32 whatever Quant says.
	HeadFloat bool
	// NoCalibration rounds int4 matrices group by group even for a model
	// small enough to be calibrated at load.
	NoCalibration bool
	// Draft turns on speculative decoding: "ngram" (prompt lookup) or the
	// path of a smaller model with the same vocabulary, loaded on the same
	// device with DraftQuant storage.
	Draft      string
	DraftQuant string
	// MultiStep chains up to that many decoding steps into one
	// submission with one read-back, each step reading the token the last
	// picked on the device, greedily or drawn there (devsample.go) (0: 4
	// on WebGPU, 1 on the CPU, where a round trip costs nothing; at most
	// backend.MaxChain).
	MultiStep int

	// Yield, when set, is called after every decoding step, outside any
	// lock. In a browser the CPU backend never waits on anything, so
	// without a turn of the event loop between steps no message (an
	// abort, a new request) would reach the engine until the generation
	// ended: the browser's engine yields there.
	Yield func()

	// SpeculateAlways keeps speculating whatever speculation's measured
	// speed says (for tests and experiments on acceptance).
	SpeculateAlways bool

	// Adapters are LoRA adapters to load with the model, applied unmerged
	// to the requests that name them (Request.Adapters).
	Adapters []AdapterSpec
	// LoRAMerge merges the adapters of Adapters (each at its scale) into
	// the weights at load instead: no per-request cost, but every request
	// runs with them.
	LoRAMerge bool

	// MMProj is a vision projector to load with the model (llama.cpp's
	// mmproj GGUF, as its --mmproj takes): requests may then carry images
	// (Request.Images). Its output width must be the model's.
	MMProj string
	// Projector is a vision projector already opened (vision.Open, or
	// vision.OpenReader where there is no file path, as in a browser),
	// instead of MMProj. LoadModel closes it, as it closes the model.
	Projector *vision.Model

	// GPU is a WebGPU device already open to load onto, for Device
	// "webgpu" or "auto". The engine does not close it: one device, and so
	// the pipelines it has compiled, serves model after model (the browser
	// worker keeps one), or a model and its draft.
	GPU GPUDevice

	// Plan forces WebGPU kernel choices (GPUPlan), for benchmarks that
	// compare kernels and for working around a driver by hand; the
	// self-check starts from it.
	Plan GPUPlan
	// NoSelfCheck skips the load-time self-check of the WebGPU kernels
	// against the CPU (selfcheck.go).
	NoSelfCheck bool
	// SelfCheckCache keeps self-check results between loads; nil means a
	// directory under the user's cache directory, where there is one.
	SelfCheckCache SelfCheckCache
}

// MaxThreads bounds Options.Threads and Calibration.Threads: beyond a few
// for each core the goroutines only wait on each other, and a mistyped
// count would start that many for every matrix product.
const MaxThreads = 1024

// checkThreads reports a goroutine count outside 0..MaxThreads.
func checkThreads(n int) error {
	if n < 0 || n > MaxThreads {
		return fmt.Errorf("threads %d must be in [0, %d] (0: one per core)", n, MaxThreads)
	}
	return nil
}

// check reports options out of their ranges, before anything is loaded.
func (opts Options) check() error {
	if opts.Context < 0 {
		return fmt.Errorf("context %d must be >= 0 (0: the model's, up to %d)", opts.Context, DefaultContext)
	}
	if opts.MultiStep < 0 || opts.MultiStep > backend.MaxChain {
		return fmt.Errorf("multi-step %d must be in [0, %d] (0: 4 on WebGPU, 1 on the CPU)", opts.MultiStep, backend.MaxChain)
	}
	if err := checkThreads(opts.Threads); err != nil {
		return err
	}
	return opts.Budgets.Check()
}

// DefaultContext bounds the KV cache when Options.Context is 0: models
// trained for 128k tokens would otherwise reserve gigabytes up front.
const DefaultContext = 4096

// Load opens the model at path and loads it onto the chosen device.
func Load(path string, opts Options) (*Engine, error) {
	m, err := models.Open(path, models.Options{Tokenizer: opts.Tokenizer})
	if err != nil {
		return nil, err
	}
	return LoadModel(m, opts)
}

// LoadContext is Load returning when ctx is done. A load does not stop
// part-way (each weight's conversion and upload runs to its end), so on
// cancellation it goes on in the background and closes what it made,
// and LoadContext returns ctx's error at once: a command line's Ctrl-C
// during a large model's load ends it then, not when the load would.
func LoadContext(ctx context.Context, path string, opts Options) (*Engine, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	type loaded struct {
		e   *Engine
		err error
	}
	done := make(chan loaded, 1)
	go func() {
		e, err := Load(path, opts)
		done <- loaded{e, err}
	}()
	select {
	case r := <-done:
		return r.e, r.err
	case <-ctx.Done():
		go func() {
			if r := <-done; r.e != nil {
				r.e.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

// LoadModel loads a model already opened (by models.Open, or by
// models.OpenReader where there is no file path, as in a browser) onto the
// chosen device. opts.Tokenizer is not used. On failure LoadModel closes
// m; on success the engine keeps it (Engine.Model).
func LoadModel(m *models.Model, opts Options) (*Engine, error) {
	if err := opts.check(); err != nil {
		m.Close()
		return nil, err
	}
	ctx := opts.Context
	if ctx <= 0 {
		ctx = min(m.Config.Context, DefaultContext)
	}
	if ctx > m.Config.Context {
		m.Close()
		return nil, fmt.Errorf("context %d exceeds the model's %d", ctx, m.Config.Context)
	}
	m.Config = m.Config.ForContext(ctx) // LongRoPE's factors follow the context
	var vm *vision.Model
	var marks map[string]int32
	imageRows := 0
	if opts.MMProj != "" || opts.Projector != nil {
		var err error
		if vm, marks, err = openProjector(opts.MMProj, opts.Projector, m); err != nil {
			m.Close()
			return nil, err
		}
		// An image's tokens go through the language model in one step
		// where they attend to each other both ways (Gemma 3's).
		if imageNonCausal(vm.Config.Projector) {
			imageRows = vm.Config.Tokens()
		}
	}
	// The backend is sized before the device is known: for a GPU's
	// budgets, the larger (a CPU backend takes any batch).
	be, note, err := openBackend(opts, max(opts.Budgets.resolve(true, m.Config).MaxBatchTokens, imageRows))
	if err != nil {
		closeProjector(vm)
		m.Close()
		return nil, err
	}
	ws, err := weightStorage(opts, be, m)
	if err != nil {
		be.Close()
		m.Close()
		return nil, err
	}
	check, checked := checkKernels(m, ws, be, opts)
	if checked && check.CPU {
		// No plan of kernels agreed with the CPU on this adapter: run on
		// the CPU rather than give wrong answers.
		be.Close()
		be, note = newCPU(opts.Threads), check.String()
		if ws, err = weightStorage(opts, be, m); err != nil {
			be.Close()
			m.Close()
			return nil, err
		}
	}
	if opts.LoRAMerge {
		if err := mergeAdapter(m, opts); err != nil {
			be.Close()
			m.Close()
			return nil, fmt.Errorf("load %s: %w", m.Path, err)
		}
	}
	if err := calibrateForLoad(m, ws, opts); err != nil {
		be.Close()
		m.Close()
		return nil, fmt.Errorf("load %s: int4: %w", m.Path, err)
	}
	base := be
	if opts.Wrap != nil {
		be = opts.Wrap(be)
	}
	dev := backend.Describe(base)
	budgets := opts.Budgets.resolve(dev.GPU, m.Config)
	if dev.GPU {
		budgets = budgets.fitBinding(dev.MaxBinding, m.Config, opts.Budgets)
	}
	budgets.MaxBatchTokens = max(budgets.MaxBatchTokens, imageRows)
	e, err := newEngine(m, be, opts.KV, ws, budgets)
	if err != nil {
		closeProjector(vm)
		be.Close()
		m.Close()
		return nil, err
	}
	if vm != nil {
		e.vis, err = newVisionTower(vm, base)
		closeProjector(vm) // its weights are on the backend
		if err != nil {
			e.Close()
			return nil, fmt.Errorf("load %s: %w", vm.Path, err)
		}
		e.vis.marks = marks
		e.images = newImageCache(imageCacheSize)
	}
	e.note = note
	if checked {
		e.selfCheck = &check
	}
	e.yield = opts.Yield
	e.chain = opts.MultiStep
	if e.chain == 0 {
		e.chain = 1
		if dev.GPU {
			e.chain = 4
		}
	}
	if err := e.attachDraft(opts); err != nil {
		e.Close()
		return nil, err
	}
	if e.drafter != nil && dev.GPU {
		if err := e.warmVerify(); err != nil {
			e.Close()
			return nil, fmt.Errorf("draft: %w", err)
		}
	}
	if !opts.LoRAMerge {
		if err := e.loadAdapters(opts); err != nil {
			e.Close()
			return nil, err
		}
	}
	// Reading each tensor's file bytes and converting them left garbage of
	// about the weights' size, which the collector would keep mapped (it
	// lets the heap grow to twice what is live): hand it back, so that a
	// process serving a model holds about the weights and its cache.
	debug.FreeOSMemory()
	return e, nil
}

// attachDraft sets up speculative decoding as opts.Draft says.
func (e *Engine) attachDraft(opts Options) error {
	if opts.Draft != "" && e.net.recurrent() {
		return fmt.Errorf("draft %s: speculative decoding rolls rejected tokens back, and %s's linear-attention state cannot go back", opts.Draft, e.model.Config.Arch)
	}
	switch opts.Draft {
	case "":
		return nil
	case "ngram":
		e.drafter, e.draftName = ngramDraft{}, "ngram"
		e.specAlways = opts.SpeculateAlways
		return nil
	}
	e.specAlways = opts.SpeculateAlways
	e.draftName = opts.Draft
	do := opts
	do.Draft, do.Quant, do.Tokenizer = "", opts.DraftQuant, ""
	do.Adapters, do.LoRAMerge = nil, false
	do.Context = 0        // the draft's own; it drafts only within it
	onDeviceOf(&do, e.be) // one device for both: a second one would compete for it
	// The draft's passes run outside the scheduler, with no sequence
	// slots: its sliding layers keep every position (window.go).
	do.KV.FullWindows = true
	d, err := Load(opts.Draft, do)
	if err != nil {
		return fmt.Errorf("draft: %w", err)
	}
	if err := checkDraftVocab(e, d); err != nil {
		d.Close()
		return fmt.Errorf("draft %s: %w", opts.Draft, err)
	}
	if !draftPays(d.WeightBytes(), e.WeightBytes()) {
		d.Close()
		return fmt.Errorf("%w: draft %s reads %s of weights per token against the target's %s; speculation cannot pay (quantize the draft with --draft-quant int4, or use a smaller model)",
			ErrDraftTooLarge, opts.Draft, dtype.FormatBytes(d.WeightBytes()), dtype.FormatBytes(e.WeightBytes()))
	}
	// Time a decode step of each before any sequence speculates, so that a
	// draft too slow to pay on this device never costs a measurement window.
	md := &modelDraft{e: d}
	if md.step, err = d.probeStep(); err != nil {
		d.Close()
		return fmt.Errorf("draft: %w", err)
	}
	if md.perRead, err = d.probeRead(32); err != nil {
		d.Close()
		return fmt.Errorf("draft: %w", err)
	}
	if e.plainStep, err = e.probeStep(); err != nil {
		d.Close()
		return err
	}
	e.draft, e.drafter = d, md
	return nil
}

// DeviceNote says why the engine runs where it does when that is not what
// was asked for (auto falling back to the CPU), or "".
func (e *Engine) DeviceNote() string { return e.note }
