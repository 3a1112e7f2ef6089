//go:build js

package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	neturl "net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall/js"
	"time"

	"github.com/tessera-llm/tessera/models/gguf"
)

// Downloaded models are kept in the origin private file system (OPFS), in
// one folder: what we know of an entry as <key>.json, where key is a hash
// of the URL, and its file as <key>.gguf, or for a model split by
// gguf-split (NAME-00001-of-0000N.gguf: every part is fetched, in
// parallel) its parts as <key>-00001.gguf and on. Parts are written in
// place as they arrive (a sync access handle, which the engine's worker
// has), with the entry marked incomplete: a download that stops (a closed
// page, a lost network) resumes where each part stopped, by range
// requests that If-Range makes safe. A complete entry is reused only when
// every part has the recorded size and hash (see pieceHash), and the
// server, if it answers, still reports the same size and validators;
// otherwise it is fetched again.
//
// Where the model's source publishes each file's SHA-256 (the catalogue
// has the Hugging Face Hub's), a load passes it: a download is checked
// against it before it is kept, and an entry is reused only if it was (or
// now is) checked against the same one. A mismatch deletes the copy and
// says so: a download fails with errIntegrity, and a damaged cached copy
// is fetched again with the reason in the load's result (discarded).

const cacheFolder = "tessera-models"

// cacheMeta is the <key>.json of an entry.
type cacheMeta struct {
	URL      string      `json:"url"`
	Size     int64       `json:"size"` // all parts'
	Hash     string      `json:"hash"` // one part's, or the SHA-256 of the parts'
	Parts    []cachePart `json:"parts"`
	Complete bool        `json:"complete"` // false while a download is under way
	Saved    string      `json:"saved"`
}

// cachePart is one file of an entry.
type cachePart struct {
	URL          string `json:"url"`
	Size         int64  `json:"size"`             // -1 until the server says
	Hash         string `json:"hash"`             // SHA-256 of the SHA-256s of its 8 MiB pieces
	SHA256       string `json:"sha256,omitempty"` // its plain SHA-256, once checked against a published one
	ETag         string `json:"etag,omitempty"`
	LastModified string `json:"lastModified,omitempty"`
	Done         bool   `json:"done"`
}

// fetched is a model ready to read, and where it came from.
type fetched struct {
	blobs  []js.Value // its parts in order; one for a whole file
	name   string
	hash   string
	cached bool // reused from the cache, not downloaded
	stored bool // kept in the cache for next time
	// discarded says why a cached copy was deleted (damaged, or not the
	// published file) and fetched again; "" when none was.
	discarded string
}

// errIntegrity is a download whose SHA-256 is not the one its source
// publishes.
var errIntegrity = errors.New("integrity check failed")

func cacheKey(url string) string {
	h := sha256.Sum256([]byte(url))
	return hex.EncodeToString(h[:12])
}

// partFile names part i of n of entry key in the cache folder.
func partFile(key string, i, n int) string {
	if n == 1 {
		return key + ".gguf"
	}
	return fmt.Sprintf("%s-%05d.gguf", key, i+1)
}

// partURLs lists the files of the model at raw: raw itself, or every part
// of a split model whose part raw names, in order.
func partURLs(raw string) []string {
	u, err := neturl.Parse(raw)
	if err != nil {
		return []string{raw}
	}
	dir, file := path.Split(u.Path)
	prefix, _, count, ok := gguf.ParseSplitName(file)
	if !ok || count == 1 {
		return []string{raw}
	}
	urls := make([]string, count)
	for i := range urls {
		v := *u
		v.Path, v.RawPath = dir+gguf.SplitName(prefix, i, count), ""
		urls[i] = v.String()
	}
	return urls
}

// cacheDir opens the cache folder, or says why there is none.
func cacheDir() (js.Value, error) {
	storage := js.Global().Get("navigator").Get("storage")
	if storage.IsUndefined() || storage.Get("getDirectory").IsUndefined() {
		return js.Value{}, errors.New("this browser has no origin private file system")
	}
	if js.Global().Get("FileSystemSyncAccessHandle").IsUndefined() {
		return js.Value{}, errors.New("no sync access handles to write the cache with (the engine must run in a Worker)")
	}
	root, err := call(storage, "getDirectory")
	if err != nil {
		return js.Value{}, fmt.Errorf("opening browser storage: %w", err)
	}
	return call(root, "getDirectoryHandle", cacheFolder, map[string]any{"create": true})
}

