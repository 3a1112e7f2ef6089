package gpu

import "github.com/tessera-llm/tessera/runtime/backend"

// SetQuantKernel forces the kernel of compressed weights ("gemv", "gemm"
// or "" for the plan) until restore is called.
func SetQuantKernel(kernel string) (restore func()) {
	old := quantKernel
	quantKernel = kernel
	return func() { quantKernel = old }
}

// MatMulQ runs the compressed-weight matmul directly.
func MatMulQ(b *Backend, dst, x backend.Tensor, w backend.Weight) {
	b.matmulQ(dst.(*Tensor), x.(*Tensor), w.(*Weight))
}
