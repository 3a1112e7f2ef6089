package synth_test

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/synth"
)

// TestWriteChunked writes shapes of every family whose tensors change on
// their way to the file (Phi-3's fused projections, Qwen3.5's interleaved
// q and gate, Gemma 4's per-layer table and fused experts, gpt-oss's MXFP4
// experts) drawn whole into memory and drawn a few rows at a time into a
// file in place: the bytes are the same.
func TestWriteChunked(t *testing.T) {
	cases := []struct {
		shape            string
		matrices, expert dtype.Type
	}{
		{"tiny-gemma4", 0, 0},
		{"tiny-gemma4", dtype.Q4_0, 0},
		{"tiny-gemma4-moe", dtype.Q4_0, 0},
		{"tiny-gemma4-moe", 0, dtype.Q8_0},
		{"tiny-gpt-oss", dtype.Q4_0, dtype.MXFP4},
		{"tiny-phi3", dtype.Q8_0, 0},
		{"tiny-qwen35", dtype.Q4_0, 0},
		{"tiny-qwen35", 0, 0},
		{"tiny-mixtral", 0, 0},
		{"tiny-llama3", 0, 0},
	}
	for _, tc := range cases {
		s, err := synth.Lookup(tc.shape)
		if err != nil {
			t.Fatal(err)
		}
		write := func(w interface{ Write([]byte) (int, error) }) error {
			switch {
			case tc.matrices != 0:
				return synth.WriteQuantized(w, s, tc.matrices, tc.expert, 5)
			case tc.expert != 0:
				return synth.WriteExperts(w, s, dtype.F16, tc.expert, 5)
			}
			return synth.Write(w, s, dtype.F32, 5)
		}
		restore := synth.SetDrawChunk(math.MaxInt)
		var whole bytes.Buffer
		err = write(&whole)
		restore()
		if err != nil {
			t.Fatalf("%s: %v", tc.shape, err)
		}
		// 100 values: one row of most matrices, a row and a part of
		// another's, expert boundaries inside a chunk.
		for _, chunk := range []int{1, 100, 1000} {
			path := filepath.Join(t.TempDir(), "chunked.gguf")
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			restore := synth.SetDrawChunk(chunk)
			err = write(f)
			restore()
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Fatalf("%s chunk %d: %v", tc.shape, chunk, err)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, whole.Bytes()) {
				at := 0
				for at < min(len(got), whole.Len()) && got[at] == whole.Bytes()[at] {
					at++
				}
				t.Errorf("%s (matrices %s, experts %s) chunk %d: %d bytes differ from the whole draw's %d from byte %d",
					tc.shape, typeName(tc.matrices), typeName(tc.expert), chunk, len(got), whole.Len(), at)
			}
		}
	}
}

// typeName names a case's type, 0 being the writer's default.
func typeName(t dtype.Type) string {
	if t == 0 {
		return "default"
	}
	return t.String()
}
