package gpu

import (
	"fmt"

	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
)

// A step's small writes (its tokens, positions, slots, a chain's later
// steps' the same) go through one buffer. Each Device.Write costs wgpu a
// staging buffer of its own, about 19 µs of host time on lavapipe, and a
// decode step made three, a chained step as many; put instead appends the
// bytes to a host image and records a copy from the image's buffer to
// the destination, and submit writes the image once. The copy runs where
// put was called in the command stream, so a chain's later step changes
// what its own work reads, not what the earlier steps recorded before it
// read: no staging area a step is needed.
type uploads struct {
	chunks []uploadChunk
	cur    int // the chunk being filled
}

// uploadChunk is one upload buffer and the bytes the step put in it.
type uploadChunk struct {
	buf  webgpu.Buffer
	data []byte
}

// uploadChunkSize is an upload buffer's size: a decode step of 256 rows
// puts about 4 KiB of tokens, positions and slots (its block tables, when
// they change, can be more, and get a buffer of their size).
const uploadChunkSize = 64 << 10

// put has the command stream write data into dst at offset at this point
// of the work being recorded. As with Device.Write, a length that is not
// a multiple of 4 is padded with zeros, which overwrite the bytes after
// data.
func (b *Backend) put(dst webgpu.Buffer, offset int64, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	n := (len(data) + 3) &^ 3
	u := &b.uploads
	for u.cur < len(u.chunks) && len(u.chunks[u.cur].data)+n > int(u.chunks[u.cur].buf.Size()) {
		u.cur++
	}
	if u.cur == len(u.chunks) {
		buf, err := b.buffer("uploads", int64(max(uploadChunkSize, n)), webgpu.CopySrc|webgpu.CopyDst)
		if err != nil {
			return err
		}
		u.chunks = append(u.chunks, uploadChunk{buf: buf})
	}
	c := &u.chunks[u.cur]
	at := len(c.data)
	c.data = append(c.data, data...)
	c.data = append(c.data, make([]byte, n-len(data))...)
	b.rec.Copy(c.buf, int64(at), dst, offset, int64(n))
	b.pending = true
	return nil
}

// writeUploads writes what the recorded work's copies read (put): once a
// buffer, before the submission.
func (b *Backend) writeUploads() error {
	u := &b.uploads
	for i := range u.chunks {
		c := &u.chunks[i]
		if len(c.data) == 0 {
			continue
		}
		if err := b.dev.Write(c.buf, 0, c.data); err != nil {
			return fmt.Errorf("gpu: writing the step's uploads: %w", err)
		}
		c.data = c.data[:0]
	}
	u.cur = 0
	return nil
}
