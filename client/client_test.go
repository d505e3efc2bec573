package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/security/auth"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func server(t *testing.T, h http.HandlerFunc) string {
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

func newClient(t *testing.T, opts Options, masters ...string) *Client {
	c, err := New(masters, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.http.CloseIdleConnections)
	return c
}

func unavailable(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(http.StatusServiceUnavailable)
	w.Write([]byte(`{"error":"no leader"}`))
}

// A hung master (paused, cut off) must not hold up the answer of another.
func TestHungMasterDoesNotDelayLeadersAnswer(t *testing.T) {
	release := make(chan struct{})
	hung := server(t, func(w http.ResponseWriter, r *http.Request) { <-release })
	defer close(release)
	var calls atomic.Int32
	// The leader is still being elected for the first two calls.
	leader := server(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 2 {
			unavailable(w, r)
			return
		}
		w.Write([]byte(`{"driver_id":"d"}`))
	})
	c := newClient(t, Options{RequestTimeout: time.Minute, RetryInterval: 10 * time.Millisecond}, hung, leader)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	var out struct {
		DriverID string `json:"driver_id"`
	}
	if err := c.Do(ctx, "POST", "/v1/drivers", map[string]string{}, &out); err != nil {
		t.Fatal(err)
	}
	if out.DriverID != "d" || calls.Load() != 3 {
		t.Fatalf("got %+v after %d calls", out, calls.Load())
	}
	// Held up, the round would last the minute of RequestTimeout.
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("took %s: the hung master held up the round", took)
	}
}

