//go:build js

package gpu

import "fmt"

// Open is not yet implemented in the browser: cogentcore/webgpu's js backend
// drops requested limits and features and has no explicit layouts, so the
// browser device will talk to navigator.gpu through syscall/js instead.
func Open(opts Options) (Device, error) {
	return nil, fmt.Errorf("%w in the browser yet", ErrNotImplemented)
}

// Adapters is not yet implemented in the browser; see Open.
func Adapters() ([]Info, error) {
	return nil, fmt.Errorf("%w in the browser yet", ErrNotImplemented)
}
