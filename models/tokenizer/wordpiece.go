package tokenizer

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
	pieces    []string       // as in the file
	words     map[string]int // word-initial pieces
	conts     map[string]int // continuation pieces, without their prefix
	longest   int            // bytes of the longest key of words or conts
	special   *addedTokens   // special tokens matched in the text
	isSpecial map[int]bool   // their ids
	cls       int
	sep       int
	unk       int
	opts      WordPieceOptions
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
	t := &WordPiece{pieces: pieces, words: map[string]int{}, conts: map[string]int{}, isSpecial: map[int]bool{}, longest: 1, opts: opts}
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
		t.longest = max(t.longest, len(p))
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
	var specs []addedSpec
	for _, s := range append([]string{cls, sep, unk}, specials...) {
		if id, ok := t.words[s]; ok && s != "" && !t.isSpecial[id] {
			specs = append(specs, addedSpec{id: id, content: s, special: true})
			t.isSpecial[id] = true
		}
	}
	t.special = newAddedTokens(specs)
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
	// The ids must be 0..n-1, each once: checked before anything is
	// allocated by them, so a hostile id cannot size an allocation.
	pieces := make([]string, len(f.Model.Vocab))
	taken := make([]bool, len(pieces))
	for p, id := range f.Model.Vocab {
		if id < 0 || id >= len(pieces) {
			return nil, fmt.Errorf("tokenizer: tokenizer.json: model.vocab: %q has id %d, outside 0..%d", p, id, len(pieces)-1)
		}
		if taken[id] {
			return nil, fmt.Errorf("tokenizer: tokenizer.json: model.vocab: %q and %q both have id %d", pieces[id], p, id)
		}
		pieces[id], taken[id] = p, true
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
	return t.encodeBounded(&limit{}, text, addBOS, false)
}

// encodeBounded is Encode within l. Special tokens are always matched, so
// special changes nothing.
func (t *WordPiece) encodeBounded(l *limit, text string, addBOS, _ bool) []int {
	ids := make([]int, 0, idsCap(len(text), l))
	after := 0
	if addBOS {
		ids, after = append(ids, t.cls), 1
	}
	ids = t.encode(l, text, ids, after)
	if addBOS && ids != nil {
		ids = append(ids, t.sep)
	}
	if l.err != nil || !l.fits(len(ids)) {
		return nil
	}
	return ids
}

// EncodePair returns the ids of [CLS] a [SEP] b [SEP] and their token
// types: 0 up to the first [SEP], 1 after it.
func (t *WordPiece) EncodePair(a, b string) (ids, types []int) {
	var l limit
	ids = append([]int{t.cls}, t.encode(&l, a, nil, 0)...)
	ids = append(ids, t.sep)
	first := len(ids)
	ids = append(t.encode(&l, b, ids, 0), t.sep)
	types = make([]int, len(ids))
	for i := first; i < len(types); i++ {
		types[i] = 1
	}
	return ids, types
}

// encode appends the ids of text to ids within l, with after ids still to
// come: special tokens in the text stay themselves, the rest is
// normalised, split and cut into pieces.
func (t *WordPiece) encode(l *limit, text string, ids []int, after int) []int {
	t.special.split(text, true, func(seg string, id int, _ bool) bool {
		if id >= 0 {
			ids = append(ids, id)
			return l.step() && l.fits(len(ids)+after)
		}
		ids = t.encodeText(l, ids, seg, after)
		return l.err == nil
	})
	if l.err != nil {
		return nil
	}
	return ids
}

// wordPieceChunk is about how much text encodeText normalizes at a time.
const wordPieceChunk = 4 << 10

