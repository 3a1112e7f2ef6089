package hub

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"time"
)

// meta is what the Hub says about a file before redirecting to the CDN.
type meta struct {
	sha  string // hex SHA-256, or "" when no response carried one
	size int64  // -1 when unknown
}

// transientError marks a failure that resuming may cure: the connection
// dropped, the server was briefly unavailable.
type transientError struct{ err error }

func (e transientError) Error() string { return e.err.Error() }
func (e transientError) Unwrap() error { return e.err }

// download fetches one file into the cache and returns its record. A
// previous attempt's .part file is resumed; a transient failure (a
// dropped connection, a timeout) resumes again, up to Retries times,
// after a pause that doubles each time. Every file it touches is reached
// through the cache's root.
func (c *Client) download(ctx context.Context, f remote, label string) (File, error) {
	root, err := c.Cache.open(true)
	if err != nil {
		return File{}, err
	}
	defer root.Close()
	if rec, ok := c.reusable(ctx, root, f); ok {
		fmt.Fprintf(c.log(), "%s: up to date (%s, sha256 %s)\n", label, FormatSize(rec.Size), rec.SHA256[:12])
		return rec, nil
	}
	// The folders are checked before they are made, for the clearer
	// error (the root would refuse a symlink out anyway), and after, in
	// case one changed in between.
	dir := path.Dir(f.local)
	if err := checkDirs(root, dir); err != nil {
		return File{}, err
	}
	if err := root.MkdirAll(dir, 0o755); err != nil {
		return File{}, fmt.Errorf("model cache %s: %w", c.Cache.Dir, err)
	}
	if err := checkDirs(root, dir); err != nil {
		return File{}, err
	}
	retries, wait := c.Retries, c.RetryWait
	if retries == 0 {
		retries = 3
	}
	if retries < 0 {
		retries = 0
	}
	if wait == 0 {
		wait = time.Second
	}
	kept := func(err error) error {
		return fmt.Errorf("%s: %w (the partial download is kept and resumes next time)", f.name, err)
	}
	for attempt := 0; ; attempt++ {
		rec, err := c.fetch(ctx, root, f, label)
		if err == nil {
			return rec, nil
		}
		if ctx.Err() != nil {
			return File{}, kept(ctx.Err())
		}
		var te transientError
		if !errors.As(err, &te) {
			return File{}, err
		}
		if attempt >= retries {
			if retries > 0 {
				return File{}, fmt.Errorf("%w (gave up after %d retries; the partial download is kept and the next pull resumes it)", err, retries)
			}
			return File{}, fmt.Errorf("%w (the partial download is kept and the next pull resumes it)", err)
		}
		fmt.Fprintf(c.log(), "%s: %v; resuming in %s\n", label, err, wait)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return File{}, kept(ctx.Err())
		}
		wait *= 2
	}
}

// reusable reports whether the cache already holds the file as the Hub has
// it now: the index knows its checksum and the Hub reports the same one.
func (c *Client) reusable(ctx context.Context, root *os.Root, f remote) (File, bool) {
	rec, ok := c.Cache.file(root, f.local)
	if !ok || rec.SHA256 == "" {
		return File{}, false
	}
	if st, err := inspect(root, f.local); err != nil || st.Size() != rec.Size {
		return File{}, false
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, f.url, nil)
	if err != nil {
		return File{}, false
	}
	c.authorize(req)
	resp, err := c.do(c.httpClient(), req)
	if err != nil {
		return File{}, false
	}
	resp.Body.Close()
	m := c.meta(resp, meta{size: -1})
	return rec, m.sha == rec.SHA256
}

