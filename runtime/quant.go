package runtime

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/runtime/backend"
)

// WeightStorage chooses how the engine keeps its weights on the backend.
// Vectors (norm weights, biases) always stay f32. A matrix the file keeps
// quantized stays in the narrowest storage that holds it (Native) unless
// Max narrows it further; a matrix the file keeps in floats takes Floats.
// The zero value keeps every matrix as the file does.
type WeightStorage struct {
	// Max is the widest storage any matrix keeps (the ceiling that
	// --quant sets): a matrix stored wider is narrowed to it. F32, the
	// zero value, narrows nothing. Nothing is ever widened beyond the
	// file's own precision: a Q4_K matrix stays int4 under any Max.
	Max backend.Storage
	// Floats is the storage of the matrices the file keeps as floats
	// (F32, F16, BF16, F64), within Max: F32 keeps each as the file does
	// (F16 as f16, the others as f32); F16, Int8 and Int4 convert them.
	Floats backend.Storage
	// Int8 names the float matrices kept in int8 where Floats is Int4: the
	// mixed 4-bit policy (MixedInt8), in the spirit of llama.cpp's
	// Q4_K_M, which spends more bits where 4 cost the most.
	Int8 map[string]bool
	// HeadFloat keeps the output head in f32 whatever the rest says (and
	// so the embedding table too when the head is tied to it): the head
	// turns the last hidden state into every logit, the one place where a
	// quantization error reaches the sampler undiluted.
	HeadFloat bool
	// Legacy are the block types that a matrix Native would keep in
	// Blocks is kept in its legacy storage instead (Int4 for Q4_0's and
	// Q4_K's codes, Int8 for the rest) where that costs at most twice the
	// file's bits: the types a backend multiplies in Blocks only in its
	// plain-Go twin (the CPU backend in wasm, and on arm64 all but the K
	// quants: cpu.BlockKernels), whose int4 and int8 kernels are several
	// times faster. Q2_K, Q3_K, IQ4_NL, IQ4_XS and MXFP4 stay in Blocks
	// there: in Int8 they would take 2.2 to 3.8 times their file's memory.
	Legacy map[dtype.Type]bool
}

// Native is the storage that keeps the matrix t as its file stores it: a
// block type at its own bits (backend.Blocks: every one of
// dtype.BlockTypes but Q4_1, whose blocks are exactly Int4's groups and
// take Int4's kernels), F16 as F16, F32, BF16 and F64 as F32 (BF16's
// exponent range does not fit f16). The few types without a block layout
// (Q8_1, Q8_K) and rows that are not whole blocks of their type are
// requantized to Int8 (dtype.QuantizeInt8: within half an 8-bit step of a
// 16-value group's range).
func Native(t *models.Tensor) backend.Storage {
	if len(t.Shape) != 2 {
		return backend.F32
	}
	switch {
	case t.Type == dtype.Q4_1 && wholeBlocks(t):
		return backend.Int4
	case blocksKeep(t):
		return backend.Blocks
	case t.Type == dtype.F16:
		return backend.F16
	case floatType(t.Type):
		return backend.F32
	}
	return backend.Int8
}

// blocksKeep reports whether t can be kept at its file's bits (Blocks).
func blocksKeep(t *models.Tensor) bool {
	_, ok := dtype.Layout(t.Type)
	return ok && len(t.Shape) == 2 && wholeBlocks(t)
}

func wholeBlocks(t *models.Tensor) bool {
	return t.Type.BlockSize() > 0 && t.Shape[len(t.Shape)-1]%t.Type.BlockSize() == 0
}

// legacy is the storage a matrix kept in Blocks takes where Blocks cannot
// hold it together with the others of a fused weight: Int4 for the 4-bit
// types whose codes Int4 keeps (Q4_0, Q4_K), Int8 for the rest.
func legacy(t *models.Tensor) backend.Storage {
	if dtype.Int4Exact(t.Type) && wholeBlocks(t) {
		return backend.Int4
	}
	return backend.Int8
}

// storageBits is the bits a value of storage s (for Blocks: of t's type).
func storageBits(t *models.Tensor, s backend.Storage) float64 {
	switch s {
	case backend.Int4:
		return 5
	case backend.Int8:
		return 10
	case backend.F16:
		return 16
	case backend.Blocks:
		return dtype.BlockBits(t.Type, t.Shape[1])
	}
	return 32
}

