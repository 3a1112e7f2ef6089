package tokenizer

import (
	"bufio"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

// hfDir holds the shared Hugging Face tokenizers (see its README).
const hfDir = "../../../shared/tokenizers/"

// hfFamilies are the shared tokenizers, each loaded once per test binary.
var hfFamilies = []struct {
	name string
	load func() (*BPE, error)
}{
	{"qwen3", sync.OnceValues(func() (*BPE, error) { return LoadHF(hfDir + "qwen3") })},
	{"llama3", sync.OnceValues(func() (*BPE, error) { return LoadHF(hfDir + "llama3/tokenizer.json") })},
	{"gemma3", sync.OnceValues(func() (*BPE, error) { return LoadHF(hfDir + "gemma3") })},
}

// mustLoadHF returns a shared tokenizer, skipping the test on checkouts
// without the shared files.
func mustLoadHF(t testing.TB, load func() (*BPE, error)) *BPE {
	t.Helper()
	tok, err := load()
	if errors.Is(err, fs.ErrNotExist) {
		abs, _ := filepath.Abs(hfDir)
		t.Skipf("shared tokenizers not found in %s: %v", abs, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

type referenceLine struct {
	Text           string `json:"text"`
	IDs            []int  `json:"ids"`
	IDsWithSpecial []int  `json:"ids_with_special"`
}

func readReference(t *testing.T, family string) []referenceLine {
	t.Helper()
	f, err := os.Open(filepath.Join(hfDir, family, "reference.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []referenceLine
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l referenceLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(lines) == 0 {
		t.Fatal("empty reference")
	}
	return lines
}

// TestHFReference checks every line of each reference.jsonl: the ids the
// Hugging Face library gives (which matches added tokens, special ones
// included, like EncodeSpecial), with and without the model's own
// special tokens, and that decoding gives the text back.
func TestHFReference(t *testing.T) {
	for _, fam := range hfFamilies {
		t.Run(fam.name, func(t *testing.T) {
			tok := mustLoadHF(t, fam.load)
			lines := readReference(t, fam.name)
			for _, l := range lines {
				if got := tok.EncodeSpecial(l.Text, false); !slices.Equal(got, l.IDs) {
					t.Errorf("EncodeSpecial(%q, false)\n got %v\nwant %v", l.Text, got, l.IDs)
				}
				if got := tok.EncodeSpecial(l.Text, true); !slices.Equal(got, l.IDsWithSpecial) {
					t.Errorf("EncodeSpecial(%q, true)\n got %v\nwant %v", l.Text, got, l.IDsWithSpecial)
				}
				// Without special tokens in the text, Encode agrees.
				if !containsSpecial(tok, l.Text) {
					if got := tok.Encode(l.Text, false); !slices.Equal(got, l.IDs) {
						t.Errorf("Encode(%q, false)\n got %v\nwant %v", l.Text, got, l.IDs)
					}
				}
				if got := tok.Decode(tok.Encode(l.Text, true)); got != l.Text {
					t.Errorf("Decode(Encode(%q)) = %q", l.Text, got)
				}
				if got := tok.DecodeSpecial(tok.EncodeSpecial(l.Text, false)); got != l.Text {
					t.Errorf("DecodeSpecial(EncodeSpecial(%q)) = %q", l.Text, got)
				}
			}
			t.Logf("%d reference lines", len(lines))
		})
	}
}

func containsSpecial(tok *BPE, text string) bool {
	for _, a := range tok.added.tokens {
		if a.special && strings.Contains(text, a.content) {
			return true
		}
	}
	return false
}

// Byte-level tokens split characters; the stream must never print half of
// one and must agree with Decode.
func TestHFStream(t *testing.T) {
	texts := []string{
		"emoji 🦙🚀👩‍👩‍👧 mixed",
		"日本語のテキストと中文文本",
		"Как масштабировать модель",
		"ÀÉÎÕÜ ñ ç ß ø å",
		"plain ASCII",
	}
	for _, fam := range hfFamilies {
		tok := mustLoadHF(t, fam.load)
		for _, text := range texts {
			ids := tok.Encode(text, true)
			s := NewStream(tok)
			var all strings.Builder
			for i, id := range ids {
				out := s.Next(id)
				if !utf8.ValidString(out) {
					t.Errorf("%s: %q: Next(ids[%d]=%d) = %q, invalid UTF-8", fam.name, text, i, id, out)
				}
				all.WriteString(out)
			}
			if rest := s.Flush(); rest != "" {
				t.Errorf("%s: %q: Flush = %q", fam.name, text, rest)
			}
			if got := all.String(); got != text {
				t.Errorf("%s: streamed %q, want %q", fam.name, got, text)
			}
		}
	}
}
