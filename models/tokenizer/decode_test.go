package tokenizer

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	for _, rt := range realTokenizers {
		tok := mustLoad(t, rt.load)
		for _, text := range append(awkwardTexts, paragraph) {
			for _, bos := range []bool{false, true} {
				ids := tok.Encode(text, bos)
				if got := tok.Decode(ids); got != text {
					t.Errorf("%s: Decode(Encode(%q, %v)) = %q (ids %v)", rt.name, text, bos, got, ids)
				}
			}
		}
	}
}

func TestTokenBytes(t *testing.T) {
	tok := mustLoad(t, loadTok512Model)
	once := tok.Encode("Once", false)[0] // "▁Once"
	const (
		bos, eos = 1, 2
		newline  = 3 + '\n' // <0x0A>
		space    = 3 + ' '  // <0x20>
	)
	tests := []struct {
		name     string
		prev, id int
		want     string
	}{
		{"start of text drops the dummy prefix", -1, once, "Once"},
		{"after BOS drops the dummy prefix", bos, once, "Once"},
		{"mid-text keeps the space", once, once, " Once"},
		{"byte piece gives its byte", once, newline, "\n"},
		{"byte piece after BOS is not stripped", bos, space, " "},
		{"BOS gives nothing", -1, bos, ""},
		{"EOS gives nothing", once, eos, ""},
		{"unknown gives its piece", once, 0, "<unk>"},
		{"id out of range gives nothing", once, 512, ""},
		{"negative id gives nothing", once, -5, ""},
	}
	for _, tt := range tests {
		if got := string(tok.TokenBytes(tt.prev, tt.id)); got != tt.want {
			t.Errorf("%s: TokenBytes(%d, %d) = %q, want %q", tt.name, tt.prev, tt.id, got, tt.want)
		}
	}
}

// The reference story was printed by llama2.c's run.c from these ids
// (without BOS, which run.c does not print), followed by a newline.
func TestDecodeGreedyReference(t *testing.T) {
	tok := mustLoad(t, loadTok512Bin)
	ids := readIDs(t, modelsDir+"stories260K.greedy200.ids")
	want, err := os.ReadFile(modelsDir + "stories260K.greedy200.txt")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.TrimSuffix(string(want), "\n")

	withBOS := append([]int{tok.BOS()}, ids...)
	if got := tok.Decode(withBOS); got != text {
		t.Errorf("Decode = %q\nwant     %q", got, text)
	}
	s := NewStream(tok)
	var streamed strings.Builder
	for _, id := range withBOS {
		streamed.WriteString(s.Next(id))
	}
	streamed.WriteString(s.Flush())
	if streamed.String() != text {
		t.Errorf("Stream = %q\nwant     %q", streamed.String(), text)
	}
}

func readIDs(t *testing.T, path string) []int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("reference ids: %v", err)
	}
	var ids []int
	for _, f := range strings.Fields(string(data)) {
		id, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		ids = append(ids, id)
	}
	return ids
}
