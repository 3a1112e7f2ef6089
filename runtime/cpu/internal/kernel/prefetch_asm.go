//go:build (amd64 || arm64) && !purego

package kernel

// hasPrefetch: PREFETCHT0 is in every amd64 CPU, PRFM in every arm64 one.
const hasPrefetch = true

// prefetch touches the line of x and those of every 16th value up to n.
//
//go:noescape
func prefetch(x *float32, n int)
