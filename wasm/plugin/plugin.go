// Package plugin is the Go SDK for Tessera plugins: WebAssembly modules
// that a Tessera host (package host) runs in a sandbox and lets use its
// language models. It hides the ABI of docs/PLUGIN_ABI.md behind a small
// API: Models, Generate (or Start for finer control), Tokenize,
// Detokenize and CountTokens.
//
// A plugin is a WASI reactor built from a main package:
//
//	package main
//
//	import (
//		"context"
//
//		"github.com/tessera-llm/tessera/wasm/plugin"
//	)
//
//	func init() { plugin.Handle(run) }
//
//	func main() {} // never called: the host calls the handler instead
//
//	func run(ctx context.Context, input []byte) ([]byte, error) {
//		var out []byte
//		for tok, err := range plugin.Generate(ctx, plugin.Request{Prompt: string(input), MaxTokens: 64}) {
//			if err != nil {
//				return nil, err
//			}
//			out = append(out, tok.Text...)
//		}
//		return out, nil
//	}
//
// built with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o plugin.wasm .
//
// The handler is registered in init because a reactor never runs main:
// the host calls _initialize (which runs the package initializers), checks
// the ABI version, then calls the handler once per run, each time in a
// fresh instance. Outside wasip1 the package compiles, so that tools and
// tests work, but every call fails with ErrNotPlugin.
package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"strings"

	"github.com/tessera-llm/tessera/wasm/plugin/abi"
)

// Handler is a plugin's entry point: it gets the input the embedder gave
// the run and returns the run's output (appended to anything it wrote
// with Output). An error fails the run with its message.
type Handler func(ctx context.Context, input []byte) ([]byte, error)

var handler Handler

// Handle registers the plugin's handler. Call it from an init function.
func Handle(h Handler) { handler = h }

// The ABI's documents, under the names a plugin uses.
type (
	// Request is one generation: a prompt, chat messages or tokens, a
	// token limit and sampling options (all zero: greedy decoding).
	Request = abi.Request
	// Message is one turn of a chat; the host renders a chat with the
	// model's own chat template.
	Message = abi.Message
	// Model describes a model the plugin may use.
	Model = abi.Model
	// Stats describe a generation.
	Stats = abi.Stats
)

// Token is one generated token. ID is -1 for text that completes a
// character split across tokens and is no token of its own.
type Token struct {
	ID   int32
	Text string
}

// Error is a host function's failure.
type Error struct {
	Op      string   // the host function
	Code    abi.Code // what went wrong
	Message string   // the host's explanation
}

func (e *Error) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("tessera %s: %v", e.Op, e.Code)
	}
	return fmt.Sprintf("tessera %s: %v: %s", e.Op, e.Code, e.Message)
}

// Is matches the sentinel errors below by code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Op == "" && t.Message == "" && t.Code == e.Code
}

// Sentinels for errors.Is.
var (
	ErrArgument = &Error{Code: abi.ErrArgument}
	ErrNotFound = &Error{Code: abi.ErrNotFound}
	ErrLimit    = &Error{Code: abi.ErrLimit}
	ErrCanceled = &Error{Code: abi.ErrCanceled}
	ErrFailed   = &Error{Code: abi.ErrFailed}
	// ErrNotPlugin: the code is not running inside a Tessera host (or the
	// host has not finished checking it).
	ErrNotPlugin = &Error{Code: abi.ErrState}
)

// fail makes the error for code returned by op, asking the host why.
func fail(op string, code abi.Code) error {
	return &Error{Op: op, Code: code, Message: lastError()}
}

// lastError is the host's message for the last failed call.
func lastError() string {
	b, code := readInto(64, func(buf []byte, n *uint32) abi.Code { return callLastError(buf, n) })
	if code != abi.OK {
		return ""
	}
	return string(b)
}

// readInto calls a host function that fills a buffer, growing the buffer
// once if the host says it is too small.
func readInto(guess int, call func(buf []byte, n *uint32) abi.Code) ([]byte, abi.Code) {
	buf := make([]byte, guess)
	for range 3 { // the size can change between calls (last_error), so retry a little
		var n uint32
		code := call(buf, &n)
		switch code {
		case abi.OK:
			return buf[:n], abi.OK
		case abi.ErrBuffer:
			buf = make([]byte, n)
		default:
			return nil, code
		}
	}
	return nil, abi.ErrBuffer
}

// Input returns the run's input (the handler receives it too).
func Input() ([]byte, error) {
	b, code := readInto(4096, callInput)
	if code != abi.OK {
		return nil, fail(abi.FnInput, code)
	}
	return b, nil
}

// Output appends p to the run's output.
func Output(p []byte) error {
	if code := callOutput(p); code != abi.OK {
		return fail(abi.FnOutput, code)
	}
	return nil
}

// Models lists the models this plugin may use; the first is the default.
func Models() ([]Model, error) {
	b, code := readInto(1024, callModels)
	if code != abi.OK {
		return nil, fail(abi.FnModels, code)
	}
	var ms []Model
	if err := json.Unmarshal(b, &ms); err != nil {
		return nil, fmt.Errorf("tessera models: %w", err)
	}
	return ms, nil
}

