package grammar

import (
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
		mk := m.Mask(s)
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

// TestMaskAgainstBrute compares cached, pruned masks with feeding each
// token alone, over random vocabularies and walks through JSON grammars.
func TestMaskAgainstBrute(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte(`{}[]",: 0123456789.-abcdefnrtul\` + "\n" + "é€")
	var toks [][]byte
	for range 600 {
		n := 1 + rng.IntN(5)
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		toks = append(toks, b)
	}
	toks = append(toks, nil) // EOS
	ends := []int{len(toks) - 1}
	idx := NewIndex(len(toks), func(id int) []byte { return toks[id] }, ends)
	for _, schema := range []string{
		`{"type":"object","properties":{"name":{"type":"string"},"tags":{"type":"array","items":{"enum":["a","b"]}},"n":{"type":"integer","minimum":-5,"maximum":300}},"required":["name"]}`,
		`{"type":"object"}`,
		`{"type":"array","items":{"type":"number"}}`,
	} {
		g, err := JSONSchema([]byte(schema), SchemaOptions{MaxString: 8, MaxItems: 4})
		if err != nil {
			t.Fatal(err)
		}
		m := NewMachine(g, idx)
		for walk := range 20 {
			s := m.Start()
			for step := 0; step < 40; step++ {
				got, want := m.Mask(s), brute(m, s, toks, ends)
				var ids []int
				for id := range toks {
					if Allowed(got, id) != Allowed(want, id) {
						t.Fatalf("%s walk %d step %d: token %q: mask %v, alone %v", schema, walk, step, toks[id], Allowed(got, id), Allowed(want, id))
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
