package grammar

import (
	"context"
	"math/rand/v2"
	"testing"
)

// brute is the mask by feeding every token on its own.
func brute(m *Machine, s State, toks [][]byte, ends []int) []uint32 {
	mask := make([]uint32, (len(toks)+31)/32)
	for id, b := range toks {
		if len(b) == 0 {
			if m.CanEnd(s) && contains(ends, id) {
				mask[id>>5] |= 1 << (id & 31)
			}
			continue
		}
		if m.AdvanceBytes(s, b) != Dead {
			mask[id>>5] |= 1 << (id & 31)
		}
	}
	return mask
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

// TestMaskTokens: tokens that span several symbols of the grammar, split
// UTF-8 characters and end tokens.
func TestMaskTokens(t *testing.T) {
	e := "é"
	toks := [][]byte{[]byte("{"), []byte(`"`), []byte(`{"`), []byte("a"), []byte("ab"), []byte(`"}`), []byte("}"),
		[]byte(e[:1]), []byte(e[1:]), []byte(e), nil, []byte(`a"}`), []byte("x")}
	const eos = 10
	g, err := Parse(`root ::= "{\"" [a-bé]* "\"}"`)
	if err != nil {
		t.Fatal(err)
	}
	idx := NewIndex(len(toks), func(id int) []byte { return toks[id] }, []int{eos})
	m := NewMachine(g, idx)
	allowed := func(s State) []int {
		var out []int
		mk, err := m.Mask(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		for id := range toks {
			if Allowed(mk, id) {
				out = append(out, id)
			}
		}
		return out
	}
	check := func(s State, want ...int) {
		t.Helper()
		got := allowed(s)
		if len(got) != len(want) {
			t.Fatalf("allowed %v, want %v", got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("allowed %v, want %v", got, want)
			}
		}
	}
	s := m.Start()
	check(s, 0, 2) // "{" or `{"`
	s = m.AdvanceBytes(s, []byte(`{`))
	check(s, 1) // `"`
	s = m.AdvanceBytes(s, []byte(`"`))
	check(s, 1, 3, 4, 5, 7, 9, 11) // a, ab, `"}`, é's first byte, é, `a"}`; not its second byte
	s = m.AdvanceBytes(s, []byte(e[:1]))
	check(s, 8) // only the rest of é
	s = m.AdvanceBytes(s, []byte(e[1:]))
	s = m.AdvanceBytes(s, []byte(`a"}`))
	if !m.Done(s) {
		t.Fatal("not done after the closing brace")
	}
	check(s, eos)
}

// TestMaskAgainstBrute compares cached, pruned masks (subtrees taken
// whole included) with feeding each token alone, over random
// vocabularies, with characters of every UTF-8 length, broken UTF-8 and
// long tokens, and walks through grammars with bounded and unbounded
// strings and free text.
func TestMaskAgainstBrute(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"{", "}", "[", "]", `"`, ",", ":", " ", "0", "1", "5", "9", ".", "-", "a", "b", "c", "e", "f", "n", "r", "t", "u", "l", "z", "\\", "\n", "\n",
		"é", "€", "中", "𝄞", "\xe4", "\xb8", "\xad\xe6", "\xed\xa0\x80", "\xc0\xaf", "\xff", "\x01"}
	var toks [][]byte
	for range 900 {
		n := 1 + rng.IntN(5)
		if rng.IntN(10) == 0 {
			n = 8 + rng.IntN(10) // long tokens, in characters
		}
		var b []byte
		for range n {
			b = append(b, pieces[rng.IntN(len(pieces))]...)
		}
		toks = append(toks, b)
	}
	// Runs of one class, so that whole subtrees fit a state's chain.
	for _, w := range []string{"abc", "ab", "abcd", "ez", "a中b", "中文", "é€", "tttttttt", "ttttttttttttttttttttttt", "a€", "a€a", "ab€", "中€", "中𝄞z", "é中", "éé", "a丟", "a丟b", "中丟", "丟", "a\"", "ab\",", "中\"}"} {
		toks = append(toks, []byte(w))
	}
	toks = append(toks, nil) // EOS
	ends := []int{len(toks) - 1}
	idx := NewIndex(len(toks), func(id int) []byte { return toks[id] }, ends)
	grammars := []func() (*Grammar, error){}
	for _, opts := range []SchemaOptions{{MaxString: 8, MaxItems: 4}, {MaxItems: 3}} {
		for _, schema := range []string{
			`{"type":"object","properties":{"name":{"type":"string"},"tags":{"type":"array","items":{"enum":["a","b"]}},"n":{"type":"integer","minimum":-5,"maximum":300}},"required":["name"]}`,
			`{"type":"object"}`,
			`{"type":"array","items":{"type":"number"}}`,
			`{"type":"array","items":{"type":"string","maxLength":20},"maxItems":3}`,
			`{"type":"string","pattern":"^[a-z]{2,12}$"}`,
		} {
			grammars = append(grammars, func() (*Grammar, error) { return JSONSchema([]byte(schema), opts) })
		}
	}
	grammars = append(grammars,
		func() (*Grammar, error) { return Regex(`[a-z中é ]{0,30}\.`) },
		func() (*Grammar, error) { return Parse(`root ::= ( [^"\\] | "\\" ["nt] )* "\"" [0-9]{1,3}`) },
	)
	for gi, mk := range grammars {
		g, err := mk()
		if err != nil {
			t.Fatal(err)
		}
		m := NewMachine(g, idx)
		for walk := range 12 {
			s := m.Start()
			for step := 0; step < 40; step++ {
				got, err := m.Mask(context.Background(), s)
				if err != nil {
					t.Fatal(err)
				}
				want := brute(m, s, toks, ends)
				var ids []int
				for id := range toks {
					if Allowed(got, id) != Allowed(want, id) {
						t.Fatalf("grammar %d walk %d step %d: token %q: mask %v, alone %v", gi, walk, step, toks[id], Allowed(got, id), Allowed(want, id))
					}
					if Allowed(got, id) && id != ends[0] {
						ids = append(ids, id)
					}
				}
				if len(ids) == 0 {
					break
				}
				s = m.AdvanceBytes(s, toks[ids[rng.IntN(len(ids))]])
			}
		}
	}
}
