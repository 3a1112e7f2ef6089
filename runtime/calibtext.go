package runtime

import (
	"context"
	"errors"

	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/kvcache"
)

// The calibration text of CalibrateInt4: sampled from the model itself,
// outside the scheduler so that its batches are always the same.

// sampleText samples at least c.Tokens tokens of text from BOS at
// temperature 1, in as few rounds as it takes of up to calibrationParallel
// sequences of c.SeqLen tokens decoded in lockstep (one row per sequence a
// step, in sequence order), with seeds c.Seed, c.Seed+1, ... The batches
// do not depend on timing, so whatever the backend captures meanwhile is summed in one
// order: the statistics, and so the codes, are the same on every run.
//
// A sampled end token does not end a sequence: after BOS a llama2.c
// model starts a new story, as in the stream it was trained on. Each
// sequence is returned as the tokens fed to the model and the last one
// sampled, so that scoring it (Score) replays the same inputs.
func (e *Engine) sampleText(ctx context.Context, c Calibration) ([][]int32, error) {
	bos := e.model.Tokenizer.BOS()
	if bos < 0 {
		return nil, errors.New("the tokenizer has no BOS token to start from")
	}
	e.stepMu.Lock()
	defer e.stepMu.Unlock()
	n := e.net
	// Enough sequences for c.Tokens, spread evenly over the rounds.
	count := (c.Tokens + c.SeqLen - 2) / (c.SeqLen - 1)
	per := min(n.maxRunning(), calibrationParallel) // with linear layers, a state each
	rounds := (count + per - 1) / per
	var seqs [][]int32
	for r := range rounds {
		k := count*(r+1)/rounds - count*r/rounds
		kv := make([]*kvcache.Seq, k)
		samplers := make([]*Sampler, k)
		round := make([][]int32, k)
		e.mu.Lock()
		for i := range k {
			kv[i] = e.pool.NewSeq()
			samplers[i] = NewSampler(SamplerOptions{Temperature: 1, Seed: c.Seed + uint64(len(seqs)+i)})
			round[i] = []int32{int32(bos)}
		}
		e.mu.Unlock()
		err := e.decodeLockstep(ctx, kv, round, c.SeqLen-1, func(i int, logits []float32) int32 {
			return int32(samplers[i].Sample(logits, round[i]))
		})
		e.mu.Lock()
		for _, s := range kv {
			s.Release()
		}
		e.mu.Unlock()
		if err != nil {
			return nil, err
		}
		seqs = append(seqs, round...)
	}
	return seqs, nil
}

// decodeLockstep runs steps decoding steps over the sequences toks, one
// row each, appending to toks[i] the token next picks from its logits.
// Called with e.stepMu held.
func (e *Engine) decodeLockstep(ctx context.Context, kv []*kvcache.Seq, toks [][]int32, steps int, next func(i int, logits []float32) int32) error {
	n, vocab := e.net, e.model.Config.Vocab
	states, err := e.lendStates(len(kv))
	if err != nil {
		return err
	}
	defer e.returnStates(states)
	for pos := range steps {
		if err := ctx.Err(); err != nil {
			return err
		}
		b := backend.Batch{BlockSize: e.pool.BlockSize(), States: states}
		e.mu.Lock()
		for i, s := range kv {
			copies, err := s.Reserve(1)
			if err != nil {
				e.mu.Unlock()
				return err
			}
			for _, c := range copies {
				n.copyBlock(int(c.Src), int(c.Dst))
			}
			b.Tables = append(b.Tables, s.Table())
			b.Tokens = append(b.Tokens, toks[i][pos])
			b.Pos = append(b.Pos, int32(pos))
			b.Seq = append(b.Seq, int32(i))
			b.Out = append(b.Out, int32(i))
		}
		e.mu.Unlock()
		n.windows(&b) // the lent slots' rings, on a windowed cache
		if err := n.forward(b); err != nil {
			return err
		}
		logits, err := e.be.Read(n.logits, len(kv))
		if err != nil {
			return err
		}
		e.mu.Lock()
		for i, s := range kv {
			s.Commit(toks[i][pos : pos+1])
		}
		e.mu.Unlock()
		for i := range kv {
			toks[i] = append(toks[i], next(i, logits[i*vocab:(i+1)*vocab]))
		}
	}
	return nil
}
