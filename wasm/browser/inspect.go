//go:build js

package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"syscall/js"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/eval"
)

// rangePiece is how much one ranged request of a rangeReader fetches.
const rangePiece = 1 << 20

// rangeReader is an io.ReaderAt over a URL whose server takes range
// requests: it fetches 1 MiB pieces as they are read and keeps them, so
// that reading a GGUF's header (its metadata and tensor list, a few
// megabytes at most) costs a few requests and not the whole file.
type rangeReader struct {
	ctx    context.Context
	url    string
	size   int64
	pieces map[int64][]byte
}

// openRange asks for the first piece of url, which also tells its size.
func openRange(ctx context.Context, url string) (*rangeReader, error) {
	r := &rangeReader{ctx: ctx, url: url, size: -1, pieces: map[int64][]byte{}}
	if _, err := r.piece(0); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *rangeReader) piece(i int64) ([]byte, error) {
	if p, ok := r.pieces[i]; ok {
		return p, nil
	}
	ctl := js.Global().Get("AbortController").New()
	stop := context.AfterFunc(r.ctx, func() { ctl.Call("abort") })
	defer stop()
	from := i * rangePiece
	headers := map[string]any{"Range": fmt.Sprintf("bytes=%d-%d", from, from+rangePiece-1)}
	resp, err := call(js.Global(), "fetch", r.url, map[string]any{"headers": headers, "signal": ctl.Get("signal"), "cache": "no-store"})
	if err != nil {
		if r.ctx.Err() != nil {
			return nil, errAborted
		}
		return nil, fmt.Errorf("%w: fetching %s: %v", errNetwork, r.url, err)
	}
	switch status := resp.Get("status").Int(); status {
	case 206:
		cr := resp.Get("headers").Call("get", "Content-Range")
		if cr.Type() == js.TypeString {
			if _, total, ok := strings.Cut(cr.String(), "/"); ok {
				if n, err := strconv.ParseInt(total, 10, 64); err == nil {
					r.size = n
				}
			}
		}
	case 200: // no ranges: the whole file came, which is fine only if small
		if n := resp.Get("headers").Call("get", "Content-Length"); n.Type() == js.TypeString {
			if size, _ := strconv.ParseInt(n.String(), 10, 64); size > 64<<20 {
				resp.Get("body").Call("cancel")
				return nil, fmt.Errorf("%w: %s does not take range requests, and reading its header would download %d bytes", errNetwork, r.url, size)
			}
		}
	default:
		return nil, fmt.Errorf("%w: fetching %s: HTTP %d", errNetwork, r.url, status)
	}
	buf, err := call(resp, "arrayBuffer")
	if err != nil {
		return nil, fmt.Errorf("%w: reading %s: %v", errNetwork, r.url, err)
	}
	b := make([]byte, buf.Get("byteLength").Int())
	js.CopyBytesToGo(b, js.Global().Get("Uint8Array").New(buf))
	if resp.Get("status").Int() == 200 {
		r.size = int64(len(b))
		for j := int64(0); j*rangePiece < r.size; j++ {
			r.pieces[j] = b[j*rangePiece : min(int64(len(b)), (j+1)*rangePiece)]
		}
		return r.pieces[i], nil
	}
	r.pieces[i] = b
	return b, nil
}

func (r *rangeReader) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		at := off + int64(n)
		if r.size >= 0 && at >= r.size {
			return n, io.EOF
		}
		b, err := r.piece(at / rangePiece)
		if err != nil {
			return n, err
		}
		k := copy(p[n:], b[min(int64(len(b)), at%rangePiece):])
		if k == 0 {
			return n, io.EOF
		}
		n += k
	}
	return n, nil
}

// inspect implements tessera.inspect(source, options): a model's
// description and what loading it would take, read from its header alone
// ({url}: by range requests; {file} or {buffer}: by slices), for a page
// to show before it downloads. options: quant, context, device.
func (a *api) inspect(args []js.Value) any {
	source, opts := arg(args, 0), arg(args, 1)
	return promise(func() (any, error) {
		var parts []models.Part
		var size int64
		name := "model"
		switch {
		case source.Type() != js.TypeObject:
			return nil, fmt.Errorf("%w: inspect wants {url}, {file} or {buffer}", errSource)
		case source.Get("url").Type() == js.TypeString:
			url := source.Get("url").String()
			for _, u := range partURLs(url) { // every part of a split model
				rr, err := openRange(context.Background(), u)
				if err != nil {
					return nil, err
				}
				parts = append(parts, models.Part{R: rr, Size: rr.size})
				size += rr.size
			}
			name = url[strings.LastIndex(url, "/")+1:]
		case source.Get("file").Type() == js.TypeObject:
			br := newBlobReader(source.Get("file"))
			parts, size, name = []models.Part{{R: br, Size: br.size}}, br.size, optionalString(source.Get("file"), "name", "file")
		case source.Get("files").Type() == js.TypeObject:
			blobs, err := splitFiles(source.Get("files"))
			if err != nil {
				return nil, err
			}
			for _, b := range blobs {
				br := newBlobReader(b)
				parts = append(parts, models.Part{R: br, Size: br.size})
				size += br.size
			}
			name = optionalString(blobs[0], "name", "file")
		case source.Get("buffer").Type() == js.TypeObject:
			br := newBlobReader(js.Global().Get("Blob").New([]any{source.Get("buffer")}))
			parts, size, name = []models.Part{{R: br, Size: br.size}}, br.size, "buffer"
		default:
			return nil, fmt.Errorf("%w: inspect wants {url}, {file} or {buffer}", errSource)
		}
		m, err := models.OpenParts(parts, name)
		if err != nil {
			return nil, err
		}
		c := m.Config
		var params int64
		for _, t := range m.Tensors {
			params += int64(t.Elements())
		}
		quant, device := optionalString(opts, "quant", ""), optionalString(opts, "device", "webgpu")
		ctxLen := int(optional(opts, "context", 0))
		estimates := map[string]any{}
		for _, q := range []string{"", runtime.Mixed, "int4", "int8", "f16", "f32"} {
			e, err := eval.EstimateMemory(m, q, device, ctxLen)
			if err != nil {
				return nil, err
			}
			key := q
			if key == "" {
				key = "default"
			}
			estimates[key] = map[string]any{"quant": e.Quant, "context": e.Context, "weights": e.Weights,
				"kv": e.KV, "scratch": e.Scratch, "total": e.Total, "largest": e.Largest}
		}
		chosen := "default"
		if quant != "" {
			chosen = quant
		}
		if _, ok := estimates[chosen]; !ok {
			return nil, fmt.Errorf("%w: quant %q (want int4, f16 or f32)", runtime.ErrBadRequest, quant)
		}
		return map[string]any{
			"name": name, "size": size, "arch": c.Arch, "params": params, "layers": c.Layers, "dim": c.Dim,
			"heads": c.Heads, "kvHeads": c.KVHeads, "vocab": c.Vocab, "modelContext": c.Context,
			"chatTemplate": m.ChatTemplate != "", "memory": estimates[chosen], "estimates": estimates,
		}, nil
	})
}
