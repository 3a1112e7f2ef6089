package synth

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/gguf"
)

// HFTokenizer reads a Hugging Face byte-level BPE tokenizer (the folder of
// a tokenizer.json and its tokenizer_config.json) into the GGUF keys that
// llama.cpp's converter writes for it: tokenizer.ggml.model "gpt2", the
// tokens padded to vocab with unused "[PAD<i>]" pieces, their types, the
// merges, pre (the pre-tokenizer's name, e.g. "qwen2"), the EOS and BOS
// ids, and tokenizer.chat_template from the config. With WriteWith it
// makes a random-weight model that tokenizes and chats as the real one.
func HFTokenizer(dir, pre string, vocab int) ([]gguf.KV, error) {
	data, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}
	var f struct {
		AddedTokens []struct {
			ID      int    `json:"id"`
			Content string `json:"content"`
			Special bool   `json:"special"`
		} `json:"added_tokens"`
		Model struct {
			Type   string          `json:"type"`
			Vocab  map[string]int  `json:"vocab"`
			Merges json.RawMessage `json:"merges"`
		} `json:"model"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("synth: tokenizer.json: %w", err)
	}
	if f.Model.Type != "BPE" {
		return nil, fmt.Errorf("synth: tokenizer.json: model %q, want BPE", f.Model.Type)
	}
	n := 0
	for _, id := range f.Model.Vocab {
		n = max(n, id+1)
	}
	for _, a := range f.AddedTokens {
		n = max(n, a.ID+1)
	}
	if n > vocab {
		return nil, fmt.Errorf("synth: the tokenizer has %d tokens, the shape's vocabulary %d", n, vocab)
	}
	tokens, types := make([]string, vocab), make([]int32, vocab)
	for i := range tokens {
		tokens[i], types[i] = fmt.Sprintf("[PAD%d]", i), 5 // unused
	}
	for p, id := range f.Model.Vocab {
		tokens[id], types[id] = p, 1 // normal
	}
	ids := map[string]int{}
	for _, a := range f.AddedTokens {
		tokens[a.ID], types[a.ID] = a.Content, 4 // user-defined
		if a.Special {
			types[a.ID] = 3 // control
		}
		ids[a.Content] = a.ID
	}
	var merges []string
	var pairs [][2]string
	if err := json.Unmarshal(f.Model.Merges, &pairs); err == nil {
		for _, p := range pairs {
			merges = append(merges, p[0]+" "+p[1])
		}
	} else if err := json.Unmarshal(f.Model.Merges, &merges); err != nil {
		return nil, fmt.Errorf("synth: tokenizer.json: merges: %w", err)
	}
	kv := []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: gguf.StringValue("gpt2")},
		{Key: "tokenizer.ggml.pre", Value: gguf.StringValue(pre)},
		{Key: "tokenizer.ggml.tokens", Value: gguf.ArrayValue(tokens)},
		{Key: "tokenizer.ggml.token_type", Value: gguf.ArrayValue(types)},
		{Key: "tokenizer.ggml.merges", Value: gguf.ArrayValue(merges)},
	}
	cfg, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		return kv, nil
	}
	var c map[string]any
	if err := json.Unmarshal(cfg, &c); err != nil {
		return nil, fmt.Errorf("synth: tokenizer_config.json: %w", err)
	}
	special := func(key string) (int, bool) {
		var s string
		switch v := c[key].(type) {
		case string:
			s = v
		case map[string]any: // {"content": "<|im_end|>", ...}
			s, _ = v["content"].(string)
		}
		id, ok := ids[s]
		return id, ok && s != ""
	}
	if id, ok := special("eos_token"); ok {
		kv = append(kv, gguf.KV{Key: "tokenizer.ggml.eos_token_id", Value: gguf.Uint32Value(uint32(id))})
	}
	if id, ok := special("bos_token"); ok {
		kv = append(kv, gguf.KV{Key: "tokenizer.ggml.bos_token_id", Value: gguf.Uint32Value(uint32(id))})
	} else if id, ok := special("pad_token"); ok { // Qwen has no BOS: llama.cpp stores the pad token there
		kv = append(kv, gguf.KV{Key: "tokenizer.ggml.bos_token_id", Value: gguf.Uint32Value(uint32(id))})
	}
	add, _ := c["add_bos_token"].(bool)
	kv = append(kv, gguf.KV{Key: "tokenizer.ggml.add_bos_token", Value: gguf.BoolValue(add)})
	if tpl, ok := c["chat_template"].(string); ok && strings.TrimSpace(tpl) != "" {
		kv = append(kv, gguf.KV{Key: "tokenizer.chat_template", Value: gguf.StringValue(tpl)})
	}
	return kv, nil
}

// WriteWith is Write with the tokenizer keys (tokenizer.*) of Metadata
// replaced by tok when tok is not empty, as HFTokenizer makes them.
func WriteWith(w io.Writer, s Shape, t dtype.Type, seed uint64, tok []gguf.KV) error {
	return write(w, s, t, 0, seed, tok, nil)
}
