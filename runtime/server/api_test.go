package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/server"
)

var prompts = []string{
	"Once upon a time, there was a dog",
	"Lily and Ben went to the park",
	"One day, a little bird",
	"Sara had a red ball",
}

// TestChatMatchesGenerate: chat completions, streamed and not, give
// exactly the engine's greedy text for the same messages, with the usage
// the engine counted.
func TestChatMatchesGenerate(t *testing.T) {
	for dev, eng := range engines(t) {
		t.Run(dev, func(t *testing.T) {
			_, url := serve(t, eng, server.Options{})
			c := client(url)
			ctx := context.Background()
			for _, p := range prompts[:2] {
				want, st := generate(t, eng, runtime.Request{Messages: []chat.Message{{Role: "system", Content: "Tell stories."}, {Role: "user", Content: p}}, MaxTokens: 40})
				params := openai.ChatCompletionNewParams{
					Model:       modelName,
					Messages:    []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Tell stories."), openai.UserMessage(p)},
					MaxTokens:   openai.Int(40),
					Temperature: openai.Float(0),
				}
				res, err := c.Chat.Completions.New(ctx, params)
				if err != nil {
					t.Fatal(err)
				}
				if got := res.Choices[0].Message.Content; got != want {
					t.Errorf("chat %q:\n got %q\nwant %q", p, got, want)
				}
				if res.Usage.PromptTokens != int64(st.PromptTokens) || res.Usage.CompletionTokens != int64(st.Generated) || res.Usage.TotalTokens != int64(st.PromptTokens+st.Generated) {
					t.Errorf("usage %+v, engine counted %d + %d", res.Usage, st.PromptTokens, st.Generated)
				}
				if want := map[bool]string{true: "stop", false: "length"}[st.StoppedAtEOS]; string(res.Choices[0].FinishReason) != want {
					t.Errorf("finish reason %q, want %q", res.Choices[0].FinishReason, want)
				}
				params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
				stream := c.Chat.Completions.NewStreaming(ctx, params)
				var text strings.Builder
				var chunks int
				var usage openai.CompletionUsage
				var finish string
				for stream.Next() {
					ch := stream.Current()
					chunks++
					if len(ch.Choices) > 0 {
						text.WriteString(ch.Choices[0].Delta.Content)
						if ch.Choices[0].FinishReason != "" {
							finish = ch.Choices[0].FinishReason
						}
					}
					if ch.Usage.TotalTokens > 0 {
						usage = ch.Usage
					}
				}
				if err := stream.Err(); err != nil {
					t.Fatal(err)
				}
				if text.String() != want || chunks < 2 { // tokens that come together share a chunk
					t.Errorf("streamed chat %q in %d chunks:\n got %q\nwant %q", p, chunks, text.String(), want)
				}
				if usage.CompletionTokens != int64(st.Generated) || usage.PromptTokens != int64(st.PromptTokens) || finish != string(res.Choices[0].FinishReason) {
					t.Errorf("streamed usage %+v finish %q", usage, finish)
				}
			}
		})
	}
}

// TestCompletionsMatchGenerate: completions from text and from token ids,
// streamed and not, and echo.
func TestCompletionsMatchGenerate(t *testing.T) {
	for dev, eng := range engines(t) {
		t.Run(dev, func(t *testing.T) {
			_, url := serve(t, eng, server.Options{})
			c := client(url)
			ctx := context.Background()
			p := prompts[2]
			want, st := generate(t, eng, runtime.Request{Prompt: p, MaxTokens: 50})
			ids, err := eng.PromptTokens(runtime.Request{Prompt: p})
			if err != nil {
				t.Fatal(err)
			}
			ids64 := make([]int64, len(ids))
			for i, id := range ids {
				ids64[i] = int64(id)
			}
			for name, prompt := range map[string]openai.CompletionNewParamsPromptUnion{
				"text": {OfString: openai.String(p)},
				"ids":  {OfArrayOfTokens: ids64},
			} {
				params := openai.CompletionNewParams{Model: modelName, Prompt: prompt, MaxTokens: openai.Int(50), Temperature: openai.Float(0)}
				res, err := c.Completions.New(ctx, params)
				if err != nil {
					t.Fatal(err)
				}
				if res.Choices[0].Text != want || res.Usage.CompletionTokens != int64(st.Generated) || res.Usage.PromptTokens != int64(len(ids)) {
					t.Errorf("%s: %q (usage %+v), want %q", name, res.Choices[0].Text, res.Usage, want)
				}
				stream := c.Completions.NewStreaming(ctx, params)
				var text strings.Builder
				for stream.Next() {
					if ch := stream.Current(); len(ch.Choices) > 0 {
						text.WriteString(ch.Choices[0].Text)
					}
				}
				if err := stream.Err(); err != nil {
					t.Fatal(err)
				}
				if text.String() != want {
					t.Errorf("%s streamed: %q, want %q", name, text.String(), want)
				}
			}
			res, err := c.Completions.New(ctx, openai.CompletionNewParams{Model: modelName, Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(p)},
				MaxTokens: openai.Int(50), Temperature: openai.Float(0), Echo: openai.Bool(true)})
			if err != nil {
				t.Fatal(err)
			}
			if res.Choices[0].Text != p+want {
				t.Errorf("echo: %q, want %q", res.Choices[0].Text, p+want)
			}
		})
	}
}

