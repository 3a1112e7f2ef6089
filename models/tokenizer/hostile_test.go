package tokenizer

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// Tokenizer files come from wherever a model was downloaded: every count,
// id and size in them is checked against the file itself before anything
// is allocated by it. Each hostile file below must be refused with an
// error that names what is wrong, or loaded, without allocating more than
// allocBound of its size (a token id of 2^40 used to make the loader ask
// for 17.6 TB).

// allocBound is the most a tokenizer file of n bytes may make its loader
// allocate, in all (garbage included): what the bounds on ids and counts
// are designed to guarantee.
func allocBound(n int) uint64 { return 64*uint64(n) + 16<<20 }

// allocated returns the bytes f allocates. Tests in this package do not
// run in parallel, so the process's total is f's.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// loadHFBytes loads a tokenizer.json as models.LoadTokenizer does: as
// WordPiece when its model says so, as BPE otherwise.
func loadHFBytes(data []byte) (Tokenizer, error) {
	if bytes.Contains(data, []byte(`"WordPiece"`)) {
		if wp, err := ParseHFWordPiece(data); err == nil || !strings.Contains(err.Error(), "is not WordPiece") {
			return wp, err
		}
	}
	return ParseHF(data, "", "", nil)
}

// hfJSON is a small valid BPE tokenizer.json with extra top-level fields
// spliced in (each "key": value, replacing the default of that key).
func hfJSON(fields ...string) []byte {
	defaults := map[string]string{
		`"model"`:        `{"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}`,
		`"added_tokens"`: `[{"id": 3, "content": "<s>", "special": true}]`,
	}
	for _, f := range fields {
		k, v, _ := strings.Cut(f, ":")
		defaults[strings.TrimSpace(k)] = v
	}
	var parts []string
	for k, v := range defaults {
		parts = append(parts, k+":"+v)
	}
	return []byte("{" + strings.Join(parts, ",") + "}")
}

// nested is a component Sequence nested depth deep around a leaf.
func nested(kind, list, leaf string, depth int) string {
	return strings.Repeat(`{"type": "Sequence", "`+list+`": [`, depth) + leaf + strings.Repeat("]}", depth)
}

// big builds a file of about n bytes from a head, repeated items and a
// tail.
func big(head string, item func(i int) string, sep, tail string, n int) []byte {
	var b strings.Builder
	b.WriteString(head)
	for i := 0; b.Len() < n; i++ {
		if i > 0 {
			b.WriteString(sep)
		}
		b.WriteString(item(i))
	}
	b.WriteString(tail)
	return []byte(b.String())
}

