package cpu

import (
	"fmt"
	"math"

	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/cpu/internal/kernel"
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
				sum += float32(wc[t] * v)
			}
			dst.Data[i*ch+c] = Silu(sum)
			copy(window, window[1:])
		}
		for t := range taps - 1 {
			state[t*ch+c] = window[t]
		}
	}
}

// DeltaChunk is the chunk of a sequence's rows that the CPU's delta rule
// takes at a time in its chunked form (DeltaChunks), as flash-linear-
// attention's chunk_gated_delta_rule and llama.cpp do: the chunk's n×n
// matrices (2·n² floats) stay in cache beside its keys, and the state is
// read and written once a chunk.
const DeltaChunk = 64

// deltaChunkMinDim is the narrowest head the CPU runs in the chunked form.
// A token costs the chunked form about 3·D² + 2·chunk·D products against
// the one-step form's 4·D², so its gain is the vector kernels' speed,
// which heads narrower than two of their blocks (kernel.Block) do not get:
// BenchmarkDeltaForms, 128 rows on one goroutine, chunked against one-step:
// heads of 128 (Qwen3.5's) 7-10x faster, heads of 16 (tiny-qwen35's) 3-15x
// slower, whatever the chunk.
const deltaChunkMinDim = 64

// DeltaNet runs the value heads of a sequence on the team: a sequence
// with one row in the step (decoding) in the one-step form (DeltaRow's),
// a prompt's rows in the chunked form (DeltaChunks', chunks of
// DeltaChunk), whose products are the vector kernels' dot products and
// axpys rather than a serial recurrence per token, where heads are wide
// enough for that to pay (deltaChunkMinDim).
func (b *Backend) DeltaNet(dst, qkv, gates backend.Tensor, decay backend.Weight, st backend.Recurrent, l int, dn backend.DeltaNet) {
	b.op()
	d, x, gs, r := dst.(*Tensor), qkv.(*Tensor), gates.(*Tensor), st.(*Recurrent)
	D, dw := dn.HeadDim, decay.(*Weight).Data
	for s, rows := range b.seqRows() {
		if len(rows) == 0 {
			continue
		}
		state := r.matrix(l, int(b.batch.States[s]))
		if b.batch.Pos[rows[0]] == 0 {
			clear(state)
		}
		b.team.over(3*len(rows)*dn.VHeads*D*D, dn.VHeads, func(lo, hi int) {
			if len(rows) == 1 || D < deltaChunkMinDim {
				q, k := make([]float32, D), make([]float32, D)
				for h := lo; h < hi; h++ {
					for _, i := range rows {
						deltaHead(h, d.Row(i), x.Row(i), gs.Row(i), dw, state, dn, q, k)
					}
				}
				return
			}
			sc := newDeltaScratch(min(len(rows), DeltaChunk), D)
			for h := lo; h < hi; h++ {
				deltaChunkHead(h, d, x, gs, rows, dw, state, dn, DeltaChunk, sc)
			}
		})
	}
}

// DeltaChunks runs the rows of qkv and gates (one sequence's, in order of
// position) through the gated delta rule from state, chunk rows at a time,
// into out: the twin of the delta_rule kernel's chunked path, and the
// CPU's for prompts. It equals DeltaRow row after row up to rounding.
//
// Within a chunk of n rows, with γ_t the sum of the log-gates
// log g_1..log g_t (so that the decay from row s to row t is e^(γ_t−γ_s),
// at most 1, never a quotient of underflowing products), S the state at
// the chunk's start and u_t = β_t·(v_t − g_t·S_(t−1)·k̂_t) what row t
// writes into the state (S_t = g_t·S_(t−1) + u_t·k̂_tᵀ), unrolling the
// recurrence gives the UT (WY) form:
//
//	u_t = β_t·(v_t − e^(γ_t)·S·k̂_t) − Σ_(s<t) β_t·e^(γ_t−γ_s)·(k̂_t·k̂_s)·u_s
//	o_t = (e^(γ_t)·S·q̂_t + Σ_(s≤t) e^(γ_t−γ_s)·(q̂_t·k̂_s)·u_s) / √D
//	S'  = e^(γ_n)·S + Σ_s e^(γ_n−γ_s)·u_s·k̂_sᵀ
//
// The first line is the triangular system (I + A)·U = β·(V − e^γ·K̂·Sᵀ),
// solved by forward substitution over the chunk's rows (a row of U, every
// value dimension at once, is an axpy of the rows before it); S·k̂_t and
// S·q̂_t for every t are independent dot products, and the state's update
// is one axpy per row of S. Nothing waits on the previous token's state.
func DeltaChunks(out, qkv, gates *Tensor, decay, state []float32, dn backend.DeltaNet, chunk int) {
	rows := make([]int, qkv.rows)
	for i := range rows {
		rows[i] = i
	}
	sc := newDeltaScratch(min(len(rows), chunk), dn.HeadDim)
	for h := range dn.VHeads {
		deltaChunkHead(h, out, qkv, gates, rows, decay, state, dn, chunk, sc)
	}
}

