package grammar

import (
	"strings"
	"testing"
)

func TestGBNFMatch(t *testing.T) {
	tests := []struct {
		name, src string
		yes, no   []string
	}{
		{"literal", `root ::= "ab"`, []string{"ab"}, []string{"", "a", "abc", "b"}},
		{"alternation", `root ::= "a" | "bc" | ""`, []string{"a", "bc", ""}, []string{"b", "abc"}},
		{"star", `root ::= "a"*`, []string{"", "a", "aaaa"}, []string{"b", "aab"}},
		{"plus", `root ::= ("ab")+`, []string{"ab", "abab"}, []string{"", "aba"}},
		{"optional", `root ::= "x" "y"? "z"`, []string{"xz", "xyz"}, []string{"xyyz", "x"}},
		{"counts", `root ::= [0-9]{2,3}`, []string{"12", "123"}, []string{"1", "1234", "ab"}},
		{"exact", `root ::= "a"{3}`, []string{"aaa"}, []string{"aa", "aaaa"}},
		{"at least", `root ::= "a"{2,}`, []string{"aa", "aaaaa"}, []string{"a"}},
		{"at most", `root ::= "a"{,2}`, []string{"", "a", "aa"}, []string{"aaa"}},
		{"class", `root ::= [a-cx]+`, []string{"abcx", "x"}, []string{"d", ""}},
		{"negated", `root ::= [^"\\]*`, []string{"abc", "é€😀", ""}, []string{`"`, `\`}},
		{"dot", `root ::= .`, []string{"a", "é", "😀", "\t"}, []string{"\n", "ab", ""}},
		{"escapes", `root ::= "\n\t\"\\\x41\u00e9\U0001F600"`, []string{"\n\t\"\\Aé😀"}, []string{"n"}},
		{"class escapes", `root ::= [\n\]\-]+`, []string{"\n]-"}, []string{"a"}},
		{"unicode range", `root ::= [α-ω]+`, []string{"αβω"}, []string{"a", "Α"}},
		{"multiline", "root ::= a\n  | b # comment\nb ::= \"b\"\na ::= (\n \"a\"\n \"a\" )", []string{"aa", "b"}, []string{"a"}},
		{"recursion", `root ::= "(" root ")" | ""`, []string{"", "()", "(())"}, []string{"(", "())"}},
		{"nested", `root ::= item ("," item)*
item ::= [a-z]+ | "[" root "]"`, []string{"a", "a,b", "[a,b],c", "[[x]]"}, []string{"", "a,", "[a"}},
		{"utf8 boundaries", `root ::= [\u007f-\u0800\uffff-\U00010000]+`, []string{"\u007f\u0080\u07ff\u0800\uffff\U00010000"}, []string{"\u0801", "\u007e"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := Parse(tt.src)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tt.yes {
				if !g.Match(s) {
					t.Errorf("%q should match", s)
				}
			}
			for _, s := range tt.no {
				if g.Match(s) {
					t.Errorf("%q should not match", s)
				}
			}
		})
	}
}

func TestGBNFErrors(t *testing.T) {
	tests := []struct{ src, want string }{
		{`root ::= a`, "undefined rule"},
		{`root ::= root "a"`, "left recursion"},
		{`root ::= ("a"?)*`, "left recursion"},
		{`root ::= "a`, "unterminated"},
		{`root ::= [a`, "unterminated"},
		{`foo ::= "a"`, `no "root"`},
		{`root ::= "a"{3,2}`, "repetition"},
		{`root ::= "a" root ::= "b"`, "twice"},
		{`root ::= [z-a]`, "backwards"},
	}
	for _, tt := range tests {
		_, err := Parse(tt.src)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q) = %v, want an error with %q", tt.src, err, tt.want)
		}
	}
}

// FuzzParse: any text either fails to parse or gives a grammar whose
// machine runs over any bytes without panicking.
func FuzzParse(f *testing.F) {
	for _, s := range []string{`root ::= "a" | [b-d]* ("x"{1,3})?`, `root ::= [^"\\] root | ""`, "root ::= .+\nx ::= root", `root ::= "\u00e9"`} {
		f.Add(s, "abc\xc3\xa9")
	}
	f.Fuzz(func(t *testing.T, src, text string) {
		g, err := Parse(src)
		if err != nil {
			return
		}
		g.Match(text)
		if re, err := Regex(src); err == nil {
			re.Match(text)
		}
	})
}
