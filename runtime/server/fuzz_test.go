package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/runtime"
)

// fuzzSlow bounds one input's answer: the checks of a 64 KiB body take
// milliseconds, so one that takes this long is a way to tie up a server.
const fuzzSlow = 5 * time.Second

// fuzzEndpoints are the endpoints whose bodies FuzzDecodeRequest sends;
// its first argument picks one.
var fuzzEndpoints = []string{
	"/v1/completions", "/v1/chat/completions", "/v1/embeddings", "/v1/rerank",
	"/tokenize", "/detokenize", "/v1/load_lora_adapter", "/v1/unload_lora_adapter",
	"/v1/responses",
	"/v1/messages", "/v1/messages/count_tokens",
}

// fuzzSeeds are valid and nearly valid bodies of each endpoint, the
// corpus the fuzzer starts from (beside testdata/fuzz/FuzzDecodeRequest,
// which keeps what it found).
var fuzzSeeds = map[string][]string{
	"/v1/completions": {
		`{"model":"stories260K","prompt":"Once upon a time","max_tokens":5,"temperature":0.5,"top_p":0.9,"top_k":40,"min_p":0.1,"seed":7,"stop":["."],"n":2}`,
		`{"prompt":[[1,2,3],[4,5]],"echo":true,"logprobs":2,"max_tokens":0}`,
		`{"prompt":["a","b"],"logit_bias":{"5":-100},"frequency_penalty":1,"presence_penalty":-1,"repetition_penalty":1.1,"stream":true,"stream_options":{"include_usage":true}}`,
		`{"prompt":"a","response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}}}}`,
		`{"prompt":"a","grammar":"root ::= \"yes\" | \"no\""}`,
		`{"prompt":"a","regex":"[a-z]{1,5}"}`,
		`{"prompt":"a","guided_choice":["x","y"]}`,
		`{"prompt":"a","lora":[{"id":0,"scale":0.5}],"suffix":"b","ignore_eos":true,"max_completion_tokens":3}`,
		`{"model":"stories260K:none","prompt":"a"}`,
	},
	"/v1/chat/completions": {
		`{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],"max_tokens":4,"logprobs":true,"top_logprobs":3}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"Hi"}]}],"tools":[{"type":"function","function":{"name":"get","description":"d","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}}],"tool_choice":"required","parallel_tool_calls":false}`,
		`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get","arguments":"{\"q\":1}"}}]},{"role":"tool","tool_call_id":"c1","content":"2"}],"tool_choice":{"type":"function","function":{"name":"get"}},"tools":[{"type":"function","function":{"name":"get"}}]}`,
		`{"messages":[{"role":"developer","content":"x"}],"response_format":{"type":"json_object"},"stream":true}`,
		`{"model":"bert","messages":[{"role":"user","content":"Hi"}]}`,
	},
	"/v1/responses": {
		`{"model":"stories260K","input":"Hi","instructions":"Be brief.","max_output_tokens":4,"temperature":0.5,"top_p":0.9,"store":false,"metadata":{"k":"v"},"truncation":"disabled","include":["reasoning.encrypted_content"],"reasoning":{"effort":"low","summary":"auto"}}`,
		`{"input":[{"type":"message","role":"developer","content":"x"},{"role":"user","content":[{"type":"input_text","text":"Hi"}]},{"type":"reasoning","id":"rs_1","summary":[],"content":[{"type":"reasoning_text","text":"hm"}]},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"a","annotations":[]}]},{"type":"function_call","call_id":"c1","name":"get","arguments":"{\"q\":1}"},{"type":"function_call_output","call_id":"c1","output":"2"}],"tools":[{"type":"function","name":"get","parameters":{"type":"object","properties":{"q":{"type":"integer"}}},"strict":true}],"tool_choice":"required","parallel_tool_calls":false}`,
		`{"input":"a","tools":[{"type":"function","name":"get"}],"tool_choice":{"type":"function","name":"get"},"stream":true}`,
		`{"input":"a","text":{"format":{"type":"json_schema","name":"x","schema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]},"strict":true},"verbosity":"low"}}`,
		`{"input":"a","text":{"format":{"type":"json_object"}},"previous_response_id":"resp_x"}`,
		`{"input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"x"}]},{"type":"item_reference","id":"x"}],"tools":[{"type":"web_search"}]}`,
		`{"input":"a","max_tokens":3,"response_format":{"type":"text"},"n":2,"background":true,"conversation":"c","prompt":{"id":"p"},"truncation":"auto","top_logprobs":2}`,
	},
	"/v1/messages": {
		`{"model":"stories260K","max_tokens":5,"system":"Be brief.","messages":[{"role":"user","content":"Hi"}],"temperature":0.5,"top_p":0.9,"top_k":40,"stop_sequences":["."],"metadata":{"user_id":"u"},"stream":true}`,
		`{"max_tokens":5,"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"text","text":"Hi"}]},{"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":""},{"type":"redacted_thinking","data":"x"},{"type":"text","text":"a"},{"type":"tool_use","id":"t1","name":"get","input":{"q":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"2"}],"is_error":true},{"type":"text","text":"ok"}]}],"tools":[{"name":"get","description":"d","input_schema":{"type":"object","properties":{"q":{"type":"integer"}}}}],"tool_choice":{"type":"any","disable_parallel_tool_use":true}}`,
		`{"max_tokens":2000,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"a"}],"tool_choice":{"type":"tool","name":"get"},"tools":[{"type":"custom","name":"get","input_schema":{"type":"object"}}]}`,
		`{"max_tokens":5,"output_config":{"effort":"max","format":{"type":"json_schema","schema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}}},"messages":[{"role":"user","content":"a"}],"thinking":{"type":"disabled"}}`,
		`{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}]}],"tools":[{"type":"web_search_20250305","name":"web_search"}]}`,
		`{"max_tokens":5,"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"},{"role":"assistant","content":"x"}]}`,
	},
	"/v1/messages/count_tokens": {
		`{"model":"stories260K","system":"s","messages":[{"role":"user","content":"Hi"}],"tools":[{"name":"get","input_schema":{"type":"object"}}],"tool_choice":{"type":"auto"},"thinking":{"type":"adaptive"}}`,
		`{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x"}]}]}`,
	},
	"/v1/embeddings": {
		`{"model":"bert","input":"hello world","encoding_format":"base64","dimensions":8}`,
		`{"input":["a","b"]}`,
		`{"model":"bert","input":[[1,2,3],[4]]}`,
		`{"model":"bert","input":[5,6]}`,
		`{"model":"stories260K","input":"a"}`,
	},
	"/v1/rerank": {
		`{"model":"ranker","query":"q","documents":["a",{"text":"b"}],"top_n":1,"return_documents":true}`,
	},
	"/tokenize": {
		`{"prompt":"Once upon a time","add_special_tokens":false}`,
		`{"messages":[{"role":"user","content":"hi"}]}`,
	},
	"/detokenize": {
		`{"tokens":[1,2,3]}`,
	},
	"/v1/load_lora_adapter": {
		`{"lora_name":"x","lora_path":"tales.gguf","base_model_name":"stories260K"}`,
		`{"lora_name":"x","lora_path":"../../etc/passwd"}`,
	},
	"/v1/unload_lora_adapter": {
		`{"lora_name":"x"}`,
	},
}

