package server_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/server"
)

// TestTranscripts: responses name the engine's system_fingerprint, and with
// "transcript": true each choice (whole or streamed, chat or completions,
// n of them) comes with its transcript, which replays to the same tokens.
func TestTranscripts(t *testing.T) {
	eng := cpuEngine(t)
	_, url := serve(t, eng, server.Options{})
	c := client(url)
	ctx := context.Background()
	replay := func(what string, raw string) {
		t.Helper()
		var ch struct {
			Transcript *runtime.Transcript `json:"transcript"`
		}
		if err := json.Unmarshal([]byte(raw), &ch); err != nil || ch.Transcript == nil {
			t.Fatalf("%s: no transcript in %s", what, raw)
		}
		r, err := eng.Replay(ctx, ch.Transcript)
		if err != nil || r.Diverged != -1 || r.Tokens == 0 || r.MaxDelta != 0 || !r.SameFingerprint {
			t.Errorf("%s: replay %+v, %v", what, r, err)
		}
	}
	on := option.WithJSONSet("transcript", true)
	res, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: modelName, N: openai.Int(2), MaxTokens: openai.Int(20), Temperature: openai.Float(0.9), Seed: openai.Int(3),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me a story")}}, on)
	if err != nil {
		t.Fatal(err)
	}
	if res.SystemFingerprint != eng.Fingerprint() || len(res.Choices) != 2 {
		t.Fatalf("fingerprint %q (want %q), %d choices", res.SystemFingerprint, eng.Fingerprint(), len(res.Choices))
	}
	for _, ch := range res.Choices {
		replay("chat", ch.RawJSON())
	}
	stream := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: modelName, MaxTokens: openai.Int(20),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me a story")}}, on)
	got := 0
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			if ch.FinishReason != "" {
				replay("chat streamed", ch.RawJSON())
				got++
			}
		}
	}
	if stream.Err() != nil || got != 1 {
		t.Errorf("streamed: %v, %d transcripts", stream.Err(), got)
	}
	cres, err := c.Completions.New(ctx, openai.CompletionNewParams{Model: modelName, Prompt: openai.CompletionNewParamsPromptUnion{OfArrayOfStrings: []string{"Once", "The dog"}},
		MaxTokens: openai.Int(15), Temperature: openai.Float(0)}, on)
	if err != nil {
		t.Fatal(err)
	}
	if cres.SystemFingerprint == "" || len(cres.Choices) != 2 {
		t.Fatalf("completions: %+v", cres)
	}
	for _, ch := range cres.Choices {
		replay("completions", ch.RawJSON())
	}
	// Without the flag, no transcript.
	res, err = c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: modelName, MaxTokens: openai.Int(5),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")}})
	if err != nil {
		t.Fatal(err)
	}
	var ch map[string]any
	json.Unmarshal([]byte(res.Choices[0].RawJSON()), &ch)
	if _, ok := ch["transcript"]; ok || res.Choices[0].Logprobs.Content != nil {
		t.Errorf("a transcript or logprobs without asking: %s", res.Choices[0].RawJSON())
	}
}
