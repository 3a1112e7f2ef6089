package runtime_test

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/runtime"
)

// familiesGolden is what llama.cpp generated from the synthetic GGUFs of
// the 2025–26 families (testdata/families/README.md): for each shape the
// context it ran with, its greedy tokens and each token's
// log-probability under the raw logits.
type familiesGolden struct {
	Prompt []int32
	Shapes map[string]struct {
		Context  int
		Tokens   []int32
		Logprobs []float64
		// Top, where recorded (record.py with RECORD_TOP=N), is each
		// position's N most likely tokens as [id, log-probability]: a
		// random model at real widths is often so sure of its token that
		// its log-probability is 0, and the runners-up are what shows
		// the distribution.
		Top [][][2]float64
	}
}

// TestFamiliesMatchLlamaCpp: each family's synthetic GGUF (`tessera synth
// --seed 1 --type f32`) gives llama.cpp's greedy tokens on the CPU and on
// WebGPU, and its log-probabilities within 1e-3: SmolLM3's layers without
// RoPE, Phi-3's fused projections, partial rotation and LongRoPE (long
// factors at a context past the original, short ones within it:
// tiny-phi3-short), YaRN past its original context, and gpt-oss with its
// experts in f32 and in MXFP4.
func TestFamiliesMatchLlamaCpp(t *testing.T) {
	raw, err := os.ReadFile("../testdata/families/llamacpp.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden familiesGolden
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	for name, want := range golden.Shapes {
		t.Run(name, func(t *testing.T) {
			// SHAPE@mxfp4: the experts in MXFP4 (synth.WriteExperts, whose
			// blocks are llama-quantize's to the byte). llama.cpp's CPU
			// rounds the activations of those products to Q8_0 (its
			// vec_dot_type for MXFP4), Tessera's keep f32: tokens equal,
			// log-probabilities within 1e-2.
			shape, variant, _ := strings.Cut(name, "@")
			s, err := synth.Lookup(shape)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), shape+".gguf")
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			tol := 1e-3
			if strings.HasPrefix(shape, "tiny-gemma4") {
				// llama.cpp's CPU takes GELU (GeGLU's and the per-layer
				// inputs' gate) from a table of f16 inputs and outputs;
				// Tessera's is f32, within 1e-5 of a float64 reference
				// (TestGemma4Reference): tokens equal, log-probabilities
				// within 1e-2 (3.6e-3). The reference with llama.cpp's
				// table is within 1e-3 of llama.cpp
				// (TestGemma4LlamaCppGELU).
				tol = 1e-2
			}
			switch variant {
			case "":
				err = synth.Write(f, s, dtype.F32, 1)
			case "mxfp4":
				err, tol = synth.WriteExperts(f, s, dtype.F32, dtype.MXFP4, 1), 1e-2
			default:
				t.Fatalf("variant %q", variant)
			}
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
			checkFamily(t, path, golden.Prompt, want.Context, want.Tokens, want.Logprobs, want.Top, tol, true)
		})
	}
}

// TestFamiliesRealShapes is TestFamiliesMatchLlamaCpp at real shapes, by
// hand: TESSERA_REAL_GOLDEN names a recording of record.py and
// TESSERA_REAL_DIR the folder of its files (SHAPE.gguf). Skipped
// otherwise (the files are gigabytes; figures in the notes).
func TestFamiliesRealShapes(t *testing.T) {
	goldenPath, dir := os.Getenv("TESSERA_REAL_GOLDEN"), os.Getenv("TESSERA_REAL_DIR")
	if goldenPath == "" || dir == "" {
		t.Skip("TESSERA_REAL_GOLDEN and TESSERA_REAL_DIR not set")
	}
	raw, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	var golden familiesGolden
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	for name, want := range golden.Shapes {
		t.Run(name, func(t *testing.T) {
			checkFamily(t, filepath.Join(dir, name+".gguf"), golden.Prompt, want.Context, want.Tokens, want.Logprobs, want.Top, 1e-3, os.Getenv("TESSERA_REAL_WEBGPU") != "")
		})
	}
}

// checkFamily checks the model at path against llama.cpp's tokens and
// log-probabilities (within tol; and those of its top tokens at each
// position, where recorded) after prompt, at the given context, on the
// CPU, and with webgpu that WebGPU generates the CPU's tokens.
func checkFamily(t *testing.T, path string, prompt []int32, context int, tokens []int32, logprobs []float64, top [][][2]float64, tol float64, webgpu bool) {
	cpu, err := runtime.Load(path, runtime.Options{Device: "cpu", Context: context})
	if err != nil {
		t.Fatal(err)
	}
	defer cpu.Close()
	// llama.cpp's greedy tokens, position by position: Tessera's argmax
	// after llama.cpp's prefix, end-of-generation tokens left out as
	// llama.cpp's ignore_eos leaves them (so a match of every position is
	// a match of the free generation).
	ends := endTokens(cpu)
	worst := 0.0
	seq := append(append([]int32(nil), prompt...), tokens...)
	for i, l := range logits(t, cpu, seq)[len(prompt)-1:] {
		if got := argmaxExcept(l, ends); got != tokens[i] {
			t.Errorf("token %d: cpu %d, llama.cpp %d", i, got, tokens[i])
		}
		worst = max(worst, math.Abs(logSoftmax(l, tokens[i])-logprobs[i]))
		if i < len(top) {
			for _, q := range top[i] {
				worst = max(worst, math.Abs(logSoftmax(l, int32(q[0]))-q[1]))
			}
		}
	}
	t.Logf("max |Δ logprob| %.2g over %d tokens (and %d positions' top tokens)", worst, len(tokens), min(len(top), len(tokens)))
	if worst > tol {
		t.Errorf("log-probabilities differ from llama.cpp's by up to %g", worst)
	}
	if !webgpu {
		return
	}
	req := runtime.Request{Tokens: prompt, MaxTokens: len(tokens), IgnoreEOS: true}
	ref, _, _ := generate(t, cpu, req)
	g := loadWebGPU(t, path, runtime.Options{Context: context})
	if got, _, _ := generate(t, g, req); !equal(got, ref) {
		t.Errorf("webgpu:\n%v\ncpu:\n%v", got, ref)
	}
}

// logSoftmax is log p(tok) under logits l, in float64.
func logSoftmax(l []float32, tok int32) float64 {
	m := math.Inf(-1)
	for _, v := range l {
		m = max(m, float64(v))
	}
	sum := 0.0
	for _, v := range l {
		sum += math.Exp(float64(v) - m)
	}
	return float64(l[tok]) - m - math.Log(sum)
}

// endTokens are the ids llama.cpp ends a generation at (its EOG set): the
// end of sequence and the end-of-turn tokens it recognises by name.
func endTokens(e *runtime.Engine) map[int32]bool {
	tok := e.Model().Tokenizer
	ends := map[int32]bool{int32(tok.EOS()): true}
	for id := range tok.VocabSize() {
		switch tok.Piece(id) {
		case "<|end|>", "<|endoftext|>", "<|return|>", "<|call|>", "<|im_end|>", "<end_of_turn>", "<|eot_id|>":
			ends[int32(id)] = true
		}
	}
	return ends
}

// argmaxExcept is the index of l's largest value outside skip, the lower
// among equals.
func argmaxExcept(l []float32, skip map[int32]bool) int32 {
	best := int32(-1)
	for i, v := range l {
		if !skip[int32(i)] && (best < 0 || v > l[best]) {
			best = int32(i)
		}
	}
	return best
}
