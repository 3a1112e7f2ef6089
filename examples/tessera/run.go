package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/tessera-llm/tessera/models/lora"
	"github.com/tessera-llm/tessera/models/vision"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
	"github.com/tessera-llm/tessera/runtime/grammar"
)

// modelFlags are the flags of every command that loads a model.
type modelFlags struct {
	model, tokenizer, device, adapter string
	context, threads                  int
	quant, kvType                     string
	headF32, noCalibration            bool
	draft, draftQuant                 string
	speculateAlways, offline          bool
	multiStep                         int
	maxBatchTokens, maxSeqs           int
	lora                              loraFlag
	loraMerge, noSelfCheck            bool
	fullWindows                       bool
	wrap                              func(backend.Backend) backend.Backend // set by commands, not flags
	gpu                               webgpu.Device                         // set by commands: a device already open to load onto
	mmproj                            string                                // a vision projector (llama.cpp's mmproj GGUF)
}

// loraFlag collects --lora [NAME=]FILE[:SCALE], which may be repeated.
type loraFlag []runtime.AdapterSpec

func (f *loraFlag) String() string { return fmt.Sprint(len(*f), " adapters") }

func (f *loraFlag) Set(v string) error {
	name, path, scale, err := lora.ParseSpec(v)
	if err != nil {
		return err
	}
	*f = append(*f, runtime.AdapterSpec{Name: name, Path: path, Scale: scale})
	return nil
}

// requestAdapters is what a request of the run and chat commands runs
// with: every --lora adapter at once (as llama.cpp applies them), unless
// they were merged. Their scales are the adapters' own. bench and profile
// give them to their sequences one each, in turn (BenchOptions.Adapters).
func (m *modelFlags) requestAdapters() []runtime.AdapterRef {
	if m.loraMerge {
		return nil
	}
	var refs []runtime.AdapterRef
	for _, a := range m.lora {
		refs = append(refs, runtime.AdapterRef{Name: a.Name})
	}
	return refs
}

func (m *modelFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&m.model, "model", "", "model: a GGUF, llama2.c checkpoint or Hugging Face folder, or a reference to pull (hf.co/OWNER/REPO:QUANT) (required)")
	m.registerLoad(fs)
}

// registerLoad defines the flags that say how a model is loaded, for
// commands that name their models in flags of their own (serve).
func (m *modelFlags) registerLoad(fs *flag.FlagSet) {
	fs.StringVar(&m.mmproj, "mmproj", "", "vision projector to load with the model (llama.cpp's mmproj GGUF; projector types gemma3, idefics3, qwen2vl_merger, qwen2.5vl_merger, qwen3vl_merger), so that prompts take images")
	fs.StringVar(&m.tokenizer, "tokenizer", "", "tokenizer file (llama2.c .bin, SentencePiece .model or GGUF); default: the model's own")
	fs.StringVar(&m.device, "device", "auto", "where to run: cpu, webgpu or auto")
	fs.StringVar(&m.adapter, "adapter", "", "WebGPU adapter: an index or a name substring (see 'tessera info --device')")
	fs.IntVar(&m.context, "context", 0, "longest sequence, which sizes the KV cache (0: the model's, up to 4096)")
	fs.StringVar(&m.quant, "quant", "", "weight storage, a ceiling on every matrix: int4 (pure 4-bit), int8, f16, f32, or mixed (int4 with int8 for the head, embeddings and the most sensitive matrices). Quantized matrices keep the file's own type at its bits (Q4_K, Q6_K, Q8_0, IQ4_XS, MXFP4, ...; Q4_1 as int4) and are never widened; the default quantizes float matrices with mixed on WebGPU for models of 32 MiB of f32 weights or more and keeps them as the file does elsewhere")
	fs.StringVar(&m.kvType, "kv-type", "f32", "KV cache storage: f32, f16 (half the bytes) or int8 (a scale per token and kv head: about a quarter), for long contexts")
	fs.BoolVar(&m.fullWindows, "full-windows", false, "keep every position of the sliding-window layers (Gemma, gpt-oss, Mistral) instead of a ring of their window per sequence: more kv memory, running sequences not capped by the rings")
	fs.IntVar(&m.threads, "threads", 0, "CPU backend: goroutines per matrix product (0: one per core)")
	fs.IntVar(&m.maxBatchTokens, "max-batch-tokens", 0, fmt.Sprintf("tokens one forward step processes at most, decode rows and prompt chunks together (1..%d; 0: %d on the CPU, %d on a GPU, or --max-seqs if larger)", runtime.MaxBatchTokensLimit, runtime.DefaultBatchTokensCPU, runtime.DefaultBatchTokensGPU))
	fs.IntVar(&m.maxSeqs, "max-seqs", 0, fmt.Sprintf("sequences that run at once, a row of logits each a step (1..%d; 0: %d, or --max-batch-tokens if smaller); more requests wait", runtime.MaxSeqsLimit, runtime.DefaultMaxSeqs))
	fs.BoolVar(&m.headF32, "head-f32", false, "keep the output head in f32 whatever --quant says")
	fs.BoolVar(&m.noCalibration, "no-calibration", false, "int4: round each group on its own even where the model is small enough to calibrate at load (GPTQ)")
	fs.StringVar(&m.draft, "draft", "", "speculative decoding: 'ngram' (prompt lookup) or a smaller model with the same vocabulary")
	fs.StringVar(&m.draftQuant, "draft-quant", "", "weight storage of the draft model (like --quant)")
	fs.BoolVar(&m.speculateAlways, "speculate-always", false, "draft at every step even where speculation measures slower and would switch itself off (to measure it)")
	fs.IntVar(&m.multiStep, "multi-step", 0, "greedy decoding steps per GPU submission (0: 4 on WebGPU, 1 on the CPU; at most 16)")
	fs.BoolVar(&m.noSelfCheck, "no-self-check", false, "WebGPU: skip the load-time check of the kernels against the CPU (a small twin of the model run on both; results are cached per adapter and driver)")
	fs.Var(&m.lora, "lora", "LoRA adapter [NAME=]FILE[:SCALE] (a GGUF LoRA file or a PEFT folder; NAME defaults to the file's), applied unmerged; may be repeated (the server serves each as MODEL:NAME)")
	fs.BoolVar(&m.loraMerge, "lora-merge", false, "merge the --lora adapters into the weights at load (no per-token cost; every request runs with them)")
	offlineFlag(fs, &m.offline)
}

