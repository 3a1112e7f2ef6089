package runtime_test

import (
	"context"
	"encoding/json"
	"math"
	"sync"
	"testing"

	"github.com/tessera-llm/tessera/runtime"
)

// The reproducibility contract (docs/DECISIONS.md) as tests: what
// must be bitwise equal, what must give equal greedy tokens, and how far
// log-probabilities may move between backends.

// logprobs generates req with the tokens' log-probabilities.
func logprobs(t *testing.T, eng *runtime.Engine, req runtime.Request) ([]int32, []float32) {
	t.Helper()
	req.Logprobs = true
	var ids []int32
	var lps []float32
	if _, err := eng.Generate(context.Background(), req, func(tok runtime.Token) error {
		if tok.ID >= 0 {
			ids, lps = append(ids, tok.ID), append(lps, tok.Logprob)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return ids, lps
}

// together generates every story prompt at once and returns prompt k's.
func together(t *testing.T, eng *runtime.Engine, k, maxTokens int) ([]int32, []float32) {
	var wg sync.WaitGroup
	var ids []int32
	var lps []float32
	for i, p := range storyPrompts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, b := logprobs(t, eng, runtime.Request{Prompt: p, MaxTokens: maxTokens})
			if i == k {
				ids, lps = a, b
			}
		}()
	}
	wg.Wait()
	return ids, lps
}

// compare checks got against want: the same tokens, and log-probabilities
// bitwise equal (tol 0) or within tol.
func compare(t *testing.T, what string, wantIDs []int32, want []float32, gotIDs []int32, got []float32, tol float64) {
	t.Helper()
	if !equal(gotIDs, wantIDs) {
		t.Fatalf("%s: tokens\n%v\nwant\n%v", what, gotIDs, wantIDs)
	}
	worst := 0.0
	for i := range want {
		if tol == 0 && math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: token %d's log-probability %g, want %g bit for bit", what, i, got[i], want[i])
		}
		worst = max(worst, math.Abs(float64(got[i]-want[i])))
	}
	if worst > tol {
		t.Errorf("%s: log-probabilities move by %g, past %g", what, worst, tol)
	}
	t.Logf("%s: %d tokens equal, log-probabilities within %g", what, len(wantIDs), worst)
}

