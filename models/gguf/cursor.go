package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// A FormatError reports a malformed or unsupported file: what was being
// read, where, and what is wrong with it. I/O errors from the underlying
// reader are returned as they are (wrapped), not as FormatErrors, so that
// callers can tell a bad file from a failing disk.
type FormatError struct {
	Offset int64  // absolute file offset of the offending field
	Item   string // e.g. `key "general.name"` or `tensor "output.weight"`; may be empty
	Msg    string
	Err    error // io.ErrUnexpectedEOF for truncated files, else nil
}

func (e *FormatError) Error() string {
	if e.Item == "" {
		return fmt.Sprintf("gguf: offset %d: %s", e.Offset, e.Msg)
	}
	return fmt.Sprintf("gguf: %s at offset %d: %s", e.Item, e.Offset, e.Msg)
}

func (e *FormatError) Unwrap() error { return e.Err }

// bufSize is the cursor's read-ahead. Metadata is mostly tiny fields, so
// reading it through a buffer turns thousands of ReadAt calls into a few.
const bufSize = 64 << 10

// cursor reads little-endian fields sequentially from an io.ReaderAt of
// known size. It never reads or allocates past size, and its errors carry
// the offset and the item being read.
type cursor struct {
	r      io.ReaderAt
	size   int64
	off    int64  // offset of the next unread byte
	buf    []byte // file bytes [bufOff, bufOff+len(buf))
	bufOff int64
	item   string // what is being parsed, for error messages
	start  int64  // offset of the field being read, for error messages
}

func (c *cursor) remaining() int64 { return c.size - c.off }

// errorf reports a problem with the field that starts at c.start.
func (c *cursor) errorf(format string, args ...any) error {
	return &FormatError{Offset: c.start, Item: c.item, Msg: fmt.Sprintf(format, args...)}
}

// next consumes n bytes. The returned slice aliases the buffer and is only
// valid until the next call.
func (c *cursor) next(n int64, what string) ([]byte, error) {
	c.start = c.off
	if n < 0 || n > c.remaining() {
		return nil, &FormatError{
			Offset: c.off, Item: c.item, Err: io.ErrUnexpectedEOF,
			Msg: fmt.Sprintf("file ends inside %s: it needs %d bytes, %d are left", what, n, c.remaining()),
		}
	}
	if lo := c.off - c.bufOff; lo >= 0 && lo+n <= int64(len(c.buf)) {
		c.off += n
		return c.buf[lo : lo+n], nil
	}
	if n > bufSize {
		// Only long strings get here; n is bounded by the file size.
		b := make([]byte, n)
		if err := readAt(c.r, b, c.off); err != nil {
			return nil, fmt.Errorf("gguf: %s: %w", c.item, err)
		}
		c.off += n
		return b, nil
	}
	if c.buf == nil {
		c.buf = make([]byte, min(bufSize, c.size))
	}
	c.buf = c.buf[:min(int64(cap(c.buf)), c.remaining())]
	if err := readAt(c.r, c.buf, c.off); err != nil {
		c.buf = c.buf[:0]
		return nil, fmt.Errorf("gguf: %s: %w", c.item, err)
	}
	c.bufOff = c.off
	c.off += n
	return c.buf[:n], nil
}

// readAt fills p from off. A ReaderAt may return io.EOF along with a full
// read; a short read means the reader is smaller than the size it was
// declared with.
func readAt(r io.ReaderAt, p []byte, off int64) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("reading %d bytes at offset %d: %w", len(p), off, err)
}

var le = binary.LittleEndian

func (c *cursor) u8(what string) (uint8, error) {
	b, err := c.next(1, what)
	if err != nil {
		return 0, err
	}
	return b[0], nil
}

func (c *cursor) u16(what string) (uint16, error) {
	b, err := c.next(2, what)
	if err != nil {
		return 0, err
	}
	return le.Uint16(b), nil
}

func (c *cursor) u32(what string) (uint32, error) {
	b, err := c.next(4, what)
	if err != nil {
		return 0, err
	}
	return le.Uint32(b), nil
}

func (c *cursor) u64(what string) (uint64, error) {
	b, err := c.next(8, what)
	if err != nil {
		return 0, err
	}
	return le.Uint64(b), nil
}

// count reads a uint64 element count and checks that count elements of at
// least minSize bytes each can fit in the rest of the file, so that the
// caller may allocate count elements.
func (c *cursor) count(what string, minSize int64) (int64, error) {
	n, err := c.u64(what)
	if err != nil {
		return 0, err
	}
	if left := c.remaining(); n > math.MaxInt64 || int64(n) > left/minSize {
		return 0, c.errorf("%s %d is impossible: that needs at least %d bytes each and only %d bytes are left",
			what, n, minSize, left)
	}
	return int64(n), nil
}

// str reads a length-prefixed string.
func (c *cursor) str(what string) (string, error) {
	n, err := c.u64(what + " length")
	if err != nil {
		return "", err
	}
	if left := c.remaining(); n > uint64(left) {
		return "", c.errorf("%s length %d exceeds the %d bytes left in the file", what, n, left)
	}
	b, err := c.next(int64(n), what)
	if err != nil {
		return "", err
	}
	return string(b), nil
}
