//go:build js

package main

import (
	"errors"
	"fmt"
	"syscall/js"

	"github.com/tessera-llm/tessera/runtime/wire"
)

// jsAwait waits for p to settle and returns its value, or its rejection as
// an error. It parks the calling goroutine while the browser's event loop
// runs, so it must never be called inside a js.FuncOf callback, only from a
// goroutine (every API call that waits runs in one; see promise).
func jsAwait(p js.Value) (js.Value, error) {
	type settled struct {
		v   js.Value
		err error
	}
	ch := make(chan settled, 1)
	resolve := js.FuncOf(func(_ js.Value, args []js.Value) any {
		ch <- settled{v: arg(args, 0)}
		return nil
	})
	reject := js.FuncOf(func(_ js.Value, args []js.Value) any {
		ch <- settled{err: jsError(arg(args, 0))}
		return nil
	})
	defer resolve.Release()
	defer reject.Release()
	js.Global().Get("Promise").Call("resolve", p).Call("then", resolve, reject)
	s := <-ch
	return s.v, s.err
}

func arg(args []js.Value, i int) js.Value {
	if i >= len(args) {
		return js.Undefined()
	}
	return args[i]
}

// jsError turns a rejected or thrown JavaScript value into a Go error.
func jsError(v js.Value) error {
	if v.Type() == js.TypeObject {
		if msg := v.Get("message"); msg.Type() == js.TypeString {
			if name := v.Get("name").String(); name == "AbortError" {
				return errAborted
			}
			return errors.New(msg.String())
		}
	}
	if v.IsUndefined() || v.IsNull() {
		return errors.New("promise rejected without a reason")
	}
	return errors.New(v.Call("toString").String())
}

// jsCall calls method on v, returning a thrown exception as an error.
func jsCall(v js.Value, method string, args ...any) (r js.Value, err error) {
	defer func() {
		if p := recover(); p != nil {
			if je, ok := p.(js.Error); ok {
				err = jsError(je.Value)
				return
			}
			panic(p)
		}
	}()
	return v.Call(method, args...), nil
}

// call awaits the promise that method returns.
func call(v js.Value, method string, args ...any) (js.Value, error) {
	p, err := jsCall(v, method, args...)
	if err != nil {
		return js.Value{}, err
	}
	return jsAwait(p)
}

// promise returns a JavaScript Promise settled by f, which runs in a new
// goroutine and so may wait on other promises. A panic in f rejects the
// promise rather than killing the program.
func promise(f func() (any, error)) js.Value {
	executor := js.FuncOf(func(_ js.Value, args []js.Value) any {
		resolve, reject := args[0], args[1]
		go func() {
			var v any
			var err error
			func() {
				defer func() {
					if p := recover(); p != nil {
						err = fmt.Errorf("internal error: %v", p)
					}
				}()
				v, err = f()
			}()
			if err != nil {
				reject.Invoke(errorValue(err))
				return
			}
			resolve.Invoke(v)
		}()
		return nil
	})
	defer executor.Release() // the Promise constructor runs it at once
	return js.Global().Get("Promise").New(executor)
}

// errorValue makes a JavaScript Error of err, with a code property that
// names the kind of failure for the page (see codeOf).
func errorValue(err error) js.Value {
	e := js.Global().Get("Error").New(err.Error())
	e.Set("code", codeOf(err))
	if pe, ok := wire.AsParam(err); ok && pe.Param != "" {
		e.Set("param", pe.Param) // the request's field at fault
	}
	return e
}
