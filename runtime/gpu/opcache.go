package gpu

import (
	"slices"
	"unsafe"

	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
	"github.com/tessera-llm/tessera/shaders"
)

// opCache holds the op compositions a backend makes at every dispatch of
// a step: fused products' operand lists, the GEMV variants and attention's
// constants. Each is a pure function of its key, made on first use and
// then shared read-only, so that a steady decode step allocates nothing
// for them (TestDecodeStepAllocations).
//
// It lives on the Backend rather than in package variables: two backends
// share no mutable state, and what a backend made goes with it. A Backend
// is used from one goroutine (its calls and uniforms maps are too), so
// the maps need no lock.
type opCache struct {
	composed map[fusedKey][]webgpu.Access
	gemvs    map[gemvKey]gemvVariant
	attn     map[[3]int]map[string]float64
	// narrowConsts are the reductions' constants in their narrow form
	// (narrow.go), made once.
	narrowConsts map[string]float64
}

// fusedKey is a composition of fused: the op (its name and its own
// operands, which op values share) and the fusion.
type fusedKey struct {
	kernel   string
	operands *webgpu.Access
	n        int
	fusion   shaders.Fusion
}

// gemvKey is a variant of gemv.
type gemvKey struct {
	format        string
	maxm, tpc, wg int
	fusion        shaders.Fusion
}

// gemvVariant is what gemv returns.
type gemvVariant struct {
	o          op
	tail       params
	cpi, perWG int
}

// store puts v in *m at k, making the map on first use, and returns v.
func store[K comparable, V any](m *map[K]V, k K, v V) V {
	if *m == nil {
		*m = map[K]V{}
	}
	(*m)[k] = v
	return v
}

// fused returns o composed with f: its operands gain the fusion's extra
// bindings, which the call passes after its own. The composition's
// operands are clipped, so that an append copies them. The key holds the
// address of o's own operands, so o must be one of the package's ops, not
// one built at each call.
func (c *opCache) fused(o op, f shaders.Fusion) op {
	key := fusedKey{kernel: o.kernel, operands: unsafe.SliceData(o.operands), n: len(o.operands), fusion: f}
	if operands, ok := c.composed[key]; ok {
		o.fusion, o.operands = f, operands
		return o
	}
	o = o.compose(f)
	o.operands = store(&c.composed, key, slices.Clip(o.operands))
	return o
}

// gemv is the GEMV kernel for weights of format, row blocks of maxm and
// tpc invocations a column (1: the form for CPU adapters, where an
// invocation computes cpuCPI columns), composed with f: the op, the
// params its kernel reads after the common ones, and the columns an
// invocation and a workgroup compute. MatMul, the compressed products and
// the experts' products (moe.go) all dispatch through it; its constants
// and tail are shared read-only.
func (c *opCache) gemv(format string, maxm, tpc, cpuWG int, f shaders.Fusion) (o op, tail params, cpi, perWG int) {
	key := gemvKey{format: format, maxm: maxm, tpc: tpc, wg: cpuWG, fusion: f}
	v, ok := c.gemvs[key]
	if !ok {
		v.o, v.tail, v.cpi, v.perWG = c.newGemv(format, maxm, tpc, cpuWG, f)
		v.tail = slices.Clip(v.tail)
		store(&c.gemvs, key, v)
	}
	return v.o, v.tail, v.cpi, v.perWG
}

// attnConsts are the decode kernels' constants for heads of hd and g
// query heads a workgroup (attention_decode), or rb rows an invocation
// (attention_lane, g = 0): Attend runs at every layer of every step.
func (c *opCache) attnConsts(hd, g, rb int) map[string]float64 {
	key := [3]int{hd, g, rb}
	if m, ok := c.attn[key]; ok {
		return m
	}
	m := map[string]float64{"HD": float64(hd)}
	if g > 0 {
		m["G"] = float64(g)
	}
	if rb > 0 {
		m["RB"] = float64(rb)
	}
	return store(&c.attn, key, m)
}
