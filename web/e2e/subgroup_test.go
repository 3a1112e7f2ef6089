package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestBrowserSubgroups runs runtime/gpu's twin tests inside Chromium, on
// its SwiftShader adapter, which has subgroups (size 4): TestSubgroupTwins
// (the subgroup variants of the reductions against the plain f32 kernels
// and the CPU reference, on the GPUs' plans) and the twin tests of the ops
// whose kernels have subgroup variants, on the adapter's own plan. Natively
// no binding exposes subgroups, so this is where those kernels run. It
// also runs TestF16Twins, which skips on SwiftShader (no shader-f16) and
// runs the f16 kernels where Chromium has a GPU with it, and runtime's
// TestSampleKernelMatchesSampler: the sample kernel (with subgroups there)
// draws the CPU sampler's tokens. TestNarrowWorkgroups runs SwiftShader's
// narrow reductions and GEMVs with its subgroups (one subgroup a
// workgroup) and the wide ones beside them, and TestRopeAttend some of
// attention_lane's Rope form.
func TestBrowserSubgroups(t *testing.T) {
	if testing.Short() {
		t.Skip("builds runtime/gpu's tests as wasm and runs them in Chromium")
	}
	exe := needChromium(t)
	g := newGoTests(t, nil)
	ctx, cons := startBrowser(t, exe, false)

	// run builds pkg's tests for the browser and runs those that pattern
	// selects (by default those named) with args; those of pass must pass,
	// those of skip pass or skip.
	run := func(pkg, pattern string, pass, skip []string, args ...string) {
		t.Helper()
		name := g.build(t, pkg)
		if pattern == "" {
			pattern = "^(" + strings.Join(append(append([]string{}, pass...), skip...), "|") + ")$"
		}
		args = append([]string{"-test.run=" + pattern, "-test.v"}, args...)
		out, code := g.run(t, ctx, cons, name, args, 8*time.Minute)
		t.Logf("%s's tests in Chromium:\n%s", pkg, out)
		if code != 0 {
			t.Fatalf("%s: exit code %d", pkg, code)
		}
		for _, name := range pass {
			if !strings.Contains(out, "--- PASS: "+name+" ") {
				t.Errorf("%s did not pass (skipped or not run)", name)
			}
		}
		for _, name := range skip {
			if !strings.Contains(out, "--- SKIP: "+name+" ") && !strings.Contains(out, "--- PASS: "+name+" ") {
				t.Errorf("%s did not run", name)
			}
		}
	}
	// The f16 kernels need shader-f16, which SwiftShader lacks: there
	// TestF16Twins skips, and runs on a GPU whose Chromium has it.
	run("runtime/gpu", "", []string{"TestSubgroupTwins", "TestArgmax", "TestTopK", "TestBiasAndHeadNorm", "TestLayerNormAndActivate", "TestElementwiseOps",
		"TestNarrowWorkgroups"},
		[]string{"TestF16Twins"}, "-subgroups")
	// The sample kernel's subgroup form against runtime.Sampler itself.
	// The GEMVs' RMSNorm prologue (its subgroup sums): projections whose
	// input a residual prepared (Prescaled), which take it on every
	// adapter; f32 and int4 weights (each subtest is ~12 s here).
	run("runtime/gpu", "^TestProject$/^(f32_prologue_k64|int4_prologue_k96)_/^(qkv-norm-bias|glu-norm|gate-up-split-norm)-next$",
		[]string{"TestProject"}, nil)
	run("runtime", "", []string{"TestSampleKernelMatchesSampler"}, nil)
	// attention_lane composed with rope_kv (SwiftShader's decode
	// attention) under Dawn's compiler: odd heads with a partial rotation,
	// and sinks with an empty chunk, on every cache type.
	run("runtime/gpu", "^TestRopeAttend$/^h(5_kv5_d12|4_kv2_d16)_/./^lane$", []string{"TestRopeAttend",
		"TestRopeAttend/h5_kv5_d12_bs7_len64_seqs3_rot8_halves_win0_cap0_sinksfalse/int8/lane",
		"TestRopeAttend/h4_kv2_d16_bs16_len64_seqs3_rot16_pairs_win0_cap0_sinkstrue/f16/lane"}, nil)
	for _, p := range cons.problems() {
		// Promises the device left pending settle after the program's
		// exit, which wasm_exec.js reports as exceptions.
		if !strings.Contains(p, "Go program has already exited") {
			t.Errorf("a WebGPU warning or error in the console: %q", p)
		}
	}
}
