package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/gpu/gputest"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
	"github.com/tessera-llm/tessera/runtime/server"
)

const modelName = "stories260K"

func modelPath(t testing.TB) string {
	t.Helper()
	p := filepath.Join("..", "..", "..", "shared", "models", "stories260K.gguf")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("test model missing: %v", err)
	}
	return p
}

// engines loads stories260K on the CPU and on WebGPU (f32 weights, so both
// give the reference's tokens); WebGPU is skipped outside CI when there
// is no adapter.
func engines(t *testing.T) map[string]*runtime.Engine {
	t.Helper()
	out := map[string]*runtime.Engine{}
	for _, dev := range []string{"cpu", "webgpu"} {
		eng, err := runtime.Load(modelPath(t), runtime.Options{Device: dev, Quant: "f32"})
		if errors.Is(err, webgpu.ErrNoAdapter) {
			t.Logf("webgpu: %v", err)
			if os.Getenv("CI") != "" {
				gputest.NoDevice(t, err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { eng.Close() })
		out[dev] = eng
	}
	return out
}

func cpuEngine(t *testing.T) *runtime.Engine {
	t.Helper()
	eng, err := runtime.Load(modelPath(t), runtime.Options{Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng
}

// synthModel writes the synthetic model of shape (f32, seed 5) to a file
// of the test's and returns its path; context > 0 replaces the shape's
// context length.
func synthModel(t *testing.T, shape string, context int) string {
	t.Helper()
	sh, err := synth.Lookup(shape)
	if err != nil {
		t.Fatal(err)
	}
	if context > 0 {
		sh.Config.Context = context
	}
	path := filepath.Join(t.TempDir(), shape+".gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	err = synth.Write(f, sh, dtype.F32, 5)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// serve starts a listening server on 127.0.0.1 with eng as modelName.
func serve(t *testing.T, eng *runtime.Engine, opts server.Options) (*server.Server, string) {
	t.Helper()
	s := server.New(opts)
	if err := s.Add(modelName, eng); err != nil {
		t.Fatal(err)
	}
	s.Ready()
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts.URL
}

func client(url string, opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{option.WithBaseURL(url + "/v1/"), option.WithAPIKey("none"), option.WithMaxRetries(0)}, opts...)...)
}

// generate is the engine's own answer to req, for comparison.
func generate(t *testing.T, eng *runtime.Engine, req runtime.Request) (string, runtime.Stats) {
	t.Helper()
	var text strings.Builder
	st, err := eng.Generate(context.Background(), req, func(tok runtime.Token) error {
		text.WriteString(tok.Text)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return text.String(), st
}

// post sends body (a string, or a value to encode) and decodes the answer.
func post(t *testing.T, url string, body any, header ...string) (int, map[string]any, http.Header) {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case string:
		r = strings.NewReader(b)
	case []byte:
		r = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(http.MethodPost, url, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("answer %d is not JSON: %q", resp.StatusCode, raw)
	}
	return resp.StatusCode, out, resp.Header
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

// errorMessage is the message of an OpenAI-shaped error body.
func errorMessage(t *testing.T, body map[string]any) string {
	t.Helper()
	e, ok := body["error"].(map[string]any)
	if !ok {
		t.Fatalf("no error object in %v", body)
	}
	msg, _ := e["message"].(string)
	if msg == "" || e["type"] == nil {
		t.Fatalf("error without message or type: %v", e)
	}
	return msg
}

func optionKey(k string) option.RequestOption { return option.WithAPIKey(k) }

// newHTTPServer listens on 127.0.0.1 with h.
func newHTTPServer(t *testing.T, h http.Handler) string {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL
}
