// Package synth writes random-weight models at the exact shapes of real
// ones, as GGUF files with a working llama tokenizer, so that benchmarks
// measure the work of a 135M or 1.1B model without downloading one.
package synth

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/gguf"
)

// Shape is an architecture's dimensions.
type Shape struct {
	Name   string
	Config models.Config
}

// Shapes are the real models synth can imitate (their published configs).
var shapes = []Shape{
	{"smollm2-135m", models.Config{Arch: "llama", Dim: 576, FFN: 1536, Layers: 30, Heads: 9, KVHeads: 3, HeadDim: 64,
		Vocab: 49152, Context: 8192, NormEps: 1e-5, RopeTheta: 100000, RopeDim: 64, TiedEmbeddings: true}},
	{"qwen2.5-0.5b", models.Config{Arch: "qwen2", Dim: 896, FFN: 4864, Layers: 24, Heads: 14, KVHeads: 2, HeadDim: 64,
		Vocab: 151936, Context: 32768, NormEps: 1e-6, RopeTheta: 1000000, RopeDim: 64, Rope: models.RopeHalves,
		TiedEmbeddings: true, QKVBias: true}},
	{"qwen3-0.6b", models.Config{Arch: "qwen3", Dim: 1024, FFN: 3072, Layers: 28, Heads: 16, KVHeads: 8, HeadDim: 128,
		Vocab: 151936, Context: 40960, NormEps: 1e-6, RopeTheta: 1000000, RopeDim: 128, Rope: models.RopeHalves,
		TiedEmbeddings: true, QKNorm: true}},
	{"tinyllama-1.1b", models.Config{Arch: "llama", Dim: 2048, FFN: 5632, Layers: 22, Heads: 32, KVHeads: 4, HeadDim: 64,
		Vocab: 32000, Context: 2048, NormEps: 1e-5, RopeTheta: 10000, RopeDim: 64}},
	{"llama-3.2-1b", models.Config{Arch: "llama", Dim: 2048, FFN: 8192, Layers: 16, Heads: 32, KVHeads: 8, HeadDim: 64,
		Vocab: 128256, Context: 131072, NormEps: 1e-5, RopeTheta: 500000, RopeDim: 64, TiedEmbeddings: true,
		RopeFactors: models.Llama3RopeFactors(64, 500000, 32, 1, 4, 8192)}},
	// Tiny shapes for tests: every code path of each family, in milliseconds.
	{"tiny", models.Config{Arch: "llama", Dim: 64, FFN: 96, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16,
		Vocab: 300, Context: 256, NormEps: 1e-5, RopeTheta: 10000, RopeDim: 16}},
	{"tiny-llama3", models.Config{Arch: "llama", Dim: 64, FFN: 96, Layers: 2, Heads: 4, KVHeads: 1, HeadDim: 16,
		Vocab: 300, Context: 256, NormEps: 1e-5, RopeTheta: 500000, RopeDim: 16, TiedEmbeddings: true,
		RopeFactors: models.Llama3RopeFactors(16, 500000, 8, 1, 4, 64)}},
	{"tiny-qwen2", models.Config{Arch: "qwen2", Dim: 64, FFN: 96, Layers: 2, Heads: 8, KVHeads: 2, HeadDim: 8,
		Vocab: 300, Context: 256, NormEps: 1e-6, RopeTheta: 1000000, RopeDim: 8, Rope: models.RopeHalves,
		TiedEmbeddings: true, QKVBias: true}},
	{"tiny-qwen3", models.Config{Arch: "qwen3", Dim: 64, FFN: 96, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 32,
		Vocab: 300, Context: 256, NormEps: 1e-6, RopeTheta: 1000000, RopeDim: 32, Rope: models.RopeHalves,
		TiedEmbeddings: true, QKNorm: true}},
	// A decoder embedder (Qwen3-Embedding): last-token pooling over a Qwen3.
	{"tiny-qwen3-embedding", models.Config{Arch: "qwen3", Dim: 64, FFN: 96, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 32,
		Vocab: 300, Context: 256, NormEps: 1e-6, RopeTheta: 1000000, RopeDim: 32, Rope: models.RopeHalves,
		TiedEmbeddings: true, QKNorm: true, Pooling: models.PoolLast}},
	{"tiny-mistral", models.Config{Arch: "mistral", Dim: 64, FFN: 96, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16,
		Vocab: 300, Context: 256, NormEps: 1e-5, RopeTheta: 10000, RopeDim: 16, Rope: models.RopeHalves,
		SlidingWindow: 10, Sliding: []bool{true, true}, LocalRopeTheta: 10000}},
	// Gemma: windows of a few tokens, so that short tests slide past them.
	{"tiny-gemma2", gemma(models.Config{Arch: "gemma2", Dim: 64, FFN: 96, Layers: 3, Heads: 4, KVHeads: 2, HeadDim: 32,
		Vocab: 300, Context: 256, NormEps: 1e-6, RopeTheta: 10000, RopeDim: 32}, 12)},
	{"tiny-gemma3", gemma(models.Config{Arch: "gemma3", Dim: 64, FFN: 96, Layers: 7, Heads: 4, KVHeads: 1, HeadDim: 16,
		Vocab: 300, Context: 256, NormEps: 1e-6, RopeTheta: 1000000, RopeDim: 16}, 9)},
	// Gemma 3 whose every layer slides over 16 positions: llama.cpp reads
	// gemma3.attention.sliding_window_pattern 0 so (set_swa_pattern(0)),
	// and the engine keeps rings alone (runtime/window.go).
	{"tiny-gemma3-swa", allSliding(gemma(models.Config{Arch: "gemma3", Dim: 64, FFN: 96, Layers: 3, Heads: 4, KVHeads: 1, HeadDim: 16,
		Vocab: 300, Context: 256, NormEps: 1e-6, RopeTheta: 1000000, RopeDim: 16}, 16))},
	{"gemma2-2b", gemma(models.Config{Arch: "gemma2", Dim: 2304, FFN: 9216, Layers: 26, Heads: 8, KVHeads: 4, HeadDim: 256,
		Vocab: 256000, Context: 8192, NormEps: 1e-6, RopeTheta: 10000, RopeDim: 256}, 4096)},
	{"gemma3-1b", gemma(models.Config{Arch: "gemma3", Dim: 1152, FFN: 6912, Layers: 26, Heads: 4, KVHeads: 1, HeadDim: 256,
		Vocab: 262144, Context: 32768, NormEps: 1e-6, RopeTheta: 1000000, RopeDim: 256}, 512)},
}

