//go:build js

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"syscall/js"
	"time"

	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/models/tokenizer"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/wire"
)

// samplingRequest reads generate's options into a request and the number
// of samples: options.request when index.js sent one (the JSON of the
// OpenAI-shaped request, read by wire.ReadSampling as the server reads
// it), else the low-level options (temperature, topK, topP, minP,
// repeatPenalty, repeatLastN, maxTokens, seed, stop, ignoreEOS,
// constraint), read by wire.Options. Either way the values are checked by
// wire.Params, as the server and the plugin host check theirs.
func samplingRequest(opts js.Value, chatReq bool) (runtime.Request, int, error) {
	if raw := optionalString(opts, "request", ""); raw != "" {
		return wire.ReadSampling([]byte(raw), chatReq, 256)
	}
	o := wire.Options{
		Temperature:   optionalNumber(opts, "temperature"),
		TopP:          optionalNumber(opts, "topP"),
		MinP:          optionalNumber(opts, "minP"),
		RepeatPenalty: optionalNumber(opts, "repeatPenalty"),
		TopK:          optionalInt(opts, "topK"),
		RepeatLastN:   optionalInt(opts, "repeatLastN"),
		MaxTokens:     optionalInt(opts, "maxTokens"),
		Stop:          stops(opts),
		IgnoreEOS:     optionalBool(opts, "ignoreEOS", false),
	}
	seed := optional(opts, "seed", -1)
	if seed < 0 {
		seed = float64(time.Now().UnixNano() & (1<<53 - 1))
	}
	o.Seed = uint64(seed)
	params, lim := o.Params()
	var err error
	if params.Constraint, err = compileConstraint(optionalString(opts, "constraint", "")); err != nil {
		return runtime.Request{}, 0, err
	}
	return params.Request(lim)
}

// optionalNumber is property name of an options object as a number, nil
// when it is not one (NaN included, as optional reads it).
func optionalNumber(o js.Value, name string) *float64 {
	v := optional(o, name, math.NaN())
	if math.IsNaN(v) {
		return nil
	}
	return &v
}

// optionalInt is optionalNumber, truncated to an integer.
func optionalInt(o js.Value, name string) *int {
	v := optionalNumber(o, name)
	if v == nil {
		return nil
	}
	n := int(*v)
	return &n
}

// generate implements tessera.generate(input, options, onToken): input is
// what request reads; options.id names the generation for abort(id);
// options.request (index.js's) is the JSON of the OpenAI-shaped request,
// whose n asks for several samples (choices). Each token goes to onToken
// with its choice and, with logprobs, its entry; a chat's reply is read
// as it comes (reply events). It resolves to the first choice's stats
// with, for every choice, its own in choices.
func (a *api) generate(args []js.Value) any {
	in, opts, onToken := arg(args, 0), arg(args, 1), arg(args, 2)
	base, chatIn, reqErr := request(in)
	req, n, sampErr := samplingRequest(opts, chatIn != nil)
	wantID := int(optional(opts, "id", 0))
	prefix := callPrefix(opts)
	transcript := optionalBool(opts, "transcript", false)
	adapters, adErr := requestAdapters(opts)
	return promise(func() (any, error) {
		for _, err := range []error{reqErr, sampErr, adErr} {
			if err != nil {
				return nil, err
			}
		}
		req.Prompt, req.Tokens, req.Messages, req.TemplateVars, req.Images = base.Prompt, base.Tokens, base.Messages, base.TemplateVars, base.Images
		req.Adapters = adapters
		a.mu.Lock()
		eng := a.eng
		if eng == nil {
			a.mu.Unlock()
			return nil, errNoModel
		}
		ctx, cancel := context.WithCancel(context.Background())
		id := wantID
		if id <= 0 {
			a.genID++
			id = -a.genID // ids the caller did not choose never clash with its own
		}
		if a.gens == nil {
			a.gens = map[int]context.CancelFunc{}
		}
		if old := a.gens[id]; old != nil {
			old()
		}
		a.gens[id] = cancel
		a.mu.Unlock()
		defer func() {
			cancel()
			a.mu.Lock()
			delete(a.gens, id)
			a.mu.Unlock()
		}()
		return run(ctx, eng, req, n, chatIn, prefix, transcript, onToken)
	})
}

