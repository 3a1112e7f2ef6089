package hub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"time"
)

// The default timeouts. Each bounds one wait for a sign of life, never a
// whole download, so none limits how long a large file may take.
const (
	// DefaultDialTimeout bounds the DNS lookup and TCP connect: a host
	// that is reachable answers a SYN within a second or two, and 30 s
	// covers the kernel's own SYN retries on a lossy link.
	DefaultDialTimeout = 30 * time.Second
	// DefaultTLSTimeout bounds the TLS handshake, a couple of round trips
	// and some CPU; 30 s is generous on the slowest links (net/http's own
	// default is 10 s).
	DefaultTLSTimeout = 30 * time.Second
	// DefaultHeaderTimeout bounds the wait for a response's headers once
	// the request is sent. The Hub answers resolve and API requests from
	// its database in well under a second, but a listing of a large
	// repository or a CDN fetching a cold object from storage can take
	// tens of seconds, hence a minute.
	DefaultHeaderTimeout = 60 * time.Second
	// DefaultStallTimeout is how long a body may send nothing at all
	// before the attempt ends (and resumes, the .part file keeping what
	// arrived). A live download, however slow, delivers a TCP segment
	// far more often than once a minute; a minute also rides out a
	// Wi-Fi roam or a brief route change, which TCP recovers from by
	// itself.
	DefaultStallTimeout = 60 * time.Second
)

// A Stage is the part of a request a *TimeoutError timed out in.
type Stage string

const (
	StageDial    Stage = "dial"    // the DNS lookup and TCP connect
	StageTLS     Stage = "tls"     // the TLS handshake
	StageHeaders Stage = "headers" // the wait for the response's headers
	StageBody    Stage = "body"    // a read of the body that brought nothing
)

// A TimeoutError says that a request gave no sign of life for too long,
// in which stage and with which host. A download that times out is
// retried like any other dropped connection, resuming from its .part
// file.
type TimeoutError struct {
	Stage Stage
	Host  string
	After time.Duration
}

func (e *TimeoutError) Error() string {
	switch e.Stage {
	case StageDial:
		return fmt.Sprintf("connecting to %s timed out after %s", e.Host, e.After)
	case StageTLS:
		return fmt.Sprintf("the TLS handshake with %s timed out after %s", e.Host, e.After)
	case StageHeaders:
		return fmt.Sprintf("%s sent no response headers within %s", e.Host, e.After)
	}
	return fmt.Sprintf("%s sent nothing for %s mid-download (stalled)", e.Host, e.After)
}

// Timeout reports true, as a net.Error's does for a timeout.
func (e *TimeoutError) Timeout() bool { return true }

// timeouts returns the limit of each stage: a zero field is its default,
// a negative one no limit (0 here).
func (c *Client) timeouts() map[Stage]time.Duration {
	pick := func(d, def time.Duration) time.Duration {
		switch {
		case d == 0:
			return def
		case d < 0:
			return 0
		}
		return d
	}
	return map[Stage]time.Duration{
		StageDial:    pick(c.DialTimeout, DefaultDialTimeout),
		StageTLS:     pick(c.TLSTimeout, DefaultTLSTimeout),
		StageHeaders: pick(c.HeaderTimeout, DefaultHeaderTimeout),
		StageBody:    pick(c.StallTimeout, DefaultStallTimeout),
	}
}

