package hub

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode"
)

// A Cache is a directory of pulled models: the files under hf.co/OWNER/REPO/
// (or url/HOST/ for URLs), as the Hub names them, and index.json, which
// records what each reference resolved to. The index is what makes a
// reference usable offline: hf.co/OWNER/REPO:Q4_K_M names no file by
// itself.
//
// The cache is confined to Dir. Every file it reads, writes, creates,
// renames, removes or stats is reached through an os.Root opened on Dir,
// so no path — whether it came from the index, which anyone who can write
// the file can edit, or from the Hub — reaches outside it: not with "..",
// not as an absolute path, not through a symlink. Stricter still, the
// cache follows no symlink at all below Dir (Dir itself may be one): an
// index entry whose path is not exactly where its model's file belongs,
// or leads through a symlink, is damaged (Entry.Damaged). A damaged entry
// is listed, never opened, and removing it drops it from the index
// without deleting anything.
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

	// Damaged, set by the Cache's methods, says why the index's record
	// cannot be trusted: a *DamagedError. Such an entry is never opened
	// and removing it deletes no file.
	Damaged error `json:"-"`

	// raw is the record as the index holds it, written back unchanged
	// when the index is rewritten, so that rewriting it for another
	// model loses nothing, even a record that does not decode.
	raw json.RawMessage
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

// ErrDamaged is what every *DamagedError is (errors.Is).
var ErrDamaged = errors.New("damaged cache entry")

// A DamagedError says why an index entry is not followed.
type DamagedError struct {
	Ref  string // the entry's reference, or "#N" (its place) when it has none
	Path string // the offending path, "" when the record itself is malformed
	Why  string
}

func (e *DamagedError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("damaged cache entry %s: %s", e.Ref, e.Why)
	}
	return fmt.Sprintf("damaged cache entry %s: path %q %s", e.Ref, e.Path, e.Why)
}

// Is makes errors.Is(err, ErrDamaged) true.
func (e *DamagedError) Is(target error) bool { return target == ErrDamaged }

const indexName = "index.json"

// Path is the file to open: the model's first file (the first shard of a
// split GGUF, from which a loader finds the others next to it). It fails
// unless every file of the entry is in the cache, where the entry's
// reference says it belongs, as a regular file reached through real
// directories: the path it returns leads through no symlink, so a loader
// that opens it (and its shards) by name reaches what was checked.
//
// Loaders open files by name, not through the cache's os.Root, so a
// window remains between this check and their open in which a process
// that can write inside the cache could swap a checked directory for a
// symlink. Such a process could as well rewrite the model's bytes, so the
// window gives it nothing it lacks; what Path rules out is the index —
// data, not a process — steering a load outside the cache.
func (c Cache) Path(e Entry) (string, error) {
	if e.Damaged != nil {
		return "", e.Damaged
	}
	if err := validate(e, 0); err != nil {
		return "", err
	}
	root, err := c.open(false)
	if err != nil {
		return "", err
	}
	defer root.Close()
	complete, err := inspectEntry(root, e)
	if err != nil {
		return "", err
	}
	if !complete {
		return "", fmt.Errorf("%s: its files are no longer all in the cache (%s): pull it again", e.Ref, c.Dir)
	}
	return filepath.Join(c.Dir, filepath.FromSlash(e.Files[0].Path)), nil
}

