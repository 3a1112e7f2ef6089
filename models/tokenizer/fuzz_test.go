package tokenizer

import (
	"context"
	"errors"
	"os"
	"slices"
	"sync"
	"testing"
)

// The fuzz targets run with the unit tests on their seeds and on the
// crashers kept in testdata/fuzz; search beyond them with
//
//	go test -run='^$' -fuzz=FuzzEncode -fuzztime=2m ./models/tokenizer/
//	go test -run='^$' -fuzz=FuzzLoadTokenizerJSON -fuzztime=2m ./models/tokenizer/

// fuzzKinds are the tokenizers FuzzEncode tries every input on: each kind
// whose files are there (the WordPiece vocabulary is in the repository).
var fuzzKinds = sync.OnceValue(func() []testKind {
	var kinds []testKind
	if tok, err := ParseHFWordPiece(readOrNil("../../testdata/wordpiece/uncased/tokenizer.json")); err == nil {
		kinds = append(kinds, testKind{"wordpiece-uncased", tok})
	}
	for _, rt := range realTokenizers {
		if tok, err := rt.load(); err == nil {
			kinds = append(kinds, testKind{rt.name, tok})
		}
	}
	for _, fam := range hfFamilies {
		if tok, err := fam.load(); err == nil {
			kinds = append(kinds, testKind{fam.name, tok})
		}
	}
	return kinds
})

// FuzzEncode encodes arbitrary text with every kind of tokenizer: no
// panic, ids in range, the text back from Decode where the tokenizer
// promises it, the ids of the old quadratic encoders, and the bounded
// path agreeing with the unbounded one at and below the bound.
func FuzzEncode(f *testing.F) {
	for _, s := range boundedTexts() {
		f.Add(s, true, false)
	}
	f.Add("<|im_start|>user\n<think>x</think><|im_end|><start_of_turn>[CLS][SEP]<s></s>", false, true)
	f.Add("  \t\n\u00a0\u3000  ", true, true)
	// Loaded before fuzzing: a worker treats an input that takes 10 s,
	// as loading them all can, as a hang.
	kinds := fuzzKinds()
	f.Fuzz(func(t *testing.T, text string, bos, special bool) {
		if len(kinds) == 0 {
			t.Skip("no tokenizer files")
		}
		for _, k := range kinds {
			checkEncode(t, k, text, bos, special)
		}
	})
}

// referenceEncode is what the old encoders give.
func referenceEncode(tok Tokenizer, text string, bos, special bool) []int {
	switch tok := tok.(type) {
	case *SentencePiece:
		if special {
			return tok.referenceEncodeSpecial(text, bos)
		}
		return tok.referenceEncode(text, bos)
	case *BPE:
		return tok.referenceEncode(text, bos, special)
	case *WordPiece:
		return tok.referenceEncode(text, bos)
	}
	panic("no reference encoder")
}

// maxReferenceText is the longest text compared with the old encoders,
// which are quadratic.
const maxReferenceText = 4 << 10

func checkEncode(t *testing.T, k testKind, text string, bos, special bool) {
	ids := k.tok.Encode(text, bos)
	if special {
		ids = EncodeSpecial(k.tok, text, bos)
	}
	if len(text) <= maxReferenceText {
		if want := referenceEncode(k.tok, text, bos, special); !slices.Equal(ids, want) {
			t.Fatalf("%s: encoding %q (bos %v, special %v)\n got %v\nwant %v (the old encoder)", k.name, text, bos, special, ids, want)
		}
	}
	for i, id := range ids {
		if id < 0 || id >= k.tok.VocabSize() {
			t.Fatalf("%s: %q: ids[%d] = %d, out of range", k.name, text, i, id)
		}
	}
	if !special && roundTrips(k, text) {
		if got := k.tok.Decode(ids); got != text {
			t.Fatalf("%s: Decode(Encode(%q)) = %q", k.name, text, got)
		}
	}
	bounded := EncodeBounded
	if special {
		bounded = EncodeSpecialBounded
	}
	if got, err := bounded(context.Background(), k.tok, text, bos, len(ids)); err != nil || !slices.Equal(got, ids) {
		t.Fatalf("%s: %q with a bound of %d: %v, %v; want %v", k.name, text, len(ids), got, err, ids)
	}
	if len(ids) >= 2 {
		if got, err := bounded(context.Background(), k.tok, text, bos, len(ids)-1); !errors.Is(err, ErrTooLong) {
			t.Fatalf("%s: %q with a bound of %d for %d ids: %v, %v", k.name, text, len(ids)-1, len(ids), got, err)
		}
	}
}

