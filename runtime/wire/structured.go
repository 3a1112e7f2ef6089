package wire

import (
	"bytes"
	"encoding/json"

	"github.com/tessera-llm/tessera/runtime/grammar"
)

// Fields are the structured-output fields of an OpenAI-style request, as
// its JSON spells them: OpenAI's response_format, and GBNF grammars,
// regular expressions, JSON schemas and choices under Tessera's and
// vLLM's names. Every home reads them here (Sampling embeds them), so
// that all take the same fields and refuse the same combinations; the
// grammar package sees only the grammar.Spec they describe.
type Fields struct {
	ResponseFormat *ResponseFormat `json:"response_format"`
	Grammar        string          `json:"grammar"`
	GuidedGrammar  string          `json:"guided_grammar"`
	Regex          string          `json:"regex"`
	GuidedRegex    string          `json:"guided_regex"`
	GuidedJSON     json.RawMessage `json:"guided_json"`
	GuidedChoice   []string        `json:"guided_choice"`
}

// ResponseFormat is OpenAI's response_format: {"type": "text"},
// {"type": "json_object"}, or {"type": "json_schema", "json_schema":
// {"name", "schema", "strict"}}.
type ResponseFormat struct {
	Type       string      `json:"type"`
	JSONSchema *JSONSchema `json:"json_schema"`
}

// JSONSchema is response_format's json_schema.
type JSONSchema struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
	Strict *bool           `json:"strict"`
}

// Compile builds the grammar that the fields ask for (at most one of
// them may be set), or nil when they ask for none. Its errors are
// *ParamError naming the field at fault.
func (f *Fields) Compile() (*grammar.Grammar, error) {
	type source struct {
		param string
		spec  grammar.Spec
	}
	var set []source
	if rf := f.ResponseFormat; rf != nil {
		switch rf.Type {
		case "", "text":
		case "json_object":
			set = append(set, source{"response_format", grammar.Spec{JSONObject: true}})
		case "json_schema":
			if rf.JSONSchema == nil || len(rf.JSONSchema.Schema) == 0 {
				return nil, paramError("response_format", "response_format of type json_schema needs json_schema.schema")
			}
			set = append(set, source{"response_format", grammar.Spec{Schema: rf.JSONSchema.Schema}})
		default:
			return nil, paramError("response_format", "response_format type %q is not one of text, json_object and json_schema", rf.Type)
		}
	}
	if b := bytes.TrimSpace(f.GuidedJSON); len(b) > 0 && string(b) != "null" {
		set = append(set, source{"guided_json", grammar.Spec{Schema: f.GuidedJSON}})
	}
	for _, g := range []struct{ param, src string }{{"grammar", f.Grammar}, {"guided_grammar", f.GuidedGrammar}} {
		if g.src != "" {
			set = append(set, source{g.param, grammar.Spec{GBNF: g.src}})
		}
	}
	for _, r := range []struct{ param, src string }{{"regex", f.Regex}, {"guided_regex", f.GuidedRegex}} {
		if r.src != "" {
			set = append(set, source{r.param, grammar.Spec{Regex: r.src}})
		}
	}
	if f.GuidedChoice != nil {
		if len(f.GuidedChoice) == 0 {
			return nil, paramError("guided_choice", "guided_choice must hold at least one string")
		}
		set = append(set, source{"guided_choice", grammar.Spec{Choice: f.GuidedChoice}})
	}
	switch len(set) {
	case 0:
		return nil, nil
	case 1:
	default:
		return nil, paramError(set[1].param, "%s and %s cannot be combined: give one constraint", set[0].param, set[1].param)
	}
	g, err := set[0].spec.Compile()
	if err != nil {
		return nil, paramError(set[0].param, "%s", err.Error())
	}
	return g, nil
}
