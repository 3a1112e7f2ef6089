package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models/lora"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/server"
)

// TestLoRAModelNames: a loaded adapter is also a model, BASE:ADAPTER, in
// /v1/models and in requests (where its own name serves too, unless two
// models have it), whose answer is the engine's with the adapter;
// /metrics names the adapters that run.
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
	// The adapter's own name too, as vLLM serves it and as the metric
	// below lists it for the inference extension's LoRA affinity.
	for name, text := range map[string]string{"stories260K:tales": want, "tales": want, "stories260K": base} {
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

// postText sends a JSON body and returns the status and the raw answer.
func postText(t *testing.T, url string, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

// modelIDs lists the ids /v1/models answers.
func modelIDs(t *testing.T, url string) []string {
	t.Helper()
	code, body := get(t, url+"/v1/models")
	if code != http.StatusOK {
		t.Fatalf("/v1/models: %d %s", code, body)
	}
	var list struct {
		Data []struct{ ID string }
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range list.Data {
		ids = append(ids, d.ID)
	}
	return ids
}

// TestLoRARuntimeLoading: with AllowRuntimeLoRA and LoRADir, POST
// /v1/load_lora_adapter loads an adapter that requests then name as BASE:NAME and /v1/models
// lists, /v1/unload_lora_adapter removes it; bad requests get errors that
// say what is wrong. Without the option both endpoints answer 403.
func TestLoRARuntimeLoading(t *testing.T) {
	eng := cpuEngine(t)
	c := eng.Model().Config
	dir := t.TempDir()
	good, other := filepath.Join(dir, "tales.gguf"), filepath.Join(dir, "other.gguf")
	for i, p := range []string{good, other} {
		a, err := synth.LoRA(c, 8, nil, uint64(30+i))
		if err != nil {
			t.Fatal(err)
		}
		if err := lora.WriteGGUF(p, a, c.Arch); err != nil {
			t.Fatal(err)
		}
	}
	// An adapter of a model of another shape.
	wide := c
	wide.Dim, wide.FFN = 2*c.Dim, 2*c.FFN
	a, err := synth.LoRA(wide, 4, []string{"down"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	mismatch := filepath.Join(dir, "wide.gguf")
	if err := lora.WriteGGUF(mismatch, a, c.Arch); err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(dir, "broken.gguf")
	os.WriteFile(broken, []byte("GGUF not really"), 0o644)

	_, off := serve(t, eng, server.Options{})
	if code, body := postText(t, off+"/v1/load_lora_adapter", `{"lora_name":"tales","lora_path":"`+good+`"}`); code != http.StatusForbidden || !strings.Contains(body, "--allow-runtime-lora") {
		t.Errorf("load without the option: %d %s", code, body)
	}
	if code, _ := postText(t, off+"/v1/unload_lora_adapter", `{"lora_name":"tales"}`); code != http.StatusForbidden {
		t.Errorf("unload without the option: %d", code)
	}

	_, url := serve(t, eng, server.Options{AllowRuntimeLoRA: true, LoRADir: dir})
	code, body := postText(t, url+"/v1/load_lora_adapter", `{"lora_name":"tales","lora_path":"`+good+`"}`)
	if code != http.StatusOK || !strings.Contains(body, "Success: LoRA adapter 'tales' added") {
		t.Fatalf("load: %d %s", code, body)
	}
	if ids := modelIDs(t, url); !slices.Equal(ids, []string{"stories260K", "stories260K:tales"}) {
		t.Errorf("/v1/models after the load: %v", ids)
	}
	req := runtime.Request{Prompt: "Once upon a time", MaxTokens: 20, Adapters: []runtime.AdapterRef{{Name: "tales"}}}
	want, _ := generate(t, eng, req)
	code, out, _ := post(t, url+"/v1/completions", map[string]any{"model": "stories260K:tales", "prompt": "Once upon a time", "max_tokens": 20, "temperature": 0})
	if code != http.StatusOK || out["choices"].([]any)[0].(map[string]any)["text"] != want {
		t.Errorf("completion with the loaded adapter: %d %v, want %q", code, out, want)
	}

	for _, tc := range []struct {
		endpoint, body string
		status         int
		want           string
	}{
		{"load", `{"lora_name":"tales","lora_path":"` + other + `"}`, 400, `already loaded`},
		{"load", `{"lora_name":"x","lora_path":"` + filepath.Join(dir, "none.gguf") + `"}`, 400, "none.gguf does not exist in the adapter directory"},
		{"load", `{"lora_name":"x","lora_path":"broken.gguf"}`, 400, "bad LoRA adapter broken.gguf"},
		{"load", `{"lora_name":"x","lora_path":"` + broken + `"}`, 400, "bad LoRA adapter"},
		{"load", `{"lora_name":"x","lora_path":"` + mismatch + `"}`, 400, "tensor blk.0.ffn_down.weight adapts a 128×344 matrix but the base model's is 64×172"},
		{"load", `{"lora_name":"x"}`, 400, "both lora_name and lora_path"},
		{"load", `{"lora_path":"` + good + `"}`, 400, "lora_name is required"},
		{"load", `{"lora_name":"a:b","lora_path":"` + good + `"}`, 400, "may not hold ':'"},
		{"load", `{"lora_name":"x","lora_path":"` + good + `","base_model_name":"nope"}`, 404, "does not exist"},
		{"load", `{"lora_name":`, 400, "not valid JSON"},
		{"unload", `{"lora_name":"nope"}`, 404, `the LoRA adapter \"nope\" is not loaded`},
	} {
		code, body := postText(t, url+"/v1/"+tc.endpoint+"_lora_adapter", tc.body)
		if code != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("%s %s: %d %s, want %d saying %q", tc.endpoint, tc.body, code, body, tc.status, tc.want)
		}
	}
	if ids := modelIDs(t, url); len(ids) != 2 {
		t.Errorf("failed loads changed /v1/models: %v", ids)
	}

	code, body = postText(t, url+"/v1/unload_lora_adapter", `{"lora_name":"tales"}`)
	if code != http.StatusOK || !strings.Contains(body, "Success: LoRA adapter 'tales' removed") {
		t.Fatalf("unload: %d %s", code, body)
	}
	if ids := modelIDs(t, url); !slices.Equal(ids, []string{"stories260K"}) {
		t.Errorf("/v1/models after the unload: %v", ids)
	}
	if code, _, _ := post(t, url+"/v1/completions", map[string]any{"model": "stories260K:tales", "prompt": "a", "max_tokens": 2}); code != http.StatusNotFound {
		t.Errorf("a request for the unloaded adapter: %d", code)
	}
	// The name is free again, for another file.
	if code, body := postText(t, url+"/v1/load_lora_adapter", `{"lora_name":"tales","lora_path":"`+other+`","base_model_name":"stories260K"}`); code != http.StatusOK {
		t.Errorf("load again: %d %s", code, body)
	}
}

// TestLoRARequestList: a request's "lora" list (llama-server's) applies
// the adapters it names, by name or by id (their order in /v1/models),
// at its scales, several at once; scale 0 leaves one out. Bad lists get
// a 400 or, for an adapter that is not loaded, a 404, naming the field.
func TestLoRARequestList(t *testing.T) {
	eng := cpuEngine(t)
	c := eng.Model().Config
	for i, name := range []string{"tales", "poems"} {
		a, err := synth.LoRA(c, 8, nil, uint64(40+i))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), name+".gguf")
		if err := lora.WriteGGUF(path, a, c.Arch); err != nil {
			t.Fatal(err)
		}
		if err := eng.LoadAdapter(name, path, 1); err != nil {
			t.Fatal(err)
		}
	}
	_, url := serve(t, eng, server.Options{})
	ids := modelIDs(t, url)
	second := strings.TrimPrefix(ids[2], "stories260K:") // id 1

	const prompt = "Once upon a time"
	text := func(refs ...runtime.AdapterRef) string {
		s, _ := generate(t, eng, runtime.Request{Prompt: prompt, MaxTokens: 24, Sampler: runtime.SamplerOptions{Temperature: 0}, Adapters: refs})
		return s
	}
	base := text()
	for _, tc := range []struct {
		name string
		lora any
		want string
	}{
		{"by name", []map[string]any{{"name": "tales"}}, text(runtime.AdapterRef{Name: "tales"})},
		{"by id, scaled", []map[string]any{{"id": 1, "scale": 0.5}}, text(runtime.AdapterRef{Name: second, Scale: 0.5})},
		{"two at once", []map[string]any{{"name": "tales", "scale": 0.7}, {"name": "poems", "scale": -0.3}},
			text(runtime.AdapterRef{Name: "tales", Scale: 0.7}, runtime.AdapterRef{Name: "poems", Scale: -0.3})},
		{"scale 0: none", []map[string]any{{"name": "tales", "scale": 0}}, base},
		{"empty: none", []map[string]any{}, base},
	} {
		code, out, _ := post(t, url+"/v1/completions", map[string]any{"model": "stories260K", "prompt": prompt, "max_tokens": 24, "temperature": 0, "lora": tc.lora})
		if code != http.StatusOK {
			t.Errorf("%s: %d %v", tc.name, code, out)
			continue
		}
		if got := out["choices"].([]any)[0].(map[string]any)["text"].(string); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	if tales := text(runtime.AdapterRef{Name: "tales"}); tales == base || tales == text(runtime.AdapterRef{Name: "tales", Scale: 0.5}) {
		t.Fatal("the adapter or its scale does not change the text")
	}

	// Chat takes the list too: as the model name BASE:ADAPTER does.
	chat := func(model string, list any) string {
		t.Helper()
		code, out, _ := post(t, url+"/v1/chat/completions", map[string]any{"model": model, "max_tokens": 16, "temperature": 0,
			"messages": []map[string]string{{"role": "user", "content": "Tell a story."}}, "lora": list})
		if code != http.StatusOK {
			t.Fatalf("chat %s %v: %d %v", model, list, code, out)
		}
		return out["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)
	}
	if got, want := chat("stories260K", []map[string]any{{"name": "poems"}}), chat("stories260K:poems", nil); got != want {
		t.Errorf("chat with lora poems: %q, with the model stories260K:poems: %q", got, want)
	}

	for _, tc := range []struct {
		name  string
		model string
		lora  any
		code  int
		want  string
	}{
		{"id and name", "stories260K", []map[string]any{{"id": 0, "name": "tales"}}, 400, "gives both an id and a name"},
		{"neither", "stories260K", []map[string]any{{"scale": 1}}, 400, "needs an id or a name"},
		{"an id too large", "stories260K", []map[string]any{{"id": 2}}, 400, "no adapter has id 2; stories260K has 2"},
		{"a negative id", "stories260K", []map[string]any{{"id": -1}}, 400, "no adapter has id -1"},
		{"not loaded", "stories260K", []map[string]any{{"name": "nope"}}, 404, `the LoRA adapter "nope" is not loaded`},
		{"twice", "stories260K", []map[string]any{{"name": "tales"}, {"id": 0}, {"name": "tales"}}, 400, "listed twice"},
		{"an absurd scale", "stories260K", []map[string]any{{"name": "tales", "scale": 1e9}}, 400, "outside [-1000, 1000]"},
		{"with an adapter's model name", "stories260K:tales", []map[string]any{{"name": "poems"}}, 400, "already names its adapter"},
		{"not a list", "stories260K", "tales", 400, "lora"},
	} {
		code, out, _ := post(t, url+"/v1/completions", map[string]any{"model": tc.model, "prompt": "a", "max_tokens": 2, "lora": tc.lora})
		msg := errorMessage(t, out)
		if code != tc.code || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: %d %q, want %d saying %q", tc.name, code, msg, tc.code, tc.want)
		}
		if e := out["error"].(map[string]any); e["param"] != "lora" && tc.name != "not a list" {
			t.Errorf("%s: param %v, want lora", tc.name, e["param"])
		}
	}

	// Each running combination of several adapters is a composite of its
	// own: past runtime.MaxCombinations a new one waits its turn (429).
	for i := range runtime.MaxCombinations {
		st, err := eng.Start(context.Background(), runtime.Request{Prompt: "a", MaxTokens: 400, IgnoreEOS: true,
			Adapters: []runtime.AdapterRef{{Name: "tales", Scale: 1 + float32(i)/8}, {Name: "poems"}}})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Cancel()
	}
	code, out, header := post(t, url+"/v1/completions", map[string]any{"model": "stories260K", "prompt": "a", "max_tokens": 2,
		"lora": []map[string]any{{"name": "tales", "scale": 0.25}, {"name": "poems"}}})
	if msg := errorMessage(t, out); code != http.StatusTooManyRequests || header.Get("Retry-After") == "" || !strings.Contains(msg, "combinations") {
		t.Errorf("a combination past the limit: %d (Retry-After %q) %q, want 429", code, header.Get("Retry-After"), msg)
	}
}

// TestLoRAAmbiguousName: an adapter's own name that two models have is
// refused, naming both; BASE:ADAPTER still picks one.
func TestLoRAAmbiguousName(t *testing.T) {
	s := server.New(server.Options{})
	for i, name := range []string{"one", "two"} {
		eng := cpuEngine(t)
		a, err := synth.LoRA(eng.Model().Config, 4, []string{"q"}, uint64(60+i))
		if err != nil {
			t.Fatal(err)
		}
		if err := eng.AddAdapter("tales", a, 1); err != nil {
			t.Fatal(err)
		}
		if err := s.Add(name, eng); err != nil {
			t.Fatal(err)
		}
	}
	s.Ready()
	ts := httptest.NewServer(s)
	defer ts.Close()
	code, out, _ := post(t, ts.URL+"/v1/completions", map[string]any{"model": "tales", "prompt": "a", "max_tokens": 2})
	if msg := errorMessage(t, out); code != http.StatusBadRequest || !strings.Contains(msg, "one:tales, two:tales") {
		t.Errorf("an ambiguous adapter name: %d %q", code, msg)
	}
	if code, out, _ := post(t, ts.URL+"/v1/completions", map[string]any{"model": "two:tales", "prompt": "a", "max_tokens": 2}); code != http.StatusOK {
		t.Errorf("two:tales: %d %v", code, out)
	}
}
