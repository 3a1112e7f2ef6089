package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// TestTokenizeOutOfTime: a /tokenize whose request ran out of time while
// its messages were tokenized is answered as a timeout (504), not as
// messages at fault (400).
func TestTokenizeOutOfTime(t *testing.T) {
	srv := newFuzzServer(t)
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/tokenize", strings.NewReader(`{"messages":[{"role":"user","content":"Once upon a time"}]}`))
	w := httptest.NewRecorder()
	srv.s.ServeHTTP(w, r)
	if w.Code != http.StatusGatewayTimeout || !strings.Contains(w.Body.String(), "request timeout") {
		t.Errorf("%d %s", w.Code, w.Body)
	}
}

// TestPublicAddr: remote images are fetched only from global unicast
// addresses; the ranges an attacker would aim a fetch at are not.
func TestPublicAddr(t *testing.T) {
	for _, tc := range []struct {
		addr   string
		public bool
	}{
		{"8.8.8.8", true},
		{"2001:4860:4860::8888", true},
		{"127.0.0.1", false},
		{"::1", false},
		{"10.1.2.3", false},
		{"172.16.0.1", false},
		{"192.168.1.1", false},
		{"169.254.169.254", false}, // cloud metadata
		{"100.64.0.1", false},      // CGNAT
		{"0.0.0.0", false},
		{"224.0.0.1", false},
		{"fe80::1", false},
		{"fd00::1", false},
		{"::ffff:127.0.0.1", false},
		{"::ffff:10.0.0.1", false},
		{"::ffff:8.8.8.8", true},
	} {
		if got := publicAddr(netip.MustParseAddr(tc.addr)); got != tc.public {
			t.Errorf("%s: public %v, want %v", tc.addr, got, tc.public)
		}
	}
}