// fetchModel returns the model at url: from the cache when a checked copy is
// there, else downloaded (and stored, when useCache), the parts of a split
// model in parallel. want, if not nil, is each part's published SHA-256
// (lowercase hex). progress gets ("download" | "verify", bytes done, bytes
// in all; total -1 when unknown).
func fetchModel(ctx context.Context, url string, useCache bool, want []string, progress func(phase string, done, total int64)) (*fetched, error) {
	name := url[strings.LastIndex(url, "/")+1:]
	if i := strings.IndexAny(name, "?#"); i >= 0 {
		name = name[:i]
	}
	urls := partURLs(url)
	if want != nil && len(want) != len(urls) {
		return nil, badRequest("sha256", "sha256 lists %d hashes for a model of %d parts", len(want), len(urls))
	}
	var dir js.Value
	if useCache {
		d, err := cacheDir()
		if err != nil {
			console("warn", fmt.Sprintf("tessera: not caching %s: %v", url, err))
			useCache = false
		} else {
			dir = d
		}
	}
	key := cacheKey(urls[0])
	if !useCache {
		f, err := downloadBlobs(ctx, urls, want, progress)
		if err != nil {
			return nil, err
		}
		f.name = name
		return f, nil
	}
	// Two engines (two workers) loading one URL must not write the entry
	// while the other reads it: a File read from the cache becomes
	// unreadable once its file is written again.
	var f *fetched
	var discarded string
	err := underLock(ctx, "tessera-cache:"+key, func() error {
		meta, err := readMeta(dir, key)
		if err == nil && meta.Complete {
			if f, err = cachedModel(ctx, dir, key, urls, meta, want, progress); err == nil {
				return nil
			}
			if errors.Is(err, errIntegrity) {
				discarded = fmt.Sprintf("the cached copy was deleted and fetched again: %v", err)
				console("info", "tessera: "+url+": "+discarded)
			}
		}
		if err == nil && meta.resumes(urls) {
			console("info", fmt.Sprintf("tessera: resuming the download of %s", url))
		} else {
			if err != nil && meta != nil && discarded == "" {
				console("info", fmt.Sprintf("tessera: fetching %s again: %v", url, err))
			}
			removeEntry(dir, key)
			meta = newMeta(urls)
		}
		f, err = downloadParts(ctx, dir, key, meta, want, progress)
		return err
	})
	if err != nil {
		return nil, err
	}
	f.name, f.discarded = name, discarded
	return f, nil
}

func newMeta(urls []string) *cacheMeta {
	m := &cacheMeta{URL: urls[0], Size: -1, Parts: make([]cachePart, len(urls))}
	for i, u := range urls {
		m.Parts[i] = cachePart{URL: u, Size: -1}
	}
	return m
}

// resumes reports whether m is an unfinished download of exactly urls.
func (m *cacheMeta) resumes(urls []string) bool {
	if m.Complete || len(m.Parts) != len(urls) {
		return false
	}
	for i, p := range m.Parts {
		if p.URL != urls[i] {
			return false
		}
	}
	return true
}

// underLock runs fn holding the origin-wide Web Lock name, which every
// worker of the page (and of other tabs) sees; without the Locks API it
// runs fn as is. Cancelling ctx gives up waiting for the lock, not fn.
func underLock(ctx context.Context, name string, fn func() error) error {
	locks := js.Global().Get("navigator").Get("locks")
	if locks.IsUndefined() || locks.IsNull() {
		return fn()
	}
	var ferr error
	cb := js.FuncOf(func(js.Value, []js.Value) any {
		return promise(func() (any, error) { ferr = fn(); return nil, nil })
	})
	defer cb.Release()
	ctl := js.Global().Get("AbortController").New()
	stop := context.AfterFunc(ctx, func() { ctl.Call("abort") })
	defer stop()
	if _, err := call(locks, "request", name, map[string]any{"signal": ctl.Get("signal")}, cb); err != nil {
		if ctx.Err() != nil {
			return errAborted
		}
		return fmt.Errorf("%w: waiting for the cache lock: %v", errStorage, err)
	}
	return ferr
}

