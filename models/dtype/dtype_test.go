package dtype

import (
	"math"
	"strings"
	"testing"
)

func TestTypeTraits(t *testing.T) {
	// Block sizes and byte counts are those of ggml's block_* structs.
	tests := []struct {
		typ        Type
		name       string
		blockSize  int
		blockBytes int
	}{
		{F32, "F32", 1, 4},
		{F16, "F16", 1, 2},
		{Q4_0, "Q4_0", 32, 18},
		{Q4_1, "Q4_1", 32, 20},
		{Q5_0, "Q5_0", 32, 22},
		{Q5_1, "Q5_1", 32, 24},
		{Q8_0, "Q8_0", 32, 34},
		{Q8_1, "Q8_1", 32, 36},
		{Q2_K, "Q2_K", 256, 84},
		{Q3_K, "Q3_K", 256, 110},
		{Q4_K, "Q4_K", 256, 144},
		{Q5_K, "Q5_K", 256, 176},
		{Q6_K, "Q6_K", 256, 210},
		{Q8_K, "Q8_K", 256, 292},
		{I8, "I8", 1, 1},
		{I16, "I16", 1, 2},
		{I32, "I32", 1, 4},
		{I64, "I64", 1, 8},
		{F64, "F64", 1, 8},
		{BF16, "BF16", 1, 2},
		// Ids ggml has retired or that this package does not handle.
		{4, "type(4)", 0, 0},
		{5, "type(5)", 0, 0},
		{16, "type(16)", 0, 0},
		{29, "type(29)", 0, 0},
		{31, "type(31)", 0, 0},
		{math.MaxUint32, "type(4294967295)", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.typ.String(); got != tt.name {
				t.Errorf("String() = %q, want %q", got, tt.name)
			}
			if got, want := tt.typ.Known(), tt.blockSize != 0; got != want {
				t.Errorf("Known() = %v, want %v", got, want)
			}
			if got := tt.typ.BlockSize(); got != tt.blockSize {
				t.Errorf("BlockSize() = %d, want %d", got, tt.blockSize)
			}
			if got := tt.typ.BlockBytes(); got != tt.blockBytes {
				t.Errorf("BlockBytes() = %d, want %d", got, tt.blockBytes)
			}
		})
	}
}

func TestBytes(t *testing.T) {
	tests := []struct {
		name    string
		typ     Type
		n       int64
		want    int64
		wantErr string
	}{
		{"zero elements", F32, 0, 0, ""},
		{"f32", F32, 3, 12, ""},
		{"f16", F16, 5, 10, ""},
		{"one q4_0 block", Q4_0, 32, 18, ""},
		{"two q4_0 blocks", Q4_0, 64, 36, ""},
		{"one q4_k block", Q4_K, 256, 144, ""},
		{"q6_k", Q6_K, 512, 420, ""},
		{"i8 max count", I8, math.MaxInt64, math.MaxInt64, ""},
		{"f32 largest count", F32, math.MaxInt64 / 4, math.MaxInt64 / 4 * 4, ""},
		{"partial q4_0 block", Q4_0, 31, 0, "whole number"},
		{"partial q4_k block", Q4_K, 128, 0, "whole number"},
		{"negative count", F32, -1, 0, "negative"},
		{"unknown type", 4, 32, 0, "unknown"},
		{"f32 overflow", F32, math.MaxInt64/4 + 1, 0, "overflow"},
		{"q8_k overflow", Q8_K, math.MaxInt64 / 256 * 256, 0, "overflow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Bytes(tt.typ, tt.n)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Bytes(%v, %d) = %d, %v; want error containing %q", tt.typ, tt.n, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Bytes(%v, %d) = %d, %v; want %d", tt.typ, tt.n, got, err, tt.want)
			}
		})
	}
}

func TestDequantizeErrors(t *testing.T) {
	tests := []struct {
		name    string
		typ     Type
		src     int
		dst     int
		wantErr string
	}{
		{"unknown type", 4, 100, 32, "unsupported"},
		{"partial block", Q4_0, 100, 31, "whole number"},
		{"short source", Q4_0, 35, 64, "need 36 bytes, have 35"},
		{"short f32", F32, 7, 2, "need 8 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Dequantize(tt.typ, make([]byte, tt.src), make([]float32, tt.dst))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Dequantize = %v, want error containing %q", err, tt.wantErr)
			}
		})
	}
	// Extra source bytes are allowed: only a prefix is decoded.
	if err := Dequantize(F32, make([]byte, 100), make([]float32, 2)); err != nil {
		t.Fatalf("Dequantize with a longer source: %v", err)
	}
}

func TestFormatBytes(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{{0, "0 B"}, {512, "512 B"}, {1536, "1.5 KiB"}, {128 << 20, "128 MiB"}, {1 << 40, "1 TiB"}} {
		if got := FormatBytes(tc.n); got != tc.want {
			t.Errorf("FormatBytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}