// fuzzHostile are bodies any endpoint might be sent: numbers past every
// type, nesting past the JSON decoder's depth, strings that are not
// UTF-8, fields of every wrong type.
var fuzzHostile = []string{
	`{"n":1e309,"max_tokens":1e20,"seed":-1,"top_logprobs":2147483648,"dimensions":-1,"top_n":-5}`,
	`{"max_tokens":9223372036854775807,"n":2147483647,"logprobs":-2147483648}`,
	strings.Repeat("[", 20000) + strings.Repeat("]", 20000),
	`{"prompt":` + strings.Repeat(`{"a":`, 10001) + `1` + strings.Repeat("}", 10001) + `}`,
	"{\"prompt\":\"\xff\xfe\\u0000\\ud800\",\"messages\":[{\"role\":\"user\",\"content\":\"\xc3\"}],\"input\":\"\xff\",\"query\":\"\\udfff\",\"documents\":[\"\\u0000\"]}",
	`{"model":{},"prompt":true,"messages":"x","input":{},"documents":"x","tokens":"x","lora_name":1,"stop":[1],"logit_bias":[],"lora":{}}`,
	`{"logit_bias":{"-1":1,"99999999999":1,"5":1e400},"lora":[{"id":-1},{"id":1e10},{"name":"x","scale":1e308}]}`,
	`{"tools":[{"type":"function","function":{"name":"f","parameters":` + strings.Repeat(`{"type":"array","items":`, 500) + `{}` + strings.Repeat("}", 500) + `}}],"tool_choice":"required","messages":[{"role":"user","content":"a"}]}`,
	`{"response_format":{"type":"json_schema","json_schema":{"schema":{"$ref":"#"}}},"prompt":"a","messages":[{"role":"user","content":"a"}]}`,
	`{"guided_regex":"(((a*)*)*)*","prompt":"a"}`,
	`{"messages":[{"role":"user","content":[{"type":"text"}]},{"role":"tool"}],"tool_choice":{"type":"function"},"tools":[{}]}`,
}

// fuzzServer is the server FuzzDecodeRequest sends to, made once per
// process: stories260K, whose queue is kept full so that a generation
// that passes every check is refused by the queue (429) before the
// engine starts it, and the synthetic tiny-bert and tiny-reranker.
// Completions and embedding requests come with a cancelled context, so
// that what would still run a model (echo's scores, an embedding) ends
// before its forward pass (499); the others run their templates and
// tokenizers in full. Runtime LoRA loads read from an empty directory.
// The body limit (64 KiB) bounds the memory any input can take.
type fuzzServer struct {
	s   *Server
	log *syncBuffer
}

var (
	fuzzOnce sync.Once
	fuzzSrv  fuzzServer
	fuzzErr  error
)

