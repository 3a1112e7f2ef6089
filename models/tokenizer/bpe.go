package tokenizer

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// BPE is a byte-pair-encoding tokenizer in the style of Hugging Face's
// tokenizers library: text is split on added tokens, normalized, split
// into words by pre-tokenizers, and each word is merged from characters by
// ranked merges. Two families share it:
//
//   - byte-level BPE (GPT-2, Llama 3, Qwen): words are raw bytes, written in
//     GPT-2's byte alphabet, so every text is encodable and a token may hold
//     part of a UTF-8 character;
//   - SentencePiece-style BPE (Gemma): words are Unicode characters, spaces
//     are written "▁", and characters without a piece fall back to <0xNN>
//     byte tokens.
//
// It loads from tokenizer.json (LoadHF) or from GGUF's "gpt2" vocabularies
// (NewGGUFBPE). A BPE is immutable after construction and safe for
// concurrent use.
type BPE struct {
	pieces []string    // as stored, for Piece
	types  []TokenType // Control: special added tokens; UserDefined: other added tokens
	text   [][]byte    // what each id writes; for Control tokens their content, which only DecodeSpecial shows

	vocab  map[string]int32 // the model's pieces (not added tokens) → id
	merges map[uint64]merge // pair of ids → its rank and product

	byteLevel    bool
	byteSym      [256]int32 // byte-level: the id of each byte's character, -1 if missing
	byteFallback bool
	byteID       [256]int32 // <0xNN> pieces, -1 if missing
	unk          int
	fuseUnk      bool
	ignoreMerges bool
	// longest bounds the bytes of a word one id stands for (see minTokens):
	// the longest piece of the model's vocabulary, and at least 4 for an
	// unknown character; 0 when bytes may vanish or unknown tokens fuse.
	// shrink is maxShrink of the normalizers and pre-tokenizers.
	longest int
	shrink  int

	normalizers []normalizer
	pre         []preTokenizer
	added       *addedTokens

	bos, eos       int
	prefix, suffix []int // what Encode adds around the text when asked to
	ends           []int
	stripStart     int // leading spaces the decoder drops from the first token

	cache wordCache
}

var (
	_ Tokenizer      = (*BPE)(nil)
	_ SpecialEncoder = (*BPE)(nil)
	_ SpecialDecoder = (*BPE)(nil)
	_ EndChecker     = (*BPE)(nil)
)

// merge is one entry of the merge table.
type merge struct{ rank, id int32 }

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// bpeSpec is what a file says about a BPE tokenizer, in the form both
// loaders can produce.
type bpeSpec struct {
	pieces  []string
	types   []TokenType // nil: all normal
	merges  [][2]string
	added   []addedSpec // added tokens, matched in text before anything else
	inModel []bool      // per id: part of the model's vocabulary (nil: all but added tokens)

	byteLevel    bool
	byteFallback bool
	unk          int
	fuseUnk      bool
	ignoreMerges bool
	normalizers  []normalizer
	pre          []preTokenizer

	decodeSpaceMark bool // the decoder writes ▁ as a space
	stripStart      int

	bos, eos       int
	prefix, suffix []int
	ends           []int // end-of-generation ids besides eos
}

// addedSpec is an added token: a string matched verbatim in the text.
type addedSpec struct {
	id             int
	content        string
	special        bool // matched only by EncodeSpecial, and written only by DecodeSpecial
	lstrip, rstrip bool // also take the whitespace to the left or right
}

