package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/server"
)

// embedders loads synthetic tiny-bert and tiny-reranker on the CPU.
func embedders(t *testing.T) (emb, ranker *runtime.Embedder) {
	t.Helper()
	var out []*runtime.Embedder
	for _, shape := range []string{"tiny-bert", "tiny-reranker"} {
		e, err := runtime.LoadEmbedder(synthModel(t, shape, 0), runtime.Options{Device: "cpu"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		out = append(out, e)
	}
	return out[0], out[1]
}

func serveEmbedders(t *testing.T, emb, ranker *runtime.Embedder) string {
	t.Helper()
	s := server.New(server.Options{})
	if err := s.Add(modelName, cpuEngine(t)); err != nil {
		t.Fatal(err)
	}
	if err := s.AddEmbedder("bert", emb); err != nil {
		t.Fatal(err)
	}
	if err := s.AddEmbedder("ranker", ranker); err != nil {
		t.Fatal(err)
	}
	s.Ready()
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestEmbeddingsOpenAIClient: /v1/embeddings through the official Go
// client, every input shape and both encodings, gives the engine's own
// vectors; dimensions truncates and renormalises; errors come in OpenAI's
// shape with the field at fault.
func TestEmbeddingsOpenAIClient(t *testing.T) {
	emb, ranker := embedders(t)
	url := serveEmbedders(t, emb, ranker)
	oc := client(url)
	ctx := context.Background()
	texts := []string{"hello world", "Café, naïve — 中文!", strings.Repeat("ab cd ", 30)}
	want, err := emb.Embed(ctx, texts)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([][]int64, len(texts))
	tokens := 0
	for i, text := range texts {
		for _, id := range emb.Tokenize(text) {
			ids[i] = append(ids[i], int64(id))
		}
		tokens += len(ids[i])
	}
	check := func(what string, got []openai.Embedding, want [][]float32, tol float64) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d embeddings, want %d", what, len(got), len(want))
		}
		for i, e := range got {
			if e.Index != int64(i) || len(e.Embedding) != len(want[i]) {
				t.Fatalf("%s: embedding %d has index %d and %d values, want %d", what, i, e.Index, len(e.Embedding), len(want[i]))
			}
			for j, v := range e.Embedding {
				if math.Abs(float64(float32(v))-float64(want[i][j])) > tol {
					t.Fatalf("%s: embedding %d value %d: %g, want %g", what, i, j, v, want[i][j])
				}
			}
		}
	}
	for _, format := range []openai.EmbeddingNewParamsEncodingFormat{openai.EmbeddingNewParamsEncodingFormatFloat, openai.EmbeddingNewParamsEncodingFormatBase64} {
		for _, in := range []struct {
			what  string
			input openai.EmbeddingNewParamsInputUnion
			want  [][]float32
		}{
			{"string", openai.EmbeddingNewParamsInputUnion{OfString: openai.String(texts[1])}, want[1:2]},
			{"strings", openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts}, want},
			{"tokens", openai.EmbeddingNewParamsInputUnion{OfArrayOfTokens: ids[2]}, want[2:]},
			{"token arrays", openai.EmbeddingNewParamsInputUnion{OfArrayOfTokenArrays: ids}, want},
		} {
			res, err := oc.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "bert", Input: in.input, EncodingFormat: format})
			if err != nil {
				t.Fatalf("%s %s: %v", in.what, format, err)
			}
			// float: JSON's shortest decimal of an f32 reads back as that f32; base64 carries the bits.
			check(in.what+" "+string(format), res.Data, in.want, 0)
			if res.Model != "bert" || res.Object != "list" || res.Usage.PromptTokens == 0 || res.Usage.TotalTokens != res.Usage.PromptTokens {
				t.Errorf("%s: model %q, object %q, usage %+v", in.what, res.Model, res.Object, res.Usage)
			}
		}
	}
	res, err := oc.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "bert", Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Usage.PromptTokens != int64(tokens) {
		t.Errorf("usage: %d prompt tokens, want %d", res.Usage.PromptTokens, tokens)
	}
	// A shorter embedding is the leading values, of unit length again.
	res, err = oc.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "bert", Dimensions: openai.Int(16),
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String(texts[0])}})
	if err != nil {
		t.Fatal(err)
	}
	short := append([]float32(nil), want[0][:16]...)
	runtime.L2Normalize(short)
	check("dimensions", res.Data, [][]float32{short}, 1e-7)

	for _, bad := range []struct {
		what   string
		params openai.EmbeddingNewParams
		status int
		param  string
	}{
		{"empty string", openai.EmbeddingNewParams{Model: "bert", Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("")}}, 400, "input"},
		{"unknown token", openai.EmbeddingNewParams{Model: "bert", Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfTokens: []int64{101, 1 << 20}}}, 400, "input"},
		{"too long", openai.EmbeddingNewParams{Model: "bert", Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String(strings.Repeat("ab ", 600))}}, 400, ""},
		{"megabytes", openai.EmbeddingNewParams{Model: "bert", Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String(strings.Repeat("ab ", 2<<20))}}, 400, ""},
		{"dimensions", openai.EmbeddingNewParams{Model: "bert", Dimensions: openai.Int(65), Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("x")}}, 400, "dimensions"},
		{"a reranker", openai.EmbeddingNewParams{Model: "ranker", Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("x")}}, 400, "model"},
		{"a generative model", openai.EmbeddingNewParams{Model: modelName, Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("x")}}, 404, ""},
	} {
		_, err := oc.Embeddings.New(ctx, bad.params)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != bad.status || apiErr.Param != bad.param || apiErr.Message == "" {
			t.Errorf("%s: %v, want a %d about %q", bad.what, err, bad.status, bad.param)
		}
	}
	models, err := oc.Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range models.Data {
		names = append(names, m.ID)
	}
	if strings.Join(names, ",") != modelName+",bert,ranker" {
		t.Errorf("models: %v", names)
	}
}

