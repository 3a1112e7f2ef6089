package guestmem

import (
	"errors"
	"testing"
)

func TestSpans(t *testing.T) {
	m := make(Fake, 64)
	tests := []struct {
		name       string
		ptr, n     uint32
		limit      uint32
		err        error
		writeFails bool
	}{
		{"inside", 8, 16, 100, nil, false},
		{"empty at the end", 64, 0, 100, nil, false},
		{"up to the end", 48, 16, 100, nil, false},
		{"one past the end", 49, 16, 100, ErrRange, true},
		{"past the end", 65, 0, 100, ErrRange, true},
		{"wraps around 32 bits", 0xfffffff0, 0x20, 1 << 31, ErrRange, true},
		{"huge length", 0, 0xffffffff, 0xffffffff, ErrRange, true},
		{"over the limit", 0, 32, 16, ErrTooLong, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Bytes(m, tt.ptr, tt.n, tt.limit)
			if !errors.Is(err, tt.err) {
				t.Errorf("Bytes: %v, want %v", err, tt.err)
			}
			if tt.err != ErrTooLong {
				if err := Check(m, tt.ptr, tt.n); !errors.Is(err, tt.err) {
					t.Errorf("Check: %v, want %v", err, tt.err)
				}
			}
			if tt.n < 1<<20 {
				err := Put(m, tt.ptr, make([]byte, tt.n))
				if (err != nil) != tt.writeFails {
					t.Errorf("Put: %v", err)
				}
			}
		})
	}
}

func TestInt32s(t *testing.T) {
	m := make(Fake, 16)
	if err := PutInt32s(m, 4, []int32{-1, 7, 1 << 30}); err != nil {
		t.Fatal(err)
	}
	got, err := Int32s(m, 4, 3, 10)
	if err != nil || got[0] != -1 || got[1] != 7 || got[2] != 1<<30 {
		t.Errorf("got %v, %v", got, err)
	}
	for _, tt := range []struct{ ptr, n uint32 }{{8, 3}, {0, 0x40000001}, {0xfffffffc, 2}} {
		if _, err := Int32s(m, tt.ptr, tt.n, 1<<31); !errors.Is(err, ErrRange) {
			t.Errorf("Int32s(%#x, %d): %v, want ErrRange", tt.ptr, tt.n, err)
		}
	}
	if err := CheckN(m, 0, 1<<30, 4); !errors.Is(err, ErrRange) {
		t.Errorf("CheckN with a product over 32 bits: %v", err)
	}
	if err := CheckN(nil, 0, 0, 4); !errors.Is(err, ErrRange) {
		t.Errorf("CheckN without memory: %v", err)
	}
}
