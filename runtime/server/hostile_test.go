package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/models/lora"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/runtime/server"
)

// Requests no client should be able to hang or crash the server with, and
// the drain's end: each answered at once with a clear error.

// bounded is a client whose every request must be answered within 10 s:
// a bound on a hang, not a timing (the deadlines under test are a second
// or less).
var bounded = &http.Client{Timeout: 10 * time.Second}

// postBounded posts a JSON body with bounded and returns the status and
// the answer, failing the test if none comes within 10 s.
func postBounded(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := bounded.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("POST %s: reading the answer: %v", url, err)
	}
	return resp.StatusCode, string(raw)
}

// TestLoRAHostilePaths: a runtime load reads only regular files inside
// LoRADir. A FIFO is refused at once (an ordinary open would wait for a
// writer for ever), paths out of the directory by "..", by an absolute
// path or by a symlink are refused, a file that is not an adapter is
// refused without its bytes in the answer, and without LoRADir a load is
// refused as the server not being set up for it. All 4xx, naming the
// problem; the server serves on.
func TestLoRAHostilePaths(t *testing.T) {
	eng := cpuEngine(t)
	dir := t.TempDir()
	a, err := synth.LoRA(eng.Model().Config, 4, nil, 7)
	if err != nil {
		t.Fatal(err)
	}
	if err := lora.WriteGGUF(filepath.Join(dir, "tales.gguf"), a, eng.Model().Config.Arch); err != nil {
		t.Fatal(err)
	}
	const secret = "root:x:0:0:root:/root:/bin/bash"
	outside := filepath.Join(t.TempDir(), "passwd")
	for _, err := range []error{
		os.WriteFile(outside, []byte(secret+"\n"), 0o644),
		os.WriteFile(filepath.Join(dir, "passwd"), []byte(secret+"\n"), 0o644),
		os.Symlink(outside, filepath.Join(dir, "escape")),
		syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	_, nodir := serve(t, eng, server.Options{AllowRuntimeLoRA: true})
	if code, body := postText(t, nodir+"/v1/load_lora_adapter", `{"lora_name":"x","lora_path":"tales.gguf"}`); code != http.StatusForbidden || !strings.Contains(body, "--lora-dir") {
		t.Errorf("a load without LoRADir: %d %s", code, body)
	}

	_, url := serve(t, eng, server.Options{AllowRuntimeLoRA: true, LoRADir: dir, MaxLoRABytes: 1 << 20})
	big := filepath.Join(dir, "big.gguf")
	if err := os.WriteFile(big, make([]byte, 1<<20+1), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		status     int
		says       string
	}{
		{"fifo", "fifo", 400, "fifo is a named pipe (FIFO), not a regular file"},
		{"fifo absolute", filepath.Join(dir, "fifo"), 400, "named pipe"},
		{"dot dot", "../passwd", 400, "not a path inside the adapter directory"},
		{"absolute outside", "/etc/passwd", 400, "outside the adapter directory"},
		{"absolute dot dot", dir + "/../passwd", 400, "outside the adapter directory"},
		{"symlink out", "escape", 400, "escape cannot be opened inside the adapter directory"},
		{"not an adapter", "passwd", 400, "bad magic: not a GGUF file"},
		{"too large", "big.gguf", 400, "more than the 1048576 an adapter file may have"},
		{"missing", "none.gguf", 400, "none.gguf does not exist in the adapter directory"},
		{"the directory", ".", 400, "a PEFT adapter folder needs adapter_config.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, _ := json.Marshal(map[string]string{"lora_name": "x", "lora_path": tc.path})
			code, raw := postBounded(t, url+"/v1/load_lora_adapter", string(body))
			var got struct {
				Error struct{ Message, Param string }
			}
			if err := json.Unmarshal([]byte(raw), &got); err != nil {
				t.Fatalf("answer %d is not a JSON error: %s", code, raw)
			}
			if code != tc.status || !strings.Contains(got.Error.Message, tc.says) || got.Error.Param != "lora_path" {
				t.Errorf("%d %s, want %d saying %q about lora_path", code, raw, tc.status, tc.says)
			}
			if strings.Contains(raw, "root:") || strings.Contains(raw, "/bin/bash") {
				t.Errorf("the answer quotes the file: %s", raw)
			}
		})
	}
	if code, _, _ := post(t, url+"/v1/completions", map[string]any{"prompt": "Once", "max_tokens": 2}); code != http.StatusOK {
		t.Errorf("a completion after the hostile loads: %d", code)
	}
	if code, body := postText(t, url+"/v1/load_lora_adapter", `{"lora_name":"tales","lora_path":"tales.gguf"}`); code != http.StatusOK {
		t.Errorf("the good adapter by a relative path: %d %s", code, body)
	}
}

