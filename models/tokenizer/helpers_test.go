package tokenizer

import (
	"errors"
	"io/fs"
	"path/filepath"
	"sync"
	"testing"
)

// modelsDir holds the shared, read-only tokenizer files (see its README).
const modelsDir = "../../../shared/models/"

// The real tokenizers, loaded once per test binary.
var (
	loadTok512Bin    = sync.OnceValues(func() (*SentencePiece, error) { return LoadLlama2c(modelsDir+"tok512.bin", 512) })
	loadTok512Model  = sync.OnceValues(func() (*SentencePiece, error) { return LoadModelProto(modelsDir + "tok512.model") })
	loadLlama2Bin    = sync.OnceValues(func() (*SentencePiece, error) { return LoadLlama2c(modelsDir+"llama2-tokenizer.bin", 32000) })
	loadLlama2Model  = sync.OnceValues(func() (*SentencePiece, error) { return LoadModelProto(modelsDir + "llama2-tokenizer.model") })
	errNoSharedFiles = errors.New("shared model files not found")
)

// realTokenizer is one of the shared tokenizer files.
type realTokenizer struct {
	name string
	load func() (*SentencePiece, error)
}

var realTokenizers = []realTokenizer{
	{"tok512.bin", loadTok512Bin},
	{"tok512.model", loadTok512Model},
	{"llama2-tokenizer.bin", loadLlama2Bin},
	{"llama2-tokenizer.model", loadLlama2Model},
}

// mustLoad returns a shared tokenizer, skipping the test on checkouts
// without the shared files and failing it if they do not load.
func mustLoad(t testing.TB, load func() (*SentencePiece, error)) *SentencePiece {
	t.Helper()
	tok, err := load()
	if errors.Is(err, fs.ErrNotExist) {
		abs, _ := filepath.Abs(modelsDir)
		t.Skipf("%v in %s: %v", errNoSharedFiles, abs, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// awkwardTexts are strings that stress the corners of encoding: the
// dummy prefix, whitespace, multi-byte characters and byte fallback.
var awkwardTexts = []string{
	"",
	"a",
	" ",
	"   ",
	"Once upon a time, there was a dog",
	"  leading spaces",
	"trailing spaces  ",
	" both ",
	"runs    of     spaces",
	"tabs\tand\nnewlines\r\n\n",
	"\n\nstarts with newlines",
	"café naïve façade Ångström",
	"日本語のテキストと中文",
	"Привет, мир! Ёлка",
	"emoji 😀 👍🏽 🇫🇷 🏳️‍🌈 👩‍👩‍👧‍👦",
	"ZWJ alone: \u200d, BOM: \ufeff, replacement: \ufffd",
	"math ∑∫√∞ and arrows ⟶ ⇄",
	"<s> </s> <unk> <0x41> look like special pieces",
	"\x00nul and \x7f del",
	"invalid UTF-8: \xff\xfe, lone continuation \x80, cut emoji \xf0\x9f",
	"Lily's mom said, \"Lily, let's go to the park.\"",
}
