//go:build !purego

package kernel

import "testing"

// withTileVariants runs f once per tile kernel this CPU has: with VNNI
// where it has it (the K quants' too), then without.
func withTileVariants(t *testing.T, f func(t *testing.T)) {
	if hasVNNI || hasKVNNI {
		t.Run("vnni", f)
		v, kv := hasVNNI, hasKVNNI
		hasVNNI, hasKVNNI = false, false
		defer func() { hasVNNI, hasKVNNI = v, kv }()
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