// TestSlowBody: a body sent a byte at a time is answered 408 once the
// body's deadline passes (the request timeout here, or BodyTimeout when
// shorter), with a JSON error, and its connection is closed; meanwhile
// other requests are served as usual. Both a body of stated length and a
// chunked one.
func TestSlowBody(t *testing.T) {
	eng := cpuEngine(t)
	for _, tc := range []struct {
		name    string
		opts    server.Options
		chunked bool
	}{
		{"request timeout", server.Options{RequestTimeout: time.Second}, false},
		{"body timeout", server.Options{BodyTimeout: time.Second}, false},
		{"chunked", server.Options{BodyTimeout: time.Second}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, url := serve(t, eng, tc.opts)
			conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			head := "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
			if tc.chunked {
				head += "Transfer-Encoding: chunked\r\n\r\n"
			} else {
				head += "Content-Length: 1000\r\n\r\n"
			}
			if _, err := io.WriteString(conn, head); err != nil {
				t.Fatal(err)
			}
			// A byte every 50 ms, until the server stops reading.
			stop := make(chan struct{})
			defer close(stop)
			go func() {
				for {
					b := "{"
					if tc.chunked {
						b = "1\r\n{\r\n"
					}
					if _, err := io.WriteString(conn, b); err != nil {
						return
					}
					select {
					case <-stop:
						return
					case <-time.After(50 * time.Millisecond):
					}
				}
			}()
			// Others are served meanwhile.
			if code, body := postBounded(t, url+"/v1/completions", `{"prompt":"Once","max_tokens":2}`); code != http.StatusOK {
				t.Errorf("a request beside the slow one: %d %s", code, body)
			}
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer to the slow body within 10 s: %v", err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var got struct {
				Error struct{ Message, Type string }
			}
			if resp.StatusCode != http.StatusRequestTimeout || json.Unmarshal(raw, &got) != nil || !strings.Contains(got.Error.Message, "the body did not arrive in time") {
				t.Errorf("slow body: %d %s", resp.StatusCode, raw)
			}
			// Then the connection closes: nothing more comes, and no
			// read waits for the 10 s deadline. A close with the slow
			// body's bytes unread in the server's socket is a reset.
			if n, err := br.Read(make([]byte, 1)); err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("after the 408 the connection is still open: read %d bytes, %v", n, err)
			}
		})
	}
}

// sseEvents reads a stream's events until it ends, within 10 s.
func sseEvents(t *testing.T, body io.Reader) []string {
	t.Helper()
	var events []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				events = append(events, d)
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not end within 10 s")
	}
	return events
}

