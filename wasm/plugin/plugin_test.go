//go:build !wasip1

package plugin

import (
	"context"
	"errors"
	"testing"
)

// Outside a host every call fails with ErrNotPlugin rather than crashing,
// so that code using the SDK can be compiled and unit-tested natively.
func TestOutsideAHost(t *testing.T) {
	calls := []struct {
		name string
		call func() error
	}{
		{"Models", func() error { _, err := Models(); return err }},
		{"Tokenize", func() error { _, err := Tokenize("", "hi", true); return err }},
		{"Detokenize", func() error { _, err := Detokenize("", []int32{1}); return err }},
		{"CountTokens", func() error { _, err := CountTokens("", "hi"); return err }},
		{"Start", func() error { _, err := Start(Request{Prompt: "hi"}); return err }},
		{"GenerateText", func() error { _, err := GenerateText(context.Background(), Request{}); return err }},
		{"Input", func() error { _, err := Input(); return err }},
		{"Output", func() error { return Output([]byte("x")) }},
	}
	for _, c := range calls {
		if err := c.call(); !errors.Is(err, ErrNotPlugin) {
			t.Errorf("%s: %v, want ErrNotPlugin", c.name, err)
		}
	}
}

func TestErrorIs(t *testing.T) {
	err := error(&Error{Op: "gen_open", Code: ErrLimit.Code, Message: "4 generations"})
	if !errors.Is(err, ErrLimit) || errors.Is(err, ErrNotFound) {
		t.Errorf("errors.Is does not match by code: %v", err)
	}
	if want := "tessera gen_open: limit reached: 4 generations"; err.Error() != want {
		t.Errorf("%q, want %q", err.Error(), want)
	}
}
