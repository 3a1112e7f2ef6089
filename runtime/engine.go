package runtime

import (
	"context"
	"errors"
	"fmt"
	"github.com/tessera-llm/tessera/models/vision"
	"sync"
	"time"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/models/tokenizer"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/grammar"
	"github.com/tessera-llm/tessera/runtime/kvcache"
)

// ErrContextFull is returned (wrapped) when a prompt does not fit in the
// model's context.
var ErrContextFull = errors.New("prompt longer than the context")

// Engine is a model loaded onto a backend, ready to generate. It is safe
// for concurrent use: every generation becomes a sequence that the
// scheduler batches with the others.
type Engine struct {
	model *models.Model
	be    backend.Backend
	net   *llama
	pool  *kvcache.Pool
	note  string
	ws    WeightStorage // how the weights are stored (WeightMix)
	// selfCheck is the load-time self-check's report (selfcheck.go), or
	// nil where none ran.
	selfCheck *SelfCheck

	// Set at load.
	chat  chat.Renderer // the model's chat template
	yield func()        // Options.Yield: called between steps, or nil
	chain int           // greedy decoding steps per submission (1: no chaining)

	// With a vision projector (Options.MMProj): its tower, on be, and the
	// embeddings of the images encoded last, by hash.
	vis    *visionTower
	images *imageCache

	stepMu sync.Mutex // one forward pass at a time (the scheduler's, Score's, or an image's encoding)

	// mu guards the queue, the statistics, speculation's measurements and
	// kvAdapters.
	mu sync.Mutex
	// The engine's concerns, each a type in its own file.
	queue        // the scheduler's sequences and loop (scheduler.go)
	poolStats    // the pool's and the scheduler's measurements (stats.go)
	speculation  // the draft and what decides whether it pays (speculative.go)
	adapterTable // LoRA adapters by name and slot, under their own lock (lora.go)
	// grammars caches the machines of recent constraints (constrain.go).
	grammars grammarCache

	// The adapters of prefix-cache namespaces (newSeqIn), for the cache's
	// events (kvwatch.go).
	kvAdapters map[uint64]kvAdapter
	// rs hands out the recurrent-state slots of a model with linear
	// layers (linear.go), nil for others.
	rs *stateSlots

	// The model file's SHA-256 for transcripts, computed on first use.
	hashOnce sync.Once
	hash     string
	hashErr  error
}

// Budgets are the scheduler's limits on one forward step, named as vLLM
// names them (max_num_batched_tokens, max_num_seqs). Each step first
// decodes a token of every running sequence, then fills what is left of
// MaxBatchTokens with chunks of prompts (chunked prefill), so that a long
// prompt shares its steps with the sequences already decoding instead of
// stalling them.
type Budgets struct {
	// MaxBatchTokens is how many tokens one step processes at most, decode
	// rows and prompt chunks together (1..MaxBatchTokensLimit; 0: the
	// device's default, DefaultBatchTokensCPU or DefaultBatchTokensGPU, or
	// MaxSeqs where that is larger). The engine's activations take this
	// many rows, capped by the context.
	MaxBatchTokens int
	// MaxSeqs is how many sequences run at once, each a row of logits a
	// step (1..MaxSeqsLimit; 0: DefaultMaxSeqs, or MaxBatchTokens where
	// that is smaller). Past it requests wait in the queue.
	MaxSeqs int
}

// The budgets' defaults and limits. A CPU step costs about its rows, so
// beyond a few tiles of rows a larger one gains little but the memory of
// its activations; a GPU step's cost is mostly fixed (dispatches and a
// submission), so a prompt in fewer, larger steps reaches its first token
// sooner. 64 sequences rather than the 32 of before: a CPU step of 64 rows
// costs little more per row than one of 32 (the tile kernels reuse each
// weight row across them), and on a device whose step cost is mostly fixed
// the 33rd to 64th sequences come almost free. MaxSeqsLimit bounds the
// logits a step keeps (MaxSeqs rows of the vocabulary: 128 MiB at 256
// sequences of a 128K vocabulary).
const (
	DefaultBatchTokensCPU = 128
	DefaultBatchTokensGPU = 512
	MaxBatchTokensLimit   = 8192
	DefaultMaxSeqs        = 64
	MaxSeqsLimit          = 256
)

