//go:build js

package main

import (
	"context"
	"fmt"
	goruntime "runtime"
	"syscall/js"
	"time"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/runtime"
)

// Embedding models in the browser: load puts an encoder (or a decoder
// with a pooling type) in a.emb instead of a.eng, and tessera.embed(input,
// options) embeds with it:
//
//	tessera.embed(input, {dimensions})  Promise<{data: number[][], promptTokens}>
//	    input: string | string[] | number[] | number[][] (token ids)

// embeddingModel reports whether m makes embeddings rather than text.
func embeddingModel(m *models.Model) bool {
	return m.Config.Encoder.On || m.Config.Pooling != models.PoolNone
}

// loadEmbedder finishes a load of an embedding model: info gets what
// ModelInfo says of one.
func (a *api) loadEmbedder(ctx context.Context, m *models.Model, opts js.Value, info map[string]any, start time.Time) (map[string]any, error) {
	emb, err := runtime.LoadEmbedderModel(m, runtime.Options{
		Device:  optionalString(opts, "device", "webgpu"),
		Quant:   optionalString(opts, "quant", ""),
		Context: int(optional(opts, "context", 0)),
	})
	if err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		emb.Close()
		return nil, errAborted
	}
	c := m.Config
	info["format"], info["arch"], info["embedding"] = m.Format, c.Arch, c.Pooling.String()
	info["layers"], info["dim"], info["heads"], info["vocab"], info["context"] = c.Layers, c.Dim, c.Heads, c.Vocab, c.Context
	info["backend"] = emb.Backend().Name()
	info["loadMs"] = ms(time.Since(start))
	info["path"] = "cpu"
	if dev, ok := emb.GPU(); ok {
		info["adapter"], info["path"] = describe(dev.Info()), kernelPath(emb.Backend(), dev.Info())
	}
	a.mu.Lock()
	a.emb, a.model = emb, info
	a.mu.Unlock()
	return info, nil
}

// dropEmbedder closes the loaded embedding model, if any.
func (a *api) dropEmbedder() {
	a.mu.Lock()
	emb := a.emb
	a.emb = nil
	a.mu.Unlock()
	if emb != nil {
		emb.Close()
		if dev, ok := emb.GPU(); ok {
			dev.Close()
		}
		goruntime.GC()
	}
}

// embed implements tessera.embed(input, options): one L2-normalised vector
// per input (truncated to options.dimensions and normalised again when
// given), and the tokens embedded.
func (a *api) embed(args []js.Value) any {
	in, opts := arg(args, 0), arg(args, 1)
	return promise(func() (any, error) {
		a.mu.Lock()
		emb := a.emb
		a.mu.Unlock()
		if emb == nil {
			return nil, fmt.Errorf("%w (an embedding model)", errNoModel)
		}
		inputs, err := embedInputs(emb, in)
		if err != nil {
			return nil, err
		}
		dim := emb.Dim()
		if d := int(optional(opts, "dimensions", 0)); d != 0 {
			if d < 1 || d > dim {
				return nil, fmt.Errorf("%w: dimensions must be in 1..%d", runtime.ErrBadRequest, dim)
			}
			dim = d
		}
		vecs, err := emb.EmbedTokens(context.Background(), inputs, true)
		if err != nil {
			return nil, err
		}
		tokens := 0
		for _, in := range inputs {
			tokens += len(in)
		}
		data := make([]any, len(vecs))
		for i, v := range vecs {
			if dim < len(v) {
				v = v[:dim]
				runtime.L2Normalize(v)
			}
			row := make([]any, len(v))
			for j, x := range v {
				row[j] = float64(x)
			}
			data[i] = row
		}
		return map[string]any{"data": data, "promptTokens": tokens}, nil
	})
}

// embedInputs reads input: a string, strings, token ids or arrays of them.
func embedInputs(emb *runtime.Embedder, in js.Value) ([][]int32, error) {
	bad := fmt.Errorf("%w: input must be a string, an array of strings, an array of token ids or an array of arrays of them", runtime.ErrBadRequest)
	ids := func(v js.Value) ([]int32, error) {
		out := make([]int32, v.Length())
		for i := range out {
			if v.Index(i).Type() != js.TypeNumber {
				return nil, bad
			}
			out[i] = int32(v.Index(i).Int())
		}
		return out, nil
	}
	text := func(s string) ([]int32, error) {
		if s == "" {
			return nil, fmt.Errorf("%w: an input is an empty string", runtime.ErrBadRequest)
		}
		return emb.Tokenize(s), nil
	}
	switch {
	case in.Type() == js.TypeString:
		t, err := text(in.String())
		return [][]int32{t}, err
	case in.Type() != js.TypeObject || in.Length() == 0:
		return nil, bad
	case in.Index(0).Type() == js.TypeNumber:
		t, err := ids(in)
		return [][]int32{t}, err
	}
	out := make([][]int32, in.Length())
	for i := range out {
		v := in.Index(i)
		var err error
		switch v.Type() {
		case js.TypeString:
			out[i], err = text(v.String())
		case js.TypeObject:
			out[i], err = ids(v)
		default:
			err = bad
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
