package models

import (
	"runtime"
	"sync/atomic"
)

// collectEvery is how many bytes of tensors a model hands out between
// collections while it loads.
const collectEvery = 256 << 20

// collector runs collect after every `every` bytes read.
//
// Loading reads each tensor into a buffer of its own, which the backend
// converts or copies into its own form and drops: garbage as large as the
// weights. Go's collector paces itself by the live heap, which on the CPU
// grows to the weights' size as they load, so it lets that garbage pile
// up to about as much again: `tessera bench` on the CPU peaked at 7.7 GB
// for gemma-4-e4b's 4.5 GB of weights and was killed for memory on
// gemma-4-26b-a4b (19 GB for a 14.2 GB file, on a 23 GB machine).
// Collecting after every 256 MiB read bounds the garbage by that, for
// the price of a collection (milliseconds: tensors hold no pointers) per
// 256 MiB of file.
type collector struct {
	every   int64
	pending atomic.Int64
	collect func()
}

func (c *collector) read(n int) {
	if c.pending.Add(int64(n)) < c.every {
		return
	}
	c.pending.Store(0)
	c.collect()
}

// paceReads makes m's tensors collect garbage as they are read
// (collector).
func (m *Model) paceReads() {
	m.pace(&collector{every: collectEvery, collect: runtime.GC})
}

func (m *Model) pace(c *collector) {
	for _, t := range m.Tensors {
		t.OnRead(c.read)
	}
}
