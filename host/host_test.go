package host_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tessera-llm/tessera/host"
)

// TestStoryMatchesGenerate: the example plugin, greedy, writes exactly the
// text Engine.Generate writes for the same prompt, on both backends.
func TestStoryMatchesGenerate(t *testing.T) {
	for _, device := range []string{"cpu", "webgpu"} {
		t.Run(device, func(t *testing.T) {
			eng := load(t, device)
			p := loadPlugin(t, newHost(t, eng), "story", host.Policy{})
			for _, prompt := range prompts {
				s := story{Prompt: prompt, Steps: 120}
				res, err := p.Run(context.Background(), input(t, s))
				if err != nil {
					t.Fatalf("%q: %v", prompt, err)
				}
				if got, want := string(res.Output), s.want(t, eng); got != want {
					t.Errorf("%q:\nplugin   %q\nGenerate %q", prompt, got, want)
				}
				if res.Generations != 1 || res.Tokens == 0 || res.Tokens > s.Steps {
					t.Errorf("%q: %d tokens in %d generations", prompt, res.Tokens, res.Generations)
				}
				if ids, err := eng.PromptTokens(s.asRequest()); err != nil || res.PromptTokens != len(ids) {
					t.Errorf("%q: %d prompt tokens, want %d (%v)", prompt, res.PromptTokens, len(ids), err)
				}
			}
		})
	}
}

// TestExampleHost builds the example host command and runs the example
// plugin with it, greedy, on each device: it prints what Engine.Generate
// writes.
func TestExampleHost(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the example host and runs it end to end (skipped by -short, as make check runs; make test runs it)")
	}
	bin, plugin := exampleHost(t)
	for _, device := range []string{"cpu", "webgpu"} {
		t.Run(device, func(t *testing.T) {
			eng := load(t, device) // skips without an adapter, as the command would fall back
			s := story{Prompt: "Once upon a time, there was a dog", Steps: 150}
			want := s.want(t, eng) + "\n"
			cmd := exec.Command(bin, "--model", modelPath, "--plugin", plugin, "--device", device,
				"--prompt", s.Prompt, "--steps", fmt.Sprint(s.Steps), "--temperature", "0")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("%v\n%s", err, stderr.String())
			}
			if stdout.String() != want {
				t.Errorf("host printed\n%q\nwant\n%q", stdout.String(), want)
			}
			t.Logf("stderr: %s", stderr.String())
		})
	}
}

// TestExampleHostLikeRun: the example host and `tessera run` take the
// same defaults, so that the same flags print the same story: with no
// --prompt both start from BOS, and --steps 200 is 200 generated tokens,
// which the summary reports next to the prompt's. (The host's prompt used
// to default to "Once upon a time", four tokens that the plugin echoes
// and that stories260K also writes first from BOS, so its output was
// `tessera run --steps 204`'s.)
func TestExampleHostLikeRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the example host and runs it end to end (skipped by -short, as make check runs; make test runs it)")
	}
	bin, plugin := exampleHost(t)
	eng := load(t, "cpu")
	const steps = 200
	// What `tessera run --steps 200 --temperature 0` prints: the prompt
	// (none), then the generated text.
	want := generate(t, eng, storyRequest("", steps)) + "\n"
	cmd := exec.Command(bin, "--model", modelPath, "--plugin", plugin, "--device", "cpu",
		"--steps", fmt.Sprint(steps), "--temperature", "0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	if stdout.String() != want {
		t.Errorf("host printed\n%q\nwant what tessera run --steps %d prints\n%q", stdout.String(), steps, want)
	}
	if summary := fmt.Sprintf("1 prompt tokens, %d generated", steps); !strings.Contains(stderr.String(), summary) {
		t.Errorf("summary %q does not say %q", stderr.String(), summary)
	}
}

// exampleHost builds the example host command and writes the story
// plugin next to it, once per test binary.
func exampleHost(t *testing.T) (bin, plugin string) {
	t.Helper()
	exampleOnce.Do(func() {
		dir := filepath.Join(wasmDir, "example")
		if exampleErr = os.MkdirAll(dir, 0o755); exampleErr != nil {
			return
		}
		bin = filepath.Join(dir, "host")
		build := exec.Command(goTool(t), "build", "-o", bin, "./examples/plugin/host")
		build.Dir = ".."
		if out, err := build.CombinedOutput(); err != nil {
			exampleErr = fmt.Errorf("building the example host: %v\n%s", err, out)
			return
		}
		exampleBin, examplePlugin = bin, filepath.Join(dir, "story.wasm")
		exampleErr = writeFile(examplePlugin, wasm(t, "story"))
	})
	if exampleErr != nil {
		t.Fatal(exampleErr)
	}
	return exampleBin, examplePlugin
}

var (
	exampleOnce               sync.Once
	exampleBin, examplePlugin string
	exampleErr                error
)

// TestPluginsConcurrently: two plugins (and the embedder's own request)
// generating at once on one engine each get their own correct text, and
// one plugin's concurrent runs do too.
func TestPluginsConcurrently(t *testing.T) {
	eng := load(t, "cpu")
	h := newHost(t, eng)
	a := loadPlugin(t, h, "story", host.Policy{})
	b := loadPlugin(t, h, "story", host.Policy{TokenBudget: 500})
	stories := []story{
		{Prompt: prompts[0], Steps: 200},
		{Prompt: prompts[1], Steps: 160},
		{Prompt: prompts[2], Steps: 180},
		{Prompt: prompts[3], Steps: 100},
	}
	want := make([]string, len(stories))
	for i, s := range stories {
		want[i] = s.want(t, eng)
	}
	for round := range 3 {
		var wg sync.WaitGroup
		got := make([]string, len(stories))
		errs := make([]error, len(stories))
		for i, s := range stories {
			p := []*host.Plugin{a, b}[i%2]
			wg.Go(func() {
				res, err := p.Run(context.Background(), input(t, s))
				got[i], errs[i] = string(res.Output), err
			})
		}
		direct := generate(t, eng, stories[0].asRequest()) // the embedder's own request, meanwhile
		wg.Wait()
		if stories[0].Prompt+direct != want[0] {
			t.Errorf("round %d: the embedder's own generation changed", round)
		}
		for i := range stories {
			if errs[i] != nil {
				t.Errorf("round %d, story %d: %v", round, i, errs[i])
			} else if got[i] != want[i] {
				t.Errorf("round %d, story %d:\n got %q\nwant %q", round, i, got[i], want[i])
			}
		}
	}
}

// TestConcurrentGenerationsInOnePlugin: a plugin pulling several
// generations in turns gets each one's own tokens.
func TestConcurrentGenerationsInOnePlugin(t *testing.T) {
	eng := load(t, "cpu")
	p := loadPlugin(t, newHost(t, eng), "testplugin", host.Policy{MaxGenerations: 3})
	req := map[string]any{"prompt": "Once upon a time", "max_tokens": 60, "temperature": 0.9}
	res, err := p.Run(context.Background(), input(t, map[string]any{"mode": "generate-many", "n": 3, "request": req}))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	mustUnmarshal(t, res.Output, &got)
	for i, text := range got {
		r := storyRequest("Once upon a time", 60)
		r.Sampler.Temperature, r.Sampler.Seed = 0.9, uint64(i)
		if want := generate(t, eng, r); text != want {
			t.Errorf("generation %d (seed %d):\n got %q\nwant %q", i, i, text, want)
		}
	}
	if res.Generations != 3 {
		t.Errorf("%d generations, want 3", res.Generations)
	}
}