func TestRefusalIsAuthoritative(t *testing.T) {
	refuser := server(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"error":"cores must be positive"}`))
	})
	c := newClient(t, Options{}, refuser, "127.0.0.1:1")
	err := c.Do(context.Background(), "POST", "/v1/drivers", map[string]int{}, nil)
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 400 || apiErr.Message != "cores must be positive" {
		t.Fatalf("got %v, want the 400 with its message", err)
	}
}

// A 429 that says a bound of the cluster is reached is the answer: it is
// not sent again, as a 429 for requests in flight is.
func TestLimitReachedIsAuthoritative(t *testing.T) {
	var calls atomic.Int32
	busy := server(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTooManyRequests)
		if calls.Add(1) == 1 {
			w.Write([]byte(`{"error":"too many submissions in flight","code":"too_many_requests"}`))
			return
		}
		w.Write([]byte(`{"error":"drivers that have not ended are at --max-live-drivers (4)","code":"limit_reached"}`))
	})
	c := newClient(t, Options{RetryInterval: time.Millisecond}, busy)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := c.Do(ctx, "POST", "/v1/drivers", map[string]int{}, nil)
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusTooManyRequests || apiErr.Code != api.CodeLimitReached ||
		!errors.Is(err, api.ErrLimitReached) || !strings.Contains(err.Error(), "--max-live-drivers") {
		t.Fatalf("got %v, want the 429 limit_reached with its message", err)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d calls, want 2: the busy answer sent again, the limit not", n)
	}
}

func TestNoLeaderIsUnavailableAfterDeadline(t *testing.T) {
	a := server(t, unavailable)
	c := newClient(t, Options{RetryInterval: 5 * time.Millisecond}, a, "127.0.0.1:1")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := c.Do(ctx, "GET", "/v1/drivers", nil, nil)
	if !errors.Is(err, ErrNoMaster) || !strings.Contains(err.Error(), "no leader") {
		t.Fatalf("got %v, want ErrNoMaster with the masters' reasons", err)
	}
}

// A sticky client asks the master that answered last, and the others only
// once it fails.
func TestStickyPrefersLastAnswer(t *testing.T) {
	var aCalls, bCalls atomic.Int32
	a := server(t, func(w http.ResponseWriter, r *http.Request) { aCalls.Add(1); w.Write([]byte(`{}`)) })
	b := server(t, func(w http.ResponseWriter, r *http.Request) { bCalls.Add(1); unavailable(w, r) })
	c := newClient(t, Options{Sticky: true}, a, b)
	for i := 0; i < 5; i++ {
		if err := c.Do(context.Background(), "GET", "/x", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if aCalls.Load() != 5 || bCalls.Load() > 1 {
		t.Fatalf("calls a=%d b=%d; want every call on a and at most the first on b", aCalls.Load(), bCalls.Load())
	}
}

func TestBadMasterAddresses(t *testing.T) {
	for _, ms := range [][]string{nil, {""}, {"garbage"}, {"host:"}} {
		if _, err := New(ms, Options{}); err == nil {
			t.Errorf("New(%q) accepted", ms)
		}
	}
}

// A refusal's code comes back as its sentinel error, whatever the status
// says; an answer without a code (an older master) falls back to the
// sentinel of its status.
func TestRefusalsWrapTheirCode(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		want   error
		code   api.Code
	}{
		{404, `{"error":"unknown driver: d","code":"unknown_driver"}`, model.ErrUnknownDriver, api.CodeUnknownDriver},
		{404, `{"error":"unknown application: a","code":"unknown_app"}`, model.ErrUnknownApp, api.CodeUnknownApp},
		{409, `{"error":"driver already ended","code":"driver_ended"}`, model.ErrDriverEnded, api.CodeDriverEnded},
		{409, `{"error":"in use","code":"conflict"}`, api.ErrConflict, api.CodeConflict},
		{400, `{"error":"bad","code":"invalid_request"}`, api.ErrInvalidRequest, api.CodeInvalidRequest},
		{401, `{"error":"needs a token","code":"unauthenticated"}`, api.ErrUnauthenticated, api.CodeUnauthenticated},
		{403, `{"error":"denied","code":"forbidden"}`, api.ErrForbidden, api.CodeForbidden},
		{404, `{"error":"not placed yet"}`, api.ErrNotFound, ""},
		{502, `not json`, api.ErrBadGateway, ""},
	} {
		addr := server(t, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(tc.status)
			w.Write([]byte(tc.body))
		})
		c := newClient(t, Options{}, addr)
		_, err := c.Driver(context.Background(), "driver-20260101000000-0001")
		var apiErr *APIError
		if !errors.As(err, &apiErr) || !errors.Is(err, tc.want) || apiErr.Code != tc.code || apiErr.Status != tc.status {
			t.Errorf("%d %s: %#v, want an APIError wrapping %v with code %q", tc.status, tc.body, err, tc.want, tc.code)
		}
		if errors.Is(err, model.ErrUnknownApp) && tc.want != model.ErrUnknownApp {
			t.Errorf("%d %s: wraps ErrUnknownApp too", tc.status, tc.body)
		}
	}
}

// A sticky client whose answer came from a follower naming the leader
// (api.HeaderLeader) goes to the leader next, not through the follower.
func TestStickyGoesToTheLeaderNamed(t *testing.T) {
	release := make(chan struct{})
	var leaderCalls, followerCalls atomic.Int32 // leader: answered calls
	leader := server(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("round") == "0" {
			// No answer in the first round: only the follower's
			// answer can make the leader preferred.
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		leaderCalls.Add(1)
		w.Write([]byte(`{}`))
	})
	defer close(release)
	follower := server(t, func(w http.ResponseWriter, r *http.Request) {
		followerCalls.Add(1)
		w.Header().Set(api.HeaderLeader, leader)
		w.Write([]byte(`{}`))
	})
	c := newClient(t, Options{Sticky: true}, follower, leader)
	for round := range 3 {
		if err := c.Do(context.Background(), "GET", fmt.Sprint("/x?round=", round), nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if followerCalls.Load() != 1 || leaderCalls.Load() != 2 {
		t.Fatalf("calls after the first round: follower %d, leader %d; want 1 (the first round) and 2", followerCalls.Load(), leaderCalls.Load())
	}
}

// The copies of a request that answer after the first are let finish, so
// that their connections serve the next requests instead of being closed
// with the copy cut short and dialed again.
func TestLateAnswersKeepTheirConnections(t *testing.T) {
	var conns atomic.Int32
	serve := func(h http.HandlerFunc) string {
		s := httptest.NewUnstartedServer(h)
		s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				conns.Add(1)
			}
		}
		s.Start()
		t.Cleanup(s.Close)
		return strings.TrimPrefix(s.URL, "http://")
	}
	first := make(chan struct{}, 1)
	early := serve(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{}`))
		first <- struct{}{}
	})
	late := serve(func(w http.ResponseWriter, r *http.Request) {
		<-first
		w.Write([]byte(`{}`))
	})
	c := newClient(t, Options{}, early, late)
	const requests = 50
	for range requests {
		if err := c.Do(context.Background(), "GET", "/x", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	// A few connections to each master (a request may start while the
	// late copy of the one before still holds one), not one per request.
	if n := conns.Load(); n > requests/5 {
		t.Fatalf("%d requests to two masters dialed %d connections", requests, n)
	}
}

// A blocking read refused for the client's bound on blocking reads (429,
// Retry-After) is sent again, and answers once a slot is free.
func TestBlockingReadIsRetriedAfterTooManyRequests(t *testing.T) {
	var calls atomic.Int32
	m := server(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("index") != "7" {
			t.Errorf("read %s: not the blocking read asked for", r.URL)
		}
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"error":"this client has as many blocking reads waiting on this master as it may (--max-blocking-reads-per-client 64); retry shortly","code":"too_many_requests"}`))
			return
		}
		w.Header().Set(api.HeaderIndex, "9")
		w.Write([]byte(`{"id":"driver-20261129120000-0000","state":"RUNNING"}`))
	})
	c := newClient(t, Options{RetryInterval: 10 * time.Millisecond}, m)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d, index, err := c.WaitDriver(ctx, "driver-20261129120000-0000", 7, time.Second)
	if err != nil || d.State != model.DriverRunning || index != 9 || calls.Load() != 2 {
		t.Fatalf("WaitDriver = %+v, %d, %v after %d calls; want the driver at 9 after 2", d, index, err, calls.Load())
	}
}

// A master replaying its log answers a namespace token it does not hold
// yet 503 (auth.ErrCatchingUp): the client takes it for what it is, one
// master's "not now", and has its answer from another master rather
// than failing, or submitting twice on a retry of its caller.
func TestCatchingUpMasterSendsOnToAnother(t *testing.T) {
	g, err := auth.New(auth.Config{SubmitToken: "Submit-0123456789abcdef"})
	if err != nil {
		t.Fatal(err)
	}
	g.SetACLTokens(func(string) (*model.ACLToken, bool) { return nil, false }, func() bool { return false })
	// The master that has caught up answers only once the other has
	// refused, so the client has the refusal in hand first.
	refused := make(chan struct{})
	var once sync.Once
	behind := server(t, func(w http.ResponseWriter, r *http.Request) {
		defer once.Do(func() { close(refused) })
		_, err := g.Caller(r)
		code, status := api.CodeOf(err)
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(api.Error{Error: err.Error(), Code: code})
		w.(http.Flusher).Flush()
	})
	current := server(t, func(w http.ResponseWriter, r *http.Request) {
		<-refused
		w.Write([]byte(`{"driver_id":"d"}`))
	})
	c := newClient(t, Options{Token: "Namespace-0123456789abcdef", RetryInterval: time.Hour}, behind, current)
	var out struct {
		DriverID string `json:"driver_id"`
	}
	if err := c.Do(context.Background(), "GET", "/v1/drivers/d", nil, &out); err != nil {
		t.Fatalf("got %v, want the answer of the master that has caught up", err)
	}
	if out.DriverID != "d" {
		t.Fatalf("got %+v, want driver d", out)
	}
}
