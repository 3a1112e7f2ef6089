package tokenizer

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// spaceMark is how SentencePiece writes a space inside pieces (U+2581).
// llama2.c's tokenizer.bin stores plain spaces instead; what a piece
// stands for (its text, for decoding) has spaces in both cases.
const spaceMark = "\u2581"

// SentencePiece is a SentencePiece-style BPE tokenizer. It is immutable
// after construction and safe for concurrent use.
//
// It encodes by one of two sets of rules, which agree on real
// vocabularies and differ on odd ones (a vocabulary with ▁-pieces but no
// bare ▁, say): SentencePiece's, as llama.cpp's llm_tokenizer_spm applies
// them, for GGUF and .model vocabularies, and llama2.c's encode() for
// llama2.c's tokenizer.bin files (see Encode).
type SentencePiece struct {
	pieces []string  // as given, for Piece
	text   []string  // what each id stands for: spaces for ▁, the raw byte for Byte pieces, "" for Control
	scores []float32 // merge priority: higher merges first
	types  []TokenType
	// lookup maps the Normal and UserDefined pieces to the lowest id with
	// that piece: by their text (spaces for ▁) under llama2.c's rules, as
	// stored (▁) under SentencePiece's, which match escaped text.
	lookup map[string]int
	byteID [256]int // id of the <0xNN> piece for each byte, -1 if missing
	// llama2c selects llama2.c's rules; prefix is whether a text gets the
	// dummy prefix, which under llama2.c's rules is the " " piece, space
	// (-1 when the vocabulary has none, and then prefix is off).
	llama2c bool
	prefix  bool
	space   int
	// longest is the length of the longest key of lookup (at least 1), so
	// no id stands for more bytes of the text; drops is set when a byte
	// can be dropped (no <0xNN> piece and no unknown token), when the
	// text's length says nothing about its number of ids.
	longest int
	drops   bool

	// special finds the Control and UserDefined pieces written in a
	// chat template's text (<start_of_turn>, <s>); ends are the ids that
	// end a generation (EOS and the end-of-turn pieces), sorted.
	special *addedTokens
	ends    []int

	bos, eos, unk int
}

var (
	_ SpecialEncoder = (*SentencePiece)(nil)
	_ SpecialDecoder = (*SentencePiece)(nil)
	_ EndChecker     = (*SentencePiece)(nil)
)

var _ Tokenizer = (*SentencePiece)(nil)

// NewSentencePiece builds a tokenizer from a SentencePiece vocabulary, as
// found in GGUF metadata or a .model file, that encodes by SentencePiece's
// rules with the dummy prefix (turn it off with WithoutSpacePrefix).
// types may be nil: then <0xNN> pieces are bytes, bos and eos (and the
// pieces <s>, </s>) are control tokens, unk (and <unk>) is the unknown
// token, and the rest is normal. bos, eos and unk may be -1 when the
// vocabulary has no such token.
func NewSentencePiece(pieces []string, scores []float32, types []int32, bos, eos, unk int) (*SentencePiece, error) {
	return newSentencePiece(pieces, scores, types, bos, eos, unk, false)
}

// newSentencePiece is NewSentencePiece, with llama2.c's rules if llama2c
// is set.
func newSentencePiece(pieces []string, scores []float32, types []int32, bos, eos, unk int, llama2c bool) (*SentencePiece, error) {
	n := len(pieces)
	if n == 0 {
		return nil, errors.New("tokenizer: empty vocabulary")
	}
	if len(scores) != n {
		return nil, fmt.Errorf("tokenizer: %d scores for %d pieces", len(scores), n)
	}
	if types != nil && len(types) != n {
		return nil, fmt.Errorf("tokenizer: %d token types for %d pieces", len(types), n)
	}
	for _, s := range []struct {
		name string
		id   int
	}{{"bos", bos}, {"eos", eos}, {"unk", unk}} {
		if s.id < -1 || s.id >= n {
			return nil, fmt.Errorf("tokenizer: %s id %d out of range [-1, %d)", s.name, s.id, n)
		}
	}

	t := &SentencePiece{
		pieces:  slices.Clone(pieces),
		text:    make([]string, n),
		scores:  slices.Clone(scores),
		types:   make([]TokenType, n),
		lookup:  make(map[string]int, n),
		llama2c: llama2c,
		prefix:  !llama2c,
		space:   -1,
		bos:     bos,
		eos:     eos,
		unk:     unk,
	}
	for i := range t.byteID {
		t.byteID[i] = -1
	}
	for id, p := range pieces {
		typ := inferType(id, p, bos, eos, unk)
		if types != nil {
			typ = TokenType(types[id])
		}
		if typ < TypeNormal || typ > TypeByte {
			return nil, fmt.Errorf("tokenizer: piece %d (%q) has invalid type %d", id, p, typ)
		}
		t.types[id] = typ

		switch typ {
		case TypeControl:
			// Control tokens carry no text.
		case TypeByte:
			b, ok := parseBytePiece(p)
			if !ok {
				return nil, fmt.Errorf("tokenizer: byte piece %d is %q, want <0xNN>", id, p)
			}
			t.text[id] = string([]byte{b})
			if t.byteID[b] < 0 {
				t.byteID[b] = id
			}
		default:
			t.text[id] = strings.ReplaceAll(p, spaceMark, " ")
		}
		// Only text pieces may be produced by matching text; with duplicates
		// the lowest id wins so the choice does not depend on map order.
		if mergeable(typ) {
			key := p
			if llama2c {
				key = t.text[id]
			}
			if _, dup := t.lookup[key]; !dup {
				t.lookup[key] = id
			}
		}
	}
	t.longest = 1
	for key := range t.lookup {
		t.longest = max(t.longest, len(key))
	}
	t.drops = unk < 0 && slices.Contains(t.byteID[:], -1)
	if id, ok := t.lookup[" "]; ok && llama2c {
		t.space, t.prefix = id, true
	}
	var specs []addedSpec
	for id, typ := range t.types {
		if (typ == TypeControl || typ == TypeUserDefined) && pieces[id] != "" {
			specs = append(specs, addedSpec{id: id, content: pieces[id], special: typ == TypeControl})
			if slices.Contains(endPieces, pieces[id]) {
				t.ends = append(t.ends, id)
			}
		}
	}
	t.special = newAddedTokens(specs)
	t.WithEnds(eos)
	return t, nil
}

