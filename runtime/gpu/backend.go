// Package gpu is the WGSL backend: the runtime/backend.Backend that
// records each op as a dispatch of a WGSL kernel (from shaders) on a
// WebGPU device (runtime/gpu/webgpu, the device layer) and submits a whole
// forward step at once. It chooses each op's kernel from the adapter and
// the shapes (a Plan forces the choices; Plainer is the ladder of plainer
// plans the engine's load-time self-check walks), keeps weights in the
// backend's storages, split across storage bindings where one would not
// hold them, and caches every dispatch's bind group. The engine reaches it
// only through runtime/backend; runtime/device.go is the one file of the
// engine that opens one.
package gpu

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/tensor"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
	"github.com/tessera-llm/tessera/shaders"
)

// Backend runs the ops of backend.Backend as WGSL kernels on a Device.
//
// Ops are recorded, not run: a whole forward step goes into one Recorder and
// is submitted once, when Argmax or Read needs a result. Everything a
// dispatch binds (pipeline, bind group, its static parameters) is built the
// first time an op is called with given operands and cached, so the steady
// state of decoding allocates nothing and builds no bind groups: per step,
// only the Step uniform and the token and position buffers are written.
type Backend struct {
	dev  webgpu.Device
	info webgpu.Info
	// onSwiftShader is swiftShader(info), found once: narrow asks at
	// every dispatch, and lowering the names there would allocate.
	onSwiftShader bool
	maxRows       int
	plan          Plan // forced kernel choices (tests and benchmarks)

	rec         webgpu.Recorder
	step        webgpu.Buffer // Step uniform: rows = tokens in the batch
	outStep     webgpu.Buffer // Step uniform for output tensors: rows = outputs
	outputs     map[webgpu.Buffer]bool
	tokens, pos webgpu.Buffer // i32 per row
	ropePos     webgpu.Buffer // 4 i32 per row (Batch.RopePos), made by the first batch that has them
	slots       webgpu.Buffer // i32 per row: the cache slot of the row's key and value
	rowSeq      webgpu.Buffer // i32 per row: the row's sequence, a row of tables
	tables      webgpu.Buffer // i32 block tables, maxRows × tableWidth, made with the KV cache
	seqState    webgpu.Buffer // i32 per sequence: its recurrent state's slot, made with the states
	tableWidth  int
	result      webgpu.Buffer // i32 per row, Argmax's output
	cands       webgpu.Buffer // TopK's output, made on first use
	masks       webgpu.Buffer // token masks, a row of words per output row, made on first use
	batch       backend.Batch
	calls       map[callKey]*call
	trace       []tracedCall // the calls in the order the last steps made them (record)
	traceAt     int          // the place in trace of the step's next call
	freqs       map[ropeKey]webgpu.Buffer
	owned       []webgpu.Buffer            // released by Close
	arena       arena                      // the buffers small weights share (arena.go)
	err         error                      // the first error met while recording
	memory      int64                      // bytes in owned buffers
	pending     bool                       // work recorded since the last submit
	ownsDevice  bool                       // Close closes dev
	attn        *attnState                 // attention's scratch, made on first use
	ops         opCache                    // the compositions made at every dispatch (opcache.go)
	uniforms    map[paramKey]webgpu.Buffer // the fused ops' parameters, by content
	scratches   map[[3]int]*Tensor         // the fused ops' intermediate values: rows, cols, output
	enc         *encState                  // the encoders' per-step buffers (encoder.go), made on first use
	seq         uint64                     // counts recorded dispatches and writes: what a nextInput is valid for
	next        nextInput                  // the input a residual projection prepared for the next norm (fused.go)

	// A windowed cache's (backend.KVShape.Windowed) rings: each row's
	// slot and each sequence's table there (Batch.Windows, tableWidth
	// wide like tables), made with the first windowed cache; ops on that
	// cache bind them instead of slots and tables.
	windowSlots, windows webgpu.Buffer

	// LoRA (lora.go): each row's adapter slot and scale, of the batch's
	// rows and of its output rows, and the scratch x·Aᵀ of each.
	rowLoRA, outLoRA, loraH, loraHOut webgpu.Buffer

	// Chained decoding: the ids every Keep picked, and how many steps
	// kept so far.
	history        webgpu.Buffer
	kept, keptRows int

	// The step's small writes, made by the command stream (upload.go).
	uploads uploads

	// The shared parameter buffer being filled (paramSlot) and its bytes
	// taken so far.
	paramArena webgpu.Buffer
	paramUsed  int64

	// written is what Begin last wrote to each step buffer that only the
	// host writes (writeChanged).
	written map[webgpu.Buffer][]byte

	smp       *sampling // on-device sampling (sampling.go), made on first use
	readBytes int64     // bytes read back so far

	// The host's time recording and submitting (Stats.Host): the start of
	// the step being recorded (zero when none is), the sum so far and its
	// part in the platform (Stats.HostPlatform).
	hostStart    time.Time
	host         time.Duration
	hostPlatform time.Duration
}

