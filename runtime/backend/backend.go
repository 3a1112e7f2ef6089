// Package backend is the seam between the engine and the hardware: the few
// tensor operations a transformer forward pass is made of. The engine writes
// the forward pass once against this interface; runtime/cpu runs each op
// immediately in Go (the reference every kernel is tested against), and
// runtime/gpu records each op as a WGSL dispatch and submits a whole step at
// once.
//
// Activations are f32 matrices of rows × cols, allocated once for the largest
// batch. An op works on the first n rows of its operands, where n is the
// number of tokens in the current Batch, capped by the rows the destination
// was allocated with. Output tensors (NewOutputTensor) hold one row per
// output of the batch instead (Batch.Out): the rows whose logits are wanted.
//
// The seam is the engine's only door to the hardware: what the engine
// needs to know of a backend's device is asked through optional
// interfaces (device.go: Describe, CopyBandwidth, NewSibling), never by
// type. The model tensors it uploads are models/tensor's, a leaf, so that
// neither the seam nor a backend imports the model loaders.
package backend

import (
	"fmt"
	"math"
	"time"

	"github.com/tessera-llm/tessera/models/tensor"
)

// Tensor is a backend-owned f32 activation matrix.
type Tensor interface {
	Rows() int
	Cols() int
}

// Weight is a model tensor uploaded to the backend, possibly converted to
// the backend's preferred storage type.
type Weight interface {
	Shape() []int // row-major, [out, in] for matrices
	Bytes() int64 // as stored by the backend
}

// KV is a paged key/value cache: for each layer, Blocks blocks of
// BlockSize token slots, each holding the keys and values of every kv head
// in the cache's type (KVShape). Block b holds slots b*BlockSize up to
// (b+1)*BlockSize in every layer; sequences reach their slots through block
// tables (see Batch).
type KV interface {
	Layers() int
	Blocks() int
	BlockSize() int
	Shape() KVShape
}

// Batch is the input of one forward step: the tokens to process, the
// sequence of each and its position there. Row i belongs to sequence
// Seq[i], whose block table is Tables[Seq[i]]: position p of that sequence
// lives in slot Tables[Seq[i]][p/BlockSize]*BlockSize + p%BlockSize of the
// cache. Row i attends to positions 0..Pos[i] of its sequence; rows of one
// sequence come in order of position.
type Batch struct {
	Tokens    []int32
	Pos       []int32
	Seq       []int32
	Tables    [][]int32
	BlockSize int
	// Out lists the rows whose logits the step computes, in order; output
	// tensors have one row per entry.
	Out []int32
	// Adapter is, for each row, the LoRA slot its sequence runs with (-1
	// for none), and AdapterScale the row's multiplier of that adapter's
	// own scale; both nil when no row has an adapter. AddLoRA reads them,
	// so that one batch mixes sequences of different adapters and none.
	Adapter      []int32
	AdapterScale []float32
	// Types is each row's token type (segment), for encoders that embed
	// it (BERT: 0 for the first text of a pair, 1 for the second); nil
	// means type 0 for every row. Lookup(ByType) reads it.
	Types []int32
	// States is, for each sequence (as Tables), the slot of its recurrent
	// state (recurrent.go) or of its ring in a windowed cache; nil for a
	// model without linear layers or a windowed cache.
	States []int32
	// Windows is, for each sequence, its block table in the windowed
	// caches (KVShape.Windowed), as long as its entry in Tables: logical
	// block j of a sequence whose ring is slot s of R blocks is block
	// s·R + j mod R there (RingTable). Ops on a windowed cache read these
	// tables, every other op Tables; nil when the model has no windowed
	// cache.
	Windows [][]int32
	// RopePos is, for multi-axis rotations (Rope.Sections: Qwen-VL's
	// M-RoPE), row i's four positions at 4i..4i+3 (time, height, width
	// and a fourth, as llama.cpp's positions of an image's tokens); nil
	// turns every axis of row i by Pos[i] (text, whose four are equal).
	RopePos []int32
}

