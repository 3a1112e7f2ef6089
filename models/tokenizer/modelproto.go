package tokenizer

import (
	"fmt"
	"math"
	"os"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers from SentencePiece's sentencepiece_model.proto. Only what
// the tokenizer needs is read; everything else is skipped, which also keeps
// us independent of generated code.
const (
	modelPieces      protowire.Number = 1 // ModelProto.pieces
	modelTrainerSpec protowire.Number = 2 // ModelProto.trainer_spec

	pieceText  protowire.Number = 1 // SentencePiece.piece
	pieceScore protowire.Number = 2 // SentencePiece.score
	pieceType  protowire.Number = 3 // SentencePiece.type

	trainerModelType protowire.Number = 3  // TrainerSpec.model_type
	trainerUnkID     protowire.Number = 40 // TrainerSpec.unk_id
	trainerBOSID     protowire.Number = 41 // TrainerSpec.bos_id
	trainerEOSID     protowire.Number = 42 // TrainerSpec.eos_id

	modelTypeBPE = 2 // TrainerSpec.ModelType.BPE
)

// LoadModelProto reads a SentencePiece .model file.
func LoadModelProto(path string) (*SentencePiece, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t, err := ParseModelProto(data)
	if err != nil {
		return nil, fmt.Errorf("%w (reading %s)", err, path)
	}
	return t, nil
}

// ParseModelProto decodes a serialized SentencePiece ModelProto. Only BPE
// models are accepted: a unigram model has the same fields but needs a
// different algorithm, and encoding it as BPE would silently give other ids.
func ParseModelProto(data []byte) (*SentencePiece, error) {
	// Count the pieces first, so the lists are allocated once: growing them
	// piece by piece would allocate several times their final size.
	count := 0
	err := walkFields(data, func(num protowire.Number, typ protowire.Type, _ uint64, _ []byte) error {
		if num == modelPieces && typ == protowire.BytesType {
			count++
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("tokenizer: model proto: %w", err)
	}
	var (
		pieces = make([]string, 0, count)
		scores = make([]float32, 0, count)
		types  = make([]int32, 0, count)
		spec   = trainerSpec{modelType: modelTypeBPE, unk: 0, bos: 1, eos: 2} // the proto's defaults, except model_type
	)
	err = walkFields(data, func(num protowire.Number, typ protowire.Type, v uint64, b []byte) error {
		switch {
		case num == modelPieces && typ == protowire.BytesType:
			p, score, pt, err := parsePiece(b)
			if err != nil {
				return fmt.Errorf("piece %d: %w", len(pieces), err)
			}
			if p == "" {
				// SentencePiece refuses to load such a model too; it also
				// makes every byte of a file a piece of its own.
				return fmt.Errorf("piece %d is empty", len(pieces))
			}
			pieces = append(pieces, p)
			scores = append(scores, score)
			types = append(types, pt)
		case num == modelTrainerSpec && typ == protowire.BytesType:
			if err := spec.parse(b); err != nil {
				return fmt.Errorf("trainer_spec: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("tokenizer: model proto: %w", err)
	}
	if spec.modelType != modelTypeBPE {
		return nil, fmt.Errorf("tokenizer: model proto: model_type %d is not BPE (%d)", spec.modelType, modelTypeBPE)
	}
	// SentencePiece writes -1 for "no such token"; anything past the
	// vocabulary is corruption, which NewSentencePiece reports.
	return NewSentencePiece(pieces, scores, types, noneIfNegative(spec.bos), noneIfNegative(spec.eos), noneIfNegative(spec.unk))
}

func noneIfNegative(id int32) int {
	return max(int(id), -1)
}

// trainerSpec holds the few TrainerSpec fields that matter for encoding.
type trainerSpec struct {
	modelType     int32
	unk, bos, eos int32
}

func (s *trainerSpec) parse(data []byte) error {
	return walkFields(data, func(num protowire.Number, typ protowire.Type, v uint64, _ []byte) error {
		if typ != protowire.VarintType {
			return nil
		}
		switch num {
		case trainerModelType:
			s.modelType = int32(v)
		case trainerUnkID:
			s.unk = int32(v)
		case trainerBOSID:
			s.bos = int32(v)
		case trainerEOSID:
			s.eos = int32(v)
		}
		return nil
	})
}

// parsePiece decodes one ModelProto.SentencePiece message.
func parsePiece(data []byte) (piece string, score float32, typ int32, err error) {
	typ = int32(TypeNormal) // the proto default
	err = walkFields(data, func(num protowire.Number, wt protowire.Type, v uint64, b []byte) error {
		switch {
		case num == pieceText && wt == protowire.BytesType:
			piece = string(b)
		case num == pieceScore && wt == protowire.Fixed32Type:
			score = math.Float32frombits(uint32(v))
		case num == pieceType && wt == protowire.VarintType:
			typ = int32(v)
		}
		return nil
	})
	return piece, score, typ, err
}

// walkFields calls fn for each field of a serialized message: v holds
// varint and fixed-width values, b the contents of length-delimited ones.
// Groups are skipped. Malformed input is an error, never a panic.
func walkFields(data []byte, fn func(num protowire.Number, typ protowire.Type, v uint64, b []byte) error) error {
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return protowire.ParseError(n)
		}
		data = data[n:]
		var (
			v uint64
			b []byte
		)
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(data)
		case protowire.Fixed32Type:
			var v32 uint32
			v32, n = protowire.ConsumeFixed32(data)
			v = uint64(v32)
		case protowire.Fixed64Type:
			v, n = protowire.ConsumeFixed64(data)
		case protowire.BytesType:
			b, n = protowire.ConsumeBytes(data)
		default:
			n = protowire.ConsumeFieldValue(num, typ, data)
		}
		if n < 0 {
			return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
		}
		data = data[n:]
		if err := fn(num, typ, v, b); err != nil {
			return err
		}
	}
	return nil
}