// NewBackend returns a backend on dev for batches of up to maxRows tokens.
func NewBackend(dev webgpu.Device, maxRows int) (*Backend, error) {
	if maxRows <= 0 {
		return nil, fmt.Errorf("gpu: batch of %d rows", maxRows)
	}
	b := &Backend{dev: dev, info: dev.Info(), maxRows: maxRows, rec: dev.Recorder(), calls: map[callKey]*call{}, outputs: map[webgpu.Buffer]bool{}}
	b.onSwiftShader = swiftShader(b.info)
	var err error
	for _, p := range []*webgpu.Buffer{&b.step, &b.outStep} {
		if *p, err = b.buffer("step", 16, webgpu.Uniform|webgpu.CopyDst); err != nil {
			return nil, err
		}
	}
	for _, p := range []*webgpu.Buffer{&b.tokens, &b.pos, &b.result, &b.slots, &b.rowSeq} {
		if *p, err = b.buffer("rows", int64(4*maxRows), webgpu.Storage|webgpu.CopyDst|webgpu.CopySrc); err != nil {
			return nil, err
		}
	}
	for _, p := range []*webgpu.Buffer{&b.rowLoRA, &b.outLoRA} {
		if *p, err = b.buffer("lora rows", int64(8*maxRows), webgpu.Storage|webgpu.CopyDst); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func (b *Backend) Name() string { return "webgpu" }

// Device returns the device the backend runs on.
func (b *Backend) Device() webgpu.Device { return b.dev }

// Describe says the backend runs on its WebGPU adapter
// (backend.Describer).
func (b *Backend) Describe() backend.Info {
	return backend.Info{Device: fmt.Sprintf("webgpu:%s (%s)", b.info.Adapter, b.info.Backend), GPU: true,
		MaxBinding: b.info.MaxStorageBufferBindingSize}
}

// CopyBandwidth measures the device's memory bandwidth
// (backend.BandwidthProber): the package's CopyBandwidth on b's device.
func (b *Backend) CopyBandwidth(bytes int64, iters int) (float64, error) {
	return webgpu.CopyBandwidth(b.dev, bytes, iters)
}

// NewSibling opens another backend on b's device (backend.Sibling), with
// the adapter's own plan: the device, its buffers' memory and the
// pipelines compiled so far are shared; b keeps owning the device.
func (b *Backend) NewSibling(maxRows int) (backend.Backend, error) { return NewBackend(b.dev, maxRows) }

func (b *Backend) Stats() backend.Stats {
	return backend.Stats{Memory: b.memory, Dispatches: b.rec.Dispatches(), ReadBytes: b.readBytes, Host: b.host, HostPlatform: b.hostPlatform}
}

func (b *Backend) buffer(label string, size int64, u webgpu.Usage) (webgpu.Buffer, error) {
	buf, err := b.dev.NewBuffer(label, max(size, 4), u)
	if err != nil {
		return nil, fmt.Errorf("gpu: allocate %s (%d bytes): %w", label, size, err)
	}
	b.owned = append(b.owned, buf)
	b.memory += buf.Size()
	return buf, nil
}

// Tensor is an f32 activation matrix in one storage buffer.
type Tensor struct {
	buf        webgpu.Buffer
	rows, cols int
	out        bool // one row per output row: its ops count rows with outStep
}

func (t *Tensor) Rows() int { return t.rows }
func (t *Tensor) Cols() int { return t.cols }

func (b *Backend) NewTensor(rows, cols int) (backend.Tensor, error) {
	if rows <= 0 || cols <= 0 {
		return nil, fmt.Errorf("gpu: tensor of %d×%d", rows, cols)
	}
	size := int64(rows) * int64(cols) * 4
	if size > b.info.MaxStorageBufferBindingSize {
		return nil, fmt.Errorf("gpu: activation of %d×%d exceeds the %s storage binding limit", rows, cols, dtype.FormatBytes(b.info.MaxStorageBufferBindingSize))
	}
	buf, err := b.buffer("activation", size, webgpu.Storage|webgpu.CopySrc|webgpu.CopyDst)
	if err != nil {
		return nil, err
	}
	return &Tensor{buf: buf, rows: rows, cols: cols}, nil
}

func (b *Backend) NewOutputTensor(rows, cols int) (backend.Tensor, error) {
	t, err := b.NewTensor(rows, cols)
	if err != nil {
		return nil, err
	}
	t.(*Tensor).out = true
	b.outputs[t.(*Tensor).buf] = true
	return t, nil
}

func (b *Backend) Write(t backend.Tensor, data []float32) error {
	ts := t.(*Tensor)
	if len(data) > ts.rows*ts.cols || len(data)%ts.cols != 0 {
		return fmt.Errorf("gpu: write of %d values into a %d×%d tensor", len(data), ts.rows, ts.cols)
	}
	b.seq++
	return b.dev.Write(ts.buf, 0, f32bytes(data))
}

// Weight is a model tensor on the device. A matrix too big for one storage
// binding is split by rows into parts, each its own buffer; ops dispatch once
// per part.
type Weight struct {
	shape   []int
	parts   []part
	storage backend.Storage // F32 unless made by UploadAs (quant.go)
	split   []int           // made by Fuse: the rows of each matrix (fused.go)
	whole   []int           // Project's split of an unfused weight: its rows, made on first use
	pairs   bool            // made by Fuse for a GLU: rows alternate between two matrices
	// Made by UploadExperts (moe.go): the rows of one expert; parts hold
	// whole experts.
	perExpert int
}

type part struct {
	buf        webgpu.Buffer // the values, or the codes of a grouped format
	scales     webgpu.Buffer // a grouped format's (quant.go) scale words
	row0, rows int           // the rows of the [out, in] matrix this part holds
	format     string        // f32, f16 or a grouped format (shaders.WeightFormats)
}

func (w *Weight) Shape() []int { return w.shape }

func (w *Weight) Bytes() int64 {
	var n int64
	for _, p := range w.parts {
		n += p.buf.Size()
		if p.scales != nil {
			n += p.scales.Size()
		}
	}
	return n
}

func (b *Backend) Upload(t *tensor.Tensor) (backend.Weight, error) {
	data, err := t.Float32()
	if err != nil {
		return nil, err
	}
	rows, cols := 1, t.Shape[len(t.Shape)-1]
	for _, d := range t.Shape[:len(t.Shape)-1] {
		rows *= d
	}
	rowBytes := int64(cols) * 4
	perPart := int(b.info.MaxStorageBufferBindingSize / rowBytes)
	if perPart == 0 {
		return nil, fmt.Errorf("gpu: a row of %s (%d bytes) exceeds the storage binding limit", t.Name, rowBytes)
	}
	w := &Weight{shape: t.Shape}
	for r0 := 0; r0 < rows; r0 += perPart {
		n := min(perPart, rows-r0)
		buf, err := b.weightBuffer(t.Name, int64(n)*rowBytes)
		if err != nil {
			return nil, err
		}
		if err := b.dev.Write(buf, 0, f32bytes(data[r0*cols:(r0+n)*cols])); err != nil {
			return nil, fmt.Errorf("gpu: upload %s: %w", t.Name, err)
		}
		w.parts = append(w.parts, part{buf: buf, row0: r0, rows: n})
	}
	return w, nil
}

// KV keeps each layer's keys and values in their own buffers, so that a
// large pool never needs one binding for all layers. A layer's buffer holds
// one record per (slot, kv head) in the cache's type (shaders/kv.inc.wgsl),
// slot s's first at s·heads·HeadBytes bytes.
type KV struct {
	shape   backend.KVShape
	context int    // slots per layer: blocks × blockSize
	format  string // shaders.Fusion.KV of the kernels that read and write it
	k, v    []webgpu.Buffer
	scratch webgpu.Buffer // one block, for CopyBlock
}

func (c *KV) Layers() int            { return c.shape.Layers }
func (c *KV) Blocks() int            { return c.shape.Blocks }
func (c *KV) BlockSize() int         { return c.shape.BlockSize }
func (c *KV) Shape() backend.KVShape { return c.shape }

// slotBytes is what one slot of a layer takes, keys or values.
func (c *KV) slotBytes() int64 { return int64(c.shape.Heads) * c.shape.Type.HeadBytes(c.shape.HeadDim) }

// kvFormats names each cache type as the kernels' templates do.
var kvFormats = map[backend.KVType]string{backend.KVF32: "", backend.KVF16: "f16", backend.KVInt8: "int8"}

func (b *Backend) NewKV(s backend.KVShape) (backend.KV, error) {
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("gpu: %w", err)
	}
	// A backend's caches (Gemma 4's, one a shape of layer) hold the
	// blocks of one pool: they share its block tables and slots. A
	// windowed cache has rings of its own size, reached through tables
	// of the pool's width.
	switch {
	case s.Windowed && b.tables == nil:
		return nil, fmt.Errorf("gpu: a windowed kv cache before the pool's")
	case !s.Windowed && b.tables != nil && s.Blocks != b.tableWidth:
		return nil, fmt.Errorf("gpu: a second kv cache of %d blocks, not the first's %d", s.Blocks, b.tableWidth)
	}
	c := &KV{shape: s, context: s.Blocks * s.BlockSize, format: kvFormats[s.Type]}
	size := int64(c.context) * c.slotBytes()
	if s.Layers > 0 && size > b.info.MaxStorageBufferBindingSize { // a cache of no layers is the pool's tables alone
		return nil, fmt.Errorf("gpu: one layer's kv cache (%s) exceeds the storage binding limit %s; use a smaller KV pool or a narrower --kv-type",
			dtype.FormatBytes(size), dtype.FormatBytes(b.info.MaxStorageBufferBindingSize))
	}
	// Every row's sequence can have a table as long as the pool.
	var err error
	switch {
	case b.tables == nil:
		if b.tables, err = b.buffer("block tables", int64(4*b.maxRows*s.Blocks), webgpu.Storage|webgpu.CopyDst); err != nil {
			return nil, err
		}
		b.tableWidth = s.Blocks
	case s.Windowed && b.windows == nil:
		if b.windows, err = b.buffer("window tables", int64(4*b.maxRows*b.tableWidth), webgpu.Storage|webgpu.CopyDst); err != nil {
			return nil, err
		}
		if b.windowSlots, err = b.buffer("window slots", int64(4*b.maxRows), webgpu.Storage|webgpu.CopyDst); err != nil {
			return nil, err
		}
	}
	for l := 0; l < s.Layers; l++ {
		k, err := b.buffer("k cache", size, webgpu.Storage|webgpu.CopySrc|webgpu.CopyDst)
		if err != nil {
			return nil, err
		}
		v, err := b.buffer("v cache", size, webgpu.Storage|webgpu.CopySrc|webgpu.CopyDst)
		if err != nil {
			return nil, err
		}
		c.k, c.v = append(c.k, k), append(c.v, v)
	}
	return c, nil
}

func (b *Backend) Begin(batch backend.Batch) error {
	n := batch.Len()
	if err := batch.Validate(b.maxRows); err != nil {
		return fmt.Errorf("gpu: %w", err)
	}
	if len(batch.Tables) > b.maxRows {
		return fmt.Errorf("gpu: %d sequences in a batch of at most %d rows", len(batch.Tables), b.maxRows)
	}
	if b.err != nil {
		return b.err
	}
	// Work recorded in the last step but not yet submitted reads the step
	// buffers when it runs: submit it before they change.
	if b.pending {
		if err := b.submit(); err != nil {
			return err
		}
	}
	b.startHost()
	b.traceAt = 0
	b.kept, b.keptRows = 0, 0
	b.beginEncoder()
	slots := make([]int32, n)
	for i := range slots {
		slots[i] = int32(batch.Slot(i))
	}
	var tables, windows, windowSlots []int32
	if b.tables != nil {
		tables = make([]int32, len(batch.Tables)*b.tableWidth)
		for s, t := range batch.Tables {
			if len(t) > b.tableWidth {
				return fmt.Errorf("gpu: block table of %d blocks in a pool of %d", len(t), b.tableWidth)
			}
			copy(tables[s*b.tableWidth:], t)
		}
	}
	if b.windows != nil && batch.Windows != nil { // Validate: as long as Tables
		windows = make([]int32, len(batch.Windows)*b.tableWidth)
		for s, t := range batch.Windows {
			copy(windows[s*b.tableWidth:], t)
		}
		windowSlots = windowSlotsOf(batch)
	}
	if batch.RopePos != nil {
		if err := b.ropePosBuffers(); err != nil {
			return err
		}
	}
	b.batch = batch
	step, outStep := make([]byte, 16), make([]byte, 16)
	binary.LittleEndian.PutUint32(step, uint32(n))
	binary.LittleEndian.PutUint32(outStep, uint32(len(batch.Out)))
	for _, w := range []struct {
		buf  webgpu.Buffer
		data []byte
	}{{b.step, step}, {b.outStep, outStep}, {b.tokens, i32bytes(batch.Tokens)}, {b.pos, i32bytes(batch.Pos)},
		{b.slots, i32bytes(slots)}, {b.rowSeq, i32bytes(batch.Seq)}, {b.tables, i32bytes(tables)},
		{b.windows, i32bytes(windows)}, {b.windowSlots, i32bytes(windowSlots)}, {b.seqState, i32bytes(batch.States)}, {b.rowLoRA, loraRowsIf(batch, false)}, {b.outLoRA, loraRowsIf(batch, true)}, {b.ropePos, i32bytes(batch.RopePos)}} {
		if w.buf == nil || len(w.data) == 0 {
			continue
		}
		if err := b.writeChanged(w.buf, w.data); err != nil {
			return fmt.Errorf("gpu: begin step: %w", err)
		}
	}
	return nil
}

// writeChanged writes data at the start of buf unless buf already holds
// it: from step to step of a decode most of the step's buffers (the row
// counts, each row's sequence, the block tables, the adapters' rows) do
// not change, and each write costs a copy in the step's commands (put).
// Only the buffers that nothing but Begin writes are remembered
// (stepConstant); writeStep forgets the ones a chain's copies overwrite.
func (b *Backend) writeChanged(buf webgpu.Buffer, data []byte) error {
	remember := b.stepConstant(buf)
	if last, ok := b.written[buf]; remember && ok && bytes.Equal(last, data) {
		return nil
	}
	if err := b.put(buf, 0, data); err != nil {
		delete(b.written, buf)
		return err
	}
	if remember {
		if b.written == nil {
			b.written = map[webgpu.Buffer][]byte{}
		}
		b.written[buf] = append(b.written[buf][:0], data...)
	}
	return nil
}

// stepConstant reports whether buf is one of the step's buffers that
// only the host writes, outside a chain: the tokens, positions and slots
// change every step, and Keep copies tokens on the device.
func (b *Backend) stepConstant(buf webgpu.Buffer) bool {
	switch buf {
	case b.step, b.outStep, b.rowSeq, b.tables, b.windows, b.seqState, b.rowLoRA, b.outLoRA:
		return true
	}
	return false
}

// rows is how many rows of t the current batch covers.
func (b *Backend) rows(t backend.Tensor) int {
	if t.(*Tensor).out {
		return min(t.Rows(), len(b.batch.Out))
	}
	return min(t.Rows(), b.batch.Len())
}

// Argmax runs the argmax kernel over the first n rows of x and reads back
// only the n indices.
func (b *Backend) Argmax(x backend.Tensor, n int) ([]int32, error) {
	xs := x.(*Tensor)
	if n > xs.rows || n > b.maxRows {
		return nil, fmt.Errorf("gpu: argmax of %d rows of a %d-row tensor", n, xs.rows)
	}
	o, wg := b.reduce(argmaxOp)
	b.record(o, params{uint32(xs.cols), wg}, []webgpu.Binding{{Buffer: xs.buf}, {Buffer: b.result}}, uint32(n), 1, 1)
	raw, err := b.flushRead(b.result, int64(4*n))
	if err != nil {
		return nil, err
	}
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return out, nil
}

// Mask uploads a row's token mask and records the mask kernel over it.
// Each row has its own place in the mask buffer, so every row of a step
// can be masked before one submission.
func (b *Backend) Mask(x backend.Tensor, row int, mask []uint32) {
	xs := x.(*Tensor)
	words := (xs.cols + 31) / 32
	if row < 0 || row >= xs.rows || len(mask) < words {
		b.fail(fmt.Errorf("gpu: mask of %d words for row %d of a %d×%d tensor", len(mask), row, xs.rows, xs.cols))
		return
	}
	size := int64(4 * words * xs.rows)
	if b.masks == nil || b.masks.Size() < size {
		var err error
		if b.masks, err = b.buffer("token masks", size, webgpu.Storage|webgpu.CopyDst); err != nil {
			b.fail(err)
			return
		}
	}
	raw := make([]byte, 4*words)
	for i, w := range mask[:words] {
		binary.LittleEndian.PutUint32(raw[4*i:], w)
	}
	if err := b.dev.Write(b.masks, int64(4*words*row), raw); err != nil {
		b.fail(err)
		return
	}
	gx, gy := b.grid(xs.cols, elementWG)
	b.record(maskOp, params{uint32(xs.cols), uint32(row)}, []webgpu.Binding{{Buffer: xs.buf}, {Buffer: b.masks}}, gx, gy, 1)
}

// TopK runs the topk kernel on row 0 of x and reads back only the k
// candidates.
func (b *Backend) TopK(x backend.Tensor, row, k int) ([]int32, []float32, error) {
	xs := x.(*Tensor)
	if k <= 0 || k > backend.MaxTopK || k > xs.cols || row < 0 || row >= xs.rows {
		return nil, nil, fmt.Errorf("gpu: top-%d of %d values in row %d of %d", k, xs.cols, row, xs.rows)
	}
	if b.cands == nil {
		var err error
		if b.cands, err = b.buffer("top-k candidates", 8*backend.MaxTopK, webgpu.Storage|webgpu.CopySrc); err != nil {
			return nil, nil, err
		}
	}
	b.record(topkOp, params{uint32(xs.cols), uint32(k), uint32(row)}, []webgpu.Binding{{Buffer: xs.buf}, {Buffer: b.cands}}, 1, 1, 1)
	raw, err := b.flushRead(b.cands, int64(8*k))
	if err != nil {
		return nil, nil, err
	}
	ids, vals := make([]int32, k), make([]float32, k)
	for i := range k {
		ids[i] = int32(binary.LittleEndian.Uint32(raw[4*i:]))
		vals[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*(k+i):]))
	}
	return ids, vals, nil
}

