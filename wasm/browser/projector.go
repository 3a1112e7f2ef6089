//go:build js

package main

import (
	"context"
	"fmt"
	"syscall/js"

	"github.com/tessera-llm/tessera/models/vision"
	"github.com/tessera-llm/tessera/runtime"
)

// A vision projector (an mmproj GGUF: the image tower and the projection
// into the language model's embeddings, as llama.cpp's clip.cpp reads it)
// comes beside the model in load's options:
//
//	projector: "https://…/mmproj.gguf"        // fetched, cached as models are
//	projector: {url, sha256, cache}            // with its published SHA-256
//	projector: {file: File} | {buffer: ArrayBuffer}
//
// The engine then takes image_url parts in chat messages (data URLs of
// PNG, JPEG or WebP), as the server does.

// openProjector reads options.projector; nil when there is none. The
// model it returns reads its tensors from the Blob as they are uploaded,
// so that the file never sits whole in the wasm heap.
func openProjector(ctx context.Context, opts js.Value, info map[string]any, progress func(phase string, done, total int64)) (*vision.Model, error) {
	if opts.Type() != js.TypeObject {
		return nil, nil
	}
	src := opts.Get("projector")
	var blob js.Value
	var name string
	switch {
	case src.Type() == js.TypeUndefined || src.Type() == js.TypeNull:
		return nil, nil
	case src.Type() == js.TypeString || src.Type() == js.TypeObject && src.Get("url").Type() == js.TypeString:
		url, sub := src, js.Undefined()
		if src.Type() == js.TypeObject {
			url, sub = src.Get("url"), src
		}
		want, err := sha256Option(sub)
		if err != nil {
			return nil, badRequest("projector.sha256", "%v", err)
		}
		if len(want) > 1 {
			return nil, badRequest("projector.sha256", "a projector is one file: one sha256, not %d", len(want))
		}
		f, err := fetchModel(ctx, url.String(), optionalBool(sub, "cache", true), want, func(_ string, done, total int64) {
			progress("projector", done, total)
		})
		if err != nil {
			return nil, fmt.Errorf("projector: %w", err)
		}
		if len(f.blobs) != 1 {
			return nil, badRequest("projector", "a projector is one file, not %d parts", len(f.blobs))
		}
		blob, name = f.blobs[0], f.name
		info["projectorUrl"], info["projectorVerified"] = url.String(), want != nil
	case src.Type() == js.TypeObject && src.Get("file").Type() == js.TypeObject:
		blob = src.Get("file")
		name = optionalString(blob, "name", "projector")
	case src.Type() == js.TypeObject && src.Get("buffer").Type() == js.TypeObject:
		blob = js.Global().Get("Blob").New([]any{src.Get("buffer")})
		name = "projector buffer"
	default:
		return nil, badRequest("projector", "projector wants a URL, {url}, {file} or {buffer}")
	}
	r := newBlobReader(blob)
	vm, err := vision.OpenReader(r, r.size, name)
	if err != nil {
		return nil, err
	}
	// A tower that keeps each image's aspect (Qwen-VL) gives an image of
	// ImageSize² its count: the engine's ImageTokens.
	nx, ny := vm.Config.Grid(vm.Config.ImageSize, vm.Config.ImageSize)
	weights, acts := runtime.TowerBytes(vm) // what the tower takes of the device
	info["projector"] = map[string]any{"name": name, "size": r.size, "type": string(vm.Config.Projector),
		"imageSize": vm.Config.ImageSize, "imageTokens": nx * ny, "memory": weights + acts}
	return vm, nil
}
