//go:build js

package main

import "syscall/js"

// yieldToEventLoop gives the worker's event loop one turn and returns. Go
// compiled to wasm returns to JavaScript only when every goroutine is
// blocked, and the CPU backend never blocks: between its steps the engine
// waits here for a message it posts to itself, so that messages queued
// before it (an abort, a new request) are handled first. A MessageChannel,
// unlike setTimeout, is not clamped to 4 ms.
func yieldToEventLoop() {
	done := make(chan struct{})
	ch := js.Global().Get("MessageChannel").New()
	f := js.FuncOf(func(js.Value, []js.Value) any { close(done); return nil })
	defer f.Release()
	port := ch.Get("port1")
	port.Set("onmessage", f)
	ch.Get("port2").Call("postMessage", nil)
	<-done
	port.Call("close")
}
