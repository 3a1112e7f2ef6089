//go:build wasip1 && !unknownimport

package main

//go:wasmexport tessera_abi_version
func version() uint32 { return 2 << 16 }

func rogue() int32 { return 0 }
