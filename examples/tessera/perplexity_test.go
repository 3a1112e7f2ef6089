package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestPerplexityCompareCLI: --compare against the same file adds the
// divergence's figures, all zero, with every top token the same; an int8
// cache against the f32 reference (the reference's cache is always f32)
// diverges a little; the text output has llama.cpp's statistics block; and
// a --kv-type that does not exist is a usage error.
func TestPerplexityCompareCLI(t *testing.T) {
	model := filepath.Join(shared, "stories260K.gguf")
	text := filepath.Join("..", "..", "testdata", "heldout.txt")
	type result struct {
		Perplexity float64         `json:"perplexity"`
		Tokens     int             `json:"tokens"`
		Compare    *comparisonJSON `json:"compare"`
	}
	run := func(args ...string) result {
		t.Helper()
		code, out, errOut := runCLI(append([]string{"perplexity", "--model", model, "--text", text, "--device", "cpu",
			"--context", "256", "--compare", model, "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		var r result
		dec := json.NewDecoder(strings.NewReader(out))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil || dec.More() || r.Compare == nil {
			t.Fatalf("%v: stdout is not one JSON object with the comparison (%v): %q", args, err, out)
		}
		return r
	}
	self := run("--quant", "f32")
	if c := self.Compare; c.MeanKLD != 0 || c.KLDPercentile["max"] != 0 || c.SameTop != 1 || c.PPLRatio != 1 || c.RefPerplexity != self.Perplexity {
		t.Errorf("the model against itself: %+v", *c)
	}
	int8 := run("--quant", "f32", "--kv-type", "int8")
	if c := int8.Compare; c.MeanKLD <= 0 || c.MeanKLD > 0.01 || c.SameTop < 0.9 || c.RefPerplexity != self.Perplexity {
		t.Errorf("int8 cache against the f32 reference: %+v", *c)
	}
	t.Logf("held-out text, %d tokens: int8 cache against f32, mean KLD %.6f, 99%% %.6f, same top %.2f%%", int8.Tokens,
		int8.Compare.MeanKLD, int8.Compare.KLDPercentile["99"], 100*int8.Compare.SameTop)

	code, out, errOut := runCLI("perplexity", "--model", model, "--text", text, "--device", "cpu", "--context", "256",
		"--compare", model, "--kv-type", "int8")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"====== KL divergence statistics ======", "Mean    KLD:", "99.9%   KLD:", "Median  KLD:", "Same top p :", "int8 kv cache"} {
		if !strings.Contains(out+errOut, want) {
			t.Errorf("output lacks %q:\n%s%s", want, out, errOut)
		}
	}
	if code, _, errOut := runCLI("perplexity", "--model", model, "--text", text, "--kv-type", "q4"); code != 2 || !strings.Contains(errOut, "kv cache type") {
		t.Errorf("--kv-type q4: exit %d, %q", code, errOut)
	}
}
