package tokenizer

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The encoders were rewritten to be O(n log n) and to stop early; these
// tests hold them to the old, obviously right algorithms (reference_test.go)
// on real vocabularies and on random ones built to make ties, unmergeable
// pieces and missing byte pieces likely.

// agreementTexts are short texts for a tokenizer: the awkward ones, each
// hostile shape at a few hundred characters, random text, random bytes
// and runs of the vocabulary's own pieces (which make long merges).
func agreementTexts(r *rand.Rand, pieces func(int) string, vocab int) []string {
	texts := append([]string(nil), awkwardTexts...)
	texts = append(texts, paragraph)
	for _, sh := range hostileShapes {
		texts = append(texts, sh.make(300))
	}
	for range 40 {
		texts = append(texts, randomText(r, r.IntN(200)), randomBytes(r, r.IntN(100)))
		var b strings.Builder
		for range r.IntN(60) {
			b.WriteString(pieces(r.IntN(vocab)))
			if r.IntN(4) == 0 {
				b.WriteByte(' ')
			}
		}
		texts = append(texts, b.String())
	}
	return texts
}

func TestSentencePieceAgreesWithReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, rt := range realTokenizers {
		tok := mustLoad(t, rt.load)
		piece := func(id int) string { return strings.ReplaceAll(tok.Piece(id), spaceMark, " ") }
		for _, text := range agreementTexts(r, piece, tok.VocabSize()) {
			checkSentencePieceAgrees(t, rt.name, tok, text)
		}
	}
}

// TestSentencePieceAgreesOnRandomVocabularies builds small vocabularies
// where many pairs merge with equal scores, some pieces never merge
// (scores at or below -1e10, NaN), some are control or unused, and byte
// pieces or the unknown token may be missing: every way the order of
// merges can matter.
func TestSentencePieceAgreesOnRandomVocabularies(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for v := range 300 {
		llama2c := v%2 == 1
		tok, alphabet := randomSentencePiece(t, r, llama2c)
		name := fmt.Sprintf("vocabulary %d (llama2c %v)", v, llama2c)
		for range 20 {
			var b strings.Builder
			for range r.IntN(40) {
				b.WriteString(alphabet[r.IntN(len(alphabet))])
			}
			checkSentencePieceAgrees(t, name, tok, b.String())
		}
		if t.Failed() {
			return
		}
	}
}

func checkSentencePieceAgrees(t *testing.T, name string, tok *SentencePiece, text string) {
	t.Helper()
	for _, bos := range []bool{false, true} {
		if got, want := tok.Encode(text, bos), tok.referenceEncode(text, bos); !slices.Equal(got, want) {
			t.Errorf("%s: Encode(%q, %v)\n got %v\nwant %v", name, text, bos, got, want)
		}
		if got, want := tok.EncodeSpecial(text, bos), tok.referenceEncodeSpecial(text, bos); !slices.Equal(got, want) {
			t.Errorf("%s: EncodeSpecial(%q, %v)\n got %v\nwant %v", name, text, bos, got, want)
		}
	}
}

// randomSentencePiece returns a random vocabulary over a small alphabet,
// and the alphabet (with the special pieces and bytes that are not UTF-8)
// to write texts with.
func randomSentencePiece(t *testing.T, r *rand.Rand, llama2c bool) (*SentencePiece, []string) {
	t.Helper()
	space := spaceMark
	if llama2c {
		space = " "
	}
	chars := []string{"a", "b", "c", space, "é", "中"}
	scoreSet := []float32{-3, -2, -1, 0, 0, 1, 1, noMerge, 2 * noMerge, float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}
	var (
		pieces []string
		scores []float32
		types  []int32
	)
	add := func(p string, typ TokenType) {
		pieces = append(pieces, p)
		scores = append(scores, scoreSet[r.IntN(len(scoreSet))])
		types = append(types, int32(typ))
	}
	add("<unk>", TypeUnknown)
	add("<s>", TypeControl)
	add("</s>", TypeControl)
	allBytes := r.IntN(2) == 0
	for b := range 256 {
		if allBytes || r.IntN(3) == 0 {
			add(fmt.Sprintf("<0x%02X>", b), TypeByte)
		}
	}
	for range 5 + r.IntN(60) {
		var p strings.Builder
		for range 1 + r.IntN(4) {
			p.WriteString(chars[r.IntN(len(chars))])
		}
		typ := TypeNormal
		switch r.IntN(12) {
		case 0:
			typ = TypeUserDefined
		case 1:
			typ = TypeControl
		case 2:
			typ = TypeUnused
		}
		add(p.String(), typ)
	}
	unk := 0
	if r.IntN(3) == 0 {
		unk = -1
		types[0] = int32(TypeNormal)
	}
	if llama2c && r.IntN(2) == 0 {
		types = nil // as ReadLlama2c gives them
		unk = 0
	}
	tok, err := newSentencePiece(pieces, scores, types, 1, 2, unk, llama2c)
	if err != nil {
		t.Fatal(err)
	}
	if !llama2c && r.IntN(3) == 0 {
		tok.WithoutSpacePrefix()
	}
	alphabet := append(chars, " ", "<s>", "</s>", "\xff", "\x80", "\xe4\xb8")
	return tok, alphabet
}

