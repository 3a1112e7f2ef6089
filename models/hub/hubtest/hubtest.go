// Package hubtest is a fake Hugging Face Hub for tests: the parts of its
// HTTP interface that a pull touches, on a local httptest server, with
// switches for the ways a real download goes wrong.
//
// It serves
//
//	GET  /api/models/OWNER/REPO                 {"siblings": [{"rfilename": ...}]}
//	GET  /OWNER/REPO/resolve/main/FILE          302 to /cdn/SHA256, with X-Linked-Etag and X-Linked-Size
//	HEAD /OWNER/REPO/resolve/main/FILE          the same headers
//	GET  /cdn/SHA256                            the bytes, honouring "Range: bytes=N-"
//	GET  /plain/NAME                            a file outside any repository, without checksum headers
//
// as the Hub does for LFS files, whose content its CDN serves from a
// signed URL.
package hubtest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// A Hub is the fake. Its fields may be changed between requests.
type Hub struct {
	*httptest.Server
	// CDN serves the /cdn/ paths the Hub redirects to: the Hub's own
	// server unless SeparateCDN started another (another host, as the
	// real CDN is).
	CDN *httptest.Server

	mu       sync.Mutex
	token    string
	repos    map[string]map[string]*File
	plain    map[string]*File
	requests []Request
}

// A File is one file the fake serves, with the faults to inject.
type File struct {
	Data   []byte
	SHA256 string
	// Corrupt serves the bytes with one of them changed, while the Hub
	// still reports the true checksum.
	Corrupt bool
	// DropAfter, when positive, makes the first GET of the content close
	// the connection after that many bytes of the body.
	DropAfter int
	// Stall, when positive, makes every GET of the content stop after
	// that many bytes and wait until the client goes away.
	Stall int
	// IgnoreRange answers every request with the whole file (200).
	IgnoreRange bool
	// Trickle, when positive, sends the body in pieces of that many
	// bytes, TrickleEvery apart: a download that is slow but never
	// silent for long.
	Trickle      int
	TrickleEvery time.Duration

	gets int
}

// A Request is what the fake saw of one request.
type Request struct {
	Server        string // "hub" or "cdn"
	Method, Path  string
	Range         string
	Authorization string
}

// New starts a fake Hub, closed when the test ends.
func New(t testing.TB) *Hub {
	h := &Hub{repos: map[string]map[string]*File{}, plain: map[string]*File{}}
	h.Server = httptest.NewServer(h.handler("hub"))
	h.CDN = h.Server
	t.Cleanup(func() {
		h.Server.Close()
		if h.CDN != h.Server {
			h.CDN.Close()
		}
	})
	return h
}

// SeparateCDN serves content from a second server, on another port, so a
// test can check what reaches a host other than the Hub's.
func (h *Hub) SeparateCDN() {
	h.CDN = httptest.NewServer(h.handler("cdn"))
}

// RequireToken makes the Hub's API and resolve paths answer 401 unless
// the request carries "Authorization: Bearer token".
func (h *Hub) RequireToken(token string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.token = token
}

// Add puts a file into a repository (OWNER/REPO), creating it.
func (h *Hub) Add(repo, name string, data []byte) *File {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.repos[repo] == nil {
		h.repos[repo] = map[string]*File{}
	}
	f := newFile(data)
	h.repos[repo][name] = f
	return f
}

// AddPlain serves a file at /plain/NAME and returns its URL.
func (h *Hub) AddPlain(name string, data []byte) (*File, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := newFile(data)
	h.plain[name] = f
	return f, h.URL + "/plain/" + name
}

func newFile(data []byte) *File {
	sum := sha256.Sum256(data)
	return &File{Data: data, SHA256: hex.EncodeToString(sum[:])}
}

// Requests returns the requests seen so far.
func (h *Hub) Requests() []Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Request(nil), h.requests...)
}

// ContentRequests returns the requests for content (/cdn/ and /plain/).
func (h *Hub) ContentRequests() []Request {
	var rs []Request
	for _, r := range h.Requests() {
		if strings.HasPrefix(r.Path, "/cdn/") || strings.HasPrefix(r.Path, "/plain/") {
			rs = append(rs, r)
		}
	}
	return rs
}

