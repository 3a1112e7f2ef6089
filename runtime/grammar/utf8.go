package grammar

import (
	"slices"
	"unicode/utf8"
)

// cpRange is an inclusive range of code points.
type cpRange struct{ lo, hi rune }

const surrogateLo, surrogateHi = 0xD800, 0xDFFF

// normalize sorts and merges ranges and drops the surrogates, which UTF-8
// cannot encode.
func normalize(rs []cpRange) []cpRange {
	var cut []cpRange
	for _, r := range rs {
		if r.lo <= surrogateHi && r.hi >= surrogateLo {
			if r.lo < surrogateLo {
				cut = append(cut, cpRange{r.lo, surrogateLo - 1})
			}
			if r.hi > surrogateHi {
				cut = append(cut, cpRange{surrogateHi + 1, r.hi})
			}
			continue
		}
		cut = append(cut, r)
	}
	slices.SortFunc(cut, func(a, b cpRange) int { return int(a.lo - b.lo) })
	var out []cpRange
	for _, r := range cut {
		if n := len(out); n > 0 && r.lo <= out[n-1].hi+1 {
			out[n-1].hi = max(out[n-1].hi, r.hi)
			continue
		}
		out = append(out, r)
	}
	return out
}

// negate is the complement of normalized ranges among all code points.
func negate(rs []cpRange) []cpRange {
	var out []cpRange
	next := rune(0)
	for _, r := range normalize(rs) {
		if r.lo > next {
			out = append(out, cpRange{next, r.lo - 1})
		}
		next = r.hi + 1
	}
	if next <= utf8.MaxRune {
		out = append(out, cpRange{next, utf8.MaxRune})
	}
	return normalize(out)
}

// subtract removes the code points of b from a.
func subtract(a, b []cpRange) []cpRange { return negate(append(negate(a), b...)) }

// utf8Alternatives turns code point ranges into alternatives of byte
// sets, one alternative per run of UTF-8 encodings whose every byte
// position is a range; all one-byte characters share one alternative.
func utf8Alternatives(rs []cpRange) [][]byteSet {
	var ascii byteSet
	hasASCII := false
	var multi [][]byteSet
	var split func(lo, hi rune)
	split = func(lo, hi rune) {
		n := utf8.RuneLen(lo)
		for i := 1; i < n; i++ {
			m := rune(1)<<(6*i) - 1 // the low i continuation bytes
			if lo&^m == hi&^m {
				continue
			}
			if lo&m != 0 {
				split(lo, lo|m)
				split(lo|m+1, hi)
				return
			}
			if hi&m != m {
				split(lo, hi&^m-1)
				split(hi&^m, hi)
				return
			}
		}
		a, b := utf8.AppendRune(nil, lo), utf8.AppendRune(nil, hi)
		if n == 1 {
			ascii.add(a[0], b[0])
			hasASCII = true
			return
		}
		seq := make([]byteSet, n)
		for i := range seq {
			seq[i].add(a[i], b[i])
		}
		multi = append(multi, seq)
	}
	for _, r := range normalize(rs) {
		// Split at the boundaries of the encoding lengths first.
		for _, edge := range []rune{0x7F, 0x7FF, 0xFFFF, utf8.MaxRune} {
			if r.lo > r.hi {
				break
			}
			if r.lo <= edge {
				split(r.lo, min(r.hi, edge))
				r.lo = edge + 1
			}
		}
	}
	var out [][]byteSet
	if hasASCII {
		out = append(out, []byteSet{ascii})
	}
	return append(out, multi...)
}