// TestReproducibilityContract: on the CPU, logits are bitwise equal
// whatever runs beside a sequence, however many threads compute it and
// whether its prompt came from the prefix cache; on WebGPU, and between
// WebGPU and the CPU, greedy tokens are equal and log-probabilities within
// the contract's tolerance (f32 weights: 1e-5; int4: 1e-3, where the CPU
// rounds activations to 16 bits and WebGPU keeps them f32).
func TestReproducibilityContract(t *testing.T) {
	path := sharedFile(t, "stories260K.gguf")
	const k, n = 2, 60
	req := runtime.Request{Prompt: storyPrompts[k], MaxTokens: n}
	cpu1, err := runtime.Load(path, runtime.Options{Device: "cpu", Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer cpu1.Close()
	wantIDs, want := logprobs(t, cpu1, req)
	cpu2, err := runtime.Load(path, runtime.Options{Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer cpu2.Close()
	ids, lps := logprobs(t, cpu2, req)
	compare(t, "cpu, all threads against one", wantIDs, want, ids, lps, 0)
	ids, lps = together(t, cpu2, k, n)
	compare(t, "cpu, batched with five others", wantIDs, want, ids, lps, 0)
	ids, lps = logprobs(t, cpu2, req) // the prompt's blocks are cached now
	compare(t, "cpu, prompt from the prefix cache", wantIDs, want, ids, lps, 0)
	if cpu1.Fingerprint() != cpu2.Fingerprint() {
		t.Errorf("equal CPU engines have fingerprints %s and %s", cpu1.Fingerprint(), cpu2.Fingerprint())
	}

	gpu := loadWebGPU(t, path, runtime.Options{})
	ids, lps = logprobs(t, gpu, req)
	compare(t, "webgpu against the cpu", wantIDs, want, ids, lps, 1e-5)
	ids, lps = together(t, gpu, k, n)
	compare(t, "webgpu batched with five others", wantIDs, want, ids, lps, 1e-5)
	if gpu.Fingerprint() == cpu1.Fingerprint() {
		t.Error("a WebGPU engine has the CPU's fingerprint")
	}

	int4 := runtime.Options{Quant: "int4", NoCalibration: true}
	c4, err := runtime.Load(path, runtime.Options{Device: "cpu", Quant: "int4", NoCalibration: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c4.Close()
	wantIDs, want = logprobs(t, c4, req)
	ids, lps = logprobs(t, loadWebGPU(t, path, int4), req)
	compare(t, "int4 webgpu against int4 cpu", wantIDs, want, ids, lps, 1e-3)
	if c4.Fingerprint() == cpu1.Fingerprint() {
		t.Error("int4 and f32 weights have one fingerprint")
	}
}

// TestTranscriptReplay: a sampled generation's transcript, through JSON,
// replays on the CPU bit for bit and on WebGPU greedy tokens within the
// contract; a transcript tampered with at one token is reported there,
// and one of another model refused.
func TestTranscriptReplay(t *testing.T) {
	path := sharedFile(t, "stories260K.gguf")
	eng, err := runtime.Load(path, runtime.Options{Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	record := func(req runtime.Request) *runtime.Transcript {
		req.Logprobs = true
		prompt, err := eng.PromptTokens(req)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := eng.NewTranscript(req, prompt)
		if err != nil {
			t.Fatal(err)
		}
		st, err := eng.Generate(context.Background(), req, func(tok runtime.Token) error { tr.Add(tok); return nil })
		if err != nil {
			t.Fatal(err)
		}
		tr.End(st)
		b, err := json.Marshal(tr)
		if err != nil {
			t.Fatal(err)
		}
		var back runtime.Transcript
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		return &back
	}
	sampled := record(runtime.Request{Prompt: storyPrompts[0], MaxTokens: 50, Sampler: runtime.SamplerOptions{Temperature: 0.9, TopK: 40, Seed: 11}})
	if sampled.Model.SHA256 == "" || len(sampled.Output) != 50 || sampled.Finish != "max_tokens" || sampled.Fingerprint != eng.Fingerprint() {
		t.Fatalf("transcript %+v", sampled)
	}
	r, err := eng.Replay(context.Background(), sampled)
	if err != nil {
		t.Fatal(err)
	}
	if r.Diverged != -1 || r.Tokens != 50 || r.MaxDelta != 0 || !r.SameFingerprint {
		t.Errorf("replayed on the same engine: %+v", r)
	}
	// Tampered at token 17: the replay says so there.
	tampered := *sampled
	tampered.Output = append([]int32(nil), sampled.Output...)
	tampered.Output[17] = (tampered.Output[17] + 1) % 512
	if r, err := eng.Replay(context.Background(), &tampered); err != nil || r.Diverged != 17 || r.Want != tampered.Output[17] || r.Got != sampled.Output[17] || r.Tokens != 17 {
		t.Errorf("a transcript tampered at token 17: %+v, %v", r, err)
	}
	other := *sampled
	other.Model.SHA256 = "00"
	if _, err := eng.Replay(context.Background(), &other); err == nil {
		t.Error("a transcript of another model replayed")
	}
	// Greedy, on WebGPU: the same tokens, log-probabilities within 1e-5.
	greedy := record(runtime.Request{Prompt: storyPrompts[1], MaxTokens: 40})
	r, err = loadWebGPU(t, path, runtime.Options{}).Replay(context.Background(), greedy)
	if err != nil {
		t.Fatal(err)
	}
	if r.Diverged != -1 || r.Tokens != 40 || r.MaxDelta > 1e-5 || r.SameFingerprint {
		t.Errorf("replayed on WebGPU: %+v", r)
	}
}
