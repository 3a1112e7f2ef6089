package runtime

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/tokenizer"
	"github.com/tessera-llm/tessera/runtime/backend"
)

// ErrNotEmbedding is returned (wrapped) when a model that makes no
// embeddings (a generative model without a pooling type) is asked for
// them, or a model without a classification head for reranking scores.
var ErrNotEmbedding = errors.New("not an embedding model")

// Embedder makes embeddings with an embedding model: a BERT-family encoder
// (GGUF bert, nomic-bert), run by its own forward pass, or a decoder with
// last-token pooling (Qwen3-Embedding), run by an Engine. Rerankers (an
// encoder with a classification head, pooling rank) score query-document
// pairs. It is safe for concurrent use; forwards run one at a time.
type Embedder struct {
	model *models.Model
	be    backend.Backend
	enc   *encoder
	dec   *Engine // a decoder embedder: the engine runs its forward pass
	note  string

	mu     sync.Mutex // one forward at a time on the encoder; guards closed
	closed bool
}

// Encoder batches: at most this many sequences, and tokens, per forward.
const (
	EmbedBatchSeqs = 64
	embedBatchRows = 2048
)

// LoadEmbedder opens the embedding model at path and loads it onto the
// device opts names (Tokenizer, Device, Adapter, Threads, Quant and
// Context apply; a decoder embedder takes every Options field). An
// encoder's matrices default to f16 on WebGPU and f32 on the CPU.
func LoadEmbedder(path string, opts Options) (*Embedder, error) {
	m, err := models.Open(path, models.Options{Tokenizer: opts.Tokenizer})
	if err != nil {
		return nil, err
	}
	return LoadEmbedderModel(m, opts)
}

// LoadEmbedderModel is LoadEmbedder for a model already opened; on failure
// it closes m.
func LoadEmbedderModel(m *models.Model, opts Options) (*Embedder, error) {
	if err := opts.check(); err != nil {
		m.Close()
		return nil, err
	}
	c := m.Config
	if c.Pooling == models.PoolNone {
		m.Close()
		return nil, fmt.Errorf("%w: %s has no pooling type", ErrNotEmbedding, m.Path)
	}
	if !c.Encoder.On {
		if c.Pooling != models.PoolLast {
			m.Close()
			return nil, fmt.Errorf("%w: a decoder embedder with %s pooling (only last is supported)", ErrNotEmbedding, c.Pooling)
		}
		e, err := LoadModel(m, opts)
		if err != nil {
			return nil, err
		}
		return &Embedder{model: m, be: e.be, dec: e, note: e.note}, nil
	}
	if opts.Context > 0 {
		if opts.Context > c.Context {
			m.Close()
			return nil, fmt.Errorf("context %d exceeds the model's %d", opts.Context, c.Context)
		}
		m.Config.Context = opts.Context
	}
	rows := min(m.Config.Context, embedBatchRows)
	be, note, err := openBackend(opts, rows)
	if err != nil {
		m.Close()
		return nil, err
	}
	if opts.Quant == "" && be.Name() == "webgpu" {
		// An encoder runs whole inputs at once, bound by arithmetic rather
		// than by the bytes of weights that int4 saves; f16 keeps quality.
		opts.Quant = "f16"
	}
	ws, err := weightStorage(opts, be, m)
	if err != nil {
		be.Close()
		m.Close()
		return nil, err
	}
	e, err := NewEmbedder(m, be, ws)
	if err != nil {
		be.Close()
		m.Close()
		return nil, err
	}
	e.note = note
	return e, nil
}

// NewEmbedder loads encoder model m onto be, which must take batches of
// min(Context, 2048) rows.
func NewEmbedder(m *models.Model, be backend.Backend, ws WeightStorage) (*Embedder, error) {
	if !m.Config.Encoder.On {
		return nil, fmt.Errorf("%w: %s is not an encoder (load decoder embedders with LoadEmbedder)", ErrNotEmbedding, m.Config.Arch)
	}
	enc, err := newEncoder(m, be, ws, min(m.Config.Context, embedBatchRows), EmbedBatchSeqs)
	if err != nil {
		return nil, fmt.Errorf("load %s on %s: %w", m.Path, be.Name(), err)
	}
	return &Embedder{model: m, be: be, enc: enc}, nil
}

// Model returns the embedding model.
func (e *Embedder) Model() *models.Model { return e.model }

// Backend returns the backend the model runs on.
func (e *Embedder) Backend() backend.Backend { return e.be }

// Tokenizer returns the model's tokenizer.
func (e *Embedder) Tokenizer() tokenizer.Tokenizer { return e.model.Tokenizer }

// DeviceNote says why the embedder runs where it does when that is not
// what was asked for, or "".
func (e *Embedder) DeviceNote() string { return e.note }