func (h *Hub) handler(server string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.requests = append(h.requests, Request{Server: server, Method: r.Method, Path: r.URL.Path,
			Range: r.Header.Get("Range"), Authorization: r.Header.Get("Authorization")})
		token := h.token
		h.mu.Unlock()
		p := r.URL.Path
		switch {
		case strings.HasPrefix(p, "/cdn/"):
			h.serveContent(w, r, h.bySHA(strings.TrimPrefix(p, "/cdn/")))
			return
		case strings.HasPrefix(p, "/plain/"):
			h.mu.Lock()
			f := h.plain[strings.TrimPrefix(p, "/plain/")]
			h.mu.Unlock()
			h.serveContent(w, r, f)
			return
		case server != "hub":
			http.NotFound(w, r)
			return
		}
		if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
			w.Header().Set("X-Error-Code", "GatedRepo")
			http.Error(w, "Access to this model is restricted", http.StatusUnauthorized)
			return
		}
		parts := strings.SplitN(strings.TrimPrefix(p, "/"), "/", 5)
		switch {
		case len(parts) == 4 && parts[0] == "api" && parts[1] == "models" && r.Method == http.MethodGet:
			h.serveListing(w, parts[2]+"/"+parts[3])
		case len(parts) == 5 && parts[2] == "resolve" && parts[3] == "main" &&
			(r.Method == http.MethodGet || r.Method == http.MethodHead):
			h.serveResolve(w, r, parts[0]+"/"+parts[1], parts[4])
		default:
			http.NotFound(w, r)
		}
	})
}

func (h *Hub) serveListing(w http.ResponseWriter, repo string) {
	h.mu.Lock()
	files, ok := h.repos[repo]
	var names []string
	for n := range files {
		names = append(names, n)
	}
	h.mu.Unlock()
	if !ok {
		w.Header().Set("X-Error-Code", "RepoNotFound")
		http.Error(w, `{"error":"Repository not found"}`, http.StatusNotFound)
		return
	}
	sort.Strings(names)
	type sibling struct {
		Name string `json:"rfilename"`
	}
	info := struct {
		ID       string    `json:"id"`
		Siblings []sibling `json:"siblings"`
	}{ID: repo}
	// Real listings hold more than GGUFs.
	info.Siblings = append(info.Siblings, sibling{".gitattributes"}, sibling{"README.md"})
	for _, n := range names {
		info.Siblings = append(info.Siblings, sibling{n})
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(info)
}

func (h *Hub) serveResolve(w http.ResponseWriter, r *http.Request, repo, name string) {
	h.mu.Lock()
	f := h.repos[repo][name]
	h.mu.Unlock()
	if f == nil {
		w.Header().Set("X-Error-Code", "EntryNotFound")
		http.Error(w, "Entry not found", http.StatusNotFound)
		return
	}
	w.Header().Set("X-Linked-Etag", `"`+f.SHA256+`"`)
	w.Header().Set("X-Linked-Size", strconv.Itoa(len(f.Data)))
	// The ETag of a redirect is the git object's, not the content's.
	w.Header().Set("ETag", `"`+f.SHA256[:40]+`"`)
	w.Header().Set("Location", h.CDN.URL+"/cdn/"+f.SHA256+"?X-Amz-Signature=fake")
	w.WriteHeader(http.StatusFound)
}

func (h *Hub) bySHA(sha string) *File {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, files := range h.repos {
		for _, f := range files {
			if f.SHA256 == sha {
				return f
			}
		}
	}
	return nil
}

func (h *Hub) serveContent(w http.ResponseWriter, r *http.Request, f *File) {
	if f == nil {
		http.NotFound(w, r)
		return
	}
	h.mu.Lock()
	f.gets++
	first := f.gets == 1
	data := f.Data
	if f.Corrupt {
		data = append([]byte(nil), data...)
		data[len(data)/2] ^= 0xff
	}
	drop, stall, ignore := f.DropAfter, f.Stall, f.IgnoreRange
	trickle, every := f.Trickle, f.TrickleEvery
	h.mu.Unlock()

	start, status := 0, http.StatusOK
	if rg := r.Header.Get("Range"); rg != "" && !ignore {
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(rg, "bytes="), "-"))
		if err != nil || !strings.HasSuffix(rg, "-") {
			http.Error(w, "this fake only serves open ranges", http.StatusBadRequest)
			return
		}
		if n >= len(data) {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", len(data)))
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			return
		}
		start, status = n, http.StatusPartialContent
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", n, len(data)-1, len(data)))
	}
	body := data[start:]
	w.Header().Set("Accept-Ranges", "bytes")
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	switch {
	case trickle > 0:
		rc := http.NewResponseController(w)
		for len(body) > 0 {
			n := min(trickle, len(body))
			if _, err := w.Write(body[:n]); err != nil {
				return
			}
			rc.Flush()
			body = body[n:]
			select {
			case <-time.After(every):
			case <-r.Context().Done():
				return
			}
		}
	case stall > 0 && stall < len(body):
		w.Write(body[:stall])
		http.NewResponseController(w).Flush()
		<-r.Context().Done()
	case drop > 0 && first && drop < len(body):
		w.Write(body[:drop])
		rc := http.NewResponseController(w)
		rc.Flush()
		if conn, _, err := rc.Hijack(); err == nil {
			conn.Close()
		}
	default:
		w.Write(body)
	}
}
