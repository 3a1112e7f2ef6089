package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/text/unicode/norm"
)

// LoadHF reads a Hugging Face tokenizer: path is a tokenizer.json or the
// folder that holds one. The model must be BPE, byte-level (GPT-2, Llama 3,
// Qwen) or with byte fallback (Gemma). BOS, EOS and whether the model wants
// BOS come from tokenizer_config.json beside it when there is one, and from
// the post-processor otherwise; generation_config.json's eos_token_id adds
// end tokens.
func LoadHF(path string) (*BPE, error) {
	file := path
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		file = filepath.Join(path, "tokenizer.json")
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	dir := filepath.Dir(file)
	var cfg hfConfig
	if err := readOptionalJSON(filepath.Join(dir, "tokenizer_config.json"), &cfg); err != nil {
		return nil, err
	}
	var gen hfGenerationConfig
	if err := readOptionalJSON(filepath.Join(dir, "generation_config.json"), &gen); err != nil {
		return nil, err
	}
	t, err := ParseHF(data, cfg.BOS.Content, cfg.EOS.Content, cfg.AddBOS)
	if err != nil {
		return nil, fmt.Errorf("%w (reading %s)", err, file)
	}
	if len(gen.EOS) > 0 {
		t.ends = endSet(t, t.eos, append(t.ends, gen.EOS...)) // ids out of range are left out
	}
	return t, nil
}

func readOptionalJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("tokenizer: %w", err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("tokenizer: %s: %w", path, err)
	}
	return nil
}

// hfConfig is the part of tokenizer_config.json the tokenizer needs.
type hfConfig struct {
	BOS    hfTokenName `json:"bos_token"`
	EOS    hfTokenName `json:"eos_token"`
	AddBOS *bool       `json:"add_bos_token"`
}

// hfTokenName is a token written as a string or as {"content": ...}.
type hfTokenName struct{ Content string }

func (n *hfTokenName) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	if err := json.Unmarshal(b, &n.Content); err == nil {
		return nil
	}
	var obj struct {
		Content string `json:"content"`
	}
	err := json.Unmarshal(b, &obj)
	n.Content = obj.Content
	return err
}

// hfGenerationConfig is the part of generation_config.json we use.
type hfGenerationConfig struct {
	EOS intOrInts `json:"eos_token_id"`
}

type intOrInts []int

func (v *intOrInts) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var one int
	if err := json.Unmarshal(b, &one); err == nil {
		*v = []int{one}
		return nil
	}
	return json.Unmarshal(b, (*[]int)(v))
}

