package gpu_test

import (
	"encoding/binary"
	"math"
	"math/rand/v2"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
)

// f32Tensor is an f32 tensor of shape whose values value gives in order:
// the benchmarks' random weights.
func f32Tensor(name string, value func() float32, shape ...int) *models.Tensor {
	n := 1
	for _, d := range shape {
		n *= d
	}
	raw := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(value()))
	}
	return models.NewTensor(name, shape, dtype.F32, func() ([]byte, error) { return raw, nil })
}

// uniform draws from [-1, 1).
func uniform(rng *rand.Rand) func() float32 {
	return func() float32 { return rng.Float32()*2 - 1 }
}

// normal draws from a normal distribution of deviation std.
func normal(rng *rand.Rand, std float32) func() float32 {
	return func() float32 { return float32(rng.NormFloat64()) * std }
}
