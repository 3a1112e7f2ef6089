package runtime

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/gptq"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/capture"
)

// Calibrated int4: the weight matrices are quantized by GPTQ
// (models/gptq), which needs the statistics of each matrix's inputs on
// representative text. The text is the model's own: sequences sampled from
// it at temperature 1, starting from BOS, with a fixed seed. That needs no
// data set, cannot leak an evaluation text into the weights, and follows
// the distribution the model was trained on as well as the model itself
// knows it.
//
// The statistics come from the f32 model on the Go reference backend,
// wrapped by runtime/capture, so the forward pass is the engine's own. The
// result is one dtype.Int4 per matrix, computed on the host: both backends
// upload the same codes (models.Tensor.WithInt4).

// Calibration chooses how CalibrateInt4 gathers its statistics. The zero
// value is the default everywhere.
type Calibration struct {
	// Tokens is how many tokens of generated text to gather statistics
	// over, at least (DefaultCalibrationTokens when 0).
	Tokens int
	// SeqLen is the length of a sequence, BOS included (0: 128, or the
	// context if shorter). GPTQ needs variety more than length, and
	// attention makes long sequences dear: on stories260K, 33 sequences of
	// 128 tokens calibrate as well as 8 of 512, at half the cost.
	SeqLen int
	// Seed seeds the sampling: the same seed and model give the same
	// text, statistics and codes.
	Seed uint64
	// Threads caps the goroutines of the forward pass and of GPTQ (0: one
	// per core; at most MaxThreads); the codes do not depend on it.
	Threads int
	// HeadFloat leaves the output head (and a tied embedding table) out:
	// it stays in f32.
	HeadFloat bool
	// MaxHessianBytes bounds the memory of the statistics held at once
	// (8·in² bytes per matrix; 0: 1 GiB). Matrices beyond it are gathered
	// in further passes over the same text.
	MaxHessianBytes int64
	// Damp is GPTQ's dampening (0: gptq.DefaultDamp).
	Damp float64
	// Only, if set, narrows the matrices quantized to those it accepts
	// (the quantize command's Q4_1 cannot hold rows that are not whole
	// blocks of 32).
	Only func(t *models.Tensor) bool
}

// DefaultCalibrationTokens is enough text for Hessians a few hundred
// inputs wide to be well conditioned (on stories260K, 2048 tokens cost a
// few tenths of a percent of perplexity more, depending on the seed);
// GPTQ's authors use 128 sequences of 2048 tokens for billion-parameter
// models, worth passing as Tokens to the quantize command for those.
const DefaultCalibrationTokens = 4096

// defaultSeqLen is Calibration.SeqLen's default.
const defaultSeqLen = 128

// calibrationParallel is how many sequences are sampled at once, one row
// each in a batch: the sampling costs SeqLen steps per round, not one per
// token. It is fixed rather than the scheduler's MaxSeqs so that the codes
// do not move when the scheduler's budgets do.
const calibrationParallel = 16

// calibrationBudgets are the calibration engine's, fixed for the same
// reason: Score reads the text in chunks of MaxSeqs rows, and the order in
// which the captured statistics are summed follows the chunks. They are
// the scheduler's constants of before the budgets became options, so that
// the codes of every calibrated model stay what they were.
var calibrationBudgets = Budgets{MaxBatchTokens: 64, MaxSeqs: 32}

// CalibrationReport says what CalibrateInt4 did.
type CalibrationReport struct {
	Tokens, Sequences int // text run through the model (input rows), in how many sequences
	Matrices, Passes  int // matrices quantized; passes over the text
	Sample, Total     time.Duration
}