// LoRA holds the low-rank adapters of the weights that share one input x
// (q, k and v; gate and up; or one weight alone), weight k being
// [outs[k], in], in slots that Batch.Adapter indexes: slot j adds
// Scale·B·A of its adapter of weight k to that weight, for the rows that
// name it. Grouping the weights of one input lets a backend compute x·Aᵀ
// for all of them in one product (Punica's fused shrink).
type LoRA interface {
	Slots() int
	// MaxRank is the largest rank of one slot, summed over the weights.
	MaxRank() int
	// Outs is the weights' widths (their rows).
	Outs() []int
}

// LoRASlot is one adapter of a weight: A is [Rank, in] and B [out, Rank],
// row-major. A slot of rank 0 adapts nothing (an adapter that does not
// target this weight).
type LoRASlot struct {
	Rank  int
	A, B  []float32
	Scale float32
}

// CheckLoRA reports slots (slots[j][k]: slot j's adapter of weight k)
// whose shapes do not fit weights [outs[k], in].
func CheckLoRA(slots [][]LoRASlot, in int, outs []int) error {
	for j, ws := range slots {
		if len(ws) != len(outs) {
			return fmt.Errorf("lora slot %d: %d weights, want %d", j, len(ws), len(outs))
		}
		for k, s := range ws {
			if s.Rank < 0 || len(s.A) != s.Rank*in || len(s.B) != outs[k]*s.Rank {
				return fmt.Errorf("lora slot %d weight %d: rank %d with A of %d and B of %d values for %d×%d", j, k, s.Rank, len(s.A), len(s.B), outs[k], in)
			}
		}
	}
	return nil
}

// HasAdapters reports whether some row of the batch runs with an adapter.
func (b Batch) HasAdapters() bool {
	for _, a := range b.Adapter {
		if a >= 0 {
			return true
		}
	}
	return false
}

// Index names the per-row index of a batch that Lookup reads.
type Index int

const (
	ByPos  Index = iota // Batch.Pos
	ByType              // Batch.Types
)

// Ends returns, for each row, the last position of its sequence in the
// batch: how far a bidirectional row attends (Attention.Bidirectional).
func (b Batch) Ends() []int32 {
	last := make([]int32, len(b.Tables))
	for i, s := range b.Seq {
		last[s] = max(last[s], b.Pos[i])
	}
	ends := make([]int32, len(b.Seq))
	for i, s := range b.Seq {
		ends[i] = last[s]
	}
	return ends
}

// Len is the number of tokens in the batch.
func (b Batch) Len() int { return len(b.Tokens) }

// Rope describes one rotary position embedding application.
type Rope struct {
	Heads, HeadDim int
	Dim            int // leading dimensions of each head that rotate
	Theta          float64
	Layout         tensor.RopeLayout
	Factors        []float32 // per-pair frequency divisors (Llama 3.1, YaRN, LongRoPE), or nil
	// Scale multiplies the cosine and sine of every angle, so the rotated
	// dimensions of q and k (not the others of a partial rotation): YaRN's
	// and LongRoPE's attention factor. 0 means 1.
	Scale float32
	// Sections, when any is non-zero, makes the rotation multi-axis
	// (Qwen-VL's M-RoPE, llama.cpp's rope_multi): rotation pair i turns
	// by its row's position on axis Axis(i) (Batch.RopePos), the pairs
	// given to the four axes by these counts in the manner of Axes.
	// Multi-axis rotations turn halves (Layout is RopeHalves).
	Sections [4]int
	Axes     RopeAxes
}

// RopeAxes is how a multi-axis rotation gives its pairs to the axes.
type RopeAxes int

const (
	// MRope: Sections[0] pairs on the first axis, then Sections[1] on the
	// second and so on (Qwen2-VL's language model; llama.cpp's
	// GGML_ROPE_TYPE_MROPE).
	MRope RopeAxes = iota
	// IMRope: the first three axes interleaved pair by pair, each for
	// three times its count of pairs (Qwen3-VL's; GGML_ROPE_TYPE_IMROPE).
	IMRope
	// VisionRope: as MRope, but each section's frequencies start again
	// at the base, over Dim/2 (Qwen-VL's vision tower: row and column;
	// GGML_ROPE_TYPE_VISION).
	VisionRope
)

