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
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu"
)

// moeShapes are the synthetic mixtures of experts: Mixtral (llama with
// experts, pairs RoPE), Qwen2-MoE (shared expert, biases), Qwen3-MoE (q/k
// norms, renormalised top-k), OLMoE (full-width q/k norms, k = E) and
// Granite (multipliers, k = 1).
var moeShapes = []string{"tiny-mixtral", "tiny-qwen2moe", "tiny-qwen3moe", "tiny-olmoe", "tiny-granitemoe"}

// moePrompt is long enough that the prompt's step puts more pairs on an
// expert than one block of the expert GEMVs holds.
const moePrompt = "abc def ghi jkl mno pqr stu vwx yz ab cd ef gh"

// TestMoEMatchesAcrossBackendsAndFormats: each synthetic MoE architecture
// gives the same greedy tokens on the CPU and on WebGPU, from its GGUF and
// from its Hugging Face folder, with f32 weights and with int4; its logits
// agree between the two files on the CPU (exactly where both rotate
// halves) and between the CPU and WebGPU to rounding; and the same with
// the prompt's expert products forced to the grouped GEMM.
func TestMoEMatchesAcrossBackendsAndFormats(t *testing.T) {
	// Among the slowest of the package; its own files and engines (each
	// with its own device), so it runs beside the other parallel ones.
	t.Parallel()
	for _, shape := range moeShapes {
		for _, typ := range []dtype.Type{dtype.F32, dtype.F16} {
			t.Run(shape+"-"+typ.String(), func(t *testing.T) {
				gguf := synthModel(t, shape, typ)
				hf := synthHF(t, shape, typ, synth.HFOptions{})
				req := runtime.Request{Prompt: moePrompt, MaxTokens: 40, IgnoreEOS: true}
				type run struct {
					name string
					path string
					opts runtime.Options
				}
				runs := []run{
					{"cpu gguf", gguf, runtime.Options{Device: "cpu"}}, {"cpu hf", hf, runtime.Options{Device: "cpu"}},
					{"webgpu gguf", gguf, runtime.Options{}}, {"webgpu hf", hf, runtime.Options{}},
					{"webgpu gguf, grouped GEMM", gguf, runtime.Options{Wrap: expertsPlan("gemm")}},
				}
				var want []int32
				var scores [][][]float32
				for i, r := range runs {
					var eng *runtime.Engine
					if r.opts.Device == "cpu" {
						var err error
						if eng, err = runtime.Load(r.path, r.opts); err != nil {
							t.Fatal(err)
						}
						defer eng.Close()
					} else {
						eng = loadWebGPU(t, r.path, r.opts)
					}
					if !eng.Model().Config.MoE.On() {
						t.Fatalf("%s: loaded without experts", r.name)
					}
					got, _, _ := generate(t, eng, req)
					if i == 0 {
						want = got
					} else if !equal(got, want) {
						t.Errorf("%s:\n%v\nwant (cpu gguf)\n%v", r.name, got, want)
					}
					scores = append(scores, logits(t, eng, append([]int32{1}, want[:30]...)))
				}
				bound := func(a, b [][]float32) float64 {
					worst := 0.0
					for p := range a {
						for j := range a[p] {
							worst = max(worst, math.Abs(float64(a[p][j]-b[p][j]))/(1+math.Abs(float64(a[p][j]))))
						}
					}
					return worst
				}
				halves := !strings.Contains(shape, "mixtral") && !strings.Contains(shape, "granite")
				if d := bound(scores[0], scores[1]); d > 1e-4 || halves && d != 0 {
					t.Errorf("cpu logits of the folder differ from the GGUF's by %g", d)
				}
				for i := 2; i < len(runs); i++ {
					if d := bound(scores[0], scores[i]); d > 1e-3 {
						t.Errorf("%s logits differ from the cpu's by %g", runs[i].name, d)
					}
				}

				// int4: the same codes on both backends (quantized on the host).
				cpuQ, err := runtime.Load(gguf, runtime.Options{Device: "cpu", Quant: "int4", NoCalibration: true})
				if err != nil {
					t.Fatal(err)
				}
				defer cpuQ.Close()
				wantQ, _, _ := generate(t, cpuQ, req)
				for _, plan := range []string{"", "gemm"} {
					gotQ, _, _ := generate(t, loadWebGPU(t, gguf, runtime.Options{Quant: "int4", NoCalibration: true, Wrap: expertsPlan(plan)}), req)
					if !equal(gotQ, wantQ) {
						t.Errorf("int4 (experts %q): webgpu\n%v\ncpu\n%v", plan, gotQ, wantQ)
					}
				}
			})
		}
	}
}

