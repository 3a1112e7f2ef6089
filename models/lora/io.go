package lora

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/gguf"
)

// PEFT's file names in an adapter folder.
const (
	PEFTConfig  = "adapter_config.json"
	PEFTWeights = "adapter_model.safetensors"
)

// Open reads the adapter at path (a GGUF LoRA file or a PEFT folder) for a
// base model of config c, and checks it against c's shapes.
func Open(path string, c models.Config) (*Adapter, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("open adapter: %w", err)
	}
	var a *Adapter
	if st.IsDir() {
		a, err = openPEFT(path, c)
	} else {
		var f *gguf.File
		if f, err = gguf.Open(path); err == nil {
			a, err = readGGUF(f, c)
			f.Close()
		}
	}
	return checked(a, err, path, c)
}

// ReadGGUF reads a GGUF LoRA of size bytes from r (in a browser, a Blob),
// as Open reads a file, for a base model of config c; name stands for the
// path in errors and Adapter.Path.
func ReadGGUF(r io.ReaderAt, size int64, name string, c models.Config) (*Adapter, error) {
	f, err := gguf.Read(r, size)
	var a *Adapter
	if err == nil {
		a, err = readGGUF(f, c)
	}
	return checked(a, err, name, c)
}

// checked is Open's and ReadGGUF's end: a read error as a bad adapter
// naming path, else the adapter checked against c's shapes.
func checked(a *Adapter, err error, path string, c models.Config) (*Adapter, error) {
	if err != nil {
		if errors.Is(err, ErrBadAdapter) {
			return nil, err
		}
		return nil, fmt.Errorf("%w %s: %w", ErrBadAdapter, path, err)
	}
	a.Path = path
	if err := a.Check(c); err != nil {
		return nil, err
	}
	return a, nil
}

// readGGUF reads llama.cpp's LoRA GGUF as llama.cpp's loader does
// (llama-adapter.cpp): general.type = adapter, general.architecture the
// base's, adapter.type = lora, adapter.lora.alpha (absent: scale 1), and
// for each target W the tensors "W.lora_a" (ggml dims [in, r]: r rows of
// in) and "W.lora_b" (dims [r, out]: out rows of r). The scale of a target
// is alpha over its own rank (lora_b's first dimension). Norm vectors
// (*_norm.weight, which mergekit-extract-lora adds) are skipped, as
// llama.cpp skips them. Refused with a reason: activated LoRA
// (adapter.alora.invocation_tokens, applied only after an invocation
// sequence). A token-embedding adapter (token_embd.weight) has its lora_a
// transposed, dims [r, vocab], as llama.cpp's converter writes it for
// llm_build_inp_embd to gather a token's row of it.
func readGGUF(f *gguf.File, c models.Config) (*Adapter, error) {
	if t, _ := f.String("general.type"); t != "adapter" {
		return nil, fmt.Errorf("general.type is %q, want \"adapter\" (a LoRA GGUF, not a model)", t)
	}
	if t, _ := f.String("adapter.type"); t != "lora" {
		return nil, fmt.Errorf("not a LoRA adapter (adapter.type %q, want \"lora\")", t)
	}
	if arch, _ := f.String("general.architecture"); arch != GGUFArch(c.Arch) {
		return nil, fmt.Errorf("the adapter is for a %q model, the base is %q", arch, GGUFArch(c.Arch))
	}
	if _, ok := f.Lookup("adapter.alora.invocation_tokens"); ok {
		return nil, errors.New("activated LoRA (adapter.alora.invocation_tokens) is not supported")
	}
	a := &Adapter{Format: "gguf", Targets: map[string]*Target{}}
	if v, ok := f.Float("adapter.lora.alpha"); ok {
		a.Alpha = float32(v)
	}
	pairs := map[string][2]*gguf.TensorInfo{}
	var names []string
	for i := range f.Tensors {
		t := &f.Tensors[i]
		base, which := "", 0
		switch {
		case strings.HasSuffix(t.Name, ".lora_a"):
			base = strings.TrimSuffix(t.Name, ".lora_a")
		case strings.HasSuffix(t.Name, ".lora_b"):
			base, which = strings.TrimSuffix(t.Name, ".lora_b"), 1
		case strings.HasSuffix(t.Name, "_norm.weight"):
			continue
		default:
			return nil, fmt.Errorf("tensor %s is neither a lora_a nor a lora_b", t.Name)
		}
		p, ok := pairs[base]
		if !ok {
			names = append(names, base)
		}
		p[which] = t
		pairs[base] = p
	}
	for _, name := range names {
		p := pairs[name]
		if p[0] == nil || p[1] == nil {
			return nil, fmt.Errorf("tensor %s has only one of lora_a and lora_b", name)
		}
		if len(p[0].Dims) != 2 || len(p[1].Dims) != 2 {
			return nil, fmt.Errorf("tensor %s: lora_a dims %v and lora_b dims %v are not matrices", name, p[0].Dims, p[1].Dims)
		}
		in, r, rb, out := int(p[0].Dims[0]), int(p[0].Dims[1]), int(p[1].Dims[0]), int(p[1].Dims[1])
		embed := name == models.TokenEmbedding
		if embed {
			r, in = in, r
		}
		if r != rb {
			if embed {
				return nil, fmt.Errorf("tensor %s: lora_a has rank %d, lora_b %d (an embedding's lora_a has ggml dims [rank, vocab])", name, r, rb)
			}
			return nil, fmt.Errorf("tensor %s: lora_a has rank %d, lora_b %d (lora_a must be transposed: ggml dims [in, rank])", name, r, rb)
		}
		A, err := f.ReadFloat32(p[0])
		if err != nil {
			return nil, err
		}
		if embed {
			A = transpose(A, in, r)
		}
		B, err := f.ReadFloat32(p[1])
		if err != nil {
			return nil, err
		}
		a.Targets[name] = &Target{Name: name, Rank: r, In: in, Out: out, A: A, B: B, Scale: scaleFor(a.Alpha, false, rb)}
	}
	return a, nil
}

