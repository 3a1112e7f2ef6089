package server_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/gguf"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/grammar/grammartest"
	"github.com/tessera-llm/tessera/runtime/server"
)

// The chat templates in testdata are the real ones (see testdata/README.md):
// Llama 3.1 8B Instruct's and Mistral 7B Instruct v0.3's.

func readTemplate(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// setKV replaces (or adds) key in kv.
func setKV(kv []gguf.KV, key string, v gguf.Value) []gguf.KV {
	for i := range kv {
		if kv[i].Key == key {
			kv[i].Value = v
			return kv
		}
	}
	return append(kv, gguf.KV{Key: key, Value: v})
}

// writeModel writes a random-weight model of shape name with the
// tokenizer keys tok and loads it on the CPU.
func writeModel(t *testing.T, name string, vocab int, tok []gguf.KV) *runtime.Engine {
	t.Helper()
	s, err := synth.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	s.Config.Vocab, s.Config.Context = vocab, 2048
	path := filepath.Join(t.TempDir(), name+".gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := synth.WriteWith(f, s, dtype.F16, 5, tok); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	eng, err := runtime.Load(path, runtime.Options{Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng
}

// llama31Engine is a tiny random Llama with the real Llama 3 tokenizer
// as Llama 3.1 ships it (the same vocabulary, with two reserved tokens
// named <|eom_id|> and <|python_tag|>, and <|eot_id|> as EOS) and the
// real Llama 3.1 template.
func llama31Engine(t *testing.T) *runtime.Engine {
	t.Helper()
	dir := filepath.Join("..", "..", "..", "shared", "tokenizers", "llama3")
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("no Llama 3 tokenizer: %v", err)
	}
	const vocab = 128256
	kv, err := synth.HFTokenizer(dir, "llama-bpe", vocab)
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range kv {
		if x.Key == "tokenizer.ggml.tokens" {
			toks, _ := x.Value.Strings()
			if toks[128008] != "<|reserved_special_token_4|>" || toks[128010] != "<|reserved_special_token_5|>" {
				t.Fatalf("unexpected tokens %q, %q", toks[128008], toks[128010])
			}
			toks[128008], toks[128010] = "<|eom_id|>", "<|python_tag|>"
			kv[i].Value = gguf.ArrayValue(toks)
		}
	}
	kv = setKV(kv, "tokenizer.ggml.eos_token_id", gguf.Uint32Value(128009))
	kv = setKV(kv, "tokenizer.chat_template", gguf.StringValue(readTemplate(t, "llama3.1.jinja")))
	return writeModel(t, "tiny-llama3", vocab, kv)
}

// mistralEngine is a tiny random Mistral whose SentencePiece vocabulary
// starts as the v3 tokenizer's does (<unk>, <s>, </s>, then the control
// tokens [INST] … [/TOOL_RESULTS] at ids 3 to 9), with byte pieces for
// every other character, and the real Mistral 7B Instruct v0.3 template.
// No Mistral tokenizer is at hand, so the rest of the vocabulary is
// synthetic.
func mistralEngine(t *testing.T) *runtime.Engine {
	t.Helper()
	const vocab = 1024
	controls := []string{"[INST]", "[/INST]", "[TOOL_CALLS]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]", "[/TOOL_RESULTS]"}
	p, sc, ty := synth.Vocabulary(vocab - len(controls))
	pieces, scores, types := append([]string{}, p[:3]...), append([]float32{}, sc[:3]...), append([]int32{}, ty[:3]...)
	for _, c := range controls {
		pieces, scores, types = append(pieces, c), append(scores, 0), append(types, 3)
	}
	pieces, scores, types = append(pieces, p[3:]...), append(scores, sc[3:]...), append(types, ty[3:]...)
	kv := []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: gguf.StringValue("llama")},
		{Key: "tokenizer.ggml.tokens", Value: gguf.ArrayValue(pieces)},
		{Key: "tokenizer.ggml.scores", Value: gguf.ArrayValue(scores)},
		{Key: "tokenizer.ggml.token_type", Value: gguf.ArrayValue(types)},
		{Key: "tokenizer.ggml.bos_token_id", Value: gguf.Uint32Value(1)},
		{Key: "tokenizer.ggml.eos_token_id", Value: gguf.Uint32Value(2)},
		{Key: "tokenizer.ggml.unknown_token_id", Value: gguf.Uint32Value(0)},
		{Key: "tokenizer.chat_template", Value: gguf.StringValue(readTemplate(t, "mistral-v3.jinja"))},
	}
	return writeModel(t, "tiny", vocab, kv) // GGUF has Mistral 7B as a llama
}

var weatherParams = `{"type":"object","properties":{"city":{"type":"string","maxLength":12},"unit":{"enum":["celsius","fahrenheit"]}},"required":["city","unit"],"additionalProperties":false}`
var timeParams = `{"type":"object","properties":{"zone":{"type":"string","maxLength":8}},"required":["zone"]}`

