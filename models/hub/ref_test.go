package hub

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want Ref
		str  string
	}{
		{"hf.co/bartowski/SmolLM2-135M-Instruct-GGUF:Q4_K_M", Ref{Repo: "bartowski/SmolLM2-135M-Instruct-GGUF", Quant: "Q4_K_M"}, "hf.co/bartowski/SmolLM2-135M-Instruct-GGUF:Q4_K_M"},
		{"hf.co/ggml-org/test-model-stories260K:f32", Ref{Repo: "ggml-org/test-model-stories260K", Quant: "F32"}, "hf.co/ggml-org/test-model-stories260K:F32"},
		{"huggingface.co/o/r:q8_0", Ref{Repo: "o/r", Quant: "Q8_0"}, "hf.co/o/r:Q8_0"},
		{"o/r:Q4_0", Ref{Repo: "o/r", Quant: "Q4_0"}, "hf.co/o/r:Q4_0"},
		{"hf.co/o/r", Ref{Repo: "o/r"}, "hf.co/o/r"},
		{"hf.co/o/r/m-Q4_0.gguf", Ref{Repo: "o/r", File: "m-Q4_0.gguf"}, "hf.co/o/r/m-Q4_0.gguf"},
		{"o/r/sub/m.gguf", Ref{Repo: "o/r", File: "sub/m.gguf"}, "hf.co/o/r/sub/m.gguf"},
		{"hf.co/o/r/README.md", Ref{Repo: "o/r", File: "README.md"}, "hf.co/o/r/README.md"},
		{"https://example.com/models/m.gguf#frag", Ref{URL: "https://example.com/models/m.gguf"}, "https://example.com/models/m.gguf"},
		{"  hf.co/o/r:Q4_0 ", Ref{Repo: "o/r", Quant: "Q4_0"}, "hf.co/o/r:Q4_0"},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want || got.String() != tt.str {
			t.Errorf("Parse(%q) = %+v (%s), want %+v (%s)", tt.in, got, got, tt.want, tt.str)
		}
	}
	for _, in := range []string{
		"", "model.gguf", "o/r", "o/r.gguf", "./o/r/m.gguf", "../shared/models/x.gguf", "/abs/o/r/m.gguf",
		"~/o/r/m.gguf", `o\r\m.gguf`, "o/r/m.bin", "o/r/../m.gguf", "hf.co/o/r/a//b.gguf", "hf.co/o", "o/r:Q4/m.gguf",
		"o/r:", "hf.co/o/r:Q 4", "o w/r/m.gguf", "https://example.com/", "hf.co/o/r/C:/m.gguf",
	} {
		if r, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) = %+v, want an error", in, r)
		}
	}
}

func TestPick(t *testing.T) {
	listing := []string{".gitattributes", "README.md", "m-Q4_K_M.gguf", "m-Q4_K_S.gguf", "m-Q4_0.gguf",
		"m-Q4_0_4_4.gguf", "m-Q8_0.gguf", "m-f16.gguf", "mmproj-m-f16.gguf",
		"big/m-Q6_K-00001-of-00002.gguf", "big/m-Q6_K-00002-of-00002.gguf"}
	tests := []struct {
		listing     []string
		quant, want string
		err         string
	}{
		{listing, "Q4_K_M", "m-Q4_K_M.gguf", ""},
		{listing, "Q4_0", "m-Q4_0.gguf", ""}, // not Q4_0_4_4
		{listing, "Q8_0", "m-Q8_0.gguf", ""},
		{listing, "F16", "m-f16.gguf", ""}, // not the projector
		{listing, "Q6_K", "big/m-Q6_K-00001-of-00002.gguf", ""},
		{listing, "Q4_K", "", "matches 2 files"},
		{listing, "IQ2_XS", "", "no GGUF file matches"},
		{listing, "", "m-Q4_K_M.gguf", ""},
		{[]string{"a-Q8_0.gguf", "a-F16.gguf"}, "", "a-Q8_0.gguf", ""},
		{[]string{"stories260K-f32.gguf"}, "", "stories260K-f32.gguf", ""},
		{[]string{"zeta.gguf", "alpha.gguf"}, "", "alpha.gguf", ""},
		{[]string{"README.md", "model.safetensors"}, "", "", "no GGUF file"},
	}
	for _, tt := range tests {
		got, note, err := pick(tt.listing, tt.quant)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("pick(%v, %q) = %q, %v; want an error with %q", tt.listing, tt.quant, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("pick(%v, %q) = %q, %v; want %q", tt.listing, tt.quant, got, err, tt.want)
		}
		if tt.quant == "" && !strings.Contains(note, "picked "+tt.want) {
			t.Errorf("pick(%v) says %q, not which file it picked", tt.listing, note)
		}
	}
}

func TestShardNames(t *testing.T) {
	got := shardNames("d/m-00002-of-00003.gguf", nil)
	want := []string{"d/m-00001-of-00003.gguf", "d/m-00002-of-00003.gguf", "d/m-00003-of-00003.gguf"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("shardNames = %v, want %v", got, want)
	}
	if got := shardNames("m.gguf", nil); len(got) != 1 || got[0] != "m.gguf" {
		t.Errorf("a whole file: %v", got)
	}
	if got := shardNames("m-00001-of-00002.gguf", []string{"m-00001-of-00002.gguf"}); got != nil {
		t.Errorf("a missing shard: %v, want nil", got)
	}
}
