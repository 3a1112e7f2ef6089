package host_test

import (
	"context"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/host"
	"github.com/tessera-llm/tessera/runtime"
)

// The plugin path's overhead: the same greedy story through a plugin and
// straight through the Go API, on the same engine, as tokens per second;
// plus what a run costs before its first token (a fresh instance) and
// what one host call costs.
//
//	go test ./host -run '^$' -bench . -benchtime 20x

const benchSteps = 256

func BenchmarkGenerate(b *testing.B) {
	for _, device := range []string{"cpu", "webgpu"} {
		b.Run(device, func(b *testing.B) {
			eng := load(b, device)
			p := loadPlugin(b, newHost(b, eng), "story", host.Policy{})
			s := story{Prompt: "Once upon a time", Steps: benchSteps}
			in := input(b, s)
			b.Run("direct", func(b *testing.B) {
				var tokens int
				start := time.Now()
				for b.Loop() {
					st, err := eng.Generate(context.Background(), s.asRequest(), func(runtime.Token) error { return nil })
					if err != nil {
						b.Fatal(err)
					}
					tokens += st.Generated
				}
				b.ReportMetric(float64(tokens)/time.Since(start).Seconds(), "tok/s")
			})
			b.Run("plugin", func(b *testing.B) {
				var tokens int
				start := time.Now()
				for b.Loop() {
					res, err := p.Run(context.Background(), in)
					if err != nil {
						b.Fatal(err)
					}
					tokens += res.Tokens
				}
				b.ReportMetric(float64(tokens)/time.Since(start).Seconds(), "tok/s")
			})
		})
	}
}

// BenchmarkRun is the fixed cost of a run: instantiating the plugin
// (Go's runtime initialization included), checking its version, and a
// trivial handler.
func BenchmarkRun(b *testing.B) {
	p := loadPlugin(b, newHost(b, load(b, "cpu")), "testplugin", host.Policy{})
	in := input(b, mode("echo"))
	for b.Loop() {
		if _, err := p.Run(context.Background(), in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHostCall is one host call (count_tokens of a short text) from
// the plugin, round trip.
func BenchmarkHostCall(b *testing.B) {
	p := loadPlugin(b, newHost(b, load(b, "cpu")), "testplugin", host.Policy{MaxCalls: -1})
	const calls = 100000
	in := input(b, map[string]any{"mode": "flood", "n": calls})
	b.ResetTimer()
	for range b.N {
		if _, err := p.Run(context.Background(), in); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*calls), "ns/call")
}
