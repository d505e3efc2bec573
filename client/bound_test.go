package client

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
)

// An answer longer than MaxResponseBytes is an error that names the
// bound, at once and whichever master sent it, never an answer cut to
// the bound (which read as "unexpected end of JSON input"); one of
// exactly the bound is read whole.
func TestAnswerPastTheBoundIsAnError(t *testing.T) {
	const bound = 4 << 10
	body := func(n int) string { return `"` + strings.Repeat("a", n-3) + `"` + "\n" }
	var size int
	addr := server(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body(size)))
	})
	c := newClient(t, Options{MaxResponseBytes: bound}, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	size = bound
	var s string
	if err := c.Do(ctx, http.MethodGet, "/v1/x", nil, &s); err != nil || len(s) != bound-3 {
		t.Fatalf("an answer of exactly the bound: %v, %d bytes", err, len(s))
	}
	size = bound + 1
	err := c.Do(ctx, http.MethodGet, "/v1/x", nil, &s)
	var apiErr *APIError
	if !errors.As(err, &apiErr) || !errors.Is(err, api.ErrTooLarge) || errors.Is(err, ErrNoMaster) ||
		!strings.Contains(err.Error(), "exceeds 4096 bytes") || !strings.Contains(err.Error(), "--max-response-size") {
		t.Fatalf("an answer one byte past the bound: %v; want an error naming the bound", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the client retried an answer past its bound until its deadline")
	}
}