func (b *Backend) Read(x backend.Tensor, n int) ([]float32, error) {
	xs := x.(*Tensor)
	raw, err := b.flushRead(xs.buf, int64(n*xs.cols*4))
	if err != nil {
		return nil, err
	}
	out := make([]float32, n*xs.cols)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return out, nil
}

// flushRead submits what was recorded and reads size bytes of buf.
func (b *Backend) flushRead(buf webgpu.Buffer, size int64) ([]byte, error) {
	if b.err != nil {
		return nil, b.err
	}
	if err := b.submit(); err != nil {
		return nil, err
	}
	b.readBytes += size
	return b.dev.Read(buf, 0, size)
}

// Keep records the argmax of the first n rows of x, then copies the ids
// into the token buffer (the next chained step's input) and into the
// history that Kept reads back.
func (b *Backend) Keep(x backend.Tensor, n int) {
	xs := x.(*Tensor)
	if b.kept >= backend.MaxChain || n > b.maxRows {
		b.fail(fmt.Errorf("gpu: chain of more than %d steps of at most %d rows", backend.MaxChain, b.maxRows))
		return
	}
	if err := b.chainBuffers(); err != nil {
		b.fail(err)
		return
	}
	o, wg := b.reduce(argmaxOp)
	b.record(o, params{uint32(xs.cols), wg}, []webgpu.Binding{{Buffer: xs.buf}, {Buffer: b.result}}, uint32(n), 1, 1)
	b.keepResult(n)
}

