package grammar

import (
	"context"
	"errors"
	"testing"
)

// The fuzzers feed what a request may send: GBNF, regular expressions and
// JSON Schemas, and then text and token masks over the grammar they
// compile to. Every input either fails to compile or gives a machine
// that stays within its limits (small ones here, so that a fuzzer's
// worker never holds much) and whose masks agree with feeding each token
// alone. `make fuzz` runs them; what they found is kept in
// testdata/fuzz as regression cases that `go test` runs.

// fuzzLimits are the machine's limits under the fuzzers.
var fuzzLimits = Limits{Bytes: 8 << 20, MaskBytes: 1 << 20, Work: 1 << 22}

// fuzzVocab is a vocabulary of the pieces grammars are made of, with
// multi-byte characters and a cut one.
var fuzzVocab = [][]byte{
	[]byte("a"), []byte("ab"), []byte("abc"), []byte("b"), []byte("{"), []byte("}"), []byte("{\""), []byte("\":"),
	[]byte("\""), []byte(","), []byte("["), []byte("]"), []byte("0"), []byte("12"), []byte("-"), []byte("."),
	[]byte(" "), []byte("\n"), []byte("true"), []byte("null"), []byte("é"), []byte("中"), []byte("\xe4"), []byte("\\"),
	[]byte("x"), []byte("aaaa"), nil, // the last: EOS
}

// checkMachine walks g over text with masks at each byte boundary,
// comparing each mask with feeding every token alone, as long as the
// machine lives; a machine that runs out must say it is a budget.
func checkMachine(t *testing.T, g *Grammar, text string) {
	ends := []int{len(fuzzVocab) - 1}
	idx := NewIndex(len(fuzzVocab), func(id int) []byte { return fuzzVocab[id] }, ends)
	m := NewMachineWith(g, idx, fuzzLimits)
	s := m.Start()
	for i := 0; i <= len(text) && s != Dead; i++ {
		mask, err := m.Mask(context.Background(), s)
		if err != nil {
			if !errors.Is(err, ErrBudget) {
				t.Fatalf("Mask: %v", err)
			}
			break
		}
		if m.Bytes() > fuzzLimits.Bytes+fuzzLimits.MaskBytes {
			t.Fatalf("the machine holds %d bytes", m.Bytes())
		}
		want := brute(m, s, fuzzVocab, ends)
		if m.Err() != nil {
			break
		}
		for id := range fuzzVocab {
			if Allowed(mask, id) != Allowed(want, id) {
				t.Fatalf("at byte %d, token %q: mask %v, fed alone %v", i, fuzzVocab[id], Allowed(mask, id), Allowed(want, id))
			}
		}
		if i < len(text) {
			s = m.Advance(s, text[i])
		}
	}
	if err := m.Err(); err != nil && !errors.Is(err, ErrBudget) {
		t.Fatalf("the machine ended for another reason than a budget: %v", err)
	}
}

// FuzzGBNF: any GBNF text and any text over its grammar.
func FuzzGBNF(f *testing.F) {
	for _, s := range []string{
		`root ::= "a" | [b-d]* ("x"{1,3})?`,
		"root ::= x{0,3}\nx ::= (\"a\"? \"b\"?){2}",
		`root ::= (("a"{0,20}){0,20}){0,20}`,
		`root ::= [^"\\] root | ""`,
		`root ::= "{" ( [a-z]+ ":" [0-9]{1,3} ( "," [a-z]+ ":" [0-9]{1,3} )* )? "}"`,
	} {
		f.Add(s, "aab{x:12}")
	}
	f.Fuzz(func(t *testing.T, src, text string) {
		g, err := Parse(src)
		if err != nil {
			return
		}
		checkMachine(t, g, text)
	})
}

// FuzzRegex: any regular expression and any text over its grammar.
func FuzzRegex(f *testing.F) {
	for _, s := range []string{`[a-z]{2,5}\d?`, `((a?){10}){10}`, `(ab|a)*b`, `\w+@\w+\.com`, `[^\n]{0,8}`, `(?:x|中)+é?`} {
		f.Add(s, "aabab")
	}
	f.Fuzz(func(t *testing.T, re, text string) {
		g, err := Regex(re)
		if err != nil {
			return
		}
		checkMachine(t, g, text)
	})
}

// FuzzJSONSchema: any JSON Schema and any text over its grammar.
func FuzzJSONSchema(f *testing.F) {
	for _, s := range []string{
		`{"type":"object","properties":{"a":{"type":"string","maxLength":3},"b":{"type":"array","items":{"type":"integer"},"maxItems":2}},"required":["a"]}`,
		`{"anyOf":[{"type":"null"},{"type":"boolean"},{"enum":["x",1]}]}`,
		`{"$defs":{"n":{"type":"array","items":{"$ref":"#/$defs/n"}}},"$ref":"#/$defs/n"}`,
		`{"type":"string","pattern":"^(a|b){0,4}$"}`,
		`{"type":"object","additionalProperties":{"type":"integer","minimum":0,"maximum":99},"maxProperties":2}`,
	} {
		f.Add(s, `{"a":"ab","b":[1,2]}`)
	}
	f.Fuzz(func(t *testing.T, schema, text string) {
		g, err := JSONSchema([]byte(schema), SchemaOptions{MaxString: 16, MaxItems: 4})
		if err != nil {
			return
		}
		checkMachine(t, g, text)
	})
}