func TestHostileTokenizerJSON(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name    string
		data    []byte
		wantErr string // "" when the file loads
	}{
		{"valid", hfJSON(), ""},
		{"vocab id 2^40", hfJSON(`"model": {"type": "BPE", "vocab": {"a": 1099511627776}, "merges": []}`), `model.vocab: "a" has id 1099511627776, outside 0..1`},
		{"vocab id 2^63-1", hfJSON(`"model": {"type": "BPE", "vocab": {"a": 9223372036854775807}, "merges": []}`), "has id 9223372036854775807"},
		{"vocab id just past the entries", hfJSON(`"model": {"type": "BPE", "vocab": {"a": 0, "b": 3}, "merges": []}`), `"b" has id 3, outside 0..2 (the file has 3 entries)`},
		{"negative vocab id", hfJSON(`"model": {"type": "BPE", "vocab": {"a": -1}, "merges": []}`), `"a" has id -1`},
		{"duplicate vocab id", hfJSON(`"model": {"type": "BPE", "vocab": {"a": 0, "b": 0}, "merges": []}`), `model.vocab: "a" and "b" both have id 0`},
		{"added id 2^40", hfJSON(`"added_tokens": [{"id": 1099511627776, "content": "<s>"}]`), `added_tokens[0]: "<s>" has id 1099511627776`},
		{"negative added id", hfJSON(`"added_tokens": [{"id": -5, "content": "<s>"}]`), `added_tokens[0]: "<s>" has id -5`},
		{"duplicate added id", hfJSON(`"added_tokens": [{"id": 3, "content": "<s>"}, {"id": 3, "content": "</s>"}]`), `added_tokens[1]: "</s>" has id 3, which an earlier`},
		{"added token repeating a vocabulary id", hfJSON(`"added_tokens": [{"id": 2, "content": "ab"}]`), ""},
		{"gap left by a repeated id", hfJSON(`"added_tokens": [{"id": 2, "content": "ab"}, {"id": 4, "content": "<s>"}]`), ""},
		{"id too large to be an int", hfJSON(`"model": {"type": "BPE", "vocab": {"a": 1e40}, "merges": []}`), "tokenizer.json"},
		{"post-processor id 2^40", hfJSON(`"post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>"}}, {"Sequence": {}}], "special_tokens": {"<s>": {"ids": [1099511627776]}}}`), "post_processor: id 1099511627776 is outside the vocabulary of 4"},
		{"post-processor negative id", hfJSON(`"post_processor": {"type": "TemplateProcessing", "single": [{"Sequence": {}}, {"SpecialToken": {"id": "<s>"}}], "special_tokens": {"<s>": {"ids": [-3]}}}`), "post_processor: id -3"},
		{"post-processor multiplying ids", hfJSON(`"post_processor": {"type": "TemplateProcessing", "single": [` + strings.Repeat(`{"SpecialToken": {"id": "x"}},`, 1000) + `{"Sequence": {}}], "special_tokens": {"x": {"ids": [` + strings.Repeat("3,", 999) + `3]}}}`), "more than 64 ids"},
		{"Bert post-processor id 1e300", hfJSON(`"post_processor": {"type": "BertProcessing", "cls": ["<s>", 1e300], "sep": ["<s>", 3]}`), "post_processor: id"},
		{"normalizers nested 4000 deep", hfJSON(`"normalizer": ` + nested("normalizer", "normalizers", `{"type": "NFC"}`, 4000)), "normalizer: Sequences nested more than 8 deep"},
		{"decoders nested 4000 deep", hfJSON(`"decoder": ` + nested("decoder", "decoders", `{"type": "Fuse"}`, 4000)), "decoder: Sequences nested more than 8 deep"},
		{"pre-tokenizers nested 4000 deep", hfJSON(`"pre_tokenizer": ` + nested("pre", "pretokenizers", `{"type": "Digits"}`, 4000)), "pre_tokenizer: Sequences nested more than 8 deep"},
		{"post-processors nested 4000 deep", hfJSON(`"post_processor": ` + nested("post", "processors", `{"type": "ByteLevel"}`, 4000)), "post_processor: Sequences nested more than 8 deep"},
		{"nested within the limit", hfJSON(`"normalizer": ` + nested("normalizer", "normalizers", `{"type": "NFC"}`, 8)), ""},
		{"bad regex", hfJSON(`"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(("}, "behavior": "Isolated"}`), "pattern"},
		{"merges of the wrong shape", hfJSON(`"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2}, "merges": [["a", 1]]}`), "merges"},
		{"WordPiece id 2^40", []byte(`{"model": {"type": "WordPiece", "vocab": {"[CLS]": 0, "[SEP]": 1, "[UNK]": 1099511627776}}}`), `model.vocab: "[UNK]" has id 1099511627776, outside 0..2`},
		{"WordPiece duplicate id", []byte(`{"model": {"type": "WordPiece", "vocab": {"[CLS]": 0, "[SEP]": 1, "[UNK]": 1}}}`), "both have id 1"},
		{"WordPiece huge max_input_chars_per_word", []byte(`{"model": {"type": "WordPiece", "max_input_chars_per_word": 1099511627776, "vocab": {"[CLS]": 0, "[SEP]": 1, "[UNK]": 2, "a": 3}}}`), ""},
		// A mebibyte of small entries: allocation in proportion to the file.
		{"1 MiB of vocabulary", big(`{"model": {"type": "BPE", "merges": [], "vocab": {`, func(i int) string { return fmt.Sprintf(`"%x": %d`, i, i) }, ",", "}}}", mib), ""},
		{"1 MiB of added tokens", big(`{"model": {"type": "BPE", "vocab": {}, "merges": []}, "added_tokens": [`, func(i int) string { return fmt.Sprintf(`{"id": %d, "content": "%x"}`, i, i) }, ",", "]}", mib), ""},
		{"one added token of 1 MiB", hfJSON(`"added_tokens": [{"id": 3, "content": "` + strings.Repeat("ab", mib/2) + `"}]`), ""},
		{"1 MiB of merges", big(`{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [`, func(int) string { return `"a b"` }, ",", "]}}", mib), ""},
		{"1 MiB of merge pairs", big(`{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [`, func(int) string { return `["a","b"]` }, ",", "]}}", mib), ""},
		{"1 MiB of post-processor ids", big(`{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "x"}}], "special_tokens": {"x": {"ids": [`, func(int) string { return "0" }, ",", "]}}}}", mib), "more than 64 ids"},
	}
	for _, tt := range tests {
		var (
			tok Tokenizer
			err error
		)
		n := allocated(func() { tok, err = loadHFBytes(tt.data) })
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: error %v, want one mentioning %q", tt.name, err, tt.wantErr)
		}
		if limit := allocBound(len(tt.data)); n > limit {
			t.Errorf("%s: a %d-byte file allocated %d bytes, more than %d", tt.name, len(tt.data), n, limit)
		}
		if err == nil {
			// Whatever loads must encode, and quickly: a long word is cut
			// with lookups no longer than the longest piece.
			text := strings.Repeat("ab", 1<<15) + " <s> b"
			for _, id := range tok.Encode(text, true) {
				if id < 0 || id >= tok.VocabSize() {
					t.Errorf("%s: Encode gave id %d of %d", tt.name, id, tok.VocabSize())
				}
			}
		}
	}
}