func newFuzzServer(t testing.TB) fuzzServer {
	t.Helper()
	fuzzOnce.Do(func() { fuzzSrv, fuzzErr = loadFuzzServer() })
	if fuzzErr != nil {
		t.Fatal(fuzzErr)
	}
	return fuzzSrv
}

func loadFuzzServer() (fuzzServer, error) {
	eng, err := runtime.Load(filepath.Join("..", "..", "..", "shared", "models", "stories260K.gguf"), runtime.Options{Device: "cpu"})
	if err != nil {
		return fuzzServer{}, err
	}
	dir, err := os.MkdirTemp("", "fuzz-server")
	if err != nil {
		return fuzzServer{}, err
	}
	log := &syncBuffer{}
	s := New(Options{MaxBodyBytes: 64 << 10, AllowRuntimeLoRA: true, LoRADir: dir,
		Logger: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelError}))})
	if err := s.Add("stories260K", eng); err != nil {
		return fuzzServer{}, err
	}
	for _, shape := range []struct{ name, synth string }{{"bert", "tiny-bert"}, {"ranker", "tiny-reranker"}} {
		sh, err := synth.Lookup(shape.synth)
		if err != nil {
			return fuzzServer{}, err
		}
		path := filepath.Join(dir, shape.name+".model")
		f, err := os.Create(path)
		if err != nil {
			return fuzzServer{}, err
		}
		err = synth.Write(f, sh, dtype.F32, 5)
		f.Close()
		if err != nil {
			return fuzzServer{}, err
		}
		emb, err := runtime.LoadEmbedder(path, runtime.Options{Device: "cpu"})
		if err != nil {
			return fuzzServer{}, err
		}
		os.Remove(path) // the directory stays empty of adapters
		if err := s.AddEmbedder(shape.name, emb); err != nil {
			return fuzzServer{}, err
		}
	}
	s.Ready()
	s.models["stories260K"].seqs.Store(1 << 40) // full: nothing reaches the engine
	return fuzzServer{s: s, log: log}, nil
}

// syncBuffer is the fuzz server's error log.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) take() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.b.String()
	b.b.Reset()
	return s
}

// FuzzDecodeRequest sends arbitrary bytes as the JSON body of every
// endpoint that takes one, through the whole handler (keys, routing,
// body limits, decoding, every check, the model lookup, templates and
// tokenizers) but not into a model. No input may make the server panic
// or fail: each is answered 200 (tokenize, echo only) or 4xx, every
// answer is JSON, and every refusal an error with a message and a
// type (OpenAI's shape, or Anthropic's on its Messages API). Findings are
// kept in testdata/fuzz/FuzzDecodeRequest.
func FuzzDecodeRequest(f *testing.F) {
	for i, ep := range fuzzEndpoints {
		for _, body := range fuzzSeeds[ep] {
			f.Add(uint8(i), []byte(body))
		}
		for _, body := range fuzzHostile {
			f.Add(uint8(i), []byte(body))
		}
		f.Add(uint8(i), []byte(`{`))
		f.Add(uint8(i), []byte(`null`))
		f.Add(uint8(i), []byte(`{} {}`))
		f.Add(uint8(i), []byte(``))
	}
	srv := newFuzzServer(f)
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		path := fuzzEndpoints[int(which)%len(fuzzEndpoints)]
		ctx := context.Background()
		switch path {
		case "/v1/completions", "/v1/embeddings", "/v1/rerank":
			// Whatever would still run a model (echo's scores, an
			// embedding) stops before its forward pass.
			cancelled, cancel := context.WithCancel(ctx)
			cancel()
			ctx = cancelled
		}
		r := httptest.NewRequestWithContext(ctx, http.MethodPost, path, bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		// A request that takes seconds to refuse is a finding too: the
		// watchdog's panic ends the worker, which keeps the input.
		slow := time.AfterFunc(fuzzSlow, func() { panic(fmt.Sprintf("POST %s %q: no answer after %v", path, body, fuzzSlow)) })
		srv.s.ServeHTTP(w, r)
		slow.Stop()
		logged := srv.log.take()
		code, raw := w.Code, w.Body.Bytes()
		if code != http.StatusOK && (code < 400 || code > 499) {
			t.Fatalf("POST %s %q: status %d %s\nlog: %s", path, body, code, raw, logged)
		}
		if logged != "" {
			t.Errorf("POST %s %q: the server logged an error: %s", path, body, logged)
		}
		if strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") {
			return // a stream refused after it began: its events were checked by the handler
		}
		var answer struct {
			Error *struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Param   *string `json:"param"`
			} `json:"error"`
		}
		if err := json.Unmarshal(raw, &answer); err != nil {
			t.Fatalf("POST %s %q: status %d, the answer is not JSON: %q", path, body, code, raw)
		}
		if code != http.StatusOK && (answer.Error == nil || answer.Error.Message == "" || answer.Error.Type == "") {
			t.Fatalf("POST %s %q: status %d without an OpenAI error: %s", path, body, code, raw)
		}
	})
}