// run generates n samples of req and reports them (see generate).
func run(ctx context.Context, eng *runtime.Engine, req runtime.Request, n int, chatIn *chatInput, prefix string, transcript bool, onToken js.Value) (any, error) {
	start := time.Now()
	var read chat.ParseOptions
	var err error
	if chatIn != nil {
		if req, read, err = prepareChat(ctx, eng, req, chatIn); err != nil {
			return nil, err
		}
	}
	format := eng.ReplyFormat()
	prompt, err := eng.PromptTokens(req)
	if err != nil {
		return nil, err
	}
	req.Tokens, req.Messages, req.Prompt, req.Tools = prompt, nil, "", nil
	showLogprobs := req.Logprobs
	var trs []*runtime.Transcript
	if transcript { // each choice written down, as the server's "transcript": true
		req.Logprobs = true
		for i := range n {
			r := req
			r.Sampler.Seed += uint64(i)
			tr, err := eng.NewTranscript(r, prompt)
			if err != nil {
				return nil, err
			}
			trs = append(trs, tr)
		}
	}
	streams, err := eng.StartN(ctx, req, n)
	if err != nil {
		return nil, err
	}
	choices := make([]*choice, n)
	var wg sync.WaitGroup
	for i, st := range streams {
		c := &choice{index: i, st: st, prev: int(prompt[len(prompt)-1]), logprobs: showLogprobs, tok: eng.Tokenizer()}
		if trs != nil {
			c.tr = trs[i]
		}
		if chatIn != nil {
			c.reader = eng.NewReplyReader(read)
		}
		choices[i] = c
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.read(start, func(t map[string]any) {
				if chatIn != nil {
					t["events"] = replyEvents(t["events"].([]chat.ReplyEvent), format, callPrefixN(prefix, i))
				}
				if onToken.Type() == js.TypeFunction {
					onToken.Invoke(t)
				}
			})
		}()
	}
	wg.Wait()
	total := time.Since(start)
	promptIDs := make([]any, len(prompt))
	for i, id := range prompt {
		promptIDs[i] = int(id)
	}
	outs := make([]any, n)
	for i, c := range choices {
		out, err := c.result(total, chatIn != nil, format, callPrefixN(prefix, i))
		if err != nil {
			return nil, err
		}
		out["promptIds"] = promptIDs
		out["seed"] = float64(req.Sampler.Seed + uint64(i))
		if c.tr != nil {
			c.tr.End(c.st.Stats())
			if out["transcript"], err = jsonValue(c.tr); err != nil {
				return nil, err
			}
		}
		outs[i] = out
	}
	first := map[string]any{"choices": outs, "systemFingerprint": eng.Fingerprint()} // the first choice's fields, and every choice's
	for k, v := range outs[0].(map[string]any) {
		first[k] = v
	}
	return first, nil
}

// callPrefixN is what the ids of choice i's calls are made from: the
// server's call-<completion>-<choice>, given call-<completion>-0.
func callPrefixN(prefix string, i int) string {
	if i == 0 {
		return prefix
	}
	if len(prefix) > 2 && prefix[len(prefix)-2:] == "-0" {
		return fmt.Sprintf("%s-%d", prefix[:len(prefix)-2], i)
	}
	return fmt.Sprintf("%s-%d", prefix, i)
}

// choice is one sample of a generation, read as it comes.
type choice struct {
	index    int
	st       *runtime.Stream
	reader   *runtime.ReplyReader // a chat's
	reply    chat.Reply
	logprobs bool
	tok      tokenizer.Tokenizer
	prev     int // the last token, which an alternative's bytes follow
	n        int
	first    time.Duration
	tr       *runtime.Transcript // with options.transcript
}

