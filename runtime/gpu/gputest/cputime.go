package gputest

import (
	"time"

	"github.com/tessera-llm/tessera/runtime/internal/cputime"
)

// CPUTime is the CPU time this process has used, its goroutines' and a
// software GPU's driver threads' (see cputime.Process): benchmarks on
// shared cores report it beside wall time.
func CPUTime() time.Duration { return cputime.Process() }
