package main

import (
	"context"
	"flag"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/vision"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
)

func setupInfo(fs *flag.FlagSet) func(context.Context, *env) error {
	model := fs.String("model", "", "model file or folder, or a reference to pull (hf.co/OWNER/REPO:QUANT) (required)")
	tok := fs.String("tokenizer", "", "tokenizer file, for llama2.c checkpoints")
	device := fs.Bool("device", false, "describe the WebGPU adapters and the device Tessera would use; with --model, load it there and report the self-check of its kernels")
	adapter := fs.String("adapter", "", "with --device: the adapter to open (index or name substring)")
	quant := fs.String("quant", "", "the weight storage to describe, as run's --quant (mixed measures every float matrix)")
	mmproj := fs.String("mmproj", "", "a vision projector (llama.cpp's mmproj GGUF) to describe beside the model: its tower and what it takes of the device")
	var offline bool
	offlineFlag(fs, &offline)
	return func(ctx context.Context, e *env) error {
		if *device {
			if err := deviceInfo(e, *adapter); err != nil {
				return err
			}
			if *model == "" {
				return nil
			}
			fmt.Fprintln(e.stdout)
		}
		if err := requireModel(*model); err != nil {
			return err
		}
		path, err := modelPath(ctx, e, *model, offline)
		if err != nil {
			return err
		}
		m, err := models.Open(path, models.Options{Tokenizer: *tok})
		if err != nil {
			return err
		}
		defer m.Close()
		c := m.Config
		w := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintf(w, "model\t%s (%s)\n", m.Path, m.Format)
		fmt.Fprintf(w, "architecture\t%s\n", c.Arch)
		fmt.Fprintf(w, "dim\t%d\nffn\t%d\nlayers\t%d\n", c.Dim, c.FFN, c.Layers)
		fmt.Fprintf(w, "heads\t%d (kv %d, head dim %d)\n", c.Heads, c.KVHeads, c.HeadDim)
		fmt.Fprintf(w, "context\t%d\n", c.Context)
		fmt.Fprintf(w, "kv cache\t%s\n", kvBytes(c))
		if note := windowedKV(c); note != "" {
			fmt.Fprintf(w, "kv windows\t%s\n", note)
		}
		fmt.Fprintf(w, "rope\t%s, dim %d, theta %g\n", c.Rope, c.RopeDim, c.RopeTheta)
		fmt.Fprintf(w, "rms eps\t%g\n", c.NormEps)
		fmt.Fprintf(w, "tied embeddings\t%v\n", c.TiedEmbeddings)
		if lc := c.Linear; lc.On() {
			state := backend.RecurrentShape{Layers: lc.Count(), Slots: 1, Conv: lc.Conv, Channels: lc.Channels(), Heads: lc.VHeads, HeadDim: lc.HeadDim}
			fmt.Fprintf(w, "linear attention	%d of %d layers Gated DeltaNet (%d key, %d value heads of %d, %d taps): %s of state a sequence\n",
				lc.Count(), c.Layers, lc.KHeads, lc.VHeads, lc.HeadDim, lc.Conv, dtype.FormatBytes(state.Bytes()))
		}
		if m := c.MoE; m.On() {
			fmt.Fprintf(w, "experts\t%d, %d a token, %d wide, top-k renormalised %v, shared expert %d wide\n", m.Experts, m.Used, m.FFN, m.NormTopK, m.SharedFFN)
		}
		if c.ResidualScale > 0 || c.LogitScale > 0 {
			fmt.Fprintf(w, "multipliers\tembedding %g, attention %g, residual %g, logits 1/%g\n", c.EmbedScale, c.QueryScale, c.ResidualScale, c.LogitScale)
		}
		if c.QKVBias || c.QKNorm {
			fmt.Fprintf(w, "q/k/v bias, q/k norm\t%v, %v\n", c.QKVBias, c.QKNorm)
		}
		if c.PostNorms || c.Act != models.SiLU {
			fmt.Fprintf(w, "feed-forward\t%s gated, post-norms %v, embedding scale %g\n", c.Act, c.PostNorms, c.EmbedScale)
		}
		if c.AttnSoftcap > 0 || c.FinalSoftcap > 0 {
			fmt.Fprintf(w, "soft caps\tattention %g, logits %g\n", c.AttnSoftcap, c.FinalSoftcap)
		}
		if c.SlidingWindow > 0 {
			local := 0
			for l := range c.Layers {
				if c.LayerSliding(l) {
					local++
				}
			}
			fmt.Fprintf(w, "sliding window\t%d positions in %d of %d layers (rope theta %g)\n", c.SlidingWindow, local, c.Layers, c.LocalRopeTheta)
		}
		t := m.Tokenizer
		fmt.Fprintf(w, "tokenizer\t%T, %d tokens, bos %d, eos %d\n", t, t.VocabSize(), t.BOS(), t.EOS())
		if *mmproj != "" {
			vm, err := vision.Open(*mmproj)
			if err != nil {
				return err
			}
			vc := vm.Config
			weights, acts := runtime.TowerBytes(vm)
			vm.Close()
			fmt.Fprintf(w, "vision\t%s projector: %d layers of %d (%d heads), patches of %d, into %d\n", vc.Projector, vc.Layers, vc.Dim, vc.Heads, vc.PatchSize, vc.OutDim)
			fmt.Fprintf(w, "vision memory\t%s of weights (f32), %s of activations and attention cache\n", dtype.FormatBytes(weights), dtype.FormatBytes(acts))
		}
		var params int
		types := map[string]int{}
		for _, name := range m.TensorNames() {
			tt := m.Tensors[name]
			params += tt.Elements()
			types[tt.Type.String()]++
		}
		var ts []string
		for k, v := range types {
			ts = append(ts, fmt.Sprintf("%s×%d", k, v))
		}
		sort.Strings(ts)
		fmt.Fprintf(w, "tensors\t%d (%s), %d parameters\n", len(m.Tensors), strings.Join(ts, ", "), params)
		var bits [][]runtime.GroupBits
		for _, dev := range []string{"cpu", "webgpu"} {
			ws, err := runtime.PlanStorage(m, *quant, dev, false)
			if err != nil {
				return usageError{err}
			}
			fmt.Fprintf(w, "storage on %s\t%s\n", dev, runtime.FormatMix(runtime.WeightMix(m, ws)))
			bits = append(bits, runtime.TensorBits(m, ws))
		}
		if *device {
			// What loading it on WebGPU would find: the self-check's report.
			eng, err := runtime.Load(path, runtime.Options{Tokenizer: *tok, Device: "webgpu", Adapter: *adapter, Quant: *quant})
			if err != nil {
				return err
			}
			c, _ := eng.SelfCheck()
			fmt.Fprintf(w, "self-check\t%s\n", c)
			if len(c.Kernels) > 0 {
				fmt.Fprintf(w, "kernels checked\t%s\n", strings.Join(c.Kernels, ", "))
			}
			eng.Close()
		}
		w.Flush()
		fmt.Fprintln(e.stdout, "\nbits a weight by tensor kind: in the file, as kept on cpu and on webgpu")
		w = tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
		for i, g := range bits[0] {
			fmt.Fprintf(w, "  %s\t%s\t%.1fM\t%.3f\t%.3f\t%.3f\n", g.Group, g.Types, float64(g.Params)/1e6, g.FileBits, g.Bits, bits[1][i].Bits)
		}
		w.Flush()
		fmt.Fprintln(e.stdout)
		w = tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
		for _, name := range m.TensorNames() {
			tt := m.Tensors[name]
			fmt.Fprintf(w, "%s\t%s\t%v\n", name, tt.Type, tt.Shape)
		}
		return w.Flush()
	}
}