// keepResult copies the n ids in result into the token buffer (the next
// chained step's input) and into the history that Kept reads back.
func (b *Backend) keepResult(n int) {
	size := int64(4 * n)
	b.rec.Copy(b.result, 0, b.tokens, 0, size)
	b.rec.Copy(b.result, 0, b.history, int64(4*b.kept*n), size) // a chain's steps all have n rows
	b.kept++
	b.keptRows = n
}

// BeginChained starts the next step of a chain: its positions and slots are
// put (upload.go), so that the command stream copies them into place
// between the previous step's work and this one's.
func (b *Backend) BeginChained(batch backend.Batch) error {
	n := batch.Len()
	switch {
	case b.err != nil:
		return b.err
	case b.kept == 0 || n != b.keptRows || b.kept >= backend.MaxChain:
		return fmt.Errorf("gpu: chained step of %d rows after %d kept steps of %d rows", n, b.kept, b.keptRows)
	}
	if err := batch.Validate(b.maxRows); err != nil {
		return fmt.Errorf("gpu: %w", err)
	}
	if batch.RopePos != nil {
		if err := b.ropePosBuffers(); err != nil {
			return err
		}
	}
	b.startHost()
	slots := make([]int32, n)
	for i := range slots {
		slots[i] = int32(batch.Slot(i))
	}
	// The first step may have had more rows (prompt chunks): the row
	// count and each row's sequence change too.
	step := make([]byte, 16)
	binary.LittleEndian.PutUint32(step, uint32(n))
	// A chained step's rows are its output rows: one Row layout serves both.
	loraRows := loraRowsIf(batch, false)
	for _, w := range []struct {
		buf  webgpu.Buffer
		data []byte
	}{{b.pos, i32bytes(batch.Pos)}, {b.slots, i32bytes(slots)},
		{b.rowSeq, i32bytes(batch.Seq)}, {b.step, step},
		{b.windowSlots, i32bytes(windowSlotsOf(batch))},
		{b.ropePos, i32bytes(batch.RopePos)},
		{b.rowLoRA, loraRows}, {b.outLoRA, loraRows}} {
		if w.buf == nil || len(w.data) == 0 { // no windowed cache, no rotary positions, no adapters
			continue
		}
		if err := b.writeStep(w.buf, w.data); err != nil {
			return err
		}
	}
	b.pending = true
	b.batch = batch
	return nil
}