func newBPE(s bpeSpec) (*BPE, error) {
	n := len(s.pieces)
	if n == 0 {
		return nil, fmt.Errorf("tokenizer: empty vocabulary")
	}
	if s.types != nil && len(s.types) != n {
		return nil, fmt.Errorf("tokenizer: %d token types for %d tokens", len(s.types), n)
	}
	for _, c := range []struct {
		name string
		id   int
	}{{"bos", s.bos}, {"eos", s.eos}, {"unk", s.unk}} {
		if c.id < -1 || c.id >= n {
			return nil, fmt.Errorf("tokenizer: %s id %d out of range [-1, %d)", c.name, c.id, n)
		}
	}
	t := &BPE{
		pieces:       slices.Clone(s.pieces),
		types:        make([]TokenType, n),
		text:         make([][]byte, n),
		vocab:        make(map[string]int32, n),
		merges:       make(map[uint64]merge, len(s.merges)),
		byteLevel:    s.byteLevel,
		byteFallback: s.byteFallback,
		unk:          s.unk,
		fuseUnk:      s.fuseUnk,
		ignoreMerges: s.ignoreMerges,
		normalizers:  s.normalizers,
		pre:          s.pre,
		bos:          s.bos,
		eos:          s.eos,
		prefix:       slices.Clone(s.prefix),
		suffix:       slices.Clone(s.suffix),
		stripStart:   s.stripStart,
	}
	for i := range t.byteSym {
		t.byteSym[i], t.byteID[i] = -1, -1
	}
	addedIDs := make(map[int]bool, len(s.added))
	for _, a := range s.added {
		if a.id < 0 || a.id >= n {
			return nil, fmt.Errorf("tokenizer: added token %q has id %d, out of range [0, %d)", a.content, a.id, n)
		}
		addedIDs[a.id] = true
	}
	for id, p := range s.pieces {
		typ := TypeNormal
		if s.types != nil {
			typ = s.types[id]
		}
		if typ < TypeNormal || typ > TypeByte {
			return nil, fmt.Errorf("tokenizer: token %d (%q) has invalid type %d", id, p, typ)
		}
		if id == s.unk && typ == TypeNormal {
			typ = TypeUnknown
		}
		if b, ok := parseBytePiece(p); ok && s.byteFallback && (typ == TypeNormal || typ == TypeByte) {
			typ = TypeByte
			if t.byteID[b] < 0 {
				t.byteID[b] = int32(id)
			}
		}
		t.types[id] = typ
		inModel := !addedIDs[id]
		if s.inModel != nil {
			inModel = s.inModel[id]
		}
		if inModel && p != "" {
			if _, dup := t.vocab[p]; !dup {
				t.vocab[p] = int32(id)
			}
		}
		t.text[id] = t.decodePiece(p, typ, inModel, s.decodeSpaceMark)
	}
	if t.byteLevel {
		for b := range 256 {
			if id, ok := t.vocab[string(byteToRune[b])]; ok {
				t.byteSym[b] = id
			}
		}
	}
	for rank, m := range s.merges {
		a, okA := t.vocab[m[0]]
		b, okB := t.vocab[m[1]]
		c, okC := t.vocab[m[0]+m[1]]
		if !okA || !okB || !okC {
			continue // it could never apply
		}
		if _, dup := t.merges[pairKey(a, b)]; !dup {
			t.merges[pairKey(a, b)] = merge{rank: int32(rank), id: c}
		}
	}
	t.longest = wordBound(t)
	t.shrink = maxShrink(t.normalizers, t.pre)
	t.added = newAddedTokens(s.added)
	t.ends = endSet(t, s.eos, s.ends)
	return t, nil
}

// decodePiece is what a token writes: byte-level pieces go back to bytes,
// <0xNN> pieces to their byte, ▁ to a space when the decoder says so.
// Added tokens of byte-level vocabularies are plain text.
func (t *BPE) decodePiece(p string, typ TokenType, inModel, spaceToBlank bool) []byte {
	switch {
	case typ == TypeUnused:
		return nil
	case typ == TypeByte:
		b, _ := parseBytePiece(p)
		return []byte{b}
	case t.byteLevel && inModel && typ != TypeControl && typ != TypeUserDefined:
		return byteLevelBytes(p)
	case spaceToBlank:
		return []byte(strings.ReplaceAll(p, spaceMark, " "))
	}
	return []byte(p)
}

