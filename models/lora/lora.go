// Package lora describes low-rank adapters (LoRA) of a model's weight
// matrices independently of their file: llama.cpp's GGUF LoRA files and
// PEFT folders (adapter_config.json and adapter_model.safetensors) both load
// into one Adapter, whose targets are named like the base model's tensors
// (models.LayerTensor). A target adds s·B·A to its weight W [out, in]: A is
// [rank, in] and B [out, rank], both row-major, and s is the adapter's scale
// for that target (alpha/rank, or alpha/sqrt(rank) with rsLoRA).
package lora

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
)

// ErrBadAdapter is wrapped by every error about an adapter's content.
var ErrBadAdapter = errors.New("bad LoRA adapter")

// Target is the adapter of one weight matrix.
type Target struct {
	Name    string    // the base tensor, e.g. "blk.3.attn_q.weight"
	Rank    int       // r
	In, Out int       // the base weight is [Out, In]
	A       []float32 // [Rank, In]
	B       []float32 // [Out, Rank]
	Scale   float32   // alpha/r (or alpha/sqrt(r)); multiplies B·A
}

// Adapter is a set of targets.
type Adapter struct {
	Path    string
	Format  string  // "gguf" or "peft"
	Alpha   float32 // 0: none given (the scale is 1)
	RSLoRA  bool    // scale alpha/sqrt(r) instead of alpha/r
	Targets map[string]*Target
	// Type is the tensor type WriteGGUF and WritePEFT write, each value
	// rounded to it: F32 (the zero value), F16 (what llama.cpp's
	// convert_lora_to_gguf writes by default) or BF16.
	Type dtype.Type
}

// Kinds are the projections an adapter may target, by their short names
// (as `--targets` spells them), and the GGUF kind of each.
var Kinds = []struct{ Short, GGUF, PEFT string }{
	{"q", models.AttnQ, "self_attn.q_proj"},
	{"k", models.AttnK, "self_attn.k_proj"},
	{"v", models.AttnV, "self_attn.v_proj"},
	{"o", models.AttnOutput, "self_attn.o_proj"},
	{"gate", models.FFNGate, "mlp.gate_proj"},
	{"up", models.FFNUp, "mlp.up_proj"},
	{"down", models.FFNDown, "mlp.down_proj"},
}

// HeadShort and EmbedShort are the short names of the output head and
// the token embeddings as targets.
const (
	HeadShort  = "head"
	EmbedShort = "embed"
)

// TargetShapes lists every tensor an adapter of a model of config c may
// target, with its base shape [out, in]: the seven projections of each
// layer, the output head (models.Output, also for tied embeddings, whose
// head matrix is the embedding table) and the token embeddings
// (models.TokenEmbedding) as the product a lookup is: [Dim, Vocab], a
// token's row being the table times its one-hot vector. So an embedding
// target's A is [rank, Vocab] and its B [Dim, rank], and a token t's row
// gains s·B·A[:, t], as llama.cpp adds it (llm_build_inp_embd) and as
// PEFT's lora_embedding_A/B hold it.
func TargetShapes(c models.Config) map[string][2]int {
	out := map[string][2]int{models.Output: {c.Vocab, c.Dim}, models.TokenEmbedding: {c.Dim, c.Vocab}}
	for _, t := range models.LlamaTensors(c) {
		if len(t.Shape) != 2 || t.Name == models.TokenEmbedding || t.Name == models.Output {
			continue
		}
		out[t.Name] = [2]int{t.Shape[0], t.Shape[1]}
	}
	return out
}

// scaleFor is the scale of a target of rank r.
func scaleFor(alpha float32, rs bool, r int) float32 {
	if alpha == 0 {
		return 1
	}
	if rs {
		return alpha / float32(math.Sqrt(float64(r)))
	}
	return alpha / float32(r)
}