// windowSlotsOf is each row's slot in the windowed caches' rings, or nil
// when the batch has no window tables. The chain's later steps keep the
// first step's tables (their rows are its sequences): only the slots
// change.
func windowSlotsOf(batch backend.Batch) []int32 {
	if batch.Windows == nil {
		return nil
	}
	slots := make([]int32, batch.Len())
	for i := range slots {
		slots[i] = int32(batch.SlotIn(backend.KVShape{Windowed: true}, i))
	}
	return slots
}

// writeStep writes data at the start of buf for the step being recorded:
// through the command stream (put), so that in a chain's later steps the
// earlier steps' work, recorded but not yet run, still reads what it was
// recorded with.
func (b *Backend) writeStep(buf webgpu.Buffer, data []byte) error {
	delete(b.written, buf) // it changes behind writeChanged
	return b.put(buf, 0, data)
}

// Kept submits the chain and reads back every kept id.
func (b *Backend) Kept() ([]int32, error) {
	if b.kept == 0 {
		return nil, nil
	}
	size := int64(4 * b.kept * b.keptRows)
	read := size
	sampled := b.smp != nil && b.smp.chained
	if sampled { // each row's draws used come with the ids
		b.rec.Copy(b.smp.state, 0, b.history, size, int64(8*b.keptRows))
		b.smp.chained = false
		read += int64(8 * b.keptRows)
	}
	raw, err := b.flushRead(b.history, read)
	if err != nil {
		return nil, err
	}
	if sampled {
		b.smp.kept = drawn(raw[size:], b.keptRows)
	}
	out := make([]int32, 0, b.kept*b.keptRows)
	for s := range b.kept {
		for r := range b.keptRows {
			out = append(out, int32(binary.LittleEndian.Uint32(raw[4*(s*b.keptRows+r):])))
		}
	}
	return out, nil
}