// Dim is the length of an embedding.
func (e *Embedder) Dim() int { return e.model.Config.Dim }

// Reranker reports whether the model scores pairs (Rerank) rather than
// embedding texts.
func (e *Embedder) Reranker() bool { return e.model.Config.Pooling == models.PoolRank }

// Close releases the backend and the model's file.
func (e *Embedder) Close() error {
	if e.dec != nil {
		return e.dec.Close()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	err := e.be.Close()
	if cerr := e.model.Close(); err == nil {
		err = cerr
	}
	return err
}

// Tokenize returns the ids the model embeds for text, its special tokens
// included ([CLS] … [SEP] for BERT, the end token for Qwen3-Embedding).
func (e *Embedder) Tokenize(text string) []int32 {
	return toInt32(e.model.Tokenizer.Encode(text, true))
}

// TokenizeContext is Tokenize stopping when ctx is done, and as soon as
// text is known to have more tokens than one input may (ErrContextFull):
// a text of megabytes is refused without being tokenized whole.
func (e *Embedder) TokenizeContext(ctx context.Context, text string) ([]int32, error) {
	longest := e.longest()
	ids, err := tokenizer.EncodeBounded(ctx, e.model.Tokenizer, text, true, longest)
	if errors.Is(err, tokenizer.ErrTooLong) {
		return nil, fmt.Errorf("%w: the input has more tokens than the %d that fit", ErrContextFull, longest)
	}
	return toInt32(ids), err
}

// longest is the most tokens one input may have: the context, and for an
// encoder what one forward holds.
func (e *Embedder) longest() int {
	longest := e.model.Config.Context
	if e.enc != nil {
		longest = min(longest, e.enc.maxRows)
	}
	return longest
}

// Embed returns one L2-normalised embedding per text.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	inputs := make([][]int32, len(texts))
	for i, t := range texts {
		inputs[i] = e.Tokenize(t)
	}
	return e.EmbedTokens(ctx, inputs, true)
}

// EmbedTokens returns one embedding per input of token ids (special tokens
// included, as Tokenize gives them), L2-normalised when normalize is set.
// Inputs are batched into as few forwards as fit; each is computed as it
// would be alone.
func (e *Embedder) EmbedTokens(ctx context.Context, inputs [][]int32, normalize bool) ([][]float32, error) {
	if e.Reranker() {
		return nil, fmt.Errorf("%w: %s is a reranker (use Rerank)", ErrNotEmbedding, e.model.Path)
	}
	ins := make([]encoderInput, len(inputs))
	for i, in := range inputs {
		ins[i] = encoderInput{tokens: in}
	}
	out, err := e.run(ctx, ins)
	if err != nil {
		return nil, err
	}
	if normalize {
		for _, v := range out {
			L2Normalize(v)
		}
	}
	return out, nil
}

// Rerank returns the relevance score of each document for query: the
// reranker's classification head over the pair "[CLS] query [SEP] document
// [SEP]" (token type 1 for the document's part), higher is more relevant.
// Scores are the head's raw logits, as llama.cpp's server reports them.
func (e *Embedder) Rerank(ctx context.Context, query string, documents []string) ([]float32, error) {
	if !e.Reranker() {
		return nil, fmt.Errorf("%w: %s has %s pooling, not a reranker's", ErrNotEmbedding, e.model.Path, e.model.Config.Pooling)
	}
	wp, ok := e.model.Tokenizer.(*tokenizer.WordPiece)
	if !ok {
		return nil, fmt.Errorf("rerank: a %T tokenizer makes no pairs", e.model.Tokenizer)
	}
	ins := make([]encoderInput, len(documents))
	for i, d := range documents {
		ids, types := wp.EncodePair(query, d)
		ins[i] = encoderInput{tokens: toInt32(ids), types: toInt32(types)}
	}
	out, err := e.run(ctx, ins)
	if err != nil {
		return nil, err
	}
	scores := make([]float32, len(out))
	for i, v := range out {
		scores[i] = v[0]
	}
	return scores, nil
}

