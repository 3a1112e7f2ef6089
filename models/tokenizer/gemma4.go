package tokenizer

import "fmt"

// patternNewlines splits Gemma 4's text into runs of newlines and runs of
// everything else, the only pre-tokenization it has.
const patternNewlines = `[^\n]+|[\n]+`

// newGGUFSentencePieceBPE builds Gemma 4's tokenizer (GGUFVocab's
// SentencePiece): merges over characters, spaces as ▁ (escaped before
// the split and written back by the decoder), byte pieces for what the
// vocabulary lacks, control tokens special and user-defined ones matched
// everywhere, a BOS before every text as llama.cpp forces.
func newGGUFSentencePieceBPE(v GGUFVocab) (*BPE, error) {
	n := len(v.Tokens)
	if v.Types != nil && len(v.Types) != n {
		return nil, fmt.Errorf("tokenizer: %d token types for %d tokens", len(v.Types), n)
	}
	s := bpeSpec{
		pieces:          v.Tokens,
		types:           make([]TokenType, n),
		inModel:         make([]bool, n),
		byteFallback:    true,
		unk:             v.Unknown,
		normalizers:     []normalizer{replaceNormalizer{" ", spaceMark}},
		decodeSpaceMark: true,
		bos:             v.BOS,
		eos:             v.EOS,
		ends:            []int{v.EOT, v.EOM},
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
		return nil, err
	}
	s.merges = merges
	m, err := newMatcher(patternNewlines)
	if err != nil {
		return nil, err
	}
	s.pre = []preTokenizer{splitPre{m: m}}
	if v.BOS >= 0 {
		s.prefix = []int{v.BOS}
	}
	if v.AddEOS != nil && *v.AddEOS && v.EOS >= 0 {
		s.suffix = []int{v.EOS}
	}
	return newBPE(s)
}
