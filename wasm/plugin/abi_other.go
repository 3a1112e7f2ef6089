//go:build !wasip1

package plugin

import "github.com/tessera-llm/tessera/wasm/plugin/abi"

// Outside wasip1 there is no host: every call fails with ErrNotPlugin, so
// that the package compiles for tools, documentation and native tests.

// HostABIVersion is the ABI version the host serves; 0 outside a host.
func HostABIVersion() uint32 { return 0 }

func callInput([]byte, *uint32) abi.Code                             { return abi.ErrState }
func callOutput([]byte) abi.Code                                     { return abi.ErrState }
func callSetError([]byte) abi.Code                                   { return abi.ErrState }
func callLastError([]byte, *uint32) abi.Code                         { return abi.ErrState }
func callModels([]byte, *uint32) abi.Code                            { return abi.ErrState }
func callTokenize(string, string, uint32, []int32, *uint32) abi.Code { return abi.ErrState }
func callDetokenize(string, []int32, []byte, *uint32) abi.Code       { return abi.ErrState }
func callCountTokens(string, string, uint32, *uint32) abi.Code       { return abi.ErrState }
func callGenOpen([]byte, *uint32) abi.Code                           { return abi.ErrState }
func callGenNext(uint32, *int32, []byte, *uint32) abi.Code           { return abi.ErrState }
func callGenCancel(uint32) abi.Code                                  { return abi.ErrState }
func callGenClose(uint32) abi.Code                                   { return abi.ErrState }
func callGenStats(uint32, []byte, *uint32) abi.Code                  { return abi.ErrState }
