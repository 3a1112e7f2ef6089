package gpu_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu"
	"github.com/tessera-llm/tessera/runtime/gpu/gputest"
)

// TestLinearAttention: the conv1d and delta_rule kernels against their
// twins (cpu ConvRows, DeltaRow) over several steps of three sequences in
// scattered state slots: prompts, decoding rows, a chunk after decoding,
// rows of sequences interleaved, a sequence with no row in a step (its
// state must stay), and a slot reused from position 0 (its stale state
// must not leak). Shapes: heads narrower and wider than a workgroup (64),
// not multiples of 4, more value than key heads, one to five taps.
func TestLinearAttention(t *testing.T) {
	for _, s := range []struct{ kheads, vheads, d, taps int }{
		{1, 3, 5, 4}, {2, 4, 16, 4}, {3, 3, 70, 2}, {1, 1, 1, 1}, {2, 6, 33, 5},
	} {
		t.Run(fmt.Sprintf("k%d_v%d_d%d_taps%d", s.kheads, s.vheads, s.d, s.taps), func(t *testing.T) {
			testLinearAttention(t, s.kheads, s.vheads, s.d, s.taps)
		})
	}
}

func testLinearAttention(t *testing.T, kheads, vheads, d, taps int) {
	const maxRows = 12
	w := newTwins(t, maxRows)
	ch := (2*kheads + vheads) * d
	dn := backend.DeltaNet{KHeads: kheads, VHeads: vheads, HeadDim: d, Eps: 1e-6}
	shape := backend.RecurrentShape{Layers: 2, Slots: 5, Conv: taps, Channels: ch, Heads: vheads, HeadDim: d}
	var rec [2]backend.Recurrent
	w.each(func(b backend.Backend, i int) {
		var err error
		if rec[i], err = b.NewRecurrent(shape); err != nil {
			t.Fatal(err)
		}
	})
	convW := w.weight([]int{ch, taps}, w.random(ch*taps, 1))
	decayV := append(w.random(vheads, 1), w.random(vheads, 0.4)...)
	for h := range vheads {
		decayV[vheads+h] = -0.1 - decayV[vheads+h]*decayV[vheads+h] // a < 0
	}
	decay := w.weight([]int{2 * vheads}, decayV)
	x := w.tensor(maxRows, ch, nil)
	conv := w.tensor(maxRows, ch, nil)
	gates := w.tensor(maxRows, 2*vheads, nil)
	out := w.tensor(maxRows, vheads*d, nil)

	// Each step: the sequence of every row and its position; sequence j
	// lives in slot slots[j] (layer 1, to see that layers are apart).
	type step struct {
		seq, pos []int32
		slots    []int32
	}
	steps := []step{
		{seq: []int32{0, 0, 0, 0, 0, 1, 2, 2, 2, 2, 2, 2}, pos: []int32{0, 1, 2, 3, 4, 0, 0, 1, 2, 3, 4, 5}, slots: []int32{3, 0, 4}},
		{seq: []int32{0, 1, 2}, pos: []int32{5, 1, 6}, slots: []int32{3, 0, 4}},
		// Interleaved rows; sequence 1 has none this step.
		{seq: []int32{2, 0, 2, 0, 2}, pos: []int32{7, 6, 8, 7, 9}, slots: []int32{3, 0, 4}},
		{seq: []int32{1, 1, 1, 0}, pos: []int32{2, 3, 4, 8}, slots: []int32{3, 0, 4}},
		// A new sequence in sequence 2's old slot, from position 0.
		{seq: []int32{0, 1, 1}, pos: []int32{9, 0, 1}, slots: []int32{3, 4}},
	}
	for k, st := range steps {
		n := len(st.seq)
		tables := make([][]int32, len(st.slots))
		for j := range tables {
			tables[j] = []int32{0, 1}
		}
		w.beginBatch(backend.Batch{Tokens: make([]int32, n), Pos: st.pos, Seq: st.seq, Tables: tables, BlockSize: 16, States: st.slots})
		xs, gs := w.random(n*ch, 2), w.random(n*2*vheads, 3)
		w.each(func(b backend.Backend, i int) {
			if err := b.Write(x[i], xs); err != nil {
				t.Fatal(err)
			}
			if err := b.Write(gates[i], gs); err != nil {
				t.Fatal(err)
			}
			b.Conv1D(conv[i], x[i], convW[i], rec[i], 1)
			b.DeltaNet(out[i], conv[i], gates[i], decay[i], rec[i], 1, dn)
		})
		w.compare(fmt.Sprintf("step %d conv1d", k), conv, n, 1e-5)
		w.compare(fmt.Sprintf("step %d delta rule", k), out, n, 1e-4)
	}
}

