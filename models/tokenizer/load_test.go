package tokenizer

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// llama2cFile writes a tokenizer in llama2.c's format, recording the
// length of piece i as badLen[i] instead of its real length where given.
func llama2cFile(maxLen int32, pieces []string, badLen map[int]int32) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, maxLen)
	for i, p := range pieces {
		n, ok := badLen[i]
		if !ok {
			n = int32(len(p))
		}
		binary.Write(&b, binary.LittleEndian, float32(-i))
		binary.Write(&b, binary.LittleEndian, n)
		b.WriteString(p)
	}
	return b.Bytes()
}

var basicPieces = []string{"<unk>", "\n<s>\n", "\n</s>\n", " ", "a"}

func TestReadLlama2cErrors(t *testing.T) {
	tests := []struct {
		name      string
		data      []byte
		vocabSize int
		wantErr   string
	}{
		{"valid", llama2cFile(6, basicPieces, nil), 5, ""},
		{"trailing data is ignored", append(llama2cFile(6, basicPieces, nil), 1, 2, 3), 5, ""},
		{"empty file", nil, 5, "max_token_length"},
		{"zero max_token_length", llama2cFile(0, basicPieces, nil), 5, "max_token_length 0"},
		{"negative max_token_length", llama2cFile(-1, basicPieces, nil), 5, "max_token_length -1"},
		{"huge max_token_length", llama2cFile(math.MaxInt32, basicPieces, nil), 5, "out of range"},
		{"negative piece length", llama2cFile(6, basicPieces, map[int]int32{3: -7}), 5, "length -7"},
		{"piece longer than max", llama2cFile(6, basicPieces, map[int]int32{3: 1000}), 5, "length 1000"},
		{"fewer tokens than the model says", llama2cFile(6, basicPieces, nil), 6, "token 5 of 6: unexpected EOF"},
		{"vocab size too small", llama2cFile(6, basicPieces, nil), 2, "no room"},
		{"vocab size zero", llama2cFile(6, basicPieces, nil), 0, "no room"},
	}
	for _, tt := range tests {
		tok, err := ReadLlama2c(bytes.NewReader(tt.data), tt.vocabSize)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.wantErr == "" && tok.VocabSize() != tt.vocabSize:
			t.Errorf("%s: vocab size %d, want %d", tt.name, tok.VocabSize(), tt.vocabSize)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: error %v, want one mentioning %q", tt.name, err, tt.wantErr)
		}
	}
}

// Every truncation of a real file must fail cleanly: the model header says
// how many tokens there are, so a short file is always an error.
func TestReadLlama2cTruncated(t *testing.T) {
	data, err := os.ReadFile(modelsDir + "tok512.bin")
	if err != nil {
		t.Skip(err)
	}
	for n := range len(data) {
		if _, err := ReadLlama2c(bytes.NewReader(data[:n]), 512); err == nil {
			t.Fatalf("truncated to %d of %d bytes: no error", n, len(data))
		}
	}
}

func TestLoadErrorsNameTheFile(t *testing.T) {
	const missing = "no/such/tokenizer"
	if _, err := LoadLlama2c(missing, 512); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("LoadLlama2c: error %v, want one naming the file", err)
	}
	if _, err := LoadModelProto(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("LoadModelProto: error %v, want one naming the file", err)
	}
}

// pieceMsg encodes a ModelProto.SentencePiece message.
func pieceMsg(piece string, score float32, typ int64) []byte {
	var b []byte
	b = protowire.AppendTag(b, pieceText, protowire.BytesType)
	b = protowire.AppendString(b, piece)
	b = protowire.AppendTag(b, pieceScore, protowire.Fixed32Type)
	b = protowire.AppendFixed32(b, math.Float32bits(score))
	b = protowire.AppendTag(b, pieceType, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(typ))
}

// modelProto encodes a ModelProto with the given pieces and, unless
// spec is nil, a trainer_spec holding the given varint fields.
func modelProto(pieces [][]byte, spec map[protowire.Number]int64) []byte {
	var b []byte
	for _, p := range pieces {
		b = protowire.AppendTag(b, modelPieces, protowire.BytesType)
		b = protowire.AppendBytes(b, p)
	}
	if spec != nil {
		var s []byte
		for num, v := range spec {
			s = protowire.AppendTag(s, num, protowire.VarintType)
			s = protowire.AppendVarint(s, uint64(v))
		}
		b = protowire.AppendTag(b, modelTrainerSpec, protowire.BytesType)
		b = protowire.AppendBytes(b, s)
	}
	return b
}

var basicProtoPieces = [][]byte{
	pieceMsg("<unk>", 0, int64(TypeUnknown)),
	pieceMsg("<s>", 0, int64(TypeControl)),
	pieceMsg("</s>", 0, int64(TypeControl)),
	pieceMsg("<0x41>", 0, int64(TypeByte)),
	pieceMsg("▁", -1, int64(TypeNormal)),
}