func floatType(t dtype.Type) bool {
	return t == dtype.F32 || t == dtype.F16 || t == dtype.BF16 || t == dtype.F64
}

// isHead reports whether t is the output head or the embedding table.
func isHead(t *models.Tensor) bool {
	return t.Name == models.Output || t.Name == models.TokenEmbedding
}

// For returns the storage of tensor t of a model with config c.
func (s WeightStorage) For(t *models.Tensor, c models.Config) backend.Storage {
	switch {
	case len(t.Shape) != 2:
		return backend.F32
	case s.HeadFloat && (t.Name == models.Output || t.Name == models.TokenEmbedding && c.TiedEmbeddings):
		return backend.F32
	}
	st := Native(t)
	if st == backend.Blocks && s.Legacy[t.Type] && storageBits(t, legacy(t)) <= 2*storageBits(t, st) {
		st = legacy(t)
	}
	if floatType(t.Type) && s.Floats != backend.F32 {
		st = s.Floats
		if st == backend.Int4 && s.Int8[t.Name] {
			st = backend.Int8
		}
	}
	if storageBits(t, st) > storageBits(t, s.Max) {
		st = s.Max
	}
	return st
}

// Fused returns the storage of a weight fused from the matrices ts (q, k
// and v; gate and up): Blocks where each of them takes Blocks alone (each
// then keeps its own type: a Q4_K_M file mixes Q4_K and Q6_K there), but
// for a GLU's gate and up of two types, whose rows alternate in one
// layout; otherwise the widest any of them takes alone, Blocks counting as
// its legacy storage, so that none loses what its file keeps.
func (s WeightStorage) Fused(ts []*models.Tensor, c models.Config) backend.Storage {
	sts := make([]backend.Storage, len(ts))
	blocks := true
	for i, t := range ts {
		sts[i] = s.For(t, c)
		blocks = blocks && sts[i] == backend.Blocks && (t.Type == ts[0].Type || !isGLU(ts))
	}
	if blocks {
		return backend.Blocks
	}
	var st backend.Storage
	for i, o := range sts {
		if o == backend.Blocks {
			o = legacy(ts[i])
		}
		if i == 0 || o.Wider(st) {
			st = o
		}
	}
	return st
}

// isGLU reports whether ts are a layer's gate and up.
func isGLU(ts []*models.Tensor) bool {
	return len(ts) == 2 && strings.Contains(ts[0].Name, "."+models.FFNGate+".") && strings.Contains(ts[1].Name, "."+models.FFNUp+".")
}

// smallModel is the size of weights under which "" keeps them f32 even on
// WebGPU: a model that small decodes at the speed of the dispatches, not of
// its bytes, so 4-bit storage would cost quality and gain nothing.
const smallModel = 32 << 20

// Mixed is the Options.Quant value of the mixed 4-bit policy (MixedInt8).
const Mixed = "mixed"

// weightStorage reads Options.Quant and HeadFloat for a backend and model:
// "" keeps every quantized matrix as the file has it and, on WebGPU, where
// weight bytes bound decoding, puts float matrices in the mixed 4-bit
// policy (for models of at least smallModel; smaller ones stay as they
// are, as they do on the CPU); "mixed" asks for that policy anywhere; a
// storage name is a ceiling for every matrix and the storage of the float
// ones ("int4": pure 4-bit).
func weightStorage(opts Options, be backend.Backend, m *models.Model) (WeightStorage, error) {
	return PlanStorage(m, opts.Quant, be.Name(), opts.HeadFloat)
}