// load opens the model and the engine that runs it. A model reference in
// --model or --draft becomes the cached file's path, in m too.
func (m *modelFlags) load(ctx context.Context, e *env) (*runtime.Engine, error) {
	if err := requireModel(m.model); err != nil {
		return nil, err
	}
	path, err := modelPath(ctx, e, m.model, m.offline)
	if err != nil {
		return nil, err
	}
	m.model = path
	return m.loadPath(ctx, e, path)
}

// loadPath opens the model at path with the other flags' settings.
func (m *modelFlags) loadPath(ctx context.Context, e *env, path string) (*runtime.Engine, error) {
	var err error
	if m.draft != "" && m.draft != "ngram" {
		if m.draft, err = modelPath(ctx, e, m.draft, m.offline); err != nil {
			return nil, err
		}
	}
	if err := runtime.CheckQuant(m.quant); err != nil {
		return nil, usageError{err}
	}
	kvType, err := backend.ParseKVType(m.kvType)
	if err != nil {
		return nil, usageError{err}
	}
	budgets := runtime.Budgets{MaxBatchTokens: m.maxBatchTokens, MaxSeqs: m.maxSeqs}
	if err := budgets.Check(); err != nil {
		return nil, usageError{fmt.Errorf("--max-batch-tokens, --max-seqs: %w", err)}
	}
	eng, err := runtime.LoadContext(ctx, path, runtime.Options{Tokenizer: m.tokenizer, Device: m.device, Adapter: m.adapter, Budgets: budgets,
		KV: runtime.KVOptions{Type: kvType, FullWindows: m.fullWindows}, Context: m.context, Threads: m.threads, Quant: m.quant, HeadFloat: m.headF32, NoCalibration: m.noCalibration, Draft: m.draft,
		DraftQuant: m.draftQuant, SpeculateAlways: m.speculateAlways, MultiStep: m.multiStep,
		Adapters: m.lora, LoRAMerge: m.loraMerge, Wrap: m.wrap, GPU: m.gpu, NoSelfCheck: m.noSelfCheck, MMProj: m.mmproj})
	if err != nil {
		return nil, err
	}
	if note := eng.DeviceNote(); note != "" {
		fmt.Fprintln(e.stderr, note)
	}
	if c, ok := eng.SelfCheck(); ok && c.Status() != "passed" && !c.CPU { // the device note says why it moved to the CPU
		fmt.Fprintln(e.stderr, c)
	}
	return eng, nil
}

// constraintFlags compiles at most one of --json-schema, --regex and
// --grammar.
func constraintFlags(schemaFile, regex, grammarFile string) (*grammar.Grammar, error) {
	n := 0
	for _, s := range []string{schemaFile, regex, grammarFile} {
		if s != "" {
			n++
		}
	}
	switch {
	case n > 1:
		return nil, usagef("give one of --json-schema, --regex and --grammar")
	case schemaFile != "":
		data, err := os.ReadFile(schemaFile)
		if err != nil {
			return nil, err
		}
		return grammar.JSONSchema(data, grammar.SchemaOptions{})
	case grammarFile != "":
		data, err := os.ReadFile(grammarFile)
		if err != nil {
			return nil, err
		}
		return grammar.Parse(string(data))
	case regex != "":
		return grammar.Regex(regex)
	}
	return nil, nil
}

