package gpu

// SetQuantKernel forces the kernel of compressed weights ("gemv",
// "gemv-gpu", "gemm" or "" for the plan) until restore is called.
func SetQuantKernel(kernel string) (restore func()) {
	old := quantKernel
	quantKernel = kernel
	return func() { quantKernel = old }
}
