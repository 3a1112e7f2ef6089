package server_test

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models/lora"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/server"
)

// TestLoRAModelNames: a loaded adapter is also a model, BASE:ADAPTER, in
// /v1/models and in requests, whose answer is the engine's with the
// adapter; /metrics names the adapters that run.
func TestLoRAModelNames(t *testing.T) {
	eng := cpuEngine(t)
	a, err := synth.LoRA(eng.Model().Config, 8, nil, 4)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tales.gguf")
	if err := lora.WriteGGUF(path, a, eng.Model().Config.Arch); err != nil {
		t.Fatal(err)
	}
	if err := eng.LoadAdapter("tales", path, 1); err != nil {
		t.Fatal(err)
	}
	_, url := serve(t, eng, server.Options{})

	resp, err := http.Get(url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"id":"stories260K:tales"`) || !strings.Contains(string(body), `"parent":"stories260K"`) {
		t.Errorf("/v1/models: %s", body)
	}

	req := runtime.Request{Prompt: "Once upon a time", MaxTokens: 20, Sampler: runtime.SamplerOptions{Temperature: 0}}
	base, _ := generate(t, eng, req)
	req.Adapters = []runtime.AdapterRef{{Name: "tales"}}
	want, _ := generate(t, eng, req)
	if want == base {
		t.Fatal("the adapter does not change the text")
	}
	for name, text := range map[string]string{"stories260K:tales": want, "stories260K": base} {
		code, out, _ := post(t, url+"/v1/completions", map[string]any{"model": name, "prompt": "Once upon a time", "max_tokens": 20, "temperature": 0})
		if code != http.StatusOK {
			t.Fatalf("%s: %d %v", name, code, out)
		}
		got := out["choices"].([]any)[0].(map[string]any)["text"].(string)
		if got != text {
			t.Errorf("%s: %q, want %q", name, got, text)
		}
	}
	if code, _, _ := post(t, url+"/v1/completions", map[string]any{"model": "stories260K:nope", "prompt": "a"}); code != http.StatusNotFound {
		t.Errorf("an unknown adapter: %d", code)
	}

	// While a long generation runs with the adapter, /metrics names it.
	st, err := eng.Start(context.Background(), runtime.Request{Prompt: "a", MaxTokens: 480, IgnoreEOS: true, Adapters: req.Adapters})
	if err != nil {
		t.Fatal(err)
	}
	st.Next()
	resp, err = http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	st.Cancel()
	if !strings.Contains(string(body), `vllm:lora_requests_info{max_lora="1",model_name="stories260K",running_lora_adapters="tales",waiting_lora_adapters=""}`) {
		t.Errorf("/metrics: %s", grepLines(string(body), "lora"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