// run computes the pooled rows (or scores) of inputs, forward by forward.
func (e *Embedder) run(ctx context.Context, inputs []encoderInput) ([][]float32, error) {
	c := e.model.Config
	longest := e.longest()
	for i, in := range inputs {
		switch {
		case len(in.tokens) == 0:
			return nil, fmt.Errorf("%w: input %d is empty", ErrBadRequest, i)
		case len(in.tokens) > longest:
			return nil, fmt.Errorf("%w: input %d has %d tokens, at most %d fit", ErrContextFull, i, len(in.tokens), longest)
		}
		for _, t := range in.tokens {
			if t < 0 || int(t) >= c.Vocab {
				return nil, fmt.Errorf("%w: input %d: token %d outside the vocabulary of %d", ErrBadRequest, i, t, c.Vocab)
			}
		}
		if in.types != nil && len(in.types) != len(in.tokens) {
			return nil, fmt.Errorf("%w: input %d: %d token types for %d tokens", ErrBadRequest, i, len(in.types), len(in.tokens))
		}
		for _, t := range in.types {
			if t < 0 || int(t) >= max(c.Encoder.TokenTypes, 1) {
				return nil, fmt.Errorf("%w: input %d: token type %d, the model has %d", ErrBadRequest, i, t, c.Encoder.TokenTypes)
			}
		}
	}
	if e.dec != nil {
		return e.dec.embedLast(ctx, inputs)
	}
	out := make([][]float32, 0, len(inputs))
	for start := 0; start < len(inputs); {
		// As many inputs as fit in one forward.
		end, rows := start, 0
		for end < len(inputs) && end-start < e.enc.maxSeqs && rows+len(inputs[end].tokens) <= e.enc.maxRows {
			rows += len(inputs[end].tokens)
			end++
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		vecs, err := e.forward(inputs[start:end])
		if err != nil {
			return nil, err
		}
		out = append(out, vecs...)
		start = end
	}
	return out, nil
}

// forward runs one encoder forward and reads its pooled rows back.
func (e *Embedder) forward(inputs []encoderInput) ([][]float32, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, ErrEngineClosed
	}
	if err := e.enc.forward(inputs); err != nil {
		return nil, err
	}
	t := e.enc.pooled
	if e.Reranker() {
		t = e.enc.scores
	}
	flat, err := e.be.Read(t, len(inputs))
	if err != nil {
		return nil, err
	}
	cols := t.Cols()
	out := make([][]float32, len(inputs))
	for i := range out {
		out[i] = flat[i*cols : (i+1)*cols : (i+1)*cols]
	}
	return out, nil
}

// embedLast is a decoder embedder's forward: each input through the
// engine's own forward pass (as Score runs it, one forward at a time), the
// final-norm hidden state of its last token kept.
func (e *Engine) embedLast(ctx context.Context, inputs []encoderInput) ([][]float32, error) {
	out := make([][]float32, len(inputs))
	for i, in := range inputs {
		v, err := e.lastHidden(ctx, in.tokens)
		if err != nil {
			return nil, fmt.Errorf("input %d: %w", i, err)
		}
		out[i] = v
	}
	return out, nil
}

// lastHidden runs tokens through the model and returns the output norm's
// row of the last token (the input of the head).
func (e *Engine) lastHidden(ctx context.Context, tokens []int32) ([]float32, error) {
	e.stepMu.Lock()
	defer e.stepMu.Unlock()
	e.mu.Lock()
	seq := e.pool.NewSeq()
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		seq.Release()
		e.mu.Unlock()
	}()
	n := e.net
	for pos := 0; pos < len(tokens); {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		chunk := tokens[pos:min(len(tokens), pos+n.maxBatch)]
		e.mu.Lock()
		copies, err := seq.Reserve(len(chunk))
		e.mu.Unlock()
		if err != nil {
			return nil, fmt.Errorf("embed: %w", err)
		}
		for _, c := range copies {
			n.copyBlock(int(c.Src), int(c.Dst))
		}
		b := backend.Batch{BlockSize: e.pool.BlockSize(), Tables: [][]int32{seq.Table()}, Out: []int32{int32(len(chunk) - 1)}}
		n.solo(&b)
		for i, t := range chunk {
			b.Tokens = append(b.Tokens, t)
			b.Pos = append(b.Pos, int32(pos+i))
			b.Seq = append(b.Seq, 0)
		}
		if err := n.forward(b); err != nil {
			return nil, err
		}
		e.mu.Lock()
		seq.Commit(chunk)
		e.mu.Unlock()
		pos += len(chunk)
		if pos == len(tokens) {
			// The head's projection normalises its input on the way
			// (Projection.Norm), so the embedding, the final norm's
			// output, is made here.
			e.be.RMSNorm(n.lastNormed, n.out, n.outNorm, n.cfg.NormEps)
			return e.be.Read(n.lastNormed, 1)
		}
	}
	return nil, errors.New("embed: no tokens")
}

// L2Normalize scales v to unit Euclidean length (a zero vector stays zero),
// summing in float64.
func L2Normalize(v []float32) {
	var ss float64
	for _, x := range v {
		ss += float64(float64(x) * float64(x))
	}
	if ss == 0 {
		return
	}
	inv := 1 / math.Sqrt(ss)
	for i, x := range v {
		v[i] = float32(float64(x) * inv)
	}
}

func toInt32(ids []int) []int32 {
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out
}