// read hands each token of the choice to send as the page sees it
// ({text, id, index, choice, events, logprobs}; id -1 for text that is no
// token's: what a stop string held back, the reply's last events).
func (c *choice) read(start time.Time, send func(map[string]any)) {
	emit := func(tok runtime.Token, evs []chat.ReplyEvent) {
		t := map[string]any{"text": tok.Text, "id": int(tok.ID), "index": c.n - 1, "choice": c.index}
		if c.reader != nil {
			t["events"] = evs
		}
		if c.logprobs && tok.ID >= 0 {
			t["logprobs"] = c.entry(tok)
		}
		send(t)
	}
	for {
		tok, ok := c.st.Next()
		if !ok {
			break
		}
		if c.n == 0 {
			c.first = time.Since(start)
		}
		if tok.ID >= 0 {
			c.n++
		}
		if c.tr != nil {
			c.tr.Add(tok)
		}
		var evs []chat.ReplyEvent
		if c.reader != nil {
			evs = c.reader.Next(tok)
		}
		emit(tok, evs)
	}
	if c.reader != nil {
		var evs []chat.ReplyEvent
		if evs, c.reply = c.reader.Close(); len(evs) > 0 {
			emit(runtime.Token{ID: -1}, evs)
		}
	}
}

// entry is a token's logprobs in OpenAI's chat shape: {token, logprob,
// bytes, top_logprobs: [{token, logprob, bytes}]}, as the server writes it.
func (c *choice) entry(tok runtime.Token) map[string]any {
	top := make([]any, len(tok.Top))
	for k, alt := range tok.Top {
		b := c.tok.TokenBytes(c.prev, int(alt.ID))
		top[k] = map[string]any{"token": string(b), "logprob": finite(alt.Logprob), "bytes": byteList(b)}
	}
	c.prev = int(tok.ID)
	return map[string]any{"token": string(tok.Bytes), "logprob": finite(tok.Logprob), "bytes": byteList(tok.Bytes), "top_logprobs": top}
}

func byteList(b []byte) []any {
	out := make([]any, len(b))
	for i, c := range b {
		out[i] = int(c)
	}
	return out
}

// finite replaces -Inf (a token the model rules out) by the most negative
// float32, as the server does, since JSON has no infinities.
func finite(x float32) float64 {
	if math.IsInf(float64(x), -1) || math.IsNaN(float64(x)) {
		return -math.MaxFloat32
	}
	return float64(x)
}

// result is the choice's stats once its stream has ended.
func (c *choice) result(total time.Duration, chatReq bool, format *chat.ReplyFormat, prefix string) (map[string]any, error) {
	err := c.st.Err()
	aborted := errors.Is(err, context.Canceled)
	if err != nil && !aborted {
		return nil, err
	}
	s := c.st.Stats()
	stopped, finish := "max", "length"
	switch {
	case aborted:
		stopped, finish = "abort", "abort"
	case s.Stop != "":
		stopped, finish = "stop", "stop"
	case s.StoppedAtEOS:
		stopped, finish = "eos", "stop"
	case s.Complete: // the constraint's grammar could not go on
		stopped, finish = "complete", "stop"
	case s.StoppedAtLength:
		stopped = "length"
	}
	// The engine's own clock: in wasm, tokens reach this goroutine in
	// bursts whenever the engine yields, so arrival times would lie.
	ttft, decodeTPS := s.TimeToFirst, s.DecodeRate()
	if ttft <= 0 {
		ttft = c.first
	}
	if decodeTPS <= 0 && c.n > 1 && total > c.first {
		decodeTPS = float64(c.n-1) / (total - c.first).Seconds()
	}
	if len(c.reply.Calls) > 0 && finish == "stop" { // out of tokens stays "length"
		finish = "tool_calls"
	}
	out := map[string]any{
		"index":        c.index,
		"promptTokens": s.PromptTokens,
		"generated":    c.n,
		"ttftMs":       ms(ttft),
		"totalMs":      ms(total),
		"decodeTps":    decodeTPS,
		"prefillTps":   s.PrefillRate(),
		"stopped":      stopped,
		"finishReason": finish,
		"stop":         s.Stop,
		"drafted":      s.Drafted,
		"accepted":     s.Accepted,
	}
	if chatReq {
		out["reasoning"], out["content"] = c.reply.Reasoning, c.reply.Text
		out["toolCalls"] = replyCalls(c.reply.Calls, format, prefix)
	}
	return out, nil
}

// jsonValue is v as the plain maps, lists, numbers and strings js.ValueOf
// takes: v through JSON.
func jsonValue(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	return out, json.Unmarshal(b, &out)
}
