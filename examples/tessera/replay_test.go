package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunTranscriptReplay: `run --transcript` writes a sampled
// generation's transcript; `replay` reproduces it on the CPU and on
// WebGPU's greedy terms, and a transcript tampered with at token 5 makes
// it exit 1 saying so.
func TestRunTranscriptReplay(t *testing.T) {
	model := filepath.Join(shared, "stories260K.gguf")
	file := filepath.Join(t.TempDir(), "t.json")
	code, _, stderr := runCLI("run", "--model", model, "--device", "cpu", "--steps", "30", "--temperature", "0.8", "--seed", "5", "--transcript", file)
	if code != 0 {
		t.Fatalf("run: %d %s", code, stderr)
	}
	code, out, stderr := runCLI("replay", "--model", model, "--device", "cpu", file)
	if code != 0 || !strings.Contains(out, "reproduced: all 30 tokens, log-probabilities within 0") {
		t.Fatalf("replay: %d %q %s", code, out, stderr)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var tr map[string]any
	if err := json.Unmarshal(b, &tr); err != nil {
		t.Fatal(err)
	}
	if tr["system_fingerprint"] == "" || tr["model"].(map[string]any)["sha256"] == "" || len(tr["output"].([]any)) != 30 {
		t.Fatalf("transcript %s", b)
	}
	out5 := tr["output"].([]any)
	out5[5] = float64((int(out5[5].(float64)) + 1) % 512)
	b, _ = json.Marshal(tr)
	tampered := filepath.Join(t.TempDir(), "tampered.json")
	os.WriteFile(tampered, b, 0o644)
	code, out, stderr = runCLI("replay", "--model", model, "--device", "cpu", tampered)
	if code != 1 || !strings.Contains(out, "departs at token 5") || !strings.Contains(stderr, "departs from the transcript at token 5") {
		t.Errorf("replay of a tampered transcript: %d %q %s", code, out, stderr)
	}

	// A JSON file that is no transcript is refused as one, before any
	// model is asked for.
	notOne := filepath.Join(t.TempDir(), "other.json")
	os.WriteFile(notOne, []byte(`{"name": "something else"}`), 0o644)
	code, _, stderr = runCLI("replay", notOne)
	if code != 1 || !strings.Contains(stderr, "transcript version 0, this engine reads 1") {
		t.Errorf("replay of a JSON file that is no transcript: %d %s", code, stderr)
	}
}