// FuzzLoadTokenizerJSON loads arbitrary tokenizer.json bytes: no panic, no
// allocation beyond allocBound of the file's size (which the bounds on ids
// and counts guarantee, whatever the file says), and a tokenizer that
// loads encodes text into ids of its vocabulary, bounded or not alike.
func FuzzLoadTokenizerJSON(f *testing.F) {
	for _, seed := range tokenizerJSONSeeds {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var (
			tok Tokenizer
			err error
		)
		if n := allocated(func() { tok, err = loadHFBytes(data) }); n > allocBound(len(data)) {
			t.Fatalf("a %d-byte file allocated %d bytes", len(data), n)
		}
		if err != nil {
			return
		}
		for _, text := range []string{"", "Hello, world! 123 ab", "<s> </s> [CLS] <|x|>  \n\t é 中 😀 \xff"} {
			for _, special := range []bool{false, true} {
				ids := EncodeSpecial(tok, text, true)
				if !special {
					ids = tok.Encode(text, true)
				}
				for _, id := range ids {
					if id < 0 || id >= tok.VocabSize() {
						t.Fatalf("%q: id %d of %d", text, id, tok.VocabSize())
					}
				}
				tok.Decode(ids)
				DecodeSpecial(tok, ids)
				bounded := EncodeBounded
				if special {
					bounded = EncodeSpecialBounded
				}
				if got, err := bounded(context.Background(), tok, text, true, len(ids)); err != nil || !slices.Equal(got, ids) {
					t.Fatalf("%q with a bound of %d: %v, %v; want %v", text, len(ids), got, err, ids)
				}
			}
		}
	})
}

// tokenizerJSONSeeds are small tokenizer.json files that between them use
// every component the loader knows, for the fuzzer to mutate.
var tokenizerJSONSeeds = []string{
	string(hfJSON()),
	`{"model": {"type": "BPE", "vocab": {"Ġ": 0, "a": 1, "b": 2, "Ġa": 3, "ab": 4, "<|x|>": 5}, "merges": [["Ġ", "a"], ["a", "b"]]},
	  "added_tokens": [{"id": 5, "content": "<|x|>", "special": true, "lstrip": true, "rstrip": true}, {"id": 6, "content": "<t>"}],
	  "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Lowercase"}]},
	  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated"}, {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]},
	  "decoder": {"type": "ByteLevel"},
	  "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|x|>"}}, {"Sequence": {"id": "A"}}], "special_tokens": {"<|x|>": {"ids": [5]}}}}`,
	`{"model": {"type": "BPE", "byte_fallback": true, "fuse_unk": true, "unk_token": "<unk>", "vocab": {"<unk>": 0, "<0x41>": 1, "▁": 2, "a": 3, "▁a": 4}, "merges": ["▁ a"]},
	  "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}, {"type": "Strip", "strip_left": true}]},
	  "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": true},
	  "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
	  "post_processor": {"type": "BertProcessing", "cls": ["<unk>", 0], "sep": ["a", 3]}}`,
	`{"model": {"type": "BPE", "ignore_merges": true, "vocab": {"1": 0, "2": 1, "12": 2, "x": 3}, "merges": ["1 2"]},
	  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": false}, {"type": "Split", "pattern": {"String": "x"}, "behavior": "Removed", "invert": true}, {"type": "Split", "pattern": {"Regex": "\\p{N}+"}, "behavior": "Contiguous"}, {"type": "ByteLevel", "add_prefix_space": true}]},
	  "normalizer": {"type": "NFKD"}}`,
	`{"model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 100,
	   "vocab": {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4, "hello": 5, "##lo": 6, "hel": 7, ",": 8, "中": 9}},
	  "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": null, "lowercase": true},
	  "added_tokens": [{"id": 4, "content": "[MASK]", "special": true}]}`,
}

// readOrNil returns the contents of a file, or nil when it cannot be read
// (and then the tokenizer it holds is left out).
func readOrNil(path string) []byte {
	data, _ := os.ReadFile(path)
	return data
}
