//go:build unix

package runtime_test

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time this process has used (its goroutines and the
// driver threads of a software GPU), for benchmarks on machines whose
// cores are shared: tokens per CPU-second do not drop when another
// process takes the cores, as tokens per wall-second do.
func cpuTime() time.Duration {
	var u syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &u) != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