// Tokenize returns the ids of text for model ("" is the default model),
// with the beginning-of-sequence token first if bos is set.
func Tokenize(model, text string, bos bool) ([]int32, error) {
	flags := uint32(0)
	if bos {
		flags = abi.FlagBOS
	}
	// A token covers at least one byte; add the dummy prefix and BOS.
	ids := make([]int32, len(text)+2)
	for range 2 {
		var n uint32
		switch code := callTokenize(model, text, flags, ids, &n); code {
		case abi.OK:
			return ids[:n], nil
		case abi.ErrBuffer:
			ids = make([]int32, n)
		default:
			return nil, fail(abi.FnTokenize, code)
		}
	}
	return nil, fail(abi.FnTokenize, abi.ErrBuffer)
}

// Detokenize returns the text of ids for model.
func Detokenize(model string, ids []int32) (string, error) {
	b, code := readInto(8*len(ids)+16, func(buf []byte, n *uint32) abi.Code {
		return callDetokenize(model, ids, buf, n)
	})
	if code != abi.OK {
		return "", fail(abi.FnDetokenize, code)
	}
	return string(b), nil
}

// CountTokens returns how many tokens text is as a prompt of model
// (beginning-of-sequence token included), which is what counts against
// the model's context.
func CountTokens(model, text string) (int, error) {
	var n uint32
	if code := callCountTokens(model, text, abi.FlagBOS, &n); code != abi.OK {
		return 0, fail(abi.FnCountTokens, code)
	}
	return int(n), nil
}

// Generation is a generation in progress. Its methods are not safe for
// concurrent use (a plugin has one thread anyway), but several
// generations may be open at once, up to the plugin's limit, and the host
// runs them concurrently.
type Generation struct {
	h      uint32
	buf    []byte
	closed bool
}

// Start opens a generation.
func Start(req Request) (*Generation, error) {
	doc, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("tessera gen_open: %w", err)
	}
	var h uint32
	if code := callGenOpen(doc, &h); code != abi.OK {
		return nil, fail(abi.FnGenOpen, code)
	}
	return &Generation{h: h, buf: make([]byte, 64)}, nil
}

// Next waits for the next token. It returns io.EOF once the generation is
// over.
func (g *Generation) Next() (Token, error) {
	if g.closed {
		return Token{}, io.EOF
	}
	for {
		var id int32
		var n uint32
		switch code := callGenNext(g.h, &id, g.buf, &n); code {
		case abi.OK:
			return Token{ID: id, Text: string(g.buf[:n])}, nil
		case abi.Done:
			return Token{}, io.EOF
		case abi.ErrBuffer:
			g.buf = make([]byte, n)
		default:
			return Token{}, fail(abi.FnGenNext, code)
		}
	}
}

// Cancel stops the generation; Next then reports ErrCanceled once the
// tokens already made are read.
func (g *Generation) Cancel() error {
	if g.closed {
		return nil
	}
	if code := callGenCancel(g.h); code != abi.OK {
		return fail(abi.FnGenCancel, code)
	}
	return nil
}

// Close stops the generation if it is still going and frees its handle.
func (g *Generation) Close() error {
	if g.closed {
		return nil
	}
	g.closed = true
	if code := callGenClose(g.h); code != abi.OK {
		return fail(abi.FnGenClose, code)
	}
	return nil
}

// Stats describe the generation so far; the timings are there once it is
// over.
func (g *Generation) Stats() (Stats, error) {
	var s Stats
	if g.closed {
		return s, fail(abi.FnGenStats, abi.ErrNotFound)
	}
	b, code := readInto(256, func(buf []byte, n *uint32) abi.Code { return callGenStats(g.h, buf, n) })
	if code != abi.OK {
		return s, fail(abi.FnGenStats, code)
	}
	err := json.Unmarshal(b, &s)
	return s, err
}

// Generate runs req and yields its tokens as they come. A failure is the
// last pair's error; stopping the loop early cancels the generation, and
// so does ctx ending (checked before each token).
func Generate(ctx context.Context, req Request) iter.Seq2[Token, error] {
	return func(yield func(Token, error) bool) {
		g, err := Start(req)
		if err != nil {
			yield(Token{}, err)
			return
		}
		defer g.Close()
		for {
			if err := ctx.Err(); err != nil {
				yield(Token{}, err)
				return
			}
			t, err := g.Next()
			if err == io.EOF {
				return
			}
			if !yield(t, err) || err != nil {
				return
			}
		}
	}
}

// GenerateText runs req and returns the text it generated.
func GenerateText(ctx context.Context, req Request) (string, error) {
	var b strings.Builder
	for t, err := range Generate(ctx, req) {
		if err != nil {
			return b.String(), err
		}
		b.WriteString(t.Text)
	}
	return b.String(), nil
}

// run is what the host's call of tessera_run does.
func run() int32 {
	if handler == nil {
		callSetError([]byte("the plugin registered no handler (call plugin.Handle in an init function)"))
		return 1
	}
	in, err := Input()
	if err != nil {
		callSetError([]byte(err.Error()))
		return 1
	}
	out, err := handler(context.Background(), in)
	if len(out) > 0 {
		if oerr := Output(out); oerr != nil && err == nil {
			err = oerr
		}
	}
	if err != nil {
		callSetError([]byte(err.Error()))
		return 1
	}
	return 0
}
