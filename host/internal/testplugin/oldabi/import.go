//go:build wasip1 && unknownimport

package main

//go:wasmexport tessera_abi_version
func version() uint32 { return 1<<16 | 99 }

//go:wasmimport tessera summon_demons
func summon() uint32

func rogue() int32 { return int32(summon()) }
