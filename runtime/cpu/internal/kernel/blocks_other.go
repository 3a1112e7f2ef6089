//go:build !(amd64 || arm64) || purego

package kernel

import "github.com/tessera-llm/tessera/models/dtype"

// dotBlocksRowsAsm: no vector kernels in this build.
func dotBlocksRowsAsm(t dtype.Type, codes, scales []uint32, sstride int, x *QRow, groups int, out []float32) int {
	return 0
}

func blocksPaths() []string { return []string{"go"} }

func dotBlocksRowsOn(path string, t dtype.Type, codes, scales []uint32, sstride int, x *QRow, groups int, out []float32) int {
	return 0
}

// blocksCovered: no kernel covers any type in this build.
func blocksCovered(path string, t dtype.Type) bool { return false }