// PlanStorage is the WeightStorage that loading m with Options.Quant quant
// and HeadFloat headFloat on device ("webgpu" or "cpu") chooses; for the
// mixed policy it measures m's matrices (MixedInt8).
func PlanStorage(m *models.Model, quant, device string, headFloat bool) (WeightStorage, error) {
	ws := WeightStorage{HeadFloat: headFloat, Legacy: legacyTypes(device)}
	if mixedFor(m, quant, device) {
		ws.Floats = backend.Int4
		var err error
		if ws.Int8, err = MixedInt8(m, headFloat); err != nil {
			return ws, fmt.Errorf("mixed quantization: %w", err)
		}
		return ws, nil
	}
	if quant == "" {
		return ws, nil
	}
	s, err := backend.ParseStorage(quant)
	if err != nil {
		return ws, fmt.Errorf("--quant: %w (or %s)", err, Mixed)
	}
	ws.Max, ws.Floats = s, s
	return ws, nil
}

// mixedFor reports whether Options.Quant quant on device puts m's float
// matrices in the mixed policy: asked for, or the default on WebGPU for
// models of at least smallModel.
func mixedFor(m *models.Model, quant, device string) bool {
	return quant == Mixed || quant == "" && device == "webgpu" && f32Bytes(m) >= smallModel
}

// CheckQuant validates an Options.Quant value.
func CheckQuant(q string) error {
	if q == "" || q == Mixed {
		return nil
	}
	if _, err := backend.ParseStorage(q); err != nil {
		return fmt.Errorf("%w (or %s)", err, Mixed)
	}
	return nil
}

// f32Bytes is the size of m's weights in f32.
func f32Bytes(m *models.Model) int64 {
	var bytes int64
	for _, t := range m.Tensors {
		bytes += 4 * int64(t.Elements())
	}
	return bytes
}

// MixedShare is the part of the layer matrices' parameters that the mixed
// policy keeps in int8 besides the head and the embeddings. Measured on
// stories260K (testdata/tinystories.txt, CPU, GPTQ at load): f32 5.881;
// all layer matrices int4 (head and table int8) 6.081 (+3.4%); a share of
// 1/6 6.025, 1/4 5.992, 0.3 5.978, 0.4 5.956 (+1.3%), within the 1.5% of
// llama.cpp's Q4_K_M file at fewer weight bytes. 4 bits a weight cost a
// model that small (64 wide) more than a larger one; the share is the
// price of matching llama.cpp's quality there.
const MixedShare = 0.4

// MixedInt8 chooses the float matrices that the mixed 4-bit policy keeps
// in int8: the output head and the token embedding table (unless
// headFloat keeps them in f32 anyway), and then, by measured sensitivity,
// the layer matrices that 4 bits damage most, up to MixedShare of the
// layer matrices' parameters. The sensitivity is the relative squared
// error of a matrix quantized to int4 (dtype.QuantizeInt4), Σ(w−q)² /
// Σw²: a matrix of heavy-tailed rows loses more to 4 bits, and the
// measurement ranks what a name rule (llama.cpp's attn_v, ffn_down) only
// guesses (on stories260K it ranks every attn_v first). Matrices that the
// engine fuses into one weight (q, k and v; gate and up) share a storage,
// the widest of theirs (WeightStorage.Fused), so they are chosen together,
// by the largest error among them, and cost their sum. The int4 forms it
// computes are kept (models.Tensor.WithInt4) for the upload to reuse.
func MixedInt8(m *models.Model, headFloat bool) (map[string]bool, error) {
	out := map[string]bool{}
	type unit struct {
		names  []string
		params int
		err    float64
	}
	units := map[string]*unit{}
	var order []string
	total := 0
	for _, name := range m.TensorNames() {
		t := m.Tensors[name]
		if len(t.Shape) != 2 || !floatType(t.Type) {
			continue
		}
		if isHead(t) {
			if !headFloat || name == models.TokenEmbedding && !m.Config.TiedEmbeddings {
				out[name] = true
			}
			continue
		}
		x, err := t.Float32()
		if err != nil {
			return nil, err
		}
		q := dtype.QuantizeInt4(x, t.Shape[0], t.Shape[1])
		m.Tensors[name] = t.WithInt4(q)
		key := fusedUnit(name)
		u := units[key]
		if u == nil {
			u = &unit{}
			units[key] = u
			order = append(order, key)
		}
		u.names = append(u.names, name)
		u.params += len(x)
		u.err = max(u.err, relError(x, q))
		total += len(x)
	}
	sort.SliceStable(order, func(i, j int) bool { return units[order[i]].err > units[order[j]].err })
	budget := int(MixedShare * float64(total))
	for _, key := range order {
		if u := units[key]; u.params <= budget {
			for _, name := range u.names {
				out[name] = true
			}
			budget -= u.params
		}
	}
	return out, nil
}

