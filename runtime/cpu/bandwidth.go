package cpu

import (
	"runtime"
	"time"
)

// CopyBandwidth measures host memory bandwidth by copying a buffer of bytes
// iters times after one warm-up copy, spread over all cores as the matrix
// products are, counting bytes read and written, in GB/s: the bound a
// bandwidth-limited decode step on the CPU compares with.
func CopyBandwidth(bytes, iters int) float64 {
	src := make([]byte, bytes)
	dst := make([]byte, bytes)
	for i := range src {
		src[i] = byte(i)
	}
	workers := runtime.GOMAXPROCS(0)
	run := func() {
		parallel(bytes, workers, func(lo, hi int) { copy(dst[lo:hi], src[lo:hi]) })
	}
	run()
	start := time.Now()
	for range iters {
		run()
	}
	return float64(2*bytes*iters) / time.Since(start).Seconds() / 1e9
}
