package tokenizer

import "unicode/utf8"

// GPT-2's byte-level BPE works on text in which every byte is written as one
// printable character, so that a vocabulary of strings can hold any byte
// sequence: the printable bytes of Latin-1 stand for themselves and the
// others (controls, space, DEL, NBSP, soft hyphen) are moved up to U+0100
// and beyond, in order. "Ġ" (U+0120) is thus the space.
var (
	byteToRune [256]rune
	runeToByte = make(map[rune]byte, 256)
)

func init() {
	next := rune(256)
	for b := range 256 {
		r := rune(b)
		if !(b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE && b <= 0xFF) {
			r = next
			next++
		}
		byteToRune[b] = r
		runeToByte[r] = byte(b)
	}
}

// byteLevelString writes raw bytes in the byte-level alphabet.
func byteLevelString(raw string) string {
	buf := make([]byte, 0, 2*len(raw))
	for i := 0; i < len(raw); i++ {
		buf = utf8.AppendRune(buf, byteToRune[raw[i]])
	}
	return string(buf)
}

// byteLevelBytes turns a string in the byte-level alphabet back into the
// bytes it stands for. Characters outside the alphabet, which only added
// tokens contain, stand for their own UTF-8 encoding.
func byteLevelBytes(s string) []byte {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if b, ok := runeToByte[r]; ok {
			out = append(out, b)
		} else {
			out = utf8.AppendRune(out, r)
		}
	}
	return out
}
