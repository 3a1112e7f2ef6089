//go:build wasip1

// Command oldabi is a plugin built for an ABI major version the host does
// not serve (or, with -tags unknownimport, one that imports a host
// function the host lacks), for the host's version tests. It uses no SDK:
// it declares the exports itself, as a plugin in another language would.
package main

func main() {}

//go:wasmexport tessera_run
func run() int32 { return rogue() }
