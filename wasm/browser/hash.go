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
//
// With whole set, it also takes the file's plain SHA-256, the one a
// model's source publishes (the Hugging Face Hub's): that one has to pass
// every byte through Go, so it is computed only to check a download
// against a published hash.
type pieceHash struct {
	subtle js.Value // crypto.subtle, or undefined
	list   hash.Hash
	full   hash.Hash // the plain SHA-256, or nil
	buf    []byte    // for hashing in Go
}

func newPieceHash(whole bool) *pieceHash {
	h := &pieceHash{list: sha256.New()}
	if whole {
		h.full = sha256.New()
	}
	if c := js.Global().Get("crypto"); c.Type() == js.TypeObject {
		h.subtle = c.Get("subtle")
	}
	return h
}

// bytes copies a piece into Go memory.
func (h *pieceHash) bytes(piece js.Value) []byte {
	u8 := piece
	if piece.Get("BYTES_PER_ELEMENT").IsUndefined() {
		u8 = js.Global().Get("Uint8Array").New(piece)
	}
	n := u8.Get("length").Int()
	if cap(h.buf) < n {
		h.buf = make([]byte, n)
	}
	js.CopyBytesToGo(h.buf[:n], u8)
	return h.buf[:n]
}

// add hashes one piece: a Uint8Array or an ArrayBuffer. Callers must not
// change it until add returns.
func (h *pieceHash) add(piece js.Value) error {
	var sum [sha256.Size]byte
	var b []byte
	if h.full != nil || h.subtle.Type() != js.TypeObject {
		b = h.bytes(piece)
	}
	if h.full != nil {
		h.full.Write(b)
	}
	if h.subtle.Type() == js.TypeObject {
		d, err := call(h.subtle, "digest", "SHA-256", piece)
		if err != nil {
			return err
		}
		js.CopyBytesToGo(sum[:], js.Global().Get("Uint8Array").New(d))
	} else {
		sum = sha256.Sum256(b)
	}
	h.list.Write(sum[:])
	return nil
}

func (h *pieceHash) sum() string { return hex.EncodeToString(h.list.Sum(nil)) }

// whole is the plain SHA-256, or "" when it was not asked for.
func (h *pieceHash) whole() string {
	if h.full == nil {
		return ""
	}
	return hex.EncodeToString(h.full.Sum(nil))
}

// hashBlob returns the piece hash of a whole blob, reporting progress.
func hashBlob(blob js.Value, progress func(done, total int64)) (string, error) {
	sum, _, err := hashBlobWhole(blob, false, progress)
	return sum, err
}

// hashBlobWhole is hashBlob, with the plain SHA-256 too when whole.
func hashBlobWhole(blob js.Value, whole bool, progress func(done, total int64)) (string, string, error) {
	h := newPieceHash(whole)
	size := int64(blob.Get("size").Float())
	for off := int64(0); off < size; off += hashPiece {
		end := min(off+hashPiece, size)
		buf, err := call(blob.Call("slice", off, end), "arrayBuffer")
		if err != nil {
			return "", "", err
		}
		if err := h.add(buf); err != nil {
			return "", "", err
		}
		progress(end, size)
	}
	return h.sum(), h.whole(), nil
}
