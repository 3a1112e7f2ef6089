//go:build !amd64 || purego

package kernel

import "github.com/tessera-llm/tessera/models/dtype"

// dotBlocksAsm runs the vector kernel of type t over the first groups of
// a row where there is one, adding to acc and macc, and returns how many
// groups it did (dotBlocksGroups does the rest).
func dotBlocksAsm(t dtype.Type, codes, scales []uint32, x *QRow, groups int, acc *[2][Lanes]float32, macc *[Lanes]float32) int {
	return 0
}