// hfFile is the part of tokenizer.json we read.
type hfFile struct {
	AddedTokens []struct {
		ID         int    `json:"id"`
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		LStrip     bool   `json:"lstrip"`
		RStrip     bool   `json:"rstrip"`
		Normalized bool   `json:"normalized"`
		Special    bool   `json:"special"`
	} `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         struct {
		Type                    string          `json:"type"`
		Vocab                   map[string]int  `json:"vocab"`
		Merges                  json.RawMessage `json:"merges"`
		UnkToken                *string         `json:"unk_token"`
		FuseUnk                 bool            `json:"fuse_unk"`
		ByteFallback            bool            `json:"byte_fallback"`
		IgnoreMerges            bool            `json:"ignore_merges"`
		ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
		EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
	} `json:"model"`
}

// hfComponent is a normalizer, pre-tokenizer, post-processor or decoder:
// an object with a "type" and fields that depend on it.
type hfComponent struct {
	Type string `json:"type"`
	// Sequences.
	Normalizers   []json.RawMessage `json:"normalizers"`
	PreTokenizers []json.RawMessage `json:"pretokenizers"`
	Processors    []json.RawMessage `json:"processors"`
	Decoders      []json.RawMessage `json:"decoders"`
	// Split, Replace.
	Pattern struct {
		String *string `json:"String"`
		Regex  *string `json:"Regex"`
	} `json:"pattern"`
	Behavior string `json:"behavior"`
	Invert   bool   `json:"invert"`
	Content  any    `json:"content"` // Replace: the replacement; Strip: the character
	// ByteLevel, Metaspace.
	AddPrefixSpace *bool   `json:"add_prefix_space"`
	UseRegex       *bool   `json:"use_regex"`
	Replacement    string  `json:"replacement"`
	PrependScheme  *string `json:"prepend_scheme"`
	Split          *bool   `json:"split"`
	// Digits.
	IndividualDigits bool `json:"individual_digits"`
	// Prepend.
	Prepend string `json:"prepend"`
	// Strip normalizer and decoder.
	StripLeft  bool `json:"strip_left"`
	StripRight bool `json:"strip_right"`
	Start      int  `json:"start"`
	// TemplateProcessing.
	Single        []json.RawMessage `json:"single"`
	SpecialTokens map[string]struct {
		IDs []int `json:"ids"`
	} `json:"special_tokens"`
	// BertProcessing, RobertaProcessing: [token, id].
	Cls []any `json:"cls"`
	Sep []any `json:"sep"`
}

// ParseHF builds a tokenizer from the contents of a tokenizer.json. bos and
// eos name those tokens ("" to take BOS from the post-processor and have no
// EOS); addBOS, when not nil, says whether the model wants BOS, as
// tokenizer_config.json's add_bos_token does.
func ParseHF(data []byte, bos, eos string, addBOS *bool) (*BPE, error) {
	var f hfFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("tokenizer: tokenizer.json: %w", err)
	}
	m := &f.Model
	if m.Type != "BPE" && !(m.Type == "" && m.Merges != nil) {
		return nil, fmt.Errorf("tokenizer: tokenizer.json: model type %q is not supported (supported: BPE)", m.Type)
	}
	if p := m.ContinuingSubwordPrefix; p != nil && *p != "" {
		return nil, fmt.Errorf("tokenizer: tokenizer.json: continuing_subword_prefix %q is not supported", *p)
	}
	if p := m.EndOfWordSuffix; p != nil && *p != "" {
		return nil, fmt.Errorf("tokenizer: tokenizer.json: end_of_word_suffix %q is not supported", *p)
	}

	n, err := hfIDSpace(&f)
	if err != nil {
		return nil, err
	}
	s := bpeSpec{
		pieces:       make([]string, n),
		types:        make([]TokenType, n),
		inModel:      make([]bool, n),
		byteFallback: m.ByteFallback,
		unk:          -1,
		fuseUnk:      m.FuseUnk,
		ignoreMerges: m.IgnoreMerges,
		bos:          -1,
		eos:          -1,
	}
	for i := range s.types {
		s.types[i] = TypeUnused
	}
	for p, id := range m.Vocab {
		s.pieces[id], s.types[id], s.inModel[id] = p, TypeNormal, true
	}
	for _, a := range f.AddedTokens {
		s.pieces[a.ID] = a.Content
		s.types[a.ID] = TypeUserDefined
		if a.Special {
			s.types[a.ID] = TypeControl
		}
		s.added = append(s.added, addedSpec{id: a.ID, content: a.Content, special: a.Special, lstrip: a.LStrip, rstrip: a.RStrip})
	}
	lookup := func(tok string) int {
		for _, a := range f.AddedTokens {
			if a.Content == tok {
				return a.ID
			}
		}
		if id, ok := m.Vocab[tok]; ok {
			return id
		}
		return -1
	}
	if m.UnkToken != nil {
		s.unk = lookup(*m.UnkToken)
	}

	merges, err := parseMerges(m.Merges)
	if err != nil {
		return nil, err
	}
	s.merges = merges

	if err := hfNormalizer(f.Normalizer, &s, 0); err != nil {
		return nil, err
	}
	if err := hfPreTokenizer(f.PreTokenizer, &s, 0); err != nil {
		return nil, err
	}
	if err := hfDecoder(f.Decoder, &s, false, 0); err != nil {
		return nil, err
	}
	if err := hfPostProcessor(f.PostProcessor, &s, lookup, 0); err != nil {
		return nil, err
	}
	if err := checkAround(&s, n); err != nil {
		return nil, err
	}
	if bos != "" {
		if s.bos = lookup(bos); s.bos < 0 {
			return nil, fmt.Errorf("tokenizer: bos_token %q is not in the vocabulary", bos)
		}
	} else if len(s.prefix) > 0 {
		s.bos = s.prefix[0]
	}
	if eos != "" {
		if s.eos = lookup(eos); s.eos < 0 {
			return nil, fmt.Errorf("tokenizer: eos_token %q is not in the vocabulary", eos)
		}
	}
	if addBOS != nil && *addBOS && s.bos >= 0 && (len(s.prefix) == 0 || s.prefix[0] != s.bos) {
		s.prefix = append([]int{s.bos}, s.prefix...)
	}
	return newBPE(s)
}

// hfIDSpace checks the ids of model.vocab and added_tokens before any
// allocation is sized by them, and returns the number of ids, one more
// than the largest. An id must be less than the number of entries of the
// two lists together, so the id space is no larger than the file lists;
// within each list an id may appear once. An added token may repeat a
// vocabulary entry's id (Gemma's do), and an id may be left out (the
// library accepts that; the id is then unused), which only the ids that
// added tokens repeat leave room for.
func hfIDSpace(f *hfFile) (int, error) {
	entries := len(f.Model.Vocab) + len(f.AddedTokens)
	inVocab := make([]string, entries)
	taken := make([]bool, entries)
	n := 0
	for p, id := range f.Model.Vocab {
		if id < 0 || id >= entries {
			return 0, fmt.Errorf("tokenizer: tokenizer.json: model.vocab: %q has id %d, outside 0..%d (the file has %d entries)", p, id, entries-1, entries)
		}
		if taken[id] {
			a, b := min(inVocab[id], p), max(inVocab[id], p)
			return 0, fmt.Errorf("tokenizer: tokenizer.json: model.vocab: %q and %q both have id %d", a, b, id)
		}
		inVocab[id], taken[id] = p, true
		n = max(n, id+1)
	}
	clear(taken)
	for i, a := range f.AddedTokens {
		if a.ID < 0 || a.ID >= entries {
			return 0, fmt.Errorf("tokenizer: tokenizer.json: added_tokens[%d]: %q has id %d, outside 0..%d (the file has %d entries)", i, a.Content, a.ID, entries-1, entries)
		}
		if taken[a.ID] {
			return 0, fmt.Errorf("tokenizer: tokenizer.json: added_tokens[%d]: %q has id %d, which an earlier added token has", i, a.Content, a.ID)
		}
		taken[a.ID] = true
		n = max(n, a.ID+1)
	}
	return n, nil
}

// maxAround bounds the ids a post-processor puts around a sequence. Real
// ones add one or two ([CLS] … [SEP], <|begin_of_text|>), and a template
// that repeats a token with many ids could otherwise multiply the size of
// the file.
const maxAround = 64

// checkAround checks the ids the post-processor adds: in range, and few.
func checkAround(s *bpeSpec, n int) error {
	if len(s.prefix)+len(s.suffix) > maxAround {
		return fmt.Errorf("tokenizer: tokenizer.json: post_processor adds %d ids around a sequence, more than %d", len(s.prefix)+len(s.suffix), maxAround)
	}
	for _, id := range append(slices.Clone(s.prefix), s.suffix...) {
		if id < 0 || id >= n {
			return fmt.Errorf("tokenizer: tokenizer.json: post_processor: id %d is outside the vocabulary of %d", id, n)
		}
	}
	return nil
}

// maxNesting bounds how deeply Sequence components nest. Real files nest
// one level; each level is parsed again, so deep nesting would cost time
// quadratic in the size of the file.
const maxNesting = 8

func tooDeep(what string) error {
	return fmt.Errorf("tokenizer: tokenizer.json: %s: Sequences nested more than %d deep", what, maxNesting)
}

// parseMerges reads merges written as "a b" strings or as [a, b] pairs.
func parseMerges(raw json.RawMessage) ([][2]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	// Decode only the form the file uses: a failed attempt at the other
	// would still fill a slice as long as the list.
	if rest := bytes.TrimLeft(bytes.TrimSpace(raw)[1:], " \t\r\n"); len(rest) > 0 && rest[0] == '[' {
		var pairs [][2]string
		if err := json.Unmarshal(raw, &pairs); err != nil {
			return nil, fmt.Errorf("tokenizer: tokenizer.json: merges: %w", err)
		}
		return pairs, nil
	}
	var lines []string
	if err := json.Unmarshal(raw, &lines); err != nil {
		return nil, fmt.Errorf("tokenizer: tokenizer.json: merges: %w", err)
	}
	return splitMerges(lines)
}

// splitMerges reads merges written "a b". The separator is the first space
// after the first character, as llama.cpp reads GGUF merges.
func splitMerges(lines []string) ([][2]string, error) {
	pairs := make([][2]string, len(lines))
	for i, l := range lines {
		k := -1
		if len(l) > 1 {
			if j := strings.IndexByte(l[1:], ' '); j >= 0 {
				k = j + 1
			}
		}
		if k < 0 {
			return nil, fmt.Errorf("tokenizer: merge %d (%q) is not two pieces separated by a space", i, l)
		}
		pairs[i] = [2]string{l[:k], l[k+1:]}
	}
	return pairs, nil
}

func parseComponent(raw json.RawMessage) (*hfComponent, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var c hfComponent
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("tokenizer: tokenizer.json: %w", err)
	}
	return &c, nil
}

func hfNormalizer(raw json.RawMessage, s *bpeSpec, depth int) error {
	c, err := parseComponent(raw)
	if c == nil || err != nil {
		return err
	}
	switch c.Type {
	case "Sequence":
		if depth >= maxNesting {
			return tooDeep("normalizer")
		}
		for _, sub := range c.Normalizers {
			if err := hfNormalizer(sub, s, depth+1); err != nil {
				return err
			}
		}
	case "NFC":
		s.normalizers = append(s.normalizers, unicodeNormalizer{norm.NFC})
	case "NFD":
		s.normalizers = append(s.normalizers, unicodeNormalizer{norm.NFD})
	case "NFKC":
		s.normalizers = append(s.normalizers, unicodeNormalizer{norm.NFKC})
	case "NFKD":
		s.normalizers = append(s.normalizers, unicodeNormalizer{norm.NFKD})
	case "Lowercase":
		s.normalizers = append(s.normalizers, lowercaseNormalizer{})
	case "Strip":
		s.normalizers = append(s.normalizers, stripNormalizer{c.StripLeft, c.StripRight})
	case "Prepend":
		s.normalizers = append(s.normalizers, prependNormalizer{c.Prepend})
	case "Replace":
		content, _ := c.Content.(string)
		if c.Pattern.String == nil {
			return errors.New("tokenizer: tokenizer.json: only string patterns are supported in Replace normalizers")
		}
		s.normalizers = append(s.normalizers, replaceNormalizer{*c.Pattern.String, content})
	default:
		return fmt.Errorf("tokenizer: tokenizer.json: normalizer %q is not supported", c.Type)
	}
	return nil
}

func hfPreTokenizer(raw json.RawMessage, s *bpeSpec, depth int) error {
	c, err := parseComponent(raw)
	if c == nil || err != nil {
		return err
	}
	switch c.Type {
	case "Sequence":
		if depth >= maxNesting {
			return tooDeep("pre_tokenizer")
		}
		for _, sub := range c.PreTokenizers {
			if err := hfPreTokenizer(sub, s, depth+1); err != nil {
				return err
			}
		}
	case "Split":
		var m matcher
		switch {
		case c.Pattern.String != nil:
			m = literalMatcher{*c.Pattern.String}
		case c.Pattern.Regex != nil:
			rm, err := newMatcher(*c.Pattern.Regex)
			if err != nil {
				return fmt.Errorf("tokenizer: %w", err)
			}
			m = rm
		default:
			return errors.New("tokenizer: tokenizer.json: Split without a pattern")
		}
		b, err := parseSplitBehavior(c.Behavior)
		if err != nil {
			return fmt.Errorf("tokenizer: tokenizer.json: %w", err)
		}
		s.pre = append(s.pre, splitPre{m: m, behavior: b, invert: c.Invert})
	case "ByteLevel":
		s.byteLevel = true
		p := byteLevelPre{addPrefixSpace: c.AddPrefixSpace != nil && *c.AddPrefixSpace}
		if c.UseRegex == nil || *c.UseRegex {
			rm, err := newMatcher(patternGPT2)
			if err != nil {
				return err
			}
			p.regex = &splitPre{m: rm}
		}
		s.pre = append(s.pre, p)
	case "Digits":
		s.pre = append(s.pre, digitsPre{individual: c.IndividualDigits})
	case "Metaspace":
		p := metaspacePre{replacement: c.Replacement, prepend: metaspaceScheme(c), splitWords: c.Split == nil || *c.Split}
		if p.replacement == "" {
			p.replacement = spaceMark
		}
		s.pre = append(s.pre, p)
	default:
		return fmt.Errorf("tokenizer: tokenizer.json: pre-tokenizer %q is not supported", c.Type)
	}
	return nil
}

// metaspaceScheme reads Metaspace's prepend_scheme, or the older
// add_prefix_space.
func metaspaceScheme(c *hfComponent) string {
	switch {
	case c.PrependScheme != nil:
		return *c.PrependScheme
	case c.AddPrefixSpace != nil && !*c.AddPrefixSpace:
		return "never"
	}
	return "always"
}

// hfDecoder reads the decoder, which says how pieces become text: the byte
// alphabet, ▁ for spaces, and a leading space to strip. fused is set once a
// Fuse decoder has joined the pieces, after which Strip acts on the start
// of the text only.
func hfDecoder(raw json.RawMessage, s *bpeSpec, fused bool, depth int) error {
	c, err := parseComponent(raw)
	if c == nil || err != nil {
		return err
	}
	switch c.Type {
	case "Sequence":
		if depth >= maxNesting {
			return tooDeep("decoder")
		}
		for _, sub := range c.Decoders {
			if err := hfDecoder(sub, s, fused, depth+1); err != nil {
				return err
			}
			if t, _ := parseComponent(sub); t != nil && t.Type == "Fuse" {
				fused = true
			}
		}
	case "ByteLevel":
		if !s.byteLevel {
			return errors.New("tokenizer: tokenizer.json: a ByteLevel decoder needs a ByteLevel pre-tokenizer")
		}
	case "ByteFallback", "Fuse":
		// <0xNN> pieces decode to their byte; joining is what Decode does.
	case "Replace":
		content, _ := c.Content.(string)
		if c.Pattern.String == nil || *c.Pattern.String != spaceMark || content != " " {
			return fmt.Errorf("tokenizer: tokenizer.json: only the Replace decoder of ▁ by a space is supported")
		}
		s.decodeSpaceMark = true
	case "Metaspace":
		s.decodeSpaceMark = true
		if metaspaceScheme(c) != "never" {
			s.stripStart = 1
		}
	case "Strip":
		content, _ := c.Content.(string)
		if content != " " || !fused {
			return fmt.Errorf("tokenizer: tokenizer.json: only a Strip decoder of leading spaces after Fuse is supported")
		}
		s.stripStart = c.Start
	default:
		return fmt.Errorf("tokenizer: tokenizer.json: decoder %q is not supported", c.Type)
	}
	return nil
}

// hfPostProcessor reads which tokens go around a single sequence.
func hfPostProcessor(raw json.RawMessage, s *bpeSpec, lookup func(string) int, depth int) error {
	c, err := parseComponent(raw)
	if c == nil || err != nil {
		return err
	}
	switch c.Type {
	case "Sequence":
		if depth >= maxNesting {
			return tooDeep("post_processor")
		}
		for _, sub := range c.Processors {
			if err := hfPostProcessor(sub, s, lookup, depth+1); err != nil {
				return err
			}
		}
	case "ByteLevel":
		// Only adjusts offsets.
	case "TemplateProcessing":
		seen := false
		for _, item := range c.Single {
			var it struct {
				SpecialToken *struct {
					ID string `json:"id"`
				}
				Sequence *struct{} `json:"Sequence"`
			}
			if err := json.Unmarshal(item, &it); err != nil {
				return fmt.Errorf("tokenizer: tokenizer.json: post-processor: %w", err)
			}
			switch {
			case it.Sequence != nil:
				seen = true
			case it.SpecialToken != nil:
				st, ok := c.SpecialTokens[it.SpecialToken.ID]
				if !ok {
					return fmt.Errorf("tokenizer: tokenizer.json: post-processor uses undefined special token %q", it.SpecialToken.ID)
				}
				if len(s.prefix)+len(s.suffix)+len(st.IDs) > maxAround {
					return fmt.Errorf("tokenizer: tokenizer.json: post_processor adds more than %d ids around a sequence", maxAround)
				}
				if seen {
					s.suffix = append(s.suffix, st.IDs...)
				} else {
					s.prefix = append(s.prefix, st.IDs...)
				}
			}
		}
	case "BertProcessing", "RobertaProcessing":
		for _, p := range []struct {
			tok []any
			to  *[]int
		}{{c.Cls, &s.prefix}, {c.Sep, &s.suffix}} {
			if len(p.tok) == 2 {
				if id, ok := p.tok[1].(float64); ok {
					*p.to = append(*p.to, int(id))
				}
			}
		}
	default:
		return fmt.Errorf("tokenizer: tokenizer.json: post-processor %q is not supported", c.Type)
	}
	return nil
}
