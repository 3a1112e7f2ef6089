package runtime

import "testing"

// TestCgroupLimit: a cgroup's memory limit lowers the machine's where it
// is a number below it; v2's "max", v1's unlimited value, garbage and an
// empty file leave it.
func TestCgroupLimit(t *testing.T) {
	const mem = 16 << 30
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"max\n", mem},
		{"9223372036854771712\n", mem},
		{"2147483648\n", 2 << 30},
		{"17179869184\n", mem},
		{"", mem},
		{"0\n", mem},
		{"lots\n", mem},
	} {
		if got := cgroupLimit(tc.in, mem); got != tc.want {
			t.Errorf("%q: %d, want %d", tc.in, got, tc.want)
		}
	}
	if m := physicalMemory(); m <= 0 {
		t.Errorf("this machine's memory: %d", m)
	}
}
