package eval_test

import (
	goruntime "runtime"
	"testing"

	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/cpu"
	"github.com/tessera-llm/tessera/runtime/eval"
)

// TestEstimateMemory: the estimate of the weights is what the engine
// uploads, for each storage.
func TestEstimateMemory(t *testing.T) {
	eng, err := runtime.Load(sharedFile(t, "stories260K.gguf"), runtime.Options{Device: "cpu", Quant: "f32"})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	e, err := eval.EstimateMemory(eng.Model(), "f32", "cpu", 0)
	if err != nil {
		t.Fatal(err)
	}
	if e.Weights != eng.WeightBytes() || e.Quant != "f32" || e.KV <= 0 || e.Total <= e.Weights || e.Largest <= 0 {
		t.Errorf("estimate %+v, the engine holds %d bytes of weights", e, eng.WeightBytes())
	}
	c := eng.Model().Config
	if keys := min(4*int64(e.Context*c.KVHeads*c.HeadDim), cpu.SpanKeysBytes); e.Scratch < keys {
		t.Errorf("cpu scratch %d bytes: under the %d of a layer's transposed keys that prompt attention keeps", e.Scratch, keys)
	}
	// A worker more keeps the wide kernel's lanes of a step's rows more.
	procs := goruntime.GOMAXPROCS(1)
	one, err := eval.EstimateMemory(eng.Model(), "f32", "cpu", 0)
	goruntime.GOMAXPROCS(2)
	two, _ := eval.EstimateMemory(eng.Model(), "f32", "cpu", 0)
	goruntime.GOMAXPROCS(procs)
	rows := int64(runtime.DefaultBudgets(runtime.Budgets{}, "cpu", c).MaxBatchTokens)
	if want := cpu.WideBytes(int(rows)); err != nil || two.Scratch-one.Scratch != want || want < rows*1024 {
		t.Errorf("cpu scratch %d bytes with one worker, %d with two (%v): want %d more, a step's %d rows of the wide kernel's lanes (1 KiB a row at least)", one.Scratch, two.Scratch, err, want, rows)
	}
	i4, err := eval.EstimateMemory(eng.Model(), "int4", "webgpu", 64)
	if err != nil || i4.Weights >= e.Weights/4 || i4.Context != 64 {
		t.Errorf("int4 estimate %+v (%v): want under a quarter of f32's %d", i4, err, e.Weights)
	}
	if d, _ := eval.EstimateMemory(eng.Model(), "", "webgpu", 0); d.Quant != "f32" {
		t.Errorf("a 1 MB model defaults to %s on WebGPU, want f32", d.Quant)
	}
}
