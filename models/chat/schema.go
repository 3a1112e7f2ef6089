package chat

import (
	"bytes"
	"encoding/json"
	"strings"
)

// What the XML family needs to know of a tool's parameters schema: its
// properties in the order the schema lists them (the order a grammar
// writes them), which are required, and whether a property's value is
// text or JSON. Qwen3-Coder writes every value bare, so "5" is the
// number 5 only where the schema says the parameter is a number.

// paramSchema is a parameters schema, read.
type paramSchema struct {
	root     map[string]json.RawMessage
	names    []string                   // the properties, in the schema's order
	props    map[string]json.RawMessage // property → its schema
	required map[string]bool
}

func readParams(raw json.RawMessage) *paramSchema {
	s := &paramSchema{props: map[string]json.RawMessage{}, required: map[string]bool{}}
	json.Unmarshal(raw, &s.root)
	s.names, s.props = orderedObject(s.root["properties"])
	var req []string
	json.Unmarshal(s.root["required"], &req)
	for _, r := range req {
		s.required[r] = true
	}
	return s
}

// orderedObject reads a JSON object's keys in order, and their values.
func orderedObject(raw json.RawMessage) ([]string, map[string]json.RawMessage) {
	vals := map[string]json.RawMessage{}
	if json.Unmarshal(raw, &vals) != nil {
		return nil, vals
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.Token() // {
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			break
		}
		k, _ := t.(string)
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			break
		}
		if !contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys, vals
}

// isText reports whether property name takes text: its schema says
// string (alone, among its types, or in a branch of anyOf/oneOf), or
// says no type at all, as vLLM's and llama.cpp's Qwen3-Coder parsers
// read it. An unknown property is text too.
func (s *paramSchema) isText(name string) bool {
	prop, ok := s.props[name]
	if !ok {
		return true
	}
	return s.textSchema(prop, 0)
}

func (s *paramSchema) textSchema(raw json.RawMessage, depth int) bool {
	var sch map[string]json.RawMessage
	if json.Unmarshal(raw, &sch) != nil || depth > 8 {
		return true
	}
	if ref, ok := s.ref(sch); ok {
		return s.textSchema(ref, depth+1)
	}
	if t, ok := sch["type"]; ok {
		var one string
		if json.Unmarshal(t, &one) == nil {
			return one == "string"
		}
		var many []string
		json.Unmarshal(t, &many)
		return contains(many, "string")
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		var alts []json.RawMessage
		if json.Unmarshal(sch[k], &alts) == nil && len(alts) > 0 {
			for _, a := range alts {
				if s.textSchema(a, depth+1) && !isNullSchema(a) {
					return true
				}
			}
			return false
		}
	}
	for _, k := range []string{"enum", "const"} {
		if v, ok := sch[k]; ok {
			var vals []any
			if k == "const" {
				vals = []any{nil}
				json.Unmarshal(v, &vals[0])
			} else {
				json.Unmarshal(v, &vals)
			}
			for _, x := range vals {
				if _, str := x.(string); !str {
					return false
				}
			}
			return true
		}
	}
	return true
}

func isNullSchema(raw json.RawMessage) bool {
	var sch struct{ Type string }
	return json.Unmarshal(raw, &sch) == nil && sch.Type == "null"
}

// ref resolves a schema's local $ref into the parameters' $defs or
// definitions.
func (s *paramSchema) ref(sch map[string]json.RawMessage) (json.RawMessage, bool) {
	var ref string
	if json.Unmarshal(sch["$ref"], &ref) != nil {
		return nil, false
	}
	for _, k := range []string{"$defs", "definitions"} {
		if name, ok := strings.CutPrefix(ref, "#/"+k+"/"); ok {
			var defs map[string]json.RawMessage
			json.Unmarshal(s.root[k], &defs)
			d, ok := defs[name]
			return d, ok
		}
	}
	return nil, false
}

// valueSchema is a property's schema with the parameters' $defs and
// definitions beside it, so that its $refs resolve when it is compiled
// on its own.
func (s *paramSchema) valueSchema(name string) []byte {
	var sch map[string]json.RawMessage
	if json.Unmarshal(s.props[name], &sch) != nil || sch == nil {
		return []byte(`{}`)
	}
	for _, k := range []string{"$defs", "definitions"} {
		if d, ok := s.root[k]; ok {
			if _, own := sch[k]; !own {
				sch[k] = d
			}
		}
	}
	b, _ := json.Marshal(sch)
	return b
}

// enum is a text property's list of allowed values, if it has one.
func (s *paramSchema) enum(name string) []string {
	var sch map[string]json.RawMessage
	json.Unmarshal(s.props[name], &sch)
	if r, ok := s.ref(sch); ok {
		sch = nil
		json.Unmarshal(r, &sch)
	}
	var vals []string
	if json.Unmarshal(sch["enum"], &vals) == nil && len(vals) > 0 {
		return vals
	}
	var c string
	if json.Unmarshal(sch["const"], &c) == nil {
		return []string{c}
	}
	return nil
}

// additional reports whether the schema takes properties it does not
// list: an object schema without properties that does not forbid them.
func (s *paramSchema) additional() bool {
	return len(s.names) == 0 && string(s.root["additionalProperties"]) != "false"
}