// TestDeltaRuleChunks: the delta_rule kernel's chunked path against the
// CPU's (whose chunks are of cpu.DeltaChunk rows, not the kernel's
// CHUNK_FLOATS/d, at most 16: the two agree only if both equal the
// recurrence) on prompts of the kernel's chunk−1, chunk, chunk+1 and two
// chunks and a tail, beside a short prompt of another sequence whose rows
// interleave with them, then a decoding step (the one-step path) and a
// second prompt from the state the first left; gates in between and
// jumping between 0 and 1 row by row.
func TestDeltaRuleChunks(t *testing.T) {
	for _, s := range []struct{ kheads, vheads, d int }{{1, 2, 128}, {2, 4, 16}, {1, 1, 5}, {2, 2, 70}} {
		chunk := min(max(1792/s.d, 1), 16)
		for _, n := range []int{chunk - 1, chunk, chunk + 1, 2*chunk + 3} {
			for _, jumps := range []bool{false, true} {
				t.Run(fmt.Sprintf("k%d_v%d_d%d/rows%d/jumps%v", s.kheads, s.vheads, s.d, n, jumps), func(t *testing.T) {
					testDeltaRuleChunks(t, s.kheads, s.vheads, s.d, n, jumps)
				})
			}
		}
	}
}

func testDeltaRuleChunks(t *testing.T, kheads, vheads, d, n int, jumps bool) {
	maxRows := n + 3
	w := newTwins(t, maxRows)
	ch := (2*kheads + vheads) * d
	dn := backend.DeltaNet{KHeads: kheads, VHeads: vheads, HeadDim: d, Eps: 1e-6}
	var rec [2]backend.Recurrent
	w.each(func(b backend.Backend, i int) {
		var err error
		if rec[i], err = b.NewRecurrent(backend.RecurrentShape{Layers: 1, Slots: 3, Conv: 4, Channels: ch, Heads: vheads, HeadDim: d}); err != nil {
			t.Fatal(err)
		}
	})
	decayV := append(w.random(vheads, 1), w.random(vheads, 0.4)...)
	for h := range vheads {
		decayV[vheads+h] = -0.1 - decayV[vheads+h]*decayV[vheads+h]
		if jumps {
			decayV[vheads+h] = -5
		}
	}
	decay := w.weight([]int{2 * vheads}, decayV)
	x := w.tensor(maxRows, ch, nil)
	gates := w.tensor(maxRows, 2*vheads, nil)
	out := w.tensor(maxRows, vheads*d, nil)
	// step lays out a step's rows: sequence 0's from position p0, with
	// sequence 1's (from position p1) at rows 1, 3, 5.
	step := func(k string, n0, p0, n1, p1 int) {
		var seq, pos []int32
		for len(seq) < n0+n1 {
			if i := len(seq); i%2 == 1 && i/2 < n1 {
				seq, pos = append(seq, 1), append(pos, int32(p1+i/2))
				continue
			}
			seq, pos = append(seq, 0), append(pos, int32(p0))
			p0++
		}
		rows := len(seq)
		w.beginBatch(backend.Batch{Tokens: make([]int32, rows), Pos: pos, Seq: seq, Tables: [][]int32{{0, 1, 2, 3, 4, 5}, {0, 1, 2, 3, 4, 5}}, BlockSize: 16, States: []int32{2, 0}})
		xs, gs := w.random(rows*ch, 2), w.random(rows*2*vheads, 3)
		if jumps {
			for i := range rows {
				for h := range vheads {
					gs[i*2*vheads+vheads+h] = [2]float32{-20, 20}[w.rng.IntN(2)]
				}
			}
		}
		w.each(func(b backend.Backend, i int) {
			if err := b.Write(x[i], xs); err != nil {
				t.Fatal(err)
			}
			if err := b.Write(gates[i], gs); err != nil {
				t.Fatal(err)
			}
			b.DeltaNet(out[i], x[i], gates[i], decay[i], rec[i], 0, dn)
		})
		w.compare(k, out, rows, 1e-4)
	}
	step("prompt", n, 0, min(3, n), 0)
	step("decode", 1, n, 1, 3)
	step("second prompt", n, n+1, 0, 0)
}