func setupRun(fs *flag.FlagSet) func(context.Context, *env) error {
	var mf modelFlags
	mf.register(fs)
	prompt := fs.String("prompt", "", "text to continue (default: start from BOS)")
	steps := fs.Int("steps", 256, "tokens to generate at most")
	sampling := samplerFlags(fs, 1, 0.9)
	verbose := fs.Bool("verbose", false, "print speculative decoding and KV cache figures")
	schemaFile := fs.String("json-schema", "", "constrain the output to JSON valid against the JSON Schema in this file")
	regex := fs.String("regex", "", "constrain the output to this regular expression")
	grammarFile := fs.String("grammar", "", "constrain the output to the GBNF grammar in this file")
	transcript := fs.String("transcript", "", "write the generation's transcript (JSON: model hash, prompt ids, sampling, output ids and log-probabilities) to this file, for 'tessera replay'")
	var images []string
	fs.Func("image", "an image (PNG, JPEG or WebP) for the prompt, with --mmproj; may be repeated. Each goes where the prompt has "+runtime.ImageMarker+", or, without markers, all before the prompt", func(v string) error {
		images = append(images, v)
		return nil
	})
	return func(ctx context.Context, e *env) error {
		if *steps < 0 {
			return usagef("--steps %d must be >= 0", *steps)
		}
		constraint, err := constraintFlags(*schemaFile, *regex, *grammarFile)
		if err != nil {
			return err
		}
		so, err := sampling()
		if err != nil {
			return err
		}
		if *transcript != "" && len(images) > 0 {
			return usagef("--transcript does not record images")
		}
		req := runtime.Request{Prompt: *prompt, MaxTokens: *steps, Sampler: so, Constraint: constraint, Adapters: mf.requestAdapters()}
		if len(images) > 0 { // read before the model loads: a wrong path fails at once
			if req.Images, err = readImages(images); err != nil {
				return err
			}
			if !strings.Contains(req.Prompt, runtime.ImageMarker) {
				req.Prompt = strings.Repeat(runtime.ImageMarker, len(images)) + req.Prompt
			}
		}
		eng, err := mf.load(ctx, e)
		if err != nil {
			return err
		}
		defer eng.Close()
		out := bufio.NewWriter(e.stdout)
		// llama2.c prints the prompt before its continuation; so do we,
		// once the model has taken it (a prompt it refuses is not printed).
		printed := false
		show := func(text string) error {
			if !printed {
				printed = true
				if _, err := out.WriteString(*prompt); err != nil {
					return err
				}
			}
			if _, err := out.WriteString(text); err != nil {
				return err
			}
			return out.Flush()
		}
		var tr *runtime.Transcript
		if *transcript != "" {
			req.Logprobs = true
			ids, err := eng.PromptTokensContext(ctx, req)
			if err != nil {
				return err
			}
			if tr, err = eng.NewTranscript(req, ids); err != nil {
				return err
			}
		}
		st, err := eng.Generate(ctx, req,
			func(t runtime.Token) error {
				if tr != nil {
					tr.Add(t)
				}
				return show(t.Text)
			})
		if err == nil && !printed {
			err = show("") // no token: the prompt alone
		}
		if printed {
			fmt.Fprintln(out)
			out.Flush()
		}
		if err != nil {
			return err
		}
		if tr != nil {
			tr.End(st)
			if err := writeJSONFile(*transcript, tr); err != nil {
				return err
			}
		}
		fmt.Fprintf(e.stderr, "%s: %d prompt tokens, %d generated (%s); prefill %.1f tok/s, decode %.1f tok/s, time to first token %s; seed %d\n",
			eng.Backend().Name(), st.PromptTokens, st.Generated, ending(st, eng.Model().Config.Context), st.PrefillRate(), st.DecodeRate(),
			st.TimeToFirst.Round(time.Microsecond), so.Seed)
		if *verbose {
			m := eng.Metrics()
			fmt.Fprintf(e.stderr, "speculation: %d drafted, %d accepted (%.0f%%), %.2f tokens per target step, %d target steps saved, %.2f round trips per token\n",
				st.Drafted, st.Accepted, 100*st.AcceptanceRate(), st.TokensPerStep(), max(0, st.Generated-st.Steps), st.RoundTripsPerToken())
			fmt.Fprintf(e.stderr, "kv cache: %d blocks of %d tokens, prefix hit rate %.0f%%, %d preemptions\n",
				m.KV.Blocks, eng.KVBlockSize(), 100*m.KV.HitRate, m.Preemptions)
		}
		return nil
	}
}

// readImages decodes the image files at paths within vision.DefaultLimits.
func readImages(paths []string) ([]*vision.Image, error) {
	var imgs []*vision.Image
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		img, err := vision.Decode(data, vision.DefaultLimits)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		imgs = append(imgs, img)
	}
	return imgs, nil
}

// ending says why a generation ended (runtime.Stats.Reason), so that a
// story cut short by a full context is not taken for the model's choice.
func ending(st runtime.Stats, context int) string {
	switch st.Reason() {
	case "stop":
		if st.Stop != "" {
			return fmt.Sprintf("stop string %q", st.Stop)
		}
		return "the grammar complete"
	case "eos":
		return "end of sequence"
	case "length":
		return fmt.Sprintf("the context of %d tokens full; --context", context)
	}
	return "--steps reached"
}
