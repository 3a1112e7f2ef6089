package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/lora"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/models/vision"
)

func setupSynth(fs *flag.FlagSet) func(context.Context, *env) error {
	shape := fs.String("shape", "", "model shape: "+strings.Join(synth.Names(), ", ")+" (required)")
	out := fs.String("out", "", "output GGUF file, or folder with --format hf (required)")
	format := fs.String("format", "gguf", "gguf (one file) or hf (a Hugging Face folder: config.json, safetensors, tokenizer.json); one seed gives the same model in both; with --lora: gguf (llama.cpp's LoRA GGUF) or peft (a PEFT folder)")
	typ := fs.String("type", "f32", "weight type: f32 or f16 (or bf16 with --format hf or --lora); or, for a GGUF, a GGUF block type (q4_0, q8_0, ...) for the matrices whose rows are whole blocks, the rest f32: for the types without K-quant fallbacks, the file 'tessera quantize' makes of the f32 one, written without it (a 20B shape's f16 file does not fit in memory)")
	seed := fs.Uint64("seed", 1, "random seed of the weights")
	experts := fs.String("experts", "", "a mixture of experts' expert matrices in this GGUF type instead (mxfp4, q8_0, q4_0, ...: gpt-oss's files store mxfp4)")
	base := fs.String("lora", "", "write a random LoRA adapter instead, at the shapes of this base: a model file or folder, or a shape name")
	rank := fs.Int("rank", 8, "with --lora: the adapter's rank")
	targets := fs.String("targets", strings.Join(synth.DefaultLoRATargets, ","), "with --lora: the projections to adapt (q, k, v, o, gate, up, down, head, embed)")
	mmproj := fs.String("mmproj", "", "write a random vision projector (llama.cpp's mmproj GGUF) of this type instead: gemma3, idefics3 (SmolVLM; its base needs SmolVLM's image tokens, as --shape tiny-smolvlm or smolvlm-256m have), qwen2vl, qwen2.5vl, qwen3vl (its base a qwen3vl model with as many deepstack slices), gemma4v (a gemma4 base); --base names the language model it feeds, --shape tiny or mid makes a small tower (else the real one)")
	mmBase := fs.String("base", "", "with --mmproj: the language model (a file or folder, or a shape name) whose width the projector's output takes")
	contextLen := fs.Int("context", 0, "the model's context length in tokens instead of the shape's (a tiny shape's is 256: room for a real vision tower's image tokens, say)")
	// weightType is --type's, where bf16 is allowed or not.
	weightType := func(bf16 bool) (dtype.Type, error) {
		types := map[string]dtype.Type{"f32": dtype.F32, "f16": dtype.F16}
		want := "f32 or f16"
		if bf16 {
			types["bf16"], want = dtype.BF16, "f32, f16 or bf16"
		}
		t, ok := types[strings.ToLower(*typ)]
		if !ok {
			return 0, usagef("--type %q (want %s)", *typ, want)
		}
		return t, nil
	}
	return func(ctx context.Context, e *env) error {
		if *mmproj != "" {
			t, err := weightType(false)
			if err != nil {
				return err
			}
			return writeSynthProjector(e, *mmproj, *shape, *mmBase, *out, t, *seed)
		}
		if *base != "" {
			if *out == "" {
				return usagef("--out is required")
			}
			t, err := weightType(true)
			if err != nil {
				return err
			}
			return writeSynthLoRA(e, *base, *out, *format, *rank, strings.Split(*targets, ","), t, *seed)
		}
		if *shape == "" || *out == "" {
			return usagef("--shape and --out are required")
		}
		s, err := synth.Lookup(*shape)
		if err != nil {
			return usageError{err}
		}
		switch {
		case *contextLen < 0 || *contextLen > 1<<24:
			return usagef("--context %d (want 1 to %d tokens, or 0 for the shape's %d)", *contextLen, 1<<24, s.Config.Context)
		case *contextLen > 0:
			s.Config.Context = *contextLen
		}
		hf := false
		switch strings.ToLower(*format) {
		case "gguf":
		case "hf":
			hf = true
		default:
			return usagef("--format %q (want gguf or hf)", *format)
		}
		var mt dtype.Type // --type a block type: the matrices' type
		t, err := weightType(hf)
		if err != nil && !hf {
			if mt, err = ggmlType("--type", *typ); err == nil {
				t = dtype.F32
			}
		}
		if err != nil {
			return err
		}
		var et dtype.Type
		if *experts != "" {
			if hf {
				return usagef("--experts with --format hf (a Hugging Face folder holds F32, F16 or BF16)")
			}
			if et, err = ggmlType("--experts", *experts); err != nil {
				return err
			}
		}
		if hf {
			err = writeSynthHF(ctx, *out, s, t, *seed)
		} else {
			err = writeSynthGGUF(ctx, *out, s, t, mt, et, *seed)
		}
		if err != nil {
			return err
		}
		if mt != 0 {
			t = mt
		}
		fmt.Fprintf(e.stderr, "wrote %s: %s shape, %s weights\n", *out, s.Name, t)
		return nil
	}
}