// cachedModel returns the complete cache entry meta of urls after checking
// each part.
//
// A part whose bytes differ from those hashed when it was saved, or whose
// SHA-256 is not the one in want, fails with errIntegrity. A part saved
// without a published hash to check is checked now, and its SHA-256
// recorded.
func cachedModel(ctx context.Context, dir js.Value, key string, urls []string, meta *cacheMeta, want []string, progress func(string, int64, int64)) (*fetched, error) {
	if meta.URL != urls[0] || len(meta.Parts) != len(urls) {
		return nil, errors.New("the cache entry belongs to another URL")
	}
	f := &fetched{hash: meta.Hash, cached: true, stored: true}
	var done int64
	for i, p := range meta.Parts {
		if p.URL != urls[i] || !p.Done {
			return nil, errors.New("the cache entry belongs to another URL")
		}
		fh, err := call(dir, "getFileHandle", partFile(key, i, len(urls)))
		if err != nil {
			return nil, err
		}
		file, err := call(fh, "getFile")
		if err != nil {
			return nil, err
		}
		if size := int64(file.Get("size").Float()); size != p.Size {
			return nil, fmt.Errorf("%w: the cached file has %d bytes, %d were saved", errIntegrity, size, p.Size)
		}
		if err := checkFresh(ctx, p); err != nil {
			return nil, err
		}
		if want != nil && p.SHA256 != "" && p.SHA256 != want[i] {
			return nil, fmt.Errorf("%w: the cached file's SHA-256 is %s, not the expected %s", errIntegrity, p.SHA256, want[i])
		}
		whole := want != nil && p.SHA256 == ""
		sum, full, err := hashBlobWhole(file, whole, func(d, _ int64) { progress("verify", done+d, meta.Size) })
		if err != nil {
			return nil, err
		}
		if sum != p.Hash {
			return nil, fmt.Errorf("%w: the cached file's bytes differ from those saved (hash %s, saved %s)", errIntegrity, short(sum), short(p.Hash))
		}
		if whole {
			if full != want[i] {
				return nil, fmt.Errorf("%w: the cached file's SHA-256 is %s, not the expected %s", errIntegrity, full, want[i])
			}
			meta.Parts[i].SHA256 = full
			meta.Saved = time.Now().UTC().Format(time.RFC3339)
			writeMeta(dir, key, *meta) // a failure only means checking again next time
		}
		done += p.Size
		f.blobs = append(f.blobs, file)
	}
	return f, nil
}

// short is the start of a hash, for messages.
func short(h string) string { return h[:min(len(h), 12)] }

// checkFresh asks the server whether a part changed since it was saved.
// No answer (offline, a server without HEAD) keeps the cached copy.
func checkFresh(ctx context.Context, p cachePart) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := fetch(ctx, p.URL, "HEAD", nil)
	if err != nil || !resp.Get("ok").Bool() {
		return nil
	}
	get := headerOf(resp)
	if n, err := strconv.ParseInt(get("content-length"), 10, 64); err == nil && get("content-encoding") == "" && n != p.Size {
		return fmt.Errorf("the server now has %d bytes, %d are cached", n, p.Size)
	}
	if et := get("etag"); et != "" && p.ETag != "" && et != p.ETag {
		return errors.New("the server's ETag changed")
	}
	if lm := get("last-modified"); lm != "" && p.LastModified != "" && lm != p.LastModified {
		return errors.New("the server's Last-Modified changed")
	}
	return nil
}

// headerOf reads a response's headers, "" for one it lacks.
func headerOf(resp js.Value) func(string) string {
	h := resp.Get("headers")
	return func(k string) string {
		v := h.Call("get", k)
		if v.IsNull() {
			return ""
		}
		return v.String()
	}
}

