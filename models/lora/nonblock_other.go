//go:build !unix

package lora

// openNonblock is 0 where there is no O_NONBLOCK (Windows, js, wasip1):
// there OpenIn's fstat check still refuses what is not a regular file.
const openNonblock = 0