func TestParseModelProtoErrors(t *testing.T) {
	bpe := map[protowire.Number]int64{trainerModelType: modelTypeBPE}
	tests := []struct {
		name    string
		data    []byte
		wantErr string
	}{
		{"valid without trainer_spec", modelProto(basicProtoPieces, nil), ""},
		{"valid BPE", modelProto(basicProtoPieces, bpe), ""},
		{"no pad or eos", modelProto(basicProtoPieces, map[protowire.Number]int64{trainerEOSID: -1}), ""},
		{"empty", nil, "empty vocabulary"},
		{"unigram model", modelProto(basicProtoPieces, map[protowire.Number]int64{trainerModelType: 1}), "not BPE"},
		{"bos past the vocabulary", modelProto(basicProtoPieces, map[protowire.Number]int64{trainerBOSID: 99}), "bos id 99"},
		{"unknown piece type", modelProto(append(basicProtoPieces, pieceMsg("x", 0, 9)), nil), "invalid type 9"},
		{"byte piece that is not <0xNN>", modelProto(append(basicProtoPieces, pieceMsg("<0xZZ>", 0, int64(TypeByte))), nil), "want <0xNN>"},
		{"garbage", []byte{0xff, 0xff, 0xff}, "model proto"},
		{"field number zero", []byte{0x00, 0x01}, "model proto"},
		{"length past the end", []byte{0x0a, 0x7f, 0x0a}, "model proto"},
		{"truncated piece", modelProto(basicProtoPieces, nil)[:5], "model proto"},
		{"piece with bad inner field", modelProto([][]byte{{0x0a, 0x09, 'x'}}, nil), "piece 0"},
	}
	for _, tt := range tests {
		_, err := ParseModelProto(tt.data)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: error %v, want one mentioning %q", tt.name, err, tt.wantErr)
		}
	}
}

// A protobuf cut at a field boundary is still valid, so truncation cannot
// always be detected; it must never panic, and when it parses, the result
// must be a smaller, usable tokenizer.
func TestParseModelProtoTruncated(t *testing.T) {
	data, err := os.ReadFile(modelsDir + "tok512.model")
	if err != nil {
		t.Skip(err)
	}
	for n := range len(data) {
		tok, err := ParseModelProto(data[:n])
		if err == nil {
			tok.Decode(tok.Encode("Once upon a time", true))
		}
	}
}

func TestNewSentencePieceErrors(t *testing.T) {
	pieces := []string{"<unk>", "<s>", "</s>"}
	scores := []float32{0, 0, 0}
	tests := []struct {
		name          string
		pieces        []string
		scores        []float32
		types         []int32
		bos, eos, unk int
		wantErr       string
	}{
		{"no pieces", nil, nil, nil, -1, -1, -1, "empty vocabulary"},
		{"scores missing", pieces, scores[:2], nil, 1, 2, 0, "2 scores for 3 pieces"},
		{"types missing", pieces, scores, []int32{2, 3}, 1, 2, 0, "2 token types"},
		{"type zero", pieces, scores, []int32{2, 3, 0}, 1, 2, 0, "invalid type 0"},
		{"eos out of range", pieces, scores, nil, 1, 3, 0, "eos id 3"},
		{"unk below -1", pieces, scores, nil, 1, 2, -2, "unk id -2"},
	}
	for _, tt := range tests {
		_, err := NewSentencePiece(tt.pieces, tt.scores, tt.types, tt.bos, tt.eos, tt.unk)
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: error %v, want one mentioning %q", tt.name, err, tt.wantErr)
		}
	}
}

// FuzzReadLlama2c and FuzzParseModelProto check that no input panics or
// makes the loader allocate more than allocBound of its size; run them
// with go test -fuzz to search beyond the seeds.
func FuzzReadLlama2c(f *testing.F) {
	f.Add(llama2cFile(6, basicPieces, nil), 5)
	if data, err := os.ReadFile(modelsDir + "tok512.bin"); err == nil {
		f.Add(data, 512)
	}
	f.Fuzz(func(t *testing.T, data []byte, vocabSize int) {
		var (
			tok *SentencePiece
			err error
		)
		if n := allocated(func() { tok, err = ReadLlama2c(bytes.NewReader(data), vocabSize) }); n > allocBound(len(data)) {
			t.Fatalf("a %d-byte file allocated %d bytes", len(data), n)
		}
		if err == nil {
			tok.Decode(tok.Encode("Once upon a time 😀", true))
		}
	})
}

func FuzzParseModelProto(f *testing.F) {
	f.Add(modelProto(basicProtoPieces, nil))
	if data, err := os.ReadFile(modelsDir + "tok512.model"); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var (
			tok *SentencePiece
			err error
		)
		if n := allocated(func() { tok, err = ParseModelProto(data) }); n > allocBound(len(data)) {
			t.Fatalf("a %d-byte file allocated %d bytes", len(data), n)
		}
		if err == nil {
			tok.Decode(tok.Encode("Once upon a time 😀", true))
		}
	})
}
