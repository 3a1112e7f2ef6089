package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/gguf"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/eval"
)

// k512 writes a synthetic Llama whose matrices' rows are an even number
// of K-quant super-blocks (512 and 1024 wide), in F16: rows where every
// block type's Blocks layout takes exactly its file's bytes (an odd
// number of Q6_K or Q3_K super-blocks pads its scales by 2 bytes).
func k512(t *testing.T, dir string) string {
	t.Helper()
	src := filepath.Join(dir, "k512.gguf")
	s := synth.Shape{Name: "k512", Config: models.Config{Arch: "llama", Dim: 512, FFN: 1024, Layers: 2, Heads: 8, KVHeads: 4,
		HeadDim: 64, Vocab: 300, Context: 128, NormEps: 1e-5, RopeTheta: 10000, RopeDim: 64}}
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := synth.Write(f, s, dtype.F16, 3); err != nil {
		t.Fatal(err)
	}
	return src
}

// TestDecodeBytesQ4_K_M: a Q4_K_M file (Q4_K and Q6_K) loaded with the
// defaults keeps every matrix at its file's bits on both backends, so
// that a decode step reads the file's tensor bytes (less the embedding
// table but the row it looks up) plus the keys and values of the
// positions so far: decode_bytes_per_token equals that sum exactly, and
// `bench` prints it and each tensor group's bits in the file and as kept,
// equal.
func TestDecodeBytesQ4_K_M(t *testing.T) {
	dir := t.TempDir()
	src, dst := k512(t, dir), filepath.Join(dir, "q4_k_m.gguf")
	if code, _, errOut := runCLI("quantize", "--model", src, "--out", dst, "--type", "q4_k_m"); code != 0 {
		t.Fatalf("quantize: exit %d: %s", code, errOut)
	}
	f, err := gguf.Open(dst)
	if err != nil {
		t.Fatal(err)
	}
	var file, embed int64
	types := map[dtype.Type]int{}
	for _, ti := range f.Tensors {
		file += ti.Size
		types[ti.Type]++
		if ti.Name == models.TokenEmbedding {
			embed = ti.Size
		}
	}
	f.Close()
	if types[dtype.Q4_K] == 0 || types[dtype.Q6_K] == 0 {
		t.Fatalf("the file's types %v: want Q4_K and Q6_K", types)
	}
	for _, device := range []string{"cpu", "webgpu"} {
		eng := loadModel(t, dst, runtime.Options{Device: device})
		c := eng.Model().Config
		if c.TiedEmbeddings {
			t.Fatal("the shape ties its head to the table: the table's bytes would be read whole")
		}
		kv := int64(c.Layers) * 2 * int64(c.KVHeads*c.HeadDim) * 4 // f32 keys and values of a position
		weights := file - embed + embed/int64(c.Vocab)
		for _, pos := range []int{0, 9} {
			if got, want := eng.DecodeBytes(pos), weights+int64(pos+1)*kv; got != want {
				t.Errorf("%s: decode bytes at position %d: %d, want the file's %d weight bytes read + %d of keys and values = %d (%+d)",
					device, pos, got, weights, int64(pos+1)*kv, want, got-want)
			}
		}
		t.Logf("%s: %s; file tensors %d bytes, a step reads %d of them + %d a position", device, runtime.FormatMix(eng.WeightMix()), file, weights, kv)
		if got := eng.WeightBytes(); got != file {
			t.Errorf("%s: weights take %d bytes, the file's tensors %d (%s)", device, got, file, runtime.FormatMix(eng.WeightMix()))
		}
		code, out, errOut := runCLI("bench", "--model", dst, "--device", device, "--prompt-tokens", "8", "--gen-tokens", "4", "--json")
		if code != 0 {
			t.Fatalf("bench on %s: exit %d: %s", device, code, errOut)
		}
		var r eval.BenchResult
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("bench on %s: %v: %s", device, err, out)
		}
		if r.DecodeBytes <= weights || (r.DecodeBytes-weights)%kv != 0 {
			t.Errorf("%s: bench's decode_bytes_per_token %d: not the file's %d weight bytes plus whole positions of %d bytes", device, r.DecodeBytes, weights, kv)
		}
		for _, g := range r.Bits {
			if g.FileBits != g.Bits {
				t.Errorf("%s: %s (%s) kept at %.4g bits, the file's %.4g", device, g.Group, g.Types, g.Bits, g.FileBits)
			}
		}
		if len(r.Bits) < 8 {
			t.Errorf("%s: bits by tensor group: %+v", device, r.Bits)
		}
	}
}

