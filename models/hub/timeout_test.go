package hub_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/models/hub"
	"github.com/tessera-llm/tessera/models/hub/hubtest"
)

// hang is the bound on a test that would otherwise hang: generous, since
// it only tells a timeout that fired from one that did not.
const hang = 10 * time.Second

// TestTimeouts: each stage of a request that never progresses ends with a
// *TimeoutError naming the stage and the host, within a bounded time,
// and leaves the .part file with what arrived.
func TestTimeouts(t *testing.T) {
	const short = 200 * time.Millisecond
	tests := []struct {
		name  string
		setup func(t *testing.T, c *hub.Client) (host string)
		ref   string
		stage hub.Stage
		part  int64 // the .part file's length after the failure; -1: none
	}{
		{name: "dial", stage: hub.StageDial, ref: "acme/m/m.gguf", part: 0,
			setup: func(t *testing.T, c *hub.Client) string {
				// A dial that never completes, as to a host whose
				// packets are dropped.
				c.HTTP = &http.Client{Transport: &http.Transport{
					DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
						<-ctx.Done()
						return nil, ctx.Err()
					}}}
				c.Endpoint, c.DialTimeout = "http://unreachable.invalid:81", short
				return "unreachable.invalid:81"
			}},
		{name: "tls handshake", stage: hub.StageTLS, ref: "acme/m/m.gguf", part: 0,
			setup: func(t *testing.T, c *hub.Client) string {
				addr := hubtest.Blackhole(t)
				c.Endpoint, c.TLSTimeout = "https://"+addr, short
				return addr
			}},
		{name: "response headers", stage: hub.StageHeaders, ref: "acme/m/m.gguf", part: 0,
			setup: func(t *testing.T, c *hub.Client) string {
				addr := hubtest.Blackhole(t)
				c.Endpoint, c.HeaderTimeout = "http://"+addr, short
				return addr
			}},
		{name: "listing's headers", stage: hub.StageHeaders, ref: "hf.co/acme/m:Q4_0", part: -1,
			setup: func(t *testing.T, c *hub.Client) string {
				addr := hubtest.Blackhole(t)
				c.Endpoint, c.HeaderTimeout = "http://"+addr, short
				return addr
			}},
		{name: "stalled body", stage: hub.StageBody, ref: "acme/m/m.gguf", part: 30_000,
			setup: func(t *testing.T, c *hub.Client) string {
				h := hubtest.New(t)
				h.SeparateCDN()
				h.Add("acme/m", "m.gguf", blob(100, 100_000)).Stall = 30_000
				c.Endpoint, c.StallTimeout = h.URL, short
				u, _ := url.Parse(h.CDN.URL)
				return u.Host
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &hub.Client{Cache: hub.Cache{Dir: t.TempDir()}, Retries: -1}
			host := tt.setup(t, c)
			start := time.Now()
			_, err := c.Pull(timeout(t), mustParse(t, tt.ref))
			if d := time.Since(start); d > hang {
				t.Errorf("the pull took %s with a %s timeout", d, short)
			}
			var te *hub.TimeoutError
			if !errors.As(err, &te) || te.Stage != tt.stage || te.Host != host || te.After != short {
				t.Fatalf("err = %v (%#v); want a %s timeout of %s with %s", err, te, tt.stage, short, host)
			}
			if !strings.Contains(err.Error(), host) {
				t.Errorf("%q does not name the host", err)
			}
			part := filepath.Join(c.Cache.Dir, "hf.co", "acme", "m", "m.gguf.part")
			st, serr := os.Stat(part)
			switch {
			case tt.part < 0 && serr == nil:
				t.Errorf("a .part file was made before the listing answered")
			case tt.part >= 0 && (serr != nil || st.Size() != tt.part):
				t.Errorf(".part: %v, %v; want %d bytes", st, serr, tt.part)
			}
			if tt.part > 0 && !strings.Contains(err.Error(), "kept") {
				t.Errorf("%q does not say the partial download is kept", err)
			}
		})
	}
}

// TestStallRetriesResume: a download that stalls resumes where it stopped
// as many times as the retries allow, then fails keeping what arrived;
// the next pull resumes from there.
func TestStallRetriesResume(t *testing.T) {
	h := hubtest.New(t)
	data := blob(101, 100_000)
	f := h.Add("acme/m", "m.gguf", data)
	f.Stall = 30_000 // of each response's body
	c, log := client(t, h)
	c.StallTimeout, c.Retries = 200*time.Millisecond, 2
	ref := mustParse(t, "acme/m/m.gguf")
	start := time.Now()
	_, err := c.Pull(timeout(t), ref)
	if d := time.Since(start); d > hang {
		t.Errorf("three stalled attempts took %s", d)
	}
	var te *hub.TimeoutError
	if !errors.As(err, &te) || te.Stage != hub.StageBody || !strings.Contains(err.Error(), "gave up after 2 retries") {
		t.Fatalf("err = %v; want a stall after 2 retries", err)
	}
	if n := strings.Count(log.String(), "resuming in"); n != 2 {
		t.Errorf("log %q: want two resumptions", log)
	}
	part := filepath.Join(c.Cache.Dir, "hf.co", "acme", "m", "m.gguf.part")
	if st, err := os.Stat(part); err != nil || st.Size() != 90_000 {
		t.Fatalf(".part: %v, %v; want the 90000 bytes of three attempts", st, err)
	}
	f.Stall = 0
	e, err := c.Pull(timeout(t), ref)
	if err != nil {
		t.Fatal(err)
	}
	checkFile(t, c, e, data)
	var ranges []string
	for _, r := range h.ContentRequests() {
		ranges = append(ranges, r.Range)
	}
	if want := ",bytes=30000-,bytes=60000-,bytes=90000-"; strings.Join(ranges, ",") != want {
		t.Errorf("ranges %q, want %q", ranges, want)
	}
}

// TestTrickle: a body that is slow but never silent for as long as the
// stall timeout succeeds, however much longer than it the whole takes.
func TestTrickle(t *testing.T) {
	h := hubtest.New(t)
	data := blob(102, 40*1_000)
	f := h.Add("acme/m", "m.gguf", data)
	f.Trickle, f.TrickleEvery = 1_000, 50*time.Millisecond // 2 s in all
	c, _ := client(t, h)
	c.StallTimeout, c.Retries = time.Second, -1
	start := time.Now()
	e, err := c.Pull(timeout(t), mustParse(t, "acme/m/m.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	checkFile(t, c, e, data)
	if d := time.Since(start); d < c.StallTimeout {
		t.Errorf("the trickle took %s, less than the stall timeout: the test shows nothing", d)
	}
}

// TestCancelDuringDial: cancelling the context ends a pull stuck
// connecting, with the context's error rather than a timeout.
func TestCancelDuringDial(t *testing.T) {
	c := &hub.Client{Cache: hub.Cache{Dir: t.TempDir()}, Retries: -1, Endpoint: "http://" + hubtest.Blackhole(t)}
	ctx, cancel := context.WithCancel(timeout(t))
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := c.Pull(ctx, mustParse(t, "acme/m/m.gguf"))
	var te *hub.TimeoutError
	if !errors.Is(err, context.Canceled) || errors.As(err, &te) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}