// TestMoEBatched: sequences decoding together (one step routes rows of
// several sequences, prompt chunks beside decoding rows) give each the
// tokens it gives alone, on WebGPU.
func TestMoEBatched(t *testing.T) {
	eng := loadWebGPU(t, synthModel(t, "tiny-qwen2moe", dtype.F32), runtime.Options{})
	var reqs []runtime.Request
	for i := range 4 {
		reqs = append(reqs, runtime.Request{Prompt: moePrompt[:10+7*i], MaxTokens: 24, IgnoreEOS: true})
	}
	var alone [][]int32
	for _, r := range reqs {
		ids, _, _ := generate(t, eng, r)
		alone = append(alone, ids)
	}
	together := generateTogether(t, eng, reqs)
	for i := range reqs {
		if !equal(together[i], alone[i]) {
			t.Errorf("request %d: batched\n%v\nalone\n%v", i, together[i], alone[i])
		}
	}
}

// TestMoEMatchesLlamaCpp: the synthetic MoE models give llama.cpp's greedy
// tokens, on the CPU and on WebGPU. testdata/moe/llamacpp.json holds what
// llama.cpp generated from the GGUFs `tessera synth --seed 1 --type f32`
// writes (see its source field): the same file read by another
// implementation, which checks the metadata keys, tensor layouts, routing
// rules and multipliers against llama.cpp's own reading of them. The
// recording: `node golden.mjs 32 SHAPE=PATH...` of testdata/moe/README.md.
func TestMoEMatchesLlamaCpp(t *testing.T) {
	raw, err := os.ReadFile("../testdata/moe/llamacpp.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden struct {
		Prompt []int32
		Tokens map[string][]int32
	}
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	// tiny-qwen3: a dense model whose heads are wider than dim/heads,
	// which llama.cpp sizes by attention.value_length.
	for _, shape := range append(moeShapes, "tiny-qwen3") {
		want := golden.Tokens[shape]
		if len(want) == 0 {
			t.Fatalf("%s: no llama.cpp tokens", shape)
		}
		s, err := synth.Lookup(shape)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), shape+".gguf")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := synth.Write(f, s, dtype.F32, 1); err != nil {
			t.Fatal(err)
		}
		f.Close()
		req := runtime.Request{Tokens: golden.Prompt, MaxTokens: len(want), IgnoreEOS: true}
		cpu, err := runtime.Load(path, runtime.Options{Device: "cpu"})
		if err != nil {
			t.Fatal(err)
		}
		got, _, _ := generate(t, cpu, req)
		cpu.Close()
		if !equal(got, want) {
			t.Errorf("%s cpu:\n%v\nllama.cpp:\n%v", shape, got, want)
		}
		for _, plan := range []string{"", "gemm"} {
			if got, _, _ := generate(t, loadWebGPU(t, path, runtime.Options{Wrap: expertsPlan(plan)}), req); !equal(got, want) {
				t.Errorf("%s webgpu (experts %q):\n%v\nllama.cpp:\n%v", shape, plan, got, want)
			}
		}
	}
}

// expertsPlan forces the WebGPU backend's expert products (gpu.Plan's
// Experts): "gemm" the grouped GEMM, which lavapipe, a CPU adapter, does
// not take by itself; "" leaves the plan alone.
func expertsPlan(kernel string) func(backend.Backend) backend.Backend {
	if kernel == "" {
		return nil
	}
	return withPlan(gpu.Plan{Experts: kernel})
}
