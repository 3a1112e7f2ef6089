package server

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/grammar"
)

// maxTokensLimit caps max_tokens: the engine stops at the context's end
// anyway, so larger values only need to fit in an int.
const maxTokensLimit = 1 << 30

// request turns the shared sampling fields into an engine request and
// the number of samples, checking every value. defMax is max_tokens when
// the request gives none.
func (sp *sampling) request(defMax int, minMax int) (runtime.Request, int, error) {
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
			return req, 0, badRequest(v.name, "%s must be at least %d, not %d", v.name, minMax, *v.p)
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
			return req, 0, badRequest(f.name, "%s must be between %g and %g, not %g", f.name, f.lo, f.hi, *f.p)
		}
		*f.dst = float32(*f.p)
	}
	if sp.RepetitionPenalty != nil && *sp.RepetitionPenalty == 0 {
		return req, 0, badRequest("repetition_penalty", "repetition_penalty must be above 0 (1 is off)")
	}
	if o.TopP == 0 {
		return req, 0, badRequest("top_p", "top_p must be above 0 (1 keeps every token)")
	}
	if o.RepeatPenalty != 1 {
		o.RepeatLastN = 64 // llama.cpp's window
	}
	if sp.TopK != nil {
		switch k := *sp.TopK; {
		case k == -1 || k == 0: // off, in vLLM's and llama.cpp's spellings
		case k < 0:
			return req, 0, badRequest("top_k", "top_k must be -1 or 0 (off) or positive, not %d", k)
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
			return req, 0, badRequest("n", "n must be between 1 and %d, not %d", runtime.MaxSamples, n)
		}
	}
	for _, s := range sp.Stop {
		if s != "" {
			req.Stop = append(req.Stop, s)
		}
	}
	if len(req.Stop) > 4 {
		return req, 0, badRequest("stop", "stop takes at most 4 strings, not %d", len(req.Stop))
	}
	for k, v := range sp.LogitBias {
		id, err := strconv.ParseInt(k, 10, 32)
		if err != nil || id < 0 || !(v >= -100 && v <= 100) {
			return req, 0, badRequest("logit_bias", "logit_bias maps token ids to numbers in [-100, 100], not %q: %g", k, v)
		}
		if o.LogitBias == nil {
			o.LogitBias = map[int32]float32{}
		}
		o.LogitBias[int32(id)] = float32(v)
	}
	req.IgnoreEOS = sp.IgnoreEOS
	return req, n, nil
}

// event is what one choice's generation made since the handler last
// looked: the tokens queued meanwhile (one, when the writer keeps up), or
// the end.
type event struct {
	choice int
	toks   []runtime.Token
	end    bool
	stats  runtime.Stats
	err    error
}

// start queues every prompt's n samples on m (choice p*n+i is sample i of
// prompt p) and returns one channel with the events of them all, closed
// when every choice has ended. Each choice's tokens come in order. ctx's
// end cancels the sequences; the caller cancels it when it stops reading.
func (s *Server) start(ctx context.Context, m *model, reqs []runtime.Request, n int) (<-chan event, error) {
	info(ctx).model = m.name
	total := len(reqs) * n
	if err := s.admit(m, total); err != nil {
		return nil, err
	}
	var streams []*runtime.Stream
	for _, req := range reqs {
		if s.scripted != nil {
			req = s.scripted(req)
		}
		sts, err := m.eng.StartN(ctx, req, n)
		if err != nil {
			for _, st := range streams {
				st.Cancel()
			}
			m.seqs.Add(-int64(total))
			return nil, err
		}
		streams = append(streams, sts...)
	}
	ch := make(chan event, 64)
	done := make(chan struct{})
	for i, st := range streams {
		go func() {
			defer func() { done <- struct{}{} }()
			var last time.Time
			for {
				toks, ok := st.NextAll(nil)
				if !ok {
					break
				}
				for _, t := range toks {
					if t.ID < 0 {
						continue
					}
					if !last.IsZero() {
						s.metrics.itl.WithLabelValues(m.name).Observe(t.Time.Sub(last).Seconds())
					}
					last = t.Time
				}
				select {
				case ch <- event{choice: i, toks: toks}:
				case <-ctx.Done():
				}
			}
			<-st.Done()
			m.seqs.Add(-1)
			stats := st.Stats()
			s.metrics.finished(m.name, stats, st.Err())
			select {
			case ch <- event{choice: i, end: true, stats: stats, err: st.Err()}:
			case <-ctx.Done():
			}
		}()
	}
	go func() {
		for range streams {
			<-done
		}
		close(ch)
	}()
	return ch, nil
}

// constraint compiles the request's structured-output field (at most one
// of response_format, grammar, regex and their vLLM names) into a grammar.
func (sp *sampling) constraint() (*grammar.Grammar, error) {
	g, err := sp.Fields.Compile()
	if fe := (*grammar.FieldError)(nil); errors.As(err, &fe) {
		return nil, badRequest(fe.Param, "%s", fe.Msg)
	}
	return g, err
}

// finishReason is OpenAI's name for how a choice ended.
func finishReason(st runtime.Stats) *string {
	r := "length"
	if st.StoppedAtEOS || st.Stop != "" || st.Complete {
		r = "stop"
	}
	return &r
}

// bytesOf lists b as the integers OpenAI's logprobs "bytes" hold.
func bytesOf(b []byte) []int {
	out := make([]int, len(b))
	for i, c := range b {
		out[i] = int(c)
	}
	return out
}

// finite replaces -Inf (a token the model rules out) by the most negative
// float32, since JSON has no infinities.
func finite(x float32) float32 {
	if math.IsInf(float64(x), -1) || math.IsNaN(float64(x)) {
		return -math.MaxFloat32
	}
	return x
}

func completionID(prefix string, ctx context.Context) string {
	return fmt.Sprintf("%s-%s", prefix, requestID(ctx))
}
