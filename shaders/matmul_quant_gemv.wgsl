// matmul_quant_gemv (its body: quant_gemv.inc.wgsl, its weight formats:
// quant_formats.inc.wgsl, chosen by Fusion.Weight): dst[r, col0 + j] =
// x[r, :] · w[j, :] for the rows j of one part of a grouped integer weight
// (Tessera's int4 and int8, or a GGUF block type at its own bits) and a
// block of up to MAXM rows r of x (block g.z: rows g.z·MAXM ..., of the
// first min(cap, step.rows)). The decode case: the weight is read once per
// step, 2.6 to 10 bits a value instead of 32, and the kernel is bound by
// memory bandwidth.
//
// Algorithm (as matmul_gemv): a workgroup of WG invocations computes
// NC = WG / TPC columns (CPI times that with TPC = 1); the TPC invocations
// of a column take its groups lane, lane + TPC, ... (neighbouring
// invocations read neighbouring code words and scale words: coalesced).
// For each group an invocation loads its codes and scales once and adds
// scale·Σ q·x + min·Σ x to one partial sum per row of the block (the value
// scale·q + min factored out, as llama.cpp's Q4_1 dot does: per value a
// mask, a conversion and a multiply-add, the scale and min once a group;
// 17% less CPU a token than expanding each value on lavapipe); a format
// whose halves have scales of their own (Q6_K, Q3_K, Q2_K) keeps two sums.
// The partial sums of a column are then added in a tree in workgroup
// memory. With TPC = 1 (CPU adapters) each invocation owns CPI adjacent
// columns and there is no barrier: there, where invocations are the SIMD
// lanes of a thread, every x load is a gather across lanes and costs more
// than the expansion, so the x values of a group are loaded once for CPI
// columns. (On GPUs CPI is 1: x is cached and the columns of a workgroup
// should stay many.)
//
// k need not be a multiple of the group for int4 and int8: the last, short
// group of a row reads only the x values below k. It must be a multiple of
// 4 (x is read as vec4); other widths go to matmul_quant_gemm. Twin:
// runtime/cpu MatMulQ (summed in another order).
//
// Composed with a shaders.Fusion (fusion.inc.wgsl) it also normalises the
// input rows (the norm's weights on each x load, the row's 1/rms on each
// sum) and stores through the fusion's epilogue; with Pairs, two adjacent
// columns reach emit_pair together: from one invocation with CPI ≥ 2, or
// through workgroup memory after the tree sum (NC ≥ 2 columns a workgroup).
{{template "quant_gemv" .}}
