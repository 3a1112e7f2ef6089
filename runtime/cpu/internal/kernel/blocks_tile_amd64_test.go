//go:build !purego

package kernel

import "testing"

// withTileVariants runs f once per tile kernel this CPU has: with VNNI
// where it has it, then without.
func withTileVariants(t *testing.T, f func(t *testing.T)) {
	if hasVNNI {
		t.Run("vnni", f)
		hasVNNI = false
		defer func() { hasVNNI = true }()
	}
	t.Run("avx512", f)
}

// withKVariants runs f once per form of the K quants' AVX-512 kernels
// this CPU has: with VNNI where it has it, then without.
func withKVariants(t *testing.T, f func(t *testing.T)) {
	if hasKVNNI {
		t.Run("vnni", f)
		hasKVNNI = false
		defer func() { hasKVNNI = true }()
	}
	t.Run("novnni", f)
}
