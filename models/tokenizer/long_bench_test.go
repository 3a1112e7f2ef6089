package tokenizer

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

// Long, hostile texts: what a request can send to make encoding slow. Each
// shape is a function of the number of characters.
var hostileShapes = []struct {
	name string
	make func(n int) string
}{
	{"a", func(n int) string { return strings.Repeat("a", n) }},                  // one word, no spaces
	{"spaces", func(n int) string { return strings.Repeat(" ", n) }},             // one run of whitespace
	{"words", func(n int) string { return strings.Repeat("hello ", n/6+1)[:n] }}, // ordinary text, for scale
	{"cjk", func(n int) string { return strings.Repeat("中", n) }},                // one multi-byte character
	{"unicode", func(n int) string { return randomText(rand.New(rand.NewPCG(1, uint64(n))), n) }},
	{"bytes", func(n int) string { return randomBytes(rand.New(rand.NewPCG(2, uint64(n))), n) }},
	{"special", func(n int) string { return strings.Repeat("<|im_start|<|<s><unk>[CLS]<|endoftex", n/32+1)[:n] }},
}

// randomText is n characters drawn from ASCII, Latin, Cyrillic, CJK,
// emoji, combining marks and a few awkward code points.
func randomText(r *rand.Rand, n int) string {
	ranges := [][2]rune{{0x20, 0x7e}, {0xc0, 0x17f}, {0x400, 0x4ff}, {0x4e00, 0x4fff}, {0x1f600, 0x1f64f}, {0x300, 0x36f}, {0x2000, 0x206f}, {0x3040, 0x30ff}}
	var b strings.Builder
	for range n {
		rg := ranges[r.IntN(len(ranges))]
		b.WriteRune(rg[0] + r.Int32N(rg[1]-rg[0]+1))
	}
	return b.String()
}

// randomBytes is n random bytes, mostly not valid UTF-8.
func randomBytes(r *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	return string(b)
}

// benchKinds loads one tokenizer of each kind the package has, from the
// shared files (and the repository's WordPiece test vocabulary); missing
// files leave their kind out. Only functions that have existed since
// before the encoders were made O(n log n) are used, so this file also
// benchmarks the old encoders.
var benchKinds = sync.OnceValue(func() (kinds []struct {
	name string
	tok  Tokenizer
}) {
	add := func(name string, tok Tokenizer, err error) {
		if err == nil {
			kinds = append(kinds, struct {
				name string
				tok  Tokenizer
			}{name, tok})
		}
	}
	t1, err := LoadModelProto(modelsDir + "tok512.model")
	add("spm-tok512.model", t1, err)
	t2, err := LoadModelProto(modelsDir + "llama2-tokenizer.model")
	add("spm-llama2.model", t2, err)
	t3, err := LoadLlama2c(modelsDir+"tok512.bin", 512)
	add("llama2c-tok512.bin", t3, err)
	t4, err := LoadLlama2c(modelsDir+"llama2-tokenizer.bin", 32000)
	add("llama2c-llama2.bin", t4, err)
	for _, fam := range []string{"qwen3", "llama3", "gemma3"} {
		b, err := LoadHF(hfDir + fam)
		add("bpe-"+fam, b, err)
	}
	if data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "wordpiece", "uncased", "tokenizer.json")); err == nil {
		w, err := ParseHFWordPiece(data)
		add("wordpiece-uncased", w, err)
	}
	if v, err := ggufVocab("qwen3", "default"); err == nil {
		b, err := NewGGUFBPE(v)
		add("gguf-default(qwen3)", b, err)
	}
	return kinds
})

// BenchmarkEncodeLong encodes each hostile shape at 32k to 1M characters
// with each kind of tokenizer: ns/op should grow about 4× from one size to
// the next (near-linear), not 16× (quadratic). Run it with -benchtime=1x.
func BenchmarkEncodeLong(b *testing.B) {
	kinds := benchKinds()
	if len(kinds) == 0 {
		b.Skip("no tokenizers found")
	}
	for _, k := range kinds {
		for _, sh := range hostileShapes {
			for _, n := range []int{32 << 10, 128 << 10, 512 << 10, 1 << 20} {
				b.Run(fmt.Sprintf("%s/%s/n=%dk", k.name, sh.name, n>>10), func(b *testing.B) {
					text := sh.make(n)
					b.SetBytes(int64(len(text)))
					var ids []int
					for b.Loop() {
						ids = k.tok.Encode(text, true)
					}
					b.ReportMetric(float64(len(ids)), "ids")
					b.ReportMetric(float64(utf8.RuneCountInString(text)), "chars")
				})
			}
		}
	}
}
