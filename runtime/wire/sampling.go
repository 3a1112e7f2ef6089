package wire

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"strconv"

	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/grammar"
)

// Sampling holds the fields that OpenAI's chat and completions requests
// share: how many tokens, how to sample them, when to stop, how many
// choices, and structured output. The server's requests embed it, and the
// browser's JavaScript API reads the same JSON into it, so both take and
// refuse the same values. Optional numbers are pointers so that an absent
// field takes OpenAI's default rather than 0.
type Sampling struct {
	MaxTokens           *int               `json:"max_tokens"`
	MaxCompletionTokens *int               `json:"max_completion_tokens"`
	Temperature         *float64           `json:"temperature"`
	TopP                *float64           `json:"top_p"`
	TopK                *int               `json:"top_k"`
	MinP                *float64           `json:"min_p"`
	RepetitionPenalty   *float64           `json:"repetition_penalty"`
	FrequencyPenalty    *float64           `json:"frequency_penalty"`
	PresencePenalty     *float64           `json:"presence_penalty"`
	Seed                *int64             `json:"seed"`
	Stop                Stop               `json:"stop"`
	N                   *int               `json:"n"`
	IgnoreEOS           bool               `json:"ignore_eos"` // vLLM's extension, for benchmarks
	LogitBias           map[string]float64 `json:"logit_bias"`
	// Structured output: OpenAI's response_format, and GBNF grammars and
	// regular expressions under Tessera's and vLLM's names.
	Fields
}

// Stop is "stop": a string or an array of strings.
type Stop []string

