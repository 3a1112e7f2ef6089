// Package grammartest holds what the tests of constrained decoding share:
// an independent JSON Schema validator to check the engine's output with.
package grammartest

import (
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Validator compiles schema with santhosh-tekuri/jsonschema, formats
// asserted, so that outputs are checked by code that shares nothing with
// the grammar compiler.
func Validator(t testing.TB, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	v, err := c.Compile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return v
}
