// Package wire holds the requests Tessera takes on the wire and their
// translation into the engine's runtime.Request, for every home: the HTTP
// server (runtime/server), the browser's JavaScript API (wasm/browser)
// and the plugin host (host, whose ABI's JSON is wasm/plugin/abi's).
//
// It reads every dialect they speak: OpenAI's Chat Completions and
// Completions (Message, Tool, Sampling, Fields), OpenAI's Responses and
// Anthropic's Messages (the server's agent APIs), and the engine's own
// sampling options as the plugin ABI and the browser's low-level options
// spell them (PluginParams, Options). Each dialect's reader only maps its
// fields and defaults onto Params; Params.Request checks every value, so
// that the three homes take the same values and refuse the same ones
// with the same words. A refusal is a *ParamError naming the request field
// at fault (it wraps runtime.ErrBadRequest); each home keeps its own
// envelope for it (an HTTP 400 in OpenAI's or Anthropic's shape, a
// TesseraError of code bad-request, ERR_ARGUMENT and last_error).
//
// The name says what it is: the shapes on the wire, in any API, not chat
// alone (the package was runtime/chatapi). Structured output is read here
// too (Fields), into the neutral grammar.Spec, so that runtime/grammar
// knows grammars and nothing of the JSON that asks for them.
package wire