// fetch makes one attempt at a file: it resumes the .part file where it
// ends, appends the body, checks the length and the checksum, and renames
// the result into place.
func (c *Client) fetch(ctx context.Context, root *os.Root, f remote, label string) (File, error) {
	part := f.local + ".part"
	if _, err := inspect(root, part); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return File{}, fmt.Errorf("model cache: %s: %w", part, err)
	}
	fh, err := root.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return File{}, fmt.Errorf("model cache: %w", err)
	}
	defer fh.Close()
	have, err := fh.Seek(0, io.SeekEnd)
	if err != nil {
		return File{}, err
	}
	// The checksum of what an earlier attempt left is computed before
	// the request, whose body would otherwise sit unread (and trip the
	// stall timeout) while a large part is hashed.
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(fh, 0, have)); err != nil {
		return File{}, err
	}
	resp, m, err := c.open(ctx, f.url, have)
	if err != nil {
		return File{}, named(f.name, err)
	}
	if have > 0 && (resp.StatusCode == http.StatusRequestedRangeNotSatisfiable ||
		resp.StatusCode == http.StatusPartialContent && rangeStart(resp) != have) {
		// The part file is as long as the file or longer (it changed on
		// the server), or the server sent a range we did not ask for:
		// start over.
		resp.Body.Close()
		have = 0
		if resp, m, err = c.open(ctx, f.url, 0); err != nil {
			return File{}, named(f.name, err)
		}
	}
	defer resp.Body.Close()
	total := int64(-1)
	switch {
	case resp.StatusCode == http.StatusPartialContent && have > 0:
		_, end, tot, _ := contentRange(resp.Header.Get("Content-Range"))
		if total = tot; tot < 0 {
			total = end + 1
		}
	case resp.StatusCode == http.StatusOK:
		// The whole file: a server that ignores Range answers this way.
		if have > 0 {
			fmt.Fprintf(c.log(), "%s: the server ignored the range; starting over\n", label)
		}
		have = 0
		total = resp.ContentLength
	default:
		return File{}, statusFailure(resp, c.Token != "")
	}
	if have == 0 {
		h.Reset()
		if err := fh.Truncate(0); err != nil {
			return File{}, err
		}
	}
	if total < 0 {
		total = m.size
	}
	if m.size >= 0 && total >= 0 && m.size != total {
		return File{}, fmt.Errorf("%s: the Hub says %d bytes, the download server %d", f.name, m.size, total)
	}

	if _, err := fh.Seek(have, io.SeekStart); err != nil {
		return File{}, err
	}
	out := io.MultiWriter(fh, h)
	if c.Progress != nil {
		if p := c.Progress(label, total, have); p != nil {
			defer p.Close()
			out = io.MultiWriter(fh, h, p)
		}
	}
	start, resumed := time.Now(), have
	n, err := copyBody(out, resp.Body)
	have += n
	if err != nil {
		var te transientError
		if errors.As(err, &te) {
			return File{}, transientError{fmt.Errorf("%s: %w (%s of %s arrived)", f.name, te.err, FormatSize(have), sizeOrUnknown(total))}
		}
		return File{}, fmt.Errorf("%s: writing %s: %w", f.name, part, err)
	}
	if total >= 0 && have != total {
		return File{}, transientError{fmt.Errorf("%s: %d of %d bytes arrived", f.name, have, total)}
	}
	if err := fh.Sync(); err != nil {
		return File{}, err
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if m.sha != "" && sum != m.sha {
		fh.Close()
		root.Remove(part)
		return File{}, fmt.Errorf("%s: %w: the download's is %s, the Hub's %s; deleted it, pull again to retry",
			f.name, ErrChecksum, sum, m.sha)
	}
	if err := fh.Close(); err != nil {
		return File{}, err
	}
	if err := root.Rename(part, f.local); err != nil {
		return File{}, fmt.Errorf("model cache: %w", err)
	}
	line := fmt.Sprintf("%s: %s in %s", label, FormatSize(have), time.Since(start).Round(time.Millisecond))
	if resumed > 0 {
		line += fmt.Sprintf(", resumed at %s", FormatSize(resumed))
	}
	if m.sha != "" {
		line += ", sha256 verified"
	} else {
		line += ", no checksum to verify against"
	}
	fmt.Fprintln(c.log(), line)
	return File{Name: f.name, Path: f.local, URL: f.url, Size: have, SHA256: sum, Verified: m.sha != ""}, nil
}

// named puts a file's name before a transient error, which comes from the
// network and does not say which download it ended.
func named(name string, err error) error {
	var te transientError
	if errors.As(err, &te) {
		return transientError{fmt.Errorf("%s: %w", name, te.err)}
	}
	return err
}

// sizeOrUnknown writes a size that may be unknown (-1).
func sizeOrUnknown(n int64) string {
	if n < 0 {
		return "an unknown size"
	}
	return FormatSize(n)
}

// copyBody copies the body, telling a failed read (the network: transient)
// from a failed write (the disk: not).
func copyBody(w io.Writer, body io.Reader) (int64, error) {
	buf := make([]byte, 256<<10)
	var n int64
	for {
		k, rerr := body.Read(buf)
		if k > 0 {
			if _, err := w.Write(buf[:k]); err != nil {
				return n, err
			}
			n += int64(k)
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, transientError{rerr}
		}
	}
}

