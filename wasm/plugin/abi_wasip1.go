//go:build wasip1

package plugin

import (
	"unsafe"

	"github.com/tessera-llm/tessera/wasm/plugin/abi"
)

// The host's functions, as docs/PLUGIN_ABI.md declares them. Pointers are
// offsets into this module's memory; Go's wasm garbage collector does not
// move objects, and a pointer argument keeps its object alive for the call.

//go:wasmimport tessera abi_version
func hostABIVersion() uint32

//go:wasmimport tessera input
func hostInput(buf unsafe.Pointer, capacity uint32, lenOut unsafe.Pointer) uint32

//go:wasmimport tessera output
func hostOutput(ptr unsafe.Pointer, n uint32) uint32

//go:wasmimport tessera set_error
func hostSetError(ptr unsafe.Pointer, n uint32) uint32

//go:wasmimport tessera last_error
func hostLastError(buf unsafe.Pointer, capacity uint32, lenOut unsafe.Pointer) uint32

//go:wasmimport tessera models
func hostModels(buf unsafe.Pointer, capacity uint32, lenOut unsafe.Pointer) uint32

//go:wasmimport tessera tokenize
func hostTokenize(model unsafe.Pointer, modelLen uint32, text unsafe.Pointer, textLen uint32, flags uint32, ids unsafe.Pointer, idsCap uint32, nOut unsafe.Pointer) uint32

//go:wasmimport tessera detokenize
func hostDetokenize(model unsafe.Pointer, modelLen uint32, ids unsafe.Pointer, n uint32, buf unsafe.Pointer, capacity uint32, lenOut unsafe.Pointer) uint32

//go:wasmimport tessera count_tokens
func hostCountTokens(model unsafe.Pointer, modelLen uint32, text unsafe.Pointer, textLen uint32, flags uint32, nOut unsafe.Pointer) uint32

//go:wasmimport tessera gen_open
func hostGenOpen(req unsafe.Pointer, reqLen uint32, handleOut unsafe.Pointer) uint32

//go:wasmimport tessera gen_next
func hostGenNext(handle uint32, idOut unsafe.Pointer, buf unsafe.Pointer, capacity uint32, lenOut unsafe.Pointer) uint32

//go:wasmimport tessera gen_cancel
func hostGenCancel(handle uint32) uint32

//go:wasmimport tessera gen_close
func hostGenClose(handle uint32) uint32

//go:wasmimport tessera gen_stats
func hostGenStats(handle uint32, buf unsafe.Pointer, capacity uint32, lenOut unsafe.Pointer) uint32

//go:wasmexport tessera_abi_version
func exportABIVersion() uint32 { return abi.Version }

//go:wasmexport tessera_run
func exportRun() int32 { return run() }

func bytesPtr(b []byte) unsafe.Pointer   { return unsafe.Pointer(unsafe.SliceData(b)) }
func stringPtr(s string) unsafe.Pointer  { return unsafe.Pointer(unsafe.StringData(s)) }
func int32sPtr(v []int32) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(v)) }

// HostABIVersion is the ABI version the host serves, packed as major<<16|minor.
func HostABIVersion() uint32 { return hostABIVersion() }

func callInput(buf []byte, n *uint32) abi.Code {
	return abi.Code(hostInput(bytesPtr(buf), uint32(len(buf)), unsafe.Pointer(n)))
}

func callOutput(p []byte) abi.Code {
	return abi.Code(hostOutput(bytesPtr(p), uint32(len(p))))
}

func callSetError(p []byte) abi.Code {
	return abi.Code(hostSetError(bytesPtr(p), uint32(len(p))))
}

func callLastError(buf []byte, n *uint32) abi.Code {
	return abi.Code(hostLastError(bytesPtr(buf), uint32(len(buf)), unsafe.Pointer(n)))
}

func callModels(buf []byte, n *uint32) abi.Code {
	return abi.Code(hostModels(bytesPtr(buf), uint32(len(buf)), unsafe.Pointer(n)))
}

func callTokenize(model, text string, flags uint32, ids []int32, n *uint32) abi.Code {
	return abi.Code(hostTokenize(stringPtr(model), uint32(len(model)), stringPtr(text), uint32(len(text)),
		flags, int32sPtr(ids), uint32(len(ids)), unsafe.Pointer(n)))
}

func callDetokenize(model string, ids []int32, buf []byte, n *uint32) abi.Code {
	return abi.Code(hostDetokenize(stringPtr(model), uint32(len(model)), int32sPtr(ids), uint32(len(ids)),
		bytesPtr(buf), uint32(len(buf)), unsafe.Pointer(n)))
}

func callCountTokens(model, text string, flags uint32, n *uint32) abi.Code {
	return abi.Code(hostCountTokens(stringPtr(model), uint32(len(model)), stringPtr(text), uint32(len(text)), flags, unsafe.Pointer(n)))
}

func callGenOpen(req []byte, h *uint32) abi.Code {
	return abi.Code(hostGenOpen(bytesPtr(req), uint32(len(req)), unsafe.Pointer(h)))
}

func callGenNext(h uint32, id *int32, buf []byte, n *uint32) abi.Code {
	return abi.Code(hostGenNext(h, unsafe.Pointer(id), bytesPtr(buf), uint32(len(buf)), unsafe.Pointer(n)))
}

func callGenCancel(h uint32) abi.Code { return abi.Code(hostGenCancel(h)) }

func callGenClose(h uint32) abi.Code { return abi.Code(hostGenClose(h)) }

func callGenStats(h uint32, buf []byte, n *uint32) abi.Code {
	return abi.Code(hostGenStats(h, bytesPtr(buf), uint32(len(buf)), unsafe.Pointer(n)))
}
