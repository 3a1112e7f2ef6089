//go:build js

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"syscall/js"
)

// hashPiece is the piece size of the cache's file hash.
const hashPiece = 8 << 20

// pieceHash hashes a file as the SHA-256 of the SHA-256s of its 8 MiB
// pieces, in order (the last piece may be shorter). The pieces are hashed
// by the browser (crypto.subtle), natively and without the bytes entering
// the wasm heap: Go's SHA-256 compiled to wasm manages about 50 MB/s, which
// would add seconds per gigabyte to every download and every reuse.
type pieceHash struct {
	subtle js.Value // crypto.subtle, or undefined
	list   hash.Hash
	buf    []byte // for hashing in Go where there is no crypto.subtle
}

func newPieceHash() *pieceHash {
	h := &pieceHash{list: sha256.New()}
	if c := js.Global().Get("crypto"); c.Type() == js.TypeObject {
		h.subtle = c.Get("subtle")
	}
	return h
}

// add hashes one piece: a Uint8Array or an ArrayBuffer. Callers must not
// change it until add returns.
func (h *pieceHash) add(piece js.Value) error {
	var sum [sha256.Size]byte
	if h.subtle.Type() == js.TypeObject {
		d, err := call(h.subtle, "digest", "SHA-256", piece)
		if err != nil {
			return err
		}
		js.CopyBytesToGo(sum[:], js.Global().Get("Uint8Array").New(d))
	} else {
		u8 := piece
		if piece.Get("BYTES_PER_ELEMENT").IsUndefined() {
			u8 = js.Global().Get("Uint8Array").New(piece)
		}
		n := u8.Get("length").Int()
		if cap(h.buf) < n {
			h.buf = make([]byte, n)
		}
		js.CopyBytesToGo(h.buf[:n], u8)
		sum = sha256.Sum256(h.buf[:n])
	}
	h.list.Write(sum[:])
	return nil
}

func (h *pieceHash) sum() string { return hex.EncodeToString(h.list.Sum(nil)) }

// hashBlob returns the piece hash of a whole blob, reporting progress.
func hashBlob(blob js.Value, progress func(done, total int64)) (string, error) {
	h := newPieceHash()
	size := int64(blob.Get("size").Float())
	for off := int64(0); off < size; off += hashPiece {
		end := min(off+hashPiece, size)
		buf, err := call(blob.Call("slice", off, end), "arrayBuffer")
		if err != nil {
			return "", err
		}
		if err := h.add(buf); err != nil {
			return "", err
		}
		progress(end, size)
	}
	return h.sum(), nil
}
