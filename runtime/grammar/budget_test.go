package grammar

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// hostileVocab is a small vocabulary of the bytes hostile grammars repeat.
func hostileVocab() (*Index, [][]byte) {
	toks := [][]byte{[]byte("a"), []byte("aa"), []byte("aaaa"), []byte("aaaaaaaa"), []byte("b"), []byte("ab"), []byte("{"), []byte("\""), []byte("</s>")}
	ends := []int{len(toks) - 1}
	return NewIndex(len(toks), func(id int) []byte {
		if id == ends[0] {
			return nil
		}
		return toks[id]
	}, ends), toks
}

// chainedRules is root ::= r0, each rule a bounded repetition of the next,
// the last of "a": the nested repetition spelled through rules.
func chainedRules(depth int) string {
	var b strings.Builder
	b.WriteString("root ::= r0\n")
	for i := range depth - 1 {
		fmt.Fprintf(&b, "r%d ::= r%d{0,1000}\n", i, i+1)
	}
	fmt.Fprintf(&b, "r%d ::= \"a\"{0,1000}\n", depth-1)
	return b.String()
}

// manyRepetitions is a grammar of n rules, each "a"{0,1000}, in a row:
// each is small, together they are past MaxElems.
func manyRepetitions(n int) string {
	var b strings.Builder
	b.WriteString("root ::=")
	for i := range n {
		fmt.Fprintf(&b, " r%d", i)
	}
	b.WriteString("\n")
	for i := range n {
		fmt.Fprintf(&b, "r%d ::= \"a\"{0,1000}\n", i)
	}
	return b.String()
}

// TestHostileGrammarsStayInBudget: the grammars a hostile request sends,
// as a regular expression or GBNF, are refused when they are compiled or
// end their machine with ErrBudget, and none holds more than its limits.
// Before the budgets, the nested repetitions overflowed the goroutine
// stack (a fatal error no recover catches) in Machine.expand, and the
// ambiguous ones grew the process by gigabytes.
func TestHostileGrammarsStayInBudget(t *testing.T) {
	deep := strings.Repeat("(", 100_000) + "a" + strings.Repeat(")", 100_000)
	for _, tt := range []struct {
		name    string
		compile func() (*Grammar, error)
	}{
		{"regex nested bounded", func() (*Grammar, error) { return Regex(`((a{0,1000}){0,1000}){0,1000}`) }},
		{"gbnf nested bounded", func() (*Grammar, error) { return Parse(`root ::= (("a"{0,1000}){0,1000}){0,1000}`) }},
		{"gbnf two levels", func() (*Grammar, error) { return Parse(`root ::= ("a"{0,1000}){0,1000}`) }},
		{"gbnf chained through rules", func() (*Grammar, error) { return Parse(chainedRules(3)) }},
		{"regex empty-able nested", func() (*Grammar, error) { return Regex(`((a?){1000}){1000}`) }},
		{"regex deep groups", func() (*Grammar, error) { return Regex(deep) }},
		{"gbnf deep groups", func() (*Grammar, error) { return Parse("root ::= " + deep) }},
		{"gbnf past MaxElems", func() (*Grammar, error) { return Parse(manyRepetitions(200)) }},
		{"gbnf past MaxSource", func() (*Grammar, error) { return Parse("root ::= " + strings.Repeat(`"a" `, MaxSource/4)) }},
		{"schema deep", func() (*Grammar, error) {
			return JSONSchema([]byte(strings.Repeat(`{"type":"array","items":`, 2000)+`{}`+strings.Repeat(`}`, 2000)), SchemaOptions{})
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g, err := tt.compile()
			if err != nil {
				if !errors.Is(err, ErrBudget) {
					t.Fatalf("refused, but not for a budget: %v", err)
				}
				if len(err.Error()) > 600 {
					t.Errorf("the refusal is %d bytes long", len(err.Error()))
				}
				return
			}
			lim := DefaultLimits()
			idx, _ := hostileVocab()
			m := NewMachineWith(g, idx, lim)
			s := m.Start()
			for i := 0; i < 400 && m.Err() == nil; i++ {
				if _, err := m.Mask(context.Background(), s); err != nil {
					break
				}
				if b := m.Bytes(); b > lim.Bytes+lim.MaskBytes {
					t.Fatalf("after %d bytes the machine holds %d bytes, past its limits", i, b)
				}
				s = m.Advance(s, 'a')
			}
			err = m.Err()
			if !errors.Is(err, ErrBudget) {
				t.Fatalf("the machine did not run into its budget (states %d, %d bytes): %v", m.States(), m.Bytes(), err)
			}
			// Spent: every call refuses at once, and the memory is let go.
			if _, err := m.Mask(context.Background(), m.Start()); !errors.Is(err, ErrBudget) {
				t.Errorf("Mask after the budget: %v", err)
			}
			if m.Advance(m.Start(), 'a') != Dead || m.CanEnd(s) || m.Done(s) || m.States() != 0 || m.Bytes() != 0 {
				t.Errorf("a spent machine still answers or holds: states %d, %d bytes", m.States(), m.Bytes())
			}
			t.Logf("%v", err)
		})
	}
}

