package tokenizer

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// preTokenizer splits text into the words that BPE merges within; merges
// never cross a word boundary. Words are yielded one at a time rather than
// collected, so that a bounded encoding stops reading a long text as soon
// as it has seen enough of it.
type preTokenizer interface {
	// each calls yield with the words of w in order, and stops, returning
	// false, as soon as yield does. first is set when w is the first word
	// of the text at the very start of the input.
	each(w string, first bool, yield func(string) bool) bool
}

// pretokenize runs the pre-tokenizers in turn over s, each splitting the
// words the one before made, and calls yield with the final words; first
// is set when s is at the very start of the input. A word is first for a
// pre-tokenizer when it is the first its predecessor produced for s, as
// when each pre-tokenizer took the whole list its predecessor made. It
// returns false if yield stopped it.
func pretokenize(pre []preTokenizer, s string, first bool, yield func(string) bool) bool {
	sink := func(w string, _ bool) bool { return yield(w) }
	for k := len(pre) - 1; k >= 0; k-- {
		p, next := pre[k], sink
		started := false
		out := func(w string) bool {
			f := first && !started
			started = true
			return next(w, f)
		}
		sink = func(w string, wFirst bool) bool { return p.each(w, wFirst, out) }
	}
	return sink(s, first)
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
	// o200k's (tokenizer.ggml.pre "gpt-4o": Phi-4-mini, gpt-oss): words
	// split at case changes with their contraction, digits in threes,
	// punctuation runs with their newlines and slashes.
	patternGPT4o = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
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

// matcher finds the spans a split pattern matches, as byte offsets, in
// order; it stops when yield returns false.
type matcher interface {
	matches(s string, yield func(start, end int) bool)
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

func (m regexMatcher) matches(s string, yield func(start, end int) bool) {
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
		if match.Length > 0 && !yield(offs[match.Index], offs[match.Index+match.Length]) {
			return
		}
		match, err = m.re.FindNextMatch(match)
	}
}

// literalMatcher matches a fixed string.
type literalMatcher struct{ lit string }

func (m literalMatcher) matches(s string, yield func(start, end int) bool) {
	if m.lit == "" {
		return
	}
	for off := 0; ; {
		i := strings.Index(s[off:], m.lit)
		if i < 0 || !yield(off+i, off+i+len(m.lit)) {
			return
		}
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

// each yields the words of w. Matches and the text between them form
// pieces that cover w; the behavior says which pieces are words and
// which join their neighbours.
func (p splitPre) each(w string, _ bool, yield func(string) bool) bool {
	start := 0         // of the word being gathered (MergedWith*, Contiguous)
	prevMatch := false // whether the piece before was a match (Contiguous)
	count := 0         // pieces so far
	// piece takes the next piece, w[ps:pe]; it is the last when it ends w,
	// since pieces are never empty.
	piece := func(ps, pe int, match bool) bool {
		match = match != p.invert
		last := pe == len(w)
		defer func() { prevMatch, count = match, count+1 }()
		switch p.behavior {
		case splitIsolated:
			return yield(w[ps:pe])
		case splitRemoved:
			return match || yield(w[ps:pe])
		case splitMergedWithPrevious:
			if match || last {
				word := w[start:pe]
				start = pe
				return word == "" || yield(word)
			}
		case splitMergedWithNext:
			if match && ps > start {
				if !yield(w[start:ps]) {
					return false
				}
				start = ps
			}
			if last && pe > start {
				return yield(w[start:pe])
			}
		case splitContiguous:
			if count > 0 && match != prevMatch {
				if !yield(w[start:ps]) {
					return false
				}
				start = ps
			}
			if last {
				return yield(w[start:pe])
			}
		}
		return true
	}
	ok, last := true, 0
	p.m.matches(w, func(ms, me int) bool {
		if ms > last && !piece(last, ms, false) || !piece(ms, me, true) {
			ok = false
			return false
		}
		last = me
		return true
	})
	if ok && last < len(w) {
		ok = piece(last, len(w), false)
	}
	return ok
}

// byteLevelPre is tokenizer.json's ByteLevel pre-tokenizer: optionally a
// space before each word that lacks one and the GPT-2 split. (The byte
// alphabet itself is applied by the model, which works on raw bytes.)
type byteLevelPre struct {
	addPrefixSpace bool
	regex          *splitPre
}

func (p byteLevelPre) each(w string, first bool, yield func(string) bool) bool {
	if p.addPrefixSpace && !strings.HasPrefix(w, " ") {
		w = " " + w
	}
	if p.regex != nil {
		return p.regex.each(w, first, yield)
	}
	return yield(w)
}

// digitsPre isolates digits: each one alone, or each run of them.
type digitsPre struct{ individual bool }

func (p digitsPre) each(w string, _ bool, yield func(string) bool) bool {
	start := 0
	prevDigit := false
	for i, r := range w {
		d := unicode.IsNumber(r)
		if i > start && (d != prevDigit || d && p.individual) {
			if !yield(w[start:i]) {
				return false
			}
			start = i
		}
		prevDigit = d
	}
	if start < len(w) {
		return yield(w[start:])
	}
	return true
}

// metaspacePre is tokenizer.json's Metaspace pre-tokenizer: spaces become
// the replacement character (▁), which is prepended according to the
// scheme, and words optionally start at each one.
type metaspacePre struct {
	replacement string
	prepend     string // "always", "first" or "never"
	splitWords  bool
}

func (p metaspacePre) each(w string, first bool, yield func(string) bool) bool {
	w = strings.ReplaceAll(w, " ", p.replacement)
	if p.prepend == "always" || p.prepend == "first" && first {
		if !strings.HasPrefix(w, p.replacement) {
			w = p.replacement + w
		}
	}
	if !p.splitWords {
		return yield(w)
	}
	return splitPre{m: literalMatcher{p.replacement}, behavior: splitMergedWithNext}.each(w, false, yield)
}
