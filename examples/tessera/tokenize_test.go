package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models/gguf"
)

var sharedTokenizers = filepath.Join("..", "..", "..", "shared", "tokenizers")

func runCLIInput(stdin string, args ...string) (code int, stdout, stderr string) {
	var out, errb strings.Builder
	code = cli(context.Background(), args, &env{stdout: &out, stderr: &errb, stdin: strings.NewReader(stdin)})
	return code, out.String(), errb.String()
}

func parseIDs(t *testing.T, out string) []int {
	t.Helper()
	var ids []int
	if err := json.Unmarshal([]byte(out), &ids); err != nil {
		t.Fatalf("output %q is not a JSON array of ids: %v", out, err)
	}
	return ids
}

// TestTokenize encodes with every kind of tokenizer file, against ids
// from the shared references and the llama2.c tokenizer's own encoding.
func TestTokenize(t *testing.T) {
	if _, err := os.Stat(sharedTokenizers); err != nil {
		t.Skip(err)
	}
	tests := []struct {
		args []string
		want []int
	}{
		{[]string{"--tokenizer", filepath.Join(sharedTokenizers, "qwen3"), "Hello, world!"}, []int{9707, 11, 1879, 0}},
		{[]string{"--tokenizer", filepath.Join(sharedTokenizers, "llama3", "tokenizer.json"), "Hello, world!"}, []int{9906, 11, 1917, 0}},
		{[]string{"--tokenizer", filepath.Join(sharedTokenizers, "gemma3"), "--special", "Hello, world!"}, []int{2, 9259, 236764, 1902, 236888}},
		// Without --special, special tokens in the text are plain text.
		{[]string{"--tokenizer", filepath.Join(sharedTokenizers, "qwen3"), "--special", "<|im_start|>user"}, []int{151644, 872}},
		{[]string{"--tokenizer", filepath.Join(shared, "tok512.bin"), "Once upon a time"}, nil},
		{[]string{"--tokenizer", filepath.Join(shared, "tok512.model"), "Once upon a time"}, nil},
		{[]string{"--tokenizer", filepath.Join(shared, "stories260K.gguf"), "Once upon a time"}, nil},
	}
	var storyIDs []int
	for _, tt := range tests {
		code, out, errOut := runCLI(append([]string{"tokenize"}, tt.args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", tt.args, code, errOut)
		}
		got := parseIDs(t, out)
		want := tt.want
		if want == nil { // the three stories260K files share one vocabulary
			if storyIDs == nil {
				storyIDs = got
			}
			want = storyIDs
		}
		if !slices.Equal(got, want) || len(got) == 0 {
			t.Errorf("%v: %v, want %v", tt.args, got, want)
		}
	}
	code, out, _ := runCLI("tokenize", "--tokenizer", filepath.Join(sharedTokenizers, "qwen3"), "<|im_start|>")
	if code != 0 || slices.Contains(parseIDs(t, out), 151644) {
		t.Errorf("without --special <|im_start|> became %s", out)
	}
}

func TestTokenizeStdinAndDecode(t *testing.T) {
	if _, err := os.Stat(sharedTokenizers); err != nil {
		t.Skip(err)
	}
	qwen := filepath.Join(sharedTokenizers, "qwen3")
	text := "emoji 🦙🚀 and 日本語\n"
	code, out, errOut := runCLIInput(text, "tokenize", "--tokenizer", qwen, "-")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	ids := strings.TrimSpace(out)
	code, out, errOut = runCLI("tokenize", "--tokenizer", qwen, "--decode", ids)
	if code != 0 || out != text+"\n" {
		t.Errorf("--decode %s: exit %d, %q (%s), want %q", ids, code, out, errOut, text)
	}
	code, out, _ = runCLIInput("[151644, 872, 198, 6023, 151645]", "tokenize", "--tokenizer", qwen, "--decode", "--special", "-")
	if code != 0 || out != "<|im_start|>user\nhi<|im_end|>\n" {
		t.Errorf("--decode --special from stdin: exit %d, %q", code, out)
	}
}

// A GGUF with a byte-level ("gpt2") vocabulary, written from Qwen3's
// tokenizer.json the way llama.cpp's converter would, tokenizes like the
// tokenizer.json.
func TestTokenizeGGUFBPE(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(sharedTokenizers, "qwen3", "tokenizer.json"))
	if err != nil {
		t.Skip(err)
	}
	var f struct {
		AddedTokens []struct {
			ID      int    `json:"id"`
			Content string `json:"content"`
			Special bool   `json:"special"`
		} `json:"added_tokens"`
		Model struct {
			Vocab  map[string]int `json:"vocab"`
			Merges [][2]string    `json:"merges"`
		} `json:"model"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	n := len(f.Model.Vocab) + len(f.AddedTokens)
	tokens, types := make([]string, n), make([]int32, n)
	for p, id := range f.Model.Vocab {
		tokens[id], types[id] = p, 1
	}
	for _, a := range f.AddedTokens {
		tokens[a.ID], types[a.ID] = a.Content, 4
		if a.Special {
			types[a.ID] = 3
		}
	}
	merges := make([]string, len(f.Model.Merges))
	for i, m := range f.Model.Merges {
		merges[i] = m[0] + " " + m[1]
	}
	path := filepath.Join(t.TempDir(), "qwen3-vocab.gguf")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	err = gguf.Write(out, []gguf.KV{
		{Key: "general.architecture", Value: gguf.StringValue("qwen3")},
		{Key: "tokenizer.ggml.model", Value: gguf.StringValue("gpt2")},
		{Key: "tokenizer.ggml.pre", Value: gguf.StringValue("qwen2")},
		{Key: "tokenizer.ggml.tokens", Value: gguf.ArrayValue(tokens)},
		{Key: "tokenizer.ggml.token_type", Value: gguf.ArrayValue(types)},
		{Key: "tokenizer.ggml.merges", Value: gguf.ArrayValue(merges)},
		{Key: "tokenizer.ggml.eos_token_id", Value: gguf.Uint32Value(151645)},
		{Key: "tokenizer.ggml.bos_token_id", Value: gguf.Uint32Value(151643)},
		{Key: "tokenizer.ggml.add_bos_token", Value: gguf.BoolValue(false)},
	}, nil)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	text := "Hello, world! <|im_start|>Как масштабировать модель: обучение, данные, инференс. <think>"
	_, fromJSON, _ := runCLI("tokenize", "--tokenizer", filepath.Join(sharedTokenizers, "qwen3"), "--special", text)
	code, fromGGUF, errOut := runCLI("tokenize", "--tokenizer", path, "--special", text)
	if code != 0 || fromGGUF != fromJSON || len(parseIDs(t, fromGGUF)) < 10 {
		t.Errorf("GGUF gives %s (exit %d, %s), tokenizer.json %s", fromGGUF, code, errOut, fromJSON)
	}
}

func TestTokenizeErrors(t *testing.T) {
	qwen := filepath.Join(sharedTokenizers, "qwen3")
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"tokenize", "hi"}, 2, "--tokenizer is required"},
		{[]string{"tokenize", "--tokenizer", qwen}, 2, "want one argument"},
		{[]string{"tokenize", "--tokenizer", qwen, "a", "b"}, 2, "want one argument"},
		{[]string{"tokenize", "--tokenizer", qwen, "--decode", "[1, x]"}, 2, "JSON array"},
		{[]string{"tokenize", "--tokenizer", filepath.Join(shared, "tok512.bin"), "--decode", "[512]"}, 1, "outside the vocabulary"},
		{[]string{"tokenize", "--tokenizer", filepath.Join(t.TempDir(), "none.json"), "hi"}, 1, "no such file"},
		{[]string{"run", "--model", "x", "stray"}, 2, "unexpected argument"},
	} {
		code, _, errOut := runCLI(tt.args...)
		if code != tt.code || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, %q; want exit %d mentioning %q", tt.args, code, errOut, tt.code, tt.want)
		}
	}
}