// gemma adds to c what Gemma 2 and 3 have beyond the Llama family, as
// their published configs set it: embeddings scaled by sqrt(dim), GeGLU,
// norms after attention and the feed-forward, 1/sqrt(head dim) scores,
// sliding-window layers (every other one from the first in Gemma 2, five
// of every six in Gemma 3) rotating with a RoPE base of 10,000, Gemma 2's
// soft caps and Gemma 3's q/k norms.
func gemma(c models.Config, window int) models.Config {
	c.Rope, c.TiedEmbeddings = models.RopeHalves, true
	c.EmbedScale = float32(math.Sqrt(float64(c.Dim)))
	c.Act, c.PostNorms = models.GELUTanh, true
	c.QueryScale = float32(1 / math.Sqrt(float64(c.HeadDim)))
	c.SlidingWindow, c.LocalRopeTheta = window, 10000
	pattern := 6
	if c.Arch == "gemma2" {
		pattern = 2
		c.AttnSoftcap, c.FinalSoftcap = 50, 30
	} else {
		c.QKNorm = true
	}
	c.Sliding = make([]bool, c.Layers)
	for l := range c.Sliding {
		c.Sliding[l] = (l+1)%pattern != 0
	}
	return c
}

// allSliding marks every layer of c sliding.
func allSliding(c models.Config) models.Config {
	for l := range c.Sliding {
		c.Sliding[l] = true
	}
	return c
}

// Lookup returns the shape called name.
func Lookup(name string) (Shape, error) {
	for _, s := range append(shapes, encoderShapes...) {
		if s.Name == name {
			return s, nil
		}
	}
	return Shape{}, fmt.Errorf("unknown shape %q (known: %s)", name, strings.Join(Names(), ", "))
}

// Names lists the known shapes.
func Names() []string {
	var n []string
	for _, s := range append(shapes, encoderShapes...) {
		n = append(n, s.Name)
	}
	sort.Strings(n)
	return n
}