// fusedUnit names the weight the engine fuses matrix name into: the
// layer's q, k and v share one, gate and up another; other matrices are
// their own.
func fusedUnit(name string) string {
	for _, g := range [][]string{{models.AttnQ, models.AttnK, models.AttnV}, {models.FFNGate, models.FFNUp}} {
		for _, kind := range g {
			if i := strings.Index(name, "."+kind+"."); i >= 0 {
				return name[:i] + "." + strings.Join(g, "+")
			}
		}
	}
	return name
}

// relError is Σ(x−q)²/Σx² over a matrix and its int4 form.
func relError(x []float32, q *dtype.Int4) float64 {
	var e, n float64
	row := make([]float32, q.Cols)
	for r := range q.Rows {
		q.DequantizeRow(r, row)
		for c, v := range x[r*q.Cols : (r+1)*q.Cols] {
			d := float64(v - row[c])
			e += float64(d * d)
			n += float64(float64(v) * float64(v))
		}
	}
	if n == 0 {
		return 0
	}
	return e / n
}

// StorageUse is how many matrices (and bytes) one storage keeps.
type StorageUse struct {
	Storage backend.Storage
	Tensors int
	Bytes   int64
}

// WeightMix is the storage of m's tensors under ws, narrowest first
// (vectors count as f32): what `tessera info` and `bench` print.
func WeightMix(m *models.Model, ws WeightStorage) []StorageUse {
	use := map[backend.Storage]*StorageUse{}
	for _, t := range m.Tensors {
		s, bytes := ws.stored(t, m.Config)
		u := use[s]
		if u == nil {
			u = &StorageUse{Storage: s}
			use[s] = u
		}
		u.Tensors++
		u.Bytes += bytes
	}
	var out []StorageUse
	for _, s := range append([]backend.Storage{backend.Blocks}, backend.Storages...) {
		if u := use[s]; u != nil {
			out = append(out, *u)
		}
	}
	return out
}

// stored is the storage of tensor t of a model with config c, and its
// bytes there: For's, but a stack of experts taken as the matrix that
// uploadExperts stores it as (expertMatrix), which For would call f32.
func (s WeightStorage) stored(t *models.Tensor, c models.Config) (backend.Storage, int64) {
	if strings.HasSuffix(t.Name, "_exps.weight") {
		t = expertMatrix(t)
	}
	st := s.For(t, c)
	return st, storedBytes(t, st)
}

// expertMatrix is a stack of experts [experts, rows, cols] as the matrix
// [experts·rows, cols] its storage is chosen for (uploadExperts).
func expertMatrix(t *models.Tensor) *models.Tensor {
	if len(t.Shape) != 3 {
		return t
	}
	return models.NewTensor(t.Name, []int{t.Shape[0] * t.Shape[1], t.Shape[2]}, t.Type, t.Raw)
}

// storageBytes is the size of tensor t kept in storage s.
func storageBytes(t *models.Tensor, s backend.Storage) int64 {
	switch s {
	case backend.Int4:
		return dtype.Int4Bytes(t.Shape[0], t.Shape[1])
	case backend.Int8:
		return dtype.Int8Bytes(t.Shape[0], t.Shape[1])
	case backend.Blocks:
		return dtype.BlocksBytes(t.Type, t.Shape[0], t.Shape[1])
	case backend.F16:
		return 2 * int64(t.Elements())
	}
	return 4 * int64(t.Elements())
}

// FormatMix writes a mix as "int4 112 tensors 60.1 MB, f32 41 tensors 0.1 MB".
func FormatMix(mix []StorageUse) string {
	parts := make([]string, len(mix))
	for i, u := range mix {
		parts[i] = fmt.Sprintf("%v %d tensors %s", u.Storage, u.Tensors, megabytes(u.Bytes))
	}
	return strings.Join(parts, ", ")
}

func megabytes(b int64) string {
	if b < 1e6 {
		return fmt.Sprintf("%.0f KB", math.Ceil(float64(b)/1e3))
	}
	return fmt.Sprintf("%.1f MB", float64(b)/1e6)
}

