package runtime_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/runtime"
)

// TestChatTemplateFromReader: a GGUF read from memory (models.OpenReader,
// as the browser reads a Blob) keeps its tokenizer.chat_template, so that
// Request.Messages go through the model's own template there too. The
// model is random, at a tiny Qwen3 shape, with the real Qwen3 tokenizer.
func TestChatTemplateFromReader(t *testing.T) {
	m := tinyQwen3ChatModel(t)
	if !strings.Contains(m.ChatTemplate, "<|im_start|>") {
		t.Fatalf("the model read from memory has no chat template (%d bytes)", len(m.ChatTemplate))
	}
	eng, err := runtime.LoadModel(m, runtime.Options{Device: "cpu", Context: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if _, plain := eng.Chat().(chat.Plain); plain {
		t.Fatal("the engine chats in the plain format, not the model's template")
	}
	msgs := []chat.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hello there"}}
	ids, err := eng.PromptTokens(runtime.Request{Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	want := "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello there<|im_end|>\n<|im_start|>assistant\n"
	var text strings.Builder
	for _, id := range ids {
		text.WriteString(eng.Tokenizer().Piece(int(id)))
	}
	if !strings.HasPrefix(strings.ReplaceAll(text.String(), "Ġ", " "), strings.ReplaceAll(want, "\n", "Ċ")) {
		t.Errorf("prompt pieces %q, want the Qwen3 template's %q", text.String(), want)
	}
	if ids[0] != 151644 || !slices.Contains(ids, 151645) { // <|im_start|>, <|im_end|>
		t.Errorf("prompt ids %v: want <|im_start|> first and an <|im_end|>", ids)
	}
	st, err := eng.Generate(context.Background(), runtime.Request{Messages: msgs, MaxTokens: 4}, func(runtime.Token) error { return nil })
	if err != nil || st.Generated == 0 {
		t.Fatalf("generate: %v (%+v)", err, st)
	}
}
