package cpu

import (
	"fmt"

	"github.com/tessera-llm/tessera/runtime/backend"
)

// LoRA is a weight's adapters packed as backend.LoRALayout lays them out.
type LoRA struct {
	in, out   int
	a, bt     []float32
	off, rank []int32
	scale     []float32
	maxRank   int
}

func (l *LoRA) Slots() int   { return len(l.off) }
func (l *LoRA) MaxRank() int { return l.maxRank }

func (b *Backend) NewLoRA(in, out int) (backend.LoRA, error) {
	if in <= 0 || out <= 0 {
		return nil, fmt.Errorf("cpu: lora of %d×%d", out, in)
	}
	return &LoRA{in: in, out: out}, nil
}

func (b *Backend) SetLoRA(l backend.LoRA, slots []backend.LoRASlot) error {
	c := l.(*LoRA)
	a, bt, off, rank, scale, err := backend.LoRALayout(slots, c.in, c.out)
	if err != nil {
		return fmt.Errorf("cpu: %w", err)
	}
	b.stats.Memory += 4 * int64(len(a)+len(bt)-len(c.a)-len(c.bt))
	c.a, c.bt, c.off, c.rank, c.scale = a, bt, off, rank, scale
	c.maxRank = 0
	for _, r := range rank {
		c.maxRank = max(c.maxRank, int(r))
	}
	return nil
}

func (b *Backend) AddLoRA(dst, x backend.Tensor, l backend.LoRA) {
	b.op()
	d, xs, c := dst.(*Tensor), x.(*Tensor), l.(*LoRA)
	if c.maxRank == 0 || b.batch.Adapter == nil {
		return
	}
	n := b.rows(d)
	adapter, rowScale := b.batch.Adapter, b.batch.AdapterScale
	if d.out { // row i is the batch's row Out[i]
		adapter, rowScale = make([]int32, n), make([]float32, n)
		for i := range n {
			r := b.batch.Out[i]
			adapter[i], rowScale[i] = b.batch.Adapter[r], b.batch.AdapterScale[r]
		}
	}
	if need := n * c.maxRank; len(b.loraH) < need {
		b.loraH = make([]float32, need)
	}
	LoRAShrink(b.loraH, xs.Data, c.a, n, c.in, c.maxRank, adapter, c.off, c.rank)
	LoRAExpand(d.Data, b.loraH, c.bt, n, c.out, c.maxRank, adapter, rowScale, c.off, c.rank, c.scale)
}

// LoRAShrink is the first product of an unmerged adapter, gathered per
// row: for each of rows rows of x (width in) whose slot j = adapter[i] is
// valid, h[i·stride+t] = x_i · a[off_j+t] for t < rank_j, and 0 up to
// stride. a holds the A rows of every slot ([ΣRank, in]). Rows without an
// adapter, or of a slot out of range, are left alone.
func LoRAShrink(h, x, a []float32, rows, in, stride int, adapter, off, rank []int32) {
	for i := range rows {
		j := adapter[i]
		if j < 0 || int(j) >= len(off) {
			continue
		}
		xi := x[i*in : (i+1)*in]
		for t := range stride {
			s := float32(0)
			if t < int(rank[j]) {
				r := int(off[j]) + t
				s = Dot(xi, a[r*in:(r+1)*in])
			}
			h[i*stride+t] = s
		}
	}
}

// LoRAExpand is the second: dst[i·out+o] += rowScale_i·scale_j·
// Σ_{t<rank_j} h[i·stride+t]·bt[(off_j+t)·out+o], bt holding the rows of
// every slot's Bᵀ ([ΣRank, out]).
func LoRAExpand(dst, h, bt []float32, rows, out, stride int, adapter []int32, rowScale []float32, off, rank []int32, scale []float32) {
	for i := range rows {
		j := adapter[i]
		if j < 0 || int(j) >= len(off) || rank[j] == 0 {
			continue
		}
		s := rowScale[i] * scale[j]
		for o := range out {
			acc := float32(0)
			for t := range int(rank[j]) {
				acc += h[i*stride+t] * bt[(int(off[j])+t)*out+o]
			}
			dst[i*out+o] += s * acc
		}
	}
}