// fetch starts a request that ctx can abort and waits for its headers.
func fetch(ctx context.Context, url, method string, headers map[string]any) (js.Value, error) {
	ctl := js.Global().Get("AbortController").New()
	stop := context.AfterFunc(ctx, func() { ctl.Call("abort") })
	defer stop()
	init := map[string]any{
		"method": method,
		"signal": ctl.Get("signal"),
		"cache":  "no-store", // the model goes to our cache, not also to the HTTP cache
	}
	if headers != nil {
		init["headers"] = headers
	}
	resp, err := call(js.Global(), "fetch", url, init)
	if err != nil {
		if ctx.Err() != nil {
			return js.Value{}, errAborted
		}
		return js.Value{}, fmt.Errorf("%w: fetching %s: %v", errNetwork, url, err)
	}
	return resp, nil
}

// download is a progress report shared by the parts of a download.
type downloadProgress struct {
	mu     sync.Mutex
	done   []int64
	total  []int64 // -1 while unknown
	report func(phase string, done, total int64)
}

func newDownloadProgress(n int, report func(string, int64, int64)) *downloadProgress {
	p := &downloadProgress{done: make([]int64, n), total: make([]int64, n), report: report}
	for i := range p.total {
		p.total[i] = -1
	}
	return p
}

// set records part i's bytes so far and in all, and reports the sums.
func (p *downloadProgress) set(i int, done, total int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done[i], p.total[i] = done, total
	var d, t int64
	for j := range p.done {
		d += p.done[j]
		if p.total[j] < 0 || t < 0 {
			t = -1
		} else {
			t += p.total[j]
		}
	}
	p.report("download", d, t)
}

// parallel runs fn for each of n parts at once, and cancels the others
// when one fails; it returns the first failure.
func parallel(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[i] = fn(ctx, i); errs[i] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs { // the cause, not the aborts it caused
		if err != nil && !errors.Is(err, errAborted) {
			return err
		}
	}
	return errors.Join(errs...)
}

// downloadParts fetches the parts of meta that are not done into the
// cache, in parallel, each from where an earlier download of it stopped,
// then hashes them and marks the entry complete. An interrupted download
// keeps what it wrote for the next try.
//
// With want, each part's SHA-256 is checked too, and recorded; a mismatch
// deletes the entry and fails with errIntegrity.
func downloadParts(ctx context.Context, dir js.Value, key string, meta *cacheMeta, want []string, report func(string, int64, int64)) (*fetched, error) {
	n := len(meta.Parts)
	var mu sync.Mutex // guards meta and its file
	save := func() error {
		mu.Lock()
		defer mu.Unlock()
		meta.Saved = time.Now().UTC().Format(time.RFC3339)
		if err := writeMeta(dir, key, *meta); err != nil {
			return fmt.Errorf("%w: saving to browser storage: %v", errStorage, err)
		}
		return nil
	}
	if err := save(); err != nil {
		return nil, err
	}
	prog := newDownloadProgress(n, report)
	err := parallel(ctx, n, func(ctx context.Context, i int) error {
		mu.Lock()
		p := meta.Parts[i]
		mu.Unlock()
		if p.Done {
			prog.set(i, p.Size, p.Size)
			return nil
		}
		return downloadPart(ctx, dir, partFile(key, i, n), p, func(q cachePart) error {
			mu.Lock()
			meta.Parts[i] = q
			mu.Unlock()
			return save()
		}, func(done, total int64) { prog.set(i, done, total) })
	})
	if err != nil {
		if !errors.Is(err, errNetwork) && !errors.Is(err, errAborted) {
			removeEntry(dir, key) // nothing worth resuming
		}
		if ctx.Err() != nil {
			return nil, errAborted
		}
		return nil, err
	}

	// Every part is in: hash them (their bytes may have come in several
	// downloads) and mark the entry complete.
	f := &fetched{stored: true}
	list := sha256.New()
	meta.Size = 0
	for _, p := range meta.Parts {
		meta.Size += p.Size
	}
	var done int64
	for i := range meta.Parts {
		fh, err := call(dir, "getFileHandle", partFile(key, i, n))
		if err != nil {
			return nil, fmt.Errorf("%w: reading a downloaded part: %v", errStorage, err)
		}
		file, err := call(fh, "getFile")
		if err != nil {
			return nil, fmt.Errorf("%w: reading a downloaded part: %v", errStorage, err)
		}
		sum, full, err := hashBlobWhole(file, want != nil, func(d, _ int64) { report("verify", done+d, meta.Size) })
		if err != nil {
			return nil, fmt.Errorf("%w: hashing a downloaded part: %v", errStorage, err)
		}
		if want != nil && full != want[i] {
			removeEntry(dir, key)
			return nil, fmt.Errorf("%w: the download of %s has SHA-256 %s, not the expected %s; the copy was deleted", errIntegrity, meta.Parts[i].URL, full, want[i])
		}
		done += meta.Parts[i].Size
		meta.Parts[i].Hash, meta.Parts[i].SHA256 = sum, full
		list.Write([]byte(sum))
		f.blobs = append(f.blobs, file)
	}
	meta.Hash = meta.Parts[0].Hash
	if n > 1 {
		meta.Hash = hex.EncodeToString(list.Sum(nil))
	}
	meta.Complete = true
	if err := save(); err != nil {
		removeEntry(dir, key)
		return nil, err
	}
	f.hash = meta.Hash
	return f, nil
}

