package chatapi

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
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
	grammar.Fields
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

// Request turns the fields into an engine request and the number of
// samples (n), checking every value. defMax is max_tokens when the request
// gives none, minMax the least it may be.
func (sp *Sampling) Request(defMax int, minMax int) (runtime.Request, int, error) {
	var req runtime.Request
	req.MaxTokens = defMax
	for _, v := range []struct {
		name string
		p    *int
	}{{"max_tokens", sp.MaxTokens}, {"max_completion_tokens", sp.MaxCompletionTokens}} {
		if v.p == nil {
			continue
		}
		if *v.p < minMax {
			return req, 0, paramError(v.name, "%s must be at least %d, not %d", v.name, minMax, *v.p)
		}
		req.MaxTokens = min(*v.p, maxTokensLimit)
	}
	var err error
	if req.Constraint, err = sp.constraint(); err != nil {
		return req, 0, err
	}
	o := &req.Sampler
	o.Temperature, o.TopP, o.RepeatPenalty = 1, 1, 1 // OpenAI's defaults
	floats := []struct {
		name   string
		p      *float64
		lo, hi float64
		dst    *float32
	}{
		{"temperature", sp.Temperature, 0, 2, &o.Temperature},
		{"top_p", sp.TopP, 0, 1, &o.TopP},
		{"min_p", sp.MinP, 0, 1, &o.MinP},
		{"repetition_penalty", sp.RepetitionPenalty, 0, 10, &o.RepeatPenalty},
		{"frequency_penalty", sp.FrequencyPenalty, -2, 2, &o.FrequencyPenalty},
		{"presence_penalty", sp.PresencePenalty, -2, 2, &o.PresencePenalty},
	}
	for _, f := range floats {
		if f.p == nil {
			continue
		}
		if !(*f.p >= f.lo && *f.p <= f.hi) {
			return req, 0, paramError(f.name, "%s must be between %g and %g, not %g", f.name, f.lo, f.hi, *f.p)
		}
		*f.dst = float32(*f.p)
	}
	if sp.RepetitionPenalty != nil && *sp.RepetitionPenalty == 0 {
		return req, 0, paramError("repetition_penalty", "repetition_penalty must be above 0 (1 is off)")
	}
	if o.TopP == 0 {
		return req, 0, paramError("top_p", "top_p must be above 0 (1 keeps every token)")
	}
	if o.RepeatPenalty != 1 {
		o.RepeatLastN = 64 // llama.cpp's window
	}
	if sp.TopK != nil {
		switch k := *sp.TopK; {
		case k == -1 || k == 0: // off, in vLLM's and llama.cpp's spellings
		case k < 0:
			return req, 0, paramError("top_k", "top_k must be -1 or 0 (off) or positive, not %d", k)
		default:
			o.TopK = k
		}
	}
	if sp.Seed != nil {
		o.Seed = uint64(*sp.Seed)
	} else {
		var b [8]byte
		rand.Read(b[:])
		o.Seed = binary.LittleEndian.Uint64(b[:])
	}
	n := 1
	if sp.N != nil {
		n = *sp.N
		if n < 1 || n > runtime.MaxSamples {
			return req, 0, paramError("n", "n must be between 1 and %d, not %d", runtime.MaxSamples, n)
		}
	}
	for _, s := range sp.Stop {
		if s != "" {
			req.Stop = append(req.Stop, s)
		}
	}
	if len(req.Stop) > 4 {
		return req, 0, paramError("stop", "stop takes at most 4 strings, not %d", len(req.Stop))
	}
	for k, v := range sp.LogitBias {
		id, err := strconv.ParseInt(k, 10, 32)
		if err != nil || id < 0 || !(v >= -100 && v <= 100) {
			return req, 0, paramError("logit_bias", "logit_bias maps token ids to numbers in [-100, 100], not %q: %g", k, v)
		}
		if o.LogitBias == nil {
			o.LogitBias = map[int32]float32{}
		}
		o.LogitBias[int32(id)] = float32(v)
	}
	req.IgnoreEOS = sp.IgnoreEOS
	return req, n, nil
}

// constraint compiles the request's structured-output field (at most one
// of response_format, grammar, regex and their vLLM names) into a grammar.
func (sp *Sampling) constraint() (*grammar.Grammar, error) {
	g, err := sp.Fields.Compile()
	if fe := (*grammar.FieldError)(nil); errors.As(err, &fe) {
		return nil, paramError(fe.Param, "%s", fe.Msg)
	}
	return g, err
}

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
