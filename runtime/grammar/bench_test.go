package grammar_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/tokenizer"
	"github.com/tessera-llm/tessera/runtime/grammar"
)

const benchSchema = `{"type":"object","properties":{
	"id":{"type":"string","format":"uuid"},
	"name":{"type":"string","maxLength":40},
	"age":{"type":"integer","minimum":0,"maximum":150},
	"email":{"type":"string","format":"email"},
	"tags":{"type":"array","items":{"type":"string"},"maxItems":8},
	"address":{"type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"},"zip":{"type":"string","pattern":"^[0-9]{5}$"}},"required":["city"]}},
	"required":["id","name","age","tags"]}`

const benchDoc = `{"id": "123e4567-e89b-12d3-a456-426614174000", "name": "Ada Lovelace, Countess", "age": 36, "email": "ada@example.org",` +
	` "tags": ["mathematics", "poetry", "analytical engine", "notes"], "address": {"street": "12 St James's Square", "city": "London", "zip": "12345"}}`

func qwen3(b *testing.B) tokenizer.Tokenizer {
	p := filepath.Join("..", "..", "..", "shared", "tokenizers", "qwen3", "tokenizer.json")
	if _, err := os.Stat(p); err != nil {
		b.Skipf("no Qwen3 tokenizer: %v", err)
	}
	tok, err := models.LoadTokenizer(p, 151936)
	if err != nil {
		b.Fatal(err)
	}
	return tok
}

// BenchmarkMaskQwen3 is the cost of a token mask over the 151,936-token
// Qwen3 vocabulary, per generated token of a JSON document (its Qwen3
// tokens fed one by one, a mask before each): "cold" computes every
// state's mask anew (a new machine per document), "cached" is the steady
// state of a grammar whose states were met before.
func BenchmarkMaskQwen3(b *testing.B) {
	tok := qwen3(b)
	idx := grammar.TokenizerIndex(tok, []int{tok.EOS()})
	g, err := grammar.JSONSchema([]byte(benchSchema), grammar.SchemaOptions{})
	if err != nil {
		b.Fatal(err)
	}
	ids := tok.Encode(benchDoc, false)
	run := func(b *testing.B, m *grammar.Machine) {
		s := m.Start()
		prev := -1
		for _, id := range ids {
			mask, err := m.Mask(context.Background(), s)
			if err != nil {
				b.Fatal(err)
			}
			if !grammar.Allowed(mask, id) {
				b.Fatalf("token %q not allowed", tok.TokenBytes(prev, id))
			}
			s = m.AdvanceBytes(s, tok.TokenBytes(prev, id))
			prev = id
		}
		if !m.CanEnd(s) {
			b.Fatal("the document does not end the grammar")
		}
	}
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			run(b, grammar.NewMachine(g, idx))
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(ids))/1e3, "µs/token")
	})
	b.Run("cached", func(b *testing.B) {
		m := grammar.NewMachine(g, idx)
		run(b, m)
		for b.Loop() {
			run(b, m)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(ids))/1e3, "µs/token")
	})
}

// BenchmarkIndexQwen3 is the one-off cost of indexing the vocabulary.
func BenchmarkIndexQwen3(b *testing.B) {
	tok := qwen3(b)
	for b.Loop() {
		grammar.TokenizerIndex(tok, []int{tok.EOS()})
	}
}