// TestToolFormats: for Llama 3.1's and Mistral's formats, with the real
// templates, tool_choice required and a named function give calls whose
// arguments the independent validator accepts (streamed alike), with ids
// the template takes back (Mistral's nine letters and digits), and the
// call and its result go back through the template for a reply in text.
func TestToolFormats(t *testing.T) {
	for _, tc := range []struct {
		name   string
		engine func(*testing.T) *runtime.Engine
		id     *regexp.Regexp
		single bool // the format makes one call per reply
	}{
		{"llama3.1", llama31Engine, regexp.MustCompile(`^call-`), true},
		{"mistral", mistralEngine, regexp.MustCompile(`^[a-zA-Z0-9]{9}$`), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eng := tc.engine(t)
			_, url := serve(t, eng, server.Options{})
			c := client(url)
			ctx := context.Background()
			var wp, tp shared.FunctionParameters
			json.Unmarshal([]byte(weatherParams), &wp)
			json.Unmarshal([]byte(timeParams), &tp)
			tools := []openai.ChatCompletionToolUnionParam{
				openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather", Description: openai.String("Weather in a city"), Parameters: wp}),
				openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_time", Parameters: tp}),
			}
			validators := map[string]interface{ Validate(any) error }{
				"get_weather": grammartest.Validator(t, weatherParams),
				"get_time":    grammartest.Validator(t, timeParams),
			}
			msgs := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("What is the weather in Paris?")}
			for k, choice := range []openai.ChatCompletionToolChoiceOptionUnionParam{
				{OfAuto: openai.String("required")},
				openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_weather"}),
			} {
				// Required calls may be parallel (up to 8); the named one not.
				params := openai.ChatCompletionNewParams{Model: modelName, Messages: msgs, Tools: tools, ToolChoice: choice,
					MaxTokens: openai.Int(1500), Temperature: openai.Float(1), Seed: openai.Int(int64(7 + k)), ParallelToolCalls: openai.Bool(k == 0)}
				many := params
				many.N = openai.Int(3)
				res, err := c.Chat.Completions.New(ctx, many)
				if err != nil {
					t.Fatal(err)
				}
				for _, ch := range res.Choices {
					calls := ch.Message.ToolCalls
					if ch.FinishReason != "tool_calls" || len(calls) == 0 || ch.Message.Content != "" {
						t.Fatalf("choice %d: finish %q, calls %+v, content %q", ch.Index, ch.FinishReason, calls, ch.Message.Content)
					}
					if (tc.single || k == 1) && len(calls) != 1 {
						t.Errorf("%d calls, want 1", len(calls))
					}
					for _, call := range calls {
						t.Logf("%s %s(%s)", call.ID, call.Function.Name, call.Function.Arguments)
						v, ok := validators[call.Function.Name]
						if !ok || choice.OfFunctionToolChoice != nil && call.Function.Name != "get_weather" {
							t.Fatalf("call of %q", call.Function.Name)
						}
						var args any
						if err := json.Unmarshal([]byte(call.Function.Arguments), &args); err != nil {
							t.Fatalf("arguments %q: %v", call.Function.Arguments, err)
						}
						if err := v.Validate(args); err != nil {
							t.Errorf("arguments %s: %v", call.Function.Arguments, err)
						}
						if !tc.id.MatchString(call.ID) {
							t.Errorf("call id %q", call.ID)
						}
					}
				}
				// Streamed, the same calls arrive in deltas.
				stream := c.Chat.Completions.NewStreaming(ctx, params)
				var acc openai.ChatCompletionAccumulator
				for stream.Next() {
					acc.AddChunk(stream.Current())
				}
				if err := stream.Err(); err != nil {
					t.Fatal(err)
				}
				if len(acc.Choices) != 1 || acc.Choices[0].FinishReason != "tool_calls" {
					t.Fatalf("streamed %+v", acc.Choices)
				}
				got, want := acc.Choices[0].Message.ToolCalls, res.Choices[0].Message.ToolCalls
				if len(got) != len(want) || got[0].Function.Name != want[0].Function.Name || got[0].Function.Arguments != want[0].Function.Arguments || !tc.id.MatchString(got[0].ID) {
					t.Errorf("streamed calls %+v, not %+v", got, want)
				}
				// The round trip: the call (the first, as Llama's template
				// renders one) and its result, then a reply in text.
				msg := res.Choices[0].Message.ToParam()
				msg.OfAssistant.ToolCalls = msg.OfAssistant.ToolCalls[:1]
				call := res.Choices[0].Message.ToolCalls[0]
				next := append(append([]openai.ChatCompletionMessageParamUnion{}, msgs...), msg, openai.ToolMessage(`{"temperature": 21}`, call.ID))
				res2, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: modelName, Messages: next, Tools: tools,
					ToolChoice: openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("none")}, MaxTokens: openai.Int(8), Temperature: openai.Float(0)})
				if err != nil {
					t.Fatal(err)
				}
				if m := res2.Choices[0].Message; len(m.ToolCalls) != 0 || m.Content == "" {
					t.Errorf("tool_choice none after the call: %q, %d calls", m.Content, len(m.ToolCalls))
				}
			}
		})
	}
}
