package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/grammar"
	"github.com/tessera-llm/tessera/runtime/grammar/grammartest"
)

// constraintSchemas are JSON Schemas of increasing difficulty, each
// generated from and validated by an independent validator.
var constraintSchemas = []string{
	`{"type":"boolean"}`,
	`{"enum":["red","green","blue"]}`,
	`{"type":"integer","minimum":1,"maximum":100}`,
	`{"type":"string","maxLength":10}`,
	`{"type":"number"}`,
	`{"type":["string","null"],"maxLength":5}`,
	`{"type":"array","items":{"type":"integer","minimum":-50,"maximum":50},"maxItems":4}`,
	`{"type":"string","format":"date"}`,
	`{"type":"string","format":"uuid"}`,
	`{"type":"string","pattern":"^[A-Z]{3}-[0-9]{2,4}$"}`,
	`{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0,"maximum":150}},"required":["name","age"],"additionalProperties":false}`,
	`{"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"null"},"c":{"const":"fixed"}},"additionalProperties":false}`,
	`{"type":"string","format":"date-time"}`,
	`{"type":"string","format":"email"}`,
	`{"anyOf":[{"type":"integer"},{"type":"null"},{"type":"string","minLength":2,"maxLength":4}]}`,
	`{"oneOf":[{"type":"integer","exclusiveMaximum":0},{"type":"boolean"},{"type":"array","maxItems":0}]}`,
	`{"type":"object","additionalProperties":{"type":"integer"}}`,
	`{"type":"object","properties":{"id":{"type":"string","format":"uuid"},"address":{"type":"object","properties":{"street":{"type":"string"},"zip":{"type":"string","pattern":"^\\d{5}$"}},"required":["zip"]}},"required":["id","address"]}`,
	`{"type":"array","minItems":1,"maxItems":3,"items":{"type":"object","properties":{"sku":{"type":"string","maxLength":6},"qty":{"type":"integer","minimum":1},"price":{"type":"number","minimum":0,"maximum":1000}},"required":["sku","qty"]}}`,
	`{"$defs":{"node":{"type":"object","properties":{"value":{"type":"integer"},"next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["value","next"]}},"$ref":"#/$defs/node"}`,
}

// Bounds for what the schemas leave open, so that a random model finishes
// in its context.
var testSchemaOpts = grammar.SchemaOptions{MaxString: 12, MaxItems: 3}

// sampleConstrained runs n samples of req and returns their texts,
// failing when one ends for another reason than the grammar's end.
func sampleConstrained(t *testing.T, eng *runtime.Engine, req runtime.Request, n int) []string {
	t.Helper()
	sts, err := eng.StartN(context.Background(), req, n)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, n)
	for i, st := range sts {
		var b strings.Builder
		for tok, err := range st.Tokens() {
			if err != nil {
				t.Fatal(err)
			}
			b.WriteString(tok.Text)
		}
		s := st.Stats()
		if !s.Complete && !s.StoppedAtEOS {
			t.Errorf("sample %d ended unfinished after %d tokens: %q", i, s.Generated, b.String())
		}
		out[i] = b.String()
	}
	return out
}

// checkSchemas generates samples for every schema and validates them.
func checkSchemas(t *testing.T, eng *runtime.Engine, prompt string, samples, maxTokens int) {
	for i, schema := range constraintSchemas {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			g, err := grammar.JSONSchema([]byte(schema), testSchemaOpts)
			if err != nil {
				t.Fatal(err)
			}
			v := grammartest.Validator(t, schema)
			req := runtime.Request{Prompt: prompt, MaxTokens: maxTokens, Constraint: g,
				Sampler: runtime.SamplerOptions{Temperature: 1, Seed: uint64(100 + i)}}
			for k, text := range sampleConstrained(t, eng, req, samples) {
				if k == 0 {
					t.Logf("%s", text)
				}
				inst, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
				if err != nil {
					t.Errorf("sample %d is not JSON: %q: %v", k, text, err)
					continue
				}
				if err := v.Validate(inst); err != nil {
					t.Errorf("sample %d does not validate: %q: %v", k, text, err)
				}
			}
		})
	}
}

