package server

import (
	"context"
	"net/http"
	"net/http/httptest"
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
