package gpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/cpu"
	"github.com/tessera-llm/tessera/runtime/gpu/gputest"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
)

func TestMatMulPlan(t *testing.T) {
	for _, tc := range []struct {
		m, k int
		cpu  bool
		want matmulPlan
	}{
		{1, 4, false, matmulPlan{kernel: "gemv", tpc: 4, maxm: 1}},
		{1, 4096, false, matmulPlan{kernel: "gemv", tpc: 64, maxm: 1}},
		{3, 288, false, matmulPlan{kernel: "gemv", tpc: 16, maxm: 4}},
		{8, 2048, false, matmulPlan{kernel: "gemv", tpc: 64, maxm: 8}},
		{9, 2048, false, matmulPlan{kernel: "gemm", tm: 2}},
		{64, 2048, false, matmulPlan{kernel: "gemm", tm: 4}},
		{1, 257, false, matmulPlan{kernel: "gemm", tm: 2}},
		{1, 2048, true, matmulPlan{kernel: "gemv", tpc: 1, maxm: 1}},
		{5, 2048, true, matmulPlan{kernel: "gemv", tpc: 1, maxm: 8}},
		{64, 2048, true, matmulPlan{kernel: "gemv", tpc: 1, maxm: 8}},
		{64, 2047, true, matmulPlan{kernel: "gemm", tm: 4}},
		{8, 2047, true, matmulPlan{kernel: "naive"}},
		{1, 1, true, matmulPlan{kernel: "naive"}},
	} {
		if got := planMatMul(tc.m, tc.k, tc.cpu, ""); got != tc.want {
			t.Errorf("planMatMul(%d, %d, cpu %v) = %+v, want %+v", tc.m, tc.k, tc.cpu, got, tc.want)
		}
	}
	for _, tc := range []struct{ k, want int }{{4, 4}, {64, 4}, {128, 8}, {288, 16}, {2048, 64}, {11008, 64}} {
		if got := gemvThreads(tc.k); got != tc.want {
			t.Errorf("gemvThreads(%d) = %d, want %d", tc.k, got, tc.want)
		}
	}
}

func uploadF32(t *testing.T, b *Backend, shape []int, data []float32) backend.Weight {
	t.Helper()
	raw := make([]byte, 4*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
	}
	w, err := b.Upload(models.NewTensor("w", shape, dtype.F32, func() ([]byte, error) { return raw, nil }))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestMatMulKernels runs every plan, forced (whatever the adapter), over the shapes at the edges
// of its tiles and thresholds, against cpu.MatMul. Each case takes several
// steps of different batch sizes through the same call site (decode after a
// prompt chunk), checks that dst rows past the batch are left alone, and
// covers a dst with fewer rows than the batch (cap) and split weights.
func TestMatMulKernels(t *testing.T) {
	type shape struct {
		k, n    int
		binding int64 // lowered storage binding limit: splits w
	}
	shapes := []shape{
		{1, 1, 0}, {3, 5, 0}, {4, 1, 0}, {8, 65, 0}, {17, 63, 0}, {64, 64, 0}, {100, 300, 0},
		{260, 129, 0}, {1028, 70, 0}, {132, 500, 64 * 500 * 4}, {99, 700, 64 * 700 * 4},
	}
	steps := []int{1, 2, 3, 8, 9, 17, 33, 64, 1, 5}
	const maxRows = 64
	for _, kernel := range []string{"", "naive", "gemm", "gemv", "gemv1"} {
		for _, s := range shapes {
			name := kernel
			if name == "" {
				name = "auto"
			}
			t.Run(fmt.Sprintf("%s/k%d_n%d_binding%d", name, s.k, s.n, s.binding), func(t *testing.T) {
				dev := gputest.OpenWith(t, webgpu.Options{MaxStorageBinding: s.binding})
				b, err := NewBackend(dev, maxRows)
				if err != nil {
					t.Fatal(err)
				}
				b.SetPlan(Plan{MatMul: kernel})
				defer b.Close()
				rng := rand.New(rand.NewPCG(uint64(s.k), uint64(s.n)))
				random := func(n int) []float32 {
					v := make([]float32, n)
					for i := range v {
						v[i] = rng.Float32()*2 - 1
					}
					return v
				}
				wdata := random(s.n * s.k)
				w := uploadF32(t, b, []int{s.n, s.k}, wdata)
				if s.binding > 0 && Parts(w) < 2 {
					t.Fatalf("w in %d parts under a %d-byte binding limit", Parts(w), s.binding)
				}
				tensor := func(rows, cols int) backend.Tensor {
					t.Helper()
					ts, err := b.NewTensor(rows, cols)
					if err != nil {
						t.Fatal(err)
					}
					return ts
				}
				x, y := tensor(maxRows, s.k), tensor(maxRows, s.n)
				one := tensor(1, s.n)                     // takes part in any batch as one row
				tol := 1e-6 * math.Sqrt(float64(s.k)) * 4 // as in TestMatMul
				for _, m := range steps {
					xdata := random(maxRows * s.k)
					if err := b.Write(x, xdata); err != nil {
						t.Fatal(err)
					}
					sentinel := make([]float32, maxRows*s.n)
					for i := range sentinel {
						sentinel[i] = -12345
					}
					if err := b.Write(y, sentinel); err != nil {
						t.Fatal(err)
					}
					if err := b.Begin(matmulBatch(m)); err != nil {
						t.Fatal(err)
					}
					b.MatMul(y, x, w)
					b.MatMul(one, x, w)
					got, err := b.Read(y, maxRows)
					if err != nil {
						t.Fatal(err)
					}
					gotOne, err := b.Read(one, 1)
					if err != nil {
						t.Fatal(err)
					}
					want := make([]float32, m*s.n)
					cpu.MatMul(want, xdata, wdata, m, s.k, s.n, 1)
					check := func(what string, got []float32, rows int) {
						t.Helper()
						for i := 0; i < rows*s.n; i++ {
							d := math.Abs(float64(got[i]-want[i])) / (1 + math.Abs(float64(want[i])))
							if !(d <= tol) {
								t.Fatalf("%s, batch of %d: row %d column %d: gpu %g, cpu %g (relative error %.3g > %.3g)",
									what, m, i/s.n, i%s.n, got[i], want[i], d, tol)
							}
						}
					}
					check("dst", got, m)
					check("one-row dst", gotOne, 1)
					for i := m * s.n; i < len(got); i++ {
						if got[i] != -12345 {
							t.Fatalf("batch of %d: row %d column %d past the batch was written: %g", m, i/s.n, i%s.n, got[i])
						}
					}
				}
			})
		}
	}
}

// matmulBatch is a step of m tokens of one sequence at positions 0..m-1.
func matmulBatch(m int) backend.Batch {
	b := backend.Batch{Tokens: make([]int32, m), Pos: make([]int32, m), Seq: make([]int32, m), BlockSize: 16}
	for i := range b.Pos {
		b.Pos[i] = int32(i)
	}
	table := make([]int32, (m+15)/16)
	for i := range table {
		table[i] = int32(i)
	}
	b.Tables = [][]int32{table}
	return b
}