// chainBuffers makes the buffers of chained decoding on first use.
func (b *Backend) chainBuffers() error {
	if b.history != nil {
		return nil
	}
	// The ids of every step, and a sampled chain's state (sampling.go).
	size := int64(4*backend.MaxChain*max(b.maxRows, 4) + 8*max(b.maxRows, 4))
	var err error
	b.history, err = b.buffer("chain", size, webgpu.CopySrc|webgpu.CopyDst)
	return err
}

// ropePosBuffers makes the rotary positions' buffer (4 i32 a row) for the
// first batch that has them.
func (b *Backend) ropePosBuffers() error {
	if b.ropePos != nil {
		return nil
	}
	var err error
	b.ropePos, err = b.buffer("rope positions", int64(16*b.maxRows), webgpu.Storage|webgpu.CopyDst)
	return err
}

// submit submits what was recorded.
func (b *Backend) submit() error {
	b.pending = false
	if err := b.writeUploads(); err != nil {
		b.err = err
		return err
	}
	platform := b.rec.PlatformTime()
	err := b.rec.Submit()
	if !b.hostStart.IsZero() {
		b.host += time.Since(b.hostStart)
		b.hostPlatform += b.rec.PlatformTime() - platform
		b.hostStart = time.Time{}
	}
	if err != nil {
		return fmt.Errorf("gpu: submit: %w", err)
	}
	return nil
}

// startHost marks the start of a step's recording (Stats.Host).
func (b *Backend) startHost() {
	if b.hostStart.IsZero() {
		b.hostStart = time.Now()
	}
}

// OwnDevice makes Close close the device too: for a backend that was
// given a device opened for it alone.
func (b *Backend) OwnDevice() { b.ownsDevice = true }

func (b *Backend) Close() error {
	for _, c := range b.calls {
		c.group.Release()
	}
	for _, buf := range b.owned {
		buf.Release()
	}
	b.calls, b.owned, b.trace = nil, nil, nil
	if b.ownsDevice {
		b.dev.Close()
	}
	return nil
}

// op names a kernel and the access of its operand bindings. Every kernel
// binds the Step uniform at 0 and its own parameters at 1; operands follow.
type op struct {
	kernel   string
	operands []webgpu.Access
	consts   map[string]float64
	fusion   shaders.Fusion // what a matrix product is composed with (fused.go)
}

// forKV returns o specialised to the type of cache c (kv.inc.wgsl).
func (o op) forKV(c *KV) op {
	o.fusion.KV = c.format
	return o
}

// compose is fused without the cache.
func (o op) compose(f shaders.Fusion) op {
	o.fusion = f
	o.operands = slices.Clone(o.operands)
	for _, a := range f.Extra() {
		switch a {
		case "uniform":
			o.operands = append(o.operands, webgpu.UniformBinding)
		case "read_write":
			o.operands = append(o.operands, webgpu.ReadWrite)
		default:
			o.operands = append(o.operands, webgpu.ReadOnly)
		}
	}
	return o
}

