package models

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tessera-llm/tessera/models/gguf"
	"github.com/tessera-llm/tessera/models/tokenizer"
)

// ErrUnsupportedArch is returned (wrapped) for a model whose architecture the
// engine has no forward pass for.
var ErrUnsupportedArch = errors.New("unsupported architecture")

// ErrBadSplit is returned (wrapped) for the parts of a split GGUF model
// that are not all of it, in order.
var ErrBadSplit = errors.New("bad split model")

// openGGUF reads the model description from a GGUF file's metadata, the way
// llama.cpp does: general.architecture names the prefix of the other keys.
// A split model (NAME-00001-of-00003.gguf, see gguf.Split) is opened from
// its first part, with the others beside it.
func openGGUF(path string) (*Model, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open model: %w", err)
	}
	files := []*gguf.File{f}
	closeAll := func() error {
		var errs []error
		for _, f := range files {
			errs = append(errs, f.Close())
		}
		return errors.Join(errs...)
	}
	if s, err := f.Split(); err != nil {
		f.Close()
		return nil, fmt.Errorf("open model %s: %w", path, err)
	} else if s.Count > 1 {
		prefix, no, count, ok := gguf.ParseSplitName(path)
		if !ok || no != 0 || count != s.Count || s.No != 0 {
			f.Close()
			return nil, fmt.Errorf("open model %s: %w: part %d of a model split in %d; open its first part, named like %s",
				path, ErrBadSplit, s.No+1, s.Count, filepath.Base(gguf.SplitName("NAME", 0, s.Count)))
		}
		for i := 1; i < count; i++ {
			p, err := gguf.Open(gguf.SplitName(prefix, i, count))
			if err != nil {
				closeAll()
				return nil, fmt.Errorf("open model %s: part %d of %d: %w", path, i+1, count, err)
			}
			files = append(files, p)
		}
	}
	m, err := modelFromGGUF(files)
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("open model %s: %w", path, err)
	}
	m.Path = path
	m.close = closeAll
	return m, nil
}

