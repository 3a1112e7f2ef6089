// Package abi holds the definitions of Tessera's plugin ABI that both sides
// share: the version, the names of the imported and exported functions, the
// result codes and the JSON documents that cross the boundary. The host
// (package host) and the Go guest SDK (package plugin) both import it, so
// the two can never disagree about a number; docs/PLUGIN_ABI.md describes
// the same contract for plugins written in other languages.
//
// The package is plain Go with no build constraints and no dependencies.
package abi

// The ABI version is Major.Minor. A host serves every minor version of the
// majors it knows: minor versions only add functions or optional JSON
// fields, so a plugin built against an older minor keeps working, and one
// built against a newer minor fails to link only if it imports a function
// the host lacks. A new major may change anything, so a host refuses a
// plugin whose major it does not know before running any of its code
// beyond initialization.
const (
	Major = 1
	Minor = 1 // 1.1: Request.Adapters
	// Version is Major and Minor packed as the version functions return them.
	Version = Major<<16 | Minor
)

// PackVersion packs a version the way the version functions return it:
// major in the high 16 bits, minor in the low 16.
func PackVersion(major, minor uint16) uint32 { return uint32(major)<<16 | uint32(minor) }

// SplitVersion undoes PackVersion.
func SplitVersion(v uint32) (major, minor uint16) { return uint16(v >> 16), uint16(v) }

// Module is the import module under which the host serves its functions.
const Module = "tessera"

// Exports every plugin defines. A plugin is a WASI preview 1 reactor: the
// host calls _initialize once per instance, then tessera_abi_version, then
// tessera_run.
const (
	ExportInitialize = "_initialize"
	ExportVersion    = "tessera_abi_version" // () -> i32 packed version
	ExportRun        = "tessera_run"         // () -> i32, 0 on success
)

// Functions the host serves under Module. Their signatures, with every
// pointer and length an i32 into the plugin's memory and every result an
// i32 Code, are in docs/PLUGIN_ABI.md.
const (
	FnABIVersion  = "abi_version"  // () -> packed version (not a Code)
	FnInput       = "input"        // (buf, cap, len_out)
	FnOutput      = "output"       // (ptr, len)
	FnSetError    = "set_error"    // (ptr, len)
	FnLastError   = "last_error"   // (buf, cap, len_out)
	FnModels      = "models"       // (buf, cap, len_out)
	FnTokenize    = "tokenize"     // (model, model_len, text, text_len, flags, ids, ids_cap, n_out)
	FnDetokenize  = "detokenize"   // (model, model_len, ids, n, buf, cap, len_out)
	FnCountTokens = "count_tokens" // (model, model_len, text, text_len, flags, n_out)
	FnGenOpen     = "gen_open"     // (req, req_len, handle_out)
	FnGenNext     = "gen_next"     // (handle, id_out, buf, cap, len_out)
	FnGenCancel   = "gen_cancel"   // (handle)
	FnGenClose    = "gen_close"    // (handle)
	FnGenStats    = "gen_stats"    // (handle, buf, cap, len_out)
)

// FlagBOS asks tokenize and count_tokens to prepend the beginning-of-
// sequence token, as the engine does for a prompt.
const FlagBOS = 1

// Code is the result of a host function.
type Code uint32

// The result codes. OK and Done are not errors.
const (
	OK          Code = 0 // success
	Done        Code = 1 // gen_next: the generation is over; no token was written
	ErrArgument Code = 2 // a pointer or length outside memory, malformed JSON, a bad option
	ErrBuffer   Code = 3 // the buffer is too small; the size needed is in *len_out
	ErrNotFound Code = 4 // no such model (for this plugin) or generation handle
	ErrLimit    Code = 5 // refused by a limit of the plugin's policy
	ErrState    Code = 6 // not callable now (before the version check)
	ErrCanceled Code = 7 // the generation was cancelled
	ErrFailed   Code = 8 // the engine failed the request: see last_error
	ErrInternal Code = 9 // a fault in the host: see last_error
)

var codeNames = [...]string{
	OK: "ok", Done: "done", ErrArgument: "invalid argument", ErrBuffer: "buffer too small",
	ErrNotFound: "not found", ErrLimit: "limit reached", ErrState: "wrong state",
	ErrCanceled: "canceled", ErrFailed: "failed", ErrInternal: "internal error",
}

func (c Code) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return "unknown code"
}

// Model describes one model a plugin may use (the models document is a
// JSON array of them).
type Model struct {
	Name    string `json:"name"`
	Context int    `json:"context"` // longest sequence in tokens, prompt included
	Vocab   int    `json:"vocab"`
	BOS     int    `json:"bos"` // -1 when the tokenizer has none
	EOS     int    `json:"eos"`
}

// Message is one turn of a chat.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Request is the JSON document gen_open takes. Exactly one of Prompt,
// Messages and Tokens gives the prompt; the zero value of every sampling
// field means greedy decoding.
type Request struct {
	// Model names the model; "" is the first model the plugin may use.
	Model string `json:"model,omitempty"`
	// Prompt is text, tokenized with a leading BOS.
	Prompt string `json:"prompt,omitempty"`
	// Messages is a chat, rendered by the host with the model's own chat
	// template (plain "User: ..." lines for a model without one).
	Messages []Message `json:"messages,omitempty"`
	// Tokens is a prompt already tokenized (include BOS yourself).
	Tokens []int32 `json:"tokens,omitempty"`
	// Images are PNG, JPEG or WebP files, one for each "<__media__>" in Prompt
	// or Messages, in order, for a model the host loaded with a vision
	// projector; their bytes together are within the plugin's
	// MaxImageBytes.
	Images [][]byte `json:"images,omitempty"`
	// MaxTokens bounds the generated tokens; 0 means as many as the
	// plugin's remaining token budget.
	MaxTokens int `json:"max_tokens,omitempty"`

	Temperature   float32 `json:"temperature,omitempty"`
	TopK          int     `json:"top_k,omitempty"`
	TopP          float32 `json:"top_p,omitempty"`
	MinP          float32 `json:"min_p,omitempty"`
	RepeatPenalty float32 `json:"repeat_penalty,omitempty"`
	RepeatLastN   int     `json:"repeat_last_n,omitempty"`
	Seed          uint64  `json:"seed,omitempty"`

	// Adapters are LoRA adapters the host loaded on the model, applied to
	// this generation (several add up).
	Adapters []Adapter `json:"adapters,omitempty"`
}

// Adapter names a LoRA adapter of the model and a multiplier of the scale
// the host loaded it with (0 means 1).
type Adapter struct {
	Name  string  `json:"name"`
	Scale float32 `json:"scale,omitempty"`
}

// Stats is the JSON document gen_stats writes.
type Stats struct {
	PromptTokens    int     `json:"prompt_tokens"`
	Generated       int     `json:"generated"` // tokens delivered to the plugin so far
	Done            bool    `json:"done"`
	StoppedAtEOS    bool    `json:"stopped_at_eos"`
	StoppedAtLength bool    `json:"stopped_at_length"`
	PrefillMillis   float64 `json:"prefill_ms"`
	DecodeMillis    float64 `json:"decode_ms"`
}
