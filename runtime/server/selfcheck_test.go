package server_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/gpu"
	"github.com/tessera-llm/tessera/runtime/gpu/gputest"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
	"github.com/tessera-llm/tessera/runtime/server"
)

// TestHealthReportsSelfCheck: a model whose WebGPU kernels failed the
// load-time self-check (a faulty fused GEMV, by the backend's test hook)
// says so on /health, with the plan it fell back to and the mismatch, and
// in tessera_self_check_info; a CPU model reports no check.
func TestHealthReportsSelfCheck(t *testing.T) {
	eng, err := runtime.Load(modelPath(t), runtime.Options{Device: "webgpu", Quant: "f32",
		Plan: gpu.Plan{Fault: "matmul_gemv+norm+split3+prescaled"}, SelfCheckCache: runtime.DirCache(t.TempDir())})
	if errors.Is(err, webgpu.ErrNoAdapter) {
		gputest.NoDevice(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	s := server.New(server.Options{})
	if err := s.Add(modelName, eng); err != nil {
		t.Fatal(err)
	}
	if err := s.Add("on-cpu", cpuEngine(t)); err != nil {
		t.Fatal(err)
	}
	s.Ready()
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	url := ts.URL

	var health struct {
		Status    string
		SelfCheck map[string]struct {
			Status, Adapter, Plan string
			Failed, Kernels       []string
		} `json:"self_check"`
	}
	code, body := get(t, url+"/health")
	if err := json.Unmarshal([]byte(body), &health); err != nil || code != http.StatusOK {
		t.Fatalf("/health %d: %s (%v)", code, body, err)
	}
	c, ok := health.SelfCheck[modelName]
	if health.Status != "ok" || !ok || c.Status != "fallback" || c.Plan != "unfused projections" || len(c.Failed) != 2 ||
		!strings.Contains(c.Failed[0], "logit") || len(c.Kernels) == 0 || c.Adapter == "" {
		t.Fatalf("/health: %+v", health)
	}
	if _, ok := health.SelfCheck["on-cpu"]; ok {
		t.Error("/health reports a self-check of a CPU model")
	}
	_, metrics := get(t, url+"/metrics")
	if !strings.Contains(metrics, `tessera_self_check_info{adapter="`+c.Adapter+`",model_name="`+modelName+`",plan="unfused projections",status="fallback"} 2`) {
		t.Errorf("metrics lack the self-check:\n%s", grepLines(metrics, "self_check"))
	}
}
