// Command story is an example Tessera plugin: given the opening of a
// story (its title, say), it asks the host's model to write the rest and
// returns the whole story.
//
// It is a WASI reactor; build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o story.wasm ./examples/plugin/story
//
// (make plugin does) and run it with examples/plugin/host.
//
// Its input is JSON, {"prompt": "...", "steps": 200, "temperature": 0.8,
// "seed": 42}, or plain text taken as the prompt. Its output is the prompt
// followed by the model's continuation, as the tessera CLI prints it, so
// with temperature 0 it is exactly what Engine.Generate produces for the
// same prompt.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/tessera-llm/tessera/wasm/plugin"
)

func init() { plugin.Handle(story) }

// main is never called: the host calls the handler.
func main() {}

// input is what the host asks for.
type input struct {
	Prompt      string  `json:"prompt"`
	Steps       int     `json:"steps"`
	Temperature float32 `json:"temperature"`
	TopP        float32 `json:"top_p"`
	Seed        uint64  `json:"seed"`
	Model       string  `json:"model"`
}

// defaultSteps is the story's length in tokens when the input gives none.
const defaultSteps = 200

func story(ctx context.Context, raw []byte) ([]byte, error) {
	in := input{Steps: defaultSteps}
	if t := strings.TrimSpace(string(raw)); strings.HasPrefix(t, "{") {
		if err := json.Unmarshal(raw, &in); err != nil {
			return nil, fmt.Errorf("input: %w", err)
		}
	} else {
		in.Prompt = string(raw)
	}
	if in.Steps <= 0 {
		return nil, errors.New("steps must be positive")
	}
	models, err := plugin.Models()
	if err != nil {
		return nil, err
	}
	if len(models) == 0 {
		return nil, errors.New("the host lets this plugin use no model")
	}
	m := models[0]
	if in.Model != "" {
		m.Name = in.Model
		for _, mm := range models {
			if mm.Name == in.Model {
				m = mm
			}
		}
	}
	// Keep the story inside the model's context instead of failing at its end.
	n, err := plugin.CountTokens(m.Name, in.Prompt)
	if err != nil {
		return nil, err
	}
	if m.Context > 0 && n >= m.Context {
		return nil, fmt.Errorf("the prompt is %d tokens, the model's context is %d", n, m.Context)
	}
	steps := in.Steps
	if m.Context > 0 {
		steps = min(steps, m.Context-n)
	}
	var out strings.Builder
	out.WriteString(in.Prompt)
	req := plugin.Request{Model: m.Name, Prompt: in.Prompt, MaxTokens: steps,
		Temperature: in.Temperature, TopP: in.TopP, Seed: in.Seed}
	for tok, err := range plugin.Generate(ctx, req) {
		if err != nil {
			return []byte(out.String()), err
		}
		out.WriteString(tok.Text)
	}
	return []byte(out.String()), nil
}
