//go:build !unix

package cputime

import "time"

// Process is unknown here: benchmarks report wall time only.
func Process() time.Duration { return 0 }
