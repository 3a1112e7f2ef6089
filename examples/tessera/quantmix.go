package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/gguf"
)

// This file chooses the block type of each matrix of the mixes q4_k_m and
// q5_k_m. llama.cpp's rules (llamaMix) fix the byte budget: the file is
// never larger than llama.cpp's own Q4_K_M (Q5_K_M) of the model. A matrix
// whose rows are whole super-blocks keeps llama.cpp's K type, so a model
// of such rows is llama.cpp's file exactly. The others, where llama.cpp
// falls back by rule (Q4_K→Q5_0, Q6_K→Q8_0, a head of such rows Q8_0:
// stories260K, 64 and 172 wide, and smollm2's 576-wide matrices), share
// the bytes llama.cpp gave them by measured sensitivity (planMix).

// mixCandidates are the block types a mix may give a matrix, each taken
// where the rows are whole blocks of it.
var mixCandidates = []dtype.Type{dtype.Q4_0, dtype.Q4_1, dtype.Q5_0, dtype.Q5_1, dtype.Q8_0, dtype.Q4_K, dtype.Q5_K, dtype.Q6_K}

// bitsPerWeight is t's storage per value.
func bitsPerWeight(t dtype.Type) float64 { return 8 * float64(t.BlockBytes()) / float64(t.BlockSize()) }

// llamaMix returns the type llama.cpp's quantize gives each matrix of f
// for the mix of base type base (Q4_K for LLAMA_FTYPE_MOSTLY_Q4_K_M, Q5_K
// for Q5_K_M), following llama_tensor_get_type in src/llama-quant.cpp:
// the output head (the token table where there is none) Q6_K, or Q8_0 if
// its rows are not whole blocks of base; attn_v and ffn_down Q6_K in the
// layers use_more_bits picks (the first and last eighth and every third
// between); attn_qkv Q5_K (Q6_K for Q5_K_M); the rest base. A K type whose
// rows are not whole super-blocks then falls back (kFallback), and to F16
// where the rows are not whole blocks of that either. The rules for 70B
// models are not modelled (Tessera loads none).
//
// Mixtures of experts follow the same names: ffn_down_exps and the shared
// expert's ffn_down_shexp are ffn_down, of the layer their name gives
// among the block count (llama.cpp counts attn_v and a dense model's
// ffn_down in file order instead); the routers are not quantized
// (matrix). With exactly 8 experts (Mixtral's count) llama.cpp spends more
// on attention: attn_v and attn_k Q8_0, and attn_output Q5_K in Q4_K_M.
func llamaMix(f *gguf.File, base dtype.Type) map[string]dtype.Type {
	_, hasOutput := f.Tensor(models.Output)
	arch, _ := f.String("general.architecture")
	nExpert, _ := f.Uint(arch + ".expert_count")
	nLayer, _ := f.Uint(arch + ".block_count")
	count := func(part string) int {
		n := 0
		for i := range f.Tensors {
			if strings.Contains(f.Tensors[i].Name, part) && matrix(&f.Tensors[i]) {
				n++
			}
		}
		return n
	}
	nV, nDown := count("attn_v.weight"), count("ffn_down")
	moreBits := func(i, n int) bool { return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2 }
	var iV, iDown int
	types := map[string]dtype.Type{}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if !matrix(ti) {
			continue
		}
		name, cols := ti.Name, int(ti.Dims[0])
		t := base
		switch {
		case name == models.Output || !hasOutput && name == models.TokenEmbedding:
			if cols%base.BlockSize() != 0 {
				t = dtype.Q8_0
			} else {
				t = dtype.Q6_K
			}
		case name == models.TokenEmbedding:
		case strings.Contains(name, "attn_v.weight"):
			if moreBits(iV, nV) {
				t = dtype.Q6_K
			}
			if nExpert == 8 {
				t = dtype.Q8_0
			}
			iV++
		case strings.Contains(name, "attn_k.weight"):
			if nExpert == 8 {
				t = dtype.Q8_0
			}
		case strings.Contains(name, "ffn_down"):
			layer, n := iDown, nDown
			if nExpert > 1 {
				if _, err := fmt.Sscanf(name, "blk.%d.", &layer); err != nil {
					layer = iDown
				}
				n = int(nLayer)
			}
			if moreBits(layer, n) {
				t = dtype.Q6_K
			}
			iDown++
		case strings.Contains(name, "attn_output.weight"):
			if nExpert == 8 && base == dtype.Q4_K {
				t = dtype.Q5_K
			}
		case strings.Contains(name, "attn_qkv.weight"):
			t = dtype.Q5_K
			if base == dtype.Q5_K {
				t = dtype.Q6_K
			}
		}
		if fb, k := kFallback[t]; k && cols%t.BlockSize() != 0 {
			t = fb
		}
		if cols%t.BlockSize() != 0 {
			t = dtype.F16
		}
		types[name] = t
	}
	return types
}

