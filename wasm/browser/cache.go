//go:build js

package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall/js"
	"time"
)

// Downloaded models are kept in the origin private file system (OPFS), in
// one folder: the file as <key>.gguf and what we know of it as <key>.json,
// where key is a hash of the URL. An entry is reused only when the file has
// the recorded size and hash (see pieceHash), and the server, if it
// answers, still reports the same size and validators; otherwise it is
// fetched again.

const cacheFolder = "tessera-models"

// cacheMeta is the <key>.json of an entry.
type cacheMeta struct {
	URL          string `json:"url"`
	Size         int64  `json:"size"`
	Hash         string `json:"hash"` // SHA-256 of the SHA-256s of its 8 MiB pieces
	ETag         string `json:"etag,omitempty"`
	LastModified string `json:"lastModified,omitempty"`
	Saved        string `json:"saved"`
}

// fetched is a model file ready to read, and where it came from.
type fetched struct {
	blob   js.Value
	name   string
	hash   string
	cached bool // reused from the cache, not downloaded
	stored bool // kept in the cache for next time
}

func cacheKey(url string) string {
	h := sha256.Sum256([]byte(url))
	return hex.EncodeToString(h[:12])
}

// cacheDir opens the cache folder, or says why there is none.
func cacheDir() (js.Value, error) {
	storage := js.Global().Get("navigator").Get("storage")
	if storage.IsUndefined() || storage.Get("getDirectory").IsUndefined() {
		return js.Value{}, errors.New("this browser has no origin private file system")
	}
	root, err := call(storage, "getDirectory")
	if err != nil {
		return js.Value{}, fmt.Errorf("opening browser storage: %w", err)
	}
	return call(root, "getDirectoryHandle", cacheFolder, map[string]any{"create": true})
}

