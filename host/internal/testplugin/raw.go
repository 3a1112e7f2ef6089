//go:build wasip1

package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"unsafe"
)

// The host's functions again, with raw i32 arguments, so that the plugin
// can hand the host whatever pointers it likes.

//go:wasmimport tessera input
func rawInput(buf, capacity, lenOut uint32) uint32

//go:wasmimport tessera output
func rawOutput(ptr, n uint32) uint32

//go:wasmimport tessera set_error
func rawSetError(ptr, n uint32) uint32

//go:wasmimport tessera last_error
func rawLastError(buf, capacity, lenOut uint32) uint32

//go:wasmimport tessera models
func rawModels(buf, capacity, lenOut uint32) uint32

//go:wasmimport tessera tokenize
func rawTokenize(model, modelLen, text, textLen, flags, ids, idsCap, nOut uint32) uint32

//go:wasmimport tessera detokenize
func rawDetokenize(model, modelLen, ids, n, buf, capacity, lenOut uint32) uint32

//go:wasmimport tessera count_tokens
func rawCountTokens(model, modelLen, text, textLen, flags, nOut uint32) uint32

//go:wasmimport tessera gen_open
func rawGenOpen(req, reqLen, handleOut uint32) uint32

//go:wasmimport tessera gen_next
func rawGenNext(handle, idOut, buf, capacity, lenOut uint32) uint32

//go:wasmimport tessera gen_cancel
func rawGenCancel(handle uint32) uint32

//go:wasmimport tessera gen_close
func rawGenClose(handle uint32) uint32

//go:wasmimport tessera gen_stats
func rawGenStats(handle, buf, capacity, lenOut uint32) uint32

//go:wasmimport wasi_snapshot_preview1 path_open
func rawPathOpen(fd, dirflags, path, pathLen, oflags uint32, rightsBase, rightsInheriting uint64, fdflags, fdOut uint32) uint32

// scratch is where the "valid" random pointers point, so that the host's
// writes through them cannot corrupt the Go heap and kill the plugin
// before it reports.
var scratch [1 << 16]byte

// badPointers calls every host function n times with random arguments:
// pointers into scratch, pointers past any memory a plugin can have,
// spans that straddle the end of the address space, and random lengths.
// It returns how often each code came back, as JSON after the marker
// "\n#codes:" (the random output calls put garbage before it).
func badPointers(n int, seed uint64) ([]byte, error) {
	rng := rand.New(rand.NewPCG(seed, 1))
	base := uint32(uintptr(unsafe.Pointer(&scratch[0])))
	ptr := func() uint32 {
		switch rng.IntN(5) {
		case 0:
			return base + uint32(rng.IntN(len(scratch)))
		case 1:
			return 0xffffffff - uint32(rng.IntN(8))
		case 2:
			return 1<<31 + rng.Uint32()>>1
		case 3:
			return 0
		}
		return rng.Uint32()
	}
	length := func() uint32 {
		switch rng.IntN(4) {
		case 0:
			return uint32(rng.IntN(16))
		case 1:
			return uint32(rng.IntN(len(scratch)))
		case 2:
			return 0xffffffff - uint32(rng.IntN(8))
		}
		return rng.Uint32()
	}
	// A valid span in scratch, so that some calls get past their first check.
	span := func() (uint32, uint32) {
		off := rng.IntN(len(scratch))
		return base + uint32(off), uint32(rng.IntN(len(scratch) - off + 1))
	}
	codes := map[string]int{}
	for i := range n {
		for j := range scratch[:64] { // random bytes for JSON and text
			scratch[j] = byte(rng.Uint32())
		}
		var c uint32
		p1, l1 := span()
		switch i % 13 {
		case 0:
			c = rawInput(ptr(), length(), ptr())
		case 1:
			c = rawOutput(ptr(), length())
		case 2:
			c = rawSetError(ptr(), length())
		case 3:
			c = rawLastError(ptr(), length(), ptr())
		case 4:
			c = rawModels(p1, l1, ptr())
		case 5:
			c = rawTokenize(ptr(), length(), p1, l1%4096, rng.Uint32()%3, ptr(), length(), ptr())
		case 6:
			c = rawDetokenize(ptr(), length()%8, p1, l1/4, ptr(), length(), ptr())
		case 7:
			c = rawCountTokens(0, 0, p1, l1%4096, rng.Uint32()%3, ptr())
		case 8:
			c = rawGenOpen(p1, l1, ptr())
		case 9:
			c = rawGenNext(rng.Uint32()%4, ptr(), ptr(), length(), ptr())
		case 10:
			c = rawGenCancel(rng.Uint32())
		case 11:
			c = rawGenClose(rng.Uint32())
		case 12:
			c = rawGenStats(rng.Uint32()%4, ptr(), length(), ptr())
		}
		codes[fmt.Sprint(c)]++
	}
	b, err := json.Marshal(codes)
	return append([]byte("\n#codes:"), b...), err
}

// escape tries to open path relative to the first preopened directory
// (file descriptor 3) with a raw WASI call, as a plugin that bypasses Go's
// path cleaning would, to check that ".." cannot leave a mount.
func escape(path string) ([]byte, error) {
	b := []byte(path)
	var fd uint32
	const rightsRead = 1 << 1 // fd_read
	errno := rawPathOpen(3, 0, uint32(uintptr(unsafe.Pointer(&b[0]))), uint32(len(b)), 0, rightsRead, 0, 0,
		uint32(uintptr(unsafe.Pointer(&fd))))
	if errno != 0 {
		return nil, fmt.Errorf("path_open %q: errno %d", path, errno)
	}
	return []byte("opened"), nil
}
