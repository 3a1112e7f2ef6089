package e2e

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/runtime"
)

// TestBrowserEmbeddings: engine.embeddings.create in Chromium (WebGPU on
// SwiftShader) returns the vectors the native engine computes, as floats
// and as base64, for a synthetic BERT and a synthetic nomic-bert.
func TestBrowserEmbeddings(t *testing.T) {
	exe := needChromium(t)
	wasmDir, modelDir := buildWasm(t), t.TempDir()
	texts := []string{"hello world", "Café naïve — 中文字!", strings.Repeat("abc def, ghi ", 20)}
	want := map[string][][]float32{}
	for _, shape := range []string{"tiny-bert", "tiny-nomic-bert"} {
		s, err := synth.Lookup(shape)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(modelDir, shape+".gguf")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := synth.Write(f, s, dtype.F32, 3); err != nil {
			t.Fatal(err)
		}
		f.Close()
		emb, err := runtime.LoadEmbedder(path, runtime.Options{Device: "cpu"})
		if err != nil {
			t.Fatal(err)
		}
		if want[shape], err = emb.Embed(context.Background(), texts); err != nil {
			t.Fatal(err)
		}
		emb.Close()
	}
	ctx, cons, _ := openAPIPage(t, exe, wasmDir, modelDir, nil)
	type result struct {
		Floats, Decoded [][]float64
		Tokens          int
		Err             string
	}
	for shape, want := range want {
		r, err := chromedp.Run(ctx, chromedp.Evaluate[result](`(async () => {
			try {
				const engine = await tessera.createEngine({model: "/models/`+shape+`.gguf", quant: "f32"});
				const input = `+jsStrings(texts)+`;
				const f = await engine.embeddings.create({input});
				const b = await engine.embeddings.create({input, encoding_format: "base64"});
				const decoded = b.data.map((d) => Array.from(new Float32Array(Uint8Array.from(atob(d.embedding), (c) => c.charCodeAt(0)).buffer)));
				await engine.unload();
				return {Floats: f.data.map((d) => d.embedding), Decoded: decoded, Tokens: f.usage.prompt_tokens};
			} catch (e) { return {Err: String(e && e.stack || e) + " " + (e && e.code)}; }
		})()`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("%s: %v (console %q)", shape, err, cons.all())
		}
		if r.Err != "" {
			t.Fatalf("%s: in the page: %s", shape, r.Err)
		}
		if len(r.Floats) != len(want) || len(r.Decoded) != len(want) || r.Tokens == 0 {
			t.Fatalf("%s: %d and %d embeddings for %d texts, %d tokens", shape, len(r.Floats), len(r.Decoded), len(want), r.Tokens)
		}
		for i := range want {
			for _, got := range [][]float64{r.Floats[i], r.Decoded[i]} {
				if d := cosineDistance(got, want[i]); !(d < 1e-5) {
					t.Errorf("%s text %d: browser and native at cosine distance %.3g", shape, i, d)
				}
			}
		}
	}
	time.Sleep(200 * time.Millisecond)
	if bad := cons.problems(); len(bad) > 0 {
		t.Errorf("the console has %d warnings or errors:\n%s", len(bad), strings.Join(bad, "\n"))
	}
}

func jsStrings(ss []string) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, s := range ss {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`)
	}
	b.WriteByte(']')
	return b.String()
}

func cosineDistance(a []float64, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += a[i] * float64(b[i])
		aa += a[i] * a[i]
		bb += float64(b[i]) * float64(b[i])
	}
	return 1 - ab/math.Sqrt(aa*bb)
}