// Write writes a GGUF model of shape s with weights of type t (F32 or F16)
// drawn from a seeded generator: matrices uniform in ±sqrt(3/in) (unit
// variance outputs), norms near one.
func Write(w io.Writer, s Shape, t dtype.Type, seed uint64) error {
	return write(w, s, t, 0, seed, nil, nil)
}

// WriteTyped is Write with each tensor in the type that typeOf gives its
// name in the file (any type dtype.Quantize encodes, for rows of whole
// blocks), or in t where typeOf says false: a small model whose matrices
// are stored as another model's are, which exercises the same kernels
// (runtime's load-time self-check builds its twin this way).
func WriteTyped(w io.Writer, s Shape, t dtype.Type, typeOf func(name string) (dtype.Type, bool), seed uint64) error {
	return write(w, s, t, 0, seed, nil, func(name string, _ []int) (dtype.Type, bool) { return typeOf(name) })
}

// WriteQuantized is Write with every matrix in type m (Q4_0, Q8_0, ...:
// any type dtype.Quantize encodes) where its rows are whole blocks of m,
// and a mixture of experts' stacked matrices in experts where that is not
// 0 (gpt-oss's MXFP4); the rest f32. Those are the tensors and the bytes
// that `tessera quantize --type m` writes from Write's f32 file (for types
// without K-quant fallbacks: Q4_0, Q8_0, ...): a real shape at 4 bits without its f16 file in memory first (the
// 20B-and-up shapes' f16 files do not fit a 23 GB machine).
func WriteQuantized(w io.Writer, s Shape, m, experts dtype.Type, seed uint64) error {
	if _, err := dtype.Quantize(m, nil); err != nil {
		return fmt.Errorf("synth: matrices of type %s: %w", m, err)
	}
	if experts != 0 && !s.Config.MoE.On() {
		return fmt.Errorf("synth: %s has no experts", s.Name)
	}
	typeOf := func(name string, shape []int) (dtype.Type, bool) {
		if experts != 0 && strings.HasSuffix(name, "_exps.weight") {
			return 0, false
		}
		if !QuantizedMatrix(name, len(shape)) || shape[len(shape)-1]%m.BlockSize() != 0 {
			return 0, false
		}
		return m, true
	}
	return write(w, s, dtype.F32, experts, seed, nil, typeOf)
}

// QuantizedMatrix reports whether a quantizer encodes the tensor called
// name of dims dimensions, as llama.cpp's quantize chooses: a matrix
// (2-D) or a stack of experts (3-D), but not a router (ffn_gate_inp),
// which stays as the file has it: it is small, and its logits decide
// which experts run. Vectors (norms, biases) stay too.
func QuantizedMatrix(name string, dims int) bool {
	return (dims == 2 || dims == 3) && !strings.Contains(name, "ffn_gate_inp.weight")
}

// WriteExperts is Write with the stacked expert matrices of a mixture of
// experts in type experts (any type dtype.Quantize encodes whose blocks
// divide their rows: MXFP4 as gpt-oss's files store them, Q8_0, Q4_0...),
// the rest in t: the file of the same seed's weights that llama.cpp's
// quantizer would make of Write's for those tensors.
func WriteExperts(w io.Writer, s Shape, t, experts dtype.Type, seed uint64) error {
	if !s.Config.MoE.On() {
		return fmt.Errorf("synth: %s has no experts", s.Name)
	}
	return write(w, s, t, experts, seed, nil, nil)
}

