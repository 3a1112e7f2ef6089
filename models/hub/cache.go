package hub

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// A Cache is a directory of pulled models: the files under hf.co/OWNER/REPO/
// (or url/HOST/ for URLs), as the Hub names them, and index.json, which
// records what each reference resolved to. The index is what makes a
// reference usable offline: hf.co/OWNER/REPO:Q4_K_M names no file by
// itself.
type Cache struct {
	Dir string
}

// An Entry is one pulled model.
type Entry struct {
	// Ref is the reference's canonical form (Ref.String).
	Ref string `json:"ref"`
	// Repo is OWNER/REPO, empty for a URL.
	Repo string `json:"repo,omitempty"`
	// Files are the model's files, the one to open first, then its
	// other shards.
	Files []File `json:"files"`
	// Size is the files' total length in bytes.
	Size int64 `json:"size"`
	// Time is when the model was pulled.
	Time time.Time `json:"time"`
}

// A File is one downloaded file.
type File struct {
	Name string `json:"name"` // its path in the repository (or the URL's path)
	Path string `json:"path"` // its path in the cache, slash-separated
	URL  string `json:"url"`
	Size int64  `json:"size"`
	// SHA256 is the content's checksum, computed while downloading;
	// Verified says the Hub reported the same one.
	SHA256   string `json:"sha256"`
	Verified bool   `json:"verified"`
}

// index is the JSON file's layout.
type index struct {
	Version int     `json:"version"`
	Models  []Entry `json:"models"`
}

const indexName = "index.json"

// Path is the file to open: the model's first file (the first shard of a
// split GGUF, from which a loader finds the others).
func (c Cache) Path(e Entry) string {
	if len(e.Files) == 0 {
		return ""
	}
	return filepath.Join(c.Dir, filepath.FromSlash(e.Files[0].Path))
}

// Entries lists the pulled models by reference.
func (c Cache) Entries() ([]Entry, error) {
	idx, err := c.read()
	return idx.Models, err
}

// Lookup finds the model a reference names, if it was pulled and its
// files are still there. A file reference also finds a model pulled by
// quant tag that resolved to the same file.
func (c Cache) Lookup(r Ref) (Entry, bool, error) {
	idx, err := c.read()
	if err != nil {
		return Entry{}, false, err
	}
	for _, e := range idx.Models {
		if matches(e, r) && c.complete(e) {
			return e, true, nil
		}
	}
	return Entry{}, false, nil
}

// Remove deletes a model from the index, and its files unless another
// entry uses them too (hf.co/O/R:Q4_0 and hf.co/O/R/r-Q4_0.gguf may name
// the same file).
func (c Cache) Remove(r Ref) (Entry, error) {
	idx, err := c.read()
	if err != nil {
		return Entry{}, err
	}
	at := -1
	for i, e := range idx.Models {
		if e.Ref == r.String() {
			at = i
			break
		}
		if at < 0 && matches(e, r) {
			at = i
		}
	}
	if at < 0 {
		return Entry{}, fmt.Errorf("%s is not in the cache (%s)", r, c.Dir)
	}
	gone := idx.Models[at]
	idx.Models = append(idx.Models[:at], idx.Models[at+1:]...)
	if err := c.write(idx); err != nil {
		return Entry{}, err
	}
	used := map[string]bool{}
	for _, e := range idx.Models {
		for _, f := range e.Files {
			used[f.Path] = true
		}
	}
	var errs []error
	for _, f := range gone.Files {
		if used[f.Path] {
			continue
		}
		p := filepath.Join(c.Dir, filepath.FromSlash(f.Path))
		for _, q := range []string{p, p + ".part"} {
			if err := os.Remove(q); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		c.prune(filepath.Dir(p))
	}
	return gone, errors.Join(errs...)
}

// matches reports whether an entry is what a reference names.
func matches(e Entry, r Ref) bool {
	if e.Ref == r.String() {
		return true
	}
	if len(e.Files) == 0 {
		return false
	}
	switch {
	case r.URL != "":
		return e.Files[0].URL == r.URL
	case r.File != "":
		return strings.EqualFold(e.Repo, r.Repo) && e.Files[0].Name == r.File
	case r.Quant != "":
		return strings.EqualFold(e.Ref, r.String())
	}
	return false
}

// complete reports whether every file of an entry is there at its size.
func (c Cache) complete(e Entry) bool {
	if len(e.Files) == 0 {
		return false
	}
	for _, f := range e.Files {
		st, err := os.Stat(filepath.Join(c.Dir, filepath.FromSlash(f.Path)))
		if err != nil || st.Size() != f.Size {
			return false
		}
	}
	return true
}

// file returns the index's record of a cached file.
func (c Cache) file(path string) (File, bool) {
	idx, err := c.read()
	if err != nil {
		return File{}, false
	}
	for _, e := range idx.Models {
		for _, f := range e.Files {
			if f.Path == path {
				return f, true
			}
		}
	}
	return File{}, false
}

// put records an entry, replacing one with the same reference. The index
// is read again just before it is written, so that a pull running beside
// this one loses nothing unless both finish in the same instant.
func (c Cache) put(e Entry) error {
	idx, err := c.read()
	if err != nil {
		return err
	}
	kept := idx.Models[:0]
	for _, old := range idx.Models {
		if old.Ref != e.Ref {
			kept = append(kept, old)
		}
	}
	idx.Models = append(kept, e)
	return c.write(idx)
}

func (c Cache) read() (index, error) {
	b, err := os.ReadFile(filepath.Join(c.Dir, indexName))
	if errors.Is(err, fs.ErrNotExist) {
		return index{Version: 1}, nil
	}
	if err != nil {
		return index{}, err
	}
	var idx index
	if err := json.Unmarshal(b, &idx); err != nil {
		return index{}, fmt.Errorf("model cache index %s: %v (delete it to start afresh)", filepath.Join(c.Dir, indexName), err)
	}
	return idx, nil
}

// write replaces the index atomically: a temporary file renamed over it,
// so a crash or a reader never sees half of it.
func (c Cache) write(idx index) error {
	idx.Version = 1
	sort.Slice(idx.Models, func(i, j int) bool { return idx.Models[i].Ref < idx.Models[j].Ref })
	b, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(c.Dir, indexName+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(c.Dir, indexName))
}

// prune removes empty directories from dir up to the cache's root.
func (c Cache) prune(dir string) {
	root := filepath.Clean(c.Dir)
	for d := filepath.Clean(dir); d != root && strings.HasPrefix(d, root+string(filepath.Separator)); d = filepath.Dir(d) {
		if os.Remove(d) != nil {
			return
		}
	}
}
