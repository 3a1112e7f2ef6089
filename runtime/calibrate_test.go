package runtime_test

import (
	"context"
	"slices"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/runtime"
)

// TestCalibrateInt4Deterministic: calibration gives the same codes
// whatever the threads and however the statistics are split into passes
// (two here, for three layers' worth of memory: the second replays the
// sampled text through Score instead of capturing while it is sampled),
// so that every load, on either backend, gets the same int4 weights. It
// also checks what is calibrated: every layer matrix and the head; the
// table only where it is the head (tied, in the llama2.c file), and not
// with --head-f32.
func TestCalibrateInt4Deterministic(t *testing.T) {
	m, err := models.Open(sharedFile(t, "stories260K.gguf"), models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.Config.Context = 512
	ctx := context.Background()
	a, ra, err := runtime.CalibrateInt4(ctx, m, runtime.Calibration{Tokens: 1024, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	b, rb, err := runtime.CalibrateInt4(ctx, m, runtime.Calibration{Tokens: 1024, Threads: 2, MaxHessianBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("one pass: %+v; two passes: %+v", ra, rb)
	if len(a) != 5*7+1 || a[models.Output] == nil {
		t.Errorf("calibrated %d matrices (the head: %v), want 36 with the head", len(a), a[models.Output] != nil)
	}
	if ra.Passes != 1 || rb.Passes != 2 || ra.Tokens < 1024 || ra.Tokens != rb.Tokens {
		t.Errorf("reports %+v and %+v", ra, rb)
	}
	for name, qa := range a {
		qb := b[name]
		if qb == nil || !slices.Equal(qa.Codes, qb.Codes) || !slices.Equal(qa.Scales, qb.Scales) {
			t.Errorf("%s: codes differ between the two calibrations", name)
		}
	}
	tied, err := models.Open(sharedFile(t, "stories260K.bin"), models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tied.Close()
	for _, headFloat := range []bool{false, true} {
		q, _, err := runtime.CalibrateInt4(ctx, tied, runtime.Calibration{Tokens: 16, HeadFloat: headFloat})
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{false: 36, true: 35}[headFloat]; len(q) != want || (q[models.TokenEmbedding] == nil) != headFloat {
			t.Errorf("tied table, f32 head %v: %d matrices (the table: %v)", headFloat, len(q), q[models.TokenEmbedding] != nil)
		}
	}
}