// TestSamplingFields: stop strings cut the text before them, n gives
// the engine's samples with seeds seed+i, a seed repeats, and logprobs
// come for every generated token.
func TestSamplingFields(t *testing.T) {
	eng := cpuEngine(t)
	_, url := serve(t, eng, server.Options{})
	c := client(url)
	ctx := context.Background()
	p := prompts[0]
	full, _ := generate(t, eng, runtime.Request{Prompt: p, MaxTokens: 60})
	words := strings.Fields(full)
	stop := words[len(words)/2] + " " + words[len(words)/2+1]
	at := strings.Index(full, stop)
	res, err := c.Completions.New(ctx, openai.CompletionNewParams{Model: modelName, Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(p)},
		MaxTokens: openai.Int(60), Temperature: openai.Float(0), Stop: openai.CompletionNewParamsStopUnion{OfStringArray: []string{"zzz", stop}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Choices[0].Text != full[:at] || res.Choices[0].FinishReason != "stop" {
		t.Errorf("stop %q: %q (%s), want %q", stop, res.Choices[0].Text, res.Choices[0].FinishReason, full[:at])
	}

	// logit_bias: +100 forces a token, as OpenAI's does.
	code, body, _ := post(t, url+"/v1/completions", map[string]any{"prompt": p, "max_tokens": 5, "temperature": 0, "logit_bias": map[string]int{"300": 100}})
	if code != 200 {
		t.Fatalf("logit_bias: %d %v", code, body)
	}
	forced := eng.Tokenizer().Decode([]int{300, 300, 300, 300, 300})
	if got := body["choices"].([]any)[0].(map[string]any)["text"]; strings.TrimSpace(got.(string)) != strings.TrimSpace(forced) {
		t.Errorf("logit_bias 300:+100 gave %q, want %q", got, forced)
	}

	// n samples: sample i is the engine's with seed 7+i.
	params := openai.ChatCompletionNewParams{Model: modelName, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(p)},
		MaxTokens: openai.Int(30), Temperature: openai.Float(1), Seed: openai.Int(7), N: openai.Int(3)}
	res2, err := c.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(res2.Choices) != 3 {
		t.Fatalf("%d choices, want 3", len(res2.Choices))
	}
	var generated int
	for i, ch := range res2.Choices {
		want, st := generate(t, eng, runtime.Request{Messages: []chat.Message{{Role: "user", Content: p}}, MaxTokens: 30,
			Sampler: runtime.SamplerOptions{Temperature: 1, TopP: 1, RepeatPenalty: 1, Seed: 7 + uint64(i)}})
		generated += st.Generated
		if ch.Index != int64(i) || ch.Message.Content != want {
			t.Errorf("choice %d (index %d): %q, want %q", i, ch.Index, ch.Message.Content, want)
		}
	}
	if res2.Usage.CompletionTokens != int64(generated) {
		t.Errorf("usage %d completion tokens, choices have %d", res2.Usage.CompletionTokens, generated)
	}
	again, err := c.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	for i := range again.Choices {
		if again.Choices[i].Message.Content != res2.Choices[i].Message.Content {
			t.Errorf("seed 7 choice %d differs between runs", i)
		}
	}

	// Logprobs: one entry per generated token, alternatives sorted, the
	// greedy token first among them.
	params = openai.ChatCompletionNewParams{Model: modelName, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(p)},
		MaxTokens: openai.Int(20), Temperature: openai.Float(0), Logprobs: openai.Bool(true), TopLogprobs: openai.Int(3)}
	res3, err := c.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	lps := res3.Choices[0].Logprobs.Content
	var joined strings.Builder
	for _, lp := range lps {
		joined.WriteString(lp.Token)
		if len(lp.TopLogprobs) != 3 || lp.TopLogprobs[0].Token != lp.Token || lp.TopLogprobs[0].Logprob < lp.TopLogprobs[1].Logprob || lp.Logprob > 0 {
			t.Errorf("token %q logprob %g alternatives %+v", lp.Token, lp.Logprob, lp.TopLogprobs)
		}
	}
	if int64(len(lps)) != res3.Usage.CompletionTokens && int64(len(lps)) != res3.Usage.CompletionTokens-1 { // an EOS has no text or entry
		t.Errorf("%d logprobs for %d tokens", len(lps), res3.Usage.CompletionTokens)
	}
	if strings.TrimSpace(joined.String()) != strings.TrimSpace(res3.Choices[0].Message.Content) {
		t.Errorf("logprob tokens spell %q, content %q", joined.String(), res3.Choices[0].Message.Content)
	}
}

// TestEchoLogprobs: echo with logprobs and no new tokens scores the
// prompt, as evaluation harnesses use it; the first token has none.
func TestEchoLogprobs(t *testing.T) {
	eng := cpuEngine(t)
	_, url := serve(t, eng, server.Options{})
	code, body, _ := post(t, url+"/v1/completions", map[string]any{"model": modelName, "prompt": prompts[1], "max_tokens": 0, "echo": true, "logprobs": 2})
	if code != 200 {
		t.Fatalf("status %d: %v", code, body)
	}
	ch := body["choices"].([]any)[0].(map[string]any)
	lp := ch["logprobs"].(map[string]any)
	toks, lps := lp["tokens"].([]any), lp["token_logprobs"].([]any)
	ids, _ := eng.PromptTokens(runtime.Request{Prompt: prompts[1]})
	if ch["text"] != prompts[1] || len(toks) != len(ids) || len(lps) != len(ids) || lps[0] != nil {
		t.Fatalf("echo %q: %d tokens, logprobs %v", ch["text"], len(toks), lps)
	}
	for i, v := range lps[1:] {
		if f, ok := v.(float64); !ok || f > 0 {
			t.Errorf("token %d logprob %v", i+1, v)
		}
	}
}