// modelFromGGUF reads a model from its GGUF files: one, or the parts of a
// split model in order, the first of which holds the metadata.
func modelFromGGUF(files []*gguf.File) (*Model, error) {
	if err := checkSplit(files); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSplit, err)
	}
	f := files[0]
	arch, ok := f.String("general.architecture")
	if !ok {
		return nil, errors.New("missing general.architecture")
	}
	// The Llama family shares one forward pass; the architectures differ
	// in data: RoPE layout, biases, q/k norms (detected from the tensors).
	rope, ok := ggufArchs[arch]
	if !ok {
		return nil, fmt.Errorf("%w %q (supported: %s)", ErrUnsupportedArch, arch, strings.Join(slices.Sorted(maps.Keys(ggufArchs)), ", "))
	}
	md := metaReader{f: f, prefix: arch + "."}
	c := Config{
		Arch:      arch,
		Dim:       md.int("embedding_length", 0),
		FFN:       md.int("feed_forward_length", 0),
		Layers:    md.int("block_count", 0),
		Heads:     md.int("attention.head_count", 0),
		Context:   md.int("context_length", 0),
		NormEps:   float32(md.float("attention.layer_norm_rms_epsilon", 1e-5)),
		RopeTheta: md.float("rope.freq_base", 10000),
		Rope:      rope,
	}
	c.KVHeads = md.int("attention.head_count_kv", c.Heads)
	if c.Heads > 0 {
		c.HeadDim = md.int("attention.key_length", c.Dim/c.Heads)
	}
	c.RopeDim = md.int("rope.dimension_count", c.HeadDim)
	if md.err != nil {
		return nil, md.err
	}
	tok, err := ggufTokenizer(f)
	if err != nil {
		return nil, err
	}
	c.Vocab = tok.VocabSize()
	m := &Model{Config: c, Format: "gguf", Tokenizer: tok, Tensors: map[string]*Tensor{}}
	m.ChatTemplate, _ = f.String("tokenizer.chat_template")
	for n, part := range files {
		for i := range part.Tensors {
			ti := &part.Tensors[i]
			if _, dup := m.Tensors[ti.Name]; dup {
				return nil, fmt.Errorf("tensor %s appears twice (again in part %d)", ti.Name, n+1)
			}
			shape := make([]int, len(ti.Dims))
			for j, d := range ti.Dims { // GGUF lists the innermost dimension first
				shape[len(shape)-1-j] = int(d)
			}
			m.Tensors[ti.Name] = NewTensor(ti.Name, shape, ti.Type, func() ([]byte, error) { return part.ReadTensor(ti) })
		}
	}
	_, hasOutput := m.Tensors[Output]
	m.Config.TiedEmbeddings = !hasOutput
	_, m.Config.QKVBias = m.Tensors[LayerBias(0, AttnQ)]
	_, m.Config.QKNorm = m.Tensors[LayerTensor(0, AttnQNorm)]
	if err := ropeScalingGGUF(m, &md); err != nil {
		return nil, err
	}
	if err := moeGGUF(m, &md); err != nil {
		return nil, err
	}
	if err := familyGGUF(m, &md); err != nil {
		return nil, err
	}
	m.Config.QKNormFull = arch == "olmoe"
	if arch == "granitemoe" {
		graniteGGUF(&m.Config, &md)
	}
	if err := encoderGGUF(m, f, &md); err != nil {
		return nil, err
	}
	if arch == "gemma4" {
		if err := gemma4GGUF(m, &md); err != nil {
			return nil, err
		}
	} else if strings.HasPrefix(arch, "gemma") {
		if err := gemmaGGUF(&m.Config, &md); err != nil {
			return nil, err
		}
	}
	if t, ok := m.Tensors["rope_freqs.weight"]; ok { // Llama 3.1 scaling, precomputed
		if t.Elements() != c.RopeDim/2 {
			return nil, fmt.Errorf("rope_freqs.weight has %d values for %d rotation pairs", t.Elements(), c.RopeDim/2)
		}
		if m.Config.RopeFactors, err = t.Float32(); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// checkSplit checks that files are the whole of a model: one whole file,
// or every part of a split one in order, their tensors adding up to the
// count the parts record.
func checkSplit(files []*gguf.File) error {
	first, err := files[0].Split()
	if err != nil {
		return err
	}
	if first.No != 0 {
		return fmt.Errorf("part %d of a model split in %d, not its first", first.No+1, first.Count)
	}
	if first.Count != len(files) {
		return fmt.Errorf("a model split in %d parts, given %d", first.Count, len(files))
	}
	tensors := 0
	for i, f := range files {
		s, err := f.Split()
		if err != nil {
			return fmt.Errorf("part %d: %w", i+1, err)
		}
		if s.No != i || s.Count != first.Count || s.Tensors != first.Tensors {
			return fmt.Errorf("part %d says it is part %d of %d with %d tensors; the first says %d parts, %d tensors",
				i+1, s.No+1, s.Count, s.Tensors, first.Count, first.Tensors)
		}
		tensors += len(f.Tensors)
	}
	if tensors != first.Tensors {
		return fmt.Errorf("the %d parts hold %d tensors; they record %d", len(files), tensors, first.Tensors)
	}
	return nil
}

// ggufArchs maps the architectures the engine runs to the RoPE layout of
// their GGUF files: llama.cpp's converter permutes Llama's q and k so that
// adjacent pairs rotate, and leaves Qwen's in Hugging Face's halves.
var ggufArchs = map[string]RopeLayout{
	"llama":  RopePairs,
	"qwen2":  RopeHalves,
	"qwen3":  RopeHalves,
	"gemma2": RopeHalves,
	"gemma3": RopeHalves,
	"gemma4": RopeHalves, // gemma4.go
	// families.go: SmolLM3 (NoPE layers), Phi-3 (fused projections,
	// partial rotation, LongRoPE).
	"smollm3": RopePairs,
	"phi3":    RopeHalves,
	"gpt-oss": RopeHalves, // llama.cpp's openai-moe
	// qwen35.go: Qwen3.5's hybrid Gated DeltaNet and gated attention
	// (M-RoPE's sections rotate text positions as NeoX halves do).
	"qwen35":    RopeHalves,
	"qwen35moe": RopeHalves,
	// families.go: Qwen2-VL's and Qwen3-VL's language models, Qwen2 and
	// Qwen3 with M-RoPE (Qwen3-VL's interleaved).
	"qwen2vl": RopeHalves,
	"qwen3vl": RopeHalves,
	// Mixtures of experts (moe.go); Mixtral is "llama" with experts.
	"qwen2moe":   RopeHalves,
	"qwen3moe":   RopeHalves,
	"olmoe":      RopeHalves,
	"granitemoe": RopePairs,
	// Encoders (encoder.go): nomic-bert rotates halves; BERT does not rotate.
	"bert":       RopeHalves,
	"nomic-bert": RopeHalves,
}

// gemmaGGUF sets what Gemma 2 and 3 add to the Llama family, from the
// metadata and from what llama.cpp fixes in code rather than in the file:
// the sliding-window pattern (every other layer from the first for Gemma
// 2; five of every six for Gemma 3), Gemma 3's local RoPE base of 10,000,
// and the query scale, 1/sqrt(head dim) but 1/sqrt(dim/heads) for
// the 27B models (told apart, as llama.cpp does, by their layer count).
// The converter already added one to the norm weights.
func gemmaGGUF(c *Config, md *metaReader) error {
	c.EmbedScale = float32(math.Sqrt(float64(c.Dim)))
	c.Act = GELUTanh
	c.PostNorms = true
	c.LocalRopeTheta = 10000
	c.SlidingWindow = md.int("attention.sliding_window", 0)
	pattern, big := 6, 62 // gemma3
	if c.Arch == "gemma2" {
		pattern, big = 2, 46
		c.LocalRopeTheta = c.RopeTheta // one rotary embedding for every layer
		c.AttnSoftcap = float32(md.float("attn_logit_softcapping", 50))
		c.FinalSoftcap = float32(md.float("final_logit_softcapping", 30))
	}
	if md.err != nil {
		return md.err
	}
	c.Sliding = slidingPattern(c.Layers, pattern)
	if _, ok := md.f.Lookup(md.prefix + "attention.sliding_window_pattern"); ok {
		// A period (0: every layer slides) or a flag a layer, as
		// llama.cpp's get_key_or_arr reads it.
		var err error
		if c.Sliding, err = md.flags("attention.sliding_window_pattern", c.Layers); err != nil {
			return err
		}
	}
	scalar := c.HeadDim
	if c.Layers == big {
		scalar = c.Dim / c.Heads
	}
	c.QueryScale = float32(1 / math.Sqrt(float64(scalar)))
	return nil
}

// slidingPattern marks every layer but each pattern-th (counting from one)
// as sliding: the global layers close each group of pattern. Pattern 0
// marks every layer (llama.cpp's set_swa_pattern(0)).
func slidingPattern(layers, pattern int) []bool {
	s := make([]bool, layers)
	for l := range s {
		s[l] = pattern == 0 || (l+1)%pattern != 0
	}
	return s
}

// linearRopeFactors divides every frequency by factor: positions scaled
// down by it ("linear" RoPE scaling).
func linearRopeFactors(ropeDim int, factor float64) []float32 {
	f := make([]float32, ropeDim/2)
	for i := range f {
		f[i] = float32(factor)
	}
	return f
}

// ggufTokenizer builds the tokenizer stored in a GGUF's tokenizer.ggml.* keys:
// SentencePiece for "llama" vocabularies, byte-level BPE for "gpt2" ones
// (Llama 3, Qwen, SmolLM), with tokenizer.ggml.pre naming the pre-tokenizer.
func ggufTokenizer(f *gguf.File) (tokenizer.Tokenizer, error) {
	kind, _ := f.String("tokenizer.ggml.model")
	if kind != "llama" && kind != "gpt2" && kind != "bert" && kind != "gemma4" {
		return nil, fmt.Errorf("tokenizer.ggml.model %q is not supported (supported: llama, gpt2, bert, gemma4)", kind)
	}
	pieces, ok := f.Strings("tokenizer.ggml.tokens")
	if !ok {
		return nil, errors.New("missing tokenizer.ggml.tokens")
	}
	types, _ := f.Int32s("tokenizer.ggml.token_type")
	id := func(key string, def int) int {
		if v, ok := f.Uint(key); ok && v < uint64(len(pieces)) {
			return int(v)
		}
		return def
	}
	if kind == "bert" { // WordPiece; llama.cpp's defaults are bert-base-uncased's ids
		cls := id("tokenizer.ggml.cls_token_id", id("tokenizer.ggml.bos_token_id", 101))
		tok, err := tokenizer.NewGGUFWordPiece(pieces, types, cls,
			id("tokenizer.ggml.seperator_token_id", 102), id("tokenizer.ggml.unknown_token_id", 100))
		if err != nil {
			return nil, err
		}
		return tok, nil
	}
	if kind == "gpt2" || kind == "gemma4" { // gemma4: BPE over characters (tokenizer.GGUFVocab's SentencePiece)
		merges, ok := f.Strings("tokenizer.ggml.merges")
		if !ok {
			return nil, errors.New("missing tokenizer.ggml.merges")
		}
		pre, _ := f.String("tokenizer.ggml.pre")
		flag := func(key string) *bool {
			if v, ok := f.Bool(key); ok {
				return &v
			}
			return nil
		}
		tok, err := tokenizer.NewGGUFBPE(tokenizer.GGUFVocab{
			Tokens: pieces, Types: types, Merges: merges, Pre: pre, SentencePiece: kind == "gemma4",
			BOS: id("tokenizer.ggml.bos_token_id", -1), EOS: id("tokenizer.ggml.eos_token_id", -1),
			EOT: id("tokenizer.ggml.eot_token_id", -1), EOM: id("tokenizer.ggml.eom_token_id", -1),
			Unknown: id("tokenizer.ggml.unknown_token_id", -1),
			AddBOS:  flag("tokenizer.ggml.add_bos_token"), AddEOS: flag("tokenizer.ggml.add_eos_token"),
		})
		if err != nil {
			return nil, err
		}
		return tok, nil
	}
	scores, _ := f.Float32s("tokenizer.ggml.scores")
	tok, err := tokenizer.NewSentencePiece(pieces, scores, types,
		id("tokenizer.ggml.bos_token_id", 1), id("tokenizer.ggml.eos_token_id", 2), id("tokenizer.ggml.unknown_token_id", 0))
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if prefix, ok := f.Bool("tokenizer.ggml.add_space_prefix"); ok && !prefix {
		tok.WithoutSpacePrefix() // Gemma
	}
	return tok.WithEnds(id("tokenizer.ggml.eot_token_id", -1), id("tokenizer.ggml.eom_token_id", -1)), nil
}

// metaReader reads <arch>.* integer and float keys, remembering the first
// error so that the caller checks once.
type metaReader struct {
	f      *gguf.File
	prefix string
	err    error
}

func (r *metaReader) int(key string, def int) int {
	v, ok := r.f.Uint(r.prefix + key)
	if a, isArray := r.f.Lookup(r.prefix + key); isArray && a.Len() > 0 {
		// One value a layer (Gemma 4's feed-forward widths): the largest
		// here; the family's reader takes each.
		for i := range a.Len() {
			n, isCount := a.Index(i).Uint()
			ok, v = ok || isCount, max(v, n)
		}
	}
	if !ok {
		if def == 0 && r.err == nil {
			r.err = fmt.Errorf("missing or invalid %s%s", r.prefix, key)
		}
		return def
	}
	if v > 1<<31 {
		if r.err == nil {
			r.err = fmt.Errorf("%s%s = %d out of range", r.prefix, key, v)
		}
		return def
	}
	return int(v)
}

func (r *metaReader) float(key string, def float64) float64 {
	if v, ok := r.f.Float(r.prefix + key); ok {
		return v
	}
	return def
}