// CalibrateInt4 quantizes m's weight matrices to int4 by GPTQ over text
// the model generates (see Calibration), and returns them by tensor name:
// the matrices of every layer and the output head (or the tied embedding
// table, whose statistics are the head's). Matrices already stored as
// Q4_0, Q4_1 or Q4_K are left out: they convert to int4 without loss. An
// untied embedding table is left out too: a lookup has no inputs to
// weigh, and the per-group search is what it needs.
//
// It costs a forward pass of the f32 model over the text, the statistics
// gathered as it is sampled (one more pass for each further
// MaxHessianBytes of statistics), and O(in³ + out·in²) per matrix, so
// loading uses it only for small models (MaxCalibratedAtLoad); the
// quantize command offers it for any size.
func CalibrateInt4(ctx context.Context, m *models.Model, c Calibration) (map[string]*dtype.Int4, CalibrationReport, error) {
	var rep CalibrationReport
	if err := checkThreads(c.Threads); err != nil {
		return nil, rep, err
	}
	names := calibratedMatrices(m, c.HeadFloat)
	if c.Only != nil {
		names = slices.DeleteFunc(names, func(mc calibrated) bool { return !c.Only(m.Tensors[mc.name]) })
	}
	if len(names) == 0 {
		return nil, rep, nil
	}
	if c.Tokens <= 0 {
		c.Tokens = DefaultCalibrationTokens
	}
	if c.SeqLen <= 0 {
		c.SeqLen = defaultSeqLen
	}
	c.SeqLen = min(c.SeqLen, m.Config.Context)
	if c.SeqLen < 2 {
		return nil, rep, fmt.Errorf("calibrate: sequences of %d tokens", c.SeqLen)
	}
	if c.MaxHessianBytes <= 0 {
		c.MaxHessianBytes = 1 << 30
	}
	// The same tensors in an engine of its own: f32 weights, a context of
	// one sequence, and no Close of m's file when it closes.
	cm := &models.Model{Config: m.Config, Format: m.Format, Path: m.Path, Tensors: m.Tensors, Tokenizer: m.Tokenizer}
	cm.Config.Context = c.SeqLen
	be := capture.New(newCPU(c.Threads))
	e, err := New(cm, be, KVOptions{Tokens: calibrationParallel * c.SeqLen}, WeightStorage{}, calibrationBudgets)
	if err != nil {
		return nil, rep, fmt.Errorf("calibrate: %w", err)
	}
	defer e.Close()

	start := time.Now()
	out := make(map[string]*dtype.Int4, len(names))
	var seqs [][]int32
	for p, pass := range hessianPasses(m, names, c.MaxHessianBytes) {
		rep.Passes++
		hs := map[string]*gptq.Hessian{} // by input
		for _, mc := range pass {
			if hs[mc.input] == nil {
				hs[mc.input] = gptq.NewHessian(m.Tensors[mc.name].Shape[1])
			}
		}
		be.Capture(hs)
		if p == 0 { // the first pass captures while the text is sampled
			if seqs, err = e.sampleText(ctx, c); err != nil {
				return nil, rep, fmt.Errorf("calibrate: sample text: %w", err)
			}
			rep.Sample = time.Since(start)
			rep.Sequences = len(seqs)
			for _, s := range seqs {
				rep.Tokens += len(s) - 1
			}
		} else { // later ones replay it
			for _, s := range seqs {
				if err := e.Score(ctx, s, func(int, []float32) error { return nil }); err != nil {
					return nil, rep, fmt.Errorf("calibrate: score: %w", err)
				}
			}
		}
		be.Capture(nil)
		if err := be.Err(); err != nil {
			return nil, rep, fmt.Errorf("calibrate: %w", err)
		}
		for _, mc := range pass {
			if err := ctx.Err(); err != nil {
				return nil, rep, err
			}
			name, t := mc.name, m.Tensors[mc.name]
			w, err := t.Float32()
			if err != nil {
				return nil, rep, fmt.Errorf("calibrate: %w", err)
			}
			q, err := gptq.Quantize(w, t.Shape[0], t.Shape[1], hs[mc.input], gptq.Options{Damp: c.Damp, Workers: c.Threads})
			if err != nil {
				return nil, rep, fmt.Errorf("calibrate %s: %w", name, err)
			}
			out[name] = q
			rep.Matrices++
		}
	}
	rep.Total = time.Since(start)
	return out, rep, nil
}

// calibrated is a matrix CalibrateInt4 quantizes and the matrix whose
// product it captures the inputs from: matrices that read the same
// activation (q, k and v; gate and up) share one Hessian, gathered once.
type calibrated struct{ name, input string }

