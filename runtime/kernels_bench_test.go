package runtime

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu/gputest"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
)

// stepModelURL is where BenchmarkStepKernels fetches its model in the
// browser, which has no files (web/e2e's TestBrowserStepKernels serves it).
var stepModelURL = flag.String("step-model-url", "", "URL of the GGUF BenchmarkStepKernels decodes (for GOOS=js)")

// stepPlans lists the kernel plans BenchmarkStepKernels compares in one
// run, ";" between plans, each "" (the adapter's) or fields of GPUPlan as
// key=value joined by ",": subgroups, prologue (NormPrologue), workgroups.
var stepPlans = flag.String("step-plans", "", `BenchmarkStepKernels' plans, e.g. ";subgroups=off;prologue=on;ropeattend=off"`)

func parseStepPlan(s string) (GPUPlan, error) {
	var p GPUPlan
	for _, kv := range strings.Split(s, ",") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "subgroups":
			p.Subgroups = v
		case "prologue":
			p.NormPrologue = v
		case "workgroups":
			p.Workgroups = v
		case "ropeattend":
			p.RopeAttend = v
		default:
			return p, fmt.Errorf("step plan %q: unknown field %q", s, k)
		}
	}
	return p, nil
}

// capturingDevice passes everything to a WebGPU device and, while on,
// keeps the dispatches its recorders are given, with their kernels' names.
type capturingDevice struct {
	webgpu.Device
	names map[webgpu.Pipeline]string
	on    bool
	got   []capturedDispatch
}

type capturedDispatch struct {
	name    string
	p       webgpu.Pipeline
	g       webgpu.BindGroup
	x, y, z uint32
}

func (d *capturingDevice) Pipeline(k webgpu.Kernel) (webgpu.Pipeline, error) {
	p, err := d.Device.Pipeline(k)
	if err == nil {
		d.names[p] = k.Name
	}
	return p, err
}

func (d *capturingDevice) Recorder() webgpu.Recorder {
	return &capturingRecorder{Recorder: d.Device.Recorder(), d: d}
}

type capturingRecorder struct {
	webgpu.Recorder
	d *capturingDevice
}

func (r *capturingRecorder) Dispatch(p webgpu.Pipeline, g webgpu.BindGroup, x, y, z uint32) {
	if r.d.on {
		r.d.got = append(r.d.got, capturedDispatch{r.d.names[p], p, g, x, y, z})
	}
	r.Recorder.Dispatch(p, g, x, y, z)
}

// BenchmarkStepKernels times each dispatch of one stories260K decode step
// on its own: the dispatch repeated reps times in one submission, less an
// empty submission's round trip, divided by reps. It runs natively and, as
// wasm, in Chromium (web/e2e), so that the same adapter (SwiftShader) can
// be compared kernel by kernel across the two WebGPU implementations
// (issue 49). Values are the least of several rounds (wall µs a dispatch).
// -step-plans loads one engine a plan on the same device and alternates
// them round by round, so that forms compare under the same load.
//
//	VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json go test ./runtime -run '^$' -bench StepKernels -benchtime 1x -v -args -step-plans=';prologue=off'
//
// The round trip's own cost is the least of an empty submission's; a
// dispatch that writes what it reads (a residual add) is timed all the
// same, its values being of no interest here.
func BenchmarkStepKernels(b *testing.B) {
	var data []byte
	if *stepModelURL != "" {
		resp, err := http.Get(*stepModelURL)
		if err != nil {
			b.Fatal(err)
		}
		data, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			b.Fatal(err)
		}
	} else {
		var err error
		if data, err = os.ReadFile(filepath.Join("..", "..", "shared", "models", "stories260K.gguf")); err != nil {
			b.Skip("no stories260K")
		}
	}
	inner := gputest.Open(b)
	dev := &capturingDevice{Device: inner, names: map[webgpu.Pipeline]string{}}
	type planned struct {
		name string
		got  []capturedDispatch
	}
	var plans []planned
	for _, spec := range strings.Split(*stepPlans, ";") {
		plan, err := parseStepPlan(spec)
		if err != nil {
			b.Fatal(err)
		}
		m, err := models.OpenReader(bytes.NewReader(data), int64(len(data)), "stories260K.gguf")
		if err != nil {
			b.Fatal(err)
		}
		eng, err := LoadModel(m, Options{Device: "webgpu", GPU: dev, Quant: "f32", Context: 64, NoSelfCheck: true, Plan: plan})
		if err != nil {
			b.Fatal(err)
		}
		defer eng.Close()
		n, be := eng.net, eng.be
		step := backend.Batch{Tokens: []int32{5}, Pos: []int32{3}, Seq: []int32{0}, Tables: [][]int32{{0}}, BlockSize: eng.pool.BlockSize(), Out: []int32{0}}
		run := func() {
			if err := n.forward(step); err != nil {
				b.Fatal(err)
			}
			if _, err := be.Argmax(n.logits, 1); err != nil {
				b.Fatal(err)
			}
		}
		run() // compiles the pipelines
		dev.on, dev.got = true, nil
		run()
		dev.on = false
		if spec == "" {
			spec = "the adapter's plan"
		}
		plans = append(plans, planned{spec, dev.got})
	}
	probe, err := inner.NewBuffer("probe", 16, webgpu.Storage|webgpu.CopySrc|webgpu.CopyDst)
	if err != nil {
		b.Fatal(err)
	}
	defer probe.Release()
	const reps, rounds = 40, 7
	timed := func(d *capturedDispatch) time.Duration {
		rec := inner.Recorder()
		t0 := time.Now()
		if d != nil {
			for range reps {
				rec.Dispatch(d.p, d.g, d.x, d.y, d.z)
			}
		}
		if err := rec.Submit(); err != nil {
			b.Fatal(err)
		}
		if _, err := inner.Read(probe, 0, 4); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	empty := time.Hour
	least := make([][]time.Duration, len(plans))
	for i, p := range plans {
		least[i] = make([]time.Duration, len(p.got))
		for k := range least[i] {
			least[i][k] = time.Hour
		}
	}
	// Rounds alternate the plans, so that each sees the same load.
	b.ResetTimer()
	for range b.N {
		for range rounds {
			empty = min(empty, timed(nil))
			for i, p := range plans {
				for k := range p.got {
					least[i][k] = min(least[i][k], timed(&p.got[k]))
				}
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(empty)/float64(time.Microsecond), "roundtrip-µs")
	for i, p := range plans {
		type row struct {
			name, shape string
			n           int
			us          float64
		}
		byName := map[string]*row{}
		var total float64
		for k, d := range p.got {
			us := float64(least[i][k]-empty) / float64(time.Microsecond) / reps
			total += us
			r := byName[d.name]
			if r == nil {
				r = &row{name: d.name, shape: fmt.Sprintf("%dx%dx%d", d.x, d.y, d.z)}
				byName[d.name] = r
			}
			r.n++
			r.us += us
		}
		rows := make([]*row, 0, len(byName))
		for _, r := range byName {
			rows = append(rows, r)
		}
		sort.Slice(rows, func(i, j int) bool { return rows[i].us > rows[j].us })
		var lines []string
		for _, r := range rows {
			lines = append(lines, fmt.Sprintf("%-42s %2d x %-9s %8.1f µs a step", r.name, r.n, r.shape, r.us))
		}
		b.ReportMetric(total, fmt.Sprintf("plan%d-step-µs", i))
		b.Logf("%s, plan %d (%s): %d dispatches a step, %.0f µs in all (empty round trip %v)\n%s",
			inner.Info().Adapter, i, p.name, len(p.got), total, empty, strings.Join(lines, "\n"))
	}
}