// Multi reports whether the rotation is multi-axis.
func (r Rope) Multi() bool { return r.Sections != [4]int{} }

// Axis is the axis (0..3) whose position turns rotation pair i of a
// multi-axis rotation, as ggml's mrope cache assigns it.
func (r Rope) Axis(i int) int {
	s := r.Sections
	sector := i % (s[0] + s[1] + s[2] + s[3])
	if r.Axes == IMRope {
		switch {
		case sector%3 == 1 && sector < 3*s[1]:
			return 1
		case sector%3 == 2 && sector < 3*s[2]:
			return 2
		case sector%3 == 0 && sector < 3*s[0]:
			return 0
		}
		return 3
	}
	switch {
	case sector < s[0]:
		return 0
	case sector < s[0]+s[1]:
		return 1
	case sector < s[0]+s[1]+s[2]:
		return 2
	}
	return 3
}

// sectionStart is the first pair of the section of a VisionRope that
// holds pair i.
func (r Rope) sectionStart(i int) int {
	start := 0
	for _, n := range r.Sections[:r.Axis(i)] {
		start += n
	}
	return start
}

// Mscale is the multiplier of the cosines and sines: Scale, or 1.
func (r Rope) Mscale() float32 {
	if r.Scale == 0 {
		return 1
	}
	return r.Scale
}

// Attention describes the shape of one attention op.
type Attention struct {
	Heads, KVHeads, HeadDim int
	Scale                   float32 // applied to q·k, usually 1/sqrt(HeadDim)
	// Softcap, when positive, squashes each scaled score s to
	// Softcap·tanh(s/Softcap) before the softmax (Gemma 2).
	Softcap float32
	// Window, when positive, limits row i to the last Window positions:
	// Pos[i]-Window+1..Pos[i] (sliding-window layers).
	Window int
	// Sinks, when set, holds a logit per query head ([Heads], F32) that
	// joins each row's softmax without a value (gpt-oss's attention
	// sinks): weights exp(s_t)/(Σ exp(s_t) + exp(sink)).
	Sinks Weight
	// Bidirectional lets row i see every position of its sequence that
	// the batch holds, 0..Batch.Ends()[i], instead of 0..Pos[i] (encoders:
	// each sequence is whole in its batch, and its keys and values are
	// stored before it attends).
	Bidirectional bool
}

// First is the first position that a row at position pos attends to.
func (a Attention) First(pos int) int {
	if a.Window > 0 {
		return max(0, pos-a.Window+1)
	}
	return 0
}

