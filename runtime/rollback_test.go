package runtime

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu/gputest"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
	"github.com/tessera-llm/tessera/runtime/kvcache"
)

// manual drives one sequence through the engine's forward pass by hand, the
// way speculative decoding will: append tokens, decode greedily, roll back.
type manual struct {
	t      *testing.T
	e      *Engine
	seq    *kvcache.Seq
	tokens []int32 // tokens whose K/V are stored
}

// feed stores toks after the current tokens and returns the greedy token
// that follows them.
func (m *manual) feed(toks ...int32) int32 {
	m.t.Helper()
	e := m.e
	copies, err := m.seq.Reserve(len(toks))
	if err != nil {
		m.t.Fatal(err)
	}
	for _, c := range copies {
		e.be.CopyBlock(e.net.kv, int(c.Src), int(c.Dst))
	}
	b := backend.Batch{BlockSize: e.pool.BlockSize(), Tables: [][]int32{m.seq.Table()}}
	for i, tok := range toks {
		b.Tokens = append(b.Tokens, tok)
		b.Pos = append(b.Pos, int32(len(m.tokens)+i))
		b.Seq = append(b.Seq, 0)
	}
	b.Out = []int32{int32(len(toks) - 1)}
	if err := e.net.forward(b); err != nil {
		m.t.Fatal(err)
	}
	ids, err := e.be.Argmax(e.net.logits, 1)
	if err != nil {
		m.t.Fatal(err)
	}
	m.seq.Commit(toks)
	m.tokens = append(m.tokens, toks...)
	return ids[0]
}

// decode generates n greedy tokens after next.
func (m *manual) decode(next int32, n int) []int32 {
	var out []int32
	for range n {
		out = append(out, next)
		next = m.feed(next)
	}
	return out
}

func (m *manual) rollback(k int) {
	m.seq.Truncate(len(m.tokens) - k)
	m.tokens = m.tokens[:len(m.tokens)-k]
}

// TestRollback: a sequence rolled back by k tokens and decoded again gives
// the same tokens as a sequence that never generated those k, also when the
// rollback crosses block boundaries and lands inside a block shared with
// another sequence (copy on write).
func TestRollback(t *testing.T) {
	path := filepath.Join("..", "..", "shared", "models", "stories260K.gguf")
	for _, device := range []string{"cpu", "webgpu"} {
		e, err := Load(path, Options{Device: device, Context: 512})
		if errors.Is(err, webgpu.ErrNoAdapter) {
			gputest.NoDevice(t, err)
		}
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		prompt := []int32{1}
		for _, id := range e.Tokenizer().Encode("Once upon a time, there was a little dog named Max. Max liked to run in the park with his ball", false) {
			prompt = append(prompt, int32(id))
		}
		for _, k := range []int{1, 5, 16, 23} {
			// A first sequence fills the prefix cache; the second shares
			// its full prompt blocks.
			for run := range 2 {
				m := &manual{t: t, e: e, seq: e.pool.NewSeq()}
				if run == 1 {
					m.tokens = append(m.tokens, prompt[:m.seq.Share(prompt)]...)
				}
				gen := m.decode(m.feed(prompt[len(m.tokens):]...), 40)
				m.rollback(k) // the last k generated tokens go
				forced := (gen[len(gen)-k] + 1) % 512
				got := m.decode(m.feed(forced), 20)
				m.seq.Release()

				fresh := append(append(append([]int32(nil), prompt...), gen[:len(gen)-k]...), forced)
				var want []int32
				_, err := e.Generate(context.Background(), Request{Tokens: fresh, MaxTokens: 20, IgnoreEOS: true}, func(tok Token) error {
					if tok.ID >= 0 {
						want = append(want, tok.ID)
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if len(want) != len(got) {
					t.Fatalf("%s k=%d run %d: %d tokens vs %d", device, k, run, len(got), len(want))
				}
				for i := range want {
					if want[i] != got[i] {
						t.Fatalf("%s k=%d run %d: after rollback\n got %v\nwant %v", device, k, run, got, want)
					}
				}
			}
		}
	}
}
