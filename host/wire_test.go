package host

import (
	"slices"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/runtime/wire/wiretest"
	"github.com/tessera-llm/tessera/wasm/plugin/abi"
)

// TestBadSamplingAsEveryHome: gen_open refuses the requests of
// wiretest.BadSampling (and BadChat) that the plugin ABI can spell with ERR_ARGUMENT,
// last_error in the words the server and the browser use for them too
// (their own tests run the same table).
func TestBadSamplingAsEveryHome(t *testing.T) {
	r := fuzzRun(t)
	g := newGuarded(4096)
	const req, hOut = 1024, 8
	ran := 0
	for _, c := range slices.Concat(wiretest.BadSampling, wiretest.BadChat) {
		if c.Plugin == "" {
			continue
		}
		ran++
		body := `{"max_tokens": 1, ` + c.Plugin + `}`
		if !strings.Contains(c.Plugin, `"messages"`) {
			body = `{"prompt": "Once", ` + c.Plugin + `}`
		}
		copy(g.buf[req:], body)
		code := call(t, r, g, abi.FnGenOpen, []uint64{req, uint64(len(body)), hOut})
		if code != abi.ErrArgument || !strings.HasSuffix(r.lastErr, c.Msg) {
			t.Errorf("%s: gen_open returned %v: %q, want %v: %q", c.Name, code, r.lastErr, abi.ErrArgument, c.Msg)
		}
	}
	if ran == 0 {
		t.Fatal("no case of the table is the plugin's")
	}
	body := `{"prompt": "Once", "max_tokens": 1, ` + wiretest.Unknown + `}`
	copy(g.buf[req:], body)
	if code := call(t, r, g, abi.FnGenOpen, []uint64{req, uint64(len(body)), hOut}); code != abi.OK {
		t.Errorf("a request with an unknown field: %v: %s", code, r.lastErr)
	}
}