// deltaScratch is a chunk's working matrices for one head: its q̂, k̂ and
// v rows, β and γ, A (negated) and M (n×n), K̂·Sᵀ and Q̂·Sᵀ, U, and a row
// of state coefficients.
type deltaScratch struct {
	q, k, v, p, r, u []float32 // n×D
	a, m             []float32 // n×n
	beta, gam, c, cf []float32 // n
}

func newDeltaScratch(n, d int) *deltaScratch {
	f := func(k int) []float32 { return make([]float32, k) }
	return &deltaScratch{q: f(n * d), k: f(n * d), v: f(n * d), p: f(n * d), r: f(n * d), u: f(n * d),
		a: f(n * n), m: f(n * n), beta: f(n), gam: f(n), c: f(n), cf: f(n)}
}

// deltaChunkHead is DeltaChunks for value head h over the batch's rows
// (one sequence's, in order), its scratch sized for chunk rows.
func deltaChunkHead(h int, out, qkv, gates *Tensor, rows []int, decay, state []float32, dn backend.DeltaNet, chunk int, sc *deltaScratch) {
	D, H := dn.HeadDim, dn.VHeads
	kh := h % dn.KHeads
	scale := float32(1 / math.Sqrt(float64(D)))
	S := state[h*D*D : (h+1)*D*D]
	for c0 := 0; c0 < len(rows); c0 += chunk {
		cr := rows[c0:min(c0+chunk, len(rows))]
		n := len(cr)
		Q, K, V, P, R, U := sc.q[:n*D], sc.k[:n*D], sc.v[:n*D], sc.p[:n*D], sc.r[:n*D], sc.u[:n*D]
		A, M, beta, gam, c, cf := sc.a[:n*n], sc.m[:n*n], sc.beta[:n], sc.gam[:n], sc.c[:n], sc.cf[:n]
		for t, i := range cr {
			x, g := qkv.Row(i), gates.Row(i)
			qs, ks := x[kh*D:(kh+1)*D], x[(dn.KHeads+kh)*D:(dn.KHeads+kh+1)*D]
			qn, kn := L2Scale(qs, dn.Eps), L2Scale(ks, dn.Eps)
			for e := range D {
				Q[t*D+e], K[t*D+e] = qs[e]*qn, ks[e]*kn
			}
			copy(V[t*D:(t+1)*D], x[(2*dn.KHeads+h)*D:])
			beta[t] = Sigmoid(g[h])
			gam[t] = float32(Softplus(g[H+h]+decay[h]) * decay[H+h])
			if t > 0 {
				gam[t] += gam[t-1]
			}
		}
		// A[t][s] = −β_t·e^(γ_t−γ_s)·k̂_t·k̂_s (s < t), M[t][s] =
		// e^(γ_t−γ_s)·q̂_t·k̂_s (s ≤ t).
		for t := range n {
			kernel.DotF32Rows(A[t*n:], 1, K[t*D:(t+1)*D], K, t)
			kernel.DotF32Rows(M[t*n:], 1, Q[t*D:(t+1)*D], K, t+1)
			for s := range t {
				A[t*n+s] *= -(beta[t] * expf(gam[t]-gam[s]))
			}
			for s := range t + 1 {
				M[t*n+s] *= expf(gam[t] - gam[s])
			}
		}
		// P = K̂·Sᵀ, R = Q̂·Sᵀ (row t, column j: S_j·k̂_t, S_j·q̂_t).
		for j := range D {
			Sj := S[j*D : (j+1)*D]
			kernel.DotF32Rows(P[j:], D, Sj, K, n)
			kernel.DotF32Rows(R[j:], D, Sj, Q, n)
		}
		for t, i := range cr {
			et := expf(gam[t])
			Ut := U[t*D : (t+1)*D]
			for j := range Ut {
				Ut[j] = beta[t] * (V[t*D+j] - float32(et*P[t*D+j]))
			}
			kernel.AxpyRows(Ut, A[t*n:t*n+t], U, D)
			o := out.Row(i)[h*D : (h+1)*D]
			for j := range o {
				o[j] = et * R[t*D+j]
			}
			kernel.AxpyRows(o, M[t*n:t*n+t+1], U, D)
			for j := range o {
				o[j] *= scale
			}
		}
		last := gam[n-1]
		el := expf(last)
		for s := range n {
			cf[s] = expf(last - gam[s])
		}
		for j := range D {
			Sj := S[j*D : (j+1)*D]
			for s := range n {
				c[s] = cf[s] * U[s*D+j]
			}
			for i := range Sj {
				Sj[i] *= el
			}
			kernel.AxpyRows(Sj, c, K, D)
		}
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
			sk += float32(row[i] * k[i])
		}
		delta := bt * (v[j] - sk)
		var o float32
		for i := range row {
			row[i] += float32(k[i] * delta)
			o += float32(row[i] * q[i])
		}
		out[h*D+j] = o * scale
	}
}

// L2Scale is 1/max(‖x‖, eps): ggml_l2_norm's factor.
func L2Scale(x []float32, eps float32) float32 {
	ss := kernel.DotF32(x, x) // RMSNorm's sum of squares
	return 1 / max(float32(math.Sqrt(float64(ss))), eps)
}

// Softplus is log(1+e^x), x itself above 20 (as ggml computes it).
func Softplus(x float32) float32 {
	if x > 20 {
		return x
	}
	return float32(math.Log1p(math.Exp(float64(x))))
}