// mixPlan is planMix's choice: a type for each matrix, with the bytes of
// the matrices it writes and of llama.cpp's own choice (the budget).
type mixPlan struct {
	types         map[string]dtype.Type
	bytes, budget int64
}

// option is one type a matrix may take, its bytes and its measured error.
type option struct {
	t     dtype.Type
	bytes int64
	err   float64
}

// sampleRows is how many rows of a matrix planMix measures: evenly spaced,
// enough to rank the types of a matrix, few enough that a large model's
// plan costs a fraction of its quantization.
const sampleRows = 256

// planMix chooses the type of every matrix of f for the mix of base type
// base within llama.cpp's bytes for the model (llamaMix). A matrix that
// llama.cpp gives a K type keeps it. Any other may take a type of
// mixCandidates its rows are whole blocks of, of at least base's bits
// (the output head, or the token table standing for it, of at least
// llama.cpp's bytes for it: it turns every hidden state into the logits,
// the one error no later layer dilutes); a float matrix fitting none is
// written F16, as llama.cpp does, and any other stays as it is. Each
// option's error is n·Σ(w−q)²/Σw² for a matrix of n weights, of sampled
// rows quantized to it and back: the relative error of each weight, every
// weight counting alike. Every matrix starts at its cheapest option (of
// the lowest error among equal bytes), and the step of largest error drop
// per added byte, to any wider option, is taken while it fits the budget:
// the greedy answer to minimising the summed error. (Counting each
// matrix's relative error alike instead, which favours small matrices,
// measured worse on stories260K: +1.8% against +1.2% over f32.)
func planMix(ctx context.Context, f *gguf.File, base dtype.Type) (mixPlan, error) {
	llama := llamaMix(f, base)
	_, hasOutput := f.Tensor(models.Output)
	plan := mixPlan{types: map[string]dtype.Type{}}
	var names []string
	options := map[string][]option{}
	chosen := map[string]int{}
	for i := range f.Tensors {
		if err := ctx.Err(); err != nil {
			return plan, err
		}
		ti := &f.Tensors[i]
		lt, ok := llama[ti.Name]
		if !ok {
			continue
		}
		rows, cols := int64(rowsOf(ti)), int(ti.Dims[0])
		b, err := dtype.Bytes(lt, rows*int64(cols))
		if err != nil {
			return plan, fmt.Errorf("%s: %w", ti.Name, err)
		}
		plan.budget += b
		head := ti.Name == models.Output || ti.Name == models.TokenEmbedding && !hasOutput
		opts := []option{{t: lt, bytes: b}}
		if _, k := kFallback[lt]; !k {
			opts, err = measure(f, ti, base, head, b)
		}
		if err != nil {
			return plan, fmt.Errorf("%s: %w", ti.Name, err)
		}
		if len(opts) == 0 {
			plan.types[ti.Name] = lt
			plan.bytes += b
			continue
		}
		names = append(names, ti.Name)
		options[ti.Name] = opts
		cheapest := 0
		for j, o := range opts {
			if o.bytes < opts[cheapest].bytes || o.bytes == opts[cheapest].bytes && o.err < opts[cheapest].err {
				cheapest = j
			}
		}
		chosen[ti.Name] = cheapest
		plan.bytes += opts[cheapest].bytes
	}
	if plan.bytes > plan.budget { // cannot happen with llama.cpp's own types among the options; keep its choice
		plan.types, plan.bytes = llama, plan.budget
		return plan, nil
	}
	for {
		best, bestTo, bestGain := "", 0, 0.0
		for _, name := range names {
			opts, cur := options[name], options[name][chosen[name]]
			for j, o := range opts {
				add := o.bytes - cur.bytes
				if add <= 0 || o.err >= cur.err || plan.bytes+add > plan.budget {
					continue
				}
				if g := (cur.err - o.err) / float64(add); g > bestGain {
					best, bestTo, bestGain = name, j, g
				}
			}
		}
		if best == "" {
			break
		}
		plan.bytes += options[best][bestTo].bytes - options[best][chosen[best]].bytes
		chosen[best] = bestTo
	}
	for _, name := range names {
		plan.types[name] = options[name][chosen[name]].t
	}
	return plan, nil
}