// Names returns the target names in sorted order.
func (a *Adapter) Names() []string {
	names := make([]string, 0, len(a.Targets))
	for n := range a.Targets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// MaxRank is the largest rank of the adapter's targets.
func (a *Adapter) MaxRank() int {
	r := 0
	for _, t := range a.Targets {
		r = max(r, t.Rank)
	}
	return r
}

// Check refuses an adapter that does not fit a model of config c: a target
// the forward pass has no matrix for, or one whose base shape differs,
// naming the tensor.
func (a *Adapter) Check(c models.Config) error {
	if len(a.Targets) == 0 {
		return fmt.Errorf("%w %s: no lora tensors", ErrBadAdapter, a.Path)
	}
	shapes := TargetShapes(c)
	for _, name := range a.Names() {
		t := a.Targets[name]
		s, ok := shapes[name]
		if !ok {
			return fmt.Errorf("%w %s: tensor %s is not a projection of this %s model", ErrBadAdapter, a.Path, name, c.Arch)
		}
		if t.Out != s[0] || t.In != s[1] {
			return fmt.Errorf("%w %s: tensor %s adapts a %d×%d matrix but the base model's is %d×%d",
				ErrBadAdapter, a.Path, name, t.Out, t.In, s[0], s[1])
		}
		if err := t.valid(); err != nil {
			return fmt.Errorf("%w %s: %w", ErrBadAdapter, a.Path, err)
		}
	}
	return nil
}

func (t *Target) valid() error {
	switch {
	case t.Rank <= 0 || t.In <= 0 || t.Out <= 0:
		return fmt.Errorf("tensor %s: rank %d of a %d×%d matrix", t.Name, t.Rank, t.Out, t.In)
	case len(t.A) != t.Rank*t.In || len(t.B) != t.Out*t.Rank:
		return fmt.Errorf("tensor %s: A of %d values and B of %d for rank %d of %d×%d", t.Name, len(t.A), len(t.B), t.Rank, t.Out, t.In)
	case math.IsNaN(float64(t.Scale)) || math.IsInf(float64(t.Scale), 0):
		return fmt.Errorf("tensor %s: scale %g (alpha over rank) is not finite", t.Name, t.Scale)
	}
	for _, v := range [][]float32{t.A, t.B} {
		for _, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return fmt.Errorf("tensor %s: a value is not finite", t.Name)
			}
		}
	}
	return nil
}

// Delta adds scale·t.Scale·B·A to w, a row-major [Out, In] matrix: the
// target merged into its weight.
func (t *Target) Delta(w []float32, scale float32) {
	s := scale * t.Scale
	for o := range t.Out {
		row := w[o*t.In : (o+1)*t.In]
		for r := range t.Rank {
			b := s * t.B[o*t.Rank+r]
			if b == 0 {
				continue
			}
			a := t.A[r*t.In : (r+1)*t.In]
			for i, x := range a {
				row[i] += float32(b * x)
			}
		}
	}
}

// DeltaT is Delta for a weight stored transposed, w [In, Out] row-major:
// the token embeddings, whose table has a row per token.
func (t *Target) DeltaT(w []float32, scale float32) {
	s := scale * t.Scale
	for i := range t.In {
		row := w[i*t.Out : (i+1)*t.Out]
		for r := range t.Rank {
			a := s * t.A[r*t.In+i]
			if a == 0 {
				continue
			}
			for o := range row {
				row[o] += float32(a * t.B[o*t.Rank+r])
			}
		}
	}
}

// Merge replaces the tensors of m that a targets by f32 tensors holding
// W + scale·s·B·A (for the token embeddings, the table's rows gaining
// their columns of it), computed when they are read. The adapter must
// have passed Check. An output-head or embedding target cannot be merged
// into a model whose head is its embedding table: merged, it would change
// both.
func Merge(m *models.Model, a *Adapter, scale float32) error {
	if err := a.Check(m.Config); err != nil {
		return err
	}
	for _, name := range []string{models.Output, models.TokenEmbedding} {
		if _, ok := a.Targets[name]; ok && m.Config.TiedEmbeddings {
			return fmt.Errorf("%w %s: cannot merge an adapter of %s into a model whose head is its embedding table; apply it unmerged", ErrBadAdapter, a.Path, name)
		}
	}
	for _, name := range a.Names() {
		t, base := a.Targets[name], m.Tensors[name]
		m.Tensors[name] = models.NewTensor(name, base.Shape, dtype.F32, func() ([]byte, error) {
			w, err := base.Float32()
			if err != nil {
				return nil, err
			}
			if name == models.TokenEmbedding {
				t.DeltaT(w, scale)
			} else {
				t.Delta(w, scale)
			}
			return dtype.Quantize(dtype.F32, w)
		})
	}
	return nil
}