// TestWordPieceAgreesWithReference compares the chunked, trie-matching
// WordPiece encoder with the old one on the golden corpus, random text
// with special tokens in it, and texts longer than a chunk.
func TestWordPieceAgreesWithReference(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var corpus []string
	if data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "wordpiece", "corpus.json")); err == nil {
		var c struct{ Texts []string }
		if err := json.Unmarshal(data, &c); err != nil {
			t.Fatal(err)
		}
		corpus = c.Texts
	}
	specials := []string{"[CLS]", "[SEP]", "[UNK]", "[MASK]", "[PAD]", "[", "]", "CLS"}
	for _, name := range []string{"uncased", "cased"} {
		tok := loadWordPieceInternal(t, name)
		texts := append(slices.Clone(corpus), awkwardTexts...)
		for range 50 {
			var b strings.Builder
			for range r.IntN(30) {
				switch r.IntN(4) {
				case 0:
					b.WriteString(specials[r.IntN(len(specials))])
				case 1:
					b.WriteString(tok.Piece(r.IntN(tok.VocabSize())))
				default:
					b.WriteString(randomText(r, r.IntN(12)))
				}
			}
			texts = append(texts, b.String())
		}
		// Longer than a chunk: cuts fall at spaces, punctuation, CJK and
		// in text with accents (whose marks NFD must keep in place).
		long := strings.Repeat("Ünïcödé café, 中文 and mañana! ", 600) + randomText(r, 9000) + strings.Repeat("e\u0301\u0327", 3000)
		texts = append(texts, long, strings.Repeat("a", 9000)+" b", strings.Repeat("中", 5000))
		for _, text := range texts {
			for _, bos := range []bool{false, true} {
				if got, want := tok.Encode(text, bos), tok.referenceEncode(text, bos); !slices.Equal(got, want) {
					t.Errorf("%s: Encode(%.80q, %v)\n got %v\nwant %v", name, text, bos, got, want)
				}
			}
		}
	}
}

