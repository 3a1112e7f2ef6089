package tokenizer

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// ggufVocabFromHF converts a shared tokenizer.json into the metadata
// llama.cpp's converter would write, so the GGUF path is checked against
// the same references.
func ggufVocabFromHF(t testing.TB, family, pre string) GGUFVocab {
	t.Helper()
	v, err := ggufVocab(family, pre)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("shared tokenizers not found: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// ggufVocab is ggufVocabFromHF, reporting errors.
func ggufVocab(family, pre string) (GGUFVocab, error) {
	data, err := os.ReadFile(filepath.Join(hfDir, family, "tokenizer.json"))
	if err != nil {
		return GGUFVocab{}, err
	}
	var f struct {
		AddedTokens []struct {
			ID      int    `json:"id"`
			Content string `json:"content"`
			Special bool   `json:"special"`
		} `json:"added_tokens"`
		Model struct {
			Vocab  map[string]int  `json:"vocab"`
			Merges json.RawMessage `json:"merges"`
		} `json:"model"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return GGUFVocab{}, err
	}
	n := 0
	for _, id := range f.Model.Vocab {
		n = max(n, id+1)
	}
	for _, a := range f.AddedTokens {
		n = max(n, a.ID+1)
	}
	v := GGUFVocab{Tokens: make([]string, n), Types: make([]int32, n), Pre: pre, BOS: -1, EOS: -1, EOT: -1, EOM: -1, Unknown: -1}
	for i := range v.Types {
		v.Types[i] = int32(TypeUnused)
	}
	for p, id := range f.Model.Vocab {
		v.Tokens[id], v.Types[id] = p, int32(TypeNormal)
	}
	for _, a := range f.AddedTokens {
		v.Tokens[a.ID], v.Types[a.ID] = a.Content, int32(TypeUserDefined)
		if a.Special {
			v.Types[a.ID] = int32(TypeControl)
		}
	}
	pairs, err := parseMerges(f.Model.Merges)
	if err != nil {
		return GGUFVocab{}, err
	}
	for _, p := range pairs {
		v.Merges = append(v.Merges, p[0]+" "+p[1])
	}
	return v, nil
}

func TestGGUFBPEReference(t *testing.T) {
	no := false
	for _, c := range []struct{ family, pre, bos, eos string }{
		{"qwen3", "qwen2", "<|endoftext|>", "<|im_end|>"},
		{"llama3", "llama-bpe", "<|begin_of_text|>", "<|eot_id|>"},
	} {
		t.Run(c.family, func(t *testing.T) {
			v := ggufVocabFromHF(t, c.family, c.pre)
			v.BOS, v.EOS = slices.Index(v.Tokens, c.bos), slices.Index(v.Tokens, c.eos)
			v.AddBOS = &no // as the shared tokenizer.json files do
			tok, err := NewGGUFBPE(v)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range readReference(t, c.family) {
				if got := tok.EncodeSpecial(l.Text, true); !slices.Equal(got, l.IDsWithSpecial) {
					t.Errorf("EncodeSpecial(%q)\n got %v\nwant %v", l.Text, got, l.IDsWithSpecial)
				}
				if got := tok.Decode(tok.Encode(l.Text, false)); got != l.Text {
					t.Errorf("Decode(Encode(%q)) = %q", l.Text, got)
				}
			}
			if !tok.IsEnd(tok.EOS()) || tok.IsEnd(tok.Encode("a", false)[0]) {
				t.Errorf("ends %v", tok.Ends())
			}
		})
	}
}

// Llama 3 GGUFs add BOS unless they say otherwise, and end on all of
// Llama 3's end tokens.
func TestGGUFBPEDefaults(t *testing.T) {
	v := ggufVocabFromHF(t, "llama3", "llama-bpe")
	v.BOS, v.EOS = 128000, 128001
	tok, err := NewGGUFBPE(v)
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Encode("Hello", true); !slices.Equal(got, []int{128000, 9906}) {
		t.Errorf("Encode(Hello, true) = %v", got)
	}
	if !tok.AddsBOS() {
		t.Error("AddsBOS is false")
	}
	var ends []string
	for _, id := range tok.Ends() {
		ends = append(ends, tok.Piece(id))
	}
	if got, want := strings.Join(ends, " "), "<|end_of_text|> <|eot_id|>"; got != want {
		t.Errorf("ends %s, want %s", got, want)
	}
	v.Pre = "no-such-pre"
	if _, err := NewGGUFBPE(v); err == nil || !strings.Contains(err.Error(), "no-such-pre") {
		t.Errorf("unknown pre: %v", err)
	}
}