// Backend runs the ops of a forward pass. An op's destination never
// aliases its inputs (a GPU cannot bind one buffer both ways in a dispatch);
// ops that update in place (Add, GLU, Rope, Scale, Softcap) say so. Ops are queued in call order and
// may run later (the GPU records them); Argmax and Read wait for everything
// queued before them. A Backend is used by one goroutine at a time.
type Backend interface {
	Name() string

	// Upload makes a model tensor available to the ops, as F32.
	Upload(t *tensor.Tensor) (Weight, error)
	// UploadAs makes a model tensor available in the given storage. F16
	// and Int4 apply to matrices (a 2-D [out, in] tensor, read by MatMul
	// and Embed), not to vectors.
	UploadAs(t *tensor.Tensor, s Storage) (Weight, error)
	// NewTensor allocates an activation of rows × cols, one row per token.
	NewTensor(rows, cols int) (Tensor, error)
	// NewOutputTensor allocates rows × cols with one row per output row of
	// the batch (Batch.Out).
	NewOutputTensor(rows, cols int) (Tensor, error)
	// NewKV allocates a paged cache of the given shape.
	NewKV(s KVShape) (KV, error)

	// Begin starts a step over batch: the ops that follow see its tokens,
	// positions and length.
	Begin(b Batch) error

	// Embed sets row i of dst to row Tokens[i] of the table.
	Embed(dst Tensor, table Weight)
	// RMSNorm sets dst = x / rms(x) * w, row by row.
	RMSNorm(dst, x Tensor, w Weight, eps float32)
	// MatMul sets dst = x · wᵀ for w of shape [out, in].
	MatMul(dst, x Tensor, w Weight)
	// Rope rotates the heads of x in place by each row's position.
	Rope(x Tensor, r Rope)
	// StoreKV writes k and v of each row into layer l of the cache at the
	// slot of the row's position, converted to the cache's type.
	StoreKV(kv KV, l int, k, v Tensor)
	// Attend sets dst to causal attention of q over layer l of the cache:
	// row i sees positions 0..Pos[i] of its sequence.
	Attend(dst, q Tensor, kv KV, l int, a Attention)
	// CopyBlock copies block src of every layer to block dst (copy on
	// write of a shared block). It is ordered with the ops around it.
	CopyBlock(kv KV, src, dst int)
	// AddBias adds bias b to every row of x, in place.
	AddBias(x Tensor, b Weight)
	// HeadNorm RMS-normalises each head of each row of x in place, with
	// one weight of headDim values shared by the heads.
	HeadNorm(x Tensor, w Weight, headDim int, eps float32)
	// GLU sets gate = act(gate) * up: SwiGLU with SiLU, GeGLU with
	// GELUTanh; with SwiGLUOAI gpt-oss's clamped form (tensor.SwiGLUOAI).
	GLU(gate, up Tensor, act tensor.Activation)
	// Scale multiplies x by s, in place.
	Scale(x Tensor, s float32)
	// Softcap sets x = cap·tanh(x/cap), in place, for cap > 0.
	Softcap(x Tensor, cap float32)
	// Add sets dst += x.
	Add(dst, x Tensor)
	// CopyRow copies row src of x into row dst of t.
	CopyRow(t Tensor, dst int, x Tensor, src int)

	// The ops below serve encoders (BERT, nomic-bert) and pooling.

	// Lookup sets row i of dst to row idx[i] of table (F32), idx being
	// the batch's positions (ByPos: absolute position embeddings) or
	// token types (ByType).
	Lookup(dst Tensor, table Weight, by Index)
	// LayerNorm sets dst = (x - mean(x)) / sqrt(var(x) + eps) * w + b,
	// row by row.
	LayerNorm(dst, x Tensor, w, b Weight, eps float32)
	// Activate sets x = act(x), in place.
	Activate(x Tensor, act tensor.Activation)
	// MeanPool sets row s of dst to the mean of the rows of x that belong
	// to sequence s, for each sequence s < len(Batch.Tables) (a sequence
	// without rows gets zeros).
	MeanPool(dst, x Tensor)

	// The fused ops (fused.go): several of the ops above in one kernel.
	Fuser
	// The mixture-of-experts ops (moe.go).
	Experts
	// The linear-attention ops (recurrent.go).
	Recurrences

	// NewLoRA makes an empty set of adapters for weights [outs[k], in]
	// that share their input.
	NewLoRA(in int, outs ...int) (LoRA, error)
	// SetLoRA replaces the adapters of l by slots: slots[j][k] is slot
	// j's (what Batch.Adapter's j names) adapter of weight k. It must not
	// be called between Begin and the read that ends the step.
	SetLoRA(l LoRA, slots [][]LoRASlot) error
	// AddLoRA adds to each row i of dsts[k] (= x·w_kᵀ, just computed)
	// whose adapter j = Batch.Adapter[i] is >= 0: AdapterScale[i]·Scale·
	// (x_i·Aᵀ)·Bᵀ of slot j's adapter of weight k. The dsts are all batch
	// tensors or all output tensors (row i is then the batch's row Out[i]).
	AddLoRA(x Tensor, l LoRA, dsts ...Tensor)
	// EmbedLoRA is AddLoRA for the token embeddings (l of one weight,
	// [Dim, Vocab]: a lookup is the product of the one-hot token): it adds
	// to each row i of dst (the batch's embeddings, just looked up) whose
	// adapter j = Batch.Adapter[i] is >= 0 AdapterScale[i]·Scale·B·A[:, t]
	// of slot j's adapter, t = Batch.Tokens[i].
	EmbedLoRA(dst Tensor, l LoRA)

	// Write sets the first len(data)/cols rows of t.
	Write(t Tensor, data []float32) error
	// Mask sets the values of row row of x whose bit in mask is clear to
	// -Inf (bit i%32 of mask[i/32] stands for column i), in place: a
	// grammar's token mask, applied on the device before Argmax, TopK or
	// Read so that greedy constrained decoding still reads back only ids.
	// mask holds (cols+31)/32 words.
	Mask(x Tensor, row int, mask []uint32)
	// Argmax returns, for each of the first n rows of x, the index of the
	// largest value (the lowest index among equals).
	Argmax(x Tensor, n int) ([]int32, error)
	// TopK returns the k largest values of the given row of x and their
	// indices, largest first, the lower index first among equals
	// (k <= MaxTopK).
	TopK(x Tensor, row, k int) (ids []int32, vals []float32, err error)
	// Read returns the first n rows of x.
	Read(x Tensor, n int) ([]float32, error)

	// Chained decoding runs several greedy steps in one submission: Keep
	// picks the argmax of the first n rows of x without reading it back;
	// BeginChained starts a step like Begin whose tokens are the ids the
	// last Keep picked (b.Tokens is ignored): one row per output row of the
	// chain's first step, in order, with that step's tables, so that
	// prompt chunks of the first step fall away and the sequences they
	// complete decode with the rest; Kept waits for the
	// work and returns every kept id since the last Begin, step by step.
	// At most MaxChain steps chain.
	Keep(x Tensor, n int)
	BeginChained(b Batch) error
	Kept() ([]int32, error)

	// Stats reports the backend's memory and work so far.
	Stats() Stats

	// Close releases everything the backend allocated.
	Close() error
}