func loadWordPieceInternal(t testing.TB, name string) *WordPiece {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "wordpiece", name, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := ParseHFWordPiece(data)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestPretokenizeAgreesWithReference: yielding words one at a time gives
// the words the pre-tokenizers gave as lists, for every split behavior,
// inverted or not, every matcher, and chains where a first word vanishes.
func TestPretokenizeAgreesWithReference(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	regex, err := newRegexMatcher(`\p{N}+|[\p{P}\$\+<=>\^~\|]+`)
	if err != nil {
		t.Fatal(err)
	}
	matchers := []matcher{literalMatcher{" "}, literalMatcher{"ab"}, fastMatchers[patternGPT2], fastMatchers[patternLlama3], fastMatchers[patternQwen2], regex}
	var stages []preTokenizer
	for _, m := range matchers {
		for b := splitIsolated; b <= splitContiguous; b++ {
			stages = append(stages, splitPre{m: m, behavior: b}, splitPre{m: m, behavior: b, invert: true})
		}
	}
	gpt2 := splitPre{m: fastMatchers[patternGPT2]}
	stages = append(stages,
		byteLevelPre{}, byteLevelPre{addPrefixSpace: true}, byteLevelPre{addPrefixSpace: true, regex: &gpt2},
		digitsPre{}, digitsPre{individual: true},
		metaspacePre{replacement: spaceMark, prepend: "always", splitWords: true},
		metaspacePre{replacement: spaceMark, prepend: "first", splitWords: true},
		metaspacePre{replacement: spaceMark, prepend: "first"},
		metaspacePre{replacement: "_", prepend: "never", splitWords: true},
	)
	texts := []string{"", " ", "ab ab  abab 12 345 x", "  Hello, world! 42 times\n\n 'll ab", "ab", "abab", " ab "}
	for range 100 {
		texts = append(texts, randomText(r, r.IntN(40)), strings.Repeat("ab 1 ", r.IntN(5))+randomText(r, 5))
	}
	for range 3000 {
		chain := make([]preTokenizer, 1+r.IntN(3))
		for i := range chain {
			chain[i] = stages[r.IntN(len(stages))]
		}
		text, first := texts[r.IntN(len(texts))], r.IntN(2) == 0
		var got []string
		pretokenize(chain, text, first, func(w string) bool { got = append(got, w); return true })
		if want := referencePretokenize(chain, text, first); !slices.Equal(got, want) {
			t.Fatalf("chain %#v on %q (first %v):\n got %q\nwant %q", chain, text, first, got, want)
		}
	}
}

// TestBPEAgreesWithReference: the shared BPE tokenizers, and the GGUF one
// with llama.cpp's default pre-tokenizer (which runs on regexp2), encode
// random and hostile text as when every word was listed before merging.
func TestBPEAgreesWithReference(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	toks := map[string]*BPE{}
	for _, fam := range hfFamilies {
		toks[fam.name] = mustLoadHF(t, fam.load)
	}
	gg, err := NewGGUFBPE(ggufVocabFromHF(t, "qwen3", "default"))
	if err != nil {
		t.Fatal(err)
	}
	toks["gguf-default"] = gg
	for name, tok := range toks {
		piece := func(id int) string { return string(tok.text[id]) }
		for _, text := range agreementTexts(r, piece, tok.VocabSize()) {
			for _, special := range []bool{false, true} {
				if got, want := tok.encodeBounded(&limit{}, text, true, special), tok.referenceEncode(text, true, special); !slices.Equal(got, want) {
					t.Errorf("%s: encode(%q, special %v)\n got %v\nwant %v", name, text, special, got, want)
				}
			}
		}
	}
}

// TestAddedTokensAgreeWithReference: the backwards Aho-Corasick scan finds
// the tokens that trying every token at every position finds, for random
// sets of tokens that are prefixes, suffixes and repeats of each other,
// special or not, stripping spaces or not, in texts longer than a window.
func TestAddedTokensAgreeWithReference(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	alphabet := []string{"a", "b", "<", ">", "|", " ", "\n", "é"}
	word := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		return b.String()
	}
	type part struct {
		seg   string
		id    int
		first bool
	}
	for set := range 400 {
		var specs []addedSpec
		for i := range 1 + r.IntN(12) {
			specs = append(specs, addedSpec{id: 100 + i, content: word(r.IntN(6)), special: r.IntN(2) == 0, lstrip: r.IntN(4) == 0, rstrip: r.IntN(4) == 0})
		}
		long := "x" + strings.Repeat("ab", 35000) // longer than a window
		if set%50 == 0 {
			specs = append(specs, addedSpec{id: 99, content: long})
		}
		a := newAddedTokens(specs)
		for range 10 {
			text := word(r.IntN(80))
			if set%50 == 0 {
				// Matches across the windows' edges, and a near miss.
				text = strings.Repeat("ab", 32000) + long + text + long[:len(long)-1] + long + text
			}
			for _, special := range []bool{false, true} {
				var got, want []part
				a.split(text, special, func(seg string, id int, first bool) bool {
					got = append(got, part{seg, id, first})
					return true
				})
				a.referenceSplit(text, special, func(seg string, id int, first bool) {
					want = append(want, part{seg, id, first})
				})
				if !slices.Equal(got, want) {
					t.Fatalf("tokens %+v, special %v, text %.100q:\n got %.300v\nwant %.300v", specs, special, text, got, want)
				}
			}
		}
	}
}
