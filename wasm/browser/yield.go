//go:build js

package main

import "syscall/js"

// yieldToEventLoop gives the worker's event loop one turn and returns. Go
// compiled to wasm returns to JavaScript only when every goroutine is
// blocked, and the CPU backend never blocks: between its steps the engine
// waits here for a message it posts to itself, so that messages queued
// before it (an abort, a new request) are handled first. A MessageChannel,
// unlike setTimeout, is not clamped to 4 ms.
//
// Node (and Deno and Bun) have setImmediate for the same, which the engine
// takes there: a MessagePort of Node's would deliver its message within
// the Go callback's stack there.
func yieldToEventLoop() {
	done := make(chan struct{})
	f := js.FuncOf(func(js.Value, []js.Value) any { close(done); return nil })
	defer f.Release()
	if imm := js.Global().Get("setImmediate"); imm.Type() == js.TypeFunction {
		imm.Invoke(f)
		<-done
		return
	}
	ch := js.Global().Get("MessageChannel").New()
	port := ch.Get("port1")
	port.Set("onmessage", f)
	ch.Get("port2").Call("postMessage", nil)
	<-done
	port.Call("close")
}