// TestDrainCutsStreams: when Drain's context ends with requests still
// running, a stream ends with an error event (the shape a request timeout
// ends one with: {"error": {"message", "type"}}) and no [DONE], a request
// not streamed gets 503 with a JSON error, Drain reports them cut, and
// the engine frees their sequences.
func TestDrainCutsStreams(t *testing.T) {
	eng := cpuEngine(t)
	s, url := serve(t, eng, server.Options{})
	long := `{"prompt":"Once upon a time","max_tokens":2000,"ignore_eos":true,"stream":%v}`
	resp, err := bounded.Post(url+"/v1/completions", "application/json", strings.NewReader(fmt.Sprintf(long, true)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("the stream's first event: %q %v", line, err)
	}
	plain := make(chan [2]any, 1)
	go func() {
		resp, err := bounded.Post(url+"/v1/completions", "application/json", strings.NewReader(fmt.Sprintf(long, false)))
		if err != nil {
			plain <- [2]any{0, err.Error()}
			return
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		plain <- [2]any{resp.StatusCode, string(raw)}
	}()
	eventually(t, "before both run", func() string {
		if m := eng.Metrics(); m.Running != 2 {
			return fmt.Sprintf("%d running", m.Running)
		}
		return ""
	})
	// A drain whose time is already up: it cuts both at once.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	derr := s.Drain(ctx)
	if derr == nil || !strings.Contains(derr.Error(), "cut 2 requests") {
		t.Errorf("Drain: %v, want it to report 2 requests cut", derr)
	}
	events := sseEvents(t, br)
	if len(events) == 0 {
		t.Fatal("the stream ended without an event")
	}
	last := events[len(events)-1]
	var e struct {
		Error struct{ Message, Type string }
	}
	if json.Unmarshal([]byte(last), &e) != nil || e.Error.Type != "unavailable" || !strings.Contains(e.Error.Message, "shutting down") {
		t.Errorf("the stream's last event is %s, want an error event saying the server is shutting down", last)
	}
	for _, ev := range events {
		if ev == "[DONE]" {
			t.Error("a cut stream sent [DONE]")
		}
	}
	p := <-plain
	if code, _ := p[0].(int); code != http.StatusServiceUnavailable || !strings.Contains(p[1].(string), "shutting down") {
		t.Errorf("the request not streamed: %v %v", p[0], p[1])
	}
	eventually(t, "after the cut", func() string { return busy(eng) })
}

// TestWrongModelKind: a generative endpoint given an embedding model,
// or the embeddings endpoint given a generative model, says which kind
// the model is and where it is served, not that it does not exist.
func TestWrongModelKind(t *testing.T) {
	emb, ranker := embedders(t)
	url := serveEmbedders(t, emb, ranker)
	only := server.New(server.Options{})
	if err := only.AddEmbedder("bert", emb); err != nil {
		t.Fatal(err)
	}
	only.Ready()
	onlyURL := newHTTPServer(t, only)
	chat := func(model string) string {
		return `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]}`
	}
	for _, tc := range []struct {
		name, url, path, body string
		status                int
		says                  string
	}{
		{"chat with an embedder", url, "/v1/chat/completions", chat("bert"), 404,
			`the model "bert" is an embedding model; it serves /v1/embeddings, not /v1/chat/completions`},
		{"completions with a reranker", url, "/v1/completions", `{"model":"ranker","prompt":"a"}`, 404,
			`the model "ranker" is an embedding model; it serves /v1/rerank, not /v1/completions`},
		{"tokenize with an embedder", url, "/tokenize", `{"model":"bert","prompt":"a"}`, 404, "not /tokenize"},
		{"embeddings with a generative model", url, "/v1/embeddings", `{"model":"stories260K","input":"a"}`, 404,
			`the model "stories260K" is a generative model; it serves /v1/chat/completions and /v1/completions, not /v1/embeddings`},
		{"rerank with a generative model", url, "/v1/rerank", `{"model":"stories260K","query":"a","documents":["b"]}`, 404,
			"is a generative model; it serves /v1/chat/completions and /v1/completions, not /v1/rerank"},
		{"rerank with an embedder", url, "/v1/rerank", `{"model":"bert","query":"a","documents":["b"]}`, 400,
			`the model "bert" is an embedding model, not a reranker: use /v1/embeddings`},
		{"chat on a server of embedders", onlyURL, "/v1/chat/completions", chat(""), 404,
			"this server has no generative models for /v1/chat/completions; its models (bert) are embedding models"},
		{"unknown model", url, "/v1/chat/completions", chat("gpt-9"), 404, `the model "gpt-9" does not exist`},
		{"unknown embedder", url, "/v1/embeddings", `{"model":"gpt-9","input":"a"}`, 404, `the model "gpt-9" does not exist`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, raw := postBounded(t, tc.url+tc.path, tc.body)
			var got struct{ Error struct{ Message string } }
			if json.Unmarshal([]byte(raw), &got) != nil || code != tc.status || !strings.Contains(got.Error.Message, tc.says) {
				t.Errorf("%d %s, want %d saying %q", code, raw, tc.status, tc.says)
			}
			if strings.Contains(got.Error.Message, "is no ") {
				t.Errorf("the message still says %q", got.Error.Message)
			}
		})
	}
}

// TestErrorFields: a field of the wrong type is named as the API names it
// (not by the Go structs the request types embed), in the message and in
// the error's param; a text content part without its text says so.
func TestErrorFields(t *testing.T) {
	eng := cpuEngine(t)
	_, url := serve(t, eng, server.Options{})
	for _, tc := range []struct {
		path, body, param, says string
	}{
		{"/v1/completions", `{"prompt":"a","n":"x"}`, "n", "n must be an integer, not a JSON string"},
		{"/v1/completions", `{"prompt":"a","regex":1}`, "regex", "regex must be a string, not a JSON number"},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"a"}],"response_format":{"type":1}}`, "response_format.type", "response_format.type must be a string"},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"a"}],"stream_options":{"include_usage":1}}`, "stream_options.include_usage", "stream_options.include_usage must be a boolean"},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"text"}]}]}`, "messages", `a content part of type "text" needs a "text"`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, "messages", `a content part of type "image_url" needs "image_url"`},
	} {
		code, raw := postBounded(t, url+tc.path, tc.body)
		var got struct {
			Error struct {
				Message string
				Param   *string
			}
		}
		if json.Unmarshal([]byte(raw), &got) != nil || code != http.StatusBadRequest || got.Error.Param == nil || *got.Error.Param != tc.param ||
			!strings.HasPrefix(got.Error.Message, tc.says) {
			t.Errorf("%s: %d %s, want 400 about %s saying %q", tc.body, code, raw, tc.param, tc.says)
		}
	}
}
