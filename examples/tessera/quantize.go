package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/gguf"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/runtime"
)

func setupQuantize(fs *flag.FlagSet) func(context.Context, *env) error {
	in := fs.String("model", "", "input GGUF model, or a reference to pull (hf.co/OWNER/REPO:QUANT) (required)")
	out := fs.String("out", "", "output GGUF file (required)")
	typ := fs.String("type", "q4_0", "block type of the weight matrices: q4_0, q4_k, q5_0, q5_1, q5_k, q6_k, q8_0, q2_k, q3_k, iq4_nl, iq4_xs, mxfp4, q4_1 calibrated by GPTQ, "+
		"or the mixes q4_k_m and q5_k_m (llama.cpp's, in no more bytes than its file: K types where rows are whole super-blocks, elsewhere the types its fallbacks pay for, spent by measured error)")
	tokens := fs.Int("calib-tokens", runtime.DefaultCalibrationTokens, "q4_1: tokens of text the model samples to calibrate on")
	seed := fs.Uint64("calib-seed", 0, "q4_1: seed of the calibration text")
	threads := fs.Int("threads", 0, "q4_1: goroutines of the calibration (0: one per core)")
	var offline bool
	offlineFlag(fs, &offline)
	return func(ctx context.Context, e *env) error {
		if *in == "" || *out == "" {
			return usagef("--model and --out are required")
		}
		q, ok := quantTypes[strings.ToLower(*typ)]
		if !ok {
			return usagef("--type %q (want q4_0, q4_1, q4_k, q5_0, q5_1, q5_k, q6_k, q8_0, q2_k, q3_k, iq4_nl, iq4_xs, mxfp4, q4_k_m or q5_k_m)", *typ)
		}
		t := q.base
		var err error
		if *in, err = modelPath(ctx, e, *in, offline); err != nil {
			return err
		}
		if q.mixed {
			if q.plan, err = mixFor(ctx, *in, t); err != nil {
				return err
			}
			fmt.Fprintf(e.stderr, "%s: %d bytes of matrices, llama.cpp's rules for it %d\n", strings.ToLower(*typ), q.plan.bytes, q.plan.budget)
		}
		var calibrated map[string]*dtype.Int4
		if t == dtype.Q4_1 {
			c := runtime.Calibration{Tokens: *tokens, Seed: *seed, Threads: *threads,
				Only: func(t *models.Tensor) bool { return t.Shape[1]%dtype.Q4_1.BlockSize() == 0 }}
			calibrated, err = calibrate(ctx, *in, c, e.stderr)
			if err != nil {
				return err
			}
		}
		st, err := quantizeGGUF(ctx, *in, *out, q, calibrated, e.stderr)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stderr, "wrote %s: %d of %d tensors quantized (%s), %s → %s\n", *out, st.quantized, st.tensors, st.mix(),
			formatMiB(st.inBytes), formatMiB(st.outBytes))
		return nil
	}
}

// calibrate quantizes the model at path to int4 by GPTQ over text it
// samples itself (runtime.CalibrateInt4): the q4_1 type pays here, once,
// what a load could not afford for a large model.
func calibrate(ctx context.Context, path string, c runtime.Calibration, notes io.Writer) (map[string]*dtype.Int4, error) {
	m, err := models.Open(path, models.Options{})
	if err != nil {
		return nil, err
	}
	defer m.Close()
	q, rep, err := runtime.CalibrateInt4(ctx, m, c)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	fmt.Fprintf(notes, "calibrated %d matrices on %d sampled tokens (%d sequences, %d passes) in %v\n",
		rep.Matrices, rep.Tokens, rep.Sequences, rep.Passes, rep.Total.Round(time.Millisecond))
	return q, nil
}

func formatMiB(n int64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }

// quantizeStats count what quantizeGGUF did.
type quantizeStats struct {
	tensors, quantized int
	inBytes, outBytes  int64 // tensor data
	types              map[dtype.Type]int
}

// mix lists the tensors written of each type: "Q4_K 30, Q6_K 6, F32 11".
func (st quantizeStats) mix() string {
	var parts []string
	for _, t := range []dtype.Type{dtype.Q2_K, dtype.Q3_K, dtype.Q4_0, dtype.Q4_1, dtype.Q4_K, dtype.IQ4_NL, dtype.IQ4_XS, dtype.MXFP4,
		dtype.Q5_0, dtype.Q5_1, dtype.Q5_K, dtype.Q6_K, dtype.Q8_0, dtype.F16, dtype.F32} {
		if n := st.types[t]; n > 0 {
			parts = append(parts, fmt.Sprintf("%v %d", t, n))
		}
	}
	return strings.Join(parts, ", ")
}

// quantType is a --type: the block type of the matrices and, for the
// mixes, the plan of each matrix's type (planMix).
type quantType struct {
	base     dtype.Type
	mixed    bool
	plan     mixPlan // the mixes' types
	fileType uint32  // llama.cpp's general.file_type (LLAMA_FTYPE_MOSTLY_*)
}

