package server_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/server"
)

// families scrapes /metrics and parses it with Prometheus's own parser:
// each family's type, and each histogram's sum over its series.
func families(t *testing.T, url string) (types map[string]string, sums map[string]float64) {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	types, sums = map[string]string{}, map[string]float64{}
	for name, f := range fams {
		types[name] = strings.ToLower(f.GetType().String())
		for _, m := range f.Metric {
			if h := m.GetHistogram(); h != nil {
				sums[name] += h.GetSampleSum()
			}
		}
	}
	return types, sums
}

// TestMetricsVLLMNames: with speculative decoding on, /metrics has vLLM's
// spec_decode counters (acceptance per draft position included), its
// prefill, decode and inference time histograms and the per-request time
// per output token under the names current vLLM exports, and none of the
// names vLLM removed; the counters agree with one another and move with
// requests.
func TestMetricsVLLMNames(t *testing.T) {
	eng, err := runtime.Load(modelPath(t), runtime.Options{Device: "cpu", Context: 512, Draft: "ngram", SpeculateAlways: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	_, url := serve(t, eng, server.Options{})
	// A story repeats itself enough for prompt lookup to draft.
	for _, p := range prompts {
		if code, body, _ := post(t, url+"/v1/completions", map[string]any{"prompt": p, "max_tokens": 120, "temperature": 0}); code != 200 {
			t.Fatalf("%d %v", code, body)
		}
	}
	types, sums := families(t, url)
	for name, want := range map[string]string{
		"vllm:spec_decode_num_drafts_total":                  "counter",
		"vllm:spec_decode_num_draft_tokens_total":            "counter",
		"vllm:spec_decode_num_accepted_tokens_total":         "counter",
		"vllm:spec_decode_num_accepted_tokens_per_pos_total": "counter",
		"vllm:request_prefill_time_seconds":                  "histogram",
		"vllm:request_decode_time_seconds":                   "histogram",
		"vllm:request_inference_time_seconds":                "histogram",
		"vllm:request_time_per_output_token_seconds":         "histogram",
		"vllm:inter_token_latency_seconds":                   "histogram",
		"vllm:time_to_first_token_seconds":                   "histogram",
		"vllm:kv_cache_usage_perc":                           "gauge",
		"vllm:cache_config_info":                             "gauge",
	} {
		if types[name] != want {
			t.Errorf("%s is %q, want %s", name, types[name], want)
		}
	}
	for _, gone := range []string{"vllm:time_per_output_token_seconds", "vllm:gpu_cache_usage_perc"} {
		if _, ok := types[gone]; ok {
			t.Errorf("%s is exported; vLLM removed it", gone)
		}
	}

	m := scrape(t, url)
	lbl := `{model_name="stories260K"}`
	drafts, tokens, accepted := m["vllm:spec_decode_num_drafts_total"+lbl], m["vllm:spec_decode_num_draft_tokens_total"+lbl], m["vllm:spec_decode_num_accepted_tokens_total"+lbl]
	if drafts == 0 || tokens < drafts || accepted == 0 || accepted > tokens {
		t.Fatalf("drafts %g, draft tokens %g, accepted %g: want drafts, with some accepted", drafts, tokens, accepted)
	}
	t.Logf("%g drafts of %g tokens, %g accepted", drafts, tokens, accepted)
	// Accepted tokens are the sum over positions, and each position was
	// accepted at most as often as the one before it.
	var sum, prev float64 = 0, drafts
	for pos := range runtime.MaxDraft {
		n, ok := m[`vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name="stories260K",position="`+strconv.Itoa(pos)+`"}`]
		if !ok {
			t.Fatalf("no accepted_tokens_per_pos series for position %d", pos)
		}
		if n > prev {
			t.Errorf("position %d accepted %g times, more than position %d (%g)", pos, n, pos-1, prev)
		}
		sum, prev = sum+n, n
	}
	if sum != accepted {
		t.Errorf("per-position acceptances sum to %g, accepted tokens %g", sum, accepted)
	}
	n := float64(len(prompts))
	for _, h := range []string{"vllm:request_prefill_time_seconds", "vllm:request_decode_time_seconds", "vllm:request_inference_time_seconds",
		"vllm:request_time_per_output_token_seconds", "vllm:e2e_request_latency_seconds"} {
		if c := m[h+"_count"+lbl]; c != n {
			t.Errorf("%s_count = %g, want %g", h, c, n)
		}
	}
	prefill, decode, infer := sums["vllm:request_prefill_time_seconds"], sums["vllm:request_decode_time_seconds"], sums["vllm:request_inference_time_seconds"]
	if prefill <= 0 || decode <= 0 || abs(prefill+decode-infer) > 1e-6*infer {
		t.Errorf("prefill %gs + decode %gs, inference %gs", prefill, decode, infer)
	}
	if e2e := sums["vllm:e2e_request_latency_seconds"]; e2e < infer {
		t.Errorf("end to end %gs is less than inference %gs", e2e, infer)
	}
}

// TestMetricsNoSpecWithoutDraft: an engine without a draft exports no
// spec_decode series, as vLLM exports them only when speculating.
func TestMetricsNoSpecWithoutDraft(t *testing.T) {
	_, url := serve(t, cpuEngine(t), server.Options{})
	types, _ := families(t, url)
	for name := range types {
		if strings.HasPrefix(name, "vllm:spec_decode") {
			t.Errorf("%s exported without a draft", name)
		}
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
