package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/tessera-llm/tessera/models/gguf"
)

// ErrNoTemplate is returned (wrapped) when a file has no chat template.
var ErrNoTemplate = errors.New("no chat template")

// FromGGUF returns the chat template a GGUF carries in
// tokenizer.chat_template, parsed.
func FromGGUF(path string) (*Template, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	src, ok := f.String("tokenizer.chat_template")
	if !ok || src == "" {
		return nil, fmt.Errorf("%s: %w (tokenizer.chat_template)", path, ErrNoTemplate)
	}
	return New(src)
}

// FromConfig returns the chat template of a Hugging Face tokenizer, parsed:
// path is a tokenizer_config.json, the tokenizer.json beside one, or their
// folder. A file with several named templates gives the one named
// "default".
func FromConfig(path string) (*Template, error) {
	file := path
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		file = filepath.Join(path, "tokenizer_config.json")
	} else if filepath.Base(path) != "tokenizer_config.json" {
		file = filepath.Join(filepath.Dir(path), "tokenizer_config.json")
	}
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", path, ErrNoTemplate)
	}
	if err != nil {
		return nil, err
	}
	var cfg struct {
		ChatTemplate json.RawMessage `json:"chat_template"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	src, err := pickTemplate(cfg.ChatTemplate)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return New(src)
}

// pickTemplate reads chat_template: a string, or a list of
// {"name", "template"} from which "default" is taken.
func pickTemplate(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", ErrNoTemplate
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if s == "" {
			return "", ErrNoTemplate
		}
		return s, nil
	}
	var named []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(raw, &named); err != nil {
		return "", fmt.Errorf("chat_template: %w", err)
	}
	for _, t := range named {
		if t.Name == "default" {
			return t.Template, nil
		}
	}
	return "", fmt.Errorf("%w named \"default\"", ErrNoTemplate)
}
