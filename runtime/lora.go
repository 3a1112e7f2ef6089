package runtime

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/lora"
	"github.com/tessera-llm/tessera/runtime/backend"
)

// ErrUnknownAdapter is returned (wrapped) for a request that names an
// adapter the engine has not loaded.
var ErrUnknownAdapter = errors.New("unknown LoRA adapter")

// ErrAdapterExists is returned (wrapped) for loading an adapter under a
// name already loaded.
var ErrAdapterExists = errors.New("LoRA adapter already loaded")

// ErrTooManyCombinations is returned (wrapped) for a request that names a
// new combination of several adapters while MaxCombinations others run:
// each is a composite adapter of its own (the sum of their ranks over
// every target), so an unbounded number would let requests exhaust the
// device's memory. It passes once some finish.
var ErrTooManyCombinations = errors.New("too many combinations of LoRA adapters running")

// MaxCombinations bounds the composite adapters (combinations of several
// adapters, at their scales) alive at once.
const MaxCombinations = 8

var errCombinations = fmt.Errorf("%w: %d, the most at once", ErrTooManyCombinations, MaxCombinations)

// AdapterSpec is an adapter to load with the engine (Options.Adapters):
// a GGUF LoRA file or a PEFT folder, the name requests call it by
// (default: lora.Name of the path) and its scale (0 means 1).
type AdapterSpec struct {
	Name  string
	Path  string
	Scale float32
}

// AdapterRef is a request's adapter: a loaded adapter's name and a
// multiplier of its scale (0 means 1).
type AdapterRef struct {
	Name  string
	Scale float32
}

// AdapterInfo describes a loaded adapter.
type AdapterInfo struct {
	Name    string
	Path    string
	Format  string
	Rank    int
	Targets int
	Scale   float32
	// Running and Waiting count the sequences that use it now.
	Running, Waiting int
	// Unloading: UnloadAdapter was called while sequences still used it.
	Unloading bool
}

// adapterTable is the LoRA part of an engine, under its own lock
// (loraMu): the loaded adapters by name, the composites of several in use
// by their key, the backend's slots (nil: free), and whether a slot was
// freed or filled since the backend last saw them.
type adapterTable struct {
	loraMu     sync.Mutex
	adapters   map[string]*adapterEntry
	composites map[string]*adapterEntry
	slots      []*adapterEntry
	adapterIDs uint64 // ids handed out so far (an id is never reused)
	loraDirty  bool
}

// adapterEntry is a loaded adapter: its slot in the backend's LoRA sets
// (Batch.Adapter), and the sequences holding it.
type adapterEntry struct {
	name, path string
	ad         *lora.Adapter
	scale      float32
	slot       int
	id         uint64 // never reused: the prefix cache's namespace
	refs       int
	unloading  bool
	// parts are the adapters a composite (several on one request) sums,
	// each held while the composite lives; nil for a loaded adapter.
	parts []*adapterEntry
}

// namespace is the prefix cache namespace of a sequence with this adapter
// at request scale s: the K/V of a prefix depend on both.
func (a *adapterEntry) namespace(s float32) uint64 {
	return 1<<63 | (a.id&0x7fffffff)<<32 | uint64(math.Float32bits(s))
}

// LoadAdapter reads the adapter at path (a GGUF LoRA file or a PEFT folder)
// and makes it available to requests as name, at the given scale (0: 1).
// It waits for the step in progress.
func (e *Engine) LoadAdapter(name, path string, scale float32) error {
	a, err := lora.Open(path, e.model.Config)
	if err != nil {
		return err
	}
	return e.AddAdapter(name, a, scale)
}

