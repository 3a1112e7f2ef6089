package grammar

import (
	"strings"
	"testing"
)

// A Spec compiles to the grammar of the one constraint it sets, none to
// nil, several to an error.
func TestSpec(t *testing.T) {
	for _, tt := range []struct {
		name      string
		spec      Spec
		match, no []string
	}{
		{"json object", Spec{JSONObject: true}, []string{`{"a": 1}`}, []string{`[1]`, `"x"`}},
		{"schema", Spec{Schema: []byte(`{"type":"integer"}`)}, []string{`42`}, []string{`"42"`}},
		{"gbnf", Spec{GBNF: `root ::= "yes" | "no"`}, []string{"yes", "no"}, []string{"maybe"}},
		{"regex", Spec{Regex: `[0-9]{3}`}, []string{"123"}, []string{"12", "abc"}},
		{"choice", Spec{Choice: []string{"red", `gr"een`, "a|b", "red wine"}}, []string{"red", `gr"een`, "a|b", "red wine"}, []string{"a", "b", "redwine", "re"}},
	} {
		g, err := tt.spec.Compile()
		if err != nil || g == nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		for _, s := range tt.match {
			if !g.Match(s) {
				t.Errorf("%s: %q does not match", tt.name, s)
			}
		}
		for _, s := range tt.no {
			if g.Match(s) {
				t.Errorf("%s: %q matches", tt.name, s)
			}
		}
	}
	if g, err := (Spec{}).Compile(); g != nil || err != nil {
		t.Errorf("an empty spec: %v, %v", g, err)
	}
	if _, err := (Spec{Regex: "a", GBNF: `root ::= "a"`}).Compile(); err == nil {
		t.Error("a spec of two constraints compiled")
	}
	if _, err := (Spec{Choice: []string{"a", ""}}).Compile(); err == nil || !strings.Contains(err.Error(), "choice 1 is empty") {
		t.Errorf("an empty choice: %v", err)
	}
	if _, err := (Spec{Choice: []string{strings.Repeat("x", MaxSource+1)}}).Compile(); err == nil {
		t.Error("choices past MaxSource compiled")
	}
}