// downloadPart fetches part p into the cache file name, continuing after
// the bytes the file already holds when the server confirms (If-Range)
// that the part did not change. record saves what is learnt of the part:
// its size and validators when the response starts, and that it is done.
func downloadPart(ctx context.Context, dir js.Value, name string, p cachePart, record func(cachePart) error, progress func(done, total int64)) error {
	fh, err := call(dir, "getFileHandle", name, map[string]any{"create": true})
	if err != nil {
		return fmt.Errorf("%w: %v", errStorage, err)
	}
	h, err := call(fh, "createSyncAccessHandle")
	if err != nil {
		return fmt.Errorf("%w: opening %s in browser storage: %v", errStorage, name, err)
	}
	defer jsCall(h, "close")
	size, err := jsCall(h, "getSize")
	if err != nil {
		return fmt.Errorf("%w: reading %s in browser storage: %v", errStorage, name, err)
	}
	have := int64(size.Float())
	validator := p.ETag
	if validator == "" || strings.HasPrefix(validator, "W/") { // If-Range takes strong validators only
		validator = p.LastModified
	}
	if p.Size >= 0 && have > p.Size || validator == "" {
		have = 0
	}
	var headers map[string]any
	if have > 0 {
		headers = map[string]any{"Range": fmt.Sprintf("bytes=%d-", have), "If-Range": validator}
	}
	resp, err := fetch(ctx, p.URL, "GET", headers)
	if err != nil {
		return err
	}
	get := headerOf(resp)
	switch status := resp.Get("status").Int(); {
	case status == 206 && have > 0:
		from, total, err := contentRange(get("content-range"))
		if err != nil || from != have {
			resp.Get("body").Call("cancel")
			return fmt.Errorf("%w: %s answered bytes %q to a request from %d", errNetwork, p.URL, get("content-range"), have)
		}
		p.Size = total
	case status == 200: // the whole part, from the start (a changed file, or a server without ranges)
		have = 0
		p.Size = -1
		if n, err := strconv.ParseInt(get("content-length"), 10, 64); err == nil && get("content-encoding") == "" {
			p.Size = n
		}
		p.ETag, p.LastModified = get("etag"), get("last-modified")
	default:
		resp.Get("body").Call("cancel")
		return fmt.Errorf("%w: fetching %s: HTTP %d %s", errNetwork, p.URL, status, resp.Get("statusText").String())
	}
	if _, err := jsCall(h, "truncate", have); err != nil {
		resp.Get("body").Call("cancel")
		return fmt.Errorf("%w: %v", errStorage, err)
	}
	if err := record(p); err != nil {
		return err
	}

	reader := resp.Get("body").Call("getReader")
	at := map[string]any{"at": 0}
	off := have
	progress(off, p.Size)
	for {
		res, err := call(reader, "read")
		if err != nil {
			jsCall(h, "flush") // what came so far is kept for the next try
			if ctx.Err() != nil {
				return errAborted
			}
			return fmt.Errorf("%w: downloading %s: %v", errNetwork, p.URL, err)
		}
		if res.Get("done").Bool() {
			break
		}
		chunk := res.Get("value")
		at["at"] = off
		if _, err := jsCall(h, "write", chunk, at); err != nil {
			return fmt.Errorf("%w: saving %s to browser storage: %v (clear the cache, or load without caching)", errStorage, p.URL, err)
		}
		off += int64(chunk.Get("length").Int())
		progress(off, p.Size)
	}
	if _, err := jsCall(h, "flush"); err != nil {
		return fmt.Errorf("%w: saving %s to browser storage: %v", errStorage, p.URL, err)
	}
	if p.Size >= 0 && off != p.Size {
		return fmt.Errorf("%w: %s ended after %d of %d bytes", errNetwork, p.URL, off, p.Size)
	}
	p.Size, p.Done = off, true
	return record(p)
}

