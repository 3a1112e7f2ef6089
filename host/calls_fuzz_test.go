package host

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/tessera-llm/tessera/host/internal/guestmem"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/wasm/plugin/abi"
)

// These tests call the host functions directly, with a fake guest memory
// and arbitrary arguments, as a hostile plugin could: whatever the
// arguments, a call must return a code, never panic (dispatch would turn a
// panic into ErrInternal, which the tests count as a failure) and never
// touch memory outside the guest's.

var (
	fuzzOnce sync.Once
	fuzzEng  *runtime.Engine
	fuzzErr  error
)

// fuzzRun is a run of a fake plugin that may use the test model, with
// small limits so that generations end quickly.
func fuzzRun(t testing.TB) *run {
	t.Helper()
	fuzzOnce.Do(func() {
		fuzzEng, fuzzErr = runtime.Load("../../shared/models/stories260K.gguf", runtime.Options{Device: "cpu"})
	})
	if fuzzErr != nil {
		t.Fatal(fuzzErr)
	}
	h, err := New(Options{Models: []Model{{Name: "m", Engine: fuzzEng}}})
	if err != nil {
		t.Fatal(err)
	}
	pol, err := Policy{Models: []string{"m"}, TokenBudget: 8, MaxGenerations: 2, MaxText: 512, MaxOutput: 4096, MaxCalls: -1, Timeout: -1}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	p := &Plugin{h: h, name: "fuzz", pol: pol, models: []string{"m"}, listing: []byte(`[{"name":"m"}]`)}
	r := p.newRun(context.Background(), []byte("the input"))
	r.ready = true
	t.Cleanup(func() {
		r.end()
		h.Close(context.Background())
	})
	return r
}

// names are the host functions in a fixed order, for picking by number.
var names = func() []string {
	var ns []string
	for n, f := range hostFuncs {
		if f.impl != nil {
			ns = append(ns, n)
		}
	}
	slices.Sort(ns)
	return ns
}()

// guarded is a fake memory with a sentinel region past its end, to catch
// writes that escape the guest's bounds.
type guarded struct {
	buf  []byte // memory then guard
	size int
}

func newGuarded(size int) *guarded {
	g := &guarded{buf: make([]byte, size+64), size: size}
	for i := size; i < len(g.buf); i++ {
		g.buf[i] = 0xA5
	}
	return g
}

func (g *guarded) mem() guestmem.Fake { return guestmem.Fake(g.buf[:g.size:g.size]) }

func (g *guarded) intact() bool {
	for _, b := range g.buf[g.size:] {
		if b != 0xA5 {
			return false
		}
	}
	return true
}

// call runs one host function with args, checking the invariants.
func call(t testing.TB, r *run, g *guarded, name string, args []uint64) abi.Code {
	f := hostFuncs[name]
	stack := make([]uint64, max(f.params, 1))
	copy(stack, args)
	code := r.dispatch(name, f, g.mem(), stack)
	if code == abi.ErrInternal {
		t.Fatalf("%s%v: host fault: %s", name, args, r.lastErr)
	}
	if code > abi.ErrInternal {
		t.Fatalf("%s%v: unknown code %d", name, args, code)
	}
	if !g.intact() {
		t.Fatalf("%s%v wrote past the end of memory", name, args)
	}
	return code
}