// fetchModel returns the model at url: from the cache when a checked copy is
// there, else downloaded (and stored, when useCache). progress gets
// ("download" | "verify", bytes done, bytes in all; total -1 when unknown).
func fetchModel(ctx context.Context, url string, useCache bool, progress func(phase string, done, total int64)) (*fetched, error) {
	name := url[strings.LastIndex(url, "/")+1:]
	if i := strings.IndexAny(name, "?#"); i >= 0 {
		name = name[:i]
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
	key := cacheKey(url)
	if !useCache {
		f, err := download(ctx, dir, key, url, false, progress)
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
	err := underLock(ctx, "tessera-cache:"+key, func() error {
		var err error
		if f, err = cachedModel(ctx, dir, key, url, progress); err == nil {
			return nil
		}
		console("info", fmt.Sprintf("tessera: fetching %s again: %v", url, err))
		removeEntry(dir, key)
		f, err = download(ctx, dir, key, url, true, progress)
		return err
	})
	if err != nil {
		return nil, err
	}
	f.name = name
	return f, nil
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

// cachedModel returns the cached copy of url after checking it.
func cachedModel(ctx context.Context, dir js.Value, key, url string, progress func(string, int64, int64)) (*fetched, error) {
	meta, err := readMeta(dir, key)
	if err != nil {
		return nil, err
	}
	if meta.URL != url {
		return nil, errors.New("the cache entry belongs to another URL")
	}
	fh, err := call(dir, "getFileHandle", key+".gguf")
	if err != nil {
		return nil, err
	}
	file, err := call(fh, "getFile")
	if err != nil {
		return nil, err
	}
	if size := int64(file.Get("size").Float()); size != meta.Size {
		return nil, fmt.Errorf("the cached file has %d bytes, %d were saved", size, meta.Size)
	}
	if err := checkFresh(ctx, url, meta); err != nil {
		return nil, err
	}
	sum, err := hashBlob(file, func(done, total int64) { progress("verify", done, total) })
	if err != nil {
		return nil, err
	}
	if sum != meta.Hash {
		return nil, errors.New("the cached file's hash differs from the one saved with it")
	}
	return &fetched{blob: file, hash: sum, cached: true, stored: true}, nil
}

// checkFresh asks the server whether url changed since it was saved. No
// answer (offline, a server without HEAD) keeps the cached copy.
func checkFresh(ctx context.Context, url string, meta *cacheMeta) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := fetch(ctx, url, "HEAD")
	if err != nil || !resp.Get("ok").Bool() {
		return nil
	}
	h := resp.Get("headers")
	get := func(k string) string {
		v := h.Call("get", k)
		if v.IsNull() {
			return ""
		}
		return v.String()
	}
	if n, err := strconv.ParseInt(get("content-length"), 10, 64); err == nil && get("content-encoding") == "" && n != meta.Size {
		return fmt.Errorf("the server now has %d bytes, %d are cached", n, meta.Size)
	}
	if et := get("etag"); et != "" && meta.ETag != "" && et != meta.ETag {
		return errors.New("the server's ETag changed")
	}
	if lm := get("last-modified"); lm != "" && meta.LastModified != "" && lm != meta.LastModified {
		return errors.New("the server's Last-Modified changed")
	}
	return nil
}

// fetch starts a request that ctx can abort and waits for its headers.
func fetch(ctx context.Context, url, method string) (js.Value, error) {
	ctl := js.Global().Get("AbortController").New()
	stop := context.AfterFunc(ctx, func() { ctl.Call("abort") })
	defer stop()
	resp, err := call(js.Global(), "fetch", url, map[string]any{
		"method": method,
		"signal": ctl.Get("signal"),
		"cache":  "no-store", // the model goes to our cache, not also to the HTTP cache
	})
	if err != nil {
		if ctx.Err() != nil {
			return js.Value{}, errAborted
		}
		return js.Value{}, fmt.Errorf("fetching %s: %w", url, err)
	}
	return resp, nil
}

// download fetches url, hashing it as it streams in, into the cache (when
// useCache) or into a Blob in JavaScript memory. Either way the bytes stay
// out of the wasm heap.
func download(ctx context.Context, dir js.Value, key, url string, useCache bool, progress func(string, int64, int64)) (*fetched, error) {
	ctl := js.Global().Get("AbortController").New()
	stop := context.AfterFunc(ctx, func() { ctl.Call("abort") })
	defer stop()
	resp, err := call(js.Global(), "fetch", url, map[string]any{"signal": ctl.Get("signal"), "cache": "no-store"})
	if err != nil {
		if ctx.Err() != nil {
			return nil, errAborted
		}
		return nil, fmt.Errorf("%w: fetching %s: %v", errNetwork, url, err)
	}
	if !resp.Get("ok").Bool() {
		return nil, fmt.Errorf("%w: fetching %s: HTTP %d %s", errNetwork, url, resp.Get("status").Int(), resp.Get("statusText").String())
	}
	h := resp.Get("headers")
	header := func(k string) string {
		v := h.Call("get", k)
		if v.IsNull() {
			return ""
		}
		return v.String()
	}
	total := int64(-1)
	if n, err := strconv.ParseInt(header("content-length"), 10, 64); err == nil && header("content-encoding") == "" {
		total = n
	}

	var fh, writable js.Value
	if useCache {
		if fh, err = call(dir, "getFileHandle", key+".gguf", map[string]any{"create": true}); err == nil {
			writable, err = call(fh, "createWritable")
		}
		if err != nil {
			console("warn", fmt.Sprintf("tessera: not caching %s: %v", url, err))
			useCache = false
		}
	}
	fail := func(err error) (*fetched, error) {
		if useCache {
			jsCall(writable, "abort")
			removeEntry(dir, key)
		}
		if ctx.Err() != nil {
			return nil, errAborted
		}
		return nil, err
	}

	// Network chunks are gathered into 8 MiB pieces in JavaScript memory:
	// each piece is hashed and written to storage with one call, so a big
	// download costs a few awaits per piece rather than two per chunk.
	reader := resp.Get("body").Call("getReader")
	u8 := js.Global().Get("Uint8Array")
	sum := newPieceHash()
	var parts []any // without the cache: the Blob's parts
	piece, fill := u8.New(hashPiece), 0
	flush := func() error {
		if fill == 0 {
			return nil
		}
		p := piece.Call("subarray", 0, fill)
		if err := sum.add(p); err != nil {
			return err
		}
		if useCache {
			if _, err := call(writable, "write", p); err != nil {
				return fmt.Errorf("%w: saving %s to browser storage: %v (clear the cache, or load without caching)", errStorage, url, err)
			}
		} else {
			parts = append(parts, p)
			piece = u8.New(hashPiece) // the Blob keeps the old one
		}
		fill = 0
		return nil
	}
	var done int64
	progress("download", 0, total)
	for {
		res, err := call(reader, "read")
		if err != nil {
			return fail(fmt.Errorf("%w: downloading %s: %v", errNetwork, url, err))
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
					return fail(err)
				}
			}
		}
		done += int64(n)
		progress("download", done, total)
	}
	if err := flush(); err != nil {
		return fail(err)
	}
	if total >= 0 && done != total {
		return fail(fmt.Errorf("%w: %s ended after %d of %d bytes", errNetwork, url, done, total))
	}
	f := &fetched{hash: sum.sum(), stored: useCache}
	if !useCache {
		f.blob = js.Global().Get("Blob").New(parts)
		return f, nil
	}
	if _, err := call(writable, "close"); err != nil {
		return fail(fmt.Errorf("%w: saving %s to browser storage: %v", errStorage, url, err))
	}
	meta := cacheMeta{URL: url, Size: done, Hash: f.hash, ETag: header("etag"),
		LastModified: header("last-modified"), Saved: time.Now().UTC().Format(time.RFC3339)}
	if err := writeMeta(dir, key, meta); err != nil {
		return fail(fmt.Errorf("%w: saving %s to browser storage: %v", errStorage, url, err))
	}
	if f.blob, err = call(fh, "getFile"); err != nil {
		return fail(err)
	}
	return f, nil
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

// removeEntry deletes an entry's files, ignoring those already gone.
func removeEntry(dir js.Value, key string) {
	for _, name := range []string{key + ".json", key + ".gguf"} {
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
			if m, err := readMeta(dir, key); err == nil {
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