// Check reports budgets out of their ranges, and a MaxBatchTokens below
// MaxSeqs where both are set (a step could not decode every sequence).
func (b Budgets) Check() error {
	if b.MaxBatchTokens < 0 || b.MaxBatchTokens > MaxBatchTokensLimit {
		return fmt.Errorf("max batch tokens %d must be in [1, %d] (0: the device's default)", b.MaxBatchTokens, MaxBatchTokensLimit)
	}
	if b.MaxSeqs < 0 || b.MaxSeqs > MaxSeqsLimit {
		return fmt.Errorf("max seqs %d must be in [1, %d] (0: %d)", b.MaxSeqs, MaxSeqsLimit, DefaultMaxSeqs)
	}
	if b.MaxBatchTokens > 0 && b.MaxSeqs > b.MaxBatchTokens {
		return fmt.Errorf("max seqs %d exceeds max batch tokens %d: a step could not decode every sequence", b.MaxSeqs, b.MaxBatchTokens)
	}
	return nil
}

// resolve fills in the defaults for a GPU (gpu) or the CPU, and caps the
// tokens by the context c.
func (b Budgets) resolve(gpu bool, c models.Config) Budgets {
	if b.MaxSeqs == 0 {
		b.MaxSeqs = DefaultMaxSeqs
		if b.MaxBatchTokens > 0 {
			b.MaxSeqs = min(b.MaxSeqs, b.MaxBatchTokens)
		}
	}
	if b.MaxBatchTokens == 0 {
		b.MaxBatchTokens = DefaultBatchTokensCPU
		if gpu {
			b.MaxBatchTokens = DefaultBatchTokensGPU
		}
		b.MaxBatchTokens = max(b.MaxBatchTokens, b.MaxSeqs)
	}
	b.MaxBatchTokens = min(b.MaxBatchTokens, c.Context)
	b.MaxSeqs = min(b.MaxSeqs, b.MaxBatchTokens)
	return b
}

// fitBinding lowers the budgets that asked left to their defaults so
// that a step's activations fit one storage binding of limit bytes (a
// GPU's): weights split across bindings, activations do not, and a device
// with small bindings should run smaller steps rather than refuse the
// model. A budget the caller set stays (one too large fails at
// allocation, naming the limit).
func (b Budgets) fitBinding(limit int64, c models.Config, asked Budgets) Budgets {
	if limit <= 0 {
		return b
	}
	if asked.MaxBatchTokens == 0 {
		b.MaxBatchTokens = min(b.MaxBatchTokens, max(1, int(limit/(4*int64(activationWidth(c))))))
	}
	if asked.MaxSeqs == 0 {
		b.MaxSeqs = min(b.MaxSeqs, max(1, int(limit/(4*int64(max(c.Vocab, 1))))))
	}
	b.MaxSeqs = min(b.MaxSeqs, b.MaxBatchTokens)
	return b
}

// activationWidth is the widest activation a forward step keeps per row
// of the batch (the experts' keep Used rows of theirs a row).
func activationWidth(c models.Config) int {
	w := max(c.Dim, c.FFN, c.Heads*c.HeadDim, c.KVHeads*c.HeadDim)
	if c.MoE.On() {
		w = max(w, c.MoE.Used*max(c.MoE.FFN, c.Dim), c.MoE.SharedFFN, c.MoE.Experts)
	}
	if c.Linear.On() {
		w = max(w, c.Linear.Channels(), c.Linear.Inner())
	}
	if c.Gemma4 != nil {
		w = max(w, c.Heads*c.Gemma4.LocalHeadDim, c.Gemma4.PerLayer*c.Layers)
	}
	return w
}

// DefaultBlockSize is 8 tokens: a sequence wastes at most one partial
// block, which on a mixed workload of short and long generations is 2% of
// the pool with 8-token blocks and 4.2% with vLLM's 16 (TestPoolWaste),
// while the attention kernels read through block tables at the same cost
// whatever the block size.
const DefaultBlockSize = 8