// encodeText encodes text without special tokens. The text is normalized a
// chunk at a time, cut where normalizing cannot join or move characters
// across the cut, so a bounded encoding reads no more of a long text than
// it needs and the ids are those of the whole text.
func (t *WordPiece) encodeText(l *limit, ids []int, s string, after int) []int {
	for start := 0; start < len(s); {
		if !l.step() {
			return nil
		}
		end := t.chunkEnd(s, start)
		ok := t.eachWord(t.normalize(s[start:end]), func(w string) bool {
			if !l.step() {
				return false
			}
			ids = t.piece(w, ids)
			return l.fits(len(ids) + after)
		})
		if !ok {
			return nil
		}
		start = end
	}
	return ids
}

// chunkEnd returns where the chunk of s from start ends: before the first
// character, wordPieceChunk bytes on or later, that always begins a word
// and that normalizing keeps as it is, or at the end of s. Those are the
// ASCII spaces and line ends (not \v or \f, which CleanText drops), ASCII
// punctuation and, when they are set apart, CJK ideographs: each has
// canonical combining class 0, so NFD reorders nothing across it.
func (t *WordPiece) chunkEnd(s string, start int) int {
	for i := start + wordPieceChunk; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			return i
		case c < utf8.RuneSelf:
			if isPunct(rune(c)) {
				return i
			}
		case t.opts.ChineseChars && utf8.RuneStart(c):
			if r, _ := utf8.DecodeRuneInString(s[i:]); isCJK(r) {
				return i
			}
		}
	}
	return len(s)
}

// normalize applies BertNormalizer's steps in its order: clean, CJK,
// accents, lower case.
func (t *WordPiece) normalize(s string) string {
	o := t.opts
	if isASCII(s) {
		return t.normalizeASCII(s)
	}
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

// normalizeASCII is normalize for ASCII text, where NFD and accents
// change nothing and lower-casing is A-Z: a long text of ASCII, the
// common case, is read once.
func (t *WordPiece) normalizeASCII(s string) string {
	o := t.opts
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case o.CleanText && (c < ' ' || c == 0x7f) && c != '\t' && c != '\n' && c != '\r':
			continue // NUL and the other controls (isControl's ASCII part)
		case o.CleanText && (c == '\t' || c == '\n' || c == '\r'):
			c = ' '
		case o.Lowercase && 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	return string(b)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// lower lower-cases as Rust's str::to_lowercase does: rune by rune, with
// Unicode's one unconditional expansion (İ to i and a combining dot).
func lower(s string) string {
	if !strings.ContainsRune(s, 'İ') {
		return strings.ToLower(s)
	}
	return strings.ToLower(strings.ReplaceAll(s, "İ", "i\u0307"))
}

// eachWord calls yield with the words of normalised text as
// BertPreTokenizer splits it: at whitespace, and each punctuation
// character a word of its own. It stops, returning false, when yield does.
func (t *WordPiece) eachWord(s string, yield func(string) bool) bool {
	start := -1
	for i, r := range s {
		switch {
		case isWhitespace(r):
			if start >= 0 && !yield(s[start:i]) {
				return false
			}
			start = -1
		case isPunct(r):
			if start >= 0 && !yield(s[start:i]) {
				return false
			}
			if !yield(s[i : i+utf8.RuneLen(r)]) {
				return false
			}
			start = -1
		default:
			if start < 0 {
				start = i
			}
		}
	}
	return start < 0 || yield(s[start:])
}

// piece appends the ids of word's pieces, longest first from the start,
// or [UNK] for a word that cannot be cut or is too long. No piece is longer
// than t.longest, so no longer candidate is looked up: a word costs
// O(len × longest), even with a tokenizer.json whose
// max_input_chars_per_word is huge.
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
		end, id := min(len(word), start+t.longest), -1
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
	if r < utf8.RuneSelf {
		return r == ' ' || '\t' <= r && r <= '\r' // White_Space's ASCII part
	}
	return unicode.Is(unicode.White_Space, r)
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
	if id < 0 || id >= len(t.pieces) || t.isSpecial[id] {
		return nil
	}
	p := t.pieces[id]
	if cont, ok := t.contOf(id); ok {
		return []byte(cont)
	}
	p = strings.TrimPrefix(p, "▁")
	if prev < 0 || t.isSpecial[prev] {
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