// A generation_config.json naming many end ids used to cost a pass over
// the vocabulary for each: quadratic in the files.
func TestHostileGenerationConfig(t *testing.T) {
	const n = 100000
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString(`{"model": {"type": "BPE", "merges": [], "vocab": {`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"%x": %d`, i, i)
	}
	b.WriteString("}}}")
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ids := big(`{"eos_token_id": [`, func(i int) string { return fmt.Sprint(i) }, ",", "]}", 7*n)
	if err := os.WriteFile(filepath.Join(dir, "generation_config.json"), ids, 0o644); err != nil {
		t.Fatal(err)
	}
	tok, err := LoadHF(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(tok.Ends()); got != n {
		t.Errorf("%d end ids, want %d (ids past the vocabulary left out)", got, n)
	}
}

func TestHostileModelProto(t *testing.T) {
	const mib = 1 << 20
	hugeLen := protowire.AppendVarint(protowire.AppendTag(nil, modelPieces, protowire.BytesType), 1<<40)
	tests := []struct {
		name    string
		data    []byte
		wantErr string
	}{
		{"valid", modelProto(basicProtoPieces, nil), ""},
		{"piece of length 2^40", append(hugeLen, 'x'), "model proto"},
		{"bos id 2^31-1", modelProto(basicProtoPieces, map[protowire.Number]int64{trainerBOSID: 1<<31 - 1}), "bos id 2147483647 out of range"},
		{"unk id 2^40, which int32 wraps", modelProto(basicProtoPieces, map[protowire.Number]int64{trainerUnkID: 1<<40 + 3}), ""},
		{"eos id past the pieces", modelProto(basicProtoPieces, map[protowire.Number]int64{trainerEOSID: 5}), "eos id 5 out of range"},
		{"piece type 2^40", modelProto(append(basicProtoPieces, pieceMsg("x", 0, 1<<40)), nil), "invalid type"},
		{"varint of 11 bytes", []byte{0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, "model proto"},
		{"empty piece", modelProto(append(basicProtoPieces, pieceMsg("", 0, 1)), nil), "piece 5 is empty"},
		{"1 MiB of empty pieces", big("", func(int) string { return "\x0a\x00" }, "", "", mib), "piece 0 is empty"},
		{"1 MiB of one-byte pieces", big("", func(i int) string { return "\x0a\x03\x0a\x01" + string(rune('a'+i%26)) }, "", "", mib), ""},
		{"one piece of 1 MiB", modelProto(append(basicProtoPieces, pieceMsg(strings.Repeat("a", mib), 0, int64(TypeUserDefined))), nil), ""},
	}
	for _, tt := range tests {
		var err error
		n := allocated(func() {
			var tok *SentencePiece
			if tok, err = ParseModelProto(tt.data); err == nil {
				tok.Encode(strings.Repeat("ab ", 1<<14), true)
			}
		})
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: error %v, want one mentioning %q", tt.name, err, tt.wantErr)
		}
		if limit := allocBound(len(tt.data)); n > limit {
			t.Errorf("%s: a %d-byte file allocated %d bytes, more than %d", tt.name, len(tt.data), n, limit)
		}
	}
}

func TestHostileLlama2c(t *testing.T) {
	header := func(maxLen int32) []byte { return binary.LittleEndian.AppendUint32(nil, uint32(maxLen)) }
	token := func(score float32, n int32, piece string) []byte {
		b := binary.LittleEndian.AppendUint32(nil, 0)
		b = binary.LittleEndian.AppendUint32(b, uint32(n))
		return append(b, piece...)
	}
	valid := llama2cFile(6, basicPieces, nil)
	many := append(header(4), bytes.Repeat(token(0, 1, "a"), (1<<20)/9)...)
	tests := []struct {
		name      string
		data      []byte
		vocabSize int // 0: count the tokens, as LoadLlama2cFile does
		wantErr   string
	}{
		{"valid", valid, 5, ""},
		{"vocab size 2^40 in the model header", valid, 1 << 40, "token 5 of 1099511627776: unexpected EOF"},
		{"max_token_length 2^31-1", append(header(1<<31-1), token(0, 1, "a")...), 0, "max_token_length 2147483647 out of range"},
		{"token length 2^31-1", append(header(16), token(0, 1<<31-1, "a")...), 0, "length 2147483647"},
		{"negative token length", append(header(16), token(0, -1, "a")...), 0, "length -1"},
		{"1 MiB of one-byte tokens", many, 0, ""},
	}
	for _, tt := range tests {
		var err error
		n := allocated(func() {
			path := filepath.Join(t.TempDir(), "tokenizer.bin")
			if err = os.WriteFile(path, tt.data, 0o644); err != nil {
				t.Fatal(err)
			}
			var tok *SentencePiece
			if tt.vocabSize == 0 {
				tok, err = LoadLlama2cFile(path)
			} else {
				tok, err = LoadLlama2c(path, tt.vocabSize)
			}
			if err == nil {
				tok.Encode(strings.Repeat("ab ", 1<<14), true)
			}
		})
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: error %v, want one mentioning %q", tt.name, err, tt.wantErr)
		}
		if limit := allocBound(len(tt.data)); n > limit {
			t.Errorf("%s: a %d-byte file allocated %d bytes, more than %d", tt.name, len(tt.data), n, limit)
		}
	}
}
