//go:build !amd64 || purego

package kernel

import "github.com/tessera-llm/tessera/models/dtype"

// BlocksTile: no tile kernels in this build.
func BlocksTile() bool { return false }

func dotBlocksTileAsm(t dtype.Type, codes, scales []uint32, sstride int, x *QTile, groups, rows int, out []float32, stride int) int {
	return 0
}

func dotBlocksKTileAsm(t dtype.Type, codes, scales []uint32, sstride int, x *QTile, groups, rows int, out []float32, stride int) int {
	return 0
}

func dotBlocksTile8Asm(t dtype.Type, codes, scales []uint32, sstride int, x0, x1 *QTile, groups, rows int, out []float32, stride int) int {
	return 0
}