// FuzzHostCalls drives the host functions with a memory and a sequence of
// calls taken from the fuzzer's bytes: the first two bytes size the
// memory (its content follows), then each call is a function number and
// its arguments as little-endian uint32s, reduced modulo a bit over the
// memory's size half of the time so that many land inside it.
func FuzzHostCalls(f *testing.F) {
	f.Add([]byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add(append([]byte{0, 2}, []byte(`{"prompt":"Once","max_tokens":3}`)...))
	f.Add([]byte("\x10\x00tokenize this text please, with a few words in it"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 {
			return
		}
		size := int(binary.LittleEndian.Uint16(data)) % 8192
		data = data[2:]
		g := newGuarded(size)
		copy(g.buf[:size], data)
		r := fuzzRun(t)
		for calls := 0; len(data) >= 1 && calls < 64; calls++ {
			name := names[int(data[0])%len(names)]
			data = data[1:]
			args := make([]uint64, hostFuncs[name].params)
			for i := range args {
				if len(data) < 4 {
					break
				}
				v := binary.LittleEndian.Uint32(data)
				if v&1 == 0 && size > 0 {
					v = (v >> 1) % uint32(size+8)
				}
				args[i] = uint64(v)
				data = data[4:]
			}
			call(t, r, g, name, args)
		}
	})
}

// TestHostCallsRandom is the fuzzer's check run on pseudo-random calls, so
// that every test run covers it: every function, many times, with
// arguments either random (pointers inside, across and far outside
// memories of several sizes) or well-formed with random contents, so that
// calls get past their checks to the work behind them.
func TestHostCallsRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	requests := []string{
		`{"prompt":"Once upon a time","max_tokens":4}`,
		`{"messages":[{"role":"user","content":"Hi"}],"max_tokens":2}`,
		`{"tokens":[1,2,3,99999],"max_tokens":2}`,
		`{"tokens":[1, 300, 7],"max_tokens":3}`,
		`{"prompt":"x","temperature":-1}`,
		`{"model":"nope"}`,
		`{"prompt":`,
		`[]`,
		`{}`,
	}
	// Where well-formed arguments point, in a memory of 4 KiB or more.
	const (
		out8, out12, text, ids, buf, req = 8, 12, 1024, 2048, 3072, 3584
	)
	wellFormed := func(g *guarded, name string) []uint64 {
		mem := g.buf[:g.size]
		for i := text; i < text+256; i++ {
			mem[i] = "abcdefgh ijklmnop\xff\x80"[rng.IntN(19)]
		}
		for i := ids; i < ids+256; i += 4 {
			binary.LittleEndian.PutUint32(mem[i:], uint32(rng.IntN(600)-20))
		}
		n := func(k int) uint64 { return uint64(rng.IntN(k)) }
		switch name {
		case abi.FnInput, abi.FnModels, abi.FnLastError:
			return []uint64{buf, n(64), out8}
		case abi.FnGenStats:
			return []uint64{n(4), buf, n(256), out8}
		case abi.FnOutput, abi.FnSetError:
			return []uint64{text, n(256)}
		case abi.FnTokenize:
			return []uint64{0, 0, text, n(256), n(2), ids, n(300), out8}
		case abi.FnDetokenize:
			return []uint64{0, 0, ids, n(64), buf, n(512), out8}
		case abi.FnCountTokens:
			return []uint64{0, 0, text, n(256), n(2), out8}
		case abi.FnGenOpen:
			r := requests[rng.IntN(len(requests))]
			copy(mem[req:], r)
			return []uint64{req, uint64(len(r)), out8}
		case abi.FnGenNext:
			return []uint64{n(5), out12, buf, n(16), out8}
		}
		return []uint64{n(5)}
	}
	ok := map[string]int{} // successful calls, to show the test reaches past the checks
	for _, size := range []int{0, 1, 7, 64, 4096, 65536} {
		g := newGuarded(size)
		r := fuzzRun(t)
		val := func() uint64 {
			switch rng.IntN(6) {
			case 0:
				return 0
			case 1:
				return uint64(rng.IntN(size + 1))
			case 2:
				return uint64(max(size-rng.IntN(8), 0))
			case 3:
				return uint64(0xffffffff - rng.IntN(16))
			case 4:
				return uint64(rng.IntN(16))
			}
			return uint64(rng.Uint32())
		}
		for i := range 4000 {
			name := names[i%len(names)]
			var args []uint64
			if size >= 4096 && rng.IntN(2) == 0 {
				args = wellFormed(g, name)
			} else {
				args = make([]uint64, hostFuncs[name].params)
				for j := range args {
					args[j] = val()
				}
			}
			if code := call(t, r, g, name, args); code == abi.OK {
				ok[name]++
			}
		}
	}
	for _, name := range names {
		if ok[name] == 0 {
			t.Errorf("no call of %s succeeded: the test never reaches its work (%v)", name, ok)
		}
	}
	t.Logf("successful calls: %v", ok)
}

// TestHostCallsState: calls outside a run, or before its version check,
// are refused with ErrState.
func TestHostCallsState(t *testing.T) {
	g := newGuarded(64)
	var none *run
	if code := none.dispatch(abi.FnModels, hostFuncs[abi.FnModels], g.mem(), make([]uint64, 3)); code != abi.ErrState {
		t.Errorf("a call outside a run returned %v", code)
	}
	r := fuzzRun(t)
	r.ready = false
	if code := r.dispatch(abi.FnModels, hostFuncs[abi.FnModels], g.mem(), make([]uint64, 3)); code != abi.ErrState {
		t.Errorf("a call before the version check returned %v", code)
	}
}
