package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/gguf"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/runtime"
)

// writeShape writes the synthetic model s in f32 to a file in dir.
func writeShape(t *testing.T, dir string, s synth.Shape) string {
	t.Helper()
	path := filepath.Join(dir, s.Name+".gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := synth.Write(f, s, dtype.F32, 1); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// moeShape is the synthetic MoE shape name with experts (and shared
// expert) ffn wide, so that ffn_down_exps has rows of whole blocks too.
func moeShape(t *testing.T, name string, ffn int) synth.Shape {
	t.Helper()
	s, err := synth.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	s.Name = fmt.Sprintf("%s-%d", name, ffn)
	s.Config.MoE.FFN = ffn
	if s.Config.MoE.SharedFFN > 0 {
		s.Config.MoE.SharedFFN = ffn
	}
	return s
}

// TestQuantizeExperts: a synthetic model of each MoE family, its experts
// 64 wide, quantized to q4_0 and q8_0: every expert stack (gate, up and
// down) and shared expert takes the type, encoded as the whole stack
// would be (checkQuantized), the routers stay F32 as llama.cpp keeps
// them, and the file loads with its experts in int4 (int8) on both
// backends, which give the same greedy tokens. The shapes' own 36-wide
// ffn_down_exps stay F32 with a note.
func TestQuantizeExperts(t *testing.T) {
	for _, family := range []string{"tiny-mixtral", "tiny-qwen2moe", "tiny-qwen3moe", "tiny-olmoe", "tiny-granitemoe"} {
		t.Run(family, func(t *testing.T) {
			dir := t.TempDir()
			s := moeShape(t, family, 64)
			src := writeShape(t, dir, s)
			for _, tc := range []struct {
				typ     dtype.Type
				storage string
			}{{dtype.Q4_0, "blocks"}, {dtype.Q8_0, "blocks"}} {
				dst := filepath.Join(dir, tc.typ.String()+".gguf")
				if code, _, errOut := runCLI("quantize", "--model", src, "--out", dst, "--type", strings.ToLower(tc.typ.String())); code != 0 {
					t.Fatalf("quantize: exit %d: %s", code, errOut)
				}
				q := map[string]bool{}
				for _, name := range checkQuantized(t, src, dst, tc.typ) {
					q[name] = true
				}
				for l := range s.Config.Layers {
					kinds := []string{models.FFNGateExps, models.FFNUpExps, models.FFNDownExps}
					if s.Config.MoE.SharedFFN > 0 {
						kinds = append(kinds, models.FFNGateShexp, models.FFNUpShexp, models.FFNDownShexp)
					}
					for _, k := range kinds {
						if name := models.LayerTensor(l, k); !q[name] {
							t.Errorf("%v: %s not quantized", tc.typ, name)
						}
					}
					if name := models.LayerTensor(l, models.FFNRouter); q[name] {
						t.Errorf("%v: router %s quantized", tc.typ, name)
					}
				}
				req := runtime.Request{Prompt: moePrompt, MaxTokens: 32, IgnoreEOS: true}
				var runs [2][]int32
				for i, dev := range []string{"cpu", "webgpu"} {
					eng := loadModel(t, dst, runtime.Options{Device: dev})
					mix := map[string]bool{}
					for _, u := range eng.WeightMix() {
						mix[u.Storage.String()] = true
					}
					if !mix[tc.storage] {
						t.Errorf("%v on %s: weights %v, no %s", tc.typ, dev, eng.WeightMix(), tc.storage)
					}
					runs[i] = generateIDs(t, eng, req)
				}
				if fmt.Sprint(runs[1]) != fmt.Sprint(runs[0]) {
					t.Errorf("%v: webgpu %v\n   cpu %v", tc.typ, runs[1], runs[0])
				}
			}
			// The family's own shape: ffn_down_exps of 36-value rows stays.
			own, err := synth.Lookup(family)
			if err != nil {
				t.Fatal(err)
			}
			src = writeShape(t, dir, own)
			code, _, errOut := runCLI("quantize", "--model", src, "--out", filepath.Join(dir, "own.gguf"), "--type", "q4_0")
			if code != 0 || !strings.Contains(errOut, "kept blk.0.ffn_down_exps.weight as F32: its rows of 36 values") {
				t.Errorf("quantize %s: exit %d: %s", family, code, errOut)
			}
		})
	}
}

// moePrompt is long enough that a prompt step puts several rows on an
// expert (as runtime's MoE tests).
const moePrompt = "abc def ghi jkl mno pqr stu vwx yz ab cd ef gh"

func generateIDs(t *testing.T, eng *runtime.Engine, req runtime.Request) []int32 {
	t.Helper()
	var out []int32
	if _, err := eng.Generate(context.Background(), req, func(tok runtime.Token) error {
		out = append(out, tok.ID)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// k256MoE is a model of rows of whole super-blocks with experts: Mixtral's
// 8 experts, or Qwen2-MoE's 4 and shared expert.
func k256MoE(arch string) synth.Shape {
	c := models.Config{Arch: arch, Dim: 256, FFN: 256, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 64,
		Vocab: 300, Context: 128, NormEps: 1e-5, RopeTheta: 10000, RopeDim: 64,
		MoE: models.MoEConfig{Experts: 8, Used: 2, FFN: 256, NormTopK: true}}
	if arch == "qwen2moe" {
		c.Rope, c.QKVBias = models.RopeHalves, true
		c.MoE = models.MoEConfig{Experts: 4, Used: 2, FFN: 256, SharedFFN: 256}
	}
	return synth.Shape{Name: "k256-" + arch, Config: c}
}

// TestLlamaMixExperts: llamaMix gives experts llama.cpp's types, worked
// out by hand from llama_tensor_get_type for 2 layers: ffn_down_exps and
// ffn_down_shexp are ffn_down, Q6_K in layer 1 (use_more_bits(1, 2)), the
// other experts the base type, the routers nothing (not quantized); with
// 8 experts attn_v and attn_k are Q8_0 and Q4_K_M's attn_output Q5_K.
// The q4_k_m file of the Mixtral shape is those types, loads with Q4_K
// experts as int4 and Q6_K ones as int8, and gives the same greedy tokens
// on both backends.
func TestLlamaMixExperts(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		arch string
		base dtype.Type
		want map[string]dtype.Type // by name, in both layers but where blk. says
	}{
		{"llama", dtype.Q4_K, map[string]dtype.Type{"attn_q": dtype.Q4_K, "attn_k": dtype.Q8_0, "attn_v": dtype.Q8_0, "attn_output": dtype.Q5_K,
			"ffn_gate_exps": dtype.Q4_K, "ffn_up_exps": dtype.Q4_K, "blk.0.ffn_down_exps": dtype.Q4_K, "blk.1.ffn_down_exps": dtype.Q6_K}},
		{"llama", dtype.Q5_K, map[string]dtype.Type{"attn_q": dtype.Q5_K, "attn_k": dtype.Q8_0, "attn_v": dtype.Q8_0, "attn_output": dtype.Q5_K,
			"ffn_gate_exps": dtype.Q5_K, "ffn_up_exps": dtype.Q5_K, "blk.0.ffn_down_exps": dtype.Q5_K, "blk.1.ffn_down_exps": dtype.Q6_K}},
		{"qwen2moe", dtype.Q4_K, map[string]dtype.Type{"attn_q": dtype.Q4_K, "attn_k": dtype.Q4_K, "blk.0.attn_v": dtype.Q4_K, "blk.1.attn_v": dtype.Q6_K,
			"attn_output": dtype.Q4_K, "ffn_gate_exps": dtype.Q4_K, "ffn_up_exps": dtype.Q4_K, "ffn_gate_shexp": dtype.Q4_K, "ffn_up_shexp": dtype.Q4_K,
			"blk.0.ffn_down_exps": dtype.Q4_K, "blk.1.ffn_down_exps": dtype.Q6_K, "blk.0.ffn_down_shexp": dtype.Q4_K, "blk.1.ffn_down_shexp": dtype.Q6_K}},
	} {
		s := k256MoE(tc.arch)
		path := filepath.Join(dir, s.Name+".gguf")
		if _, err := os.Stat(path); err != nil {
			path = writeShape(t, dir, s)
		}
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		got := llamaMix(f, tc.base)
		f.Close()
		want := map[string]dtype.Type{models.Output: dtype.Q6_K, models.TokenEmbedding: tc.base}
		for l := range s.Config.Layers {
			for kind, typ := range tc.want {
				name, ok := strings.CutPrefix(kind, fmt.Sprintf("blk.%d.", l))
				if !ok && strings.HasPrefix(kind, "blk.") {
					continue
				}
				want[models.LayerTensor(l, name)] = typ
			}
		}
		for name, typ := range want {
			if got[name] != typ {
				t.Errorf("%s %v: %s is %v, want %v", tc.arch, tc.base, name, got[name], typ)
			}
		}
		for name := range got {
			if _, ok := want[name]; !ok {
				t.Errorf("%s %v: %s (%v) is no matrix llama.cpp quantizes", tc.arch, tc.base, name, got[name])
			}
		}
		if tc.arch != "llama" || tc.base != dtype.Q4_K {
			continue
		}
		dst := filepath.Join(dir, "q4_k_m.gguf")
		if code, _, errOut := runCLI("quantize", "--model", path, "--out", dst, "--type", "q4_k_m"); code != 0 {
			t.Fatalf("quantize: exit %d: %s", code, errOut)
		}
		out, err := gguf.Open(dst)
		if err != nil {
			t.Fatal(err)
		}
		for _, ti := range out.Tensors {
			if w, ok := want[ti.Name]; ok && ti.Type != w || !ok && ti.Type != dtype.F32 {
				t.Errorf("q4_k_m file: %s is %v, want %v", ti.Name, ti.Type, w)
			}
		}
		out.Close()
		req := runtime.Request{Prompt: moePrompt, MaxTokens: 24, IgnoreEOS: true}
		var runs [2][]int32
		for i, dev := range []string{"cpu", "webgpu"} {
			eng := loadModel(t, dst, runtime.Options{Device: dev})
			mix := map[string]int{}
			for _, u := range eng.WeightMix() {
				mix[u.Storage.String()] = u.Tensors
			}
			if mix["blocks"] == 0 || mix["int4"]+mix["int8"] != 0 {
				t.Errorf("%s loads as %v: the file's types, at their bits", dev, mix)
			}
			runs[i] = generateIDs(t, eng, req)
		}
		if fmt.Sprint(runs[1]) != fmt.Sprint(runs[0]) {
			t.Errorf("q4_k_m: webgpu %v\n   cpu %v", runs[1], runs[0])
		}
	}
}
