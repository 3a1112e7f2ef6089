package tokenizer

// patternNewlines splits Gemma 4's text into runs of newlines and runs of
// everything else, the only pre-tokenization it has.
const patternNewlines = `[^\n]+|[\n]+`

// newGGUFSentencePieceBPE builds Gemma 4's tokenizer (GGUFVocab's
// SentencePiece): merges over characters, spaces as ▁ (escaped before
// the split and written back by the decoder), byte pieces for what the
// vocabulary lacks, control tokens special and user-defined ones matched
// everywhere, a BOS before every text as llama.cpp forces.
func newGGUFSentencePieceBPE(v GGUFVocab) (*BPE, error) {
	s, err := ggufSpec(v)
	if err != nil {
		return nil, err
	}
	s.byteFallback, s.decodeSpaceMark = true, true
	s.normalizers = []normalizer{replaceNormalizer{" ", spaceMark}}
	m, err := newMatcher(patternNewlines)
	if err != nil {
		return nil, err
	}
	s.pre = []preTokenizer{splitPre{m: m}}
	if v.BOS >= 0 {
		s.prefix = []int{v.BOS}
	}
	return newBPE(s)
}