// BenchmarkDeltaRule: one prompt step of 64 rows through the delta_rule
// kernel at Qwen3.5-0.8B's linear layer (16 key and 16 value heads of
// 128), and a decode step of 8 sequences; gates of logits in ±1 (mild
// decays) and in ±20 (some rows forget nearly everything: decays of the
// chunked form far below the smallest normal float).
func BenchmarkDeltaRule(b *testing.B) {
	for _, rows := range []int{64, 8} {
		for _, gates := range []float32{1, 20} {
			b.Run(fmt.Sprintf("rows%d/gates%g", rows, gates), func(b *testing.B) {
				benchDeltaRule(b, rows, gates)
			})
		}
	}
}

func benchDeltaRule(b *testing.B, rows int, gateScale float32) {
	g, err := gpu.NewBackend(gputest.Open(b), rows)
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	const kheads, vheads, d = 16, 16, 128
	ch := (2*kheads + vheads) * d
	rec, err := g.NewRecurrent(backend.RecurrentShape{Layers: 1, Slots: 9, Conv: 4, Channels: ch, Heads: vheads, HeadDim: d})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	tensor := func(cols int, scale float32) backend.Tensor {
		t, err := g.NewTensor(rows, cols)
		if err != nil {
			b.Fatal(err)
		}
		v := make([]float32, rows*cols)
		for i := range v {
			v[i] = (2*rng.Float32() - 1) * scale
		}
		if err := g.Write(t, v); err != nil {
			b.Fatal(err)
		}
		return t
	}
	x, gates, out := tensor(ch, 1), tensor(2*vheads, gateScale), tensor(vheads*d, 1)
	dv := make([]float32, 2*vheads)
	for h := range vheads {
		dv[h], dv[vheads+h] = rng.Float32(), -0.1-rng.Float32()
	}
	decay := uploadF32Weight(b, g, []int{2 * vheads}, dv)
	batch := backend.Batch{Tokens: make([]int32, rows), Pos: make([]int32, rows), Seq: make([]int32, rows), BlockSize: 16}
	seqs := 1
	if rows <= 8 { // a decode step: a row per sequence
		seqs = rows
	}
	for i := range rows {
		if seqs > 1 {
			batch.Seq[i], batch.Pos[i] = int32(i), 5
		} else {
			batch.Pos[i] = int32(i)
		}
	}
	for s := range seqs {
		batch.Tables = append(batch.Tables, []int32{0, 1, 2, 3, 4})
		batch.States = append(batch.States, int32(s))
	}
	dn := backend.DeltaNet{KHeads: kheads, VHeads: vheads, HeadDim: d, Eps: 1e-6}
	run := func() {
		if err := g.Begin(batch); err != nil {
			b.Fatal(err)
		}
		g.DeltaNet(out, x, gates, decay, rec, 0, dn)
		if _, err := g.Read(out, 1); err != nil {
			b.Fatal(err)
		}
	}
	run() // the kernel compiles outside the timing
	b.ResetTimer()
	for range b.N {
		run()
	}
}

// uploadF32Weight uploads data of shape as an F32 weight.
func uploadF32Weight(b testing.TB, g *gpu.Backend, shape []int, data []float32) backend.Weight {
	raw := make([]byte, 4*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
	}
	w, err := g.Upload(models.NewTensor("w", shape, dtype.F32, func() ([]byte, error) { return raw, nil }))
	if err != nil {
		b.Fatal(err)
	}
	return w
}

// TestSigmoidGate: the glu kernel's sigmoid (Qwen3.5's attention gate,
// act 5) against the CPU's, gates far into the sigmoid's flat tails.
func TestSigmoidGate(t *testing.T) {
	for _, shape := range []struct{ rows, batch, cols int }{{1, 1, 1}, {4, 3, 172}, {16, 9, 1000}} {
		t.Run(fmt.Sprintf("%dx%d_batch%d", shape.rows, shape.cols, shape.batch), func(t *testing.T) {
			w := newTwins(t, shape.rows)
			n := shape.rows * shape.cols
			gate := w.tensor(shape.rows, shape.cols, w.random(n, 40))
			up := w.tensor(shape.rows, shape.cols, w.random(n, 3))
			w.begin(tokens(shape.batch, 10, w.rng), 0)
			w.each(func(b backend.Backend, i int) { b.GLU(gate[i], up[i], models.Sigmoid) })
			w.compare("sigmoid gate", gate, shape.batch, 1e-5)
		})
	}
}
