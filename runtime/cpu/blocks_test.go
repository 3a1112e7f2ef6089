package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/runtime/backend"
)

// TestMatMulBlocksRows: a product of m rows with a matrix at its file's
// bits gives each row the bits of that row's product alone, for every m
// (the tile kernel takes rows four at a time, the rest go one by one),
// on one worker and on three, for types with a min per group (Q4_K), per
// half group (Q2_K) and without (Q4_0, Q6_K), at widths with a lone last
// group and a short last chunk.
func TestMatMulBlocksRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct {
		typ        dtype.Type
		rows, cols int
	}{{dtype.Q4_0, 37, 224}, {dtype.Q4_0, 5, 32}, {dtype.Q4_K, 19, 512}, {dtype.Q2_K, 21, 256}, {dtype.Q6_K, 17, 768}, {dtype.Q8_0, 40, 288}} {
		vals := make([]float32, c.rows*c.cols)
		for i := range vals {
			vals[i] = float32(rng.NormFloat64())
		}
		raw, err := dtype.Quantize(c.typ, vals)
		if err != nil {
			t.Fatal(err)
		}
		bl, err := dtype.BlocksFromGGML(c.typ, raw, c.rows, c.cols)
		if err != nil {
			t.Fatal(err)
		}
		w := &QWeight{shape: []int{c.rows, c.cols}, storage: backend.Blocks, Blocks: bl}
		const maxM = 11
		x := make([]float32, maxM*c.cols)
		for i := range x {
			x[i] = float32(rng.NormFloat64()) * float32(1+i/c.cols)
		}
		solo := make([]float32, maxM*c.rows)
		for i := range maxM {
			MatMulQ(solo[i*c.rows:(i+1)*c.rows], x[i*c.cols:(i+1)*c.cols], w, 1, c.cols, c.rows, 1)
		}
		for _, workers := range []int{1, 3} {
			for m := 1; m <= maxM; m++ {
				got := make([]float32, m*c.rows)
				MatMulQ(got, x[:m*c.cols], w, m, c.cols, c.rows, workers)
				for i, v := range got {
					if math.Float32bits(v) != math.Float32bits(solo[i]) {
						t.Fatalf("%v %d×%d, %d rows on %d workers: [%d][%d] = %g, alone %g", c.typ, c.rows, c.cols, m, workers, i/c.rows, i%c.rows, v, solo[i])
					}
				}
			}
		}
	}
}
