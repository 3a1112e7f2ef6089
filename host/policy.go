package host

import (
	"fmt"
	"io"
	"time"
)

// Policy is what the embedder grants one plugin. Its zero value is the
// strictest useful sandbox: no models, no files, a fake clock and a fixed
// random source, and the Default* limits below. A limit's zero value means
// its default and a negative value means no limit, where that is allowed.
type Policy struct {
	// Models names the host's models the plugin may use; the first is its
	// default. A plugin sees only these, in this order.
	Models []string

	// TokenBudget caps the tokens one run may receive from generations, all
	// of them together (prompt tokens are not counted). A plugin that pulls
	// a token past it is stopped with ErrTokenBudget. Negative: no cap.
	TokenBudget int
	// MaxGenerations caps the generations a run may have in progress at
	// once; opening one more is refused with the code ErrLimit.
	MaxGenerations int
	// Timeout caps the wall-clock time of one run, initialization included;
	// the plugin is then stopped with ErrTimeout. Negative: no limit (the
	// caller's context still applies).
	Timeout time.Duration
	// MemoryPages caps the plugin's linear memory, in 64 KiB pages. A Go
	// plugin that needs more dies with "out of memory", reported as
	// ErrMemoryLimit.
	MemoryPages uint32
	// MaxCalls caps the host calls one run may make; past it the plugin is
	// stopped with ErrCallLimit. It bounds a flood of cheap calls that the
	// timeout alone would let run for its whole length. Negative: no cap.
	MaxCalls int64
	// MaxOutput caps the bytes a run may output; output past it is refused
	// with the code ErrLimit.
	MaxOutput int
	// MaxText caps the bytes of text one call may hand the tokenizer (a
	// prompt, or the text to tokenize or count). Tokenizing is quadratic in
	// the text's length and a host function cannot be interrupted by the
	// timeout, so this bounds how long one call can hold the host.
	MaxText int
	// MaxImageBytes caps the bytes of a generation's images together
	// (Request.Images, for a model loaded with a vision projector); each
	// image's size is read from its header before it is decoded, within
	// 16 M pixels. Negative: no images.
	MaxImageBytes int

	// Mounts are the host directories the plugin may see through WASI;
	// none by default.
	Mounts []Mount
	// Clock gives the plugin the real wall and monotonic clocks and real
	// sleeps. Without it WASI's clocks are fake (they advance 1ms per
	// reading) and sleeps return at once, so a plugin can neither tell the
	// time nor measure the host.
	Clock bool
	// Random gives the plugin crypto/rand. Without it WASI's random_get is
	// a fixed deterministic stream (Go's map seeds and math/rand included).
	Random bool
	// Stdout and Stderr receive what the plugin writes to its standard
	// output and error; nil discards it. The last few KiB of standard error
	// are also kept for the error of a run that fails.
	Stdout, Stderr io.Writer
}

// Mount grants a plugin one host directory.
type Mount struct {
	// Dir is the host directory.
	Dir string
	// Guest is where the plugin sees it, such as "/data"; "" means "/".
	Guest string
	// Writable lets the plugin create, change and delete files. A read-only
	// mount is confined to Dir by os.Root: neither ".." nor a symbolic link
	// leads out of it. A writable one is wazero's directory mount, which
	// refuses ".." but follows symbolic links on the host, so grant it only
	// for a directory whose links you control.
	Writable bool
}

// The defaults of Policy's limits.
const (
	DefaultTokenBudget    = 4096
	DefaultMaxGenerations = 4
	DefaultTimeout        = time.Minute
	DefaultMemoryPages    = 1024 // 64 MiB
	DefaultMaxCalls       = 1 << 20
	DefaultMaxOutput      = 1 << 20
	DefaultMaxText        = 32 << 10
	DefaultMaxImageBytes  = 4 << 20
)

// withDefaults fills in zero limits and checks the rest.
func (p Policy) withDefaults() (Policy, error) {
	if p.TokenBudget == 0 {
		p.TokenBudget = DefaultTokenBudget
	}
	if p.MaxGenerations == 0 {
		p.MaxGenerations = DefaultMaxGenerations
	}
	if p.Timeout == 0 {
		p.Timeout = DefaultTimeout
	}
	if p.MemoryPages == 0 {
		p.MemoryPages = DefaultMemoryPages
	}
	if p.MaxCalls == 0 {
		p.MaxCalls = DefaultMaxCalls
	}
	if p.MaxOutput == 0 {
		p.MaxOutput = DefaultMaxOutput
	}
	if p.MaxText == 0 {
		p.MaxText = DefaultMaxText
	}
	if p.MaxImageBytes == 0 {
		p.MaxImageBytes = DefaultMaxImageBytes
	}
	switch {
	case p.MaxGenerations < 0:
		return p, fmt.Errorf("MaxGenerations %d must be positive", p.MaxGenerations)
	case p.MemoryPages > 65536:
		return p, fmt.Errorf("MemoryPages %d is over wasm's 65536", p.MemoryPages)
	case p.MaxOutput < 0:
		return p, fmt.Errorf("MaxOutput %d must be positive", p.MaxOutput)
	case p.MaxText < 0:
		return p, fmt.Errorf("MaxText %d must be positive", p.MaxText)
	}
	for _, m := range p.Mounts {
		if m.Dir == "" {
			return p, fmt.Errorf("a mount needs a host directory")
		}
	}
	return p, nil
}
