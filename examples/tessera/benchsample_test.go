package main

import (
	"encoding/json"
	"path/filepath"
	"testing"
)

// TestBenchSamplingFlags: bench takes run's sampling flags, refuses bad
// ones as run does, and reports readback_bytes_per_token in its JSON (0 on
// the CPU, where nothing is read back).
func TestBenchSamplingFlags(t *testing.T) {
	model := filepath.Join(shared, "stories260K.gguf")
	code, out, errOut := runCLI("bench", "--model", model, "--device", "cpu", "--prompt-tokens", "4", "--gen-tokens", "4",
		"--temperature", "0.8", "--top-k", "40", "--top-p", "0.9", "--min-p", "0.05", "--repeat-penalty", "1.1", "--seed", "3", "--json")
	if code != 0 {
		t.Fatalf("bench: %s", errOut)
	}
	var r map[string]any
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if v, ok := r["readback_bytes_per_token"]; !ok || v != 0.0 {
		t.Errorf("readback_bytes_per_token %v (present %v), want 0 on the CPU", v, ok)
	}
	if code, _, errOut := runCLI("bench", "--model", model, "--device", "cpu", "--temperature", "-1"); code != 2 {
		t.Errorf("--temperature -1: exit %d (%s), want 2", code, errOut)
	}
}