// write writes s with weights of type t, its expert matrices of type
// experts where that is not 0 (F32), and any tensor that typeOf (if set)
// names a type, given its name in the file and its shape (outermost
// dimension first), in that type.
//
// It draws the weights twice: once without values, for the tensors'
// names, shapes and types, which the header lists before any data (and
// which decide where each tensor's data goes); then with them, in chunks
// of whole rows (drawChunk), each quantized and written in place. Where w
// is an io.WriterAt (a file), nothing larger than a chunk is held: a
// real shape at 4 bits is drawn in a few hundred MB. Other writers get
// the file assembled in memory.
func write(w io.Writer, s Shape, t, experts dtype.Type, seed uint64, tok []gguf.KV, typeOf func(name string, shape []int) (dtype.Type, bool)) error {
	if t != dtype.F32 && t != dtype.F16 {
		return fmt.Errorf("synth: weight type %s (want F32 or F16)", t)
	}
	c := s.Config
	if c.Encoder.On {
		return writeEncoder(w, s, t, seed)
	}
	if c.Arch == "mistral" {
		return fmt.Errorf("synth: %s: GGUF has no Mistral architecture (llama.cpp converts Mistral to llama, without its sliding window); write a Hugging Face folder", s.Name)
	}
	typeFor := func(name string, shape []int) dtype.Type {
		typ := t
		if len(shape) == 1 { // norms and biases stay f32, as in converted files
			typ = dtype.F32
		}
		if experts != 0 && len(shape) == 3 && strings.HasSuffix(name, "_exps.weight") {
			typ = experts
		}
		if typeOf != nil {
			if named, ok := typeOf(familyName(c, name), shape); ok {
				typ = named
			}
		}
		return typ
	}

	// The first pass lists the tensors in the order of their first chunk.
	var tensors []gguf.WriteTensor
	index := map[string]int{}
	plan := func(name string, shape []int, _ int, _ []float32) error {
		if _, ok := index[name]; ok {
			return nil
		}
		dims := make([]uint64, len(shape))
		for i, d := range shape { // GGUF lists the innermost dimension first
			dims[len(dims)-1-i] = uint64(d)
		}
		index[name] = len(tensors)
		tensors = append(tensors, gguf.WriteTensor{Name: familyName(c, name), Dims: dims, Type: typeFor(name, shape)})
		return nil
	}
	if err := draw(c, seed, drawChunk, true, familyWriters(c, plan)); err != nil {
		return err
	}
	drawn := len(tensors)
	tensors = familyTensors(c, tensors)
	if c.RopeFactors != nil && scalings[s.Name].Type == "" && c.RopeLong == nil { // Llama 3.1 scaling, as llama.cpp stores it
		data, _ := dtype.Quantize(dtype.F32, c.RopeFactors)
		tensors = append(tensors, gguf.WriteTensor{Name: "rope_freqs.weight", Dims: []uint64{uint64(len(c.RopeFactors))}, Type: dtype.F32, Data: data})
	}
	md := Metadata(s)
	if c.Gemma4 != nil {
		md = gemma4Vocabulary(c, md)
	}
	if len(tok) > 0 {
		kept := md[:0]
		for _, kv := range md {
			if !strings.HasPrefix(kv.Key, "tokenizer.") {
				kept = append(kept, kv)
			}
		}
		md = append(kept, tok...)
	}
	header, offsets, align, size, err := gguf.Header(md, tensors)
	if err != nil {
		return fmt.Errorf("synth %s: %w", s.Name, err)
	}

	out, inPlace := w.(io.WriterAt)
	var mem []byte
	if !inPlace {
		mem = make([]byte, size)
		out = memWriterAt(mem)
	}
	if _, err := out.WriteAt(header, 0); err != nil {
		return err
	}
	// The second pass writes each chunk at its place; written counts each
	// tensor's bytes, so that a chunk lost or doubled is an error here,
	// not a file that reads back wrong.
	written := make([]int64, len(tensors))
	fill := func(name string, shape []int, at int, vals []float32) error {
		i, ok := index[name]
		if !ok {
			return fmt.Errorf("synth: %s drawn but not planned", name)
		}
		typ := tensors[i].Type
		data, err := dtype.Quantize(typ, vals)
		if err != nil {
			return fmt.Errorf("synth %s: %w", name, err)
		}
		skip, err := dtype.Bytes(typ, int64(at))
		if err != nil {
			return fmt.Errorf("synth %s: chunk at %d: %w", name, at, err)
		}
		written[i] += int64(len(data))
		_, err = out.WriteAt(data, offsets[i]+skip)
		return err
	}
	if err := draw(c, seed, drawChunk, false, familyWriters(c, fill)); err != nil {
		return err
	}
	for i := drawn; i < len(tensors); i++ { // the family's own tensors, whole
		if _, err := out.WriteAt(tensors[i].Data, offsets[i]); err != nil {
			return err
		}
		written[i] = int64(len(tensors[i].Data))
	}
	for i, t := range tensors {
		n, _ := dtype.Bytes(t.Type, int64(elements(t.Dims)))
		if written[i] != n {
			return fmt.Errorf("synth: %s: %d bytes written of %d", t.Name, written[i], n)
		}
		end := offsets[i] + n
		pad := (align - end%align) % align
		if _, err := out.WriteAt(make([]byte, pad), end); err != nil {
			return err
		}
	}
	if !inPlace {
		if _, err := w.Write(mem); err != nil {
			return err
		}
	}
	return nil
}