// Freq is the inverse frequency of rotation pair i: theta^(-2i/Dim). Both
// backends take it from here so that they rotate by the same angles.
//
// A VisionRope's pair i turns at theta^(-2j/(Dim/2)), j its index in its
// section.
func (r Rope) Freq(i int) float32 {
	e, dim := i, r.Dim
	if r.Multi() && r.Axes == VisionRope {
		e, dim = i-r.sectionStart(i), r.Dim/2
	}
	f := 1 / math.Pow(r.Theta, float64(2*e)/float64(dim))
	if r.Factors != nil {
		f /= float64(r.Factors[i])
	}
	return float32(f)
}

// MaxChain bounds the steps of one chain of decoding steps.
const MaxChain = 16

// MaxTopK bounds TopK's k: the candidate set a GPU returns instead of the
// whole vocabulary's logits.
const MaxTopK = 256

// Stats describe what a backend holds and has done.
type Stats struct {
	Memory     int64 // bytes allocated for weights, activations and caches
	Dispatches int   // kernels recorded (GPU) or ops run (CPU) so far
	// ReadBytes is what the GPU read back from the device so far (the
	// CPU: 0, nothing crosses a bus).
	ReadBytes int64
	// Host is the wall time the GPU backend's caller spent recording and
	// submitting steps so far: from each step's Begin to the return of
	// its submission, waits for the device excluded (the CPU: 0). Over
	// Dispatches it is the host's cost a dispatch, what a faster GPU
	// cannot hide.
	Host time.Duration
	// HostPlatform is the part of Host spent in the WebGPU implementation
	// encoding and submitting the steps' commands; the rest is Go's
	// recording.
	HostPlatform time.Duration
}

// Slot is the cache slot of row i of the batch: where its key and value go.
func (b Batch) Slot(i int) int {
	return b.SlotOf(int(b.Seq[i]), int(b.Pos[i]))
}

// SlotOf is the cache slot of position p of the batch's sequence seq.
func (b Batch) SlotOf(seq, p int) int {
	return int(b.Tables[seq][p/b.BlockSize])*b.BlockSize + p%b.BlockSize
}

