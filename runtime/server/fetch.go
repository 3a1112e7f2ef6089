package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/tessera-llm/tessera/runtime/wire"
)

// RemoteImages lets requests name images by http(s) URL, which the server
// then fetches (Options.RemoteImages; serve --image-urls). It is off by
// default: a server that fetches what its clients name makes requests on
// their behalf, from inside its network. So each fetch is bounded (bytes:
// Options.ImageLimits.MaxBytes; time; redirects), and addresses that are
// not public (loopback, private, link-local, CGNAT, multicast) are refused
// at connection time, after DNS, so a name cannot resolve its way in.
type RemoteImages struct {
	// Timeout bounds one fetch from its request to its last byte
	// (default DefaultImageFetchTimeout).
	Timeout time.Duration
	// MaxRedirects is how many redirects a fetch follows (default 3;
	// negative: none). Each is checked as the first URL is.
	MaxRedirects int
	// Hosts, when not empty, are the only host names fetched from
	// (exactly, case-insensitively; no wildcards).
	Hosts []string
	// AllowPrivate also fetches from addresses that are not public: for a
	// server whose images are on its own network.
	AllowPrivate bool
}

// DefaultImageFetchTimeout lets an 8 MiB image arrive at about 1 MB/s.
const DefaultImageFetchTimeout = 10 * time.Second

// errNotPublic is a connection refused because its address is not public.
var errNotPublic = errors.New("not a public address (serve --image-url-private fetches from those)")

// fetcher returns the wire.ImageReader Fetch of ri, or nil for nil.
func (ri *RemoteImages) fetcher() func(ctx context.Context, url string, max int) ([]byte, error) {
	if ri == nil {
		return nil
	}
	timeout := ri.Timeout
	if timeout <= 0 {
		timeout = DefaultImageFetchTimeout
	}
	redirects := ri.MaxRedirects
	if redirects == 0 {
		redirects = 3
	}
	dialer := &net.Dialer{Timeout: timeout}
	if !ri.AllowPrivate {
		// Control sees the address being connected to, after resolution,
		// for every connection the transport opens (redirects included).
		dialer.Control = func(network, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return err
			}
			if !publicAddr(ap.Addr()) {
				return fmt.Errorf("%s: %w", ap.Addr(), errNotPublic)
			}
			return nil
		}
	}
	client := &http.Client{
		Transport: &http.Transport{
			// No proxy from the environment: the address checked must be
			// the image's host, not a proxy's.
			Proxy:                  nil,
			DialContext:            dialer.DialContext,
			TLSHandshakeTimeout:    timeout,
			ResponseHeaderTimeout:  timeout,
			MaxResponseHeaderBytes: 64 << 10,
			MaxIdleConns:           4,
			IdleConnTimeout:        30 * time.Second,
		},
		Timeout: timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > redirects {
				return fmt.Errorf("more than %d redirects", max(redirects, 0))
			}
			return ri.allowed(req.URL)
		},
	}
	return func(ctx context.Context, raw string, limit int) ([]byte, error) {
		u, err := url.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("the image URL: %v", err)
		}
		if err := ri.allowed(u); err != nil {
			return nil, err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return nil, fmt.Errorf("the image URL: %v", err)
		}
		req.Header.Set("Accept", "image/png, image/jpeg, image/webp")
		res, err := client.Do(req)
		if err != nil {
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err // the URL is already in the message around it
			}
			return nil, fmt.Errorf("fetching %s: %v", u.Redacted(), err)
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("fetching %s: %s", u.Redacted(), res.Status)
		}
		if limit > 0 && res.ContentLength > int64(limit) {
			return nil, fmt.Errorf("fetching %s: %d bytes (at most %d)", u.Redacted(), res.ContentLength, limit)
		}
		r := io.Reader(res.Body)
		if limit > 0 {
			r = io.LimitReader(res.Body, int64(limit)+1)
		}
		data, err := io.ReadAll(r)
		if err != nil {
			return nil, fmt.Errorf("fetching %s: %v", u.Redacted(), err)
		}
		if limit > 0 && len(data) > limit {
			return nil, fmt.Errorf("fetching %s: more than %d bytes", u.Redacted(), limit)
		}
		return data, nil
	}
}

// allowed checks a URL's scheme and host against ri.
func (ri *RemoteImages) allowed(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%q URLs are not fetched (http and https are)", u.Scheme)
	}
	if u.User != nil {
		return errors.New("image URLs with credentials are not fetched")
	}
	host := strings.ToLower(u.Hostname())
	if host == "" {
		return fmt.Errorf("the image URL %s has no host", u.Redacted())
	}
	if len(ri.Hosts) > 0 && !slices.ContainsFunc(ri.Hosts, func(h string) bool { return strings.EqualFold(h, host) }) {
		return fmt.Errorf("images are fetched only from %s, not %s", strings.Join(ri.Hosts, ", "), host)
	}
	return nil
}

// cgnat is the shared address space of carrier-grade NAT (RFC 6598),
// which netip does not count as private but is not public either.
var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// publicAddr reports whether a is a global unicast address outside the
// private, shared and loopback ranges.
func publicAddr(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsGlobalUnicast() && !a.IsPrivate() && !cgnat.Contains(a)
}

// imageReader is how the server reads a request's images.
func (s *Server) imageReader() wire.ImageReader {
	return wire.ImageReader{Limits: s.opts.ImageLimits, Fetch: s.fetch}
}
