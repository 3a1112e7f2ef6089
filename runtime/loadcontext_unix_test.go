//go:build unix

package runtime_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/runtime"
)

// TestLoadContextCancels: LoadContext returns its context's error at
// once, before a load starts and in the middle of one: here a load
// blocked opening a FIFO that nothing writes to, which Load alone would
// wait on for ever. The abandoned load ends in the background once a
// writer closes the FIFO.
func TestLoadContextCancels(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if eng, err := runtime.LoadContext(ctx, sharedFile(t, "stories260K.gguf"), runtime.Options{Device: "cpu"}); !errors.Is(err, context.Canceled) {
		if eng != nil {
			eng.Close()
		}
		t.Errorf("a cancelled context: %v", err)
	}

	fifo := filepath.Join(t.TempDir(), "model.gguf")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := runtime.LoadContext(ctx, fifo, runtime.Options{Device: "cpu"})
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond) // the load waits in the FIFO's open
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled in the middle of a load: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("LoadContext still waiting 10 s after its context was cancelled")
	}
	// A writer that opens and closes the FIFO gives the abandoned load an
	// end of file, and it ends.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
			break
		}
	}
}
