//go:build js

package main

import (
	"fmt"
	"io"
	"sync/atomic"
	"syscall/js"
)

// readPiece bounds one read from a Blob: a bigger ReadAt is served in
// pieces, so that neither JavaScript nor Go ever holds more than one piece
// of a tensor twice.
const readPiece = 8 << 20

// blobReader is an io.ReaderAt over a Blob (a File from a picker or a drop,
// a file in the origin private file system, or a Blob made of an
// ArrayBuffer). Each read is blob.slice(...).arrayBuffer(), awaited, so the
// file itself stays outside the wasm heap: only the bytes being read come
// in. Reads must come from goroutines (see jsAwait).
type blobReader struct {
	blob js.Value
	size int64
	read atomic.Int64 // bytes read so far, for progress
}

func newBlobReader(blob js.Value) *blobReader {
	return &blobReader{blob: blob, size: int64(blob.Get("size").Float())}
}

func (r *blobReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("blob: negative offset %d", off)
	}
	n := 0
	for n < len(p) {
		start := off + int64(n)
		if start >= r.size {
			return n, io.EOF
		}
		end := min(start+int64(min(len(p)-n, readPiece)), r.size)
		buf, err := call(r.blob.Call("slice", start, end), "arrayBuffer")
		if err != nil {
			return n, fmt.Errorf("reading %d bytes at offset %d: %w", end-start, start, err)
		}
		k := js.CopyBytesToGo(p[n:], js.Global().Get("Uint8Array").New(buf))
		if k == 0 {
			return n, io.ErrUnexpectedEOF
		}
		n += k
		r.read.Add(int64(k))
	}
	return n, nil
}
