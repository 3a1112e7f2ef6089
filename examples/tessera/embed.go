package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/runtime"
)

// setupEmbed: tessera embed --model M TEXT... (or lines on standard input)
// prints one JSON array of floats per input; with --rerank QUERY a
// reranker prints one relevance score per document instead.
func setupEmbed(fs *flag.FlagSet) func(context.Context, *env) error {
	var m modelFlags
	m.register(fs)
	raw := fs.Bool("raw", false, "print the pooled vectors as they are, not L2-normalised")
	query := fs.String("rerank", "", "score each input as a document for this query (a reranker model)")
	return func(ctx context.Context, e *env) error {
		if err := requireModel(m.model); err != nil {
			return err
		}
		texts := fs.Args()
		if len(texts) == 0 {
			sc := bufio.NewScanner(e.stdin)
			sc.Buffer(make([]byte, 1<<20), 1<<26)
			for sc.Scan() {
				texts = append(texts, sc.Text())
			}
			if err := sc.Err(); err != nil {
				return fmt.Errorf("reading standard input: %w", err)
			}
		}
		if len(texts) == 0 {
			return usagef("give the texts as arguments or as lines on standard input")
		}
		path, err := modelPath(ctx, e, m.model, m.offline)
		if err != nil {
			return err
		}
		if err := runtime.CheckQuant(m.quant); err != nil {
			return usageError{err}
		}
		emb, err := m.loadEmbedder(e, path)
		if err != nil {
			return err
		}
		defer emb.Close()
		w := bufio.NewWriter(e.stdout)
		if *query != "" {
			scores, err := emb.Rerank(ctx, *query, texts)
			if err != nil {
				return err
			}
			for _, s := range scores {
				fmt.Fprintln(w, strconv.FormatFloat(float64(s), 'g', -1, 32))
			}
			return w.Flush()
		}
		vecs, err := func() ([][]float32, error) {
			if !*raw {
				return emb.Embed(ctx, texts)
			}
			ids := make([][]int32, len(texts))
			for i, t := range texts {
				ids[i] = emb.Tokenize(t)
			}
			return emb.EmbedTokens(ctx, ids, false)
		}()
		if err != nil {
			return err
		}
		for _, v := range vecs {
			var b strings.Builder
			b.WriteByte('[')
			for i, x := range v {
				if i > 0 {
					b.WriteByte(',')
				}
				b.WriteString(strconv.FormatFloat(float64(x), 'g', -1, 32))
			}
			b.WriteString("]\n")
			w.WriteString(b.String())
		}
		return w.Flush()
	}
}

// loadEmbedder loads the embedding model at path with the flags' settings.
func (m *modelFlags) loadEmbedder(e *env, path string) (*runtime.Embedder, error) {
	emb, err := runtime.LoadEmbedder(path, runtime.Options{Tokenizer: m.tokenizer, Device: m.device, Adapter: m.adapter,
		Context: m.context, Quant: m.quant, HeadFloat: m.headF32, NoCalibration: m.noCalibration})
	if err != nil {
		return nil, err
	}
	if note := emb.DeviceNote(); note != "" {
		fmt.Fprintln(e.stderr, note)
	}
	return emb, nil
}

// isEmbedding reports whether the model at path makes embeddings (an
// encoder, or a decoder with a pooling type) rather than text; a model
// that does not open is left for the generative loader to report.
func isEmbedding(path, tok string) bool {
	mdl, err := models.Open(path, models.Options{Tokenizer: tok})
	if err != nil {
		return false
	}
	defer mdl.Close()
	return mdl.Config.Encoder.On || mdl.Config.Pooling != models.PoolNone
}
