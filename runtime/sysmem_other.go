//go:build !linux

package runtime

// physicalMemory is the machine's memory in bytes: unknown (0) here, so
// the default KV budget is not checked against it.
func physicalMemory() int64 { return 0 }
