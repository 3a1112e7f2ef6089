package tokenizer_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models/tokenizer"
)

// wordpieceGolden reads testdata/wordpiece (see its README for how
// golden.json was generated with Hugging Face's tokenizers).
func wordpieceGolden(t *testing.T) (texts []string, pairs [][2]string, golden map[string]struct {
	Texts [][]int
	Pairs []struct{ IDs, Types []int }
}) {
	t.Helper()
	dir := filepath.Join("..", "..", "testdata", "wordpiece")
	var corpus struct {
		Texts []string
		Pairs [][2]string
	}
	for _, f := range []struct {
		name string
		v    any
	}{{"corpus.json", &corpus}, {"golden.json", &golden}} {
		data, err := os.ReadFile(filepath.Join(dir, f.name))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, f.v); err != nil {
			t.Fatal(err)
		}
	}
	return corpus.Texts, corpus.Pairs, golden
}

func loadWordPiece(t *testing.T, name string) *tokenizer.WordPiece {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "wordpiece", name, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.ParseHFWordPiece(data)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestWordPieceGolden: from tokenizer.json, the ids and pair types of
// every corpus text are Hugging Face's.
func TestWordPieceGolden(t *testing.T) {
	texts, pairs, golden := wordpieceGolden(t)
	for _, name := range []string{"uncased", "cased"} {
		tok := loadWordPiece(t, name)
		g := golden[name]
		if len(g.Texts) != len(texts) || len(g.Pairs) != len(pairs) {
			t.Fatalf("%s: golden has %d texts and %d pairs, the corpus %d and %d", name, len(g.Texts), len(g.Pairs), len(texts), len(pairs))
		}
		for i, text := range texts {
			if got := tok.Encode(text, true); !slices.Equal(got, g.Texts[i]) {
				t.Errorf("%s text %d %q:\n got %v\nwant %v", name, i, text, got, g.Texts[i])
			}
		}
		for i, p := range pairs {
			ids, types := tok.EncodePair(p[0], p[1])
			if !slices.Equal(ids, g.Pairs[i].IDs) || !slices.Equal(types, g.Pairs[i].Types) {
				t.Errorf("%s pair %d %q:\n got %v %v\nwant %v %v", name, i, p, ids, types, g.Pairs[i].IDs, g.Pairs[i].Types)
			}
		}
	}
}

// TestWordPieceGGUF: the same vocabulary in llama.cpp's GGUF form ("▁"
// before word-initial pieces, continuations bare) encodes the corpus as the
// uncased tokenizer.json does, and decodes its own ids back to the
// normalised words.
func TestWordPieceGGUF(t *testing.T) {
	texts, _, golden := wordpieceGolden(t)
	ref := loadWordPiece(t, "uncased")
	tokens := make([]string, ref.VocabSize())
	types := make([]int32, len(tokens))
	for id := range tokens {
		p := ref.Piece(id)
		types[id] = int32(tokenizer.TypeNormal)
		switch {
		case strings.HasPrefix(p, "[") && strings.HasSuffix(p, "]"):
			tokens[id] = p
			if !strings.HasPrefix(p, "[unused") {
				types[id] = int32(tokenizer.TypeControl)
			}
		case strings.HasPrefix(p, "##"):
			tokens[id] = p[2:]
		default:
			tokens[id] = "▁" + p
		}
	}
	tok, err := tokenizer.NewGGUFWordPiece(tokens, types, 101, 102, 100)
	if err != nil {
		t.Fatal(err)
	}
	for i, text := range texts {
		if got := tok.Encode(text, true); !slices.Equal(got, golden["uncased"].Texts[i]) {
			t.Errorf("text %d %q:\n got %v\nwant %v", i, text, got, golden["uncased"].Texts[i])
		}
	}
	if got := tok.Decode(tok.Encode("Hello, unwanted World!", true)); got != "hello , unwanted world !" {
		t.Errorf("decode: %q", got)
	}
}

// TestLoadHFWordPiece: a WordPiece tokenizer.json is recognised, other
// models are left to LoadHF.
func TestLoadHFWordPiece(t *testing.T) {
	tok, ok, err := tokenizer.LoadHFWordPiece(filepath.Join("..", "..", "testdata", "wordpiece", "cased"))
	if err != nil || !ok || tok.VocabSize() != loadWordPiece(t, "cased").VocabSize() {
		t.Fatalf("cased: %v, %v", ok, err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte(`{"model": {"type": "BPE"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := tokenizer.LoadHFWordPiece(dir); ok || err != nil {
		t.Errorf("BPE: %v, %v", ok, err)
	}
}
