package tokenizer

import "slices"

// Optional interfaces. Tokenizers for chat models implement them; the
// helpers below fall back to the plain Tokenizer methods for those that
// do not (SentencePiece), so callers can use them with any tokenizer.

// SpecialEncoder is implemented by tokenizers whose special tokens are
// written as text, such as <|im_start|> or <start_of_turn>. Encode treats
// such text as ordinary characters so that user input cannot forge control
// tokens; EncodeSpecial turns it into the tokens, as a prompt rendered from
// a chat template needs.
type SpecialEncoder interface {
	EncodeSpecial(text string, addBOS bool) []int
}

// SpecialDecoder is implemented by tokenizers that can write special
// tokens as their text; Decode and TokenBytes leave them out.
type SpecialDecoder interface {
	DecodeSpecial(ids []int) string
}

// EndChecker is implemented by tokenizers that know several tokens that
// end a generation: chat models end a turn with <|im_end|>, <|eot_id|> or
// <end_of_turn> besides (or instead of) their EOS.
type EndChecker interface {
	// IsEnd reports whether id ends a generation.
	IsEnd(id int) bool
	// Ends lists those ids in increasing order.
	Ends() []int
}

// EncodeSpecial encodes text with its special tokens recognised when t can
// do that, and like t.Encode otherwise.
func EncodeSpecial(t Tokenizer, text string, addBOS bool) []int {
	if se, ok := t.(SpecialEncoder); ok {
		return se.EncodeSpecial(text, addBOS)
	}
	return t.Encode(text, addBOS)
}

// DecodeSpecial decodes ids with special tokens written out when t can do
// that, and like t.Decode otherwise.
func DecodeSpecial(t Tokenizer, ids []int) string {
	if sd, ok := t.(SpecialDecoder); ok {
		return sd.DecodeSpecial(ids)
	}
	return t.Decode(ids)
}

// IsEnd reports whether id ends a generation for t: one of its end tokens,
// or its EOS for tokenizers that know no others.
func IsEnd(t Tokenizer, id int) bool {
	if ec, ok := t.(EndChecker); ok {
		return ec.IsEnd(id)
	}
	return id >= 0 && id == t.EOS()
}

// Ends lists the ids that end a generation for t.
func Ends(t Tokenizer) []int {
	if ec, ok := t.(EndChecker); ok {
		return ec.Ends()
	}
	if t.EOS() >= 0 {
		return []int{t.EOS()}
	}
	return nil
}

// AddsBOS reports whether t.Encode(text, true) starts with BOS. SentencePiece
// always adds it; the BPE tokenizers add it when the model wants it.
func AddsBOS(t Tokenizer) bool {
	if a, ok := t.(interface{ AddsBOS() bool }); ok {
		return a.AddsBOS()
	}
	bos := t.BOS()
	return bos >= 0 && slices.Equal(t.Encode("", true), []int{bos})
}
