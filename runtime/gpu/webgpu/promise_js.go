//go:build js

package webgpu

import (
	"errors"
	"fmt"
	"syscall/js"
)

// This file holds the syscall/js plumbing of the browser device: awaiting
// promises from a goroutine and turning JavaScript exceptions into errors.

// await waits for p (a promise, or any value, which then counts as
// resolved) and returns what it resolved to, or its rejection as an error.
//
// It parks the calling goroutine until the browser's event loop settles the
// promise, so it must never run inside a js.FuncOf callback: the event loop
// is stuck in that callback until it returns, and the promise would never
// settle. Every entry point of the browser build starts a goroutine first.
func jsAwait(p js.Value) (js.Value, error) {
	type settled struct {
		v   js.Value
		err error
	}
	ch := make(chan settled, 1)
	resolve := js.FuncOf(func(_ js.Value, args []js.Value) any {
		ch <- settled{v: jsArg0(args)}
		return nil
	})
	reject := js.FuncOf(func(_ js.Value, args []js.Value) any {
		ch <- settled{err: jsError(jsArg0(args))}
		return nil
	})
	defer resolve.Release()
	defer reject.Release()
	js.Global().Get("Promise").Call("resolve", p).Call("then", resolve, reject)
	s := <-ch
	return s.v, s.err
}

func jsArg0(args []js.Value) js.Value {
	if len(args) == 0 {
		return js.Undefined()
	}
	return args[0]
}

// jsError turns a thrown or rejected JavaScript value into a Go error with
// its message (an Error's name and message, a GPUError's message).
func jsError(v js.Value) error {
	if v.Type() == js.TypeObject {
		msg := v.Get("message")
		if msg.Type() == js.TypeString {
			name := v.Get("name")
			if name.Type() == js.TypeString && name.String() != "" && name.String() != "Error" {
				return fmt.Errorf("%s: %s", name.String(), msg.String())
			}
			return errors.New(msg.String())
		}
	}
	if v.IsUndefined() || v.IsNull() {
		return errors.New("promise rejected without a reason")
	}
	return errors.New(v.Call("toString").String())
}

// call calls method on v, returning a JavaScript exception as an error
// rather than a panic.
func jsCall(v js.Value, method string, args ...any) (r js.Value, err error) {
	defer func() {
		if p := recover(); p != nil {
			if je, ok := p.(js.Error); ok {
				err = jsError(je.Value)
				return
			}
			err = fmt.Errorf("%s: %v", method, p)
		}
	}()
	return v.Call(method, args...), nil
}

// number reads a numeric property, 0 when it is missing.
func jsNumber(v js.Value, name string) float64 {
	x := v.Get(name)
	if x.Type() != js.TypeNumber {
		return 0
	}
	return x.Float()
}

// str reads a string property, "" when it is missing.
func jsStr(v js.Value, name string) string {
	x := v.Get(name)
	if x.Type() != js.TypeString {
		return ""
	}
	return x.String()
}