// checkGBNFAndRegex: a GBNF grammar and a regular expression, checked by
// Go's regexp package.
func checkGBNFAndRegex(t *testing.T, eng *runtime.Engine, prompt string, samples, maxTokens int) {
	cases := []struct {
		name, src, check string
		regex            bool
	}{
		{"gbnf", `root ::= "[" item ("," " "? item){0,3} "]"
item ::= [a-z]{1,6} | [0-9]{1,3} | "\"" [^"\\\n]{0,5} "\""`, `^\[([a-z]{1,6}|[0-9]{1,3}|"[^"\\\n]{0,5}")(, ?([a-z]{1,6}|[0-9]{1,3}|"[^"\\\n]{0,5}")){0,3}\]$`, false},
		{"regex", `(yes|no|maybe): [A-Z][a-z]{0,8}( [a-z]{1,8}){0,3}\.`, `^(yes|no|maybe): [A-Z][a-z]{0,8}( [a-z]{1,8}){0,3}\.$`, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var g *grammar.Grammar
			var err error
			if c.regex {
				g, err = grammar.Regex(c.src)
			} else {
				g, err = grammar.Parse(c.src)
			}
			if err != nil {
				t.Fatal(err)
			}
			re := regexp.MustCompile(c.check)
			req := runtime.Request{Prompt: prompt, MaxTokens: maxTokens, Constraint: g,
				Sampler: runtime.SamplerOptions{Temperature: 1, TopK: 40, Seed: 7}}
			for k, text := range sampleConstrained(t, eng, req, samples) {
				if !re.MatchString(text) {
					t.Errorf("sample %d: %q does not match %s", k, text, c.check)
				}
			}
		})
	}
}

