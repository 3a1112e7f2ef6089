// Package hub pulls GGUF models from the Hugging Face Hub, or any HTTPS
// URL, into a local cache, so that a model can be named by reference
// (hf.co/OWNER/REPO:Q4_K_M) where a path would otherwise be needed.
//
// A pull resolves the reference (the Hub's API lists a repository's files
// when a quant tag must pick one), downloads every file of the model
// (all shards of a split GGUF) through the Hub's redirect to its CDN,
// resumes an interrupted download from its .part file with a Range
// request, checks the SHA-256 the Hub reports for the file, and records
// the model in the cache's index. The package knows nothing of model
// formats: it hands back paths for models.Open.
//
// Nothing a pull talks to can hang it: every stage of every request
// (connect, TLS handshake, response headers, each wait for more of a
// body) has its own deadline, and a download that times out resumes like
// one whose connection dropped. Nothing in the cache's index can steer it
// outside its directory: every file operation goes through an os.Root on
// the cache, and a record that points elsewhere is reported as damaged
// rather than followed (see Cache).
package hub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// DefaultEndpoint is the Hub; HF_ENDPOINT overrides it, as it does for
// huggingface_hub, to reach a mirror or a test server.
const DefaultEndpoint = "https://huggingface.co"

// ErrOffline is returned when a model is not in the cache and the client
// may not touch the network.
var ErrOffline = errors.New("offline")

// ErrChecksum is returned when a download's SHA-256 is not the one the Hub
// reports; the download is deleted.
var ErrChecksum = errors.New("sha256 mismatch")

// A Client pulls models into a cache. The zero value of each field but
// Cache means its default.
type Client struct {
	// Endpoint is the Hub's base URL (DefaultEndpoint when empty).
	Endpoint string
	// Token is sent as a bearer token to the Hub, and only to the Hub's
	// host: the CDN it redirects to gets signed URLs and no token.
	Token string
	// Cache is where models are stored.
	Cache Cache
	// Offline refuses every network request with ErrOffline.
	Offline bool
	// HTTP is the client whose transport requests go through; its
	// redirect policy is replaced, since the client follows redirects
	// itself to read the Hub's headers and keep the token off the CDN.
	// Without a Transport of its own, requests go through a copy of
	// http.DefaultTransport. The timeouts below apply either way: the
	// client watches each request itself.
	HTTP *http.Client
	// DialTimeout bounds the DNS lookup and TCP connect of a request,
	// TLSTimeout its TLS handshake, HeaderTimeout the wait for its
	// response's headers, and StallTimeout each wait for more of a body:
	// a download that delivers nothing for that long ends (and resumes
	// as the Retries allow), while one that is slow but moving goes on
	// however long it takes. Zero means the Default*Timeout, negative
	// no limit. A timeout is a *TimeoutError that names the stage and
	// the host.
	DialTimeout, TLSTimeout, HeaderTimeout, StallTimeout time.Duration
	// Log receives one line per downloaded file (and notes such as which
	// file a reference without a tag picked); nil discards them.
	Log io.Writer
	// Progress, if set, shows a download as it goes (a bar on a
	// terminal): it is called when a file starts, with its size (-1 when
	// unknown) and the bytes already there from an earlier try, is sent
	// every byte that arrives, and is closed when the download ends. The
	// line on Log comes either way.
	Progress func(label string, total, have int64) io.WriteCloser
	// Retries is how many times a download interrupted by the network
	// resumes before the pull fails (0: 3; negative: none).
	Retries int
	// RetryWait is the pause before the first retry, doubled for each
	// one after it (0: one second).
	RetryWait time.Duration

	// mu guards rt, the transport built on first use from the timeouts,
	// kept so that the requests of a pull share connections.
	mu sync.Mutex
	rt http.RoundTripper
}

// FromEnv returns a client configured as the environment says: HF_ENDPOINT,
// HF_TOKEN, TESSERA_CACHE (default: tessera under the user's cache
// directory) and TESSERA_OFFLINE (1 or true: offline).
func FromEnv() (*Client, error) {
	dir := os.Getenv("TESSERA_CACHE")
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return nil, fmt.Errorf("no cache directory (set TESSERA_CACHE): %v", err)
		}
		dir = filepath.Join(base, "tessera")
	}
	c := &Client{Endpoint: os.Getenv("HF_ENDPOINT"), Token: strings.TrimSpace(os.Getenv("HF_TOKEN")), Cache: Cache{Dir: dir}}
	switch strings.ToLower(strings.TrimSpace(os.Getenv("TESSERA_OFFLINE"))) {
	case "1", "true", "yes", "on":
		c.Offline = true
	}
	return c, nil
}