// TablesFor is the block tables through which ops reach a cache of shape
// s: Windows for a windowed cache, else Tables.
func (b Batch) TablesFor(s KVShape) [][]int32 {
	if s.Windowed {
		return b.Windows
	}
	return b.Tables
}

// SlotIn is the slot of row i in a cache of shape s (Slot, or its slot in
// the sequence's ring for a windowed cache).
func (b Batch) SlotIn(s KVShape, i int) int {
	p := int(b.Pos[i])
	return int(b.TablesFor(s)[b.Seq[i]][p/b.BlockSize])*b.BlockSize + p%b.BlockSize
}

// RingTable is the table in a windowed cache of a sequence whose ring is
// slot of r blocks, for a sequence of n logical blocks: entry j is
// slot·r + j mod r. A ring of r blocks holds the last (r-1)·BlockSize+1
// positions at least, so a row at position p whose window starts at
// p-w+1 finds every key it reads as long as the step's rows of its
// sequence, the window and a partial block fit in r blocks
// (RingBlocks).
func RingTable(dst []int32, slot, r, n int) []int32 {
	dst = dst[:0]
	for j := range n {
		dst = append(dst, int32(slot*r+j%r))
	}
	return dst
}

// RingBlocks is the ring a sequence needs in a windowed cache of window
// positions when one step stores up to rows of its positions: the rows
// write over the ring's oldest entries before the first of them attends
// to the window behind it, so window-1+rows positions are live at once,
// over at most one more block than they fill: L contiguous positions
// touch at most (L+BlockSize-2)/BlockSize + 1 blocks.
func RingBlocks(window, rows, blockSize int) int {
	return (window+rows+blockSize-3)/blockSize + 1
}

// Validate checks that the batch is consistent: as long as it is, ops never
// index out of the tables.
func (b Batch) Validate(maxRows int) error {
	n := len(b.Tokens)
	switch {
	case n == 0 || n > maxRows:
		return fmt.Errorf("batch of %d rows (at most %d)", n, maxRows)
	case len(b.Pos) != n || len(b.Seq) != n:
		return fmt.Errorf("batch of %d tokens, %d positions, %d sequence ids", n, len(b.Pos), len(b.Seq))
	case len(b.Out) > n:
		return fmt.Errorf("%d outputs for %d rows", len(b.Out), n)
	case b.BlockSize <= 0:
		return fmt.Errorf("block size %d", b.BlockSize)
	case b.Adapter != nil && (len(b.Adapter) != n || len(b.AdapterScale) != n):
		return fmt.Errorf("batch of %d tokens, %d adapters, %d adapter scales", n, len(b.Adapter), len(b.AdapterScale))
	case b.Types != nil && len(b.Types) != n:
		return fmt.Errorf("batch of %d tokens, %d token types", n, len(b.Types))
	case b.RopePos != nil && len(b.RopePos) != 4*n:
		return fmt.Errorf("batch of %d tokens, %d rotary positions (want 4 a row)", n, len(b.RopePos))
	}
	for i := range n {
		s, p := int(b.Seq[i]), int(b.Pos[i])
		if s < 0 || s >= len(b.Tables) || p < 0 || p/b.BlockSize >= len(b.Tables[s]) {
			return fmt.Errorf("row %d: position %d of sequence %d is outside its block table", i, p, s)
		}
	}
	for _, r := range b.Out {
		if r < 0 || int(r) >= n {
			return fmt.Errorf("output row %d of %d", r, n)
		}
	}
	if b.Windows != nil {
		if len(b.Windows) != len(b.Tables) {
			return fmt.Errorf("%d window tables for %d sequences", len(b.Windows), len(b.Tables))
		}
		for s, t := range b.Windows {
			if len(t) != len(b.Tables[s]) {
				return fmt.Errorf("sequence %d: window table of %d blocks, block table of %d", s, len(t), len(b.Tables[s]))
			}
		}
	}
	return nil
}
