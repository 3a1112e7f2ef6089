package safetensors

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tessera-llm/tessera/models/internal/fileat"
)

// File names of a Hugging Face checkpoint: one file, or shards listed by an
// index.
const (
	SingleFile = "model.safetensors"
	IndexFile  = "model.safetensors.index.json"
)

// maxIndexSize bounds model.safetensors.index.json. The index of a 405B
// model is well under a megabyte.
const maxIndexSize = 64 << 20

// Index is model.safetensors.index.json: which shard holds each tensor.
type Index struct {
	Metadata  map[string]any    `json:"metadata"`
	WeightMap map[string]string `json:"weight_map"`
}

// ParseIndex reads an index and checks that every shard it names is a
// plain file name inside the folder (no "..", no absolute path).
func ParseIndex(data []byte) (*Index, error) {
	var idx Index
	if err := json.Unmarshal(data, &idx); err != nil {
		return nil, fmt.Errorf("safetensors: %s: %w", IndexFile, err)
	}
	if len(idx.WeightMap) == 0 {
		return nil, fmt.Errorf("safetensors: %s: empty or missing weight_map", IndexFile)
	}
	for _, name := range slices.Sorted(maps.Keys(idx.WeightMap)) {
		shard := idx.WeightMap[name]
		if shard == "" || !filepath.IsLocal(shard) || strings.ContainsAny(shard, `/\`) {
			return nil, fmt.Errorf("safetensors: %s: tensor %q is in shard %q, which is not a file name in the folder", IndexFile, name, shard)
		}
	}
	return &idx, nil
}

// Shards returns the distinct shard file names, sorted.
func (idx *Index) Shards() []string {
	return slices.Compact(slices.Sorted(maps.Values(idx.WeightMap)))
}

// WriteIndex writes an index for weightMap (tensor name → shard file name),
// with metadata.total_size set to totalSize, as Hugging Face writes it.
func WriteIndex(w io.Writer, weightMap map[string]string, totalSize int64) error {
	b, err := json.MarshalIndent(Index{Metadata: map[string]any{"total_size": totalSize}, WeightMap: weightMap}, "", "  ")
	if err != nil {
		return fmt.Errorf("safetensors: write index: %w", err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("safetensors: write index: %w", err)
	}
	return nil
}

// Set is the tensors of a checkpoint, held in one file or in shards.
type Set struct {
	Files   []*File            // open files, in the order of Names
	Names   []string           // the files' names in the folder
	tensors map[string]*Tensor // by tensor name
}

// OpenDir opens the safetensors weights of a Hugging Face folder: the shards
// that model.safetensors.index.json lists, or else model.safetensors. With
// an index, every tensor it lists must be in the shard it names; tensors a
// shard holds beyond the index are ignored, as the index is authoritative.
func OpenDir(dir string) (*Set, error) {
	data, err := fileat.ReadBounded(filepath.Join(dir, IndexFile), maxIndexSize)
	if errors.Is(err, fs.ErrNotExist) {
		f, err := Open(filepath.Join(dir, SingleFile))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("safetensors: %s has neither %s nor %s: %w", dir, IndexFile, SingleFile, fs.ErrNotExist)
		}
		if err != nil {
			return nil, err
		}
		s := &Set{Files: []*File{f}, Names: []string{SingleFile}, tensors: make(map[string]*Tensor, len(f.Tensors))}
		for _, t := range f.Tensors {
			s.tensors[t.Name] = t
		}
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	idx, err := ParseIndex(data)
	if err != nil {
		return nil, err
	}
	s := &Set{tensors: make(map[string]*Tensor, len(idx.WeightMap))}
	byShard := map[string]*File{}
	for _, name := range idx.Shards() {
		f, err := Open(filepath.Join(dir, name))
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("safetensors: shard of %s: %w", IndexFile, err)
		}
		s.Files, s.Names = append(s.Files, f), append(s.Names, name)
		byShard[name] = f
	}
	for _, name := range slices.Sorted(maps.Keys(idx.WeightMap)) {
		shard := idx.WeightMap[name]
		t, ok := byShard[shard].Tensor(name)
		if !ok {
			s.Close()
			return nil, fmt.Errorf("safetensors: %s puts tensor %q in %s, which does not hold it", IndexFile, name, shard)
		}
		s.tensors[name] = t
	}
	return s, nil
}

// Tensor returns the tensor called name.
func (s *Set) Tensor(name string) (*Tensor, bool) {
	t, ok := s.tensors[name]
	return t, ok
}

// TensorNames returns the names of all tensors, sorted.
func (s *Set) TensorNames() []string {
	return slices.Sorted(maps.Keys(s.tensors))
}

// Close closes every file of the set.
func (s *Set) Close() error {
	var errs []error
	for _, f := range s.Files {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}
