//go:build !linux

package runtime

import "time"

// threadCPU is 0 where the thread's CPU clock is not read: the benchmark
// then reports wall time only.
func threadCPU() time.Duration { return 0 }
