package client

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
)

// An ID of the wrong form or of 100 KB is refused before any request,
// in one line wrapping api.ErrInvalidRequest, as a master's refusal
// would, and a request past the masters'
// bound on a header (api.MaxHeaderBytes) is refused unsent: a master
// answers such a request 431 or resets its connection, and a reset read
// as "no leader" until --timeout ran out.
func TestMalformedIDsAndLongURLsAreNotSent(t *testing.T) {
	var asked atomic.Int32
	c := newClient(t, Options{}, server(t, func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		w.WriteHeader(http.StatusBadRequest)
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	long := "driver-" + strings.Repeat("a", 100_000)
	for name, call := range map[string]func() error{
		"Driver long":   func() error { _, err := c.Driver(ctx, long); return err },
		"Driver app ID": func() error { _, err := c.Driver(ctx, "app-20260101000000-0001"); return err },
		"Kill":          func() error { return c.Kill(ctx, long) },
		"Logs":          func() error { _, _, err := c.Logs(ctx, "driver-1", false, 0, 0); return err },
		"AppStatus":     func() error { _, err := c.AppStatus(ctx, "app-"+strings.Repeat("9", 100_000)); return err },
		"KillApp":       func() error { return c.KillApp(ctx, "driver-20260101000000-0001") },
		"ExecutorLogs":  func() error { _, _, err := c.ExecutorLogs(ctx, "app/../x", 0, false, 0); return err },
	} {
		err := call()
		if !errors.Is(err, api.ErrInvalidRequest) || !strings.HasPrefix(err.Error(), "invalid ID: ") || strings.Contains(err.Error(), "\n") || len(err.Error()) > 200 {
			t.Errorf("%s: %v; want one short line wrapping api.ErrInvalidRequest", name, err)
		}
	}
	err := c.ListDrivers(ctx, api.ListQuery{Name: strings.Repeat("*", api.MaxHeaderBytes)}, func(p []*model.Driver) error { return nil })
	var apiErr *APIError
	if !errors.As(err, &apiErr) || !errors.Is(err, api.ErrTooLarge) || !strings.Contains(err.Error(), "65536 bytes") {
		t.Errorf("a list whose URL passes %d bytes: %v; want a refusal naming the bound", api.MaxHeaderBytes, err)
	}
	if n := asked.Load(); n != 0 {
		t.Fatalf("%d requests reached the master", n)
	}
	// Just within the bound, the request goes.
	short := c.ListDrivers(ctx, api.ListQuery{Name: strings.Repeat("a", api.MaxHeaderBytes-len(api.PathDrivers)-64)}, func(p []*model.Driver) error { return nil })
	if asked.Load() == 0 || errors.Is(short, api.ErrTooLarge) {
		t.Fatalf("a list within the bound was not sent: %v", short)
	}
}

// A 400, 413 or 431 is final: every master would refuse the request
// alike, so the client returns it at once, not "no leader" after its
// context ends.
func TestRefusedRequestsAreFinal(t *testing.T) {
	for _, status := range []int{http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusRequestHeaderFieldsTooLarge} {
		c := newClient(t, Options{}, server(t, func(w http.ResponseWriter, r *http.Request) {
			// As net/http's server writes a 431: plain text.
			w.WriteHeader(status)
			w.Write([]byte(http.StatusText(status)))
		}))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		start := time.Now()
		_, err := c.Driver(ctx, "driver-20260101000000-0001")
		cancel()
		var apiErr *APIError
		if !errors.As(err, &apiErr) || apiErr.Status != status || errors.Is(err, ErrNoMaster) || time.Since(start) > 10*time.Second {
			t.Errorf("%d: %v after %s; want the refusal at once", status, err, time.Since(start))
		}
	}
}
