// Package tokenizer turns text into token ids and back for the models the
// runtime serves.
//
// SentencePiece implements the BPE variant used by Llama 1/2 and llama2.c
// (GGUF's "llama" tokenizer). GGUF and SentencePiece .model vocabularies
// encode by SentencePiece's rules, as llama.cpp applies them; llama2.c's
// tokenizer.bin files encode as llama2.c's encode() does, the reference
// the runtime is tested against. The two agree on the vocabularies
// SentencePiece trains, so a .bin and the .model it was exported from
// give the same ids for any valid UTF-8 text.
//
// Text comes from requests and tokenizer files from wherever a model was
// downloaded, so neither may cost more than its size warrants. Every
// encoder takes O(n log n) in the length of the text, whatever the text
// (merges wait in heaps; added tokens are found by an Aho-Corasick
// automaton), and EncodeBounded stops as soon as a text is known to have
// more tokens than a caller allows, or the caller's context is done. The
// loaders check every id, count and size a file gives against the file
// itself before allocating by it.
package tokenizer

// Tokenizer turns text into token ids and back. Byte-level BPE tokenizers
// (GPT-2, Llama 3, Qwen) implement it too, so the runtime never needs to
// know which kind a model uses.
type Tokenizer interface {
	// Encode returns the ids of text, with BOS prepended when addBOS is set
	// and the tokenizer has one.
	Encode(text string, addBOS bool) []int
	// TokenBytes returns the bytes token id contributes to the text when it
	// follows prev; prev is -1 at the start of a sequence. The bytes of one
	// token may be an incomplete UTF-8 character: use Stream to print them.
	TokenBytes(prev, id int) []byte
	// Decode returns the text of a whole sequence, which may start with BOS.
	Decode(ids []int) string
	// VocabSize is the number of ids, so valid ids are 0..VocabSize()-1.
	VocabSize() int
	// BOS is the beginning-of-sequence id, or -1 if there is none.
	BOS() int
	// EOS is the end-of-sequence id, or -1 if there is none.
	EOS() int
	// Piece returns the vocabulary entry for id as stored in the file, for
	// diagnostics; it is "" for an id out of range.
	Piece(id int) string
}

// TokenType classifies vocabulary entries; the values are SentencePiece's
// and GGUF's (tokenizer.ggml.token_type), so they can be passed through.
type TokenType int32

const (
	TypeNormal      TokenType = 1 // ordinary text piece
	TypeUnknown     TokenType = 2 // stands for text the vocabulary cannot express
	TypeControl     TokenType = 3 // BOS, EOS and the like: no text
	TypeUserDefined TokenType = 4 // piece added by the user; treated as text
	TypeUnused      TokenType = 5 // reserved slot, never produced by Encode
	TypeByte        TokenType = 6 // <0xNN>: one raw byte, for byte fallback
)

// String names the type as SentencePiece does, for `info` output.
func (t TokenType) String() string {
	switch t {
	case TypeNormal:
		return "normal"
	case TypeUnknown:
		return "unknown"
	case TypeControl:
		return "control"
	case TypeUserDefined:
		return "user-defined"
	case TypeUnused:
		return "unused"
	case TypeByte:
		return "byte"
	}
	return "invalid"
}