// AddAdapter makes an adapter already read (lora.Open, or one synth drew)
// available to requests as name.
func (e *Engine) AddAdapter(name string, a *lora.Adapter, scale float32) error {
	if name == "" {
		return errors.New("an adapter needs a name")
	}
	if e.net.g4 != nil || e.net.recurrent() { // Gemma 4's shared layers, Qwen3.5's linear ones: nothing to adapt
		return fmt.Errorf("adapters on %s are not supported", e.model.Config.Arch)
	}
	if err := a.Check(e.model.Config); err != nil {
		return err
	}
	if scale == 0 {
		scale = 1
	}
	e.stepMu.Lock()
	defer e.stepMu.Unlock()
	e.loraMu.Lock()
	defer e.loraMu.Unlock()
	if _, ok := e.adapters[name]; ok {
		return fmt.Errorf("%w: %q", ErrAdapterExists, name)
	}
	if e.adapters == nil {
		e.adapters = map[string]*adapterEntry{}
	}
	e.adapterIDs++
	ent := &adapterEntry{name: name, path: a.Path, ad: a, scale: scale, id: e.adapterIDs}
	e.addSlot(ent)
	e.adapters[name] = ent
	if err := e.syncAdapters(); err != nil {
		delete(e.adapters, name)
		e.slots[ent.slot] = nil
		e.syncAdapters()
		return fmt.Errorf("load adapter %s: %w", name, err)
	}
	return nil
}

// UnloadAdapter removes an adapter: at once when no sequence uses it, else
// after the last one finishes. New requests cannot name it from now on.
func (e *Engine) UnloadAdapter(name string) error {
	e.loraMu.Lock()
	ent, ok := e.adapters[name]
	if !ok {
		e.loraMu.Unlock()
		return fmt.Errorf("%w %q", ErrUnknownAdapter, name)
	}
	delete(e.adapters, name)
	ent.unloading = true
	if ent.refs > 0 {
		e.loraMu.Unlock()
		return nil
	}
	e.slots[ent.slot] = nil
	e.loraMu.Unlock()
	e.stepMu.Lock()
	defer e.stepMu.Unlock()
	e.loraMu.Lock()
	defer e.loraMu.Unlock()
	return e.syncAdapters()
}

