package cpu

import (
	"fmt"
	"math"

	"github.com/tessera-llm/tessera/runtime/backend"
)

// Recurrent holds the linear layers' states: for each layer and slot, the
// convolution's last Conv-1 input rows, then the delta rule's matrices.
type Recurrent struct {
	shape backend.RecurrentShape
	Data  []float32
}

func (r *Recurrent) Shape() backend.RecurrentShape { return r.shape }

// conv and matrix are slot's states in layer l.
func (r *Recurrent) conv(l, slot int) []float32 {
	s := r.shape
	at := (l*s.Slots + slot) * (s.ConvFloats() + s.MatrixFloats())
	return r.Data[at : at+s.ConvFloats()]
}

func (r *Recurrent) matrix(l, slot int) []float32 {
	s := r.shape
	at := (l*s.Slots+slot)*(s.ConvFloats()+s.MatrixFloats()) + s.ConvFloats()
	return r.Data[at : at+s.MatrixFloats()]
}

func (b *Backend) NewRecurrent(s backend.RecurrentShape) (backend.Recurrent, error) {
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	b.stats.Memory += s.Bytes()
	return &Recurrent{shape: s, Data: make([]float32, s.Bytes()/4)}, nil
}

func (b *Backend) CopyState(st backend.Recurrent, src, dst int) {
	b.op()
	r := st.(*Recurrent)
	for l := range r.shape.Layers {
		copy(r.conv(l, dst), r.conv(l, src))
		copy(r.matrix(l, dst), r.matrix(l, src))
	}
}

// seqRows lists each sequence's rows of the batch, in order.
func (b *Backend) seqRows() [][]int {
	rows := make([][]int, len(b.batch.Tables))
	for i, s := range b.batch.Seq {
		rows[s] = append(rows[s], i)
	}
	return rows
}

func (b *Backend) Conv1D(dst, x backend.Tensor, w backend.Weight, st backend.Recurrent, l int) {
	b.op()
	d, xs, ws, r := dst.(*Tensor), x.(*Tensor), w.(*Weight).Data, st.(*Recurrent)
	for s, rows := range b.seqRows() {
		if len(rows) == 0 {
			continue
		}
		state := r.conv(l, int(b.batch.States[s]))
		if b.batch.Pos[rows[0]] == 0 {
			clear(state)
		}
		b.team.over(len(rows)*xs.cols*r.shape.Conv, xs.cols, func(lo, hi int) {
			convChannels(d, xs, ws, state, rows, r.shape.Conv, lo, hi)
		})
	}
}

// ConvRows is Conv1D over one sequence's rows, with its state of Conv-1
// rows (oldest first): the twin of the conv1d kernel.
func ConvRows(dst, x *Tensor, w, state []float32, rows []int, taps int) {
	convChannels(dst, x, w, state, rows, taps, 0, x.cols)
}

// convChannels is ConvRows for channels lo..hi-1.
func convChannels(dst, x *Tensor, w, state []float32, rows []int, taps, lo, hi int) {
	ch := x.cols
	window := make([]float32, taps) // channel c's last taps inputs, oldest first
	for c := lo; c < hi; c++ {
		for t := range taps - 1 {
			window[t] = state[t*ch+c]
		}
		wc := w[c*taps : (c+1)*taps]
		for _, i := range rows {
			window[taps-1] = x.Data[i*ch+c]
			var sum float32
			for t, v := range window {
				sum += wc[t] * v
			}
			dst.Data[i*ch+c] = Silu(sum)
			copy(window, window[1:])
		}
		for t := range taps - 1 {
			state[t*ch+c] = window[t]
		}
	}
}

// DeltaNet runs the value heads of a sequence on the team, each head's
// rows in order.
func (b *Backend) DeltaNet(dst, qkv, gates backend.Tensor, decay backend.Weight, st backend.Recurrent, l int, dn backend.DeltaNet) {
	b.op()
	d, x, gs, r := dst.(*Tensor), qkv.(*Tensor), gates.(*Tensor), st.(*Recurrent)
	D := dn.HeadDim
	for s, rows := range b.seqRows() {
		if len(rows) == 0 {
			continue
		}
		state := r.matrix(l, int(b.batch.States[s]))
		if b.batch.Pos[rows[0]] == 0 {
			clear(state)
		}
		b.team.over(3*len(rows)*dn.VHeads*D*D, dn.VHeads, func(lo, hi int) {
			q, k := make([]float32, D), make([]float32, D)
			for h := lo; h < hi; h++ {
				for _, i := range rows {
					deltaHead(h, d.Row(i), x.Row(i), gs.Row(i), decay.(*Weight).Data, state, dn, q, k)
				}
			}
		})
	}
}

// DeltaRow runs one row (one token) of the gated delta rule on a
// sequence's state: the twin of the delta_rule kernel, head by head and,
// within a head, value row by value row (each row of S is updated on its
// own: S_j = g·S_j + k̂·β·(v_j − g·S_j·k̂), o_j = S_j·q̂/√D).
func DeltaRow(out, qkv, gates, decay, state []float32, dn backend.DeltaNet) {
	q, k := make([]float32, dn.HeadDim), make([]float32, dn.HeadDim)
	for h := range dn.VHeads {
		deltaHead(h, out, qkv, gates, decay, state, dn, q, k)
	}
}

// deltaHead is DeltaRow for value head h, with q and k scratch of HeadDim.
func deltaHead(h int, out, qkv, gates, decay, state []float32, dn backend.DeltaNet, q, k []float32) {
	D, H := dn.HeadDim, dn.VHeads
	scale := float32(1 / math.Sqrt(float64(D)))
	qs, ks, vs := qkv[:dn.KHeads*D], qkv[dn.KHeads*D:2*dn.KHeads*D], qkv[2*dn.KHeads*D:]
	kh := h % dn.KHeads
	qn, kn := L2Scale(qs[kh*D:(kh+1)*D], dn.Eps), L2Scale(ks[kh*D:(kh+1)*D], dn.Eps)
	for i := range D {
		q[i], k[i] = qs[kh*D+i]*qn, ks[kh*D+i]*kn
	}
	g := expf(Softplus(gates[H+h]+decay[h]) * decay[H+h])
	bt := Sigmoid(gates[h])
	v := vs[h*D : (h+1)*D]
	S := state[h*D*D : (h+1)*D*D]
	for j := range D {
		row := S[j*D : (j+1)*D]
		var sk float32
		for i := range row {
			row[i] *= g
			sk += row[i] * k[i]
		}
		delta := bt * (v[j] - sk)
		var o float32
		for i := range row {
			row[i] += k[i] * delta
			o += row[i] * q[i]
		}
		out[h*D+j] = o * scale
	}
}

// L2Scale is 1/max(‖x‖, eps): ggml_l2_norm's factor.
func L2Scale(x []float32, eps float32) float32 {
	var ss float32
	for _, v := range x {
		ss += v * v
	}
	return 1 / max(float32(math.Sqrt(float64(ss))), eps)
}

// Softplus is log(1+e^x), x itself above 20 (as ggml computes it).
func Softplus(x float32) float32 {
	if x > 20 {
		return x
	}
	return float32(math.Log1p(math.Exp(float64(x))))
}