// writeSynthLoRA writes a random adapter for base (a model or a shape
// name) as a GGUF LoRA file or a PEFT folder, its tensors of type t.
func writeSynthLoRA(e *env, base, out, format string, rank int, targets []string, t dtype.Type, seed uint64) error {
	var c models.Config
	if s, err := synth.Lookup(base); err == nil {
		c = s.Config
	} else {
		m, err := models.Open(base, models.Options{})
		if err != nil {
			return fmt.Errorf("--lora %s: neither a shape nor a model: %w", base, err)
		}
		c = m.Config
		m.Close()
	}
	a, err := synth.LoRA(c, rank, targets, seed)
	if err != nil {
		return usageError{err}
	}
	a.Type = t
	switch strings.ToLower(format) {
	case "gguf":
		if _, ok := a.Targets[models.Output]; ok && c.TiedEmbeddings {
			// llama.cpp's loader finds no output.weight in such a model
			// (its head is token_embd.weight) and refuses the file.
			return usagef("--targets head on %s, whose head is its embedding table: llama.cpp cannot load that GGUF adapter (use --format peft)", base)
		}
		err = lora.WriteGGUF(out, a, c.Arch)
	case "peft":
		err = lora.WritePEFT(out, a, c)
	default:
		return usagef("--format %q with --lora (want gguf or peft)", format)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "wrote %s: rank-%d LoRA adapter of %d %s matrices for %s (%s)\n", out, rank, len(a.Targets), t, base, strings.ToLower(format))
	return nil
}

// writeSynthGGUF writes shape s as a GGUF: weights of type t, or matrices
// of type matrices where that is not 0, experts of type experts where
// that is not 0. synth does not look at ctx (a 20B shape takes many
// minutes), so the drawing runs beside a wait on ctx: a cancelled ctx (Ctrl-C, SIGTERM) returns
// at once and removes the file, and the process's exit ends the drawing.
func writeSynthGGUF(ctx context.Context, out string, s synth.Shape, t, matrices, experts dtype.Type, seed uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() {
		// The file itself, not a buffer over it: synth writes each chunk
		// of a tensor in place as it draws it (io.WriterAt), holding no
		// more than a chunk of a large model in memory.
		var err error
		if matrices != 0 {
			err = synth.WriteQuantized(f, s, matrices, experts, seed)
		} else if experts != 0 {
			err = synth.WriteExperts(f, s, t, experts, seed)
		} else {
			err = synth.Write(f, s, t, seed)
		}
		done <- err
	}()
	select {
	case err = <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(out)
		return fmt.Errorf("write %s: %w", out, err)
	}
	return nil
}

// writeSynthHF writes a Hugging Face folder. It refuses a folder that
// already holds files, so that a failure can remove what it wrote. A
// cancelled ctx (Ctrl-C, SIGTERM) stops the drawing between tensors.
func writeSynthHF(ctx context.Context, out string, s synth.Shape, t dtype.Type, seed uint64) error {
	entries, err := os.ReadDir(out)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("write %s: %w", out, err)
	case len(entries) > 0:
		return usagef("--out %s is a folder that is not empty", out)
	}
	if err := synth.WriteHFContext(ctx, out, s, t, seed, synth.HFOptions{}); err != nil {
		os.RemoveAll(out)
		return fmt.Errorf("write %s: %w", out, err)
	}
	return nil
}

// ggmlType is the GGUF tensor type called name (mxfp4, q8_0, ...) that
// flag names: one dtype.Quantize encodes.
func ggmlType(flag, name string) (dtype.Type, error) {
	for t := range dtype.Type(64) {
		if strings.EqualFold(t.String(), name) {
			if _, err := dtype.Quantize(t, make([]float32, 256)); err != nil {
				return 0, usagef("%s %s: %v", flag, name, err)
			}
			return t, nil
		}
	}
	return 0, usagef("%s %q: not a GGUF tensor type", flag, name)
}

// writeSynthProjector writes a random mmproj of projector type typ (at its
// real shape, or tiny with shape "tiny") feeding the language model base.
func writeSynthProjector(e *env, typ, shape, base, out string, t dtype.Type, seed uint64) error {
	if base == "" || out == "" {
		return usagef("--mmproj needs --base and --out")
	}
	name := typ
	switch shape {
	case "", "real":
	case "tiny", "mid":
		name = shape + "-" + typ
	default:
		return usagef("--shape %q with --mmproj (want tiny, mid or real)", shape)
	}
	var dim int
	if s, err := synth.Lookup(base); err == nil {
		dim = s.Config.Dim
	} else {
		m, err := models.Open(base, models.Options{})
		if err != nil {
			return err
		}
		dim = m.Config.Dim
		m.Close()
	}
	c, err := synth.ProjectorShape(name, dim)
	if err != nil {
		return usageError{err}
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	if err := synth.WriteProjector(w, c, t, seed); err != nil {
		f.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	tokens := fmt.Sprintf("%d tokens an image", c.Tokens())
	switch {
	case c.Dynamic():
		tokens = fmt.Sprintf("a token for each %d×%d pixels of an image", c.PatchSize*c.Merge, c.PatchSize*c.Merge)
	case c.Projector == vision.Idefics3:
		tokens = fmt.Sprintf("%d tokens a tile", c.Tokens())
	}
	fmt.Fprintf(e.stdout, "wrote %s: a %s projector (%d layers of %d, %s) into %d\n", out, c.Projector, c.Layers, c.Dim, tokens, dim)
	return nil
}
