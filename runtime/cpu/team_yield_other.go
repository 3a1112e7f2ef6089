//go:build !linux

package cpu

// osYield does nothing where the OS has no cheap yield at hand: the
// waiting workers spin on runtime.Gosched alone.
func osYield() {}