// wordBound is BPE.longest: each id of a word stands for a piece of the
// vocabulary (one byte of the word per character of the piece in the byte
// alphabet, the piece's bytes otherwise), one byte (a byte piece), or one
// unknown character of at most 4 bytes, unless unknown tokens fuse or,
// without an unknown token, vanish.
func wordBound(t *BPE) int {
	unknown := false // can a part of a word have no piece?
	if t.byteLevel {
		unknown = slices.Contains(t.byteSym[:], -1)
	} else {
		unknown = !t.byteFallback || slices.Contains(t.byteID[:], -1)
	}
	if unknown && (t.unk < 0 || t.fuseUnk) {
		return 0
	}
	n := 4
	for p := range t.vocab {
		if t.byteLevel {
			n = max(n, utf8.RuneCountInString(p))
		} else {
			n = max(n, len(p))
		}
	}
	return n
}

// endSet lists the ids that end a generation: eos, the ids the file names,
// and the control tokens that chat models end a turn with.
func endSet(t *BPE, eos int, extra []int) []int {
	var ends []int
	seen := make(map[int]bool)
	add := func(id int) {
		if id >= 0 && id < len(t.pieces) && !seen[id] {
			seen[id] = true
			ends = append(ends, id)
		}
	}
	add(eos)
	for _, id := range extra {
		add(id)
	}
	for id, p := range t.pieces {
		if t.types[id] == TypeControl && slices.Contains(endPieces, p) {
			add(id)
		}
	}
	// Harmony (gpt-oss): <|end|> closes a message within a reply (the
	// analysis before the final answer); the reply ends at <|return|> or
	// <|call|>. llama.cpp drops <|end|> from its end tokens likewise when
	// the vocabulary has both.
	if end := slices.Index(t.pieces, "<|end|>"); end >= 0 && slices.Contains(t.pieces, "<|return|>") && slices.Contains(t.pieces, "<|call|>") {
		ends = slices.DeleteFunc(ends, func(id int) bool { return id == end })
	}
	slices.Sort(ends)
	return ends
}

// endPieces are the control tokens that end a turn or a text in the chat
// vocabularies we know (llama.cpp keeps a similar list).
var endPieces = []string{
	"<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", // Llama 3
	"<|im_end|>", "<|endoftext|>", // Qwen, GPT-2, SmolLM
	"<end_of_turn>", "<eos>", // Gemma
	"<|end|>", "<|return|>", "<|call|>", // Phi, gpt-oss
	"</s>", "<EOT>", "<|END_OF_TURN_TOKEN|>", "<end_of_utterance>",
}

// VocabSize returns the number of ids.
func (t *BPE) VocabSize() int { return len(t.pieces) }

// BOS returns the beginning-of-sequence id, or -1.
func (t *BPE) BOS() int { return t.bos }

// EOS returns the end-of-sequence id, or -1.
func (t *BPE) EOS() int { return t.eos }

// Ends returns every id that ends a generation, in increasing order: EOS
// and the end-of-turn tokens of chat models (<|im_end|>, <|eot_id|>,
// <end_of_turn>, ...).
func (t *BPE) Ends() []int { return slices.Clone(t.ends) }

// IsEnd reports whether id ends a generation.
func (t *BPE) IsEnd(id int) bool {
	_, ok := slices.BinarySearch(t.ends, id)
	return ok
}

// AddsBOS reports whether Encode(text, true) puts BOS first, which depends
// on the model: Llama 3 and Gemma want it, Qwen does not.
func (t *BPE) AddsBOS() bool { return len(t.prefix) > 0 && t.prefix[0] == t.bos }

// Piece returns the vocabulary entry for id as stored (in the byte-level
// alphabet for byte-level models), or "" when id is out of range.
func (t *BPE) Piece(id int) string {
	if !t.valid(id) {
		return ""
	}
	return t.pieces[id]
}

// Type returns the type of id: Control for special tokens, UserDefined for
// other added tokens, Byte for <0xNN> pieces; 0 when id is out of range.
func (t *BPE) Type(id int) TokenType {
	if !t.valid(id) {
		return 0
	}
	return t.types[id]
}

