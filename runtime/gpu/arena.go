package gpu

import "github.com/tessera-llm/tessera/runtime/gpu/webgpu"

// Small weights share buffers. wgpu tracks every buffer a submission
// uses, when the step's compute pass is encoded, when it is submitted and
// again when it retires, at a cost per buffer: a decode step of
// smollm2-135m bound 386 buffers, 300 of them weights (each layer's norms
// and each matrix's codes and scales), and its host time fell by about
// a tenth once they were a handful (DECISIONS: "Weights share buffers").
// A weight of up to arenaPieceMax bytes is a sub-buffer of a shared
// chunk; larger ones, few and slow enough to hide the cost, keep their
// own buffers, so that a chunk's unused tail stays small.
const (
	arenaPieceMax = 2 << 20  // the largest weight a chunk takes
	arenaChunkMin = 1 << 20  // the first chunk's size
	arenaChunkMax = 16 << 20 // the most a chunk grows to
)

// arena is the shared weight buffers: chunks filled first-fit, each new one
// as large as all placed so far (from arenaChunkMin up to arenaChunkMax),
// so that a small model wastes at most its own size and a large one at
// most one chunk's tail.
type arena struct {
	chunks []arenaChunk
	placed int64 // bytes placed in chunks so far
}

type arenaChunk struct {
	buf  webgpu.Buffer
	used int64
}

// weightBuffer returns a storage buffer of size bytes for a weight: a
// sub-buffer of a chunk, or its own buffer when size is more than
// arenaPieceMax.
func (b *Backend) weightBuffer(label string, size int64) (webgpu.Buffer, error) {
	const usage = webgpu.Storage | webgpu.CopyDst
	size = max(size, 4)
	if size > arenaPieceMax {
		return b.buffer(label, size, usage)
	}
	align := max(int64(b.info.MinStorageBufferOffsetAlignment), 256)
	need := (size + align - 1) / align * align
	a := &b.arena
	i := 0
	for i < len(a.chunks) && a.chunks[i].used+need > a.chunks[i].buf.Size() {
		i++
	}
	if i == len(a.chunks) {
		n := min(max(a.placed, arenaChunkMin), arenaChunkMax)
		if limit := b.info.MaxBufferSize; limit > 0 {
			n = min(n, limit)
		}
		n = max(n, need)
		buf, err := b.buffer("weights", n, usage)
		if err != nil {
			return nil, err
		}
		a.chunks = append(a.chunks, arenaChunk{buf: buf})
	}
	c := &a.chunks[i]
	sub, err := b.dev.SubBuffer(c.buf, label, c.used, size)
	if err != nil {
		return nil, err
	}
	c.used += need
	a.placed += need
	return sub, nil
}
