package abi

import "testing"

func TestVersion(t *testing.T) {
	for _, tt := range []struct {
		major, minor uint16
		packed       uint32
	}{{1, 0, 0x10000}, {1, 7, 0x10007}, {2, 0xffff, 0x2ffff}, {0, 0, 0}} {
		if got := PackVersion(tt.major, tt.minor); got != tt.packed {
			t.Errorf("PackVersion(%d, %d) = %#x, want %#x", tt.major, tt.minor, got, tt.packed)
		}
		if major, minor := SplitVersion(tt.packed); major != tt.major || minor != tt.minor {
			t.Errorf("SplitVersion(%#x) = %d.%d", tt.packed, major, minor)
		}
	}
	if Version != PackVersion(Major, Minor) {
		t.Errorf("Version %#x is not Major.Minor", Version)
	}
}

func TestCodeString(t *testing.T) {
	for c := OK; c <= ErrInternal; c++ {
		if s := c.String(); s == "" || s == "unknown code" {
			t.Errorf("code %d has no name", c)
		}
	}
	if Code(99).String() != "unknown code" {
		t.Error("code 99 has a name")
	}
}