// contentRange reads "bytes FROM-TO/TOTAL".
func contentRange(v string) (from, total int64, err error) {
	r, ok := strings.CutPrefix(v, "bytes ")
	span, t, ok2 := strings.Cut(r, "/")
	a, _, ok3 := strings.Cut(span, "-")
	if !ok || !ok2 || !ok3 {
		return 0, 0, fmt.Errorf("Content-Range %q", v)
	}
	if from, err = strconv.ParseInt(a, 10, 64); err != nil {
		return 0, 0, err
	}
	total, err = strconv.ParseInt(t, 10, 64)
	return from, total, err
}

// downloadBlobs fetches the parts at urls, in parallel, into Blobs in
// JavaScript memory: a download without the cache. The bytes stay out of
// the wasm heap; each part is hashed as it streams in.
func downloadBlobs(ctx context.Context, urls []string, want []string, report func(string, int64, int64)) (*fetched, error) {
	prog := newDownloadProgress(len(urls), report)
	blobs := make([]js.Value, len(urls))
	sums := make([]string, len(urls))
	err := parallel(ctx, len(urls), func(ctx context.Context, i int) error {
		var err error
		var full string
		blobs[i], sums[i], full, err = downloadBlob(ctx, urls[i], want != nil, func(done, total int64) { prog.set(i, done, total) })
		if err == nil && want != nil && full != want[i] {
			err = fmt.Errorf("%w: the download of %s has SHA-256 %s, not the expected %s", errIntegrity, urls[i], full, want[i])
		}
		return err
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, errAborted
		}
		return nil, err
	}
	f := &fetched{blobs: blobs, hash: sums[0]}
	if len(urls) > 1 {
		list := sha256.New()
		for _, s := range sums {
			list.Write([]byte(s))
		}
		f.hash = hex.EncodeToString(list.Sum(nil))
	}
	return f, nil
}

// downloadBlob fetches url into a Blob, hashing it as it streams in (and
// with whole, taking its plain SHA-256).
func downloadBlob(ctx context.Context, url string, whole bool, progress func(done, total int64)) (js.Value, string, string, error) {
	resp, err := fetch(ctx, url, "GET", nil)
	if err != nil {
		return js.Value{}, "", "", err
	}
	if !resp.Get("ok").Bool() {
		return js.Value{}, "", "", fmt.Errorf("%w: fetching %s: HTTP %d %s", errNetwork, url, resp.Get("status").Int(), resp.Get("statusText").String())
	}
	get := headerOf(resp)
	total := int64(-1)
	if n, err := strconv.ParseInt(get("content-length"), 10, 64); err == nil && get("content-encoding") == "" {
		total = n
	}
	// Network chunks are gathered into 8 MiB pieces in JavaScript memory:
	// each piece is hashed with one call, so a big download costs a few
	// awaits per piece rather than one per chunk.
	reader := resp.Get("body").Call("getReader")
	u8 := js.Global().Get("Uint8Array")
	sum := newPieceHash(whole)
	var parts []any // the Blob's
	piece, fill := u8.New(hashPiece), 0
	flush := func() error {
		if fill == 0 {
			return nil
		}
		p := piece.Call("subarray", 0, fill)
		if err := sum.add(p); err != nil {
			return err
		}
		parts = append(parts, p)
		piece, fill = u8.New(hashPiece), 0 // the Blob keeps the old one
		return nil
	}
	var done int64
	progress(0, total)
	for {
		res, err := call(reader, "read")
		if err != nil {
			if ctx.Err() != nil {
				return js.Value{}, "", "", errAborted
			}
			return js.Value{}, "", "", fmt.Errorf("%w: downloading %s: %v", errNetwork, url, err)
		}
		if res.Get("done").Bool() {
			break
		}
		chunk := res.Get("value")
		n := chunk.Get("length").Int()
		for off := 0; off < n; {
			k := min(n-off, hashPiece-fill)
			piece.Call("set", chunk.Call("subarray", off, off+k), fill)
			fill += k
			off += k
			if fill == hashPiece {
				if err := flush(); err != nil {
					return js.Value{}, "", "", err
				}
			}
		}
		done += int64(n)
		progress(done, total)
	}
	if err := flush(); err != nil {
		return js.Value{}, "", "", err
	}
	if total >= 0 && done != total {
		return js.Value{}, "", "", fmt.Errorf("%w: %s ended after %d of %d bytes", errNetwork, url, done, total)
	}
	return js.Global().Get("Blob").New(parts), sum.sum(), sum.whole(), nil
}

