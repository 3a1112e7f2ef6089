package wire_test

import (
	"context"
	"math"
	"testing"

	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/models/vision"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/wire"
	"github.com/tessera-llm/tessera/runtime/wire/wiretest"
	"github.com/tessera-llm/tessera/wasm/plugin/abi"
)

// Every bad request of the shared table is refused by ReadSampling (the
// reading the browser's options.request and, field by field, the
// server's bodies share) as the table says.
func TestBadSampling(t *testing.T) {
	for _, c := range wiretest.BadSampling {
		_, _, err := wire.ReadSampling([]byte(`{"prompt": "x", `+c.Fields+`}`), false, 16)
		pe, ok := wire.AsParam(err)
		if !ok || pe.Param != c.Param || pe.Msg != c.Msg {
			t.Errorf("%s: %v, want %s: %q", c.Name, err, c.Param, c.Msg)
		}
	}
}

// The dialects' defaults: OpenAI's (temperature 1, n 1, the default
// max_tokens), the plugin ABI's zeros (greedy; top_p and repeat_penalty
// 0 are off), the browser's low-level options (greedy, 256 tokens,
// repeatPenalty 1 over 64).
func TestDialectDefaults(t *testing.T) {
	req, n, err := wire.ReadSampling([]byte(`{"seed": 7, "max_completion_tokens": 9, "max_tokens": 3, "logprobs": true, "top_logprobs": 2}`), true, 100)
	o := req.Sampler
	if err != nil || n != 1 || req.MaxTokens != 9 || o.Temperature != 1 || o.TopP != 1 || o.Seed != 7 || !req.Logprobs || req.TopLogprobs != 2 {
		t.Errorf("OpenAI: %+v n=%d %v", req, n, err)
	}
	if _, _, err := wire.ReadSampling([]byte(`{"max_completion_tokens": 9, "max_tokens": 0}`), true, 100); err == nil || err.Error() != "max_tokens must be at least 1, not 0" {
		t.Errorf("a bad max_tokens beside max_completion_tokens: %v", err)
	}
	if _, _, err := wire.ReadSampling([]byte(`{"max_completion_tokens": 0}`), true, 100); err == nil || err.Error() != "max_completion_tokens must be at least 1, not 0" {
		t.Errorf("a bad max_completion_tokens: %v", err)
	}

	p, lim := wire.PluginParams(abi.Request{Seed: 5, RepeatLastN: 32, MaxTokens: 0})
	req, n, err = p.Request(lim)
	o = req.Sampler
	if err != nil || n != 1 || req.MaxTokens != 0 || o.Temperature != 0 || o.TopP != 1 || o.RepeatPenalty != 1 || o.RepeatLastN != 32 || o.Seed != 5 || o.TopK != 0 {
		t.Errorf("plugin: %+v n=%d %v", req, n, err)
	}
	p, lim = wire.PluginParams(abi.Request{RepeatPenalty: 11})
	if _, _, err := p.Request(lim); err == nil || err.Error() != "repeat_penalty must be between 0 and 10, not 11" {
		t.Errorf("plugin's repeat_penalty: %v", err)
	}

	temp := 0.5
	p, lim = wire.Options{Temperature: &temp, Seed: 1}.Params()
	req, n, err = p.Request(lim)
	o = req.Sampler
	if err != nil || n != 1 || req.MaxTokens != 256 || o.Temperature != 0.5 || o.RepeatLastN != 64 || o.Seed != 1 {
		t.Errorf("options: %+v n=%d %v", req, n, err)
	}
	stops := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q"}
	p, lim = wire.Options{Stop: stops}.Params()
	if _, _, err := p.Request(lim); err == nil || err.Error() != "stop takes at most 16 strings, not 17" {
		t.Errorf("17 stop strings: %v", err)
	}
}

// A plugin's chat messages take a chat request's roles.
func TestPluginMessages(t *testing.T) {
	ms, err := wire.PluginMessages([]abi.Message{{Role: "developer", Content: "Be brief."}, {Role: "user", Content: "Hi"}})
	if err != nil || len(ms) != 2 || ms[0].Role != "system" || ms[1].Content != "Hi" {
		t.Errorf("%+v %v", ms, err)
	}
	if _, err := wire.PluginMessages([]abi.Message{{Role: "robot", Content: "Hi"}}); err == nil {
		t.Error("a message of role robot was taken")
	}
}

// guided_choice (vLLM's) holds the reply to one of its strings.
func TestGuidedChoice(t *testing.T) {
	req, _, err := wire.ReadSampling([]byte(`{"guided_choice": ["yes", "no"]}`), true, 10)
	if err != nil || req.Constraint == nil || !req.Constraint.Match("no") || req.Constraint.Match("maybe") {
		t.Fatalf("%v %v", req.Constraint, err)
	}
}

// A request's adapters are named, listed once and scaled within bounds
// in every home; scale 0 leaves one out, except the plugin ABI's, whose
// 0 means 1.
func TestAdapters(t *testing.T) {
	refs, err := wire.Adapters("lora", []wire.Adapter{{Name: "a", Scale: 0.5}, {Name: "b", Scale: 0}})
	if err != nil || len(refs) != 1 || refs[0].Name != "a" || refs[0].Scale != 0.5 {
		t.Errorf("%+v %v", refs, err)
	}
	refs, err = wire.Adapters("adapters", wire.PluginAdapters([]abi.Adapter{{Name: "a"}}))
	if err != nil || len(refs) != 1 || refs[0].Scale != 1 {
		t.Errorf("plugin's scale 0: %+v %v", refs, err)
	}
	for _, tc := range []struct {
		list []wire.Adapter
		msg  string
	}{
		{[]wire.Adapter{{Scale: 1}}, "adapters[0] needs a name"},
		{[]wire.Adapter{{Name: "a", Scale: 1}, {Name: "a", Scale: 2}}, `adapters[1]: the adapter "a" is listed twice`},
		{[]wire.Adapter{{Name: "a", Scale: 1001}}, "adapters[0]: scale 1001 is outside [-1000, 1000]"},
		{[]wire.Adapter{{Name: "a", Scale: math.Inf(-1)}}, "adapters[0]: scale -Inf is outside [-1000, 1000]"},
		{[]wire.Adapter{{Name: "a", Scale: math.NaN()}}, "adapters[0]: scale NaN is outside [-1000, 1000]"},
	} {
		_, err := wire.Adapters("adapters", tc.list)
		if pe, ok := wire.AsParam(err); !ok || pe.Param != "adapters" || pe.Msg != tc.msg {
			t.Errorf("%+v: %v, want %q", tc.list, err, tc.msg)
		}
	}
}

// Every bad chat of the shared table is refused by the reading the
// server's chat body and the browser's {messages} input share (Unmarshal,
// Chat.Read, Chat.ChatTools) as the table says.
func TestBadChat(t *testing.T) {
	for _, c := range wiretest.BadChat {
		var in wire.ChatRequest
		err := wire.Unmarshal([]byte(`{`+c.Fields+`}`), &in)
		if err == nil {
			err = in.Chat.Read(context.Background(), &runtime.Request{}, wire.ImageReader{Limits: vision.DefaultLimits})
		}
		if err == nil {
			_, _, err = in.ChatTools(chat.Hermes)
		}
		pe, ok := wire.AsParam(err)
		if !ok || pe.Param != c.Param || pe.Msg != c.Msg {
			t.Errorf("%s: %v, want %s: %q", c.Name, err, c.Param, c.Msg)
		}
	}
}
