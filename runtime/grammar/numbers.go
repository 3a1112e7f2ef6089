package grammar

// Numbers in JSON Schema: integer ranges become alternatives of digit
// ranges (no leading zeros, so each integer has one spelling), and number
// ranges reuse them for the integer part.

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// bound reads a numeric keyword as a rational, or nil.
func bound(s *value, ptr, kw string) (*big.Rat, error) {
	v := s.get(kw)
	if v == nil {
		return nil, nil
	}
	r, ok := new(big.Rat).SetString(string(v.num))
	if v.kind != 'n' || !ok {
		return nil, errAt(ptr, kw, "must be a number")
	}
	return r, nil
}

// intBounds gives the integer bounds of a schema (nil: open), from
// minimum, maximum and their exclusive forms.
func intBounds(s *value, ptr string) (lo, hi *big.Int, err error) {
	for _, kw := range []string{"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"} {
		r, err := bound(s, ptr, kw)
		if err != nil || r == nil {
			if err != nil {
				return nil, nil, err
			}
			continue
		}
		q, m := new(big.Int).DivMod(r.Num(), r.Denom(), new(big.Int)) // floor
		var b *big.Int
		switch kw {
		case "minimum": // ceil
			b = q
			if m.Sign() != 0 {
				b = new(big.Int).Add(q, big.NewInt(1))
			}
		case "exclusiveMinimum": // floor + 1
			b = new(big.Int).Add(q, big.NewInt(1))
		case "maximum":
			b = q
		case "exclusiveMaximum": // ceil - 1
			b = q
			if m.Sign() == 0 {
				b = new(big.Int).Sub(q, big.NewInt(1))
			}
		}
		if kw == "minimum" || kw == "exclusiveMinimum" {
			if lo == nil || b.Cmp(lo) > 0 {
				lo = b
			}
		} else if hi == nil || b.Cmp(hi) < 0 {
			hi = b
		}
	}
	if lo != nil && hi != nil && lo.Cmp(hi) > 0 {
		return nil, nil, errAt(ptr, "minimum", "no integer lies in the range")
	}
	return lo, hi, nil
}

func (c *schemaCompiler) integer(s *value, ptr string) (string, error) {
	lo, hi, err := intBounds(s, ptr)
	if err != nil {
		return "", err
	}
	if lo == nil && hi == nil {
		return c.use("integer"), nil
	}
	for _, b := range []*big.Int{lo, hi} {
		if b != nil && !b.IsInt64() {
			return "", errAt(ptr, "maximum", "bounds beyond 64 bits are not supported")
		}
	}
	return c.fresh(ptr+"/int", intRange(lo, hi)), nil
}

// number supports bounds whose lower end is a non-negative integer: the
// integer part is a range and the fraction is free below the maximum.
func (c *schemaCompiler) number(s *value, ptr string) (string, error) {
	var lo, hi *big.Rat
	for _, kw := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
		if s.get(kw) == nil {
			continue
		}
		r, err2 := bound(s, ptr, kw)
		if err2 != nil {
			return "", err2
		}
		switch kw {
		case "minimum":
			lo = r
		case "maximum":
			hi = r
		default:
			return "", errAt(ptr, kw, "exclusive bounds on numbers are not supported (use integer, or minimum/maximum)")
		}
	}
	if lo == nil && hi == nil {
		return c.use("number"), nil
	}
	if lo == nil || lo.Sign() < 0 || !lo.IsInt() || hi != nil && !hi.IsInt() {
		return "", errAt(ptr, "minimum", "number bounds need an integer minimum of 0 or more (and an integer maximum)")
	}
	frac := `( "." [0-9]{1,15} )?`
	l := lo.Num()
	if hi == nil {
		return c.fresh(ptr+"/num", intRange(l, nil)+" "+frac), nil
	}
	h := hi.Num()
	switch h.Cmp(l) {
	case -1:
		return "", errAt(ptr, "maximum", "is below minimum")
	case 0:
		return c.fresh(ptr+"/num", Quote(h.String())+` ( "." "0"{1,15} )?`), nil
	}
	below := new(big.Int).Sub(h, big.NewInt(1))
	if !below.IsInt64() || !l.IsInt64() {
		return "", errAt(ptr, "maximum", "bounds beyond 64 bits are not supported")
	}
	return c.fresh(ptr+"/num", fmt.Sprintf(`%s %s | %s ( "." "0"{1,15} )?`, intRange(l, below), frac, Quote(h.String()))), nil
}