// params are a kernel's static parameters: 4-byte values (u32, or f32 as
// bits), laid out as the kernel's Params struct.
type params []uint32

func f32param(v float32) uint32 { return math.Float32bits(v) }

// paramsSize is the least size of a kernel's parameter buffer: more than
// the largest Params struct of the kernels.
const paramsSize = 64

// callKey identifies one recorded call site: the same op with the same
// operands and parameters reuses its bind group. It is made at every
// dispatch, so it is made of values, not of strings built for it: the
// kernel's name and fusion as they are, and the parameters inline.
type callKey struct {
	kernel string
	fusion shaders.Fusion
	params paramKey
	ops    [maxBindings]webgpu.Binding
}

// maxBindings is the most operands a call binds.
const maxBindings = 12

// paramKey is params as a map key: up to 16 values inline (paramsSize's
// worth), longer lists as their bytes.
type paramKey struct {
	n    int
	vals [paramsSize / 4]uint32
	more string
}

func keyOf(p params) paramKey {
	k := paramKey{n: len(p)}
	if len(p) > len(k.vals) {
		k.more = string(u32bytes(p))
		return k
	}
	copy(k.vals[:], p)
	return k
}

// name is the kernel variant the call runs (Backend.Kernels).
func (k callKey) name() string { return k.kernel + k.fusion.String() }

type call struct {
	pipe  webgpu.Pipeline
	group webgpu.BindGroup
}

// record queues kernel o over x×y×z workgroups. Errors are kept and
// returned by the next Begin, Argmax or Read, so that op methods stay
// error-free like the CPU reference.
func (b *Backend) record(o op, p params, operands []webgpu.Binding, x, y, z uint32) {
	if b.err != nil {
		return
	}
	if sg := b.subgroups(); sg > 0 && slices.Contains(shaders.SubgroupKernels, o.kernel) {
		o.fusion.Subgroups = sg
	}
	if b.f16() && slices.Contains(shaders.F16Kernels, o.kernel) && (o.fusion.KV == "f16" || !slices.Contains(shaders.KVKernels, o.kernel)) {
		o.fusion.F16 = true
	}
	key := callKey{kernel: o.kernel, fusion: o.fusion, params: keyOf(p)}
	copy(key.ops[:], operands)
	c, err := b.lookup(&key, o, p, operands)
	if err != nil {
		b.err = fmt.Errorf("gpu: %s: %w", o.kernel, err)
		return
	}
	if x == 0 || y == 0 || z == 0 {
		return
	}
	b.rec.Dispatch(c.pipe, c.group, x, y, z)
	b.pending = true
	b.seq++
	if b.plan.Fault != "" && len(operands) > 0 && key.name() == b.plan.Fault {
		b.record(scaleOp, params{faultValues, 1, 0, f32param(1.5)}, operands[:1], 1, 1, 1)
	}
}

// tracedCall is a call as a step made it (Backend.trace).
type tracedCall struct {
	key  callKey
	call *call
}

// maxTrace bounds Backend.trace: a step of more calls looks the rest up.
const maxTrace = 4096

// lookup returns the call of key, made the first time. A decode step
// makes the calls the step before it made, in the same order, so the key
// is first compared with the one at its place in the trace: equal, it
// costs a comparison of its bytes, where the map would hash them and
// every operand's dynamic type (a third of the host's Go time a
// dispatch before the trace).
func (b *Backend) lookup(key *callKey, o op, p params, operands []webgpu.Binding) (*call, error) {
	at := b.traceAt
	b.traceAt++
	if at < len(b.trace) && b.trace[at].key == *key {
		return b.trace[at].call, nil
	}
	c, ok := b.calls[*key]
	if !ok {
		var err error
		if c, err = b.newCall(o, p, operands); err != nil {
			return nil, err
		}
		b.calls[*key] = c
	}
	switch {
	case at < len(b.trace):
		b.trace[at] = tracedCall{*key, c}
	case at == len(b.trace) && at < maxTrace:
		b.trace = append(b.trace, tracedCall{*key, c})
	}
	return c, nil
}

// subgroups is the subgroup size the kernels of shaders.SubgroupKernels
// are specialised to (shaders.Fusion.Subgroups), or 0 for their plain
// forms: the device's smallest subgroup size where it has subgroups and
// the plan does not turn them off. An adapter that does not say its
// sizes gets WGSL's smallest, 4, which every subgroup has.
func (b *Backend) subgroups() int {
	if !b.info.Subgroups || b.plan.Subgroups == "off" {
		return 0
	}
	size := 4
	for _, s := range shaders.SubgroupSizes {
		if s <= int(b.info.SubgroupMinSize) {
			size = s // the largest power of two it holds, at most 128
		}
	}
	return size
}

// f16 reports whether the kernels of shaders.F16Kernels take their f16
// forms (shaders.Fusion.F16): where the device has shader-f16 and its
// compiler takes f16 code (Info.ShaderF16; never natively with
// cogentcore/webgpu v0.23.0, whose naga does not) and the plan does not
// turn them off.
func (b *Backend) f16() bool { return b.info.ShaderF16 && b.plan.F16 != "off" }

