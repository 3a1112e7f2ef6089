package tokenizer

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// GGUFVocab is a byte-level BPE vocabulary as GGUF stores it, under
// tokenizer.ggml.model = "gpt2".
type GGUFVocab struct {
	Tokens []string // tokenizer.ggml.tokens, in the byte alphabet
	Types  []int32  // tokenizer.ggml.token_type; nil: all normal
	Merges []string // tokenizer.ggml.merges, "a b"
	// Pre is tokenizer.ggml.pre, which names the pre-tokenizer: see
	// GGUFPreTokenizers.
	Pre string
	// Special token ids, -1 when absent: tokenizer.ggml.bos_token_id,
	// eos_token_id, eot_token_id, eom_token_id, unknown_token_id.
	BOS, EOS, EOT, EOM, Unknown int
	// AddBOS and AddEOS are tokenizer.ggml.add_bos_token and add_eos_token;
	// nil leaves the pre-tokenizer's default (BOS for Llama 3).
	AddBOS, AddEOS *bool
	// SentencePiece marks Gemma 4's vocabulary (tokenizer.ggml.model
	// "gemma4"): BPE over the text's characters, not the byte alphabet,
	// with spaces written ▁, the text split only into runs of newlines and
	// runs of anything else, <0xNN> pieces for characters without one, and
	// a BOS always (llama.cpp's LLAMA_VOCAB_PRE_TYPE_GEMMA4). Pre is
	// ignored.
	SentencePiece bool
}

// ggufPre is what a tokenizer.ggml.pre value stands for, following
// llama.cpp: regexes applied in turn, each splitting the words the one
// before made.
type ggufPre struct {
	patterns     []string
	ignoreMerges bool
	addBOS       bool
}

// The regexes llama.cpp uses. Its GPT-2 list lacks the final \s+, which
// changes nothing: unmatched text between matches is kept as words.
var ggufPres = func() map[string]ggufPre {
	llama3 := ggufPre{patterns: []string{patternLlama3}, ignoreMerges: true, addBOS: true}
	qwen2 := ggufPre{patterns: []string{patternQwen2}}
	gpt2 := ggufPre{patterns: []string{patternGPT2}}
	starcoder := ggufPre{patterns: []string{`\p{N}`, patternGPT2}}
	m := map[string]ggufPre{
		"gpt-4o":  {patterns: []string{patternGPT4o}},
		"default": {patterns: []string{`[\p{P}\$\+<=>\^~\|]+`, patternGPT2, `\p{N}+`, `[0-9][0-9][0-9]`}},
	}
	for _, name := range []string{"llama3", "llama-v3", "llama-bpe", "falcon3"} {
		m[name] = llama3
	}
	for _, name := range []string{"qwen2", "deepseek-r1-qwen", "megrez", "stablelm2"} {
		m[name] = qwen2
	}
	for _, name := range []string{"gpt-2", "gpt2", "phi-2", "roberta-bpe", "mpt", "olmo", "jais"} {
		m[name] = gpt2
	}
	for _, name := range []string{"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"} {
		m[name] = starcoder
	}
	return m
}()

// GGUFPreTokenizers lists the tokenizer.ggml.pre values NewGGUFBPE knows.
func GGUFPreTokenizers() []string {
	names := make([]string, 0, len(ggufPres))
	for n := range ggufPres {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// NewGGUFBPE builds a byte-level BPE tokenizer from GGUF metadata, the way
// llama.cpp reads it: control tokens are special (matched by
// EncodeSpecial, written only by DecodeSpecial), user-defined tokens are
// matched everywhere and written verbatim, and the pre-tokenizer comes from
// Pre ("" means llama.cpp's default).
func NewGGUFBPE(v GGUFVocab) (*BPE, error) {
	if v.SentencePiece {
		return newGGUFSentencePieceBPE(v)
	}
	name := v.Pre
	if name == "" {
		name = "default"
	}
	pre, ok := ggufPres[name]
	if !ok {
		return nil, fmt.Errorf("tokenizer: tokenizer.ggml.pre %q is not supported (supported: %s)", v.Pre, strings.Join(GGUFPreTokenizers(), ", "))
	}
	s, err := ggufSpec(v)
	if err != nil {
		return nil, err
	}
	s.byteLevel, s.ignoreMerges = true, pre.ignoreMerges
	for _, p := range pre.patterns {
		m, err := newMatcher(p)
		if err != nil {
			return nil, err
		}
		s.pre = append(s.pre, splitPre{m: m})
	}
	if addBOS := pre.addBOS; v.BOS >= 0 && (v.AddBOS == nil && addBOS || v.AddBOS != nil && *v.AddBOS) {
		s.prefix = []int{v.BOS}
	}
	return newBPE(s)
}

// ggufSpec is what GGUF metadata gives a BPE alike for byte-level and
// SentencePiece vocabularies, as llama.cpp reads it: the pieces, their
// types (control tokens special, user-defined ones matched everywhere,
// normal and byte pieces the model's own), the merges, the special ids
// and the EOS that add_eos_token asks after every text.
func ggufSpec(v GGUFVocab) (bpeSpec, error) {
	n := len(v.Tokens)
	if v.Types != nil && len(v.Types) != n {
		return bpeSpec{}, fmt.Errorf("tokenizer: %d token types for %d tokens", len(v.Types), n)
	}
	s := bpeSpec{
		pieces:  v.Tokens,
		types:   make([]TokenType, n),
		inModel: make([]bool, n),
		unk:     v.Unknown,
		bos:     v.BOS,
		eos:     v.EOS,
		ends:    []int{v.EOT, v.EOM},
	}
	for id := range n {
		typ := TypeNormal
		if v.Types != nil {
			typ = TokenType(v.Types[id])
		}
		s.types[id] = typ
		switch typ {
		case TypeControl, TypeUserDefined:
			s.added = append(s.added, addedSpec{id: id, content: v.Tokens[id], special: typ == TypeControl})
		case TypeNormal, TypeByte:
			s.inModel[id] = true
		}
	}
	merges, err := splitMerges(v.Merges)
	if err != nil {
		return bpeSpec{}, err
	}
	s.merges = merges
	if v.AddEOS != nil && *v.AddEOS && v.EOS >= 0 {
		s.suffix = []int{v.EOS}
	}
	return s, nil
}

// WithVocabSize returns the tokenizer with n ids, n at least VocabSize():
// models pad their embeddings beyond the ids a tokenizer.json lists (Qwen3
// lists 151,669 and has 151,936 rows), and the extra ids are unused.
func (t *BPE) WithVocabSize(n int) (*BPE, error) {
	if n < len(t.pieces) {
		return nil, fmt.Errorf("tokenizer: cannot shrink a vocabulary of %d to %d", len(t.pieces), n)
	}
	return &BPE{
		pieces: append(slices.Clip(t.pieces), make([]string, n-len(t.pieces))...),
		types:  append(slices.Clip(t.types), slices.Repeat([]TokenType{TypeUnused}, n-len(t.types))...),
		text:   append(slices.Clip(t.text), make([][]byte, n-len(t.text))...),
		vocab:  t.vocab, merges: t.merges,
		byteLevel: t.byteLevel, byteSym: t.byteSym, byteFallback: t.byteFallback, byteID: t.byteID,
		unk: t.unk, fuseUnk: t.fuseUnk, ignoreMerges: t.ignoreMerges,
		normalizers: t.normalizers, pre: t.pre, added: t.added,
		bos: t.bos, eos: t.eos, prefix: t.prefix, suffix: t.suffix, ends: t.ends, stripStart: t.stripStart,
	}, nil
}