// open requests a file from offset on, following redirects itself: the
// Hub's own response carries the checksum (X-Linked-Etag) that the CDN's
// does not, and the token must not follow the request to another host.
func (c *Client) open(ctx context.Context, rawURL string, offset int64) (*http.Response, meta, error) {
	m := meta{size: -1}
	u := rawURL
	for range 10 {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, m, err
		}
		if offset > 0 {
			req.Header.Set("Range", fmt.Sprintf("bytes=%d-", offset))
		}
		c.authorize(req)
		resp, err := c.do(c.httpClient(), req)
		if err != nil {
			if ctx.Err() != nil {
				return nil, m, ctx.Err()
			}
			return nil, m, transientError{err}
		}
		m = c.meta(resp, m)
		loc := resp.Header.Get("Location")
		if resp.StatusCode < 300 || resp.StatusCode >= 400 || loc == "" || resp.StatusCode == http.StatusNotModified {
			return resp, m, nil
		}
		resp.Body.Close()
		next, err := req.URL.Parse(loc)
		if err != nil {
			return nil, m, fmt.Errorf("%s: bad redirect %q: %v", req.URL.Redacted(), loc, err)
		}
		if next.Scheme != "https" && next.Scheme != "http" {
			return nil, m, fmt.Errorf("%s: redirect to %s", req.URL.Redacted(), next.Redacted())
		}
		u = next.String()
	}
	return nil, m, fmt.Errorf("%s: too many redirects", rawURL)
}

// meta reads the checksum and size the Hub reports for an LFS file: its
// X-Linked-Etag is the SHA-256 of the content (the ETag of a resolve
// response that is not a redirect may be it too, when it is 64 hex
// digits). Only the Hub's own responses are believed: a CDN's ETag is its
// own business.
func (c *Client) meta(resp *http.Response, m meta) meta {
	if !c.onHub(resp.Request.URL) {
		return m
	}
	if m.sha == "" {
		m.sha = etagSHA(resp.Header.Get("X-Linked-Etag"))
		if m.sha == "" {
			m.sha = etagSHA(resp.Header.Get("ETag"))
		}
	}
	if m.size < 0 {
		if n, err := strconv.ParseInt(resp.Header.Get("X-Linked-Size"), 10, 64); err == nil && n >= 0 {
			m.size = n
		}
	}
	return m
}

// etagSHA returns the SHA-256 an ETag holds ("W/" and quotes stripped), or
// "" when it is not one.
func etagSHA(tag string) string {
	tag = strings.Trim(strings.TrimPrefix(strings.TrimSpace(tag), "W/"), `"`)
	if len(tag) != 64 {
		return ""
	}
	if _, err := hex.DecodeString(tag); err != nil {
		return ""
	}
	return strings.ToLower(tag)
}

// rangeStart is where a 206 response's range starts, or -1.
func rangeStart(resp *http.Response) int64 {
	start, _, _, ok := contentRange(resp.Header.Get("Content-Range"))
	if !ok {
		return -1
	}
	return start
}

// contentRange parses "bytes START-END/TOTAL" (TOTAL may be "*": -1).
func contentRange(s string) (start, end, total int64, ok bool) {
	rest, found := strings.CutPrefix(strings.TrimSpace(s), "bytes ")
	if !found {
		return 0, 0, 0, false
	}
	rng, tot, found := strings.Cut(rest, "/")
	a, b, found2 := strings.Cut(rng, "-")
	if !found || !found2 {
		return 0, 0, 0, false
	}
	var err1, err2, err3 error
	start, err1 = strconv.ParseInt(a, 10, 64)
	end, err2 = strconv.ParseInt(b, 10, 64)
	total = -1
	if tot != "*" {
		total, err3 = strconv.ParseInt(tot, 10, 64)
	}
	if err1 != nil || err2 != nil || err3 != nil || end < start {
		return 0, 0, 0, false
	}
	return start, end, total, true
}

// statusFailure is a failed response's error, transient when a retry may
// cure it.
func statusFailure(resp *http.Response, token bool) error {
	err := statusError(resp, token)
	var he *httpError
	if errors.As(err, &he) && he.transient() {
		return transientError{err}
	}
	return err
}

// FormatSize writes a byte count for people: 1.2 GiB, 340.0 KiB, 12 B.
func FormatSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
