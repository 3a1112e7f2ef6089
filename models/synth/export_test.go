package synth

// SetDrawChunk makes Write draw at most n values at a time (at least a
// row) until the returned function restores the default.
func SetDrawChunk(n int) (restore func()) {
	old := drawChunk
	drawChunk = n
	return func() { drawChunk = old }
}
