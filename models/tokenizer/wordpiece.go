package tokenizer

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// WordPiece is BERT's tokenizer: the text is normalised (control
// characters dropped, whitespace made spaces, CJK ideographs set apart,
// accents stripped, lower-cased, as the options say), split at whitespace
// and around punctuation, and each word cut greedily into the longest
// pieces of the vocabulary from its start, the pieces after the first
// being continuations ("##ing"); a word that cannot be cut, or longer than
// MaxChars characters, becomes [UNK]. Encode with addBOS wraps the ids in
// [CLS] … [SEP]; EncodePair makes a reranker's pair.
//
// Vocabularies come from a tokenizer.json (ParseHFWordPiece) or from GGUF
// (NewGGUFWordPiece), where llama.cpp's converter stores word-initial
// pieces behind "▁" and continuations bare.
type WordPiece struct {
	pieces  []string       // as in the file
	words   map[string]int // word-initial pieces
	conts   map[string]int // continuation pieces, without their prefix
	special []string       // special tokens matched in the text, longest first
	ids     map[string]int // special tokens' ids
	cls     int
	sep     int
	unk     int
	opts    WordPieceOptions
}

// WordPieceOptions are BertNormalizer's options and WordPiece's limit.
type WordPieceOptions struct {
	Lowercase    bool
	StripAccents bool // NFD, then combining marks dropped
	ChineseChars bool // CJK ideographs become words of their own
	CleanText    bool // control characters dropped, whitespace made ' '
	MaxChars     int  // longer words become [UNK] (default 100)
}

// BertUncased is bert-base-uncased's normalisation (all-MiniLM, bge,
// nomic-embed-text), which GGUF files do not record and llama.cpp applies.
var BertUncased = WordPieceOptions{Lowercase: true, StripAccents: true, ChineseChars: true, CleanText: true, MaxChars: 100}

// NewWordPiece builds the tokenizer over pieces (continuation pieces
// beginning with prefix, "##"), with the named special tokens.
func NewWordPiece(pieces []string, prefix string, cls, sep, unk string, specials []string, opts WordPieceOptions) (*WordPiece, error) {
	t := &WordPiece{pieces: pieces, words: map[string]int{}, conts: map[string]int{}, ids: map[string]int{}, opts: opts}
	if t.opts.MaxChars <= 0 {
		t.opts.MaxChars = 100
	}
	for id, p := range pieces {
		if rest, ok := strings.CutPrefix(p, prefix); ok && prefix != "" && rest != "" {
			if _, dup := t.conts[rest]; !dup {
				t.conts[rest] = id
			}
		} else if _, dup := t.words[p]; !dup {
			t.words[p] = id
		}
	}
	find := func(name string) (int, error) {
		if id, ok := t.words[name]; ok {
			return id, nil
		}
		return -1, fmt.Errorf("tokenizer: wordpiece vocabulary has no %s", name)
	}
	var err error
	if t.cls, err = find(cls); err != nil {
		return nil, err
	}
	if t.sep, err = find(sep); err != nil {
		return nil, err
	}
	if t.unk, err = find(unk); err != nil {
		return nil, err
	}
	for _, s := range append([]string{cls, sep, unk}, specials...) {
		if id, ok := t.words[s]; ok && s != "" && !slices.Contains(t.special, s) {
			t.special = append(t.special, s)
			t.ids[s] = id
		}
	}
	slices.SortFunc(t.special, func(a, b string) int { return len(b) - len(a) })
	return t, nil
}

// NewGGUFWordPiece builds the tokenizer from GGUF's tokenizer.ggml.tokens
// of a bert vocabulary: "▁word" is a word-initial piece, "[X]" a special
// or unused entry, anything else a continuation. types marks control
// tokens (matched in the text as specials); the ids name [CLS], [SEP] and
// [UNK].
func NewGGUFWordPiece(tokens []string, types []int32, cls, sep, unk int) (*WordPiece, error) {
	pieces := make([]string, len(tokens))
	var specials []string
	for i, p := range tokens {
		switch {
		case strings.HasPrefix(p, "▁"):
			pieces[i] = strings.TrimPrefix(p, "▁")
		case strings.HasPrefix(p, "[") && strings.HasSuffix(p, "]"):
			pieces[i] = p
			if i < len(types) && TokenType(types[i]) == TypeControl {
				specials = append(specials, p)
			}
		default:
			pieces[i] = "##" + p
		}
	}
	name := func(id int) string {
		if id >= 0 && id < len(pieces) {
			return pieces[id]
		}
		return ""
	}
	t, err := NewWordPiece(pieces, "##", name(cls), name(sep), name(unk), specials, BertUncased)
	if err != nil {
		return nil, err
	}
	t.pieces = tokens
	return t, nil
}