// Get returns the cached model a reference names, pulling it when it is
// not in the cache.
func (c *Client) Get(ctx context.Context, r Ref) (Entry, error) {
	e, ok, err := c.Cache.Lookup(r)
	if err != nil || ok {
		return e, err
	}
	if c.Offline {
		return Entry{}, fmt.Errorf("%s is not in the cache (%s) and offline mode forbids downloading it: %w", r, c.Cache.Dir, ErrOffline)
	}
	fmt.Fprintf(c.log(), "%s is not in the cache: pulling it into %s\n", r, c.Cache.Dir)
	return c.Pull(ctx, r)
}

// Pull downloads the model a reference names into the cache, even when it
// is there already (files whose checksum the index holds and the Hub
// confirms are kept rather than downloaded again), and records it in the
// index.
func (c *Client) Pull(ctx context.Context, r Ref) (Entry, error) {
	if c.Offline {
		return Entry{}, fmt.Errorf("pulling %s: %w (--offline or TESSERA_OFFLINE is set)", r, ErrOffline)
	}
	if c.Cache.Dir == "" {
		return Entry{}, errors.New("hub: Client.Cache.Dir is empty")
	}
	pl, err := c.resolve(ctx, r)
	if err != nil {
		return Entry{}, err
	}
	if pl.note != "" {
		fmt.Fprintf(c.log(), "%s: %s\n", r, pl.note)
	}
	e := Entry{Ref: r.String(), Repo: pl.repo}
	for i, f := range pl.files {
		label := f.name
		if len(pl.files) > 1 {
			label = fmt.Sprintf("%s (%d/%d)", f.name, i+1, len(pl.files))
		}
		got, err := c.download(ctx, f, label)
		if err != nil {
			return Entry{}, fmt.Errorf("pulling %s: %w", r, err)
		}
		e.Files = append(e.Files, got)
		e.Size += got.Size
	}
	e.Time = time.Now().UTC().Truncate(time.Second)
	if err := c.Cache.put(e); err != nil {
		return Entry{}, err
	}
	return e, nil
}

func (c *Client) endpoint() string {
	if c.Endpoint == "" {
		return DefaultEndpoint
	}
	return strings.TrimRight(c.Endpoint, "/")
}

func (c *Client) log() io.Writer {
	if c.Log == nil {
		return io.Discard
	}
	return c.Log
}

// httpClient returns the client that requests go through, with redirects
// left to the caller.
func (c *Client) httpClient() *http.Client {
	hc := &http.Client{}
	if c.HTTP != nil {
		*hc = *c.HTTP
	}
	hc.Transport = c.transport()
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return hc
}

// onHub reports whether u is on the Hub's own host, the only one the token
// and the checksum headers are trusted from.
func (c *Client) onHub(u *url.URL) bool {
	hub, err := url.Parse(c.endpoint())
	return err == nil && strings.EqualFold(u.Host, hub.Host) && u.Scheme == hub.Scheme
}

// authorize adds the token to a request for the Hub.
func (c *Client) authorize(req *http.Request) {
	req.Header.Set("User-Agent", "tessera")
	if c.Token != "" && c.onHub(req.URL) {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
}

// statusError describes a failed response, with a hint for the statuses a
// user can do something about.
func statusError(resp *http.Response, token bool) error {
	err := &httpError{code: resp.StatusCode, url: resp.Request.URL.Redacted()}
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		if token {
			err.hint = "HF_TOKEN was sent: does it grant access to this repository (gated models need their terms accepted)?"
		} else {
			err.hint = "the repository may be private or gated: set HF_TOKEN"
		}
	case http.StatusNotFound:
		err.hint = "no such repository or file"
	}
	return err
}

type httpError struct {
	code      int
	url, hint string
}

func (e *httpError) Error() string {
	s := fmt.Sprintf("%s: %s", e.url, http.StatusText(e.code))
	if s == e.url+": " {
		s = fmt.Sprintf("%s: HTTP %d", e.url, e.code)
	}
	if e.hint != "" {
		s += " (" + e.hint + ")"
	}
	return s
}

// transient reports whether a retry may cure the status.
func (e *httpError) transient() bool {
	return e.code >= 500 || e.code == http.StatusTooManyRequests || e.code == http.StatusRequestTimeout
}
