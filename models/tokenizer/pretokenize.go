package tokenizer

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// preTokenizer splits text into the words that BPE merges within; merges
// never cross a word boundary. first is set for the text at the very start
// of the input.
type preTokenizer interface {
	split(words []string, first bool) []string
}

// Pre-tokenizer patterns. They need lookahead (\s+(?!\S)), which Go's
// regexp lacks, so they run on regexp2.
const (
	// GPT-2's pattern, also what tokenizer.json's ByteLevel pre-tokenizer
	// uses when its use_regex is set.
	patternGPT2 = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
	// Llama 3's: case-insensitive contractions, a letter run with one
	// leading non-letter, digits in threes, punctuation runs with their
	// newlines.
	patternLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// Qwen2's (and Qwen3's): Llama 3's with single digits.
	patternQwen2 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// splitBehavior says what becomes of the matches of a split pattern,
// named as in tokenizer.json.
type splitBehavior int

const (
	splitIsolated           splitBehavior = iota // matches and the text between are words
	splitRemoved                                 // matches are dropped
	splitMergedWithPrevious                      // a match ends the word before it
	splitMergedWithNext                          // a match starts the word after it
	splitContiguous                              // runs of matches form one word
)

func parseSplitBehavior(s string) (splitBehavior, error) {
	switch s {
	case "Isolated", "":
		return splitIsolated, nil
	case "Removed":
		return splitRemoved, nil
	case "MergedWithPrevious":
		return splitMergedWithPrevious, nil
	case "MergedWithNext":
		return splitMergedWithNext, nil
	case "Contiguous":
		return splitContiguous, nil
	}
	return 0, fmt.Errorf("split behavior %q is not supported", s)
}

// matcher finds the spans a split pattern matches, as byte offsets.
type matcher interface {
	matches(s string, yield func(start, end int))
}

// regexMatcher runs a regexp2 pattern. regexp2 works on runes, so byte
// offsets are recovered from a rune-to-byte table; invalid UTF-8 bytes are
// one rune (U+FFFD) each there, as in Go's []rune conversion.
type regexMatcher struct{ re *regexp2.Regexp }

// newMatcher returns the matcher of a regex pattern: the hand-written one
// when there is one, else regexp2's.
func newMatcher(pattern string) (matcher, error) {
	if m, ok := fastMatchers[pattern]; ok {
		return m, nil
	}
	return newRegexMatcher(pattern)
}

func newRegexMatcher(pattern string) (regexMatcher, error) {
	re, err := regexp2.Compile(pattern, regexp2.None)
	if err != nil {
		return regexMatcher{}, fmt.Errorf("pre-tokenizer pattern %q: %w", pattern, err)
	}
	return regexMatcher{re}, nil
}

func (m regexMatcher) matches(s string, yield func(start, end int)) {
	runes := make([]rune, 0, len(s))
	offs := make([]int, 0, len(s)+1)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		runes = append(runes, r)
		offs = append(offs, i)
		i += size
	}
	offs = append(offs, len(s))
	match, err := m.re.FindRunesMatch(runes)
	for err == nil && match != nil {
		if match.Length > 0 {
			yield(offs[match.Index], offs[match.Index+match.Length])
		}
		match, err = m.re.FindNextMatch(match)
	}
}

// literalMatcher matches a fixed string.
type literalMatcher struct{ lit string }

func (m literalMatcher) matches(s string, yield func(start, end int)) {
	if m.lit == "" {
		return
	}
	for off := 0; ; {
		i := strings.Index(s[off:], m.lit)
		if i < 0 {
			return
		}
		yield(off+i, off+i+len(m.lit))
		off += i + len(m.lit)
	}
}

// splitPre is tokenizer.json's Split pre-tokenizer, and each step of
// llama.cpp's regex lists (which behave as Isolated).
type splitPre struct {
	m        matcher
	behavior splitBehavior
	invert   bool
}