var quantTypes = map[string]quantType{
	"q4_0": {base: dtype.Q4_0, fileType: 2}, "q4_1": {base: dtype.Q4_1, fileType: 3},
	"q8_0": {base: dtype.Q8_0, fileType: 7}, "q5_0": {base: dtype.Q5_0, fileType: 8}, "q5_1": {base: dtype.Q5_1, fileType: 9},
	"q4_k": {base: dtype.Q4_K, fileType: 14}, "q5_k": {base: dtype.Q5_K, fileType: 16}, "q6_k": {base: dtype.Q6_K, fileType: 18},
	"q4_k_m": {base: dtype.Q4_K, mixed: true, fileType: 15}, "q5_k_m": {base: dtype.Q5_K, mixed: true, fileType: 17},
	"q2_k": {base: dtype.Q2_K, fileType: 10}, "q3_k": {base: dtype.Q3_K, fileType: 12},
	"iq4_nl": {base: dtype.IQ4_NL, fileType: 25}, "iq4_xs": {base: dtype.IQ4_XS, fileType: 30}, "mxfp4": {base: dtype.MXFP4, fileType: 38},
}

// kFallback is the type llama.cpp writes for a type of 256-value
// super-blocks whose rows are not whole ones: the legacy type of at least
// its bits (IQ4_NL, the 32-value IQ4_XS, for IQ4_XS and the 2- and 3-bit
// types).
var kFallback = map[dtype.Type]dtype.Type{dtype.Q4_K: dtype.Q5_0, dtype.Q5_K: dtype.Q5_1, dtype.Q6_K: dtype.Q8_0,
	dtype.Q2_K: dtype.IQ4_NL, dtype.Q3_K: dtype.IQ4_NL, dtype.IQ4_XS: dtype.IQ4_NL}

// typeFor is the type of matrix ti: q's (Q6_K for the mixes' hi), a K
// type falling back (kFallback) for rows that are not whole super-blocks,
// and then F16 for float rows that are not whole blocks of 32 either, as
// llama.cpp does. Other matrices whose rows are not whole blocks stay as
// they are (ok false).
func (q quantType) typeFor(ti *gguf.TensorInfo) (t dtype.Type, ok bool) {
	return q.typeOf(ti.Name, int(ti.Dims[0]), ti.Type)
}

// typeOf is typeFor of a matrix named name, rows cols wide, of type src;
// a mix's matrix takes its plan's type.
func (q quantType) typeOf(name string, cols int, src dtype.Type) (t dtype.Type, ok bool) {
	if t, ok = q.plan.types[name]; q.mixed && ok {
		return t, true
	}
	t = q.base
	fb, k := kFallback[t]
	if k && cols%t.BlockSize() != 0 {
		t = fb
	}
	if cols%t.BlockSize() == 0 {
		return t, true
	}
	if k && (src == dtype.F32 || src == dtype.F64 || src == dtype.BF16) {
		return dtype.F16, true
	}
	return src, false
}

// mixFor opens the GGUF at path and plans its mix of base type base
// (planMix).
func mixFor(ctx context.Context, path string, base dtype.Type) (mixPlan, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return mixPlan{}, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	p, err := planMix(ctx, f, base)
	if err != nil {
		return p, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// quantizeGGUF writes a copy of the GGUF at in to out with every weight
// matrix (matrix: 2-D tensors and stacks of experts) encoded as q says
// (quantType.typeFor) in ggml's exact block layout, the way llama.cpp's
// quantize does: metadata is copied key for key in order
// (general.file_type is set, and general.quantization_version and
// attention.value_length added where missing, as llama.cpp writes them),
// and tensors keep their order and names. Vectors (norm weights) and routers stay as they are, and so does
// a matrix whose rows are not a whole number of blocks, with a note on
// notes. A matrix already of its type is copied unchanged; others are
// encoded expert by expert (encode), a Q4_1 matrix from its calibrated
// form in int4 where there.
//
// out is written next to its final name and renamed at the end, so a
// failure never leaves half a model behind.
func quantizeGGUF(ctx context.Context, in, out string, q quantType, int4 map[string]*dtype.Int4, notes io.Writer) (quantizeStats, error) {
	st := quantizeStats{types: map[dtype.Type]int{}}
	f, err := gguf.Open(in)
	if err != nil {
		return st, fmt.Errorf("open %s: %w", in, err)
	}
	defer f.Close()
	if arch, _ := f.String("general.architecture"); arch == "" {
		return st, fmt.Errorf("%s: not a model (no general.architecture)", in)
	}
	arch, _ := f.String("general.architecture")
	keyLen, valueLen := arch+".attention.key_length", arch+".attention.value_length"
	_, hasValueLen := f.Lookup(valueLen)
	kv := make([]gguf.KV, 0, len(f.KV)+3)
	var hasFileType, hasQuantVersion bool
	for _, e := range f.KV {
		switch e.Key {
		case "general.file_type":
			e.Value, hasFileType = gguf.Uint32Value(q.fileType), true
		case "general.quantization_version":
			hasQuantVersion = true
		}
		kv = append(kv, e)
		if e.Key == keyLen && !hasValueLen { // llama.cpp reads both; without it, value heads take Dim/Heads
			kv = append(kv, gguf.KV{Key: valueLen, Value: e.Value})
		}
	}
	if !hasFileType {
		kv = append(kv, gguf.KV{Key: "general.file_type", Value: gguf.Uint32Value(q.fileType)})
	}
	if !hasQuantVersion {
		kv = append(kv, gguf.KV{Key: "general.quantization_version", Value: gguf.Uint32Value(2)})
	}
	tensors := make([]gguf.WriteTensor, 0, len(f.Tensors))
	for i := range f.Tensors {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		ti := &f.Tensors[i]
		wt := gguf.WriteTensor{Name: ti.Name, Dims: ti.Dims, Type: ti.Type}
		st.tensors++
		st.inBytes += ti.Size
		var t dtype.Type
		var ok bool
		if matrix(ti) {
			t, ok = q.typeFor(ti)
		}
		switch {
		case !matrix(ti):
			wt.Data, err = f.ReadTensor(ti)
		case !ok:
			fmt.Fprintf(notes, "kept %s as %v: its rows of %d values are not whole %v blocks of %d\n",
				ti.Name, ti.Type, ti.Dims[0], q.base, q.base.BlockSize())
			wt.Data, err = f.ReadTensor(ti)
		case ti.Type == t:
			st.quantized++
			wt.Data, err = f.ReadTensor(ti)
		default:
			st.quantized++
			wt.Type = t
			wt.Data, err = encode(ctx, f, ti, t, int4[ti.Name])
		}
		if err != nil {
			return st, fmt.Errorf("%s: %w", ti.Name, err)
		}
		st.types[wt.Type]++
		st.outBytes += int64(len(wt.Data))
		tensors = append(tensors, wt)
	}
	tmp, err := os.CreateTemp(filepath.Dir(out), filepath.Base(out)+".*.tmp")
	if err != nil {
		return st, err
	}
	defer os.Remove(tmp.Name())
	err = gguf.Write(tmp, kv, tensors)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), out)
	}
	if err != nil {
		return st, fmt.Errorf("write %s: %w", out, err)
	}
	return st, nil
}

