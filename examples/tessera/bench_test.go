package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/eval"
)

// BenchmarkCPUQ4_0 is issue 16's measurement as a Go benchmark: synthetic
// models at real shapes, written in F16 and quantized to Q4_0 as a user
// would (synth, then quantize), prefill and decode on the CPU backend at
// its default threads (one per core), with the file's int4 kept in memory.
//
//	go test ./examples/tessera -run '^$' -bench CPUQ4_0 -benchtime 1x
func BenchmarkCPUQ4_0(b *testing.B) {
	for _, shape := range []string{"smollm2-135m", "qwen2.5-0.5b"} {
		b.Run(shape, func(b *testing.B) {
			dir := b.TempDir()
			src, dst := filepath.Join(dir, "f16.gguf"), filepath.Join(dir, "q4_0.gguf")
			if code, _, errOut := runCLI("synth", "--shape", shape, "--type", "f16", "--out", src); code != 0 {
				b.Fatalf("synth: %s", errOut)
			}
			if code, _, errOut := runCLI("quantize", "--model", src, "--out", dst, "--type", "q4_0"); code != 0 {
				b.Fatalf("quantize: %s", errOut)
			}
			eng, err := runtime.Load(dst, runtime.Options{Device: "cpu", Context: 1024})
			if err != nil {
				b.Fatal(err)
			}
			defer eng.Close()
			var prompt, decode float64
			for b.Loop() {
				r, err := eval.Bench(context.Background(), eng, eval.BenchOptions{PromptTokens: 128, GenTokens: 64})
				if err != nil {
					b.Fatal(err)
				}
				prompt, decode = r.PromptTPS, r.DecodeTPS
			}
			b.ReportMetric(prompt, "prefill-tok/s")
			b.ReportMetric(decode, "decode-tok/s")
		})
	}
}