func TestConstrainedStories260K(t *testing.T) {
	eng, err := runtime.Load(sharedFile(t, "stories260K.gguf"), runtime.Options{Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	samples := 20
	if testing.Short() {
		samples = 4
	}
	checkSchemas(t, eng, "Once upon a time", samples, 400)
	checkGBNFAndRegex(t, eng, "Once upon a time", samples, 200)
}

func TestConstrainedStories260KWebGPU(t *testing.T) {
	eng := loadWebGPU(t, sharedFile(t, "stories260K.gguf"), runtime.Options{})
	samples := 20
	if testing.Short() {
		samples = 4
	}
	checkSchemas(t, eng, "Once upon a time", samples, 400)
	checkGBNFAndRegex(t, eng, "Once upon a time", samples, 200)
}

// TestConstrainedGreedyMatchesHost: greedy constrained decoding, masked on
// the device, picks what masking the logits on the host picks.
func TestConstrainedGreedyWebGPU(t *testing.T) {
	path := sharedFile(t, "stories260K.gguf")
	cpu, err := runtime.Load(path, runtime.Options{Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer cpu.Close()
	gpu := loadWebGPU(t, path, runtime.Options{})
	g, err := grammar.JSONSchema([]byte(constraintSchemas[18]), testSchemaOpts)
	if err != nil {
		t.Fatal(err)
	}
	req := runtime.Request{Prompt: "Once upon a time", MaxTokens: 300, Constraint: g}
	a := sampleConstrained(t, cpu, req, 1)[0]
	b := sampleConstrained(t, gpu, req, 1)[0]
	if a != b {
		t.Errorf("greedy constrained output differs:\n cpu %q\n gpu %q", a, b)
	}
	if !json.Valid([]byte(a)) {
		t.Errorf("not JSON: %q", a)
	}
}

// syntheticQwen3 writes a random-weight Qwen3 (tiny dimensions, the real
// 151,936-token vocabulary), to load with the real Qwen3 tokenizer.
func syntheticQwen3(t testing.TB) string {
	t.Helper()
	tok := filepath.Join(shared, "..", "tokenizers", "qwen3", "tokenizer.json")
	if _, err := os.Stat(tok); err != nil {
		t.Skipf("no Qwen3 tokenizer: %v", err)
	}
	s, err := synth.Lookup("tiny-qwen3")
	if err != nil {
		t.Fatal(err)
	}
	s.Config.Vocab, s.Config.Context = 151936, 1024
	path := filepath.Join(t.TempDir(), "qwen3.gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := synth.Write(f, s, dtype.F16, 3); err != nil {
		t.Fatal(err)
	}
	return path
}

func loadQwen3(t testing.TB) *runtime.Engine {
	t.Helper()
	path := syntheticQwen3(t)
	tok := filepath.Join(shared, "..", "tokenizers", "qwen3", "tokenizer.json")
	eng, err := runtime.Load(path, runtime.Options{Device: "cpu", Tokenizer: tok})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng
}

func TestConstrainedQwen3(t *testing.T) {
	// Among the slowest of the package; its own files and engines (each
	// with its own device), so it runs beside the other parallel ones.
	t.Parallel()
	eng := loadQwen3(t)
	samples := 20
	if testing.Short() {
		samples = 2
	}
	checkSchemas(t, eng, "Give me JSON:", samples, 600)
	checkGBNFAndRegex(t, eng, "Answer:", samples, 300)
}

// benchSchemaGrammar is a long JSON document for decode benchmarks.
func benchSchemaGrammar(b *testing.B) *grammar.Grammar {
	g, err := grammar.JSONSchema([]byte(`{"type":"array","minItems":40,"maxItems":40,"items":{"type":"object",
		"properties":{"name":{"type":"string","maxLength":12},"n":{"type":"integer","minimum":0,"maximum":999}},"required":["name","n"]}}`), grammar.SchemaOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return g
}

// benchDecode reports decode tokens/s with and without a constraint,
// measured in ABBA order within each iteration (unconstrained,
// constrained, constrained, unconstrained), so that a machine whose load
// drifts weighs on both alike, and their ratio.
func benchDecode(b *testing.B, eng *runtime.Engine, g *grammar.Grammar, maxTokens int, sampler runtime.SamplerOptions) {
	var tokens, decode [2]float64 // [unconstrained, constrained]
	run := func(k int) {
		sampler.Seed++
		req := runtime.Request{Prompt: "Once upon a time", MaxTokens: maxTokens, IgnoreEOS: k == 0, Sampler: sampler}
		if k == 1 {
			req.Constraint = g
		}
		st, err := eng.Generate(context.Background(), req, func(runtime.Token) error { return nil })
		if err != nil {
			b.Fatal(err)
		}
		tokens[k] += float64(st.Generated - 1)
		decode[k] += st.Decode.Seconds()
	}
	for b.Loop() {
		for _, k := range []int{0, 1, 1, 0} {
			run(k)
		}
	}
	un, con := tokens[0]/decode[0], tokens[1]/decode[1]
	b.ReportMetric(un, "tok/s-unconstrained")
	b.ReportMetric(con, "tok/s-constrained")
	b.ReportMetric(con/un, "constrained/unconstrained")
	b.ReportMetric(tokens[1]/float64(2*b.N), "constrained-tokens/op")
}

// BenchmarkConstrainedDecode compares decode tokens/s with and without a
// JSON Schema constraint on stories260K (CPU), sampling at temperature 1,
// one sequence: the constraint's cost per token is the mask lookup (or
// computation, for a state met for the first time) and the masking of
// the logits row.
func BenchmarkConstrainedDecode(b *testing.B) {
	eng, err := runtime.Load(sharedFile(b, "stories260K.gguf"), runtime.Options{Device: "cpu"})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	benchDecode(b, eng, benchSchemaGrammar(b), 300, runtime.SamplerOptions{Temperature: 1})
}

// BenchmarkConstrainedDecodeQwen3 is the same on the CPU with a tiny
// random Qwen3 and the real 151,936-token vocabulary, at temperature 1:
// the model costs little, and every sample takes a new path through the
// grammar, so the first visits of states (their masks computed while the
// next step runs, Engine.prefetchMask) weigh as much as they can.
func BenchmarkConstrainedDecodeQwen3(b *testing.B) {
	benchDecode(b, loadQwen3(b), benchSchemaGrammar(b), 120, runtime.SamplerOptions{Temperature: 1})
}

// BenchmarkConstrainedDecodeWebGPU is the same on WebGPU with a synthetic
// smollm2-135m (int4, its real 49,152-token vocabulary shape, random
// weights and vocabulary), greedy: the masked argmax reads back only ids.
func BenchmarkConstrainedDecodeWebGPU(b *testing.B) {
	s, err := synth.Lookup("smollm2-135m")
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "smollm2.gguf")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := synth.Write(f, s, dtype.F16, 1); err != nil {
		b.Fatal(err)
	}
	f.Close()
	eng, err := runtime.Load(path, runtime.Options{Device: "webgpu", Context: 512})
	if err != nil {
		b.Skip(err)
	}
	defer eng.Close()
	benchDecode(b, eng, benchSchemaGrammar(b), 40, runtime.SamplerOptions{})
}

// TestConstrainedWithOtherFeatures: a constrained sequence keeps its
// constraint on an engine that speculates and chains steps (both switch
// off for it) and alongside unconstrained sequences, and with logprobs it
// reports the raw model's log-probabilities of the tokens it picked.
func TestConstrainedWithOtherFeatures(t *testing.T) {
	path := sharedFile(t, "stories260K.gguf")
	g, err := grammar.JSONSchema([]byte(constraintSchemas[10]), testSchemaOpts)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := runtime.Load(path, runtime.Options{Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	req := runtime.Request{Prompt: "Once upon a time", MaxTokens: 200, Constraint: g}
	want := sampleConstrained(t, plain, req, 1)[0]
	for _, opts := range []runtime.Options{{Device: "cpu", Draft: "ngram"}, {Device: "cpu", MultiStep: 4}} {
		eng, err := runtime.Load(path, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer eng.Close()
		free, err := eng.Start(context.Background(), runtime.Request{Prompt: "Once upon a time", MaxTokens: 100})
		if err != nil {
			t.Fatal(err)
		}
		if got := sampleConstrained(t, eng, req, 1)[0]; got != want {
			t.Errorf("%+v: %q, want %q", opts, got, want)
		}
		for _, err := range free.Tokens() {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	lp := req
	lp.Logprobs, lp.TopLogprobs = true, 3
	var text strings.Builder
	if _, err := plain.Generate(context.Background(), lp, func(tok runtime.Token) error {
		text.WriteString(tok.Text)
		if tok.ID >= 0 && (tok.Logprob > 0 || len(tok.Top) != 3 || tok.Top[0].Logprob < tok.Logprob) {
			t.Errorf("token %d: logprob %g, top %+v", tok.ID, tok.Logprob, tok.Top)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if text.String() != want {
		t.Errorf("with logprobs: %q, want %q", text.String(), want)
	}
}

// TestConstrainedQwen3WebGPU: the same schemas on WebGPU, where the mask
// of the 151,936-token vocabulary is applied on the device
// (TESSERA_CONSTRAIN_SAMPLES sets the samples per schema).
func TestConstrainedQwen3WebGPU(t *testing.T) {
	// Among the slowest of the package; its own files and engines (each
	// with its own device), so it runs beside the other parallel ones.
	t.Parallel()
	path := syntheticQwen3(t)
	tok := filepath.Join(shared, "..", "tokenizers", "qwen3", "tokenizer.json")
	eng := loadWebGPU(t, path, runtime.Options{Tokenizer: tok})
	samples := 20
	if n, err := strconv.Atoi(os.Getenv("TESSERA_CONSTRAIN_SAMPLES")); err == nil && n > 0 {
		samples = n
	}
	if testing.Short() {
		samples = 1
	}
	checkSchemas(t, eng, "Give me JSON:", samples, 600)
	checkGBNFAndRegex(t, eng, "Answer:", samples, 300)
}

// TestConstraintBudget: a grammar whose parses multiply is refused by
// Start when its start state already runs past the machine's limits, and
// ends its own sequence with a budget error when it runs past them later;
// either way the engine lives and serves the next request. Before the
// budgets, the first grew the process by gigabytes and the nested bounded
// repetition overflowed the goroutine stack.
func TestConstraintBudget(t *testing.T) {
	eng, err := runtime.Load(sharedFile(t, "stories260K.gguf"), runtime.Options{Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	for _, re := range []string{`((a?){1000}){1000}`, `((a{0,1000}){0,1000}){0,1000}`} {
		g, err := grammar.Regex(re)
		if err != nil {
			t.Fatal(err)
		}
		_, err = eng.Start(context.Background(), runtime.Request{Prompt: "Once", MaxTokens: 4, Constraint: g})
		if !errors.Is(err, runtime.ErrBadRequest) || !errors.Is(err, grammar.ErrBudget) {
			t.Fatalf("%s: Start: %v, want a bad request for a budget", re, err)
		}
	}
	// Text the start's mask cannot see past, then the multiplying part:
	// the machine runs out in a later step.
	g, err := grammar.Regex(`Once upon a time, there was((a?){1000}){1000}`)
	if err != nil {
		t.Fatal(err)
	}
	st, err := eng.Start(context.Background(), runtime.Request{Prompt: "Hi", MaxTokens: 60, Constraint: g})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	var text strings.Builder
	for tok, err := range st.Tokens() {
		if err != nil {
			if !errors.Is(err, runtime.ErrBadRequest) || !errors.Is(err, grammar.ErrBudget) {
				t.Fatalf("the stream ended with %v, want a bad request for a budget", err)
			}
			break
		}
		text.WriteString(tok.Text)
	}
	if !strings.HasPrefix("Once upon a time, there was", strings.TrimSpace(text.String())) {
		t.Errorf("before the budget ran out: %q", text.String())
	}
	if st.Stats().Generated == 0 {
		t.Error("the budget ran out before the first token: the start's probe should have seen it")
	}
	// The engine goes on.
	ok, err := grammar.Regex(`[a-z ]{1,20}\.`)
	if err != nil {
		t.Fatal(err)
	}
	if out := sampleConstrained(t, eng, runtime.Request{Prompt: "Once", MaxTokens: 40, Constraint: ok}, 1); !regexp.MustCompile(`^[a-z ]{1,20}\.$`).MatchString(out[0]) {
		t.Errorf("after: %q", out[0])
	}
}
