package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/gguf"
)

func setupQuantize(fs *flag.FlagSet) func(context.Context, *env) error {
	in := fs.String("model", "", "input GGUF model (required)")
	out := fs.String("out", "", "output GGUF file (required)")
	typ := fs.String("type", "q4_0", "block type of the weight matrices: q4_0 or q4_k")
	return func(ctx context.Context, e *env) error {
		if *in == "" || *out == "" {
			return usagef("--model and --out are required")
		}
		t, ok := map[string]dtype.Type{"q4_0": dtype.Q4_0, "q4_k": dtype.Q4_K}[strings.ToLower(*typ)]
		if !ok {
			return usagef("--type %q (want q4_0 or q4_k)", *typ)
		}
		st, err := quantizeGGUF(ctx, *in, *out, t, e.stderr)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stderr, "wrote %s: %d of %d tensors as %v, %s → %s\n", *out, st.quantized, st.tensors, t,
			formatMiB(st.inBytes), formatMiB(st.outBytes))
		return nil
	}
}

func formatMiB(n int64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }

// quantizeStats count what quantizeGGUF did.
type quantizeStats struct {
	tensors, quantized int
	inBytes, outBytes  int64 // tensor data
}

// ggufFileType is llama.cpp's general.file_type for a model whose matrices
// are all of one type (LLAMA_FTYPE_MOSTLY_Q4_0, _Q4_K_S).
var ggufFileType = map[dtype.Type]uint32{dtype.Q4_0: 2, dtype.Q4_K: 14}

// quantizeGGUF writes a copy of the GGUF at in to out with every weight
// matrix (2-D tensor) encoded as t in ggml's exact block layout, the way
// llama.cpp's quantize does: metadata is copied key for key in order
// (general.file_type is set, and general.quantization_version added, as
// llama.cpp does), and tensors keep their order and names. Vectors (norm
// weights) stay as they are (f32), and so does a matrix whose rows are
// not a whole number of t's blocks, with a note on notes: ggml cannot
// store such rows in t. A matrix already of type t is copied unchanged;
// others are dequantized to f32 and quantized (dtype.Quantize).
//
// out is written next to its final name and renamed at the end, so a
// failure never leaves half a model behind.
func quantizeGGUF(ctx context.Context, in, out string, t dtype.Type, notes io.Writer) (quantizeStats, error) {
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
