package models

import "testing"

// TestLlama3RopeFactors checks the shape of Llama 3.1's scaling: short
// wavelengths kept, long ones stretched by the factor, monotone between.
func TestLlama3RopeFactors(t *testing.T) {
	f := Llama3RopeFactors(128, 500000, 8, 1, 4, 8192)
	if len(f) != 64 || f[0] != 1 || f[63] != 8 {
		t.Fatalf("factors %v", f)
	}
	for i := 1; i < len(f); i++ {
		if f[i] < f[i-1] {
			t.Fatalf("factors not monotone at %d: %v", i, f)
		}
	}
}
