package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/wire"
)

// httpError is an error with the HTTP status and OpenAI error type it is
// answered with.
type httpError struct {
	status     int
	kind       string  // OpenAI's error "type"
	param      *string // the request field at fault
	code       *string
	retryAfter int // seconds, for 429 and 503
	msg        string
}

func (e *httpError) Error() string { return e.msg }

// badRequest is a 400 about field param ("" for the body as a whole).
func badRequest(param, format string, args ...any) error {
	e := &httpError{status: http.StatusBadRequest, kind: "invalid_request_error", msg: fmt.Sprintf(format, args...)}
	if param != "" {
		e.param = &param
	}
	return e
}

// fail answers err (see answer) as an error body in the shape of the API
// the request speaks: Anthropic's on its Messages API (messages.go),
// OpenAI's elsewhere.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	he := s.answer(r.Context(), err)
	if he.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(he.retryAfter))
	}
	if anthropicPath(r.URL.Path) {
		writeAnthropicError(w, he)
		return
	}
	writeError(w, he.status, he.kind, he.code, he.msg, he.param)
}

// answer is what a request that failed with err is told: an httpError as
// it says; a request that Drain cut (ctx's cause) that the server shut
// down; the engine's errors by what they mean (a prompt that cannot fit
// is the client's fault; a lost device is the server's); anything else a
// 500, logged.
func (s *Server) answer(ctx context.Context, err error) *httpError {
	var he *httpError
	var pe *wire.ParamError
	switch {
	case errors.As(err, &he):
		return he
	case errors.Is(context.Cause(ctx), errDrainCut):
		return &httpError{status: http.StatusServiceUnavailable, kind: "unavailable", msg: errDrainCut.Error()}
	case errors.As(err, &pe):
		return &httpError{status: http.StatusBadRequest, kind: "invalid_request_error", msg: pe.Msg, param: &pe.Param}
	case errors.Is(err, runtime.ErrBadRequest):
		return &httpError{status: http.StatusBadRequest, kind: "invalid_request_error", msg: err.Error()}
	case errors.Is(err, runtime.ErrTooManyCombinations):
		// Requests with other combinations of several adapters hold the
		// engine's composites; one frees as they finish.
		return &httpError{status: http.StatusTooManyRequests, kind: "rate_limit_error", retryAfter: 1, msg: err.Error() + "; retry later"}
	case errors.Is(err, runtime.ErrUnknownAdapter):
		// Unloaded between the request's check and its start.
		code := "lora_not_found"
		return &httpError{status: http.StatusNotFound, kind: "invalid_request_error", code: &code, msg: err.Error()}
	case errors.Is(err, runtime.ErrEngineClosed):
		return &httpError{status: http.StatusServiceUnavailable, kind: "unavailable", msg: "the model is shutting down"}
	case errors.Is(err, runtime.ErrContextFull), errors.Is(err, runtime.ErrOutOfKV):
		code := "context_length_exceeded"
		return &httpError{status: http.StatusBadRequest, kind: "invalid_request_error", code: &code, msg: err.Error()}
	case errors.Is(err, context.DeadlineExceeded):
		return &httpError{status: http.StatusGatewayTimeout, kind: "timeout", msg: "the request took longer than the server's request timeout"}
	case errors.Is(err, context.Canceled):
		// The client went away: nobody reads the answer.
		return &httpError{status: 499, kind: "cancelled", msg: "the request was cancelled"}
	}
	s.opts.Logger.Error("request failed", "request_id", requestID(ctx), "err", err)
	return &httpError{status: http.StatusInternalServerError, kind: "server_error", msg: err.Error()}
}

// writeError writes an OpenAI-shaped error body.
func writeError(w http.ResponseWriter, status int, kind string, code *string, msg string, param ...*string) {
	e := apiError{Message: msg, Type: kind, Code: code}
	if len(param) > 0 {
		e.Param = param[0]
	}
	writeJSON(w, status, errorBody{Error: e})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