// TestBenchLoRA: `bench --lora A --lora B --concurrency 4` runs the
// sequences with the adapters in turn and says so, in text and JSON;
// with --lora-merge they are in the weights and no sequence names one.
func TestBenchLoRA(t *testing.T) {
	base := filepath.Join(shared, "stories260K.gguf")
	dir := t.TempDir()
	a, b := filepath.Join(dir, "tales.gguf"), filepath.Join(dir, "fables.gguf")
	for i, p := range []string{a, b} {
		if code, _, errOut := runCLI("synth", "--lora", base, "--rank", "4", "--seed", fmt.Sprint(i+1), "--out", p); code != 0 {
			t.Fatalf("synth --lora: %s", errOut)
		}
	}
	args := []string{"bench", "--model", base, "--device", "cpu", "--prompt-tokens", "8", "--gen-tokens", "8", "--concurrency", "4", "--lora", a, "--lora", b}
	code, out, errOut := runCLI(args...)
	if code != 0 || !strings.Contains(out, "adapters          tales, fables (sequence i runs adapter i mod 2)") {
		t.Errorf("bench --lora: exit %d, output:\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(append(args, "--json")...)
	var r eval.BenchResult
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil || !slices.Equal(r.Adapters, []string{"tales", "fables"}) {
		t.Errorf("bench --lora --json: exit %d, adapters %v, output:\n%s%s", code, r.Adapters, out, errOut)
	}
	code, out, errOut = runCLI(append(args, "--lora-merge")...)
	if code != 0 || strings.Contains(out, "adapters") {
		t.Errorf("bench --lora --lora-merge: exit %d, output:\n%s%s", code, out, errOut)
	}
}

// TestBenchBudgets: --max-batch-tokens and --max-seqs reach the engine at
// one token a step and at their largest (the tokens capped by stories260K's
// context), bench says them, --concurrency past the default 64 sequences
// raises --max-seqs to it, and out-of-range budgets are usage errors.
func TestBenchBudgets(t *testing.T) {
	model := filepath.Join(shared, "stories260K.gguf")
	for _, c := range []struct {
		args         []string
		tokens, seqs int
	}{
		{[]string{"--max-batch-tokens", "1", "--max-seqs", "1"}, 1, 1},
		{[]string{"--max-batch-tokens", "8192", "--max-seqs", "256", "--concurrency", "256"}, 2048, 256},
		{[]string{"--concurrency", "100"}, 128, 100},
	} {
		args := append([]string{"bench", "--model", model, "--device", "cpu", "--prompt-tokens", "4", "--gen-tokens", "2", "--json"}, c.args...)
		code, out, errOut := runCLI(args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, errOut)
		}
		var r eval.BenchResult
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		if r.MaxBatchTokens != c.tokens || r.MaxSeqs != c.seqs {
			t.Errorf("%v: budgets %d tokens, %d sequences; want %d, %d", c.args, r.MaxBatchTokens, r.MaxSeqs, c.tokens, c.seqs)
		}
	}
	code, out, _ := runCLI("bench", "--model", model, "--device", "cpu", "--prompt-tokens", "4", "--gen-tokens", "2", "--max-seqs", "3")
	if code != 0 || !strings.Contains(out, "budgets           128 tokens and 3 sequences a step") {
		t.Errorf("bench --max-seqs 3: exit %d\n%s", code, out)
	}
	for _, bad := range [][]string{{"--max-seqs", "257"}, {"--max-batch-tokens", "-1"}, {"--max-batch-tokens", "4", "--max-seqs", "8"}, {"--concurrency", "257"}} {
		code, _, errOut := runCLI(append([]string{"bench", "--model", model, "--device", "cpu"}, bad...)...)
		if code != 2 || !strings.Contains(errOut, strings.TrimPrefix(bad[0], "-")) {
			t.Errorf("bench %v: exit %d, %q; want a usage error naming the flag", bad, code, errOut)
		}
	}
}

// TestBenchKVFollowsWindow: for a model whose every layer slides
// (tiny-mistral, a window of 10), `bench --json` reports the same KV bytes
// at a context of 64 and of 256, all of them the rings, and with
// --full-windows bytes that grow with the context; `info` says what one
// sequence keeps.
func TestBenchKVFollowsWindow(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tiny-mistral")
	if code, _, errOut := runCLI("synth", "--shape", "tiny-mistral", "--format", "hf", "--out", dir); code != 0 {
		t.Fatalf("synth: %s", errOut)
	}
	kv := func(ctx int, extra ...string) eval.BenchResult {
		args := append([]string{"bench", "--model", dir, "--device", "cpu", "--context", fmt.Sprint(ctx), "--prompt-tokens", "8", "--gen-tokens", "8",
			"--max-batch-tokens", "32", "--max-seqs", "2", "--json"}, extra...)
		code, out, errOut := runCLI(args...)
		var r eval.BenchResult
		if code != 0 || json.Unmarshal([]byte(out), &r) != nil {
			t.Fatalf("%v: exit %d, output:\n%s%s", args, code, out, errOut)
		}
		return r
	}
	short, long := kv(64), kv(256)
	if short.KVBytes == 0 || short.KVBytes != long.KVBytes || long.KVWindowBytes != long.KVBytes {
		t.Errorf("rings: kv %d bytes at 64 tokens, %d at 256 (%d of them rings)", short.KVBytes, long.KVBytes, long.KVWindowBytes)
	}
	fullShort, fullLong := kv(64, "--full-windows"), kv(256, "--full-windows")
	if fullLong.KVBytes <= fullShort.KVBytes || fullLong.KVWindowBytes != 0 || fullLong.KVBytes <= long.KVBytes {
		t.Errorf("every position: kv %d bytes at 64 tokens, %d at 256 (rings %d)", fullShort.KVBytes, fullLong.KVBytes, long.KVBytes)
	}
	code, out, errOut := runCLI("info", "--model", dir)
	if code != 0 || !strings.Contains(out, "the sliding layers a ring of their window") {
		t.Errorf("info: exit %d, output:\n%s%s", code, out, errOut)
	}
}