// familyWriters wraps put in what c's family changes of the drawn
// tensors on their way to the file: Phi-3's fused projections, Qwen3.5's
// interleaved q and gate, Gemma 4's fused gate and up experts. Phi-3's
// and Qwen3.5's reach their writers whole (their layers' tensors are
// small); Gemma 4's experts go through a chunk at a time.
func familyWriters(c models.Config, put chunkFunc) chunkFunc {
	whole := func(name string, shape []int, vals []float32) error { return put(name, shape, 0, vals) }
	var layer func(name string, shape []int, vals []float32) error
	switch {
	case c.Arch == "phi3": // fused q/k/v and gate/up, as Phi-3's files store them
		layer = (&fusedWriter{put: whole}).tensor
	case c.Linear.On(): // Qwen3.5's q and gate interleaved, its norm names (qwen35.go)
		layer = (&qwen35Writer{put: whole, c: c}).tensor
	case c.Gemma4 != nil && c.MoE.On(): // Gemma 4's gate and up experts fused (gemma4.go)
		return (&gemma4Experts{put: put}).chunk
	default:
		return put
	}
	g := gatherer{}
	return func(name string, shape []int, at int, vals []float32) error {
		var l int
		var kind string
		if n, _ := sscanLayer(name, &l, &kind); n != 2 {
			return put(name, shape, at, vals)
		}
		if all, ok := g.add(name, shape, at, vals); ok {
			return layer(name, shape, all)
		}
		return nil
	}
}

// gatherer collects the chunks of tensors until each is whole.
type gatherer map[string]*gathering

type gathering struct {
	vals []float32
	got  int
}

// add takes a chunk of tensor name and returns the whole tensor once its
// last chunk has come.
func (g gatherer) add(name string, shape []int, at int, vals []float32) ([]float32, bool) {
	n := 1
	for _, d := range shape {
		n *= d
	}
	if at == 0 && len(vals) == n {
		return vals, true
	}
	p := g[name]
	if p == nil {
		p = &gathering{vals: make([]float32, n)}
		g[name] = p
	}
	copy(p.vals[at:], vals)
	p.got += len(vals)
	if p.got < n {
		return nil, false
	}
	delete(g, name)
	return p.vals, true
}

// elements is the number of values of a tensor of dims.
func elements(dims []uint64) int {
	n := 1
	for _, d := range dims {
		n *= int(d)
	}
	return n
}

// memWriterAt writes into a slice of the file's size.
type memWriterAt []byte

func (m memWriterAt) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > int64(len(m)) {
		return 0, fmt.Errorf("synth: write of %d bytes at %d past the file's %d", len(p), off, len(m))
	}
	return copy(m[off:], p), nil
}

