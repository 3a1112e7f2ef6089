//go:build unix

// Package cputime reads the CPU time of this process, for benchmarks that
// report CPU time beside wall time.
package cputime

import (
	"syscall"
	"time"
)

// Process is the CPU time this process has used (its goroutines and the
// driver threads of a software GPU such as lavapipe), for benchmarks on
// machines whose cores are shared: CPU time per op barely moves when
// another process takes the cores, as wall time per op does.
func Process() time.Duration {
	var u syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &u) != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