// KVOptions size the paged KV cache.
type KVOptions struct {
	BlockSize int   // tokens per block (default DefaultBlockSize)
	Tokens    int   // pool size in tokens (default: 4 contexts, within Memory)
	Memory    int64 // pool size in bytes, if Tokens is 0 (default 1 GiB at most, but one context at least)
	// Type is how keys and values are stored: f32 (the default), f16
	// (half the bytes) or int8 (a scale per token and kv head; about a
	// quarter), for long contexts. Attention computes in f32 either way.
	Type backend.KVType
	// FullWindows keeps every position of the sliding-window layers
	// (Gemma 2/3/4, gpt-oss) for the whole sequence, as the global
	// layers, instead of a ring of their window per sequence (window.go):
	// more memory, and sequences not capped by rings.
	FullWindows bool
}

// New loads model m onto backend be, keeping its weights as ws says, with
// the budgets b (their defaults for be's device, see Budgets.resolve); be
// must take batches of as many rows as b resolves to.
func New(m *models.Model, be backend.Backend, kv KVOptions, ws WeightStorage, b Budgets) (*Engine, error) {
	if err := b.Check(); err != nil {
		return nil, err
	}
	return newEngine(m, be, kv, ws, b.resolve(backend.Describe(be).GPU, m.Config))
}

// newEngine is New with the budgets resolved: forward steps of up to
// b.MaxBatchTokens rows, b.MaxSeqs of them rows of logits.
func newEngine(m *models.Model, be backend.Backend, kv KVOptions, ws WeightStorage, b Budgets) (*Engine, error) {
	switch m.Config.Arch { // the Llama family: one forward pass, flags for the differences
	case "llama", "qwen2", "qwen3", "mistral", "gemma2", "gemma3", "qwen2moe", "qwen3moe", "olmoe", "granitemoe", "smollm3", "phi3", "gpt-oss", "gemma4",
		"qwen35", "qwen35moe", "qwen2vl", "qwen3vl":
	default:
		return nil, fmt.Errorf("%w %q", models.ErrUnsupportedArch, m.Config.Arch)
	}
	c := m.Config
	if kv.BlockSize <= 0 {
		kv.BlockSize = DefaultBlockSize
	}
	blocks, win, err := kvPool(c, kv, b, physicalMemory())
	if err != nil {
		return nil, err
	}
	pool, err := kvcache.NewPool(blocks, kv.BlockSize)
	if err != nil {
		return nil, err
	}
	net, err := newLlama(m, be, ws, b.MaxBatchTokens, b.MaxSeqs, backend.KVShape{Layers: kvLayers(c), Blocks: blocks, BlockSize: kv.BlockSize,
		Heads: c.KVHeads, HeadDim: c.HeadDim, Type: kv.Type}, win)
	if err != nil {
		return nil, fmt.Errorf("load %s on %s: %w", m.Path, be.Name(), err)
	}
	e := &Engine{model: m, be: be, net: net, pool: pool, ws: ws, chat: chatTemplate(m), queue: newQueue()}
	if net.slotted() {
		e.rs = newStateSlots(net.maxRunning(), net.snapshots())
	}
	return e, nil
}

// kvPool sizes the KV cache of a model of config c for kv (its BlockSize
// set) and budgets b on a machine of mem bytes (0: unknown): the pool's
// blocks, and the sliding layers' rings where they pay (window.go). Its
// own function so that the sizing is tested without allocating what it
// sizes.
func kvPool(c models.Config, kv KVOptions, b Budgets, mem int64) (int, windowing, error) {
	blockBytes := kvBlockBytes(c, kv.BlockSize, kv.Type)
	blocks := (kv.Tokens + kv.BlockSize - 1) / kv.BlockSize
	var budget int64
	if kv.Tokens <= 0 {
		budget = kv.Memory
		if budget <= 0 {
			budget = min(1<<30, blockBytes*int64(4*c.Context/kv.BlockSize+1))
		}
		blocks = int(budget / blockBytes)
	}
	// The sliding layers' rings, and the blocks of the global layers that
	// the rest of a byte budget buys (window.go), before asking for a
	// context of them: a model whose every layer slides holds its context
	// in rings whatever its budget of every layer's blocks.
	win := planWindows(c, kv.FullWindows, blocks, kv.BlockSize, b.MaxBatchTokens, min(b.MaxBatchTokens, b.MaxSeqs), kv.Type)
	if win.on() && kv.Tokens <= 0 {
		blocks = windowBlocks(c, win, blocks, budget, kv.Memory > 0)
	}
	need := (c.Context + kv.BlockSize - 1) / kv.BlockSize
	if blocks < need && kv.Tokens <= 0 && kv.Memory <= 0 {
		// The default budget (four contexts, 1 GiB at most) is short of
		// the context asked for (an 8B model's 8,192 positions in f32 take
		// 2 GiB): a context asked for is one held, as runtime/eval's
		// memory estimate counts it, where the machine has the memory (a
		// larger allocation would end the process, not fail the load; a
		// container's cgroup limit counts as its machine's memory).
		if bytes := blockBytes * int64(need); mem > 0 && bytes > mem {
			return 0, win, fmt.Errorf("%w: one context of %d takes %d MiB of KV cache in %v, more than this machine's %d MiB: a shorter context or a smaller KV type (f16, int8) holds it", ErrOutOfKV, c.Context, bytes>>20, kv.Type, mem>>20)
		}
		blocks = need
	}
	if blocks < need {
		return 0, win, fmt.Errorf("%w: %d blocks of %d tokens cannot hold one context of %d", ErrOutOfKV, blocks, kv.BlockSize, c.Context)
	}
	return blocks, win, nil
}