// transport is the transport requests go through when Client.HTTP brings
// none: http.DefaultTransport's settings, with the dial and handshake
// limits as a backstop for connections the transport goes on dialing
// after their request gave up (the watchdog ends the request itself). It
// is built once, from the timeouts as they are then.
func (c *Client) transport() http.RoundTripper {
	if c.HTTP != nil && c.HTTP.Transport != nil {
		return c.HTTP.Transport
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rt == nil {
		lim := c.timeouts()
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.DialContext = (&net.Dialer{Timeout: lim[StageDial], KeepAlive: 30 * time.Second}).DialContext
		t.TLSHandshakeTimeout = lim[StageTLS]
		c.rt = t
	}
	return c.rt
}

// do sends a request under a watchdog: each stage of it (connecting, the
// TLS handshake, waiting for the headers, then each read of the body)
// must show progress within its limit, or the request is cancelled and
// the error is a *TimeoutError naming the stage and the host. The body's
// limit is on the gap between reads, not on the whole body: a slow but
// steady multi-gigabyte download is fine, a silent one ends. The caller
// must close the response's body.
func (c *Client) do(hc *http.Client, req *http.Request) (*http.Response, error) {
	lim := c.timeouts()
	ctx, cancel := context.WithCancelCause(req.Context())
	w := &watchdog{host: req.URL.Host, cancel: cancel}
	w.enter(StageDial, lim[StageDial])
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		TLSHandshakeStart: func() { w.enter(StageTLS, lim[StageTLS]) },
		GotConn:           func(httptrace.GotConnInfo) { w.enter(StageHeaders, lim[StageHeaders]) },
	})
	resp, err := hc.Do(req.WithContext(ctx))
	if err != nil {
		te := w.stop()
		cancel(nil)
		if te != nil {
			return nil, te
		}
		var ne net.Error
		if req.Context().Err() == nil && errors.As(err, &ne) && ne.Timeout() {
			// The transport's own backstop fired first.
			return nil, w.current()
		}
		return nil, err
	}
	w.enter(StageBody, lim[StageBody])
	resp.Body = &watchedBody{body: resp.Body, w: w, cancel: cancel}
	return resp, nil
}

// A watchdog cancels a request whose current stage shows no progress for
// its limit. Entering a stage, or progress within the body, restarts the
// clock; one timer serves all stages, and on firing it checks how long
// the request has really been idle, so that progress costs no timer
// operation.
type watchdog struct {
	host   string
	cancel context.CancelCauseFunc

	mu      sync.Mutex
	timer   *time.Timer
	stage   Stage
	limit   time.Duration // 0: none
	last    time.Time     // when the stage began or last made progress
	fired   *TimeoutError
	stopped bool
}

// enter starts a stage, with its limit (0: none).
func (w *watchdog) enter(s Stage, limit time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return // a trace hook from a dial the request no longer waits for
	}
	w.stage, w.limit, w.last = s, limit, time.Now()
	switch {
	case limit <= 0:
		if w.timer != nil {
			w.timer.Stop()
		}
	case w.timer == nil:
		w.timer = time.AfterFunc(limit, w.check)
	default:
		w.timer.Reset(limit)
	}
}

// progress notes that the body delivered bytes.
func (w *watchdog) progress() {
	w.mu.Lock()
	w.last = time.Now()
	w.mu.Unlock()
}

// check runs when the timer fires: it cancels the request when the stage
// has been idle for its limit, and otherwise waits for the rest.
func (w *watchdog) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped || w.limit <= 0 {
		return
	}
	if idle := time.Since(w.last); idle < w.limit {
		w.timer.Reset(w.limit - idle)
		return
	}
	w.stopped = true
	w.fired = w.currentLocked()
	w.cancel(w.fired)
}

// stop ends the watch and returns the timeout that fired, if one did.
func (w *watchdog) stop() *TimeoutError {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	if w.timer != nil {
		w.timer.Stop()
	}
	return w.fired
}

// current is the timeout of the stage the request is in.
func (w *watchdog) current() *TimeoutError {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.currentLocked()
}

func (w *watchdog) currentLocked() *TimeoutError {
	return &TimeoutError{Stage: w.stage, Host: w.host, After: w.limit}
}

// watchedBody is a response body whose reads feed the watchdog, and whose
// read that the watchdog cut short says so.
type watchedBody struct {
	body   io.ReadCloser
	w      *watchdog
	cancel context.CancelCauseFunc
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if n > 0 {
		b.w.progress()
	}
	if err != nil && err != io.EOF {
		b.w.mu.Lock()
		fired := b.w.fired
		b.w.mu.Unlock()
		if fired != nil {
			err = fired
		}
	}
	return n, err
}

func (b *watchedBody) Close() error {
	b.w.stop()
	err := b.body.Close()
	b.cancel(nil)
	return err
}