// ParseHFWordPiece reads a tokenizer.json whose model is WordPiece, with
// its BertNormalizer options (strip_accents null following lowercase, as
// in Hugging Face tokenizers) and its special added tokens.
func ParseHFWordPiece(data []byte) (*WordPiece, error) {
	var f struct {
		Model struct {
			Type     string         `json:"type"`
			Vocab    map[string]int `json:"vocab"`
			Unk      string         `json:"unk_token"`
			Prefix   string         `json:"continuing_subword_prefix"`
			MaxChars int            `json:"max_input_chars_per_word"`
		} `json:"model"`
		Normalizer *struct {
			Type         string `json:"type"`
			Clean        bool   `json:"clean_text"`
			Chinese      bool   `json:"handle_chinese_chars"`
			StripAccents *bool  `json:"strip_accents"`
			Lowercase    bool   `json:"lowercase"`
		} `json:"normalizer"`
		Added []struct {
			Content string `json:"content"`
			Special bool   `json:"special"`
		} `json:"added_tokens"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if f.Model.Type != "WordPiece" {
		return nil, fmt.Errorf("tokenizer: model %q is not WordPiece", f.Model.Type)
	}
	pieces := make([]string, len(f.Model.Vocab))
	for p, id := range f.Model.Vocab {
		if id < 0 || id >= len(pieces) || pieces[id] != "" {
			return nil, fmt.Errorf("tokenizer: wordpiece ids are not 0..%d", len(pieces)-1)
		}
		pieces[id] = p
	}
	opts := WordPieceOptions{MaxChars: f.Model.MaxChars}
	if n := f.Normalizer; n != nil {
		if n.Type != "BertNormalizer" {
			return nil, fmt.Errorf("tokenizer: normalizer %q is not supported with WordPiece", n.Type)
		}
		opts.CleanText, opts.ChineseChars, opts.Lowercase = n.Clean, n.Chinese, n.Lowercase
		opts.StripAccents = n.Lowercase
		if n.StripAccents != nil {
			opts.StripAccents = *n.StripAccents
		}
	}
	var specials []string
	for _, a := range f.Added {
		if a.Special {
			specials = append(specials, a.Content)
		}
	}
	prefix := f.Model.Prefix
	if prefix == "" {
		prefix = "##"
	}
	unk := f.Model.Unk
	if unk == "" {
		unk = "[UNK]"
	}
	return NewWordPiece(pieces, prefix, "[CLS]", "[SEP]", unk, specials, opts)
}

// Encode returns the ids of text, wrapped in [CLS] … [SEP] when addBOS is
// set.
func (t *WordPiece) Encode(text string, addBOS bool) []int {
	ids := t.encode(text, nil)
	if addBOS {
		ids = append(append([]int{t.cls}, ids...), t.sep)
	}
	return ids
}

// EncodePair returns the ids of [CLS] a [SEP] b [SEP] and their token
// types: 0 up to the first [SEP], 1 after it.
func (t *WordPiece) EncodePair(a, b string) (ids, types []int) {
	ids = append([]int{t.cls}, t.encode(a, nil)...)
	ids = append(ids, t.sep)
	first := len(ids)
	ids = append(t.encode(b, ids), t.sep)
	types = make([]int, len(ids))
	for i := first; i < len(types); i++ {
		types[i] = 1
	}
	return ids, types
}

// encode appends the ids of text to ids: special tokens in the text stay
// themselves, the rest is normalised, split and cut into pieces.
func (t *WordPiece) encode(text string, ids []int) []int {
	for text != "" {
		at, tok := len(text), ""
		for _, s := range t.special {
			if i := strings.Index(text, s); i >= 0 && (i < at || i == at && len(s) > len(tok)) {
				at, tok = i, s
			}
		}
		for _, w := range t.words_(t.normalize(text[:at])) {
			ids = t.piece(w, ids)
		}
		if tok == "" {
			break
		}
		ids = append(ids, t.ids[tok])
		text = text[at+len(tok):]
	}
	return ids
}

// normalize applies BertNormalizer's steps in its order: clean, CJK,
// accents, lower case.
func (t *WordPiece) normalize(s string) string {
	o := t.opts
	var b strings.Builder
	for _, r := range s {
		switch {
		case o.CleanText && (r == 0 || r == utf8.RuneError || isControl(r)):
			continue
		case o.CleanText && isWhitespace(r):
			b.WriteByte(' ')
		case o.ChineseChars && isCJK(r):
			b.WriteByte(' ')
			b.WriteRune(r)
			b.WriteByte(' ')
		default:
			b.WriteRune(r)
		}
	}
	s = b.String()
	if o.StripAccents {
		s = norm.NFD.String(s)
		s = strings.Map(func(r rune) rune {
			if unicode.Is(unicode.Mn, r) {
				return -1
			}
			return r
		}, s)
	}
	if o.Lowercase {
		s = lower(s)
	}
	return s
}

// lower lower-cases as Rust's str::to_lowercase does: rune by rune, with
// Unicode's one unconditional expansion (İ to i and a combining dot).
func lower(s string) string {
	if !strings.ContainsRune(s, 'İ') {
		return strings.ToLower(s)
	}
	return strings.ToLower(strings.ReplaceAll(s, "İ", "i\u0307"))
}

// words_ splits normalised text as BertPreTokenizer does: at whitespace,
// and each punctuation character a word of its own.
func (t *WordPiece) words_(s string) []string {
	var words []string
	start := -1
	for i, r := range s {
		switch {
		case isWhitespace(r):
			if start >= 0 {
				words = append(words, s[start:i])
			}
			start = -1
		case isPunct(r):
			if start >= 0 {
				words = append(words, s[start:i])
			}
			words = append(words, string(r))
			start = -1
		default:
			if start < 0 {
				start = i
			}
		}
	}
	if start >= 0 {
		words = append(words, s[start:])
	}
	return words
}

// piece appends the ids of word's pieces, longest first from the start,
// or [UNK] for a word that cannot be cut or is too long.
func (t *WordPiece) piece(word string, ids []int) []int {
	if utf8.RuneCountInString(word) > t.opts.MaxChars {
		return append(ids, t.unk)
	}
	n := len(ids)
	for start := 0; start < len(word); {
		vocab := t.words
		if start > 0 {
			vocab = t.conts
		}
		end, id := len(word), -1
		for ; end > start; end-- {
			if end < len(word) && !utf8.RuneStart(word[end]) {
				continue // not at a character boundary
			}
			if v, ok := vocab[word[start:end]]; ok {
				id = v
				break
			}
		}
		if id < 0 {
			return append(ids[:n], t.unk)
		}
		ids = append(ids, id)
		start = end
	}
	return ids
}

func isWhitespace(r rune) bool {
	return r == '\t' || r == '\n' || r == '\r' || unicode.Is(unicode.White_Space, r)
}

// isControl is Unicode's "other" categories (Cc, Cf, Co, Cs) but for tab
// and line ends, which are whitespace.
func isControl(r rune) bool {
	if r == '\t' || r == '\n' || r == '\r' {
		return false
	}
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs)
}

// isPunct is BERT's punctuation: every ASCII symbol, and Unicode's P
// categories.
func isPunct(r rune) bool {
	if r < 0x80 {
		return r > ' ' && r < 0x7f && !('0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z')
	}
	return unicode.IsPunct(r)
}

// isCJK reports the CJK Unified Ideographs blocks BERT sets apart.
func isCJK(r rune) bool {
	return 0x4E00 <= r && r <= 0x9FFF || 0x3400 <= r && r <= 0x4DBF || 0x20000 <= r && r <= 0x2A6DF ||
		0x2A700 <= r && r <= 0x2B73F || 0x2B740 <= r && r <= 0x2B81F || 0x2B820 <= r && r <= 0x2CEAF ||
		0xF900 <= r && r <= 0xFAFF || 0x2F800 <= r && r <= 0x2FA1F
}

// TokenBytes is the text of id after prev: a continuation joins the word,
// a word-initial piece follows a space (but at the start, or after a
// special token), special tokens have none.
func (t *WordPiece) TokenBytes(prev, id int) []byte {
	if id < 0 || id >= len(t.pieces) || t.isSpecial(id) {
		return nil
	}
	p := t.pieces[id]
	if cont, ok := t.contOf(id); ok {
		return []byte(cont)
	}
	p = strings.TrimPrefix(p, "▁")
	if prev < 0 || t.isSpecial(prev) {
		return []byte(p)
	}
	return []byte(" " + p)
}

func (t *WordPiece) contOf(id int) (string, bool) {
	p := t.pieces[id]
	if strings.HasPrefix(p, "##") && len(p) > 2 {
		return p[2:], true
	}
	if !strings.HasPrefix(p, "▁") && !(strings.HasPrefix(p, "[") && strings.HasSuffix(p, "]")) {
		if v, ok := t.conts[p]; ok && v == id {
			return p, true // a GGUF continuation
		}
	}
	return "", false
}

func (t *WordPiece) isSpecial(id int) bool {
	for _, v := range t.ids {
		if v == id {
			return true
		}
	}
	return false
}

// Decode returns the text of ids, special tokens left out.
func (t *WordPiece) Decode(ids []int) string {
	var b []byte
	prev := -1
	for _, id := range ids {
		b = append(b, t.TokenBytes(prev, id)...)
		prev = id
	}
	return string(b)
}

func (t *WordPiece) VocabSize() int { return len(t.pieces) }
func (t *WordPiece) BOS() int       { return t.cls }
func (t *WordPiece) EOS() int       { return t.sep }

func (t *WordPiece) Piece(id int) string {
	if id < 0 || id >= len(t.pieces) {
		return ""
	}
	return t.pieces[id]
}

// LoadHFWordPiece reads the tokenizer.json at path (or in the folder path)
// when its model is WordPiece; ok is false, with no error, for any other
// model, which LoadHF reads.
func LoadHFWordPiece(path string) (t *WordPiece, ok bool, err error) {
	file := path
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		file = filepath.Join(path, "tokenizer.json")
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, false, fmt.Errorf("tokenizer: %w", err)
	}
	var head struct {
		Model struct {
			Type string `json:"type"`
		} `json:"model"`
	}
	if json.Unmarshal(data, &head) != nil || head.Model.Type != "WordPiece" {
		return nil, false, nil
	}
	t, err = ParseHFWordPiece(data)
	if err != nil {
		return nil, true, fmt.Errorf("%w (reading %s)", err, file)
	}
	return t, true, nil
}
