package gpu

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/tensor"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
	"github.com/tessera-llm/tessera/shaders"
)

// Compressed weights: int4 (models/dtype Int4, 5 bits a value), int8
// (dtype.Int8, 10 bits), a GGUF block type at its own bits (dtype.Blocks:
// 2.6 to 8.5) and f16 (two halves per u32, since this WGSL has no f16
// type: unpack2x16float expands them). MatMul and Embed read them through
// their own kernels, which expand each value with the same arithmetic as
// the Go reference (runtime/cpu QWeight), so that both see identical
// weights.
//
// The grouped formats (int4, int8, the block types) hold two buffers a
// part: the codes and the scale words; one kernel source serves them all
// (shaders/quant_*.inc.wgsl), specialised by the part's format
// (shaders.Fusion.Weight). F16 rows are padded to an even length so that
// every row starts on a word. Weights too big for one binding are split by
// rows like f32 ones; the codes buffer, the larger, decides the split. A
// fused weight of block types keeps each matrix in its own (q and k in
// Q4_K, v in Q6_K): its parts then differ in format, and each part is a
// dispatch of its own kernel, as parts across bindings are.
var (
	embedQuantOp      = op{kernel: "embed_quant", operands: []webgpu.Access{webgpu.ReadWrite, webgpu.ReadOnly, webgpu.ReadOnly, webgpu.ReadOnly}}
	embedF16Op        = op{kernel: "embed_f16", operands: []webgpu.Access{webgpu.ReadWrite, webgpu.ReadOnly, webgpu.ReadOnly}}
	matmulQuantGEMVOp = op{kernel: "matmul_quant_gemv", operands: []webgpu.Access{webgpu.ReadWrite, webgpu.ReadOnly, webgpu.ReadOnly, webgpu.ReadOnly}}
	matmulQuantGEMMOp = op{kernel: "matmul_quant_gemm", operands: []webgpu.Access{webgpu.ReadWrite, webgpu.ReadOnly, webgpu.ReadOnly, webgpu.ReadOnly}}
	matmulF16GEMVOp   = op{kernel: "matmul_f16_gemv", operands: []webgpu.Access{webgpu.ReadWrite, webgpu.ReadOnly, webgpu.ReadOnly}}
	matmulF16GEMMOp   = op{kernel: "matmul_f16_gemm", operands: []webgpu.Access{webgpu.ReadWrite, webgpu.ReadOnly, webgpu.ReadOnly}}
)

// The formats of a weight part besides the grouped ones
// (shaders.WeightFormats): f32 is the zero value.
const (
	formatF32 = ""
	formatF16 = "f16"
)

// format is the format of w's first part: the kernel family of all (the
// grouped formats plan alike).
func (w *Weight) format() string { return w.parts[0].format }

// grouped is the group width of a grouped format (int4, int8 or a block
// type), ok false for f16 and f32.
func grouped(format string) (group int, ok bool) {
	switch format {
	case formatF32, formatF16:
		return 0, false
	case "int8":
		return dtype.Int8GroupSize, true
	}
	return dtype.Int4GroupSize, true
}

// blocksFormat is the kernel format of a block type: its name in lower
// case, Q4_1 int4's (whose groups its blocks are, bit for bit).
func blocksFormat(t dtype.Type) string {
	if t == dtype.Q4_1 {
		return "int4"
	}
	return strings.ToLower(t.String())
}

// quantOp is op of a grouped format, specialised to it.
func quantOp(o op, format string) op {
	o.fusion.Weight = format
	return o
}

// UploadAs uploads t in storage s; F16, Int8 and Int4 need a matrix.
func (b *Backend) UploadAs(t *tensor.Tensor, s backend.Storage) (backend.Weight, error) {
	if s == backend.F32 {
		return b.Upload(t)
	}
	if len(t.Shape) != 2 {
		return nil, fmt.Errorf("gpu: %s storage of %s needs a matrix, not shape %v", s, t.Name, t.Shape)
	}
	h, err := hostForm(t, s)
	if err != nil {
		return nil, err
	}
	return b.uploadRows(t.Name, t.Shape, s, h, 1)
}

// host is a matrix in its device form, row-major: rowBytes of values (or
// codes) and rowScale bytes of scale words a row, in format.
type host struct {
	codes, scales      []byte
	rows               int
	rowBytes, rowScale int64
	format             string
}

