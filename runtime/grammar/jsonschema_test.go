package grammar

import (
	"errors"
	"strings"
	"testing"
)

func TestJSONSchemaMatch(t *testing.T) {
	tests := []struct {
		name, schema string
		yes, no      []string
	}{
		{"string", `{"type":"string"}`, []string{`""`, `"a b"`, `"\"\\\n\u00e9"`, `"é"`}, []string{`a`, `"a`, `"\x"`, "\"\x01\"", `"\ud800"`}},
		{"integer", `{"type":"integer"}`, []string{`0`, `-12`, `123`}, []string{`01`, `1.5`, `-`, `+1`}},
		{"number", `{"type":"number"}`, []string{`0`, `-1.25`, `3e10`, `2.5E-3`}, []string{`.5`, `1.`, `00`}},
		{"bool null", `{"type":["boolean","null"]}`, []string{`true`, `false`, `null`}, []string{`1`}},
		{"enum", `{"enum":["red","green",3,null]}`, []string{`"red"`, `3`, `null`}, []string{`"blue"`}},
		{"const", `{"const":{"a":[1,2]}}`, []string{`{"a":[1,2]}`}, []string{`{"a":[1]}`}},
		{"object", `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["a"]}`,
			[]string{`{"a":1}`, `{"a":1,"b":"x"}`, `{ "a": 1, "b": "x" }`, "{\n  \"a\": 1\n}"}, []string{`{}`, `{"b":"x"}`, `{"a":1,}`, `{"b":"x","a":1}`, `{"a":1,"c":2}`}},
		{"all optional", `{"properties":{"a":{"type":"integer"},"b":{"type":"integer"},"c":{"type":"integer"}}}`,
			[]string{`{}`, `{"b":1}`, `{"a":1,"c":3}`, `{"a":1,"b":2,"c":3}`}, []string{`{,"b":1}`, `{"a":1,}`, `{"a":1"b":2}`}},
		{"array", `{"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3}`, []string{`[1]`, `[1,2,3]`, `[ 1 , 2 ]`}, []string{`[]`, `[1,2,3,4]`, `[1,]`}},
		{"empty array ok", `{"type":"array","maxItems":2}`, []string{`[]`, `[1,"a"]`, `[{"x":[]}]`}, []string{`[1,2,3]`}},
		{"integer range", `{"type":"integer","minimum":-15,"maximum":120}`, []string{`-15`, `-1`, `0`, `9`, `99`, `120`, `100`}, []string{`-16`, `121`, `200`, `-0`, `007`}},
		{"exclusive", `{"type":"integer","exclusiveMinimum":5,"exclusiveMaximum":10}`, []string{`6`, `9`}, []string{`5`, `10`}},
		{"at least", `{"type":"integer","minimum":37}`, []string{`37`, `99`, `100`, `123456`}, []string{`36`, `0`, `-1`}},
		{"at most", `{"type":"integer","maximum":-3}`, []string{`-3`, `-10`, `-999`}, []string{`-2`, `0`, `5`}},
		{"number range", `{"type":"number","minimum":0,"maximum":10}`, []string{`0`, `3.25`, `9.999`, `10`, `10.0`}, []string{`10.5`, `-1`, `11`}},
		{"date", `{"type":"string","format":"date"}`, []string{`"2024-02-28"`, `"1999-12-31"`, `"2020-04-30"`}, []string{`"2024-02-30"`, `"2024-04-31"`, `"2024-13-01"`, `"2024-00-10"`}},
		{"date-time", `{"format":"date-time"}`, []string{`"2024-01-02T03:04:05Z"`, `"2024-01-02T23:59:59.123+05:30"`}, []string{`"2024-01-02T24:00:00Z"`, `"2024-01-02 03:04:05Z"`}},
		{"uuid", `{"format":"uuid"}`, []string{`"123e4567-e89b-12d3-a456-426614174000"`}, []string{`"123e4567e89b12d3a456426614174000"`}},
		{"email", `{"format":"email"}`, []string{`"a.b@example.com"`, `"x+y@a-b.c.org"`}, []string{`"a@b"`, `"@b.com"`, `"a..b@c.com"`, `"a@-b.com"`}},
		{"pattern", `{"type":"string","pattern":"^[A-Z]{2}-\\d{3}$"}`, []string{`"AB-123"`}, []string{`"AB-12"`, `"ab-123"`}},
		{"pattern quote", `{"type":"string","pattern":"a\"b[\\\\x]"}`, []string{`"a\"b\\"`, `"a\"bx"`}, []string{`"a"b\"`}},
		{"lengths", `{"type":"string","minLength":2,"maxLength":3}`, []string{`"ab"`, `"a\nb"`, `"éèê"`}, []string{`"a"`, `"abcd"`}},
		{"anyOf", `{"anyOf":[{"type":"integer"},{"type":"string","maxLength":1}]}`, []string{`1`, `"a"`}, []string{`"ab"`, `true`}},
		{"ref", `{"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["v","next"]}},"$ref":"#/$defs/node"}`,
			[]string{`{"v":1,"next":null}`, `{"v":1,"next":{"v":2,"next":null}}`}, []string{`{"v":1}`}},
		{"map", `{"type":"object","additionalProperties":{"type":"integer"}}`, []string{`{}`, `{"a":1,"b":2}`}, []string{`{"a":"x"}`}},
		{"prefixItems", `{"type":"array","prefixItems":[{"type":"integer"},{"type":"string"}],"items":{"type":"boolean"},"maxItems":4}`,
			[]string{`[]`, `[1]`, `[1,"a"]`, `[1,"a",true]`, `[1,"a",true,false]`}, []string{`["a"]`, `[1,2]`, `[1,"a",3]`, `[1,"a",true,true,true]`, `[true]`}},
		{"prefixItems closed", `{"prefixItems":[{"const":1},{"const":2}],"items":false,"minItems":1}`,
			[]string{`[1]`, `[1,2]`}, []string{`[]`, `[1,2,3]`, `[2]`}},
		{"prefixItems min", `{"type":"array","prefixItems":[{"type":"null"}],"minItems":3,"items":{"const":0}}`,
			[]string{`[null,0,0]`, `[null,0,0,0]`}, []string{`[null,0]`, `[null]`, `[0,0,0]`}},
		{"allOf merged", `{"$defs":{"named":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}},"allOf":[{"$ref":"#/$defs/named"},{"properties":{"age":{"type":"integer"},"name":{"type":"string"}},"required":["age"]}],"properties":{"tag":{"const":"x"}}}`,
			[]string{`{"name":"a","age":3}`, `{"name":"a","age":3,"tag":"x"}`}, []string{`{"name":"a"}`, `{"age":3}`, `{"age":3,"name":"a"}`, `{"name":"a","age":3,"tag":"y"}`}},
		{"allOf closed", `{"allOf":[{"properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"additionalProperties":false},{"properties":{"a":{"minimum":1},"c":{}},"required":["a"]}]}`,
			[]string{`{"a":1}`, `{"a":5,"b":2}`}, []string{`{"a":0}`, `{"a":1,"c":2}`, `{}`}},
		{"allOf one", `{"allOf":[{"type":"integer","maximum":3}]}`, []string{`3`}, []string{`4`}},
		{"property counts", `{"type":"object","properties":{"a":{"const":1},"b":{"const":2},"c":{"const":3}},"minProperties":1,"maxProperties":2}`,
			[]string{`{"a":1}`, `{"c":3}`, `{"a":1,"c":3}`, `{"b":2,"c":3}`}, []string{`{}`, `{"a":1,"b":2,"c":3}`}},
		{"map count", `{"type":"object","additionalProperties":{"type":"integer"},"maxProperties":2}`, []string{`{}`, `{"x":1,"y":2}`}, []string{`{"x":1,"y":2,"z":3}`}},
		{"patternProperties", `{"type":"object","patternProperties":{"^[a-z]{1,3}_id$":{"type":"integer"}},"maxProperties":2}`,
			[]string{`{}`, `{"ab_id":1}`, `{"a_id":1,"xyz_id":2}`}, []string{`{"ABC_id":1}`, `{"a_id":"x"}`, `{"a_id":1,"b_id":2,"c_id":3}`}},
		{"any object", `{"type":"object"}`, []string{`{}`, `{"a":[1,{"b":null}],"c":"d"}`}, []string{`[]`, `{"a"}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := JSONSchema([]byte(tt.schema), SchemaOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tt.yes {
				if !g.Match(s) {
					t.Errorf("%s should match\n%s", s, g.Source())
				}
			}
			for _, s := range tt.no {
				if g.Match(s) {
					t.Errorf("%s should not match", s)
				}
			}
		})
	}
}

func TestJSONSchemaErrors(t *testing.T) {
	tests := []struct{ schema, ptr, kw string }{
		{`{"type":"object","properties":{"a":{"type":"string","propertyNames":{}}}}`, "/properties/a", "propertyNames"},
		{`{"not":{}}`, "", "not"},
		{`{"type":"array","items":{"type":"string","format":"uri"}}`, "/items", "format"},
		{`{"type":"array","uniqueItems":true}`, "", "uniqueItems"},
		{`{"allOf":[{"type":"integer"},{"type":"object"}]}`, "/allOf/0", "type"},
		{`{"allOf":[{"properties":{"a":{}}},{"anyOf":[{}]}]}`, "/allOf/1", "anyOf"},
		{`{"allOf":[{"properties":{"a":{}},"required":["a"]},{"properties":{"b":{}},"additionalProperties":false}]}`, "/allOf/1", "additionalProperties"},
		{`{"allOf":[{"properties":{"a":{"type":"integer"}}},{"properties":{"a":{"type":"string"}}}]}`, "/allOf/1/properties/a", "type"},
		{`{"type":"object","properties":{"a":{},"b":{}},"required":["a","b"],"maxProperties":1}`, "", "maxProperties"},
		{`{"type":"object","properties":{"a":{}},"minProperties":2}`, "", "minProperties"},
		{`{"type":"object","additionalProperties":{"type":"integer"},"minProperties":1}`, "", "minProperties"},
		{`{"type":"object","patternProperties":{"^a":{},"^b":{}}}`, "", "patternProperties"},
		{`{"type":"object","patternProperties":{"^a(":{}}}`, "/patternProperties", "^a("},
		{`{"type":"array","prefixItems":[{"type":"integer"}],"items":false,"minItems":2}`, "", "minItems"},
		{`{"type":"array","prefixItems":[{"format":"uri"}]}`, "/prefixItems/0", "format"},
		{`{"$ref":"https://example.com/s.json"}`, "", "$ref"},
		{`{"type":"number","minimum":-1.5}`, "", "minimum"},
		{`{"type":"strin"}`, "", "type"},
		{`{"anyOf":[{"type":"integer"},{"if":{}}]}`, "/anyOf/1", "if"},
	}
	for _, tt := range tests {
		_, err := JSONSchema([]byte(tt.schema), SchemaOptions{})
		var se *SchemaError
		if !errors.As(err, &se) || se.Pointer != tt.ptr || se.Keyword != tt.kw {
			t.Errorf("%s: %v, want keyword %q at %q", tt.schema, err, tt.kw, tt.ptr)
		}
	}
	if _, err := JSONSchema([]byte(`{"type":`), SchemaOptions{}); err == nil || !strings.Contains(err.Error(), "not JSON") {
		t.Errorf("bad JSON: %v", err)
	}
}

func TestRegex(t *testing.T) {
	tests := []struct {
		re      string
		yes, no []string
	}{
		{`^\d{3}-\d{4}$`, []string{"555-1234"}, []string{"5551234", "55-1234"}},
		{`(cat|dog)s?`, []string{"cat", "dogs"}, []string{"cats!", "bird"}},
		{`[A-Za-z_][A-Za-z0-9_]*`, []string{"x", "_a9"}, []string{"9a", ""}},
		{`a.c`, []string{"abc", "a€c"}, []string{"a\nc", "ac"}},
		{`\w+@\w+\.com`, []string{"me@site.com"}, []string{"me@site.org"}},
		{`(?:ab)+c{1,2}?`, []string{"abc", "ababcc"}, []string{"c", "abccc"}},
		{`[^\s,]+(,[^\s,]+)*`, []string{"a,b,c"}, []string{"a,,b", "a b"}},
		{`\u00e9\x41\.`, []string{"éA."}, []string{"éAx"}},
		{`(?P<year>\d{4})`, []string{"2024"}, []string{"24"}},
	}
	for _, tt := range tests {
		g, err := Regex(tt.re)
		if err != nil {
			t.Fatalf("%s: %v", tt.re, err)
		}
		for _, s := range tt.yes {
			if !g.Match(s) {
				t.Errorf("%s should match %q\n%s", tt.re, s, g.Source())
			}
		}
		for _, s := range tt.no {
			if g.Match(s) {
				t.Errorf("%s should not match %q", tt.re, s)
			}
		}
	}
	for _, re := range []string{`(a)\1`, `a(?=b)`, `\bword`, `a^b`, `(ab`, `*a`} {
		if _, err := Regex(re); err == nil {
			t.Errorf("Regex(%q) should fail", re)
		}
	}
}