// Adapters lists the loaded adapters by name, with those being unloaded.
func (e *Engine) Adapters() []AdapterInfo {
	e.mu.Lock()
	counts := map[*adapterEntry][2]int{}
	for i, list := range [][]*sequence{e.running, e.waiting} {
		for _, s := range list {
			if s.adapter == nil {
				continue
			}
			parts := s.adapter.parts
			if parts == nil {
				parts = []*adapterEntry{s.adapter}
			}
			for _, p := range parts {
				c := counts[p]
				c[i]++
				counts[p] = c
			}
		}
	}
	e.mu.Unlock()
	e.loraMu.Lock()
	defer e.loraMu.Unlock()
	var out []AdapterInfo
	for _, ent := range e.slots {
		if ent == nil || ent.parts != nil {
			continue
		}
		c := counts[ent]
		out = append(out, AdapterInfo{Name: ent.name, Path: ent.path, Format: ent.ad.Format, Rank: ent.ad.MaxRank(),
			Targets: len(ent.ad.Targets), Scale: ent.scale, Running: c[0], Waiting: c[1], Unloading: ent.unloading})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// acquireAdapter resolves a request's adapters and holds them for n
// sequences: the sequences run with the returned entry at the returned
// row scale. One adapter is its own entry at the request's multiplier of
// its scale. Several are a composite entry (lora.Compose: one low-rank
// product of their summed ranks, the scales inside), made on the first
// request for that combination and shared by all that name it while any
// runs, so each row still gathers a single slot.
func (e *Engine) acquireAdapter(refs []AdapterRef, n int) (*adapterEntry, float32, error) {
	if len(refs) == 0 {
		return nil, 0, nil
	}
	scales := make([]float32, len(refs))
	for i, r := range refs {
		s := r.Scale
		if s == 0 {
			s = 1
		}
		if math.IsNaN(float64(s)) || math.IsInf(float64(s), 0) {
			return nil, 0, fmt.Errorf("%w: adapter %q scale %v", ErrBadRequest, r.Name, s)
		}
		scales[i] = s
	}
	e.loraMu.Lock()
	parts, key, err := e.resolveAdapters(refs, scales)
	if err != nil {
		e.loraMu.Unlock()
		return nil, 0, err
	}
	if len(parts) == 1 {
		defer e.loraMu.Unlock()
		parts[0].refs += n
		return parts[0], scales[0] * parts[0].scale, nil
	}
	if c := e.composites[key]; c != nil {
		defer e.loraMu.Unlock()
		c.refs += n
		return c, 1, nil
	}
	if len(e.composites) >= MaxCombinations {
		e.loraMu.Unlock()
		return nil, 0, errCombinations
	}
	e.loraMu.Unlock()

	// A new combination: compose it outside the locks, then give it a slot
	// between steps.
	ads := make([]*lora.Adapter, len(parts))
	for i, p := range parts {
		ads[i], scales[i] = p.ad, scales[i]*p.scale
	}
	ad, err := lora.Compose(ads, scales)
	if err != nil {
		return nil, 0, err
	}
	e.stepMu.Lock()
	defer e.stepMu.Unlock()
	e.loraMu.Lock()
	defer e.loraMu.Unlock()
	if parts, key, err = e.resolveAdapters(refs, scales); err != nil { // unloaded meanwhile
		return nil, 0, err
	}
	if c := e.composites[key]; c != nil { // composed meanwhile
		c.refs += n
		return c, 1, nil
	}
	if len(e.composites) >= MaxCombinations { // others composed meanwhile
		return nil, 0, errCombinations
	}
	e.adapterIDs++
	c := &adapterEntry{name: key, path: ad.Path, ad: ad, scale: 1, id: e.adapterIDs, refs: n, parts: parts}
	e.addSlot(c)
	if err := e.syncAdapters(); err != nil {
		e.slots[c.slot] = nil
		e.syncAdapters()
		return nil, 0, fmt.Errorf("compose adapters %s: %w", key, err)
	}
	for _, p := range parts {
		p.refs++
	}
	if e.composites == nil {
		e.composites = map[string]*adapterEntry{}
	}
	e.composites[key] = c
	return c, 1, nil
}

// resolveAdapters looks up the loaded adapters refs name, and the key of
// their combination (the entries, never reused, and the scales). Called
// with loraMu held.
func (t *adapterTable) resolveAdapters(refs []AdapterRef, scales []float32) ([]*adapterEntry, string, error) {
	parts := make([]*adapterEntry, len(refs))
	var key strings.Builder
	for i, r := range refs {
		ent, ok := t.adapters[r.Name]
		if !ok {
			return nil, "", fmt.Errorf("%w %q", ErrUnknownAdapter, r.Name)
		}
		parts[i] = ent
		if i > 0 {
			key.WriteByte('+')
		}
		fmt.Fprintf(&key, "%s#%d*%g", ent.name, ent.id, scales[i])
	}
	return parts, key.String(), nil
}

// addSlot gives ent the first free slot. Called with loraMu held.
func (t *adapterTable) addSlot(ent *adapterEntry) {
	if i := slices.Index(t.slots, nil); i >= 0 {
		ent.slot = i
		t.slots[i] = ent
		return
	}
	ent.slot = len(t.slots)
	t.slots = append(t.slots, ent)
}

// releaseAdapter drops a finished sequence's hold on its adapter; the last
// hold on an adapter being unloaded, or on a composite, frees its slot
// (and a composite's holds on its parts), and the next step drops its
// weights.
func (t *adapterTable) releaseAdapter(ent *adapterEntry) {
	t.loraMu.Lock()
	defer t.loraMu.Unlock()
	t.release(ent)
}

func (t *adapterTable) release(ent *adapterEntry) {
	ent.refs--
	if ent.refs > 0 || !(ent.unloading || ent.parts != nil) {
		return
	}
	t.slots[ent.slot] = nil
	t.loraDirty = true
	if ent.parts != nil {
		delete(t.composites, ent.name)
		for _, p := range ent.parts {
			t.release(p)
		}
	}
}

// loraGroups are a layer's projections grouped by the input they share
// (indices into lora.Kinds), in the order of llama.lora: the backend
// computes x·Aᵀ for a whole group in one product.
var loraGroups = [][]int{{0, 1, 2}, {3}, {4, 5}, {6}}

// syncAdapters gives the backend the adapters of every slot, group of
// weights by group. Called with stepMu and loraMu held.
func (e *Engine) syncAdapters() error {
	e.loraDirty = false
	slots := make([]*lora.Adapter, len(e.slots))
	for j, ent := range e.slots {
		if ent != nil {
			slots[j] = ent.ad
		}
	}
	return e.net.setLoRA(slots)
}

// setLoRA gives the backend the adapters of each slot (slots[j], nil for
// an empty slot: what Batch.Adapter's j names), group of weights by group.
func (n *llama) setLoRA(slots []*lora.Adapter) error {
	c := n.cfg
	shapes := lora.TargetShapes(c)
	type target struct {
		dst   *backend.LoRA
		names []string // the weights, sharing one input
	}
	targets := []target{{&n.headLoRA, []string{models.Output}}, {&n.embedLoRA, []string{models.TokenEmbedding}}}
	for l := range n.layers {
		for g, kinds := range loraGroups {
			t := target{dst: &n.layers[l].lora[g]}
			for _, k := range kinds {
				t.names = append(t.names, models.LayerTensor(l, lora.Kinds[k].GGUF))
			}
			targets = append(targets, t)
		}
	}
	for _, t := range targets {
		ws := make([][]backend.LoRASlot, len(slots))
		any := false
		for j, ad := range slots {
			ws[j] = make([]backend.LoRASlot, len(t.names))
			if ad == nil {
				continue
			}
			for k, name := range t.names {
				if a, ok := ad.Targets[name]; ok {
					ws[j][k] = backend.LoRASlot{Rank: a.Rank, A: a.A, B: a.B, Scale: a.Scale}
					any = true
				}
			}
		}
		if !any {
			if *t.dst != nil {
				if err := n.be.SetLoRA(*t.dst, nil); err != nil {
					return err
				}
			}
			*t.dst = nil
			continue
		}
		if *t.dst == nil {
			outs := make([]int, len(t.names))
			for k, name := range t.names {
				outs[k] = shapes[name][0]
			}
			l, err := n.be.NewLoRA(shapes[t.names[0]][1], outs...)
			if err != nil {
				return err
			}
			*t.dst = l
		}
		if err := n.be.SetLoRA(*t.dst, ws); err != nil {
			return err
		}
	}
	return nil
}

// mergeAdapter merges opts.Adapters, each at its scale, into m's weights
// before they are uploaded (Options.LoRAMerge).
func mergeAdapter(m *models.Model, opts Options) error {
	if len(opts.Adapters) == 0 {
		return errors.New("merging LoRA adapters at load needs an adapter")
	}
	for _, sp := range opts.Adapters {
		a, err := lora.Open(sp.Path, m.Config)
		if err != nil {
			return err
		}
		s := sp.Scale
		if s == 0 {
			s = 1
		}
		if err := lora.Merge(m, a, s); err != nil {
			return err
		}
	}
	return nil
}

// loadAdapters loads opts.Adapters onto a new engine.
func (e *Engine) loadAdapters(opts Options) error {
	for _, sp := range opts.Adapters {
		name := sp.Name
		if name == "" {
			name = lora.Name(sp.Path)
		}
		if err := e.LoadAdapter(name, sp.Path, sp.Scale); err != nil {
			return err
		}
	}
	return nil
}