// hostForm converts the matrix t to storage s as the kernels read it.
func hostForm(t *tensor.Tensor, s backend.Storage) (host, error) {
	rows, cols := t.Shape[0], t.Shape[1]
	h := host{rows: rows}
	switch s {
	case backend.Int4:
		q, err := t.Int4()
		if err != nil {
			return h, fmt.Errorf("gpu: %w", err)
		}
		h.rowBytes, h.rowScale = int64(q.Groups())*16, int64(q.Groups())*4
		h.codes, h.scales, h.format = u32bytes(q.Codes), u32bytes(q.Scales), "int4"
	case backend.Int8:
		q, err := t.Int8()
		if err != nil {
			return h, fmt.Errorf("gpu: %w", err)
		}
		h.rowBytes, h.rowScale = int64(q.Groups())*16, int64(q.Groups())*4
		h.codes, h.scales, h.format = u32bytes(q.Codes), u32bytes(q.Scales), "int8"
	case backend.Blocks:
		q, err := t.Blocks()
		if err != nil {
			return h, fmt.Errorf("gpu: %w", err)
		}
		h.rowBytes, h.rowScale = int64(q.Groups()*q.Layout().CodeWords)*4, int64(q.RowScaleWords())*4
		h.codes, h.scales, h.format = u32bytes(q.Codes), u32bytes(q.Scales), blocksFormat(q.Type)
	case backend.F16, backend.F32:
		data, err := t.Float32()
		if err != nil {
			return h, err
		}
		if s == backend.F32 {
			h.rowBytes, h.codes, h.format = int64(cols)*4, f32bytes(data), formatF32
			break
		}
		h.format = formatF16
		stride := (cols + 1) / 2
		h.rowBytes = int64(stride) * 4
		h.codes = make([]byte, int64(rows)*h.rowBytes)
		for r := range rows {
			row := h.codes[int64(r)*h.rowBytes:]
			for c, v := range data[r*cols : (r+1)*cols] {
				binary.LittleEndian.PutUint16(row[2*c:], dtype.HalfBits(v))
			}
		}
	default:
		return h, fmt.Errorf("gpu: unknown storage %v", s)
	}
	return h, nil
}

// uploadRows uploads h as a weight of shape and storage s, split by rows
// into parts that fit a binding, each a multiple of align rows.
func (b *Backend) uploadRows(name string, shape []int, s backend.Storage, h host, align int) (*Weight, error) {
	perPart, err := b.rowsPerPart(name, h, align)
	if err != nil {
		return nil, err
	}
	w := &Weight{shape: shape, storage: s}
	w.parts, err = b.uploadParts(name, h, perPart, 0)
	return w, err
}

// uploadParts uploads h in parts of up to perPart rows, the first holding
// row row0 of the weight.
func (b *Backend) uploadParts(name string, h host, perPart, row0 int) ([]part, error) {
	var parts []part
	for r0 := 0; r0 < h.rows; r0 += perPart {
		n := int64(min(perPart, h.rows-r0))
		pt := part{row0: row0 + r0, rows: int(n), format: h.format}
		var err error
		if pt.buf, err = b.upload(name, h.codes[int64(r0)*h.rowBytes:][:n*h.rowBytes]); err != nil {
			return nil, err
		}
		if h.scales != nil {
			if pt.scales, err = b.upload(name+" scales", h.scales[int64(r0)*h.rowScale:][:n*h.rowScale]); err != nil {
				return nil, err
			}
		}
		parts = append(parts, pt)
	}
	return parts, nil
}

// rowsPerPart is the rows of h a binding holds, a multiple of align.
func (b *Backend) rowsPerPart(name string, h host, align int) (int, error) {
	perPart := int(b.info.MaxStorageBufferBindingSize/h.rowBytes) / align * align
	if perPart == 0 {
		return 0, fmt.Errorf("gpu: a row of %s (%d bytes) exceeds the storage binding limit", name, h.rowBytes)
	}
	return perPart, nil
}

// upload makes a storage buffer holding data.
func (b *Backend) upload(label string, data []byte) (webgpu.Buffer, error) {
	buf, err := b.weightBuffer(label, int64(len(data)))
	if err != nil {
		return nil, err
	}
	if err := b.dev.Write(buf, 0, data); err != nil {
		return nil, fmt.Errorf("gpu: upload %s: %w", label, err)
	}
	return buf, nil
}

// StorageOf reports how w is stored on the device.
func StorageOf(w backend.Weight) backend.Storage { return w.(*Weight).storage }

