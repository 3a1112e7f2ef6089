//go:build !amd64 || purego

package kernel

import "testing"

// withTileVariants runs f on the twin, the only path of this build.
func withTileVariants(t *testing.T, f func(t *testing.T)) { t.Run("go", f) }

// withKVariants runs f on the one form of this build.
func withKVariants(t *testing.T, f func(t *testing.T)) { t.Run("go", f) }