func readMeta(dir js.Value, key string) (*cacheMeta, error) {
	fh, err := call(dir, "getFileHandle", key+".json")
	if err != nil {
		return nil, errors.New("not cached")
	}
	file, err := call(fh, "getFile")
	if err != nil {
		return nil, err
	}
	text, err := call(file, "text")
	if err != nil {
		return nil, err
	}
	var m cacheMeta
	if err := json.Unmarshal([]byte(text.String()), &m); err != nil {
		return nil, fmt.Errorf("reading the cache entry: %w", err)
	}
	return &m, nil
}

func writeMeta(dir js.Value, key string, m cacheMeta) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	fh, err := call(dir, "getFileHandle", key+".json", map[string]any{"create": true})
	if err != nil {
		return err
	}
	w, err := call(fh, "createWritable")
	if err != nil {
		return err
	}
	if _, err := call(w, "write", string(b)); err != nil {
		jsCall(w, "abort")
		return err
	}
	_, err = call(w, "close")
	return err
}

// removeEntry deletes an entry's files (its meta and every part),
// ignoring those already gone.
func removeEntry(dir js.Value, key string) {
	var names []string
	it := dir.Call("keys")
	for {
		res, err := call(it, "next")
		if err != nil || res.Get("done").Bool() {
			break
		}
		if name := res.Get("value").String(); strings.HasPrefix(name, key+".") || strings.HasPrefix(name, key+"-") {
			names = append(names, name)
		}
	}
	for _, name := range names {
		call(dir, "removeEntry", name)
	}
}

// cachedModels lists the cache's entries.
func cachedModels() ([]cacheMeta, error) {
	dir, err := cacheDir()
	if err != nil {
		return nil, err
	}
	it := dir.Call("keys")
	var list []cacheMeta
	for {
		res, err := call(it, "next")
		if err != nil {
			return nil, err
		}
		if res.Get("done").Bool() {
			break
		}
		name := res.Get("value").String()
		if key, ok := strings.CutSuffix(name, ".json"); ok {
			if m, err := readMeta(dir, key); err == nil && m.Complete {
				list = append(list, *m)
			}
		}
	}
	return list, nil
}

// clearCache deletes every cached model and returns how many and how many
// bytes they held.
func clearCache() (int, int64, error) {
	list, err := cachedModels()
	if err != nil {
		return 0, 0, err
	}
	var bytes int64
	for _, m := range list {
		bytes += m.Size
	}
	storage := js.Global().Get("navigator").Get("storage")
	root, err := call(storage, "getDirectory")
	if err != nil {
		return 0, 0, err
	}
	if _, err := call(root, "removeEntry", cacheFolder, map[string]any{"recursive": true}); err != nil {
		return 0, 0, fmt.Errorf("%w: clearing the cache: %v", errStorage, err)
	}
	return len(list), bytes, nil
}

// console writes to the browser console at level ("log", "info", "warn").
func console(level, msg string) {
	js.Global().Get("console").Call(level, msg)
}
