package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Fields are the structured-output fields of an OpenAI-style request, as
// its JSON spells them: OpenAI's response_format, and GBNF grammars,
// regular expressions and JSON schemas under Tessera's and vLLM's names.
// The HTTP server and the browser's JavaScript API both read them, so that
// both take the same fields and refuse the same combinations.
type Fields struct {
	ResponseFormat *ResponseFormat `json:"response_format"`
	Grammar        string          `json:"grammar"`
	GuidedGrammar  string          `json:"guided_grammar"`
	Regex          string          `json:"regex"`
	GuidedRegex    string          `json:"guided_regex"`
	GuidedJSON     json.RawMessage `json:"guided_json"`
}

// ResponseFormat is OpenAI's response_format: {"type": "text"},
// {"type": "json_object"}, or {"type": "json_schema", "json_schema":
// {"name", "schema", "strict"}}.
type ResponseFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict *bool           `json:"strict"`
	} `json:"json_schema"`
}

// FieldError is a structured-output field that cannot be used: Param
// names it as the request spells it.
type FieldError struct {
	Param string
	Msg   string
}

func (e *FieldError) Error() string { return e.Msg }

func fieldError(param, format string, args ...any) error {
	return &FieldError{Param: param, Msg: fmt.Sprintf(format, args...)}
}

// Compile builds the grammar that the fields ask for (at most one of
// them may be set), or nil when they ask for none. Its errors are
// *FieldError.
func (f *Fields) Compile() (*Grammar, error) {
	type source struct {
		param string
		build func() (*Grammar, error)
	}
	var set []source
	if rf := f.ResponseFormat; rf != nil {
		switch rf.Type {
		case "", "text":
		case "json_object":
			set = append(set, source{"response_format", func() (*Grammar, error) { return JSONObject(SchemaOptions{}), nil }})
		case "json_schema":
			if rf.JSONSchema == nil || len(rf.JSONSchema.Schema) == 0 {
				return nil, fieldError("response_format", "response_format of type json_schema needs json_schema.schema")
			}
			schema := rf.JSONSchema.Schema
			set = append(set, source{"response_format", func() (*Grammar, error) { return JSONSchema(schema, SchemaOptions{}) }})
		default:
			return nil, fieldError("response_format", "response_format type %q is not one of text, json_object and json_schema", rf.Type)
		}
	}
	if b := bytes.TrimSpace(f.GuidedJSON); len(b) > 0 && string(b) != "null" {
		set = append(set, source{"guided_json", func() (*Grammar, error) { return JSONSchema(f.GuidedJSON, SchemaOptions{}) }})
	}
	for _, g := range []struct{ param, src string }{{"grammar", f.Grammar}, {"guided_grammar", f.GuidedGrammar}} {
		if g.src != "" {
			src := g.src
			set = append(set, source{g.param, func() (*Grammar, error) { return Parse(src) }})
		}
	}
	for _, r := range []struct{ param, src string }{{"regex", f.Regex}, {"guided_regex", f.GuidedRegex}} {
		if r.src != "" {
			src := r.src
			set = append(set, source{r.param, func() (*Grammar, error) { return Regex(src) }})
		}
	}
	switch len(set) {
	case 0:
		return nil, nil
	case 1:
	default:
		return nil, fieldError(set[1].param, "%s and %s cannot be combined: give one constraint", set[0].param, set[1].param)
	}
	g, err := set[0].build()
	if err != nil {
		return nil, fieldError(set[0].param, "%s", err.Error())
	}
	return g, nil
}
