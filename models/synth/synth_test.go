package synth_test

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/synth"
)

// TestWriteLoads writes the tiny shape in both types and loads it back
// through models.Open: the config, the tensors and the tokenizer round-trip.
func TestWriteLoads(t *testing.T) {
	for _, name := range append(tinyShapes, ggufOnlyShapes...) {
		writeLoads(t, name)
	}
}

func writeLoads(t *testing.T, name string) {
	s, err := synth.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []dtype.Type{dtype.F32, dtype.F16} {
		path := filepath.Join(t.TempDir(), "tiny.gguf")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := synth.Write(f, s, typ, 3); err != nil {
			t.Fatal(err)
		}
		f.Close()
		m, err := models.Open(path, models.Options{})
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		c := m.Config
		want := s.Config
		want.TiedEmbeddings = c.TiedEmbeddings
		if !reflect.DeepEqual(c, want) {
			t.Errorf("%s %s: config %+v, want %+v", name, typ, c, s.Config)
		}
		down := models.LayerTensor(1, models.FFNDown)
		if c.MoE.On() {
			down = models.LayerTensor(1, models.FFNDownExps)
		}
		if got := m.Tensors[down]; got.Type != typ {
			t.Errorf("tensor type %s, want %s", got.Type, typ)
		}
		// The vocabulary has a bare ▁, as SentencePiece's always do, so
		// the dummy prefix and a space before a letter without a ▁-piece
		// are that piece, and every text round-trips.
		for _, text := range []string{"hello tessera, abc xyz", "The quick brown fox", " Zz  Y "} {
			if got := m.Tokenizer.Decode(m.Tokenizer.Encode(text, true)); got != text {
				t.Errorf("tokenizer round trip: %q, want %q", got, text)
			}
		}
		m.Close()
	}
}

func TestShapes(t *testing.T) {
	for _, name := range synth.Names() {
		s, err := synth.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Config.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		pieces, _, _ := synth.Vocabulary(s.Config.Vocab)
		if len(pieces) != s.Config.Vocab {
			t.Errorf("%s: %d pieces for a vocabulary of %d", name, len(pieces), s.Config.Vocab)
		}
	}
	if _, err := synth.Lookup("gpt-5"); err == nil {
		t.Error("unknown shape accepted")
	}
}
