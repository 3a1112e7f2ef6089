// Package guestmem reads and writes a plugin's linear memory on behalf of
// the host functions, checking every pointer and length first.
//
// A plugin hands the host raw i32 offsets; any of them may be garbage, and
// the sums offset+length may wrap around 32 bits. Every access therefore
// goes through these helpers, which compute bounds in 64 bits and fail
// instead of panicking. Reads copy: the host never keeps a view into guest
// memory past the call, because the guest may grow (and so move) it.
package guestmem

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Memory is the part of a linear memory the host functions use. wazero's
// api.Memory implements it, and so does Fake, for tests.
type Memory interface {
	// Size is the memory's length in bytes.
	Size() uint32
	// Read returns a view of n bytes at offset, or false if any is outside.
	Read(offset, n uint32) ([]byte, bool)
	// Write copies b to offset, or returns false if any byte is outside.
	Write(offset uint32, b []byte) bool
}

// ErrRange is returned (wrapped) for a span outside the memory.
var ErrRange = errors.New("outside the plugin's memory")

// ErrTooLong is returned (wrapped) for a length over the caller's limit.
var ErrTooLong = errors.New("too long")

// Check reports whether n bytes at ptr lie inside m. It is used before a
// host function does anything with side effects, so that a bad output
// pointer is caught before, not after, the work it would report.
func Check(m Memory, ptr, n uint32) error {
	if m == nil || uint64(ptr)+uint64(n) > uint64(m.Size()) {
		return fmt.Errorf("%w: %d bytes at %#x (memory is %d bytes)", ErrRange, n, ptr, size(m))
	}
	return nil
}

// CheckN is Check for n elements of elem bytes each, whose product may not
// fit in 32 bits.
func CheckN(m Memory, ptr, n, elem uint32) error {
	bytes := uint64(n) * uint64(elem)
	if m == nil || uint64(ptr)+bytes > uint64(m.Size()) {
		return fmt.Errorf("%w: %d×%d bytes at %#x (memory is %d bytes)", ErrRange, n, elem, ptr, size(m))
	}
	return nil
}

func size(m Memory) uint32 {
	if m == nil {
		return 0
	}
	return m.Size()
}

// Bytes copies n bytes at ptr. It fails if n exceeds limit or the span is
// outside m.
func Bytes(m Memory, ptr, n, limit uint32) ([]byte, error) {
	if n > limit {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", ErrTooLong, n, limit)
	}
	if err := Check(m, ptr, n); err != nil {
		return nil, err
	}
	v, ok := m.Read(ptr, n)
	if !ok {
		return nil, fmt.Errorf("%w: %d bytes at %#x", ErrRange, n, ptr)
	}
	return append([]byte(nil), v...), nil
}

// String is Bytes as a string.
func String(m Memory, ptr, n, limit uint32) (string, error) {
	b, err := Bytes(m, ptr, n, limit)
	return string(b), err
}

// Int32s reads n little-endian 32-bit integers at ptr; n may be at most
// limit.
func Int32s(m Memory, ptr, n, limit uint32) ([]int32, error) {
	if n > limit {
		return nil, fmt.Errorf("%w: %d ids, the limit is %d", ErrTooLong, n, limit)
	}
	if err := CheckN(m, ptr, n, 4); err != nil {
		return nil, err
	}
	v, ok := m.Read(ptr, n*4) // CheckN proved ptr+4n fits in memory, so 4n fits in 32 bits
	if !ok || uint64(len(v)) != uint64(n)*4 {
		return nil, fmt.Errorf("%w: %d ids at %#x", ErrRange, n, ptr)
	}
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(binary.LittleEndian.Uint32(v[4*i:]))
	}
	return ids, nil
}

// Put writes b at ptr.
func Put(m Memory, ptr uint32, b []byte) error {
	if uint64(len(b)) > math.MaxUint32 {
		return fmt.Errorf("%w: %d bytes at %#x", ErrRange, len(b), ptr)
	}
	if err := Check(m, ptr, uint32(len(b))); err != nil {
		return err
	}
	if !m.Write(ptr, b) {
		return fmt.Errorf("%w: %d bytes at %#x", ErrRange, len(b), ptr)
	}
	return nil
}

// PutUint32 writes v little-endian at ptr.
func PutUint32(m Memory, ptr, v uint32) error {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], v)
	return Put(m, ptr, b[:])
}

// PutInt32s writes ids little-endian at ptr.
func PutInt32s(m Memory, ptr uint32, ids []int32) error {
	b := make([]byte, 4*len(ids))
	for i, id := range ids {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(id))
	}
	return Put(m, ptr, b)
}

// Fake is a Memory over a byte slice, for testing host functions without
// a wasm instance.
type Fake []byte

// Size implements Memory.
func (f Fake) Size() uint32 { return uint32(len(f)) }

// Read implements Memory.
func (f Fake) Read(offset, n uint32) ([]byte, bool) {
	if uint64(offset)+uint64(n) > uint64(len(f)) {
		return nil, false
	}
	return f[offset : offset+n : offset+n], true
}

// Write implements Memory.
func (f Fake) Write(offset uint32, b []byte) bool {
	if uint64(offset)+uint64(len(b)) > uint64(len(f)) {
		return false
	}
	copy(f[offset:], b)
	return true
}