// formatsGolden is testdata/formats/llamacpp.json: llama.cpp's greedy
// tokens and their log-probabilities for k256 quantized by `tessera
// quantize --type TYPE` and then expanded to F32 by llama-quantize (its
// own dequantization of the file's blocks), each type under its name
// (README there).
type formatsGolden struct {
	Prompt []int32 `json:"prompt"`
	Shapes map[string]struct {
		Context  int       `json:"context"`
		Tokens   []int32   `json:"tokens"`
		Logprobs []float64 `json:"logprobs"`
	} `json:"shapes"`
}

// TestQuantizedMatchLlamaCpp: a model quantized to each block type (every
// matrix, the table and the head included), run at the file's bits,
// gives the greedy tokens that llama.cpp gives for the values it reads
// from that file (the recording ran llama.cpp on llama-quantize's F32
// expansion of it, so that llama.cpp's own rounding of activations to 8
// bits, which moves its log-probabilities by up to 0.07 on this random
// model, is no part of the comparison): position by position (Tessera's
// argmax after llama.cpp's prefix, end of sequence left out as
// llama.cpp's ignore_eos leaves it), each token's log-probability within
// 2e-3 (measured: 3.2e-4 at most; Tessera's CPU rounds activations to 16
// bits of their group's largest), and WebGPU decodes the CPU's tokens.
//
// By hand, for files that llama-quantize wrote: TESSERA_FORMATS_GOLDEN
// names a recording of those files' F32 expansions and
// TESSERA_FORMATS_FILES the folder of the files (NAME.gguf for each name
// in it). TESSERA_FORMATS_KEEP keeps the quantized files in a folder, to
// record them.
func TestQuantizedMatchLlamaCpp(t *testing.T) {
	goldenPath, files := "../../testdata/formats/llamacpp.json", ""
	if g := os.Getenv("TESSERA_FORMATS_GOLDEN"); g != "" {
		goldenPath, files = g, os.Getenv("TESSERA_FORMATS_FILES")
	}
	raw, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	var golden formatsGolden
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	if files == "" && len(golden.Shapes) != len(dtype.BlockTypes)-1 { // Q4_1: int4's groups (TestQuantizeQ4_1)
		t.Errorf("the recording holds %d types, want every block type but Q4_1", len(golden.Shapes))
	}
	dir := os.Getenv("TESSERA_FORMATS_KEEP")
	if dir == "" {
		dir = t.TempDir()
	}
	var src string
	if files == "" {
		src = k256(t, dir)
	}
	for name, want := range golden.Shapes {
		t.Run(name, func(t *testing.T) {
			dst := filepath.Join(dir, "k256-"+name+".gguf")
			if files != "" {
				dst = filepath.Join(files, name+".gguf")
			} else if code, _, errOut := runCLI("quantize", "--model", src, "--out", dst, "--type", name); code != 0 {
				t.Fatalf("quantize: exit %d: %s", code, errOut)
			}
			cpu := loadModel(t, dst, runtime.Options{Device: "cpu", Context: want.Context})
			eos := int32(cpu.Tokenizer().EOS())
			seq := append(append([]int32(nil), golden.Prompt...), want.Tokens...)
			var worst float64
			i := 0
			err := cpu.Score(context.Background(), seq, func(pos int, l []float32) error {
				if pos < len(golden.Prompt)-1 || i >= len(want.Tokens) {
					return nil
				}
				if got := argmaxExcept(l, eos); got != want.Tokens[i] {
					t.Errorf("token %d: cpu %d, llama.cpp %d", i, got, want.Tokens[i])
				}
				worst = max(worst, math.Abs(logSoftmax(l, want.Tokens[i])-want.Logprobs[i]))
				i++
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d tokens, max |Δ logprob| %.2g", name, i, worst)
			if i != len(want.Tokens) || worst > 2e-3 {
				t.Errorf("%d of %d tokens scored; log-probabilities differ from llama.cpp's by up to %g", i, len(want.Tokens), worst)
			}
			req := runtime.Request{Tokens: golden.Prompt, MaxTokens: len(want.Tokens), IgnoreEOS: true}
			ref := generateIDs(t, cpu, req)
			if got := generateIDs(t, loadModel(t, dst, runtime.Options{Device: "webgpu", Context: want.Context}), req); fmt.Sprint(got) != fmt.Sprint(ref) {
				t.Errorf("webgpu:\n%v\ncpu:\n%v", got, ref)
			}
		})
	}
}

// argmaxExcept is the index of l's largest value but skip's, the lower
// among equals.
func argmaxExcept(l []float32, skip int32) int32 {
	best := int32(-1)
	for i, v := range l {
		if int32(i) != skip && (best < 0 || v > l[best]) {
			best = int32(i)
		}
	}
	return best
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
