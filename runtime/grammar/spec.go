package grammar

import (
	"errors"
	"fmt"
)

// Spec describes a constraint in no API's terms: a JSON object, a JSON
// Schema, GBNF text, a regular expression or a choice of strings. The
// request formats (runtime/wire) read their requests' structured-output
// fields (OpenAI's response_format, vLLM's guided_*, Anthropic's
// output_config.format) into a Spec, so that this package knows grammars
// and nothing of the JSON that asks for them.
type Spec struct {
	// JSONObject holds the reply to a JSON object of any keys.
	JSONObject bool
	// Schema holds the reply to JSON that follows this JSON Schema.
	Schema []byte
	// GBNF is a grammar in llama.cpp's format (Parse).
	GBNF string
	// Regex is a regular expression the whole reply matches (Regex).
	Regex string
	// Choice holds the reply to one of these strings, exactly.
	Choice []string
}

// kinds is how many of the Spec's constraints are set: Compile takes at
// most one.
func (s Spec) kinds() int {
	n := 0
	for _, set := range []bool{s.JSONObject, len(s.Schema) > 0, s.GBNF != "", s.Regex != "", len(s.Choice) > 0} {
		if set {
			n++
		}
	}
	return n
}

// errSeveral is Compile's refusal of a Spec with more than one
// constraint: a reply can be held to one grammar.
var errSeveral = errors.New("a constraint is one of a JSON object, a JSON schema, a grammar, a regular expression and a choice")

// Compile builds the grammar s describes, or nil when it describes none.
func (s Spec) Compile() (*Grammar, error) {
	switch {
	case s.kinds() > 1:
		return nil, errSeveral
	case s.JSONObject:
		return JSONObject(SchemaOptions{}), nil
	case len(s.Schema) > 0:
		return JSONSchema(s.Schema, SchemaOptions{})
	case s.GBNF != "":
		return Parse(s.GBNF)
	case s.Regex != "":
		return Regex(s.Regex)
	case len(s.Choice) > 0:
		return choice(s.Choice)
	}
	return nil, nil
}

// choice is the grammar of exactly one of the strings.
func choice(options []string) (*Grammar, error) {
	alt := &node{kind: nAlt}
	size := 0
	for i, o := range options {
		if o == "" {
			return nil, fmt.Errorf("choice %d is empty", i)
		}
		size += len(o)
		alt.kids = append(alt.kids, &node{kind: nLit, lit: []byte(o)})
	}
	if size > MaxSource {
		return nil, budgetError("the choices are %d bytes, more than %d (MaxSource)", size, MaxSource)
	}
	return Parse("root ::= " + alt.gbnf() + "\n")
}