// ParseSpec splits a command-line adapter "[NAME=]FILE[:SCALE]" into the
// name requests call it by (Name(FILE) when not given, as vLLM's
// --lora-modules NAME=PATH names one), its path and its scale (1 when not
// given). A colon followed by something that is not a number belongs to
// the path; so does an "=" whose left side is not a name (empty, or
// holding a path separator, a colon or a space).
func ParseSpec(spec string) (name, path string, scale float32, err error) {
	if n, rest, ok := strings.Cut(spec, "="); ok && n != "" && !strings.ContainsAny(n, "/\\: \t") {
		name, spec = n, rest
	}
	path, scale = spec, 1
	if i := strings.LastIndex(spec, ":"); i > 0 && isNumber(spec[i+1:]) {
		s, perr := strconv.ParseFloat(spec[i+1:], 32)
		if perr != nil || math.IsNaN(s) || math.IsInf(s, 0) {
			return "", "", 0, fmt.Errorf("adapter %q: scale %q is not a number", spec, spec[i+1:])
		}
		path, scale = spec[:i], float32(s)
	}
	if path == "" {
		return "", "", 0, errors.New("empty adapter path")
	}
	if name == "" {
		name = Name(path)
	}
	return name, path, scale, nil
}

func isNumber(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !strings.ContainsRune("0123456789.-+eE", c) {
			return false
		}
	}
	return true
}

// Name is the adapter's default name: its file or folder name without the
// extension.
func Name(path string) string {
	path = strings.TrimRight(path, "/")
	if i := strings.LastIndex(path, "/"); i >= 0 {
		path = path[i+1:]
	}
	return strings.TrimSuffix(path, ".gguf")
}

// Compose is the one adapter that applies several at once: for each
// weight, Σ_j s_j·B_j·A_j with s_j = scales[j] times part j's own scale
// of that weight. The sum is itself a low-rank product, of rank Σ r_j:
// A stacks the parts' A rows and B their B columns, each B column scaled
// by its s_j, and the composite's scales are 1. So several adapters on one
// sequence run through the same per-row kernels as one. The parts must
// have passed Check for one base.
func Compose(parts []*Adapter, scales []float32) (*Adapter, error) {
	if len(parts) != len(scales) || len(parts) == 0 {
		return nil, fmt.Errorf("lora: compose %d adapters with %d scales", len(parts), len(scales))
	}
	out := &Adapter{Format: "composite", Targets: map[string]*Target{}}
	paths := make([]string, len(parts))
	for j, p := range parts {
		paths[j] = p.Path
		for _, name := range p.Names() {
			t := p.Targets[name]
			c := out.Targets[name]
			if c == nil {
				c = &Target{Name: name, In: t.In, Out: t.Out, Scale: 1}
				out.Targets[name] = c
			}
			if c.In != t.In || c.Out != t.Out {
				return nil, fmt.Errorf("%w: tensor %s adapts %d×%d in %s and %d×%d in %s", ErrBadAdapter, name, t.Out, t.In, p.Path, c.Out, c.In, paths[0])
			}
			s := scales[j] * t.Scale
			b := make([]float32, c.Out*(c.Rank+t.Rank))
			for o := range c.Out {
				row := b[o*(c.Rank+t.Rank):]
				copy(row, c.B[o*c.Rank:(o+1)*c.Rank])
				for r := range t.Rank {
					row[c.Rank+r] = s * t.B[o*t.Rank+r]
				}
			}
			c.A = append(c.A, t.A...)
			c.B = b
			c.Rank += t.Rank
		}
	}
	out.Path = strings.Join(paths, "+")
	return out, nil
}