func (p splitPre) split(words []string, _ bool) []string {
	out := make([]string, 0, len(words)*2)
	for _, w := range words {
		out = p.splitOne(out, w)
	}
	return out
}

func (p splitPre) splitOne(out []string, w string) []string {
	// Pieces are (start, end, isMatch) in order, covering w.
	type piece struct {
		start, end int
		match      bool
	}
	var pieces []piece
	last := 0
	p.m.matches(w, func(start, end int) {
		if start > last {
			pieces = append(pieces, piece{last, start, false})
		}
		pieces = append(pieces, piece{start, end, true})
		last = end
	})
	if last < len(w) {
		pieces = append(pieces, piece{last, len(w), false})
	}
	if p.invert {
		for i := range pieces {
			pieces[i].match = !pieces[i].match
		}
	}
	switch p.behavior {
	case splitIsolated:
		for _, pc := range pieces {
			out = append(out, w[pc.start:pc.end])
		}
	case splitRemoved:
		for _, pc := range pieces {
			if !pc.match {
				out = append(out, w[pc.start:pc.end])
			}
		}
	case splitMergedWithPrevious:
		start := 0
		for i, pc := range pieces {
			if pc.match || i == len(pieces)-1 {
				if pc.end > start {
					out = append(out, w[start:pc.end])
				}
				start = pc.end
			}
		}
	case splitMergedWithNext:
		start := 0
		for i, pc := range pieces {
			if pc.match && pc.start > start {
				out = append(out, w[start:pc.start])
				start = pc.start
			}
			if i == len(pieces)-1 && pc.end > start {
				out = append(out, w[start:pc.end])
			}
		}
	case splitContiguous:
		start := 0
		for i, pc := range pieces {
			if i > 0 && pc.match != pieces[i-1].match {
				out = append(out, w[start:pc.start])
				start = pc.start
			}
			if i == len(pieces)-1 {
				out = append(out, w[start:pc.end])
			}
		}
	}
	return out
}

// byteLevelPre is tokenizer.json's ByteLevel pre-tokenizer: optionally a
// space before each word that lacks one and the GPT-2 split. (The byte
// alphabet itself is applied by the model, which works on raw bytes.)
type byteLevelPre struct {
	addPrefixSpace bool
	regex          *splitPre
}

func (p byteLevelPre) split(words []string, first bool) []string {
	if p.addPrefixSpace {
		for i, w := range words {
			if !strings.HasPrefix(w, " ") {
				words[i] = " " + w
			}
		}
	}
	if p.regex != nil {
		words = p.regex.split(words, first)
	}
	return words
}

// digitsPre isolates digits: each one alone, or each run of them.
type digitsPre struct{ individual bool }

func (p digitsPre) split(words []string, _ bool) []string {
	out := make([]string, 0, len(words))
	for _, w := range words {
		start := 0
		prevDigit := false
		for i, r := range w {
			d := unicode.IsNumber(r)
			if i > start && (d != prevDigit || d && p.individual) {
				out = append(out, w[start:i])
				start = i
			}
			prevDigit = d
		}
		if start < len(w) {
			out = append(out, w[start:])
		}
	}
	return out
}

// metaspacePre is tokenizer.json's Metaspace pre-tokenizer: spaces become
// the replacement character (▁), which is prepended according to the
// scheme, and words optionally start at each one.
type metaspacePre struct {
	replacement string
	prepend     string // "always", "first" or "never"
	splitWords  bool
}

func (p metaspacePre) split(words []string, first bool) []string {
	out := make([]string, 0, len(words))
	for i, w := range words {
		w = strings.ReplaceAll(w, " ", p.replacement)
		if p.prepend == "always" || p.prepend == "first" && first && i == 0 {
			if !strings.HasPrefix(w, p.replacement) {
				w = p.replacement + w
			}
		}
		if !p.splitWords {
			out = append(out, w)
			continue
		}
		out = splitPre{m: literalMatcher{p.replacement}, behavior: splitMergedWithNext}.splitOne(out, w)
	}
	return out
}
