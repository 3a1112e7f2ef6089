package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/tokenizer"
	"github.com/tessera-llm/tessera/runtime/backend"
)

// ErrContextFull is returned (wrapped) when a prompt does not fit in the
// model's context.
var ErrContextFull = errors.New("prompt longer than the context")

// Engine is a model loaded onto a backend, ready to generate.
// It runs one generation at a time.
type Engine struct {
	model *models.Model
	be    backend.Backend
	net   *llama
	note  string
}

// DefaultBatch is how many prompt tokens one forward step processes.
const DefaultBatch = 64

// MaxOutputs is how many rows of logits one forward step computes at most:
// one per sequence decoding in the step.
const MaxOutputs = 16

// batchRows is the largest batch a forward step takes for config c.
func batchRows(c models.Config) int { return min(DefaultBatch, c.Context) }

// New loads model m onto backend be, which must take batches of
// batchRows(m.Config) rows.
func New(m *models.Model, be backend.Backend) (*Engine, error) {
	if m.Config.Arch != "llama" {
		return nil, fmt.Errorf("%w %q", models.ErrUnsupportedArch, m.Config.Arch)
	}
	net, err := newLlama(m, be, batchRows(m.Config))
	if err != nil {
		return nil, fmt.Errorf("load %s on %s: %w", m.Path, be.Name(), err)
	}
	return &Engine{model: m, be: be, net: net}, nil
}

// Model returns the model the engine runs.
func (e *Engine) Model() *models.Model { return e.model }

// Backend returns the backend the engine runs on.
func (e *Engine) Backend() backend.Backend { return e.be }

// Tokenizer returns the model's tokenizer.
func (e *Engine) Tokenizer() tokenizer.Tokenizer { return e.model.Tokenizer }

// WeightBytes is the size of the weights as the backend stores them.
func (e *Engine) WeightBytes() int64 { return e.net.weightBytes() }

// DecodeBytes estimates the bytes one decode step reads at position pos:
// every weight except the embedding table (of which it reads one row), and
// the keys and values of pos+1 positions in every layer.
func (e *Engine) DecodeBytes(pos int) int64 {
	c := e.model.Config
	n := e.net.weightBytes()
	if !c.TiedEmbeddings {
		n -= e.net.embed.Bytes() - e.net.embed.Bytes()/int64(c.Vocab)
	}
	kv := int64(2 * c.KVHeads * c.HeadDim * 4) // f32 keys and values
	return n + int64(c.Layers)*int64(pos+1)*kv
}

// Close releases the backend.
func (e *Engine) Close() error { return e.be.Close() }

// Request is one generation.
type Request struct {
	// Prompt is tokenized with a leading BOS. Tokens, if set, is used instead.
	Prompt string
	Tokens []int32
	// MaxTokens is how many tokens to generate at most; generation also
	// stops at an end-of-sequence token or the end of the context.
	MaxTokens int
	Sampler   SamplerOptions
	// IgnoreEOS keeps generating past end-of-sequence tokens (benchmarks).
	IgnoreEOS bool
}

// Token is one generated token and the text it completes (which may be
// empty when the token is the first part of a multi-byte character).
type Token struct {
	ID   int32
	Text string
}

