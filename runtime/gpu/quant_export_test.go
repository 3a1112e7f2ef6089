package gpu

// SetQuantKernel forces the kernel of compressed weights ("gemv",
// "gemv-gpu", "gemm" or "" for the plan) until restore is called.
func SetQuantKernel(kernel string) (restore func()) {
	old := quantKernel
	quantKernel = kernel
	return func() { quantKernel = old }
}

// SetNormPrologue forces whether projections take their RMSNorm as the
// GEMV's prologue ("on", "off", or "" for the adapter's choice) until
// restore is called.
func SetNormPrologue(mode string) (restore func()) {
	old := normPrologueForced
	normPrologueForced = mode
	return func() { normPrologueForced = old }
}