// matrix reports whether quantize encodes tensor ti (synth.QuantizedMatrix,
// the rule synth's quantized files follow too): a matrix (2-D), or a stack
// of experts (3-D, ggml dims [in, out, experts]: each expert's [out, in]
// slice a matrix of rows of in values, blocks along in), but not a router.
func matrix(ti *gguf.TensorInfo) bool {
	return synth.QuantizedMatrix(ti.Name, len(ti.Dims))
}

// rowsOf is the number of rows of matrix ti, over all its experts.
func rowsOf(ti *gguf.TensorInfo) int {
	n := 1
	for _, d := range ti.Dims[1:] {
		n *= int(d)
	}
	return n
}

// encode returns the matrix ti in type t, expert by expert, so that one
// expert's values are in memory at a time (a stack of 128 experts is most
// of a large MoE model's bytes). Blocks run along rows, so the bytes are
// those of the whole stack encoded at once; an expert is Dims[1] rows. Q4_1
// is Tessera's int4 format: from calibrated, the matrix's GPTQ codes,
// where there (2-D matrices), else from its conversion by dtype.ToInt4
// (the codes of Q4_0 and Q4_K kept, other types quantized by the per-group
// search); other types are dequantized to f32 and quantized
// (dtype.Quantize).
func encode(ctx context.Context, f *gguf.File, ti *gguf.TensorInfo, t dtype.Type, calibrated *dtype.Int4) ([]byte, error) {
	if t == dtype.Q4_1 && calibrated != nil {
		return calibrated.Q4_1()
	}
	cols, rows := int(ti.Dims[0]), int(ti.Dims[1])
	experts := rowsOf(ti) / rows
	size, err := dtype.Bytes(ti.Type, int64(rows)*int64(cols))
	if err != nil {
		return nil, err
	}
	if size*int64(experts) != ti.Size {
		return nil, fmt.Errorf("%d bytes, want %d experts of %d", ti.Size, experts, size)
	}
	want, err := dtype.Bytes(t, int64(rows)*int64(cols))
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, want*int64(experts))
	r := f.TensorReader(ti)
	raw := make([]byte, size)
	vals := make([]float32, rows*cols)
	for e := range experts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if _, err := r.ReadAt(raw, int64(e)*size); err != nil {
			return nil, fmt.Errorf("expert %d: %w", e, err)
		}
		var q []byte
		if t == dtype.Q4_1 {
			var i4 *dtype.Int4
			if i4, err = dtype.ToInt4(ti.Type, raw, rows, cols); err == nil {
				q, err = i4.Q4_1()
			}
		} else if err = dtype.Dequantize(ti.Type, raw, vals); err == nil {
			q, err = dtype.QuantizeRows(ctx, t, vals, cols) // on every core; Ctrl-C stops it
		}
		if err != nil {
			return nil, fmt.Errorf("expert %d: %w", e, err)
		}
		out = append(out, q...)
	}
	return out, nil
}
