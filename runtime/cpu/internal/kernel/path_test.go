package kernel

import (
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/cpu"
)

// TestPath: where the caller says which kernels must run (TESSERA_KERNELS,
// which `make test-arm64` sets for its emulated arm64 runs), Path reports
// them, so that the twin-vs-assembly tests there cannot pass on the twins
// alone.
func TestPath(t *testing.T) {
	if runtime.GOARCH == "arm64" {
		t.Logf("arm64: ASIMD %v, ASIMDDP %v", cpu.ARM64.HasASIMD, cpu.ARM64.HasASIMDDP)
	}
	t.Logf("kernels: %s", Path())
	if want := os.Getenv("TESSERA_KERNELS"); want != "" && Path() != want {
		t.Fatalf("kernels %q, want %q (TESSERA_KERNELS)", Path(), want)
	}
}
