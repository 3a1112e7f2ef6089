package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// fastMatcher is a hand-written matcher for the three pre-tokenizer
// patterns almost every byte-level vocabulary uses (patternGPT2,
// patternLlama3, patternQwen2). It finds exactly the matches regexp2
// finds (TestFastSplitMatchesRegexp compares them) several times faster,
// by following the alternatives in order with the backtracking worked out:
//
//	contractions    's 't 're 've 'm 'll 'd (any case for Llama 3 and Qwen2)
//	letters         Llama 3/Qwen2: one non-letter, non-digit other than CR/LF, then letters; GPT-2: an optional space, then letters
//	digits          1 to 3 (Llama 3), 1 (Qwen2), or a run after an optional space (GPT-2)
//	punctuation     an optional space, a run of what is neither space, letter nor digit, then (Llama 3/Qwen2) CR/LFs
//	newlines        (Llama 3/Qwen2) spaces up to and including the last CR/LF of the run
//	spaces          a space run but its last character when more text follows, else the whole run
type fastMatcher struct {
	gpt2      bool // GPT-2's pattern; else Llama 3's or Qwen2's
	maxDigits int  // 3 for Llama 3, 1 for Qwen2, unlimited (0) for GPT-2
}

// fastMatchers maps each pattern to its hand-written matcher.
var fastMatchers = map[string]fastMatcher{
	patternGPT2:   {gpt2: true},
	patternLlama3: {maxDigits: 3},
	patternQwen2:  {maxDigits: 1},
}

func isL(r rune) bool { return unicode.IsLetter(r) }
func isN(r rune) bool { return unicode.IsNumber(r) }
func isS(r rune) bool { return unicode.IsSpace(r) }

// decode is utf8.DecodeRuneInString that reports 0 size at the end.
func decode(s string, i int) (rune, int) {
	if i >= len(s) {
		return -1, 0
	}
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

func (m fastMatcher) matches(s string, yield func(start, end int) bool) {
	for i := 0; i < len(s); {
		end := m.match(s, i)
		if !yield(i, end) {
			return
		}
		i = end
	}
}

// match returns the end of the match that starts at i; every position
// starts one.
func (m fastMatcher) match(s string, i int) int {
	if end := m.contraction(s, i); end > 0 {
		return end
	}
	r, n := decode(s, i)
	// Letters, with what may lead them.
	if m.gpt2 {
		j := i
		if r == ' ' {
			j += n
		}
		if end := m.run(s, j, isL); end > j {
			return end
		}
	} else {
		j := i
		if !isL(r) && !isN(r) && r != '\r' && r != '\n' {
			j += n
		}
		if end := m.run(s, j, isL); end > j {
			return end
		}
		if end := m.run(s, i, isL); end > i {
			return end
		}
	}
	// Digits.
	if m.gpt2 {
		j := i
		if r == ' ' {
			j += n
		}
		if end := m.run(s, j, isN); end > j {
			return end
		}
	} else if isN(r) {
		end := i + n
		for k := 1; k < m.maxDigits; k++ {
			r2, n2 := decode(s, end)
			if n2 == 0 || !isN(r2) {
				break
			}
			end += n2
		}
		return end
	}
	// Punctuation and symbols.
	other := func(r rune) bool { return !isS(r) && !isL(r) && !isN(r) }
	j := i
	if r == ' ' {
		j += n
	}
	if end := m.run(s, j, other); end > j {
		if !m.gpt2 {
			end = m.run(s, end, func(r rune) bool { return r == '\r' || r == '\n' })
		}
		return end
	}
	// Whitespace: r is a space character here.
	w := m.run(s, i, isS)
	if !m.gpt2 {
		// \s*[\r\n]+ : up to the last CR/LF of the run.
		last := -1
		for k := i; k < w; {
			r2, n2 := decode(s, k)
			if r2 == '\r' || r2 == '\n' {
				last = k + n2
			}
			k += n2
		}
		if last > 0 {
			return last
		}
	}
	// \s+(?!\S) : the run, less its last character when text follows.
	if w < len(s) {
		_, lastSize := utf8.DecodeLastRuneInString(s[i:w])
		if w-lastSize > i {
			return w - lastSize
		}
	}
	return w // \s+
}

// contraction matches 's 't 're 've 'm 'll 'd at i, or returns 0.
func (m fastMatcher) contraction(s string, i int) int {
	if s[i] != '\'' || i+1 >= len(s) {
		return 0
	}
	lower := func(c byte) byte {
		if !m.gpt2 && c >= 'A' && c <= 'Z' {
			return c + 'a' - 'A'
		}
		return c
	}
	c := lower(s[i+1])
	switch c {
	case 's', 't', 'm', 'd':
		return i + 2
	}
	if i+2 < len(s) {
		pair := string([]byte{c, lower(s[i+2])})
		switch pair {
		case "re", "ve", "ll":
			return i + 3
		}
	}
	return 0
}

// run returns the end of the run of characters satisfying f from i.
func (m fastMatcher) run(s string, i int, f func(rune) bool) int {
	for i < len(s) {
		r, n := decode(s, i)
		if !f(r) {
			break
		}
		i += n
	}
	return i
}
