package host

import (
	"errors"
	"fmt"
	"strings"
)

// Why a run or a load failed. Run's errors are *RunError values that wrap
// one of these, so callers test them with errors.Is.
var (
	// ErrNotPlugin: the module is not a Tessera plugin (it lacks the
	// exports, or imports something the host does not serve).
	ErrNotPlugin = errors.New("not a Tessera plugin")
	// ErrABIVersion: the plugin was built for an ABI major version this
	// host does not serve.
	ErrABIVersion = errors.New("unsupported plugin ABI version")
	// ErrTokenBudget: the plugin pulled more tokens than its budget.
	ErrTokenBudget = errors.New("token budget exhausted")
	// ErrTimeout: the run outlasted its policy's time limit.
	ErrTimeout = errors.New("time limit exceeded")
	// ErrMemoryLimit: the plugin ran out of its linear-memory allowance.
	ErrMemoryLimit = errors.New("memory limit exceeded")
	// ErrCallLimit: the plugin made more host calls than allowed.
	ErrCallLimit = errors.New("host call limit exceeded")
	// ErrPluginFailed: the plugin ran and reported an error of its own.
	ErrPluginFailed = errors.New("plugin failed")
	// ErrCrashed: the plugin trapped, panicked or exited.
	ErrCrashed = errors.New("plugin crashed")
	// ErrClosed: the plugin or host was closed.
	ErrClosed = errors.New("plugin closed")
)

// RunError is why a run of a plugin failed.
type RunError struct {
	Plugin string
	// Err is one of the Err* values above, or the caller's context error.
	Err error
	// Detail says more, in words (such as the plugin's own message, or how
	// much of a limit was used).
	Detail string
	// Stderr is the end of what the plugin wrote to its standard error, which
	// for a Go plugin that panicked holds the panic and its stack.
	Stderr string
	// cause is the underlying error, when there is one (a wazero trap, a
	// context error), for errors.Is.
	cause error
}

func (e *RunError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "plugin %q: %v", e.Plugin, e.Err)
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	if s := strings.TrimSpace(e.Stderr); s != "" && e.Err != ErrPluginFailed {
		// The first line of a Go panic or fatal error says what happened.
		line, _, _ := strings.Cut(s, "\n")
		fmt.Fprintf(&b, " (stderr: %s)", line)
	}
	return b.String()
}

// Unwrap lets errors.Is see both the reason and its cause.
func (e *RunError) Unwrap() []error {
	if e.cause != nil {
		return []error{e.Err, e.cause}
	}
	return []error{e.Err}
}
