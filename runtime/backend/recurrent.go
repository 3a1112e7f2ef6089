package backend

import "fmt"

// The recurrent ops serve linear-attention layers (Qwen3.5's Gated
// DeltaNet, models.LinearConfig), whose memory of a sequence is not a
// cache that grows by a slot per token but a fixed state per sequence,
// updated in place by every token: the last Conv-1 inputs of a short
// causal convolution and a HeadDim×HeadDim matrix per value head.
//
// The states live in slots (Batch.States names each sequence's); a row at
// position 0 starts its sequence from a zero state, so a slot needs no
// clearing between occupants. A state cannot go back: the engine runs no
// speculation on such a model, and takes a prefix-cache hit only where it
// kept a snapshot of the state at the prefix's end (CopyState).

// RecurrentShape describes the states of Layers linear layers for Slots
// sequences.
type RecurrentShape struct {
	Layers, Slots int
	Conv          int // convolution taps: the state keeps Conv-1 rows
	Channels      int // width of a convolved row (q, k and v of a row)
	Heads         int // value heads: one HeadDim×HeadDim matrix each
	HeadDim       int
}

// ConvFloats is one slot's convolution state in one layer: (Conv-1) rows
// of Channels, oldest first.
func (s RecurrentShape) ConvFloats() int { return (s.Conv - 1) * s.Channels }

// MatrixFloats is one slot's delta-rule state in one layer: per value
// head a HeadDim×HeadDim matrix S, row j (a value dimension) after row j-1.
func (s RecurrentShape) MatrixFloats() int { return s.Heads * s.HeadDim * s.HeadDim }

// Bytes is what the states take, as f32.
func (s RecurrentShape) Bytes() int64 {
	return 4 * int64(s.Layers) * int64(s.Slots) * int64(s.ConvFloats()+s.MatrixFloats())
}

// Check reports a shape no state can have.
func (s RecurrentShape) Check() error {
	if s.Layers <= 0 || s.Slots <= 0 || s.Conv < 1 || s.Channels <= 0 || s.Heads <= 0 || s.HeadDim <= 0 {
		return fmt.Errorf("recurrent state of %d layers × %d slots, %d taps × %d channels, %d heads × %d",
			s.Layers, s.Slots, s.Conv, s.Channels, s.Heads, s.HeadDim)
	}
	return nil
}

// Recurrent is a backend's store of recurrent states.
type Recurrent interface {
	Shape() RecurrentShape
}

// DeltaNet describes one gated delta-rule op: KHeads key heads and VHeads
// value heads of HeadDim, value head h reading key head h mod KHeads. The
// convolved row holds q (KHeads·HeadDim), then k, then v (VHeads·HeadDim).
type DeltaNet struct {
	KHeads, VHeads, HeadDim int
	Eps                     float32 // of the l2 norms of q and k
}

// Recurrences are the ops of linear-attention layers.
type Recurrences interface {
	// NewRecurrent allocates the states of shape s.
	NewRecurrent(s RecurrentShape) (Recurrent, error)
	// Conv1D sets dst = silu(causal convolution of x) for layer l: channel
	// c of row i is Σ_t w[c][t]·x_c(Pos[i]-Conv+1+t) over the row's
	// sequence, the inputs before the batch's rows coming from the
	// sequence's state (zeros at position 0), which then keeps the
	// sequence's last Conv-1 inputs. w is [Channels, Conv] (F32).
	Conv1D(dst, x Tensor, w Weight, st Recurrent, l int)
	// DeltaNet sets dst (rows of VHeads·HeadDim) to the gated delta rule
	// over each sequence's rows of qkv (Conv1D's output), in order of
	// position, updating the sequence's state S in layer l: per value
	// head h, with q and k l2-normalised, g = exp(softplus(α_h + dt_h)·a_h)
	// and β = sigmoid(β_h),
	//
	//	S = g·S;  S += β·(v − S·k)·kᵀ;  o = S·q/√HeadDim.
	//
	// gates has rows of 2·VHeads, β's logits then α's; decay is [2·VHeads]
	// (F32), dt then a.
	DeltaNet(dst, qkv, gates Tensor, decay Weight, st Recurrent, l int, d DeltaNet)
	// CopyState copies slot src's states of every layer to slot dst (a
	// snapshot of a prompt's prefix, and its restoring), ordered with the
	// ops around it.
	CopyState(st Recurrent, src, dst int)
}

// ValidateStates checks the batch's state slots against a store of slots.
func (b Batch) ValidateStates(slots int) error {
	if len(b.States) != len(b.Tables) {
		return fmt.Errorf("%d state slots for %d sequences", len(b.States), len(b.Tables))
	}
	for s, slot := range b.States {
		if slot < 0 || int(slot) >= slots {
			return fmt.Errorf("sequence %d: state slot %d of %d", s, slot, slots)
		}
	}
	return nil
}