// GGUFArch is the general.architecture llama.cpp gives a model of
// architecture arch: its converter writes Mistral as llama.
func GGUFArch(arch string) string {
	if arch == "mistral" {
		return "llama"
	}
	return arch
}

// writeType is a's Type, checked: the writers write F32, F16 or BF16.
func (a *Adapter) writeType() (dtype.Type, error) {
	switch a.Type {
	case dtype.F32, dtype.F16, dtype.BF16:
		return a.Type, nil
	}
	return 0, fmt.Errorf("lora: cannot write an adapter's tensors as %s (want F32, F16 or BF16)", a.Type)
}

// WriteGGUF writes a in llama.cpp's LoRA GGUF format for a base of
// architecture arch. The file holds one alpha and each tensor's scale is
// alpha over its own rank (1 with alpha 0), so a is written with the alpha
// that gives every target its scale: a's own, or that of an rsLoRA
// adapter's or a PEFT adapter's with an alpha_pattern, when one exists;
// else WriteGGUF fails rather than change a scale.
func WriteGGUF(path string, a *Adapter, arch string) error {
	alpha, err := a.ggufAlpha()
	if err != nil {
		return err
	}
	kv := []gguf.KV{
		{Key: "general.architecture", Value: gguf.StringValue(GGUFArch(arch))},
		{Key: "general.type", Value: gguf.StringValue("adapter")},
		{Key: "adapter.type", Value: gguf.StringValue("lora")},
		{Key: "adapter.lora.alpha", Value: gguf.Float32Value(alpha)},
	}
	typ, err := a.writeType()
	if err != nil {
		return err
	}
	var ts []gguf.WriteTensor
	for _, name := range a.Names() {
		t := a.Targets[name]
		A, adims := t.A, []uint64{uint64(t.In), uint64(t.Rank)}
		if name == models.TokenEmbedding { // transposed, as readGGUF reads it
			A, adims = transpose(t.A, t.Rank, t.In), []uint64{uint64(t.Rank), uint64(t.In)}
		}
		da, _ := dtype.Quantize(typ, A)
		db, _ := dtype.Quantize(typ, t.B)
		ts = append(ts,
			gguf.WriteTensor{Name: name + ".lora_a", Dims: adims, Type: typ, Data: da},
			gguf.WriteTensor{Name: name + ".lora_b", Dims: []uint64{uint64(t.Rank), uint64(t.Out)}, Type: typ, Data: db})
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := gguf.Write(f, kv, ts); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ggufAlpha is the one alpha that gives each of a's targets its scale as
// llama.cpp computes it: scaleFor(alpha, false, rank).
func (a *Adapter) ggufAlpha() (float32, error) {
	names := a.Names()
	if len(names) == 0 {
		return a.Alpha, nil
	}
	first := a.Targets[names[0]]
	candidates := []float32{first.Scale * float32(first.Rank), 0}
	if !a.RSLoRA {
		candidates = append([]float32{a.Alpha}, candidates...)
	}
	var misfit *Target // of the first candidate
	for i, alpha := range candidates {
		fits := true
		for _, name := range names {
			if t := a.Targets[name]; !near(scaleFor(alpha, false, t.Rank), t.Scale) {
				fits = false
				if misfit == nil && i == len(candidates)-2 {
					misfit = t
				}
			}
		}
		if fits {
			return alpha, nil
		}
	}
	if misfit == first { // scale 0: alpha 0 means scale 1 there
		return 0, fmt.Errorf("lora: a GGUF LoRA cannot hold %s's scale %g", first.Name, first.Scale)
	}
	return 0, fmt.Errorf("lora: a GGUF LoRA has one alpha, each tensor's scale alpha/rank (1 with alpha 0): %s (scale %g at rank %d) and %s (scale %g at rank %d) cannot both be written",
		first.Name, first.Scale, first.Rank, misfit.Name, misfit.Scale, misfit.Rank)
}

// transpose returns the [cols, rows] transpose of m, [rows, cols]
// row-major.
func transpose(m []float32, rows, cols int) []float32 {
	t := make([]float32, len(m))
	for i := range rows {
		for j := range cols {
			t[j*rows+i] = m[i*cols+j]
		}
	}
	return t
}
