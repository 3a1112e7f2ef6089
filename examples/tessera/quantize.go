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
	"github.com/tessera-llm/tessera/runtime"
)

func setupQuantize(fs *flag.FlagSet) func(context.Context, *env) error {
	in := fs.String("model", "", "input GGUF model, or a reference to pull (hf.co/OWNER/REPO:QUANT) (required)")
	out := fs.String("out", "", "output GGUF file (required)")
	typ := fs.String("type", "q4_0", "block type of the weight matrices: q4_0, q4_k, or q4_1 calibrated by GPTQ")
	tokens := fs.Int("calib-tokens", runtime.DefaultCalibrationTokens, "q4_1: tokens of text the model samples to calibrate on")
	seed := fs.Uint64("calib-seed", 0, "q4_1: seed of the calibration text")
	threads := fs.Int("threads", 0, "q4_1: goroutines of the calibration (0: one per core)")
	var offline bool
	offlineFlag(fs, &offline)
	return func(ctx context.Context, e *env) error {
		if *in == "" || *out == "" {
			return usagef("--model and --out are required")
		}
		t, ok := map[string]dtype.Type{"q4_0": dtype.Q4_0, "q4_1": dtype.Q4_1, "q4_k": dtype.Q4_K}[strings.ToLower(*typ)]
		if !ok {
			return usagef("--type %q (want q4_0, q4_1 or q4_k)", *typ)
		}
		var err error
		if *in, err = modelPath(ctx, e, *in, offline); err != nil {
			return err
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
		st, err := quantizeGGUF(ctx, *in, *out, t, calibrated, e.stderr)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stderr, "wrote %s: %d of %d tensors as %v, %s → %s\n", *out, st.quantized, st.tensors, t,
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
}

// ggufFileType is llama.cpp's general.file_type for a model whose matrices
// are all of one type (LLAMA_FTYPE_MOSTLY_Q4_0, _Q4_K_S).
var ggufFileType = map[dtype.Type]uint32{dtype.Q4_0: 2, dtype.Q4_1: 3, dtype.Q4_K: 14}

// quantizeGGUF writes a copy of the GGUF at in to out with every weight
// matrix (2-D tensor) encoded as t in ggml's exact block layout, the way
// llama.cpp's quantize does: metadata is copied key for key in order
// (general.file_type is set, and general.quantization_version added, as
// llama.cpp does), and tensors keep their order and names. Vectors (norm
// weights) stay as they are (f32), and so does a matrix whose rows are
// not a whole number of t's blocks, with a note on notes: ggml cannot
// store such rows in t. A matrix already of type t is copied unchanged;
// others are dequantized to f32 and quantized (dtype.Quantize), except for
// Q4_1, which is Tessera's int4 format: a matrix takes its calibrated form
// from int4 if there, else its conversion by dtype.ToInt4 (the codes of
// Q4_0 and Q4_K kept, other types quantized by the per-group search).
//
// out is written next to its final name and renamed at the end, so a
// failure never leaves half a model behind.
func quantizeGGUF(ctx context.Context, in, out string, t dtype.Type, int4 map[string]*dtype.Int4, notes io.Writer) (quantizeStats, error) {
	var st quantizeStats
	f, err := gguf.Open(in)
	if err != nil {
		return st, fmt.Errorf("open %s: %w", in, err)
	}
	defer f.Close()
	if arch, _ := f.String("general.architecture"); arch == "" {
		return st, fmt.Errorf("%s: not a model (no general.architecture)", in)
	}
	kv := make([]gguf.KV, 0, len(f.KV)+1)
	var hasFileType, hasQuantVersion bool
	for _, e := range f.KV {
		switch e.Key {
		case "general.file_type":
			e.Value, hasFileType = gguf.Uint32Value(ggufFileType[t]), true
		case "general.quantization_version":
			hasQuantVersion = true
		}
		kv = append(kv, e)
	}
	if !hasFileType {
		kv = append(kv, gguf.KV{Key: "general.file_type", Value: gguf.Uint32Value(ggufFileType[t])})
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
		switch {
		case len(ti.Dims) != 2:
			wt.Data, err = f.ReadTensor(ti)
		case ti.Dims[0]%uint64(t.BlockSize()) != 0:
			fmt.Fprintf(notes, "kept %s as %v: its rows of %d values are not whole %v blocks of %d\n",
				ti.Name, ti.Type, ti.Dims[0], t, t.BlockSize())
			wt.Data, err = f.ReadTensor(ti)
		case ti.Type == t:
			st.quantized++
			wt.Data, err = f.ReadTensor(ti)
		case t == dtype.Q4_1:
			st.quantized++
			wt.Type = t
			wt.Data, err = q4_1(f, ti, int4[ti.Name])
		default:
			st.quantized++
			var vals []float32
			if vals, err = f.ReadFloat32(ti); err == nil {
				wt.Type = t
				wt.Data, err = dtype.Quantize(t, vals)
			}
		}
		if err != nil {
			return st, fmt.Errorf("%s: %w", ti.Name, err)
		}
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

// q4_1 encodes the matrix ti as Q4_1 blocks: from q, its calibrated int4
// form, if not nil, else from its conversion to int4.
func q4_1(f *gguf.File, ti *gguf.TensorInfo, q *dtype.Int4) ([]byte, error) {
	if q == nil {
		raw, err := f.ReadTensor(ti)
		if err != nil {
			return nil, err
		}
		if q, err = dtype.ToInt4(ti.Type, raw, int(ti.Dims[1]), int(ti.Dims[0])); err != nil {
			return nil, err
		}
	}
	return q.Q4_1()
}