// KernelPath names the kernels that run, for a label: "f32" (every
// kernel computes in f32; f16 weights and caches are unpacked to f32
// inside them), "+subgroups" where the reductions take their subgroup
// variants, and "+f16" once a kernel has run in its f16 form (those
// of f16 weights and caches, on a device with shader-f16).
func (b *Backend) KernelPath() string {
	path := "f32"
	if b.subgroups() > 0 {
		path += "+subgroups"
	}
	if b.f16() && slices.ContainsFunc(slices.Collect(maps.Keys(b.calls)), func(k callKey) bool { return k.fusion.F16 }) {
		path += "+f16"
	}
	return path
}

// Kernels lists the kernel variants (name and fusion) this backend has
// dispatched, sorted.
func (b *Backend) Kernels() []string {
	seen := map[string]bool{}
	for k := range b.calls {
		seen[k.name()] = true
	}
	return slices.Sorted(maps.Keys(seen))
}

func (b *Backend) newCall(o op, p params, operands []webgpu.Binding) (*call, error) {
	src, err := shaders.Compose(o.kernel, o.fusion)
	if err != nil {
		return nil, err
	}
	access := append([]webgpu.Access{webgpu.UniformBinding, webgpu.UniformBinding}, o.operands...)
	if len(access) != len(operands)+2 {
		return nil, fmt.Errorf("%d operands bound to %d slots", len(operands), len(o.operands))
	}
	pipe, err := b.dev.Pipeline(webgpu.Kernel{Name: o.kernel + o.fusion.String(), Source: src, Bindings: access, Constants: o.consts})
	if err != nil {
		return nil, err
	}
	raw := u32bytes(p)
	// Uniform structs are 16-byte multiples; and every parameter buffer
	// is at least paramsSize, since wgpu-native checks a dispatch's buffer
	// sizes against those of the previous pipeline when the two share a
	// layout (a 28-byte matmul Params demanded of rmsnorm's 12).
	raw = append(raw, make([]byte, max(paramsSize-len(raw), (16-len(raw)%16)%16))...)
	pbind, err := b.paramSlot(raw)
	if err != nil {
		return nil, err
	}
	step := b.step
	if len(operands) > 0 && b.outputs[operands[0].Buffer] {
		step = b.outStep // the destination has one row per output
	}
	binds := append([]webgpu.Binding{{Buffer: step}, pbind}, operands...)
	g, err := b.dev.BindGroup(pipe, binds)
	if err != nil {
		return nil, err
	}
	return &call{pipe: pipe, group: g}, nil
}

// paramSlotAlign is where a call's parameters may start in the shared
// parameter buffer: WebGPU's largest minUniformBufferOffsetAlignment, so
// every device takes it.
const paramSlotAlign = 256

// paramArenaSize is the size of each shared parameter buffer: 256 calls'
// parameters.
const paramArenaSize = 64 << 10

// paramSlot writes a call's parameters into the shared parameter buffer
// and returns their binding. The calls share a few buffers instead of
// having one each because wgpu tracks every buffer a submission uses, at
// every submission and again when it retires: with one buffer per call,
// the parameter buffers were most of the buffers a decode step used.
func (b *Backend) paramSlot(raw []byte) (webgpu.Binding, error) {
	n := (int64(len(raw)) + paramSlotAlign - 1) / paramSlotAlign * paramSlotAlign
	if b.paramArena == nil || b.paramUsed+n > b.paramArena.Size() {
		buf, err := b.buffer("params", max(paramArenaSize, n), webgpu.Uniform|webgpu.CopyDst)
		if err != nil {
			return webgpu.Binding{}, err
		}
		b.paramArena, b.paramUsed = buf, 0
	}
	at := b.paramUsed
	if err := b.dev.Write(b.paramArena, at, raw); err != nil {
		return webgpu.Binding{}, err
	}
	b.paramUsed += n
	return webgpu.Binding{Buffer: b.paramArena, Offset: at, Size: int64(len(raw))}, nil
}

// grid spreads n invocations of workgroups of size wg over x and y, since
// one dimension holds at most MaxComputeWorkgroupsPerDimension groups.
// Kernels recover the flat index as id.x + id.y * num_workgroups.x * wg.
func (b *Backend) grid(n, wg int) (x, y uint32) {
	groups := (n + wg - 1) / wg
	limit := int(b.info.MaxComputeWorkgroupsPerDimension)
	if limit <= 0 {
		limit = 65535
	}
	if groups <= limit {
		return uint32(groups), 1
	}
	return uint32(limit), uint32((groups + limit - 1) / limit)
}

func f32bytes(v []float32) []byte {
	var buf bytes.Buffer
	buf.Grow(4 * len(v))
	binary.Write(&buf, binary.LittleEndian, v)
	return buf.Bytes()
}

func i32bytes(v []int32) []byte {
	out := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(out[4*i:], uint32(x))
	}
	return out
}

func u32bytes(v []uint32) []byte {
	out := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(out[4*i:], x)
	}
	return out
}

var _ backend.Backend = (*Backend)(nil)

// Parts reports how many buffers hold w: more than one when w is larger than
// the device's storage binding limit.
func Parts(w backend.Weight) int { return len(w.(*Weight).parts) }

// View returns t's first rows·cols values as a rows × cols tensor over
// the same buffer (backend.Viewer).
func (b *Backend) View(t backend.Tensor, rows, cols int) (backend.Tensor, error) {
	x := t.(*Tensor)
	if x.out {
		return nil, fmt.Errorf("gpu: a view of an output tensor")
	}
	return &Tensor{buf: x.buf, rows: rows, cols: cols}, nil
}
