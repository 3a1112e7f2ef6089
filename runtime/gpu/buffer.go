package gpu

import "fmt"

// The checks every Device implementation makes the same way, whatever
// platform API sits behind it.

// align4 rounds n up to a multiple of 4: buffer sizes and copies are in
// whole 32-bit words.
func align4(n int64) int64 { return (n + 3) &^ 3 }

// checkNewBuffer validates a NewBuffer request against a device's limits
// and returns the size to allocate.
func checkNewBuffer(label string, size int64, usage Usage, info Info) (int64, error) {
	if size <= 0 {
		return 0, fmt.Errorf("gpu: buffer %q: size %d must be positive", label, size)
	}
	if usage == 0 || usage&^(Storage|Uniform|CopySrc|CopyDst) != 0 {
		return 0, fmt.Errorf("gpu: buffer %q: invalid usage %v", label, usage)
	}
	alloc := align4(size)
	if alloc > info.MaxBufferSize {
		return 0, fmt.Errorf("gpu: buffer %q: %s exceeds the device's buffer size limit %s",
			label, FormatBytes(size), FormatBytes(info.MaxBufferSize))
	}
	return alloc, nil
}