// Entries lists the pulled models by reference, damaged entries too, with
// Damaged set: a listing shows them rather than failing as a whole.
func (c Cache) Entries() ([]Entry, error) {
	root, err := c.open(false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer root.Close()
	idx, err := c.read(root)
	if err != nil {
		return nil, err
	}
	for i := range idx {
		check(root, &idx[i])
	}
	return idx, nil
}

// Lookup finds the model a reference names, if it was pulled and its
// files are still there. A file reference also finds a model pulled by
// quant tag that resolved to the same file. An entry the reference names
// that is damaged is an error, not a miss: pulling over it unnoticed would
// hide that the index was tampered with.
func (c Cache) Lookup(r Ref) (Entry, bool, error) {
	root, err := c.open(false)
	if errors.Is(err, fs.ErrNotExist) {
		return Entry{}, false, nil
	}
	if err != nil {
		return Entry{}, false, err
	}
	defer root.Close()
	idx, err := c.read(root)
	if err != nil {
		return Entry{}, false, err
	}
	var damaged error
	for _, e := range idx {
		if !matches(e, r) {
			continue
		}
		complete := check(root, &e)
		if e.Damaged != nil {
			if damaged == nil {
				damaged = e.Damaged
			}
			continue
		}
		if complete {
			return e, true, nil
		}
	}
	if damaged != nil {
		return Entry{}, false, fmt.Errorf("%w (pulling it again replaces it; removing it drops it from the index)", damaged)
	}
	return Entry{}, false, nil
}

// Remove deletes a model from the index, and its files unless another
// entry uses them too (hf.co/O/R:Q4_0 and hf.co/O/R/r-Q4_0.gguf may name
// the same file). A damaged entry leaves the index and its files are left
// alone: the error says so.
func (c Cache) Remove(r Ref) (Entry, error) {
	root, err := c.open(false)
	if errors.Is(err, fs.ErrNotExist) {
		return Entry{}, fmt.Errorf("%s is not in the cache (%s)", r, c.Dir)
	}
	if err != nil {
		return Entry{}, err
	}
	defer root.Close()
	idx, err := c.read(root)
	if err != nil {
		return Entry{}, err
	}
	at := -1
	for i, e := range idx {
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
	gone := idx[at]
	check(root, &gone)
	idx = append(idx[:at], idx[at+1:]...)
	if err := c.write(root, idx); err != nil {
		return Entry{}, err
	}
	if gone.Damaged != nil {
		return gone, fmt.Errorf("removed %s from the index but deleted none of its files: %w", gone.Ref, gone.Damaged)
	}
	used := map[string]bool{}
	for _, e := range idx {
		for _, f := range e.Files {
			used[f.Path] = true
		}
	}
	var errs []error
	for _, f := range gone.Files {
		if used[f.Path] {
			continue
		}
		for _, p := range []string{f.Path, f.Path + ".part"} {
			if err := root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("removing %s: %w", filepath.Join(c.Dir, filepath.FromSlash(p)), err))
			}
		}
		prune(root, path.Dir(f.Path))
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

// check marks an entry damaged when its record is malformed or a file of
// it is reached through a symlink or is no regular file, and reports
// whether every file is there at its size.
func check(root *os.Root, e *Entry) (complete bool) {
	if e.Damaged != nil {
		return false
	}
	complete, err := inspectEntry(root, *e)
	if err != nil {
		e.Damaged = err
		return false
	}
	return complete
}

// inspectEntry walks every file of a well-formed entry: a *DamagedError
// when one is reached through a symlink or is no regular file; otherwise
// whether all are there at their size.
func inspectEntry(root *os.Root, e Entry) (complete bool, err error) {
	complete = true
	for _, f := range e.Files {
		st, err := inspect(root, f.Path)
		if errors.Is(err, fs.ErrNotExist) {
			complete = false
			continue
		}
		if err != nil {
			return false, &DamagedError{Ref: e.Ref, Path: f.Path, Why: err.Error()}
		}
		if st.Size() != f.Size {
			complete = false
		}
	}
	return complete, nil
}

// inspect follows a slash-separated path below the root one component at a
// time without following any: each directory on the way must be a real
// directory and the last component a regular file. A symlink is refused
// even when it stays inside the root, so that the path's name, which
// loaders open, leads where the check went. A missing component is
// fs.ErrNotExist.
func inspect(root *os.Root, p string) (fs.FileInfo, error) {
	segs := strings.Split(p, "/")
	for i := range segs {
		sub := strings.Join(segs[:i+1], "/")
		st, err := root.Lstat(sub)
		if err != nil {
			return nil, err
		}
		last := i == len(segs)-1
		switch {
		case st.Mode()&fs.ModeSymlink != 0:
			target, _ := root.Readlink(sub)
			return nil, fmt.Errorf("leads through the symlink %s -> %q, and the cache follows none", sub, target)
		case !last && !st.IsDir():
			return nil, fmt.Errorf("leads through %s, which is no directory", sub)
		case last && !st.Mode().IsRegular():
			return nil, fmt.Errorf("is no regular file (%s)", st.Mode().Type())
		case last:
			return st, nil
		}
	}
	return nil, fs.ErrNotExist // unreachable: strings.Split returns one segment at least
}

// checkDirs refuses a directory path below the root that leads through a
// symlink or a file: where a download may write. The part of it that
// does not exist yet is fine.
func checkDirs(root *os.Root, dir string) error {
	segs := strings.Split(dir, "/")
	for i := range segs {
		sub := strings.Join(segs[:i+1], "/")
		st, err := root.Lstat(sub)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("model cache: %w", err)
		}
		if st.Mode()&fs.ModeSymlink != 0 {
			target, _ := root.Readlink(sub)
			return fmt.Errorf("model cache: %s is a symlink (-> %q) and the cache follows none: remove it", sub, target)
		}
		if !st.IsDir() {
			return fmt.Errorf("model cache: %s is no directory", sub)
		}
	}
	return nil
}

// validate checks an entry's record on its own, touching no file: a
// reference that parses, files named as the Hub names them, and each
// file's path exactly the one a pull of that reference writes, so that no
// record can point at another model's file, let alone outside the cache.
// at is the entry's place in the index, to name one without a reference.
func validate(e Entry, at int) error {
	name := entryName(e.Ref, at)
	bad := func(p, format string, args ...any) error {
		return &DamagedError{Ref: name, Path: p, Why: fmt.Sprintf(format, args...)}
	}
	r, err := Parse(e.Ref)
	if err != nil {
		return bad("", "the reference does not parse: %v", err)
	}
	if r.URL == "" && e.Repo != r.Repo {
		return bad("", "its repository %q is not its reference's", e.Repo)
	}
	if r.URL != "" && e.Repo != "" {
		return bad("", "a URL's entry names the repository %q", e.Repo)
	}
	if len(e.Files) == 0 {
		return bad("", "it lists no file")
	}
	if e.Size < 0 {
		return bad("", "its size is negative")
	}
	for _, f := range e.Files {
		p := f.Path
		switch {
		case p == "":
			return bad(p, "is empty")
		case strings.HasPrefix(p, "/") || filepath.IsAbs(p) || filepath.VolumeName(p) != "":
			return bad(p, "is absolute; the cache's paths are relative to it")
		case hasDotDot(p):
			return bad(p, "climbs out with ..")
		case checkPath(p) != nil:
			return bad(p, "is not a clean relative path")
		}
		if err := checkPath(f.Name); err != nil {
			return bad(p, "belongs to a file whose name is not one: %v", err)
		}
		var want string
		if r.URL == "" {
			want = hubLocal(r.Repo, f.Name)
		} else {
			u, err := url.Parse(f.URL)
			if err != nil || u.Host == "" || urlName(u) != f.Name {
				return bad(p, "belongs to a file whose URL %q is not its name's", f.URL)
			}
			want = urlLocal(u, f.Name)
		}
		if p != want {
			return bad(p, "is not where %s's file %s belongs (%s)", name, f.Name, want)
		}
		if f.Size < 0 {
			return bad(p, "has a negative size")
		}
		if f.SHA256 != "" && etagSHA(f.SHA256) != f.SHA256 {
			return bad(p, "has a checksum that is not a SHA-256")
		}
	}
	return nil
}

func hasDotDot(p string) bool {
	for _, seg := range strings.FieldsFunc(p, func(r rune) bool { return r == '/' || r == '\\' }) {
		if seg == ".." {
			return true
		}
	}
	return false
}

// printable reports whether s can be shown as it is: no control
// characters or other invisible runes that could disguise it on a
// terminal.
func printable(s string) bool {
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// Display is an entry's reference as it is safe to print: quoted when a
// tampered index gave it characters a terminal would act on.
func (e Entry) Display() string {
	if printable(e.Ref) && e.Ref != "" {
		return e.Ref
	}
	return fmt.Sprintf("%q", e.Ref)
}

// entryName names the at'th entry of the index in an error: its reference,
// quoted when it is not printable, or its place when it has none.
func entryName(ref string, at int) string {
	if ref == "" {
		return fmt.Sprintf("#%d", at+1)
	}
	return Entry{Ref: ref}.Display()
}

// hubLocal is where a pull stores a file of a Hub repository.
func hubLocal(repo, name string) string { return "hf.co/" + repo + "/" + name }

// urlName is the file name a URL's file has in the cache: its path.
func urlName(u *url.URL) string { return strings.TrimPrefix(path.Clean("/"+u.Path), "/") }

// urlLocal is where a pull stores a URL's file: under its host (a port's
// colon made an underscore).
func urlLocal(u *url.URL, name string) string {
	return "url/" + strings.ReplaceAll(u.Host, ":", "_") + "/" + name
}

// file returns the index's record of a cached file, from an entry that is
// not damaged.
func (c Cache) file(root *os.Root, p string) (File, bool) {
	idx, err := c.read(root)
	if err != nil {
		return File{}, false
	}
	for _, e := range idx {
		if e.Damaged != nil {
			continue
		}
		for _, f := range e.Files {
			if f.Path == p {
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
	root, err := c.open(true)
	if err != nil {
		return err
	}
	defer root.Close()
	idx, err := c.read(root)
	if err != nil {
		return err
	}
	kept := idx[:0]
	for _, old := range idx {
		if old.Ref != e.Ref {
			kept = append(kept, old)
		}
	}
	e.raw, e.Damaged = nil, nil
	return c.write(root, append(kept, e))
}

// open opens the cache's root, creating the directory first when asked.
func (c Cache) open(create bool) (*os.Root, error) {
	if c.Dir == "" {
		return nil, errors.New("hub: the cache's directory is not set")
	}
	if create {
		if err := os.MkdirAll(c.Dir, 0o755); err != nil {
			return nil, fmt.Errorf("model cache: %w", err)
		}
	}
	root, err := os.OpenRoot(c.Dir)
	if err != nil {
		return nil, fmt.Errorf("model cache: %w", err)
	}
	return root, nil
}

// index is the JSON file's layout; each model's record is decoded on its
// own, so that one malformed record damages one entry, not the index.
type index struct {
	Version int               `json:"version"`
	Models  []json.RawMessage `json:"models"`
}

// read returns the index's entries, those whose record is malformed with
// Damaged set.
func (c Cache) read(root *os.Root) ([]Entry, error) {
	where := filepath.Join(c.Dir, indexName)
	b, err := root.ReadFile(indexName)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("model cache index %s: %w", where, err)
	}
	var idx index
	if err := json.Unmarshal(b, &idx); err != nil {
		return nil, fmt.Errorf("model cache index %s: %v (delete it to start afresh)", where, err)
	}
	entries := make([]Entry, 0, len(idx.Models))
	for i, raw := range idx.Models {
		var e Entry
		if err := json.Unmarshal(raw, &e); err != nil {
			e = Entry{Ref: refOf(raw)}
			e.Damaged = &DamagedError{Ref: entryName(e.Ref, i), Why: fmt.Sprintf("malformed record: %v", err)}
		} else if err := validate(e, i); err != nil {
			e.Damaged = err
		}
		e.raw = raw
		entries = append(entries, e)
	}
	return entries, nil
}

// refOf digs the reference out of a record that does not decode, so that
// it can still be listed and removed by it.
func refOf(raw json.RawMessage) string {
	var r struct {
		Ref any `json:"ref"`
	}
	if json.Unmarshal(raw, &r) != nil {
		return ""
	}
	s, _ := r.Ref.(string)
	return s
}

// write replaces the index atomically: a temporary file in the cache,
// synced, renamed over it, and the directory synced, so a crash or a
// reader never sees half of it. Records read from the index go back as
// they were.
func (c Cache) write(root *os.Root, entries []Entry) error {
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].Ref < entries[j].Ref })
	idx := index{Version: 1, Models: make([]json.RawMessage, 0, len(entries))}
	for _, e := range entries {
		raw := e.raw
		if raw == nil {
			var err error
			if raw, err = json.Marshal(e); err != nil {
				return err
			}
		}
		idx.Models = append(idx.Models, raw)
	}
	b, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return err
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := indexName + "." + hex.EncodeToString(rnd[:]) + ".tmp"
	fh, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("model cache index: %w", err)
	}
	defer root.Remove(tmp) // fails harmlessly once renamed
	_, err = fh.Write(append(b, '\n'))
	if err == nil {
		err = fh.Sync()
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, indexName)
	}
	if err != nil {
		return fmt.Errorf("model cache index %s: %w", filepath.Join(c.Dir, indexName), err)
	}
	// The rename is durable once the directory is: best effort, as some
	// file systems refuse to sync a directory.
	if d, err := root.Open("."); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// prune removes empty directories from dir up to the cache's root, never
// a symlink.
func prune(root *os.Root, dir string) {
	for d := dir; d != "." && d != "/" && d != ""; d = path.Dir(d) {
		st, err := root.Lstat(d)
		if err != nil || !st.IsDir() {
			return
		}
		if root.Remove(d) != nil {
			return
		}
	}
}