// Stats describe a finished generation.
type Stats struct {
	PromptTokens    int
	Generated       int
	Prefill         time.Duration // prompt processing, up to the first token
	Decode          time.Duration // after the first token
	TimeToFirst     time.Duration
	StoppedAtEOS    bool
	StoppedAtLength bool // the context was full
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

// Generate runs req, calling emit with each token as it is sampled. It stops
// early, returning ctx's error, when ctx is done, and returns emit's error if
// emit fails. The text of the prompt is not emitted.
func (e *Engine) Generate(ctx context.Context, req Request, emit func(Token) error) (Stats, error) {
	var st Stats
	if err := req.Sampler.Validate(); err != nil {
		return st, err
	}
	tok := e.model.Tokenizer
	ids := req.Tokens
	if ids == nil {
		for _, id := range tok.Encode(req.Prompt, true) {
			ids = append(ids, int32(id))
		}
	}
	ctxLen := e.model.Config.Context
	switch {
	case len(ids) == 0:
		return st, errors.New("empty prompt: there is no token to start from")
	case len(ids) >= ctxLen:
		return st, fmt.Errorf("%w: %d tokens, the model's context is %d", ErrContextFull, len(ids), ctxLen)
	}
	for _, id := range ids {
		if id < 0 || int(id) >= e.model.Config.Vocab {
			return st, fmt.Errorf("prompt token %d is outside the vocabulary of %d", id, e.model.Config.Vocab)
		}
	}
	st.PromptTokens = len(ids)
	sampler := NewSampler(req.Sampler)
	stream := tokenizer.NewStream(tok)
	for _, id := range ids {
		stream.Next(int(id)) // the prompt primes the stream (leading-space rules)
	}
	start := time.Now()
	history := append([]int32(nil), ids...)
	pending := ids // tokens fed to the model but not yet processed
	for st.Generated < req.MaxTokens {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		next, err := e.step(pending, len(history)-len(pending), sampler, history)
		if err != nil {
			return st, err
		}
		if st.Generated == 0 {
			st.TimeToFirst = time.Since(start)
			st.Prefill = st.TimeToFirst
		}
		st.Generated++
		if id := int(next); !req.IgnoreEOS && (id == tok.EOS() || id == tok.BOS()) {
			st.StoppedAtEOS = true
			break
		}
		history = append(history, next)
		if err := emit(Token{ID: next, Text: stream.Next(int(next))}); err != nil {
			return st, err
		}
		if len(history) >= ctxLen {
			st.StoppedAtLength = true
			break
		}
		pending = history[len(history)-1:]
	}
	if rest := stream.Flush(); rest != "" {
		if err := emit(Token{ID: -1, Text: rest}); err != nil {
			return st, err
		}
	}
	if st.Generated > 0 {
		st.Decode = time.Since(start) - st.Prefill
	}
	return st, nil
}

// step feeds tokens at positions pos, pos+1, ... through the model in
// batches and samples the token that follows the last one.
func (e *Engine) step(tokens []int32, pos int, s *Sampler, history []int32) (int32, error) {
	n := e.net
	for len(tokens) > 0 {
		b := backend.Batch{Tokens: tokens[:min(len(tokens), n.maxBatch)]}
		b.Pos = make([]int32, b.Len())
		for i := range b.Pos {
			b.Pos[i] = int32(pos + i)
		}
		b.Out = []int32{int32(b.Len() - 1)}
		if err := n.forward(b); err != nil {
			return 0, err
		}
		tokens, pos = tokens[b.Len():], pos+b.Len()
	}
	if s.opts.greedy() {
		ids, err := e.be.Argmax(n.logits, 1)
		if err != nil {
			return 0, err
		}
		return ids[0], nil
	}
	if k := s.opts.TopK; s.opts.usesCandidates(backend.MaxTopK) {
		ids, vals, err := e.be.TopK(n.logits, min(k, e.model.Config.Vocab))
		if err != nil {
			return 0, err
		}
		return int32(s.SampleTop(ids, vals)), nil
	}
	logits, err := e.be.Read(n.logits, 1)
	if err != nil {
		return 0, err
	}
	return int32(s.Sample(logits, history)), nil
}

// Score runs tokens through the model and calls fn with the logits that
// follow each of the first len(tokens)-1 tokens (those that predict token
// i+1), for perplexity and evaluation. It processes the text in batches,
// starting at position 0, and stops at ctx's end.
func (e *Engine) Score(ctx context.Context, tokens []int32, fn func(i int, logits []float32) error) error {
	n := e.net
	if len(tokens) > e.model.Config.Context {
		return fmt.Errorf("%w: %d tokens, the model's context is %d", ErrContextFull, len(tokens), e.model.Config.Context)
	}
	for pos := 0; pos < len(tokens)-1; {
		if err := ctx.Err(); err != nil {
			return err
		}
		b := backend.Batch{Tokens: tokens[pos:min(len(tokens)-1, pos+n.maxOut)]}
		b.Pos = make([]int32, b.Len())
		for i := range b.Pos {
			b.Pos[i] = int32(pos + i)
		}
		b.Out = make([]int32, b.Len())
		for i := range b.Out {
			b.Out[i] = int32(i)
		}
		if err := n.forward(b); err != nil {
			return err
		}
		logits, err := e.be.Read(n.logits, b.Len())
		if err != nil {
			return err
		}
		v := e.model.Config.Vocab
		for i := range b.Len() {
			if err := fn(pos+i, logits[i*v:(i+1)*v]); err != nil {
				return err
			}
		}
		pos += b.Len()
	}
	return nil
}