// WithoutSpacePrefix turns off the dummy prefix, the space SentencePiece
// puts before a text (GGUF tokenizer.ggml.add_space_prefix = false: Gemma).
// It returns t, and is meant for building the tokenizer.
func (t *SentencePiece) WithoutSpacePrefix() *SentencePiece {
	t.space, t.prefix = -1, false
	return t
}

// WithEnds adds ids (such as GGUF's tokenizer.ggml.eot_token_id) to those
// that end a generation; -1 is ignored. It returns t, and is meant for
// building the tokenizer.
func (t *SentencePiece) WithEnds(ids ...int) *SentencePiece {
	for _, id := range ids {
		if t.valid(id) && !slices.Contains(t.ends, id) {
			t.ends = append(t.ends, id)
		}
	}
	slices.Sort(t.ends)
	return t
}

// Ends returns the ids that end a generation: EOS and the end-of-turn
// pieces of chat vocabularies (<end_of_turn>, <|im_end|>, ...).
func (t *SentencePiece) Ends() []int { return slices.Clone(t.ends) }

// IsEnd reports whether id ends a generation.
func (t *SentencePiece) IsEnd(id int) bool {
	_, ok := slices.BinarySearch(t.ends, id)
	return ok
}

// inferType guesses a piece's type for vocabularies that do not record
// types, following the conventions of SentencePiece's Llama exports.
func inferType(id int, piece string, bos, eos, unk int) TokenType {
	switch {
	case id == unk || piece == "<unk>":
		return TypeUnknown
	case id == bos || id == eos || piece == "<s>" || piece == "</s>":
		return TypeControl
	}
	if _, ok := parseBytePiece(piece); ok {
		return TypeByte
	}
	return TypeNormal
}

// parseBytePiece reads the byte of a piece written <0xNN>.
func parseBytePiece(p string) (byte, bool) {
	if len(p) != 6 || !strings.HasPrefix(p, "<0x") || p[5] != '>' {
		return 0, false
	}
	v, err := strconv.ParseUint(p[3:5], 16, 8)
	if err != nil {
		return 0, false
	}
	return byte(v), true
}

// mergeable reports whether pieces of this type stand for literal text and
// so may be matched against the input. SentencePiece never produces
// control, unknown or unused pieces from text, and byte pieces only through
// byte fallback.
func mergeable(t TokenType) bool {
	return t == TypeNormal || t == TypeUserDefined
}

// VocabSize returns the number of ids.
func (t *SentencePiece) VocabSize() int { return len(t.pieces) }

// BOS returns the beginning-of-sequence id, or -1.
func (t *SentencePiece) BOS() int { return t.bos }

// EOS returns the end-of-sequence id, or -1.
func (t *SentencePiece) EOS() int { return t.eos }

// Unknown returns the id that stands for unencodable text, or -1.
func (t *SentencePiece) Unknown() int { return t.unk }

// Piece returns the vocabulary entry as stored (with ▁ in .model files,
// spaces in llama2.c files), or "" when id is out of range.
func (t *SentencePiece) Piece(id int) string {
	if !t.valid(id) {
		return ""
	}
	return t.pieces[id]
}

// Score returns the merge score of id, or 0 when id is out of range.
func (t *SentencePiece) Score(id int) float32 {
	if !t.valid(id) {
		return 0
	}
	return t.scores[id]
}

// Type returns the type of id, or 0 (no valid type) when id is out of range.
func (t *SentencePiece) Type(id int) TokenType {
	if !t.valid(id) {
		return 0
	}
	return t.types[id]
}

func (t *SentencePiece) valid(id int) bool { return id >= 0 && id < len(t.pieces) }
