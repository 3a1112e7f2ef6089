package server_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tessera-llm/tessera/runtime/grammar/grammartest"
	"github.com/tessera-llm/tessera/runtime/server"
)

const personSchema = `{"type":"object","properties":{
	"name":{"type":"string","maxLength":12},
	"age":{"type":"integer","minimum":0,"maximum":120},
	"born":{"type":"string","format":"date"},
	"pets":{"type":"array","items":{"enum":["cat","dog","bird"]},"maxItems":3}},
	"required":["name","age","pets"],"additionalProperties":false}`

// TestResponseFormatJSONSchema: the official client's response_format
// with a strict JSON Schema gives, in every sample, JSON that validates.
func TestResponseFormatJSONSchema(t *testing.T) {
	for dev, eng := range engines(t) {
		t.Run(dev, func(t *testing.T) {
			_, url := serve(t, eng, server.Options{})
			c := client(url)
			var schema map[string]any
			if err := json.Unmarshal([]byte(personSchema), &schema); err != nil {
				t.Fatal(err)
			}
			res, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
				Model:       modelName,
				Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Describe a person as JSON.")},
				MaxTokens:   openai.Int(300),
				Temperature: openai.Float(1),
				N:           openai.Int(4),
				Seed:        openai.Int(5),
				ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
					JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "person", Schema: schema, Strict: openai.Bool(true)}}},
			})
			if err != nil {
				t.Fatal(err)
			}
			v := grammartest.Validator(t, personSchema)
			for _, ch := range res.Choices {
				text := ch.Message.Content
				inst, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
				if err != nil {
					t.Fatalf("choice %d is not JSON: %q", ch.Index, text)
				}
				if err := v.Validate(inst); err != nil {
					t.Errorf("choice %d does not validate: %q: %v", ch.Index, text, err)
				}
				if ch.FinishReason != "stop" {
					t.Errorf("choice %d finished with %q", ch.Index, ch.FinishReason)
				}
			}
		})
	}
}

// TestRegexAndGrammarFields: the regex and grammar extension fields (and
// vLLM's guided_ names) on completions, streamed and not.
func TestRegexAndGrammarFields(t *testing.T) {
	eng := cpuEngine(t)
	_, url := serve(t, eng, server.Options{})
	c := client(url)
	ctx := context.Background()
	cases := []struct{ field, src, check string }{
		{"regex", `(red|blue) [a-z]{2,6}!`, `^(red|blue) [a-z]{2,6}!$`},
		{"guided_regex", `\d{3}-\d{4}`, `^\d{3}-\d{4}$`},
		{"grammar", `root ::= "(" [a-z]{1,8} ("," [a-z]{1,8}){0,2} ")"`, `^\([a-z]{1,8}(,[a-z]{1,8}){0,2}\)$`},
		{"guided_grammar", `root ::= ("yes" | "no") "."`, `^(yes|no)\.$`},
	}
	for _, tt := range cases {
		params := openai.CompletionNewParams{Model: openai.CompletionNewParamsModel(modelName),
			Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
			MaxTokens: openai.Int(60), Temperature: openai.Float(1), Seed: openai.Int(1), N: openai.Int(3)}
		res, err := c.Completions.New(ctx, params, option.WithJSONSet(tt.field, tt.src))
		if err != nil {
			t.Fatalf("%s: %v", tt.field, err)
		}
		re := regexp.MustCompile(tt.check)
		for _, ch := range res.Choices {
			if !re.MatchString(ch.Text) || ch.FinishReason != "stop" {
				t.Errorf("%s: choice %q (%s) does not match %s", tt.field, ch.Text, ch.FinishReason, tt.check)
			}
		}
		stream := c.Completions.NewStreaming(ctx, params, option.WithJSONSet(tt.field, tt.src))
		texts := map[int64]string{}
		for stream.Next() {
			for _, ch := range stream.Current().Choices {
				texts[ch.Index] += ch.Text
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		for i, text := range texts {
			if text != res.Choices[i].Text {
				t.Errorf("%s: streamed %q, not %q", tt.field, text, res.Choices[i].Text)
			}
		}
	}
}

// TestStructuredOutputErrors: schemas the engine cannot express, bad
// expressions and competing constraints are 400s that say what and where.
func TestStructuredOutputErrors(t *testing.T) {
	eng := cpuEngine(t)
	_, url := serve(t, eng, server.Options{})
	msgs := []map[string]string{{"role": "user", "content": "hi"}}
	cases := []struct {
		body map[string]any
		want []string
	}{
		{map[string]any{"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "x",
			"schema": map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "string", "propertyNames": map[string]any{}}}}}}},
			[]string{"propertyNames", "/properties/a"}},
		{map[string]any{"response_format": map[string]any{"type": "json_schema"}}, []string{"json_schema.schema"}},
		{map[string]any{"response_format": map[string]any{"type": "yaml"}}, []string{"yaml"}},
		{map[string]any{"regex": `(a`}, []string{"regex", "missing )"}},
		{map[string]any{"grammar": `root ::= missing`}, []string{"undefined rule"}},
		{map[string]any{"regex": `a`, "grammar": `root ::= "a"`}, []string{"cannot be combined"}},
	}
	for _, tt := range cases {
		tt.body["model"], tt.body["messages"] = modelName, msgs
		code, body, _ := post(t, url+"/v1/chat/completions", tt.body)
		msg := errorMessage(t, body)
		if code != 400 {
			t.Errorf("%v: status %d (%s), want 400", tt.body, code, msg)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%v: message %q lacks %q", tt.body, msg, w)
			}
		}
	}
	// json_object: an object, or (out of tokens) the start of one.
	code, body, _ := post(t, url+"/v1/chat/completions", map[string]any{"model": modelName, "messages": msgs,
		"response_format": map[string]any{"type": "json_object"}, "max_tokens": 200, "temperature": 0})
	if code != 200 {
		t.Fatalf("json_object: %d %v", code, body)
	}
	ch := body["choices"].([]any)[0].(map[string]any)
	text := ch["message"].(map[string]any)["content"].(string)
	var obj map[string]any
	if ch["finish_reason"] == "stop" && json.Unmarshal([]byte(text), &obj) != nil || !strings.HasPrefix(text, "{") {
		t.Errorf("json_object gave %q (%v)", text, ch["finish_reason"])
	}
}
