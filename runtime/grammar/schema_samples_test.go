package grammar_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tessera-llm/tessera/runtime/grammar"
	"github.com/tessera-llm/tessera/runtime/grammar/grammartest"
)

// TestSchemaSamplesValidate: random texts of the grammars of schemas with
// prefixItems, merged allOf, property counts and patternProperties, drawn
// byte by byte from what the machine allows, all validate against the
// schema with the independent validator.
func TestSchemaSamplesValidate(t *testing.T) {
	for _, schema := range []string{
		`{"type":"array","prefixItems":[{"type":"integer","minimum":0,"maximum":9},{"enum":["a","b"]}],"items":{"type":"boolean"},"maxItems":4}`,
		`{"type":"array","prefixItems":[{"type":"null"},{"const":1}],"items":false,"minItems":1}`,
		`{"type":"array","prefixItems":[{"type":"string","maxLength":3}],"minItems":3,"maxItems":5,"items":{"type":"integer","minimum":-3,"maximum":3}}`,
		`{"$defs":{"named":{"type":"object","properties":{"name":{"type":"string","maxLength":5}},"required":["name"]}},
		  "allOf":[{"$ref":"#/$defs/named"},{"properties":{"age":{"type":"integer","minimum":0,"maximum":120},"name":{"minLength":1}},"required":["age"]}],
		  "properties":{"tag":{"enum":["x","y"]}}}`,
		`{"allOf":[{"properties":{"a":{"type":"integer"},"b":{"type":"boolean"}},"additionalProperties":false},{"properties":{"a":{"minimum":1,"maximum":50},"c":{}},"required":["a"]}]}`,
		`{"type":"object","properties":{"a":{"const":1},"b":{"type":"boolean"},"c":{"type":"null"},"d":{"type":"integer"}},"required":["d"],"minProperties":2,"maxProperties":3}`,
		`{"type":"object","additionalProperties":{"type":"integer","minimum":0,"maximum":9},"maxProperties":3}`,
		`{"type":"object","patternProperties":{"^[a-z]{1,4}_id$":{"type":"integer","minimum":1}},"additionalProperties":false,"maxProperties":3}`,
	} {
		g, err := grammar.JSONSchema([]byte(schema), grammar.SchemaOptions{MaxString: 6, MaxItems: 4})
		if err != nil {
			t.Fatalf("%s: %v", schema, err)
		}
		v := grammartest.Validator(t, schema)
		m := grammar.NewMachine(g, nil)
		rng := rand.New(rand.NewPCG(7, uint64(len(schema))))
		for k := range 60 {
			text, ok := sample(m, rng, 600)
			if !ok {
				t.Fatalf("%s: sample %d ran past 600 bytes: %q", schema, k, text)
			}
			inst, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
			if err != nil {
				t.Fatalf("%s: sample %q is not JSON: %v", schema, text, err)
			}
			if err := v.Validate(inst); err != nil {
				t.Errorf("%s: sample %q does not validate: %v", schema, text, err)
			}
		}
	}
}

// sample draws a text of m's grammar byte by byte, ending as soon as it
// may with probability 1/3.
func sample(m *grammar.Machine, rng *rand.Rand, limit int) (string, bool) {
	var b []byte
	s := m.Start()
	for len(b) < limit {
		var next []byte
		for c := range 256 {
			if m.Advance(s, byte(c)) != grammar.Dead {
				next = append(next, byte(c))
			}
		}
		if m.CanEnd(s) && (len(next) == 0 || rng.IntN(3) == 0) {
			return string(b), true
		}
		c := next[rng.IntN(len(next))]
		b = append(b, c)
		s = m.Advance(s, c)
	}
	return string(b), false
}