// TestBudgetBoundsMemory: the process's heap stays near the machine's
// limit while a hostile grammar spends it (the limit counts what the Go
// runtime really holds, give or take the maps' growth).
func TestBudgetBoundsMemory(t *testing.T) {
	g, err := Regex(`((a?){1000}){1000}`)
	if err != nil {
		t.Fatal(err)
	}
	lim := Limits{Bytes: 16 << 20, MaskBytes: 1 << 20, Work: 1 << 40}
	idx, _ := hostileVocab()
	var before, peak runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	m := NewMachineWith(g, idx, lim)
	for s := m.Start(); m.Err() == nil; s = m.Advance(s, 'a') {
		m.Mask(context.Background(), s)
	}
	runtime.ReadMemStats(&peak) // no GC since: what was allocated
	if !errors.Is(m.Err(), ErrBudget) {
		t.Fatal(m.Err())
	}
	if grown := peak.TotalAlloc - before.TotalAlloc; grown > 8*uint64(lim.Bytes) {
		t.Errorf("a machine limited to %d MiB allocated %d MiB", lim.Bytes>>20, grown>>20)
	}
}

// TestLimitsAreNotFailures: a grammar whose states the budget holds runs
// to the end however small the mask cache is (masks are dropped and
// computed again, the same), and a budget below the start's refuses at
// once.
func TestLimitsAreNotFailures(t *testing.T) {
	toks := [][]byte{[]byte("{"), []byte("}"), []byte("\"a"), []byte("b\""), []byte(":"), []byte("1"), []byte("12"), []byte(","), []byte("\""), []byte("x")}
	idx := NewIndex(len(toks), func(id int) []byte { return toks[id] }, nil)
	g, err := JSONSchema([]byte(`{"type":"object","properties":{"ab":{"type":"integer"},"b":{"type":"string","maxLength":30}}}`), SchemaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ref := NewMachine(g, idx)
	lim := DefaultLimits()
	lim.MaskBytes = 64 // not even one mask fits
	small := NewMachineWith(g, idx, lim)
	text := `{"ab":12,"b":"xxxxxx"}`
	s, r := small.Start(), ref.Start()
	for i := range len(text) + 1 {
		got, err := small.Mask(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := ref.Mask(context.Background(), r)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("byte %d: mask %v, want %v", i, got, want)
		}
		if i < len(text) {
			s, r = small.Advance(s, text[i]), ref.Advance(r, text[i])
		}
	}
	if !small.CanEnd(s) {
		t.Error("the text does not end the grammar")
	}
	tiny := NewMachineWith(g, idx, Limits{Bytes: 100, MaskBytes: 100, Work: 1 << 20})
	if tiny.Start() != Dead || !errors.Is(tiny.Err(), ErrBudget) {
		t.Errorf("a budget below the start's: start %d, err %v", tiny.Start(), tiny.Err())
	}
}

// TestMaskWatchesContext: a cancelled walk returns the context's error
// and leaves the machine whole: the next walk gives the mask.
func TestMaskWatchesContext(t *testing.T) {
	idx, _ := hostileVocab()
	g, err := Regex(`(a|ab|b){0,50}`)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMachine(g, idx)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Mask(ctx, m.Start()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Mask with a cancelled context: %v", err)
	}
	if _, err := m.MaskWith(ctx, m.Start(), func(id int) []byte { return []byte("a") }); !errors.Is(err, context.Canceled) {
		t.Fatalf("MaskWith with a cancelled context: %v", err)
	}
	mask, err := m.Mask(context.Background(), m.Start())
	if err != nil || !Allowed(mask, 0) || !Allowed(mask, 5) {
		t.Fatalf("the mask after: %v, %v", mask, err)
	}
}

// TestNullableAnyOrder: nullability reaches the first rule of a chain
// written backwards (each rule refers to one defined after it), which a
// pass-per-link fixpoint took a pass per rule for.
func TestNullableAnyOrder(t *testing.T) {
	var b strings.Builder
	const n = 20_000
	b.WriteString("root ::= r0 \"z\"\n")
	for i := range n {
		fmt.Fprintf(&b, "r%d ::= r%d\n", i, i+1)
	}
	fmt.Fprintf(&b, "r%d ::= \"\" | \"y\"\n", n)
	g, err := Parse(b.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"z", "yz"} {
		if !g.Match(text) {
			t.Errorf("%q does not match", text)
		}
	}
	if g.Match("yyz") {
		t.Error(`"yyz" matches`)
	}
}