func (s *Stop) UnmarshalJSON(b []byte) error {
	var one string
	switch {
	case string(b) == "null":
		*s = nil
		return nil
	case json.Unmarshal(b, &one) == nil:
		*s = Stop{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return paramError("stop", "stop must be a string or an array of strings")
	}
	*s = many
	return nil
}

// maxTokensLimit caps max_tokens: the engine stops at the context's end
// anyway, so larger values only need to fit in an int.
const maxTokensLimit = 1 << 30

// Params are a request's generation parameters in no dialect's terms:
// every home reads its own wire format into Params (OpenAI's Sampling,
// Anthropic's request, the plugin ABI's request, the browser's low-level
// options) and Params.Request checks them, so that a value one home
// refuses every home refuses, with the same words. A nil field takes
// OpenAI's default; a dialect with other defaults (the plugin ABI's zero
// temperature is greedy) sets the field.
type Params struct {
	// MaxTokens bounds the generated tokens; nil takes Limits.DefaultMax.
	MaxTokens         *int
	Temperature       *float64
	TopP              *float64
	TopK              *int // -1 and 0 are off
	MinP              *float64
	RepetitionPenalty *float64 // 1 is off
	// RepeatLastN is the window of the repetition penalty; nil is
	// llama.cpp's 64 where the penalty is on.
	RepeatLastN      *int
	FrequencyPenalty *float64
	PresencePenalty  *float64
	// Seed makes sampling reproducible; nil draws one at random.
	Seed *uint64
	// N is the number of samples (choices); nil is one.
	N         *int
	Stop      []string
	IgnoreEOS bool
	LogitBias map[string]float64
	// Constraint is the compiled structured-output constraint (Fields).
	Constraint *grammar.Grammar
}

// Limits are what a dialect's request may ask for and the names its
// fields go by in messages.
type Limits struct {
	// DefaultMax is max_tokens when the request gives none, LeastMax
	// the least it may be (a completion may ask for none: its prompt's
	// logprobs; a chat not).
	DefaultMax, LeastMax int
	// MaxStop is how many stop strings a request may give (OpenAI's 4
	// when 0).
	MaxStop int
	// Names renames fields in messages, for a dialect that spells them
	// otherwise (the plugin ABI's repeat_penalty): by OpenAI's name.
	Names map[string]string
}

func (l Limits) name(param string) string {
	if n, ok := l.Names[param]; ok {
		return n
	}
	return param
}

// Request turns the fields into an engine request and the number of
// samples (n), checking every value. defMax is max_tokens when the request
// gives none, minMax the least it may be. max_completion_tokens, the newer
// name, wins where both are given.
func (sp *Sampling) Request(defMax int, minMax int) (runtime.Request, int, error) {
	p := sp.Params()
	lim := Limits{DefaultMax: defMax, LeastMax: minMax}
	if sp.MaxTokens != nil && sp.MaxCompletionTokens != nil {
		if _, err := lim.maxTokens("max_tokens", *sp.MaxTokens); err != nil {
			return runtime.Request{}, 0, err
		}
	}
	if sp.MaxCompletionTokens != nil {
		lim.Names = map[string]string{"max_tokens": "max_completion_tokens"}
	}
	var err error
	if p.Constraint, err = sp.constraint(); err != nil {
		return runtime.Request{}, 0, err
	}
	return p.Request(lim)
}

// Params are the fields in no dialect's terms (less the constraint,
// which Request compiles).
func (sp *Sampling) Params() Params {
	p := Params{
		MaxTokens: sp.MaxTokens, Temperature: sp.Temperature, TopP: sp.TopP, TopK: sp.TopK, MinP: sp.MinP,
		RepetitionPenalty: sp.RepetitionPenalty, FrequencyPenalty: sp.FrequencyPenalty, PresencePenalty: sp.PresencePenalty,
		N: sp.N, Stop: sp.Stop, IgnoreEOS: sp.IgnoreEOS, LogitBias: sp.LogitBias,
	}
	if sp.MaxCompletionTokens != nil {
		p.MaxTokens = sp.MaxCompletionTokens
	}
	if sp.Seed != nil {
		seed := uint64(*sp.Seed)
		p.Seed = &seed
	}
	return p
}

// maxTokens checks a max_tokens of v.
func (l Limits) maxTokens(param string, v int) (int, error) {
	if v < l.LeastMax {
		name := l.name(param)
		return 0, paramError(name, "%s must be at least %d, not %d", name, l.LeastMax, v)
	}
	return min(v, maxTokensLimit), nil
}

// Request turns the parameters into an engine request and the number of
// samples, checking every value against OpenAI's ranges. Its refusals are
// *ParamError, named as lim names the fields.
func (p Params) Request(lim Limits) (runtime.Request, int, error) {
	var req runtime.Request
	req.MaxTokens = lim.DefaultMax
	if p.MaxTokens != nil {
		var err error
		if req.MaxTokens, err = lim.maxTokens("max_tokens", *p.MaxTokens); err != nil {
			return req, 0, err
		}
	}
	req.Constraint = p.Constraint
	o := &req.Sampler
	o.Temperature, o.TopP, o.RepeatPenalty = 1, 1, 1 // OpenAI's defaults
	floats := []struct {
		name   string
		p      *float64
		lo, hi float64
		dst    *float32
	}{
		{"temperature", p.Temperature, 0, 2, &o.Temperature},
		{"top_p", p.TopP, 0, 1, &o.TopP},
		{"min_p", p.MinP, 0, 1, &o.MinP},
		{"repetition_penalty", p.RepetitionPenalty, 0, 10, &o.RepeatPenalty},
		{"frequency_penalty", p.FrequencyPenalty, -2, 2, &o.FrequencyPenalty},
		{"presence_penalty", p.PresencePenalty, -2, 2, &o.PresencePenalty},
	}
	for _, f := range floats {
		if f.p == nil {
			continue
		}
		if !(*f.p >= f.lo && *f.p <= f.hi) {
			name := lim.name(f.name)
			return req, 0, paramError(name, "%s must be between %g and %g, not %g", name, f.lo, f.hi, *f.p)
		}
		*f.dst = float32(*f.p)
	}
	if p.RepetitionPenalty != nil && *p.RepetitionPenalty == 0 {
		name := lim.name("repetition_penalty")
		return req, 0, paramError(name, "%s must be above 0 (1 is off)", name)
	}
	if o.TopP == 0 {
		name := lim.name("top_p")
		return req, 0, paramError(name, "%s must be above 0 (1 keeps every token)", name)
	}
	if o.RepeatPenalty != 1 {
		o.RepeatLastN = 64 // llama.cpp's window
	}
	if p.RepeatLastN != nil {
		if *p.RepeatLastN < 0 {
			name := lim.name("repeat_last_n")
			return req, 0, paramError(name, "%s must be at least 0, not %d", name, *p.RepeatLastN)
		}
		o.RepeatLastN = *p.RepeatLastN
	}
	if p.TopK != nil {
		switch k := *p.TopK; {
		case k == -1 || k == 0: // off, in vLLM's and llama.cpp's spellings
		case k < 0:
			name := lim.name("top_k")
			return req, 0, paramError(name, "%s must be -1 or 0 (off) or positive, not %d", name, k)
		default:
			o.TopK = k
		}
	}
	if p.Seed != nil {
		o.Seed = *p.Seed
	} else {
		var b [8]byte
		rand.Read(b[:])
		o.Seed = binary.LittleEndian.Uint64(b[:])
	}
	n := 1
	if p.N != nil {
		n = *p.N
		if n < 1 || n > runtime.MaxSamples {
			return req, 0, paramError("n", "n must be between 1 and %d, not %d", runtime.MaxSamples, n)
		}
	}
	for _, s := range p.Stop {
		if s != "" {
			req.Stop = append(req.Stop, s)
		}
	}
	maxStop := lim.MaxStop
	if maxStop == 0 {
		maxStop = 4
	}
	if len(req.Stop) > maxStop {
		name := lim.name("stop")
		return req, 0, paramError(name, "%s takes at most %d strings, not %d", name, maxStop, len(req.Stop))
	}
	for k, v := range p.LogitBias {
		id, err := strconv.ParseInt(k, 10, 32)
		if err != nil || id < 0 || !(v >= -100 && v <= 100) {
			return req, 0, paramError("logit_bias", "logit_bias maps token ids to numbers in [-100, 100], not %q: %g", k, v)
		}
		if o.LogitBias == nil {
			o.LogitBias = map[int32]float32{}
		}
		o.LogitBias[int32(id)] = float32(v)
	}
	req.IgnoreEOS = p.IgnoreEOS
	return req, n, nil
}

// constraint compiles the request's structured-output field (at most one
// of response_format, grammar, regex and their vLLM names) into a grammar.
func (sp *Sampling) constraint() (*grammar.Grammar, error) { return sp.Fields.Compile() }

// ChatLogprobs reads a chat request's logprobs and top_logprobs: whether
// to report each token's log-probability, and with how many alternatives.
func ChatLogprobs(logprobs bool, top *int) (int, error) {
	if top == nil {
		return 0, nil
	}
	switch k := *top; {
	case k < 0 || k > runtime.MaxTopLogprobs:
		return 0, paramError("top_logprobs", "top_logprobs must be between 0 and %d, not %d", runtime.MaxTopLogprobs, k)
	case k > 0 && !logprobs:
		return 0, paramError("top_logprobs", "top_logprobs needs logprobs: true")
	default:
		return k, nil
	}
}

// CompletionLogprobs reads a completions request's logprobs: how many
// alternatives to report with each token, nil for no logprobs.
func CompletionLogprobs(k *int) (bool, int, error) {
	if k == nil {
		return false, 0, nil
	}
	if *k < 0 || *k > runtime.MaxTopLogprobs {
		return false, 0, paramError("logprobs", "logprobs must be between 0 and %d, not %d", runtime.MaxTopLogprobs, *k)
	}
	return true, *k, nil
}

// ReadSampling reads the JSON of an OpenAI-shaped request's generation
// fields, as the browser's API sends them (options.request): Sampling's,
// and logprobs, a chat's boolean (with top_logprobs) or a completion's
// number of alternatives. The server reads the same fields of its bodies
// with the same functions (Sampling.Request, ChatLogprobs,
// CompletionLogprobs). defMax is max_tokens when the request gives none.
func ReadSampling(raw []byte, chat bool, defMax int) (runtime.Request, int, error) {
	var f struct {
		Sampling
		Logprobs    json.RawMessage `json:"logprobs"`
		TopLogprobs *int            `json:"top_logprobs"`
	}
	if err := Unmarshal(raw, &f); err != nil {
		return runtime.Request{}, 0, err
	}
	least := 0 // as the server: a completion may ask for no tokens (its prompt's logprobs), a chat not
	if chat {
		least = 1
	}
	req, n, err := f.Sampling.Request(defMax, least)
	if err != nil {
		return req, n, err
	}
	given := len(f.Logprobs) > 0 && string(f.Logprobs) != "null"
	if chat {
		var on bool
		if given && json.Unmarshal(f.Logprobs, &on) != nil {
			return req, n, paramError("logprobs", "logprobs must be a boolean in a chat request")
		}
		req.Logprobs = on
		req.TopLogprobs, err = ChatLogprobs(on, f.TopLogprobs)
		return req, n, err
	}
	var k *int
	if given {
		k = new(int)
		if json.Unmarshal(f.Logprobs, k) != nil {
			return req, n, paramError("logprobs", "logprobs must be an integer in a completions request")
		}
	}
	req.Logprobs, req.TopLogprobs, err = CompletionLogprobs(k)
	return req, n, err
}