// Budgets returns the engine's budgets, defaults filled in and capped by
// the context: the tokens one step processes and the sequences that run
// at once (fewer on a model with linear layers, whose states take a slot
// each: maxRecurrent, or where a windowed cache's rings run out).
func (e *Engine) Budgets() Budgets {
	return Budgets{MaxBatchTokens: e.net.maxBatch, MaxSeqs: e.net.maxRunning()}
}

// Model returns the model the engine runs.
func (e *Engine) Model() *models.Model { return e.model }

// Backend returns the backend the engine runs on.
func (e *Engine) Backend() backend.Backend { return e.be }

// DeviceName names the device the engine runs on: "cpu", or "webgpu:" and
// the adapter (backend.Describe).
func (e *Engine) DeviceName() string { return backend.Describe(e.be).Device }

// Chat is the renderer Request.Messages go through: the model's chat
// template, or chat.Plain when it has none.
func (e *Engine) Chat() chat.Renderer { return e.chat }

// Tokenizer returns the model's tokenizer.
func (e *Engine) Tokenizer() tokenizer.Tokenizer { return e.model.Tokenizer }

// WeightMix is how many matrices (and bytes) each storage keeps.
func (e *Engine) WeightMix() []StorageUse { return WeightMix(e.model, e.ws) }

// WeightBytes is the size of the weights as the backend stores them.
func (e *Engine) WeightBytes() int64 { return e.net.weightBytes() }

// DecodeBytes estimates the bytes one decode step reads at position pos:
// every weight except the embedding tables (the tokens' and Gemma 4's
// per-layer ones, of which it reads one row each) and the experts a token does not route to (it reads k of E), and the keys
// and values of pos+1 positions in every global layer and of the last
// window's in every sliding one (the kernels start at the window).
func (e *Engine) DecodeBytes(pos int) int64 {
	c := e.model.Config
	n := e.net.weightBytes() - e.net.idleExpertBytes() - e.net.idleTableBytes()
	if !c.TiedEmbeddings {
		n -= e.net.embed.Bytes() - e.net.embed.Bytes()/int64(c.Vocab)
	}
	// Keys and values of a position in every layer with them, and a
	// sequence's state in every linear layer, read and written.
	global, sliding := kvLayerKinds(c)
	t := e.net.kv.Shape().Type
	kv := int64(pos+1)*kvTokenBytes(c, global, t) + int64(min(pos+1, max(c.SlidingWindow, 1)))*kvTokenBytes(c, sliding, t)
	return n + kv + 2*e.net.stateBytes()
}

// Close stops the scheduler (ending every live generation with an error)
// and releases the backend and the model's file.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	looping := e.looping
	e.mu.Unlock()
	close(e.quit)
	if looping {
		<-e.loopDone
	}
	e.stepMu.Lock()
	defer e.stepMu.Unlock()
	if e.draft != nil {
		e.draft.Close()
	}
	if e.vis != nil {
		e.vis.be.Close()
	}
	err := e.be.Close()
	if cerr := e.model.Close(); err == nil {
		err = cerr
	}
	return err
}

// KVBlockSize is the number of tokens in a KV cache block.
func (e *Engine) KVBlockSize() int { return e.pool.BlockSize() }