// TestRerankEndpoint: /v1/rerank orders the documents by the reranker's
// score, keeps top_n, returns documents when asked, and takes Cohere's
// document objects.
func TestRerankEndpoint(t *testing.T) {
	emb, ranker := embedders(t)
	url := serveEmbedders(t, emb, ranker)
	docs := []string{"the cat sat on the mat", "dogs", "a cat", "nothing at all here"}
	scores, err := ranker.Rerank(context.Background(), "cat?", docs)
	if err != nil {
		t.Fatal(err)
	}
	post := func(body string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Post(url+"/v1/rerank", "application/json", bytes.NewBufferString(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, out
	}
	code, out := post(`{"model": "ranker", "query": "cat?", "documents": ["the cat sat on the mat", "dogs", {"text": "a cat"}, "nothing at all here"], "top_n": 3, "return_documents": true}`)
	if code != 200 {
		t.Fatalf("status %d: %v", code, out)
	}
	results := out["results"].([]any)
	if len(results) != 3 {
		t.Fatalf("%d results, want 3", len(results))
	}
	prev := math.Inf(1)
	for _, r := range results {
		r := r.(map[string]any)
		i := int(r["index"].(float64))
		score := r["relevance_score"].(float64)
		if score > prev || math.Abs(score-float64(scores[i])) > 1e-6 || r["document"].(map[string]any)["text"] != docs[i] {
			t.Errorf("result %v: want score %g for document %d, in descending order", r, scores[i], i)
		}
		prev = score
	}
	if u := out["usage"].(map[string]any); u["prompt_tokens"].(float64) == 0 {
		t.Errorf("usage %v", u)
	}
	for _, bad := range []struct{ body, param string }{
		{`{"model": "ranker", "documents": ["x"]}`, "query"},
		{`{"model": "ranker", "query": "q", "documents": []}`, "documents"},
		{`{"model": "ranker", "query": "q", "documents": [3]}`, "documents"},
		{`{"model": "bert", "query": "q", "documents": ["x"]}`, "model"},
		{`{"model": "ranker", "query": "q", "documents": ["x"], "top_n": 0}`, "top_n"},
	} {
		code, out := post(bad.body)
		e, _ := out["error"].(map[string]any)
		if code != 400 || e == nil || e["param"] != bad.param {
			t.Errorf("%s: status %d, %v; want 400 about %s", bad.body, code, out, bad.param)
		}
	}
}