// Metadata is the GGUF metadata of shape s: llama architecture keys and a
// SentencePiece tokenizer of exactly Vocab pieces.
func Metadata(s Shape) []gguf.KV {
	c := s.Config
	pieces, scores, types := Vocabulary(c.Vocab)
	familyVocabulary(c, pieces, types)
	visionVocabulary(s.Name, pieces, types)
	u := func(v int) gguf.Value { return gguf.Uint32Value(uint32(v)) }
	a := c.Arch + "."
	kv := []gguf.KV{
		{Key: "general.architecture", Value: gguf.StringValue(c.Arch)},
		{Key: "general.name", Value: gguf.StringValue("synthetic " + s.Name)},
		{Key: a + "context_length", Value: u(c.Context)},
		{Key: a + "embedding_length", Value: u(c.Dim)},
		{Key: a + "feed_forward_length", Value: u(c.FFN)},
		{Key: a + "block_count", Value: u(c.Layers)},
		{Key: a + "attention.head_count", Value: u(c.Heads)},
		{Key: a + "attention.head_count_kv", Value: u(c.KVHeads)},
		{Key: a + "attention.key_length", Value: u(c.HeadDim)},
		// llama.cpp sizes k and v by the value length (n_embd_gqa), which
		// defaults to dim / heads: Qwen3's heads are wider than that.
		{Key: a + "attention.value_length", Value: u(c.HeadDim)},
		{Key: a + "rope.dimension_count", Value: u(c.RopeDim)},
		{Key: a + "rope.freq_base", Value: gguf.Float32Value(float32(c.RopeTheta))},
		{Key: a + "attention.layer_norm_rms_epsilon", Value: gguf.Float32Value(c.NormEps)},
	}
	if c.SlidingWindow > 0 {
		kv = append(kv, gguf.KV{Key: a + "attention.sliding_window", Value: u(c.SlidingWindow)})
	}
	if (c.Arch == "gemma2" || c.Arch == "gemma3") && !slices.Contains(c.Sliding, false) {
		// Every layer slides: a period of 0, as llama.cpp reads it.
		kv = append(kv, gguf.KV{Key: a + "attention.sliding_window_pattern", Value: u(0)})
	}
	if c.Pooling != models.PoolNone {
		kv = append(kv, gguf.KV{Key: a + "pooling_type", Value: u(int(c.Pooling))})
	}
	if c.AttnSoftcap > 0 {
		kv = append(kv, gguf.KV{Key: a + "attn_logit_softcapping", Value: gguf.Float32Value(c.AttnSoftcap)},
			gguf.KV{Key: a + "final_logit_softcapping", Value: gguf.Float32Value(c.FinalSoftcap)})
	}
	kv = append(kv, moeMetadata(c)...)
	kv = append(kv, qwen35Metadata(c)...)
	kv = append(kv, familyMetadata(s)...)
	kv = gemma4Metadata(c, kv)
	return append(kv, []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: gguf.StringValue("llama")},
		{Key: "tokenizer.ggml.tokens", Value: gguf.ArrayValue(pieces)},
		{Key: "tokenizer.ggml.scores", Value: gguf.ArrayValue(scores)},
		{Key: "tokenizer.ggml.token_type", Value: gguf.ArrayValue(types)},
		{Key: "tokenizer.ggml.bos_token_id", Value: u(1)},
		{Key: "tokenizer.ggml.eos_token_id", Value: u(2)},
		{Key: "tokenizer.ggml.unknown_token_id", Value: u(0)},
	}...)
}

// Vocabulary makes a valid SentencePiece vocabulary of n ≥ 259 pieces:
// <unk>, <s>, </s>, the 256 byte pieces, the word marker ▁ on its own (as
// every vocabulary SentencePiece trains has it), then lower-case letter
// strings (with and without ▁) scored by length so that BPE merges them.
func Vocabulary(n int) (pieces []string, scores []float32, types []int32) {
	add := func(p string, score float32, typ int32) {
		pieces, scores, types = append(pieces, p), append(scores, score), append(types, typ)
	}
	add("<unk>", 0, 2)
	add("<s>", 0, 3)
	add("</s>", 0, 3)
	for b := 0; b < 256 && len(pieces) < n; b++ {
		add(fmt.Sprintf("<0x%02X>", b), 0, 6)
	}
	if len(pieces) < n {
		add("▁", -float32(len(pieces)), 1)
	}
	seen := map[string]bool{}
	for length := 1; len(pieces) < n; length++ {
		for i := 0; len(pieces) < n; i++ {
			word := letters(i, length)
			if word == "" {
				break
			}
			for _, p := range []string{"▁" + word, word} {
				if !seen[p] && len(pieces) < n {
					seen[p] = true
					add(p, -float32(len(pieces)), 1)
				}
			}
		}
	}
	return pieces, scores, types
}

// letters returns the i-th string of the given length over a..z, or "" when
// i is past the last.
func letters(i, length int) string {
	b := make([]byte, length)
	for j := length - 1; j >= 0; j-- {
		b[j] = byte('a' + i%26)
		i /= 26
	}
	if i > 0 {
		return ""
	}
	return string(b)
}