// ID returns the id of a piece as stored, or of an added token's text.
func (t *BPE) ID(piece string) (int, bool) {
	if id, ok := t.added.byContent[piece]; ok {
		return id, true
	}
	id, ok := t.vocab[piece]
	return int(id), ok
}

func (t *BPE) valid(id int) bool { return id >= 0 && id < len(t.pieces) }

// Encode returns the ids of text. Added tokens that are not special (such
// as Qwen's <think>) are matched as in the Hugging Face library; special
// tokens (<|im_start|>) are encoded as ordinary text, so that text from a
// user cannot forge them. With addBOS, the tokens the model wants around a
// sequence are added (BOS for Llama 3 and Gemma, nothing for Qwen).
func (t *BPE) Encode(text string, addBOS bool) []int {
	return t.encodeBounded(&limit{}, text, addBOS, false)
}

// EncodeSpecial is Encode that also turns the text of special tokens into
// their ids, as for a prompt rendered from a chat template. It is what
// Hugging Face's encode does.
func (t *BPE) EncodeSpecial(text string, addBOS bool) []int {
	return t.encodeBounded(&limit{}, text, addBOS, true)
}

// encodeBounded encodes text within l. The text is read a word at a time
// (added tokens first, then each pre-tokenized word), and before a word is
// merged its length gives a lower bound of its ids, so a text too long for
// l stops at the first word that cannot fit.
func (t *BPE) encodeBounded(l *limit, text string, addSpecial, parseSpecial bool) []int {
	ids := make([]int, 0, idsCap(len(text), l))
	after := 0 // ids still to come after the text
	if addSpecial {
		ids = append(ids, t.prefix...)
		after = len(t.suffix)
	}
	t.added.split(text, parseSpecial, func(seg string, id int, first bool) bool {
		if id >= 0 {
			ids = append(ids, id)
			return l.step() && l.fits(len(ids)+after)
		}
		ids = t.encodeSegment(l, ids, seg, first, after)
		return l.err == nil
	})
	if addSpecial {
		ids = append(ids, t.suffix...)
	}
	if l.err != nil || !l.fits(len(ids)) {
		return nil
	}
	return ids
}

// encodeSegment encodes text between added tokens; first is set for the
// segment at the start of the text, and after ids must still fit in l's
// bound once the segment's are in.
func (t *BPE) encodeSegment(l *limit, ids []int, s string, first bool, after int) []int {
	if l.bounded() && !l.fits(len(ids)+t.minSegmentTokens(s)+after) {
		return nil
	}
	for _, n := range t.normalizers {
		s = n.normalize(s, first)
	}
	if s == "" {
		return ids
	}
	pretokenize(t.pre, s, first, func(w string) bool {
		if !l.step() || l.bounded() && !l.fits(len(ids)+t.minTokens(w)+after) {
			return false
		}
		ids = t.encodeWord(l, ids, w)
		return l.err == nil && l.fits(len(ids)+after)
	})
	if l.err != nil {
		return nil
	}
	return ids
}

// minTokens is a lower bound of the number of ids of word w, found
// without merging: every id stands for at most t.longest bytes of it. It
// is 0 when bytes can vanish or unknown tokens fuse, and then nothing is
// certain.
func (t *BPE) minTokens(w string) int {
	if t.longest == 0 {
		return 0
	}
	return (len(w) + t.longest - 1) / t.longest
}

// minSegmentTokens is a lower bound of the number of ids of a segment,
// before it is normalized and split into words: they hold at least
// len(s)/t.shrink bytes, each id standing for at most t.longest.
func (t *BPE) minSegmentTokens(s string) int {
	if t.longest == 0 || t.shrink == 0 {
		return 0
	}
	d := t.longest * t.shrink
	return (len(s) + d - 1) / d
}

// maxCachedWord bounds the words kept in the cache: long ones rarely repeat.
const maxCachedWord = 64