// calibratedMatrices lists, in the order the forward pass reads them, the
// matrices CalibrateInt4 quantizes (see there).
func calibratedMatrices(m *models.Model, headFloat bool) []calibrated {
	var all []calibrated
	for l := range m.Config.Layers {
		q, gate := models.LayerTensor(l, models.AttnQ), models.LayerTensor(l, models.FFNGate)
		for _, kind := range []string{models.AttnQ, models.AttnK, models.AttnV} {
			all = append(all, calibrated{models.LayerTensor(l, kind), q})
		}
		o := models.LayerTensor(l, models.AttnOutput)
		all = append(all, calibrated{o, o})
		for _, kind := range []string{models.FFNGate, models.FFNUp} {
			all = append(all, calibrated{models.LayerTensor(l, kind), gate})
		}
		down := models.LayerTensor(l, models.FFNDown)
		all = append(all, calibrated{down, down})
	}
	if !headFloat {
		head := models.Output
		if m.Config.TiedEmbeddings {
			head = models.TokenEmbedding
		}
		all = append(all, calibrated{head, head})
	}
	var kept []calibrated
	for _, c := range all {
		if t, ok := m.Tensors[c.name]; ok && len(t.Shape) == 2 && !dtype.Int4Exact(t.Type) {
			kept = append(kept, c)
		}
	}
	return kept
}

// hessianPasses splits the matrices into runs whose distinct Hessians fit
// in max bytes together (a matrix too wide for it alone gets a pass of its
// own); matrices sharing an input stay in one pass.
func hessianPasses(m *models.Model, cs []calibrated, max int64) [][]calibrated {
	var passes [][]calibrated
	var cur []calibrated
	var bytes int64
	for i, c := range cs {
		if i > 0 && cs[i-1].input == c.input {
			cur = append(cur, c)
			continue
		}
		in := int64(m.Tensors[c.name].Shape[1])
		b := 8 * in * in
		if len(cur) > 0 && bytes+b > max {
			passes, cur, bytes = append(passes, cur), nil, 0
		}
		cur, bytes = append(cur, c), bytes+b
	}
	return append(passes, cur)
}

// MaxCalibratedAtLoad is the most matrix parameters (those CalibrateInt4
// quantizes) for which loading with int4 storage calibrates instead of
// rounding each group on its own. The cost is mostly a forward pass of the
// f32 Go reference over DefaultCalibrationTokens tokens, so it grows with
// the parameters: stories260K (0.26M) takes about a second on two cores,
// and this bound about four, as much as a load should wait. Larger models
// calibrate once, offline: `tessera quantize --type q4_1` writes the codes
// into a GGUF file, which loads as int4 bit for bit.
const MaxCalibratedAtLoad = 1 << 20

// matrixParams counts the parameters CalibrateInt4 would quantize.
func matrixParams(m *models.Model, headFloat bool) int {
	n := 0
	for _, c := range calibratedMatrices(m, headFloat) {
		n += m.Tensors[c.name].Elements()
	}
	return n
}

// calibrateForLoad replaces m's matrices by their calibrated int4 forms
// when ws stores them as int4 and the model is small enough (see
// MaxCalibratedAtLoad), unless opts.NoCalibration. A tokenizer without
// BOS gives the sampling nowhere to start: such a model keeps the
// per-group search rather than failing to load.
func calibrateForLoad(m *models.Model, ws WeightStorage, opts Options) error {
	if ws.Floats != backend.Int4 || opts.NoCalibration || m.Tokenizer.BOS() < 0 {
		return nil
	}
	if n := matrixParams(m, ws.HeadFloat); n == 0 || n > MaxCalibratedAtLoad {
		return nil
	}
	// Only the matrices kept in int4: the mixed policy's int8 ones (the
	// head among them) need no calibration.
	int4 := func(t *models.Tensor) bool { return ws.For(t, m.Config) == backend.Int4 }
	qs, _, err := CalibrateInt4(context.Background(), m, Calibration{Threads: opts.Threads, HeadFloat: ws.HeadFloat, Only: int4})
	if err != nil {
		return err
	}
	for name, q := range qs {
		m.Tensors[name] = m.Tensors[name].WithInt4(q)
	}
	return nil
}