// kvBlockBytes is the memory of one block of the pool: keys and values of
// every layer it holds (not the windowed layers' rings).
func (e *Engine) kvBlockBytes() int64 {
	c := e.model.Config
	if e.net.win != nil {
		global, _ := kvLayerKinds(c)
		return int64(e.pool.BlockSize()) * kvTokenBytes(c, global, e.net.kv.Shape().Type)
	}
	return kvBlockBytes(c, e.pool.BlockSize(), e.net.kv.Shape().Type)
}

// KVType is how the engine's cache stores keys and values.
func (e *Engine) KVType() backend.KVType { return e.net.kv.Shape().Type }

// KVBytes is the memory of the engine's KV caches: the pool's, and the
// sliding layers' rings where they keep their windows only (WindowBytes).
func (e *Engine) KVBytes() int64 { return e.net.kvBytes() }

func kvBlockBytes(c models.Config, blockSize int, t backend.KVType) int64 {
	if c.Gemma4 != nil {
		return gemma4KVBlockBytes(c, blockSize, t)
	}
	return backend.KVShape{Layers: kvLayers(c), Blocks: 1, BlockSize: blockSize, Heads: c.KVHeads, HeadDim: c.HeadDim, Type: t}.Bytes()
}

// Metrics describe the engine's KV pool and scheduler.
type Metrics struct {
	KV          kvcache.Stats
	Running     int
	Waiting     int
	Preemptions int
	// PeakBlocks is the most blocks in use at once since the engine
	// started or since ResetPeakBlocks.
	PeakBlocks int
	// MeanWaste is the pool's waste over the engine's life: allocated but
	// unused slots over allocated slots, both summed over every step.
	MeanWaste float64
	// Spec counts speculative decoding's proposals; nil without a draft.
	Spec *SpecMetrics
}

// Metrics reports the pool's use and the scheduler's state now.
func (e *Engine) Metrics() Metrics {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := Metrics{KV: e.pool.Stats(), Running: len(e.running), Waiting: len(e.waiting), Preemptions: e.preemptions, PeakBlocks: e.peakBlocks,
		MeanWaste: e.meanWaste()}
	if e.drafter != nil {
		spec := e.spec
		m.Spec = &spec
	}
	return m
}

// Request is one generation.
type Request struct {
	// Prompt is tokenized with a leading BOS. Messages, if set, are rendered
	// with the model's chat template instead (chat.Plain's "User: ..."
	// lines for models without one), ending with the start of the
	// assistant's turn; Tokens, if set, is used as is.
	Prompt   string
	Messages []chat.Message
	Tokens   []int32
	// Tools are tool definitions the chat template renders with Messages
	// (OpenAI's tools: {"type": "function", "function": {...}}).
	Tools []any
	// TemplateVars are further variables of the chat template
	// (chat_template_kwargs: enable_thinking for Qwen3, reasoning_effort
	// for gpt-oss).
	TemplateVars map[string]any
	// MaxTokens is how many tokens to generate at most; generation also
	// stops at an end-of-sequence token or the end of the context.
	MaxTokens int
	Sampler   SamplerOptions
	// IgnoreEOS keeps generating past end-of-sequence tokens (benchmarks).
	IgnoreEOS bool
	// Stop ends the generation at the first of these strings in the
	// generated text, matched across token boundaries; the stop string and
	// anything after it are never emitted.
	Stop []string
	// Logprobs asks for each token's log-probability, and TopLogprobs (up
	// to MaxTopLogprobs) for that many most likely alternatives. It costs
	// a read-back of the token's logits, and turns off speculation and
	// multi-step chaining for the sequence.
	Logprobs    bool
	TopLogprobs int
	// Constraint, when set, restricts the generation to the grammar's
	// language (grammar.Parse, grammar.Regex, grammar.JSONSchema): every
	// step masks the tokens the grammar cannot take on the backend before
	// sampling, end-of-sequence tokens are allowed exactly when the text so
	// far is complete, and the generation ends once the grammar is complete
	// and cannot go on (Stats.Complete). It turns off speculation and
	// multi-step chaining for the sequence.
	Constraint *grammar.Grammar
	// Adapters names the LoRA adapters the generation runs with (loaded by
	// Options.Adapters or Engine.LoadAdapter), each with a multiplier of
	// its scale: y = x·W + Σ_j s_j·(x·A_j)·B_j. Nil runs the base model.
	// Several make a composite adapter, shared by the requests that name
	// the same ones at the same scales; at most MaxCombinations run at once
	// (ErrTooManyCombinations past them).
	Adapters []AdapterRef
	// Images go where the prompt's text has ImageMarker, in order (an
	// engine loaded with Options.MMProj; vision.Decode reads them).
	Images []*vision.Image
}

