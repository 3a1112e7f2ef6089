package wire

import (
	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/wasm/plugin/abi"
)

// The plugin ABI's request (abi.Request, gen_open's JSON) is the engine's
// own dialect: every sampling field's zero is the engine's default
// (temperature 0 is greedy, top_p and repeat_penalty 0 are off), and the
// penalty's fields are llama.cpp's names. PluginParams reads it into
// Params, so that the host refuses what the server and the browser refuse,
// with the same words.

// pluginNames are the ABI's names of the fields OpenAI names otherwise.
var pluginNames = map[string]string{"repetition_penalty": "repeat_penalty"}

// PluginParams are the generation parameters of a plugin's request, and
// the limits its dialect reads them with. max_tokens 0 is none given
// (Params.Request then answers 0, which the host turns into what is left
// of the plugin's token budget).
func PluginParams(r abi.Request) (Params, Limits) {
	f := func(v float32) *float64 { x := float64(v); return &x }
	p := Params{
		Temperature: f(r.Temperature),
		TopK:        &r.TopK,
		MinP:        f(r.MinP),
		RepeatLastN: &r.RepeatLastN,
		Seed:        &r.Seed,
	}
	if r.MaxTokens != 0 {
		p.MaxTokens = &r.MaxTokens
	}
	if r.TopP != 0 { // 0 is off, as 1 is
		p.TopP = f(r.TopP)
	}
	if r.RepeatPenalty != 0 { // 0 is off, as 1 is
		p.RepetitionPenalty = f(r.RepeatPenalty)
	}
	return p, Limits{Names: pluginNames}
}

// PluginMessages are a plugin's chat messages as the chat template takes
// them, their roles checked as a chat request's (ChatMessages).
func PluginMessages(ms []abi.Message) ([]chat.Message, error) {
	in := make([]Message, len(ms))
	for i, m := range ms {
		in[i] = Message{Role: m.Role, Content: Content{Text: m.Content, Set: true}}
	}
	return ChatMessages(in)
}
