//go:build js

// Command browser is Tessera's engine for the browser: Go compiled with
// GOOS=js GOARCH=wasm, running WGSL kernels on navigator.gpu. It is meant
// to run inside a Web Worker (web/worker.js), so that the page stays
// responsive while it loads and generates.
//
// It puts one object on the global scope, tessera, and then calls
// globalThis.tesseraReady() if that is a function. Every method that waits
// returns a Promise; a rejected one carries an Error with a code property
// (see codeOf). The API, documented in full in web/README.md:
//
//	tessera.version                                  string
//	tessera.load(source, options, onProgress)        Promise<ModelInfo>
//	    source:  {url} | {file: Blob} | {files: Blob[]} (a split model's parts) | {buffer: ArrayBuffer}
//	    options: {quant: ""|"int4"|"f16"|"f32", context, device: "webgpu"|"cpu", cache: bool,
//	              maxStorageBinding: bytes (a lower limit to request, as a small adapter has)}
//	    The worker keeps its WebGPU device from load to load, so kernels
//	    compile once per worker (Info.compiled counts them).
//	    onProgress({phase: "download"|"verify"|"upload", done, total})
//	tessera.generate(input, options, onToken)        Promise<Stats>
//	    input:   a prompt string | {prompt} | {tokens} | a chat: {messages, tools, tool_choice,
//	             parallel_tool_calls, chat_template_kwargs, reasoning_effort}, OpenAI's fields (chat.go)
//	    options: {temperature, topK, topP, minP, repeatPenalty, maxTokens, seed, stop,
//	              constraint, adapters: [{name, scale}], callPrefix}
//	    onToken({text, id, index, events}): a chat's events are its reply read as it comes,
//	    [{kind: "reasoning"|"text", text} | {kind: "call", call, name, id} | {kind: "args", call, text}];
//	    a chat's Stats add {reasoning, content, toolCalls: [{id, type, function: {name, arguments}}]}
//	tessera.embed(input, {dimensions})               Promise<{data, promptTokens}> (embed.go)
//	tessera.loadAdapter(name, source, {scale})       Promise<AdapterInfo> (lora.go)
//	tessera.unloadAdapter(name)                      Promise<void>
//	tessera.abort()                                  boolean
//	tessera.unload()                                 Promise<void>
//	tessera.info()                                   Promise<Info>
//	tessera.cached()                                 Promise<CacheEntry[]>
//	tessera.clearCache()                             Promise<{removed, bytes}>
package main

import (
	"syscall/js"
)

// version names this build of the API.
const version = "tessera-web/2"

func main() {
	a := &api{}
	obj := js.Global().Get("Object").New()
	obj.Set("version", version)
	for name, f := range map[string]func(args []js.Value) any{
		"load":          a.load,
		"generate":      a.generate,
		"tokenize":      a.tokenize,
		"detokenize":    a.detokenize,
		"embed":         a.embed,
		"inspect":       a.inspect,
		"abort":         a.abort,
		"unload":        a.unload,
		"loadAdapter":   a.loadAdapter,
		"unloadAdapter": a.unloadAdapter,
		"info":          a.info,
		"cached":        a.cached,
		"clearCache":    a.clearCache,
	} {
		obj.Set(name, js.FuncOf(func(_ js.Value, args []js.Value) any { return f(args) }))
	}
	js.Global().Set("tessera", obj)
	if ready := js.Global().Get("tesseraReady"); ready.Type() == js.TypeFunction {
		ready.Invoke()
	}
	select {} // serve calls until the worker is terminated
}