// intRange is a GBNF expression for the integers in [lo, hi], written
// without leading zeros (nil bounds are open).
func intRange(lo, hi *big.Int) string {
	var alts []string
	// The negative part: -x for x in [max(1, -hi), -lo].
	if lo == nil || lo.Sign() < 0 {
		var nlo uint64 = 1
		if hi != nil && hi.Sign() < 0 {
			nlo = uint64(-hi.Int64())
		}
		var nhi *uint64
		if lo != nil {
			v := uint64(-lo.Int64())
			nhi = &v
		}
		alts = append(alts, `"-" `+uintRange(nlo, nhi))
	}
	// The non-negative part: [max(0, lo), hi].
	if hi == nil || hi.Sign() >= 0 {
		var plo uint64
		if lo != nil && lo.Sign() > 0 {
			plo = uint64(lo.Int64())
		}
		var phi *uint64
		if hi != nil {
			v := uint64(hi.Int64())
			phi = &v
		}
		alts = append(alts, uintRange(plo, phi))
	}
	return "( " + strings.Join(alts, " | ") + " )"
}

// uintRange is the decimal numbers in [lo, hi] (hi nil: unbounded, up to
// 19 digits).
func uintRange(lo uint64, hi *uint64) string {
	const maxDigits = 19
	dl := len(strconv.FormatUint(lo, 10))
	dh := maxDigits
	if hi != nil {
		dh = len(strconv.FormatUint(*hi, 10))
	}
	var alts []string
	for d := dl; d <= dh; d++ {
		a, b := uint64(0), uint64(math.MaxUint64)
		if d > 1 {
			a = pow10(d - 1)
		}
		if d < 20 {
			b = pow10(d) - 1
		}
		a = max(a, lo)
		if hi != nil {
			b = min(b, *hi)
		}
		if d == maxDigits && hi == nil {
			b = math.MaxInt64
		}
		if a > b {
			continue
		}
		alts = append(alts, digitRange(strconv.FormatUint(a, 10), fmt.Sprintf("%0*d", d, b)))
	}
	return "( " + strings.Join(alts, " | ") + " )"
}

func pow10(n int) uint64 {
	p := uint64(1)
	for range n {
		p *= 10
	}
	return p
}

// digitRange matches the digit strings of len(a) between a and b.
func digitRange(a, b string) string {
	if len(a) == 0 {
		return `""`
	}
	if a[0] == b[0] {
		return Quote(a[:1]) + " " + digitRange(a[1:], b[1:])
	}
	rest := len(a) - 1
	zeros, nines := strings.Repeat("0", rest), strings.Repeat("9", rest)
	if a[1:] == zeros && b[1:] == nines {
		return fmt.Sprintf("[%c-%c]%s", a[0], b[0], anyDigits(rest))
	}
	var alts []string
	loD, hiD := a[0], b[0]
	if a[1:] != zeros {
		alts = append(alts, Quote(a[:1])+" "+digitRange(a[1:], nines))
		loD++
	}
	top := ""
	if b[1:] != nines {
		top = Quote(b[:1]) + " " + digitRange(zeros, b[1:])
		hiD--
	}
	if loD <= hiD {
		alts = append(alts, fmt.Sprintf("[%c-%c]%s", loD, hiD, anyDigits(rest)))
	}
	if top != "" {
		alts = append(alts, top)
	}
	return "( " + strings.Join(alts, " | ") + " )"
}

func anyDigits(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" [0-9]{%d}", n)
}
