//go:build unix

package lora

import "syscall"

// openNonblock makes OpenIn's open of a FIFO return at once rather than
// wait for a writer; on a regular file it changes nothing.
const openNonblock = syscall.O_NONBLOCK