// GroupBits is one kind of tensor's bits a weight, in the file and as a
// WeightStorage keeps them: what `tessera info` and `bench` print.
type GroupBits struct {
	Group    string  `json:"group"` // attn_q, ffn_down, token_embd, output, ... ("vectors": norms and biases)
	Tensors  int     `json:"tensors"`
	Params   int64   `json:"params"`
	Types    string  `json:"types"`     // the file's: "Q4_K×16, Q6_K×14"
	FileBits float64 `json:"file_bits"` // bits a weight in the file
	Bits     float64 `json:"bits"`      // bits a weight as stored
}

// TensorBits groups m's tensors by kind (the name without its layer and
// suffix: every layer's attn_q together) and gives each kind's bits a
// weight in the file and under ws, the token table first, the output head
// and the vectors last.
func TensorBits(m *models.Model, ws WeightStorage) []GroupBits {
	type acc struct {
		GroupBits
		file, stored int64
		types        map[dtype.Type]int
	}
	groups := map[string]*acc{}
	for _, t := range m.Tensors {
		name := tensorGroup(t)
		g := groups[name]
		if g == nil {
			g = &acc{GroupBits: GroupBits{Group: name}, types: map[dtype.Type]int{}}
			groups[name] = g
		}
		n := int64(t.Elements())
		file, err := dtype.Bytes(t.Type, n)
		if err != nil {
			file = 4 * n
		}
		g.Tensors++
		g.Params += n
		g.file += file
		_, stored := ws.stored(t, m.Config)
		g.stored += stored
		g.types[t.Type]++
	}
	rank := func(name string) int {
		switch name + ".weight" {
		case models.TokenEmbedding:
			return 0
		case models.Output:
			return 2
		case "vectors":
			return 3
		}
		return 1
	}
	var out []GroupBits
	for _, g := range groups {
		var ts []string
		for t, n := range g.types {
			ts = append(ts, fmt.Sprintf("%v×%d", t, n))
		}
		sort.Strings(ts)
		g.Types = strings.Join(ts, ", ")
		g.FileBits = 8 * float64(g.file) / float64(g.Params)
		g.Bits = 8 * float64(g.stored) / float64(g.Params)
		out = append(out, g.GroupBits)
	}
	sort.Slice(out, func(i, j int) bool {
		if ri, rj := rank(out[i].Group), rank(out[j].Group); ri != rj {
			return ri < rj
		}
		return out[i].Group < out[j].Group
	})
	return out
}

// tensorGroup is the kind of tensor t: its name without "blk.N." and
// ".weight", or "vectors" for the norms and biases.
func tensorGroup(t *models.Tensor) string {
	if len(t.Shape) < 2 {
		return "vectors"
	}
	name := strings.TrimSuffix(t.Name, ".weight")
	if rest, ok := strings.CutPrefix(name, "blk."); ok {
		if i := strings.IndexByte(rest, '.'); i >= 0 {
			name = rest[i+1:]
		}
	}
	return name
}

// storedBytes is storageBytes for tensors of any rank: a stack of
// experts' matrices is one matrix of their rows.
func storedBytes(t *models.Tensor, s backend.Storage) int64 {
	if len(t.Shape) < 2 {
		return 4 * int64(t.Elements())
	}
	cols := t.Shape[len(t.Shape)-1]
	rows := t.Elements() / cols
	return storageBytes(&models.Tensor{Name: t.Name, Shape: []int{rows, cols}, Type: t.Type}, s)
}

// FormatBits writes one line a group: "attn_q  Q4_K×16  4.50 → 4.50 bits",
// each line prefixed with indent.
func FormatBits(bits []GroupBits, indent string) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, g := range bits {
		fmt.Fprintf(w, "%s%s\t%s\t%.1fM\t%.3f → %.3f bits\n", indent, g.Group, g.Types, float64(g.Params)/1e6, g.FileBits, g.Bits)
	}
	w.Flush()
	return b.String()
}

// TensorBits is TensorBits of the engine's model as it keeps it.
func (e *Engine) TensorBits() []GroupBits { return TensorBits(e.model, e.ws) }
