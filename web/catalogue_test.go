package web

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/eval"
)

// catalogueEntry is one model of models.json, as app.js reads it.
type catalogueEntry struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	URL  string `json:"url"`
	Size int64  `json:"size"`
	// SHA256 is the file's SHA-256 as the Hub lists it, if known.
	SHA256 string `json:"sha256"`
	Params int64  `json:"params"`
	Memory int64  `json:"memory"`
	Chat   bool   `json:"chat"`
	About  string `json:"about"`
	// Shape names the synth shape with the model's published config, from
	// which the memory estimate is checked; empty for stories260K, which
	// is checked against the real file in ../shared/models.
	Shape string `json:"shape"`
}

// hubResolve is the form of a Hugging Face file URL: the resolve endpoint
// of a repository (owner/name) at a revision, then the file's path.
var hubResolve = regexp.MustCompile(`^/([A-Za-z0-9][A-Za-z0-9._-]*)/([A-Za-z0-9][A-Za-z0-9._-]*)/resolve/([A-Za-z0-9._-]+)/(.+\.gguf)$`)

// TestCatalogue checks models.json without the network (none here): each
// entry is a Hugging Face resolve URL of a GGUF file, sizes and counts are
// positive and agree (the file holds 0.5 to 4 bytes a parameter and its metadata), and
// memory is what eval.EstimateMemory computes for the model's shape at
// the page's defaults (quant "", WebGPU, a 4096-token context).
func TestCatalogue(t *testing.T) {
	raw, err := fs.ReadFile(embedded, "models.json")
	if err != nil {
		t.Fatal(err)
	}
	var cat struct {
		Note   string           `json:"note"`
		Models []catalogueEntry `json:"models"`
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cat); err != nil {
		t.Fatalf("models.json: %v", err)
	}
	if len(cat.Models) == 0 {
		t.Fatal("models.json lists no models")
	}
	ids, urls := map[string]bool{}, map[string]bool{}
	for _, m := range cat.Models {
		t.Run(m.ID, func(t *testing.T) {
			if m.ID == "" || m.Name == "" || m.About == "" || ids[m.ID] || urls[m.URL] {
				t.Errorf("entry %+v: id, name and about are required, id and url unique", m)
			}
			ids[m.ID], urls[m.URL] = true, true
			checkHubURL(t, m.URL)
			if m.Size <= 0 || m.Params <= 0 || m.Memory <= 0 {
				t.Fatalf("size %d, params %d, memory %d: all must be positive", m.Size, m.Params, m.Memory)
			}
			// Between 4-bit codes and f32, plus up to 8 MiB of metadata
			// (a 150k-token vocabulary takes a few).
			if m.Size < m.Params/2 || m.Size > 4*m.Params+8<<20 {
				t.Errorf("%d bytes for %d parameters (%.2f a parameter): no GGUF type is that size", m.Size, m.Params, float64(m.Size)/float64(m.Params))
			}
			if m.SHA256 != "" && !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(m.SHA256) {
				t.Errorf("sha256 %q: want 64 lowercase hex digits", m.SHA256)
			}
			if m.Shape == "" && m.SHA256 != "" { // the real file is here: its hash must be the one listed
				b, err := os.ReadFile(filepath.Join("..", "..", "shared", "models", strings.TrimSuffix(filepath.Base(m.URL), "-f32.gguf")+".gguf"))
				if err != nil {
					t.Fatal(err)
				}
				if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != m.SHA256 {
					t.Errorf("sha256 %s; the file's is %x", m.SHA256, sum)
				}
			}
			model := catalogueModel(t, m)
			var params int64
			for _, ts := range model.Tensors {
				params += int64(ts.Elements())
			}
			if d := math.Abs(float64(params-m.Params)) / float64(params); d > 0.02 {
				t.Errorf("params %d; the shape has %d", m.Params, params)
			}
			est, err := eval.EstimateMemory(model, "", "webgpu", runtime.DefaultContext)
			if err != nil {
				t.Fatal(err)
			}
			if d := math.Abs(float64(est.Total-m.Memory)) / float64(est.Total); d > 0.05 {
				t.Errorf("memory %d; the estimate is %d (%s weights %d, KV %d, scratch %d)",
					m.Memory, est.Total, est.Quant, est.Weights, est.KV, est.Scratch)
			}
			if est.Total < m.Size/4 {
				t.Errorf("memory %d is below a quarter of the %d-byte file", est.Total, m.Size)
			}
		})
	}
}

// checkHubURL wants https://huggingface.co/OWNER/REPO/resolve/REV/FILE.gguf,
// with a split file (NAME-00001-of-0000N.gguf) named by its first part.
func checkHubURL(t *testing.T, raw string) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("url %q: %v", raw, err)
	}
	if u.Scheme != "https" || u.Host != "huggingface.co" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		t.Errorf("url %q: want https://huggingface.co/… without query or fragment", raw)
	}
	if hubResolve.FindStringSubmatch(u.Path) == nil {
		t.Errorf("url %q: want the path /OWNER/REPO/resolve/REVISION/FILE.gguf", raw)
	}
	if m := regexp.MustCompile(`-(\d{5})-of-(\d{5})\.gguf$`).FindStringSubmatch(u.Path); m != nil && m[1] != "00001" {
		t.Errorf("url %q: a split model is named by its first part", raw)
	}
}

// catalogueModel describes an entry's model: its shape's tensors (their
// types do not matter to the estimate at quant ""), or the real file.
func catalogueModel(t *testing.T, m catalogueEntry) *models.Model {
	t.Helper()
	if m.Shape == "" {
		name := strings.TrimSuffix(filepath.Base(m.URL), "-f32.gguf") + ".gguf"
		mod, err := models.Open(filepath.Join("..", "..", "shared", "models", name), models.Options{})
		if err != nil {
			t.Fatalf("no shape, and the real file: %v", err)
		}
		t.Cleanup(func() { mod.Close() })
		return mod
	}
	s, err := synth.Lookup(m.Shape)
	if err != nil {
		t.Fatal(err)
	}
	mod := &models.Model{Config: s.Config, Format: "gguf", Tensors: map[string]*models.Tensor{}}
	for _, ts := range models.LlamaTensors(s.Config) {
		mod.Tensors[ts.Name] = models.NewTensor(ts.Name, ts.Shape, fileType(m.Name, ts.Name, ts.Shape), nil)
	}
	return mod
}

// fileType is the type a catalogue file stores a tensor in, from the
// quant tag of its name, as llama.cpp writes them: vectors F32; Q8_0
// files Q8_0; Q4_K_M files Q6_K for the head and table and Q4_K for the
// rest, each falling back (Q6_K to Q8_0, Q4_K to Q5_0) where rows are not
// whole 256-value super-blocks. (Q4_K_M's Q6_K for half the attn_v and
// ffn_down is left out: a few percent of the bytes.)
func fileType(name, tensor string, shape []int) dtype.Type {
	cols := shape[len(shape)-1]
	switch {
	case len(shape) == 1:
		return dtype.F32
	case strings.Contains(name, "Q8_0"):
		return dtype.Q8_0
	case strings.Contains(name, "Q4_K_M"):
		hi := tensor == models.Output || tensor == models.TokenEmbedding
		switch {
		case hi && cols%256 == 0:
			return dtype.Q6_K
		case hi:
			return dtype.Q8_0
		case cols%256 == 0:
			return dtype.Q4_K
		}
		return dtype.Q5_0
	}
	return dtype.F16
}
