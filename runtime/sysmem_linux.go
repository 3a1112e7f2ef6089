package runtime

import (
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// physicalMemory is the memory this process may have, in bytes (0 where
// unknown): the machine's, or a container's where its cgroup (v2's
// memory.max, v1's memory.limit_in_bytes, as a container sees them at
// /sys/fs/cgroup) limits it to less.
func physicalMemory() int64 {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return 0
	}
	mem := int64(si.Totalram) * int64(si.Unit)
	for _, f := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if b, err := os.ReadFile(f); err == nil {
			mem = cgroupLimit(string(b), mem)
		}
	}
	return mem
}

// cgroupLimit is mem, or the limit a cgroup memory file's contents s
// sets where it is a number below it ("max" and unparsable contents set
// none).
func cgroupLimit(s string, mem int64) int64 {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n <= 0 || n >= mem {
		return mem
	}
	return n
}