// measure returns the options of matrix ti that llama.cpp does not give
// a K type (see planMix): the candidates
// its rows are whole blocks of, of at least base's bits (and, for the
// head, at least minBytes), each with the relative error of sampled rows;
// F16 alone (error 0: the plan has nothing to choose) for a float matrix
// fitting none, and nothing for any other.
func measure(f *gguf.File, ti *gguf.TensorInfo, base dtype.Type, head bool, minBytes int64) ([]option, error) {
	rows, cols := rowsOf(ti), int(ti.Dims[0])
	var types []dtype.Type
	for _, t := range mixCandidates {
		if cols%t.BlockSize() != 0 || bitsPerWeight(t) < bitsPerWeight(base) {
			continue
		}
		if b, _ := dtype.Bytes(t, int64(rows)*int64(cols)); head && b < minBytes {
			continue
		}
		types = append(types, t)
	}
	if len(types) == 0 {
		if floatType(ti.Type) {
			b, err := dtype.Bytes(dtype.F16, int64(rows)*int64(cols))
			return []option{{t: dtype.F16, bytes: b}}, err
		}
		return nil, nil
	}
	sample, err := sampled(f, ti)
	if err != nil {
		return nil, err
	}
	var energy float64
	for _, v := range sample {
		energy += float64(v) * float64(v)
	}
	back := make([]float32, len(sample))
	opts := make([]option, 0, len(types))
	for _, t := range types {
		q, err := dtype.Quantize(t, sample)
		if err != nil {
			return nil, err
		}
		if err := dtype.Dequantize(t, q, back); err != nil {
			return nil, err
		}
		var e float64
		for i, v := range sample {
			d := float64(v) - float64(back[i])
			e += d * d
		}
		if energy > 0 {
			e *= float64(rows) * float64(cols) / energy
		}
		b, err := dtype.Bytes(t, int64(rows)*int64(cols))
		if err != nil {
			return nil, err
		}
		opts = append(opts, option{t: t, bytes: b, err: e})
	}
	return opts, nil
}

// floatType reports whether t stores plain floats.
func floatType(t dtype.Type) bool {
	return t == dtype.F32 || t == dtype.F16 || t == dtype.BF16 || t == dtype.F64
}

// sampled returns about sampleRows evenly spaced rows of matrix ti (over
// all its experts) in f32, read row by row: a stack of experts need not be
// in memory whole to be measured.
func sampled(f *gguf.File, ti *gguf.TensorInfo) ([]float32, error) {
	rows, cols := rowsOf(ti), int(ti.Dims[0])
	size, err := dtype.Bytes(ti.Type, int64(cols))
	if err != nil {
		return nil, err
	}
	if size*int64(rows) != ti.Size {
		return nil, fmt.Errorf("%d bytes, want %d rows of %d", ti.Size, rows, size)
	}
	step := max(1, rows/sampleRows)
	sample := make([]float32, (rows+step-1)/step*cols)
	raw := make([]byte, size)
	r := f.TensorReader(ti)
	for i, at := 0, 0; i < rows; i, at = i+step, at+cols {
		if _, err := r.ReadAt(raw, int64(i)*size); err != nil {
			return nil, fmt.Errorf("row %d: %w", i, err)
		}
		if err := dtype.Dequantize(ti.Type, raw, sample[at:at+cols]); err != nil {
			return nil, err
		}
	}
	return sample, nil
}
