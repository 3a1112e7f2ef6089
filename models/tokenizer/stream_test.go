package tokenizer

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// Byte-fallback pieces split characters across tokens; the stream must
// hold the pieces back and still produce exactly what Decode does.
func TestStreamValidUTF8(t *testing.T) {
	texts := []string{
		"emoji 😀 👍🏽 🇫🇷 🏳️‍🌈 👩‍👩‍👧‍👦 end",
		"日本語のテキスト",
		"😀",
		"café ☕ and 🥐",
		"plain ASCII only",
	}
	for _, rt := range realTokenizers {
		tok := mustLoad(t, rt.load)
		for _, text := range texts {
			ids := tok.Encode(text, true)
			s := NewStream(tok)
			var all strings.Builder
			for i, id := range ids {
				out := s.Next(id)
				if !utf8.ValidString(out) {
					t.Errorf("%s: %q: Next(ids[%d]=%d) = %q, invalid UTF-8", rt.name, text, i, id, out)
				}
				all.WriteString(out)
			}
			if rest := s.Flush(); rest != "" {
				t.Errorf("%s: %q: Flush = %q, want nothing left", rt.name, text, rest)
			}
			if got, want := all.String(), tok.Decode(ids); got != want {
				t.Errorf("%s: streamed %q, Decode gives %q", rt.name, got, want)
			}
		}
	}
}

// Bytes that cannot become valid UTF-8 come out as U+FFFD, the way Go
// converts a string to runes, and an incomplete character at the end
// waits for Flush.
func TestStreamInvalidBytes(t *testing.T) {
	tok := mustLoad(t, loadTok512Bin)
	tests := []struct {
		text      string
		wantNext  string
		wantFlush string
	}{
		{"a\xffb", "a\ufffdb", ""},
		{"x\x80\x80y", "x\ufffd\ufffdy", ""},
		{"cut \xf0\x9f", "cut ", "\ufffd\ufffd"},
		{"cut \xe6\x97", "cut ", "\ufffd\ufffd"},
	}
	for _, tt := range tests {
		s := NewStream(tok)
		var next strings.Builder
		for _, id := range tok.Encode(tt.text, false) {
			next.WriteString(s.Next(id))
		}
		if next.String() != tt.wantNext {
			t.Errorf("%q: Next gave %q, want %q", tt.text, next.String(), tt.wantNext)
		}
		if got := s.Flush(); got != tt.wantFlush {
			t.Errorf("%q: Flush = %q, want %q", tt.text, got, tt.wantFlush)
		}
		if got := s.Flush(); got != "" {
			t.Errorf("%q: second Flush = %q, want nothing", tt.text, got)
		}
	}
}
