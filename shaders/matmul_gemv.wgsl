// matmul_gemv: dst[r, col0 + j] = x[r, :] · w[j, :] for the rows j of one
// weight part and a block of up to MAXM rows r of x (block g.z: rows
// g.z·MAXM ..., of the first min(cap, step.rows)): the decode case (one
// token, or a few), where the whole of w is read once per step and the
// kernel is bound by memory bandwidth, not arithmetic.
//
// Algorithm: a workgroup of 256 invocations computes NC = 256 / TPC output
// columns; the TPC invocations of one column split its k inputs into vec4
// chunks, invocation `lane` taking chunks lane, lane + TPC, ... (so that on a
// GPU neighbouring invocations read neighbouring 16 bytes of w: coalesced),
// four loads in flight per iteration. Each keeps one partial sum per row of
// the block (every chunk of w is loaded once and used for all of them), and
// the TPC partial sums of a column are then added in a tree in workgroup
// memory. With TPC = 1 (for CPU adapters, whose invocations are SIMD lanes
// of one thread: a lane streaming a whole row is what they do best, and
// barriers are costly) each invocation owns CPI adjacent columns and
// nothing is shared: there every x load is a gather across lanes, so an x
// value is loaded once for CPI columns (stories260K's 32-row decode step
// on lavapipe: 23 ms of CPU in its products with one column an
// invocation, 14 with four).
//
// Needs k % 4 == 0 (rows of w and x then start on vec4 boundaries); other
// widths go to matmul_gemm. Twin: runtime/cpu MatMul (summed in another
// order: chunk-strided partial sums, then a tree).
//
// Composed with a shaders.Fusion as matmul_int4_gemv is; with Pairs (a
// GLU's gate and up) a column's neighbour is the same invocation's (TPC =
// 1) or in the same workgroup, its sum through workgroup memory.
// With Experts (fusion.inc.wgsl's block template) block g.z is instead a
// group of (row, slot) pairs that chose one expert, whose rows of the
// stacked weight it reads: the experts' products of a mixture of experts.
alias WT = vec4<f32>;
const U = 4u; // loads in flight an iteration
// TPC is the number of invocations per output column, a power of two ≤ WG.
override TPC: u32 = 64u;

fn wload(i: u32) -> WV { return w[i]; }
{{template "float_gemv" .}}