// embedQ is Embed for a compressed table.
func (b *Backend) embedQ(d *Tensor, w *Weight) {
	n := b.rows(d)
	x, y := b.grid(n*d.cols, elementWG)
	for _, pt := range w.parts {
		if gs, ok := grouped(pt.format); ok {
			groups := uint32((d.cols + gs - 1) / gs)
			b.record(quantOp(embedQuantOp, pt.format), params{uint32(d.cols), uint32(d.rows), uint32(pt.row0), uint32(pt.rows), groups},
				[]webgpu.Binding{{Buffer: d.buf}, {Buffer: b.tokens}, {Buffer: pt.buf}, {Buffer: pt.scales}}, x, y, 1)
			continue
		}
		b.record(embedF16Op, params{uint32(d.cols), uint32(d.rows), uint32(pt.row0), uint32(pt.rows)},
			[]webgpu.Binding{{Buffer: d.buf}, {Buffer: pt.buf}, {Buffer: b.tokens}}, x, y, 1)
	}
}

// matmulQ is MatMul for a compressed weight. It follows MatMul's plan: a
// GEMV for decoding (m ≤ gemvMaxRows; on CPU adapters for any m, with one
// invocation per cpuCPI columns, in blocks of up to gemvMaxRows rows) and
// a tiled GEMM for prompt chunks on GPUs and for widths k % 4 != 0.
// planQuant is the plan of a compressed product of m rows of width k:
// whether a GEMV (else the tiled GEMM), and whether in the form for CPU
// adapters, unless Plan.Quant forces them.
func (b *Backend) planQuant(m, k int) (gemv, cpu bool) {
	cpu = b.info.DeviceType == "cpu"
	gemv = cpu || m <= gemvMaxRows
	switch b.plan.Quant {
	case "gemv":
		gemv = true
	case "gemv-gpu":
		gemv, cpu = true, false
	case "gemm":
		gemv = false
	}
	return gemv && k%4 == 0, cpu
}

func (b *Backend) matmulQ(d, xs *Tensor, w *Weight, f shaders.Fusion, extra []webgpu.Binding) bool {
	m, k := b.rows(d), xs.cols
	gemv, cpu := b.planQuant(m, k)
	if f.Fused() && !gemv {
		return false // only the GEMVs compose
	}
	var pa [paramsSize / 4]uint32 // the parameters and operands of a dispatch, on the stack
	var oa [maxBindings]webgpu.Binding
	for _, pt := range w.parts {
		operands := append(oa[:0], webgpu.Binding{Buffer: d.buf}, webgpu.Binding{Buffer: xs.buf}, webgpu.Binding{Buffer: pt.buf})
		p := append(params(pa[:0]), uint32(k), uint32(d.cols), uint32(d.rows), uint32(pt.row0), uint32(pt.rows))
		if gs, ok := grouped(pt.format); ok {
			operands = append(operands, webgpu.Binding{Buffer: pt.scales})
			p = append(p, uint32((k+gs-1)/gs))
		}
		if gemv {
			maxm := blockRows(m)
			o, tail, cpi, perWG := b.gemv(pt.format, maxm, quantTPC(pt.format, k, cpu), f)
			gx, gy := b.grid((pt.rows+cpi-1)/cpi, perWG)
			b.record(o, append(p, tail...), append(operands, extra...), gx, gy, uint32((m+maxm-1)/maxm))
			continue
		}
		tm := 4
		if m <= 32 {
			tm = 2
		}
		o, tail := b.ops.gemm(pt.format, tm, shaders.Fusion{})
		b.record(o, append(p, tail...), operands, uint32((pt.rows+63)/64), uint32((m+16*tm-1)/(16*tm)), 1)
	}
	return true
}

// cpuCPI is how many columns one invocation of a GEMV computes on CPU
// adapters, sharing the x loads (gathers across SIMD lanes there).
// Measured on lavapipe by CPU time per int4 GEMV at 2048×5632: 1 column
// 10 ms, 2 columns 8–12 ms, 4 columns 5.2 ms, 8 columns 12 ms (registers
// spill); f32 takes 12.7 ms.
const cpuCPI = 4

// cpuWorkgroup is the workgroup size of the GEMVs on CPU adapters, where a
// workgroup is the unit of work a thread takes: with four columns an
// invocation, 256 would leave a 2048-column matrix only two workgroups.
const cpuWorkgroup = 64

// quantTPC is the invocations a column of the compressed GEMV of format
// and width k: 1 on CPU adapters, else quantThreads of the width as int4
// groups (lanes take groups: as many groups per lane at any width).
func quantTPC(format string, k int, cpu bool) int {
	if cpu {
		return 1
	}
	if gs, ok := grouped(format); ok {
		return quantThreads(k * dtype.Int4GroupSize / gs)
	}
	return quantThreads(k)
}

// quantThreads is how many invocations of a compressed GEMV split one
// column of width k on a GPU: about four groups of 32 inputs each (an int4
// lane reads 16 bytes of codes per group), at least 4 and at most 64.
func quantThreads(k int) int {
	t := 4
	for t < 64 && 4*32*2*t <= k {
		t *= 2
	}
	return t
}