// validate reports requests that make no sense.
func (r Request) validate() error {
	if err := r.Sampler.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	if r.TopLogprobs < 0 || r.TopLogprobs > MaxTopLogprobs {
		return fmt.Errorf("%w: top logprobs %d must be in [0, %d]", ErrBadRequest, r.TopLogprobs, MaxTopLogprobs)
	}
	for _, s := range r.Stop {
		if s == "" {
			return fmt.Errorf("%w: a stop string must not be empty", ErrBadRequest)
		}
	}
	return nil
}

// Token is one generated token and the text it completes (which may be
// empty when the token is the first part of a multi-byte character, or may
// be held back as the possible start of a stop string and come with a
// later token). A token with ID -1 carries only text released at the end.
type Token struct {
	ID   int32
	Text string
	// Bytes are the bytes this token adds to the text (part of a UTF-8
	// character, for byte tokens).
	Bytes []byte
	// With Request.Logprobs: the token's log-probability and the most
	// likely alternatives.
	Logprob float32
	Top     []Alternative
	// Time is when the engine sampled the token.
	Time time.Time
}

// Stats describe a finished generation.
type Stats struct {
	PromptTokens    int
	Generated       int
	Queued          time.Duration // waiting for the scheduler to admit it
	Prefill         time.Duration // prompt processing, up to the first token
	Decode          time.Duration // after the first token
	TimeToFirst     time.Duration
	StoppedAtEOS    bool
	StoppedAtLength bool   // the context was full
	Complete        bool   // the constraint's grammar was complete and could not go on
	Stop            string // the stop string that ended the generation

	// Speculative decoding: target round trips that sampled for this
	// sequence (a chain of decoding steps is one), draft model steps it took
	// part in, draft tokens proposed, and how many of them were accepted.
	Steps, DraftSteps, Drafted, Accepted int
}

// Reason is why the generation ended, in OpenAI's and the transcript's
// words: "stop" (a stop string, or the grammar complete), "eos" (an
// end-of-sequence token), "length" (the context was full) or
// "max_tokens".
func (s Stats) Reason() string {
	switch {
	case s.Stop != "" || s.Complete:
		return "stop"
	case s.StoppedAtEOS:
		return "eos"
	case s.StoppedAtLength:
		return "length"
	}
	return "max_tokens"
}

// RoundTripsPerToken is the device round trips (target and draft steps that
// read results back) per generated token.
func (s Stats) RoundTripsPerToken() float64 {
	if s.Generated == 0 {
		return 0
	}
	return float64(s.Steps+s.DraftSteps) / float64(s.Generated)
}

// Add sums the figures of two runs (a benchmark adds up its repeats).
func (s Stats) Add(o Stats) Stats {
	s.PromptTokens += o.PromptTokens
	s.Generated += o.Generated
	s.Prefill += o.Prefill
	s.Decode += o.Decode
	s.TimeToFirst += o.TimeToFirst
	s.Steps += o.Steps
	s.DraftSteps += o.DraftSteps
	s.Drafted += o.Drafted
	s.Accepted += o.Accepted
	return s
}

// AcceptanceRate is the fraction of draft tokens accepted.
func (s Stats) AcceptanceRate() float64 {
	if s.Drafted == 0 {
		return 0
	}
	return float64(s.Accepted) / float64(s.Drafted)
}

// TokensPerStep is the mean number of tokens each target step produced.
func (s Stats) TokensPerStep() float64 {
	if s.Steps == 0 {
		return 0
	}
	return float64(s.Generated) / float64(s.Steps)
}

// PrefillRate is prompt tokens per second.
func (s Stats) PrefillRate() float64 { return rate(s.PromptTokens, s.Prefill) }

// DecodeRate is tokens per second after the first one.
func (s Stats) DecodeRate() float64 { return rate(s.Generated-1, s.Decode) }

