package wire

// Options are the browser's low-level generate options (tessera.generate's
// {temperature, topK, topP, minP, repeatPenalty, repeatLastN, maxTokens,
// seed, stop, ignoreEOS}), read from JavaScript by wasm/browser: the
// engine's own dialect, in JavaScript's spelling. A nil field was not
// given. Params reads them, so that the browser refuses what the server
// and the plugin host refuse, with the same words (and the option's name).
type Options struct {
	Temperature, TopP, MinP, RepeatPenalty *float64
	TopK, RepeatLastN, MaxTokens           *int
	// Seed is the sampling seed; the browser draws one when the page gives
	// none.
	Seed      uint64
	Stop      []string
	IgnoreEOS bool
}

// optionNames are the options' names of OpenAI's fields.
var optionNames = map[string]string{
	"temperature": "temperature", "top_p": "topP", "top_k": "topK", "min_p": "minP",
	"repetition_penalty": "repeatPenalty", "repeat_last_n": "repeatLastN", "max_tokens": "maxTokens", "stop": "stop",
}

// maxOptionStops bounds the stop strings of the low-level options, as
// Anthropic's stop_sequences are bounded: each is matched against every
// token's text.
const maxOptionStops = 16

// Params are the options in no dialect's terms, with their defaults:
// greedy (temperature 0), no top-k, top-p or min-p, repeatPenalty 1 over
// the last 64 tokens, 256 tokens at most.
func (o Options) Params() (Params, Limits) {
	zero, def := 0.0, func(p *float64, v float64) *float64 {
		if p == nil {
			return &v
		}
		return p
	}
	p := Params{
		Temperature:       def(o.Temperature, zero),
		MinP:              o.MinP,
		TopK:              o.TopK,
		TopP:              o.TopP,
		RepetitionPenalty: o.RepeatPenalty,
		RepeatLastN:       o.RepeatLastN,
		MaxTokens:         o.MaxTokens,
		Seed:              &o.Seed,
		Stop:              o.Stop,
		IgnoreEOS:         o.IgnoreEOS,
	}
	if p.TopP != nil && *p.TopP == 0 { // 0 is off, as 1 is
		p.TopP = nil
	}
	if p.RepetitionPenalty != nil && *p.RepetitionPenalty == 0 { // 0 is off, as 1 is
		p.RepetitionPenalty = nil
	}
	if p.RepeatLastN == nil {
		n := 64
		p.RepeatLastN = &n
	}
	return p, Limits{DefaultMax: 256, LeastMax: 1, MaxStop: maxOptionStops, Names: optionNames}
}