// encodeWord appends the ids of one pre-tokenized word.
func (t *BPE) encodeWord(l *limit, ids []int, w string) []int {
	if w == "" {
		return ids
	}
	if len(w) <= maxCachedWord {
		if got, ok := t.cache.get(w); ok {
			for _, id := range got {
				ids = append(ids, int(id))
			}
			return ids
		}
	}
	if t.ignoreMerges {
		key := w
		if t.byteLevel {
			key = byteLevelString(w)
		}
		if id, ok := t.vocab[key]; ok {
			return append(ids, int(id))
		}
	}
	m := getMerger()
	defer putMerger(m)
	if t.byteLevel {
		for i := 0; i < len(w); i++ {
			if id := t.byteSym[w[i]]; id >= 0 {
				m.push(id)
			} else {
				m.pushUnknown(t)
			}
		}
	} else {
		t.characters(m, w)
	}
	out, ok := m.merge(l, t.merges)
	if !ok {
		return nil
	}
	if len(w) <= maxCachedWord {
		t.cache.put(w, out)
	}
	for _, id := range out {
		ids = append(ids, int(id))
	}
	return ids
}

// characters starts a SentencePiece-style word: one symbol per character,
// or per byte through <0xNN> pieces, or the unknown token.
func (t *BPE) characters(m *merger, w string) {
	for i := 0; i < len(w); {
		_, size := utf8.DecodeRuneInString(w[i:])
		if id, ok := t.vocab[w[i:i+size]]; ok {
			m.push(id)
			i += size
			continue
		}
		all := t.byteFallback
		for k := i; k < i+size && all; k++ {
			all = t.byteID[w[k]] >= 0
		}
		if all {
			for k := i; k < i+size; k++ {
				m.push(t.byteID[w[k]])
			}
		} else {
			m.pushUnknown(t)
		}
		i += size
	}
}

// TokenBytes returns what id adds to the text after prev. Special tokens
// add nothing (use DecodeSpecial to see them); other tokens add their
// bytes, which for byte-level vocabularies may be part of a UTF-8
// character. When the decoder strips the space the encoder prepended, the
// first token after the start or BOS loses it.
func (t *BPE) TokenBytes(prev, id int) []byte {
	return t.tokenBytes(prev, id, false)
}

func (t *BPE) tokenBytes(prev, id int, special bool) []byte {
	if !t.valid(id) {
		return nil
	}
	typ := t.types[id]
	if !special && (typ == TypeControl || typ == TypeUnknown) {
		return nil
	}
	b := t.text[id]
	if t.stripStart > 0 && (prev < 0 || prev == t.bos) {
		for k := 0; k < t.stripStart && len(b) > 0 && b[0] == ' '; k++ {
			b = b[1:]
		}
	}
	return b
}

// Decode returns the text of ids without special tokens, so that
// Decode(Encode(s, bos)) == s for normalized s. Invalid ids are skipped.
func (t *BPE) Decode(ids []int) string { return t.decode(ids, false) }

// DecodeSpecial is Decode that writes special tokens as their text, so
// that DecodeSpecial(EncodeSpecial(s, false)) == s.
func (t *BPE) DecodeSpecial(ids []int) string { return t.decode(ids, true) }

func (t *BPE) decode(ids []int, special bool) string {
	var b []byte
	prev := -1
	for _, id := range ids {
		b = append(b, t.tokenBytes(prev, id, special)...)
		prev = id
	}
	return string(b)
}

// wordCache remembers the ids of short words: text repeats words, and
// merging is the expensive part of encoding.
type wordCache struct {
	mu sync.RWMutex
	m  map[string][]int32
}

const wordCacheSize = 1 << 16

func (c *wordCache) get(w string) ([]int32, bool) {
	c.mu.RLock()
	ids, ok := c.m[w]
	c.mu.RUnlock()
	return ids, ok
}

func (c *wordCache) put(w string, ids []int32) {
	c.mu.Lock()
	if c.m == nil || len(c.m) >= wordCacheSize {
		c.m = make(map[string][]int32, 1024)
	}
	c.m[w] = slices.Clone(ids)
	c.mu.Unlock()
}
