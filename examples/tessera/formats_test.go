package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/gguf"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/runtime"
)

// k512 writes a synthetic Llama whose matrices' rows are an even number
// of K-quant super-blocks (512 and 1024 wide), in F16: rows where every
// block type's Blocks layout takes exactly its file's bytes (an odd
// number of Q6_K or Q3_K super-blocks pads its scales by 2 bytes).
func k512(t *testing.T, dir string) string {
	t.Helper()
	src := filepath.Join(dir, "k512.gguf")
	s := synth.Shape{Name: "k512", Config: models.Config{Arch: "llama", Dim: 512, FFN: 1024, Layers: 2, Heads: 8, KVHeads: 4,
		HeadDim: 64, Vocab: 300, Context: 128, NormEps: 1e-5, RopeTheta: 10000, RopeDim: 64}}
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := synth.Write(f, s, dtype.F16, 3); err != nil {
		t.Fatal(err)
	}
	return src
}

// TestDecodeBytesQ4_K_M: a Q4_K_M file (Q4_K and Q6_K) loaded with the
// defaults keeps every matrix at its file's bits on both backends, so
// that a decode step reads the file's tensor bytes (less the embedding
// table but the row it looks up) plus the keys and values of the
// positions so far: decode_bytes_per_token equals that sum exactly, and
// `bench` prints it and each tensor group's bits in the file and as kept,
// equal.
func TestDecodeBytesQ4_K_M(t *testing.T) {
	dir := t.TempDir()
	src, dst := k512(t, dir), filepath.Join(dir, "q4_k_m.gguf")
	if code, _, errOut := runCLI("quantize", "--model", src, "--out", dst, "--type", "q4_k_m"); code != 0 {
		t.Fatalf("quantize: exit %d: %s", code, errOut)
	}
	f, err := gguf.Open(dst)
	if err != nil {
		t.Fatal(err)
	}
	var file, embed int64
	types := map[dtype.Type]int{}
	for _, ti := range f.Tensors {
		file += ti.Size
		types[ti.Type]++
		if ti.Name == models.TokenEmbedding {
			embed = ti.Size
		}
	}
	f.Close()
	if types[dtype.Q4_K] == 0 || types[dtype.Q6_K] == 0 {
		t.Fatalf("the file's types %v: want Q4_K and Q6_K", types)
	}
	for _, device := range []string{"cpu", "webgpu"} {
		eng := loadModel(t, dst, runtime.Options{Device: device})
		c := eng.Model().Config
		if c.TiedEmbeddings {
			t.Fatal("the shape ties its head to the table: the table's bytes would be read whole")
		}
		kv := int64(c.Layers) * 2 * int64(c.KVHeads*c.HeadDim) * 4 // f32 keys and values of a position
		weights := file - embed + embed/int64(c.Vocab)
		for _, pos := range []int{0, 9} {
			if got, want := eng.DecodeBytes(pos), weights+int64(pos+1)*kv; got != want {
				t.Errorf("%s: decode bytes at position %d: %d, want the file's %d weight bytes read + %d of keys and values = %d (%+d)",
					device, pos, got, weights, int64(pos+1)*kv, want, got-want)
			}
		}
		t.Logf("%s: %s; file tensors %d bytes, a step reads %d of them + %d a position", device, runtime.FormatMix(eng.WeightMix()), file, weights, kv)
		if got := eng.WeightBytes(); got != file {
			t.Errorf("%s: weights take %d bytes, the file's tensors %d (%s)", device, got, file, runtime.FormatMix(eng.WeightMix()))
		}
		code, out, errOut := runCLI("bench", "--model", dst, "--device", device, "--prompt-tokens", "8", "--gen-tokens", "4", "--json")
		if code != 0 {
			t.Fatalf("bench on %s: exit %d: %s", device, code, errOut)
		}
		var r runtime.BenchResult
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("bench on %s: %v: %s", device, err, out)
		}
		if r.DecodeBytes <= weights || (r.DecodeBytes-weights)%kv != 0 {
			t.Errorf("%s: bench's decode_bytes_per_token %d: not the file's %d weight bytes plus whole positions of %d bytes", device, r.DecodeBytes, weights, kv)
		}
		for _, g := range r.Bits {
			if g.FileBits != g.Bits {
				t.Errorf("%s: %s (%s) kept at %.4g bits, the file's %.4g", device, g.Group, g.Types, g.Bits, g.FileBits)
			}
		}
		if len(r.Bits) < 8 {
			t.Errorf("%s: bits by tensor group: %+v", device, r.Bits)
		}
	}
}
