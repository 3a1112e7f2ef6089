package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// Stream turns ids into text one at a time, as a model generates them.
// A single token may hold part of a UTF-8 character (byte-fallback pieces
// such as <0xF0> do), so Stream holds bytes back until the character is
// complete; printing them at once would show garbage.
type Stream struct {
	t       Tokenizer
	prev    int
	pending []byte
}

// NewStream returns a Stream at the start of a sequence; feed it the whole
// sequence (BOS and prompt included) so leading spaces are handled as
// Decode handles them.
func NewStream(t Tokenizer) *Stream {
	return &Stream{t: t, prev: -1}
}

// Next adds id and returns the text it completed, possibly "". Bytes that
// can never become valid UTF-8 come out as U+FFFD straight away.
func (s *Stream) Next(id int) string {
	text, _ := s.NextBytes(id)
	return text
}

// NextBytes is Next that also returns the bytes id added to the text
// (TokenBytes after the previous id), for callers that need both.
func (s *Stream) NextBytes(id int) (text string, added []byte) {
	added = s.t.TokenBytes(s.prev, id)
	s.pending = append(s.pending, added...)
	s.prev = id
	return s.take(false), added
}

// Flush returns whatever Next held back, each byte of the incomplete
// character written as U+FFFD, for the end of a generation. The Stream can
// still be fed afterwards.
func (s *Stream) Flush() string {
	return s.take(true)
}

// take removes and returns the longest prefix of pending that is complete,
// or all of it when final.
func (s *Stream) take(final bool) string {
	var out strings.Builder
	i := 0
	for i < len(s.pending) {
		rest := s.pending[i:]
		if !final && !utf8.FullRune(rest) {
			break
		}
		r, size := utf8.DecodeRune(rest)
		if r == utf8.RuneError && size == 1 {
			out.WriteRune(utf8.RuneError)
		} else {
			out.Write(rest[:size])
		}
		i += size
	}
	s.pending = s.pending[:copy(s.pending, s.pending[i:])]
	return out.String()
}
