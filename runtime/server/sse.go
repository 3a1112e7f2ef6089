package server

import (
	"encoding/json"
	"net/http"
)

// sse writes server-sent events: "data: JSON" lines, each flushed at once
// so that a client sees every token as it is made.
type sse struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
	err     error // the first write error: the client is gone
}

func newSSE(w http.ResponseWriter) *sse { return &sse{w: w, rc: http.NewResponseController(w)} }

func (e *sse) begin() {
	if e.started {
		return
	}
	e.started = true
	h := e.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	e.w.WriteHeader(http.StatusOK)
}

// send writes one event holding v as JSON.
func (e *sse) send(v any) error { return e.named("", v) }

// named writes one event holding v as JSON under an event name (an
// "event: NAME" line before its data), as Anthropic's API names every
// event; "" names none.
func (e *sse) named(name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return e.write(name, b)
}

func (e *sse) raw(b []byte) error { return e.write("", b) }

func (e *sse) write(name string, b []byte) error {
	if e.err != nil {
		return e.err
	}
	e.begin()
	buf := make([]byte, 0, len(name)+len(b)+16)
	if name != "" {
		buf = append(buf, "event: "...)
		buf = append(buf, name...)
		buf = append(buf, '\n')
	}
	buf = append(buf, "data: "...)
	buf = append(buf, b...)
	buf = append(buf, "\n\n"...)
	if _, err := e.w.Write(buf); err != nil {
		e.err = err
		return err
	}
	if err := e.rc.Flush(); err != nil {
		e.err = err
	}
	return e.err
}

// done ends the stream as OpenAI does.
func (e *sse) done() error { return e.raw([]byte("[DONE]")) }

// fail sends an error inside a stream that has begun: the status is
// already 200, so the error travels as an event, as OpenAI's does.
func (e *sse) fail(status int, kind, msg string) error {
	return e.send(errorBody{Error: apiError{Message: msg, Type: kind}})
}
