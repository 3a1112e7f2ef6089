//go:build js

package main

import (
	"context"
	"fmt"
	"math"
	"syscall/js"

	"github.com/tessera-llm/tessera/models/lora"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/wire"
)

// LoRA adapters in the browser, as the engine serves them natively: many
// fine-tunes of the loaded model, applied unmerged and chosen per
// generation.
//
//	tessera.loadAdapter(name, source, {scale, cache})   Promise<AdapterInfo>
//	    source: {url} | {file: Blob} | {buffer: ArrayBuffer}: a GGUF LoRA
//	    (llama.cpp's convert_lora_to_gguf), checked against the model
//	tessera.unloadAdapter(name)                        Promise<void>
//	    freed once the generations that use it end
//	tessera.generate(input, {adapters: [{name, scale}]}, onToken)
//	    several apply together; a scale (default 1) multiplies the one the
//	    adapter was loaded with, and 0 leaves it out
//	tessera.info().adapters                            AdapterInfo[]
//
// An adapter belongs to the model: load and unload drop them with it.

// loadAdapter implements tessera.loadAdapter(name, source, options).
func (a *api) loadAdapter(args []js.Value) any {
	nameV, source, opts := arg(args, 0), arg(args, 1), arg(args, 2)
	scale := optional(opts, "scale", 1)
	useCache := optionalBool(opts, "cache", true)
	return promise(func() (any, error) {
		if nameV.Type() != js.TypeString || nameV.String() == "" {
			return nil, fmt.Errorf("%w: loadAdapter needs a name", runtime.ErrBadRequest)
		}
		if math.IsInf(scale, 0) || scale == 0 {
			return nil, fmt.Errorf("%w: adapter scale %v", runtime.ErrBadRequest, scale)
		}
		eng, err := a.engine()
		if err != nil {
			return nil, err
		}
		var blob js.Value
		label := "buffer"
		switch {
		case source.Type() != js.TypeObject:
			return nil, fmt.Errorf("%w: loadAdapter wants {url}, {file} or {buffer}", errSource)
		case source.Get("url").Type() == js.TypeString:
			label = source.Get("url").String()
			f, err := fetchModel(context.Background(), label, useCache, nil, func(string, int64, int64) {})
			if err != nil {
				return nil, err
			}
			if len(f.blobs) != 1 {
				return nil, fmt.Errorf("%w: %s is a split file; an adapter is one", errSource, label)
			}
			blob = f.blobs[0]
		case source.Get("file").Type() == js.TypeObject:
			blob = source.Get("file")
			label = optionalString(blob, "name", "file")
		case source.Get("buffer").Type() == js.TypeObject:
			blob = js.Global().Get("Blob").New([]any{source.Get("buffer")})
		default:
			return nil, fmt.Errorf("%w: loadAdapter wants {url}, {file} or {buffer}", errSource)
		}
		r := newBlobReader(blob)
		ad, err := lora.ReadGGUF(r, r.size, label, eng.Model().Config)
		if err != nil {
			return nil, err
		}
		name := nameV.String()
		if err := eng.AddAdapter(name, ad, float32(scale)); err != nil {
			return nil, err
		}
		for _, info := range adapterInfos(eng) {
			if info.(map[string]any)["name"] == name {
				return info, nil
			}
		}
		return nil, fmt.Errorf("%w %q: unloaded as it loaded", runtime.ErrUnknownAdapter, name)
	})
}

// unloadAdapter implements tessera.unloadAdapter(name).
func (a *api) unloadAdapter(args []js.Value) any {
	nameV := arg(args, 0)
	return promise(func() (any, error) {
		eng, err := a.engine()
		if err != nil {
			return nil, err
		}
		if nameV.Type() != js.TypeString {
			return nil, fmt.Errorf("%w: unloadAdapter needs a name", runtime.ErrBadRequest)
		}
		return nil, eng.UnloadAdapter(nameV.String())
	})
}

// adapterInfos describes the engine's adapters for info() and
// loadAdapter: AdapterInfo of index.d.ts.
func adapterInfos(eng *runtime.Engine) []any {
	out := []any{}
	for _, ad := range eng.Adapters() {
		out = append(out, map[string]any{
			"name": ad.Name, "source": ad.Path, "format": ad.Format, "rank": ad.Rank, "targets": ad.Targets,
			"scale": ad.Scale, "running": ad.Running, "waiting": ad.Waiting, "unloading": ad.Unloading,
		})
	}
	return out
}

// requestAdapters reads generate's options.adapters: [{name, scale}].
func requestAdapters(opts js.Value) ([]runtime.AdapterRef, error) {
	if opts.Type() != js.TypeObject {
		return nil, nil
	}
	list := opts.Get("adapters")
	switch list.Type() {
	case js.TypeUndefined, js.TypeNull:
		return nil, nil
	case js.TypeObject:
	default:
		return nil, fmt.Errorf("%w: adapters must be a list of {name, scale}", runtime.ErrBadRequest)
	}
	named := make([]wire.Adapter, list.Length())
	for i := range named {
		e := list.Index(i)
		named[i] = wire.Adapter{Name: optionalString(e, "name", ""), Scale: optional(e, "scale", 1)}
	}
	// Named, listed once, scaled within bounds: as every home checks.
	return wire.Adapters("adapters", named)
}
