package dtype

import (
	"fmt"
	"math"
	"testing"
)

// TestBlocksMatchGGML: every type Blocks keeps, repacked, dequantizes to
// ggml's values bit for bit (Dequantize of the file's bytes), on rows of
// several blocks, tiny (f16-subnormal) scales and an odd number of
// legacy groups a row.
func TestBlocksMatchGGML(t *testing.T) {
	for _, typ := range BlockTypes {
		for _, cols := range []int{256, 512, 768, 96} {
			if cols%typ.BlockSize() != 0 {
				continue
			}
			t.Run(fmt.Sprintf("%v/%d", typ, cols), func(t *testing.T) {
				const rows = 5
				x := gaussian(rows*cols, uint64(cols))
				for i := range x[:cols] { // a row of subnormal scales
					x[i] *= 1e-6
				}
				raw, err := Quantize(typ, x)
				if err != nil {
					t.Fatal(err)
				}
				want := make([]float32, len(x))
				if err := Dequantize(typ, raw, want); err != nil {
					t.Fatal(err)
				}
				b, err := BlocksFromGGML(typ, raw, rows, cols)
				if err != nil {
					t.Fatal(err)
				}
				if got, n := b.Bytes(), BlocksBytes(typ, rows, cols); got != n {
					t.Errorf("%d bytes, BlocksBytes says %d", got, n)
				}
				got := b.Dequantize()
				for i := range got {
					if got[i] != want[i] || math.IsNaN(float64(got[i])) != math.IsNaN(float64(want[i])) {
						t.Fatalf("value %d (row %d): %g, ggml %g", i, i/cols, got[i], want[i])
					}
				}
			})
		}
	}
}

// TestBlockBits: Blocks keeps each type at the file's bits a value in rows
// of an even number of blocks, within 3% in the others (its scale words
// padded).
func TestBlockBits(t *testing.T) {
	for _, typ := range BlockTypes {
		file := float64(typ.BlockBytes()*8) / float64(typ.BlockSize())
		for _, cols := range []int{4096, 768, 800} {
			if cols%typ.BlockSize() != 0 {
				continue
			}
			got := BlockBits(typ, cols)
			even := cols/typ.BlockSize()%2 == 0
			t.Logf("%v, rows of %d: file %.4f, stored %.4f bits a value", typ, cols, file, got)
			if got < file || even && got != file || got > file*1.03 {
				t.Errorf("%v, rows of %d: %.4f bits a value stored, the file's %.4f", typ, cols, got, file)
			}
		}
	}
}
