package runtime_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/gpu"
	"github.com/tessera-llm/tessera/runtime/gpu/gputest"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
)

// TestSelfCheck loads stories260K on WebGPU with kernels made faulty by
// the backend's test hook (gpu.Plan.Fault: a kernel's output perturbed
// after each dispatch, as a miscompiling driver would leave it): the
// load-time self-check finds the fault, runs with a plainer plan or on
// the CPU, says so, and the engine still tells llama2.c's story (or with
// an adapter the CPU's). Without the check the same fault changes the
// story, so the fault is real.
func TestSelfCheck(t *testing.T) {
	path := sharedFile(t, "stories260K.gguf")
	dev, err := webgpu.Open(webgpu.Options{})
	if errors.Is(err, webgpu.ErrNoAdapter) {
		gputest.NoDevice(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	const n = 48
	golden := goldenIDs(t)[:n]
	// An adapter, and the story the CPU tells with it.
	m, err := models.Open(path, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	adapter, _ := writeAdapter(t, m.Config, 4, nil, 3)
	m.Close()
	adapters := []runtime.AdapterSpec{{Name: "a", Path: adapter, Scale: 1}}
	withAdapter := runtime.Request{MaxTokens: n, Adapters: []runtime.AdapterRef{{Name: "a", Scale: 1}}}
	cpuEng, err := runtime.Load(path, runtime.Options{Device: "cpu", Adapters: adapters})
	if err != nil {
		t.Fatal(err)
	}
	adapted, _, _ := generate(t, cpuEng, withAdapter)
	cpuEng.Close()
	if equal(adapted, golden) {
		t.Fatal("the adapter changes nothing")
	}
	for _, tc := range []struct {
		name, fault string
		adapter     bool   // loaded with an adapter, which the story is told with
		status      string // SelfCheck.Status
		plan        string // the plan it runs with
		failed      []string
	}{
		{name: "sound kernels", status: "passed", plan: "the adapter's kernels"},
		{name: "a faulty fused GEMV", fault: "matmul_gemv+norm+split3+prescaled", status: "fallback",
			plan: "unfused projections", failed: []string{"the adapter's kernels", "no RMSNorm prologue in the GEMVs"}},
		{name: "a faulty kernel every plan runs", fault: "embed", status: "cpu", plan: "the CPU backend",
			failed: []string{"the adapter's kernels", "no RMSNorm prologue in the GEMVs", "unfused projections", "unfused LoRA",
				"tiled GEMM for compressed and expert products", "the other attention kernel", "tiled GEMM for f32 products", "naive f32 products"}},
		{name: "a faulty GEMV with its adapters fused", fault: "matmul_gemv+norm+split3+prescaled+lora+shrink", adapter: true, status: "fallback",
			plan: "unfused LoRA", failed: []string{"the adapter's kernels", "no RMSNorm prologue in the GEMVs", "unfused projections"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache := runtime.DirCache(t.TempDir())
			opts := runtime.Options{GPU: dev, Plan: gpu.Plan{Fault: tc.fault}, SelfCheckCache: cache}
			want, req := golden, runtime.Request{MaxTokens: n}
			if tc.adapter {
				opts.Adapters, want, req = adapters, adapted, withAdapter
			}
			story := func(eng *runtime.Engine) []int32 {
				ids, _, _ := generate(t, eng, req)
				return ids
			}
			eng := loadWebGPU(t, path, opts)
			c, ok := eng.SelfCheck()
			if !ok || c.Status() != tc.status || c.Plan != tc.plan || c.Cached {
				t.Fatalf("self-check ran %v: %s, plan %q, cached %v; want %s with %q", ok, c.Status(), c.Plan, c.Cached, tc.status, tc.plan)
			}
			t.Log(c)
			var failed []string
			for _, f := range c.Failed {
				failed = append(failed, f.Plan)
				if f.Error == "" {
					t.Errorf("%s failed without saying how", f.Plan)
				}
			}
			if strings.Join(failed, "|") != strings.Join(tc.failed, "|") {
				t.Errorf("failed plans %q, want %q", failed, tc.failed)
			}
			onCPU := eng.DeviceName() == "cpu"
			if onCPU != (tc.status == "cpu") {
				t.Errorf("engine runs on %s", eng.DeviceName())
			}
			if onCPU && !strings.Contains(eng.DeviceNote(), "self-check") {
				t.Errorf("device note %q does not say why the engine runs on the CPU", eng.DeviceNote())
			}
			if tc.status != "cpu" && len(c.Kernels) == 0 {
				t.Error("no kernel variants listed")
			}
			if got := story(eng); !equal(got, want) {
				t.Fatalf("after the self-check the story differs:\n got %v\nwant %v", got, want)
			}
			eng.Close()

			// The second load reads the result from the cache.
			again := loadWebGPU(t, path, opts)
			c2, _ := again.SelfCheck()
			if !c2.Cached || c2.Status() != c.Status() || c2.Plan != c.Plan || (again.DeviceName() == "cpu") != onCPU {
				t.Errorf("second load: %s (cached %v), want %s from the cache", c2, c2.Cached, c.Status())
			}
			again.Close()

			if tc.fault == "" {
				return
			}
			opts.NoSelfCheck = true
			unchecked := loadWebGPU(t, path, opts)
			if _, ran := unchecked.SelfCheck(); ran {
				t.Error("NoSelfCheck ran the self-check")
			}
			if equal(story(unchecked), want) {
				t.Errorf("the fault %q changes nothing: the test proves nothing", tc.fault)
			}
		})
	}
}

// TestSelfCheckPassesEveryFamily: on sound kernels the self-check never
// cries wolf. Every tiny decoder shape synth knows, in f32 and in a block
// type, passes on the adapter's own kernels.
func TestSelfCheckPassesEveryFamily(t *testing.T) {
	dev, err := webgpu.Open(webgpu.Options{})
	if errors.Is(err, webgpu.ErrNoAdapter) {
		gputest.NoDevice(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	for _, name := range synth.Names() {
		s, err := synth.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		if name != "tiny" && !strings.HasPrefix(name, "tiny-") || s.Config.Encoder.On || s.Config.Pooling != models.PoolNone || s.Config.Arch == "mistral" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), name+".gguf")
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := synth.Write(f, s, dtype.F32, 1); err != nil {
				t.Fatal(err)
			}
			f.Close()
			for _, quant := range []string{"f32", "int4"} {
				eng := loadWebGPU(t, path, runtime.Options{GPU: dev, Quant: quant, SelfCheckCache: runtime.DirCache(t.TempDir())})
				if c, ok := eng.SelfCheck(); !ok || c.Status() != "passed" {
					t.Errorf("%s: %v", quant, c)
				}
				eng.Close()
			}
		})
	}
}