// kvBytes says what the KV cache takes per token and for a context of
// the default length, in each --kv-type.
func kvBytes(c models.Config) string {
	ctx := min(c.Context, runtime.DefaultContext)
	var parts []string
	for _, t := range []backend.KVType{backend.KVF32, backend.KVF16, backend.KVInt8} {
		// Qwen3.5's linear layers keep no keys and values.
		s := backend.KVShape{Layers: c.Layers - c.Linear.Count(), Blocks: 1, BlockSize: 1, Heads: c.KVHeads, HeadDim: c.HeadDim, Type: t}
		parts = append(parts, fmt.Sprintf("%s %s/token, %s for %d tokens", t, dtype.FormatBytes(s.Bytes()), dtype.FormatBytes(int64(ctx)*s.Bytes()), ctx))
	}
	return strings.Join(parts, "; ")
}

// windowedKV says, for a model with sliding-window layers, what one
// sequence of the default context keeps with those layers holding only a
// ring of their window (the default) against every position
// (KVOptions.FullWindows), in f32 with the CPU's default step; "" for a
// model without them.
func windowedKV(c models.Config) string {
	if c.SlidingWindow <= 0 {
		return ""
	}
	ctx := min(c.Context, runtime.DefaultContext)
	full, win := runtime.SequenceKV(c, backend.KVF32, ctx, runtime.DefaultBlockSize, runtime.DefaultBatchTokensCPU)
	if full == win {
		return fmt.Sprintf("none: at %d tokens every layer keeps the whole sequence", ctx)
	}
	return fmt.Sprintf("a sequence of %d tokens keeps %s of f32 kv, the sliding layers a ring of their window (%s with every position kept)",
		ctx, dtype.FormatBytes(win), dtype.FormatBytes(full))
}

// deviceInfo lists the adapters and describes the one Tessera opens.
func deviceInfo(e *env, adapter string) error {
	infos, err := webgpu.Adapters()
	if err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, "adapters:")
	for i, a := range infos {
		fmt.Fprintf(e.stdout, "  %d  %s (%s, %s)\n", i, a.Adapter, a.Backend, a.DeviceType)
	}
	dev, err := webgpu.Open(webgpu.Options{Adapter: adapter})
	if err != nil {
		return err
	}
	defer dev.Close()
	info := dev.Info()
	fmt.Fprintf(e.stdout, "\nopened:\n%s", info)
	// Every kernel computes in f32; shader-f16 is not used yet (f16
	// weights and caches are packed pairs that core WGSL unpacks).
	fmt.Fprintf(e.stdout, "%-30s %s\n", "path:", "f32 activations; KV cache f32, or f16/int8 with --kv-type")
	return nil
}
