package gpu

import (
	"encoding/binary"
	"math"

	"github.com/tessera-llm/tessera/runtime/backend"
)

// ReadRoutes reads back a routing (tests only: the engine never does):
// each pair's expert and weight, the pairs in the order moe_route sorted
// them, and the block table's entries (expert, first, count).
func ReadRoutes(b *Backend, r backend.Routes) (ids []int32, w []float32, order []uint32, table [][3]uint32, err error) {
	rs := r.(*Routes)
	p := rs.pairs()
	raw, err := b.flushRead(rs.buf, int64(9*p)*4)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	word := func(i int) uint32 { return binary.LittleEndian.Uint32(raw[4*i:]) }
	n := min(b.batch.Len(), rs.rows) * rs.k
	for i := range n {
		ids = append(ids, int32(word(i)))
		w = append(w, math.Float32frombits(word(p+i)))
		order = append(order, word(2*p+i))
	}
	for i := range rs.blocks {
		at := 3*p + 3*i
		table = append(table, [3]uint32{word(at), word(at + 1), word(at + 2)})
	}
	return ids, w, order, table, nil
}

// RouteBlock is the most pairs of one expert that a block of the current
// step's table holds.
func RouteBlock(r backend.Routes) int { return r.(*Routes).block }