func rate(n int, d time.Duration) float64 {
	if n <= 0 || d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// Generate runs req, calling emit with each token as it is sampled. It
// returns ctx's error when ctx ends first, and emit's error if emit fails.
// The text of the prompt is not emitted.
func (e *Engine) Generate(ctx context.Context, req Request, emit func(Token) error) (Stats, error) {
	st, err := e.Start(ctx, req)
	if err != nil {
		return Stats{}, err
	}
	defer st.Cancel()
	for {
		t, ok := st.Next()
		if !ok {
			break
		}
		if err := ctx.Err(); err != nil {
			return st.Stats(), err
		}
		if err := emit(t); err != nil {
			st.Cancel()
			<-st.Done()
			return st.Stats(), err
		}
	}
	return st.Stats(), st.Err()
}

// Score runs tokens through the model and calls fn with the logits that
// follow each of the first len(tokens)-1 tokens (those that predict token
// i+1), for perplexity and evaluation. It takes turns with the scheduler's
// steps and needs room for the tokens in the KV pool.
func (e *Engine) Score(ctx context.Context, tokens []int32, fn func(i int, logits []float32) error) error {
	return e.ScoreAdapters(ctx, tokens, nil, fn)
}

// ScoreAdapters is Score with the model running with adapters, as
// Request.Adapters names them.
func (e *Engine) ScoreAdapters(ctx context.Context, tokens []int32, adapters []AdapterRef, fn func(i int, logits []float32) error) error {
	if len(tokens) > e.model.Config.Context {
		return fmt.Errorf("%w: %d tokens, the model's context is %d", ErrContextFull, len(tokens), e.model.Config.Context)
	}
	ad, adScale, err := e.acquireAdapter(adapters, 1)
	if err != nil {
		return err
	}
	if ad != nil {
		defer e.releaseAdapter(ad)
	}
	e.stepMu.Lock()
	defer e.stepMu.Unlock()
	e.mu.Lock()
	seq := e.pool.NewSeq()
	if ad != nil {
		seq = e.newSeqIn(ad, adScale)
	}
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		seq.Release()
		e.mu.Unlock()
	}()
	n, vocab := e.net, e.model.Config.Vocab
	for pos := 0; pos < len(tokens)-1; {
		if err := ctx.Err(); err != nil {
			return err
		}
		chunk := tokens[pos:min(len(tokens)-1, pos+n.maxOut)]
		e.mu.Lock()
		copies, err := seq.Reserve(len(chunk))
		e.mu.Unlock()
		if err != nil {
			return fmt.Errorf("score: %w", err)
		}
		for _, c := range copies {
			n.copyBlock(int(c.Src), int(c.Dst))
		}
		b := backend.Batch{BlockSize: e.pool.BlockSize(), Tables: [][]int32{seq.Table()}}
		n.solo(&b)
		for i, t := range chunk {
			b.Tokens = append(b.Tokens, t)
			b.Pos = append(b.Pos, int32(pos+i))
			b.Seq = append(b.Seq, 0)
			b.Out = append(b.Out, int32(i))
			if ad != nil {
				b.Adapter, b.AdapterScale = append(b.Adapter, int32(ad.slot)), append(b.AdapterScale, adScale)
			}
		}
		if err := n.forward(b); err != nil {
			return err
		}
		logits, err := e.be.Read(n.logits, len(chunk))
		if err != nil {
			return err
		}
		e.mu.Lock()
		seq.Commit(chunk)
		e.mu.Unlock()
		for i := range chunk {
			if err := fn(pos+i, logits[i*vocab:(i+1)*vocab]); err != nil {
				return err
			}
		}
		pos += len(chunk)
	}
	return nil
}

// CountTokens is how many tokens text takes in the model's vocabulary,
// without BOS: what a prompt of that text costs of the context.
func (e *Engine) CountTokens(text string) int {
	return len(e.model.Tokenizer.Encode(text, false))
}

// chatTemplate is the model's own chat template, or the plain format when
// it has none (or one we cannot parse, which a caller sees only as a plain
// prompt: generation is still possible).
func chatTemplate(m *models.Model) chat.Renderer {
	if m.ChatTemplate != "" {
		if t, err := chat.New(m.ChatTemplate); err == nil {
			return t
		}
		return chat.Plain{}
	}
	if m.Format == "gguf" && m.Path != "" {
		if t, err := chat.FromGGUF(m.Path); err == nil {
			return t
		}
	}
	return chat.Plain{}
}
