package forward

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/master/service"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/security/auth"
)

// leaderSwitch is what a master knows of the leader, which a test sets.
// Each look is counted, so a test knows a request is waiting before it
// elects a leader.
type leaderSwitch struct {
	mu    sync.Mutex
	l     service.Leadership
	looks chan struct{}
}

func newLeaderSwitch(none service.Leadership) *leaderSwitch {
	return &leaderSwitch{l: none, looks: make(chan struct{}, 1024)}
}

func (s *leaderSwitch) lead() service.Leadership {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case s.looks <- struct{}{}:
	default:
	}
	return s.l
}

func (s *leaderSwitch) set(l service.Leadership) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.l = l
}

// looked waits until the forwarder has looked n more times.
func (s *leaderSwitch) looked(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-s.looks:
		case <-time.After(10 * time.Second):
			t.Fatalf("the forwarder did not look for a leader %d times", n)
		}
	}
}

// fakeCore is this master's own rules: it submits and kills, counting
// the tokens it sees, behind endpoints of its own on a chain whose router
// is the Forwarder under test.
type fakeCore struct {
	mu     sync.Mutex
	tokens []string
	ch     *service.Chain
}

func newFakeCore(t *testing.T, f *Forwarder) *fakeCore {
	g, err := auth.New(auth.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return &fakeCore{ch: service.NewChain(nil, f, g, slog.Default(), service.Bounds{}, nil)}
}

func (c *fakeCore) SubmitDriver(ctx context.Context, req api.SubmitRequest) (api.SubmitResponse, error) {
	e := &service.Endpoint[api.SubmitRequest, api.SubmitResponse]{
		Info: service.Info{Route: api.V1SubmitDriver.Route, Access: auth.Submit},
		Serve: func(_ *service.Local, _ context.Context, _ auth.Caller, r service.Request[api.SubmitRequest]) (api.SubmitResponse, error) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.tokens = append(c.tokens, r.Body.Token)
			return api.SubmitResponse{DriverID: "driver-20260101000000-0000"}, nil
		},
	}
	return e.Call(ctx, c.ch, auth.Caller{}, service.Request[api.SubmitRequest]{Body: req})
}

func (c *fakeCore) KillDriver(ctx context.Context, id string) (api.KillResponse, error) {
	e := &service.Endpoint[api.NoBody, api.KillResponse]{
		Info: service.Info{Route: api.V1KillDriver.Route, Access: auth.Submit},
		Serve: func(*service.Local, context.Context, auth.Caller, service.Request[api.NoBody]) (api.KillResponse, error) {
			return api.KillResponse{}, nil
		},
	}
	return e.Call(ctx, c.ch, auth.Caller{}, service.Request[api.NoBody]{ID: id})
}

func (c *fakeCore) Driver(ctx context.Context, id string) (*model.Driver, error) {
	e := &service.Endpoint[api.NoBody, *model.Driver]{
		Info: service.Info{Route: api.V1Driver.Route, Access: auth.Read, Answer: service.AtLeaderOrStale, Query: service.BlockingQuery},
		Serve: func(_ *service.Local, _ context.Context, _ auth.Caller, r service.Request[api.NoBody]) (*model.Driver, error) {
			return &model.Driver{ID: r.ID}, nil
		},
	}
	return e.Call(ctx, c.ch, auth.Caller{}, service.Request[api.NoBody]{ID: id})
}

var noLeader = service.Leadership{Self: "m1", Role: raft.Follower.String()}

var readyLeader = service.Leadership{Self: "m1", Role: raft.Leader.String(), Ready: true, LeaderID: "m1"}

// A create, a kill and a status that reach a master with no leader wait
// for one and are answered by it once it is elected.
func TestLeaderWaitAnswersOnceALeaderIsElected(t *testing.T) {
	for _, tc := range []struct {
		name string
		do   func(c *fakeCore, ctx context.Context) error
	}{
		{"create", func(c *fakeCore, ctx context.Context) error {
			_, err := c.SubmitDriver(ctx, api.SubmitRequest{Token: "t1"})
			return err
		}},
		{"kill", func(c *fakeCore, ctx context.Context) error {
			_, err := c.KillDriver(ctx, "driver-20260101000000-0000")
			return err
		}},
		{"status", func(c *fakeCore, ctx context.Context) error {
			_, err := c.Driver(ctx, "driver-20260101000000-0000")
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sw := newLeaderSwitch(noLeader)
			core := newFakeCore(t, New(sw.lead, http.DefaultClient, "http"))
			done := make(chan error, 1)
			go func() { done <- tc.do(core, WithLeaderWait(context.Background(), 30*time.Second)) }()
			sw.looked(t, 3) // refused twice, and waiting
			select {
			case err := <-done:
				t.Fatalf("answered without a leader: %v", err)
			default:
			}
			sw.set(readyLeader)
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("after the election: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no answer 10 s after the election")
			}
		})
	}
}

// Without a wait, and past it, the refusal is the one a master without a
// leader gives: api.ErrNoLeader naming it, since nothing was sent on.
func TestLeaderWaitEndsWithTheRefusal(t *testing.T) {
	for _, tc := range []struct {
		name string
		ctx  func() context.Context
		min  time.Duration
	}{
		{"no wait", context.Background, 0},
		{"zero wait", func() context.Context { return WithLeaderWait(context.Background(), 0) }, 0},
		{"past the wait", func() context.Context { return WithLeaderWait(context.Background(), 300*time.Millisecond) }, 300 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core := newFakeCore(t, New(newLeaderSwitch(noLeader).lead, http.DefaultClient, "http"))
			start := time.Now()
			_, err := core.SubmitDriver(tc.ctx(), api.SubmitRequest{Token: "t1"})
			if !errors.Is(err, api.ErrNoLeader) || !strings.Contains(err.Error(), "master m1 knows no leader") {
				t.Fatalf("err = %v, want ErrNoLeader: master m1 knows no leader", err)
			}
			if took := time.Since(start); took < tc.min || took > tc.min+5*time.Second {
				t.Fatalf("refused after %s, want %s", took, tc.min)
			}
			if len(core.tokens) != 0 {
				t.Fatalf("submitted %v without a leader", core.tokens)
			}
		})
	}
}

// A create forwarded to a leader that is not yet ready (503) is sent
// again with the same submission token, so the leader that commits it
// makes one driver whatever answer was lost; a refusal that is not a
// leader's absence (400) is answered at once.
func TestLeaderWaitResendsTheSameToken(t *testing.T) {
	var mu sync.Mutex
	var tokens []string
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req api.SubmitRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		mu.Lock()
		tokens = append(tokens, req.Token)
		n := len(tokens)
		mu.Unlock()
		w.Header().Set("Content-Type", api.ContentTypeJSON)
		switch {
		case req.Token == "bad":
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(api.Error{Error: "argv is empty", Code: api.CodeInvalidRequest})
		case n < 3:
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(api.Error{Error: "master m3 was just elected and is catching up", Code: api.CodeUnavailable})
		default:
			_ = json.NewEncoder(w).Encode(api.SubmitResponse{DriverID: "driver-20260101000000-0001"})
		}
	}))
	defer leader.Close()
	follower := service.Leadership{Self: "m1", Role: raft.Follower.String(), LeaderID: "m3", LeaderHTTP: strings.TrimPrefix(leader.URL, "http://")}
	f := newFakeCore(t, New(newLeaderSwitch(follower).lead, leader.Client(), "http"))
	ctx := WithLeaderWait(context.Background(), 30*time.Second)
	res, err := f.SubmitDriver(ctx, api.SubmitRequest{Token: "t1"})
	if err != nil || res.DriverID != "driver-20260101000000-0001" {
		t.Fatalf("submit = %+v, %v", res, err)
	}
	if len(tokens) != 3 || tokens[0] != "t1" || tokens[1] != "t1" || tokens[2] != "t1" {
		t.Fatalf("the leader saw tokens %v, want t1 three times", tokens)
	}
	if _, err := f.SubmitDriver(ctx, api.SubmitRequest{Token: "bad"}); err == nil || errors.Is(err, api.ErrUnavailable) {
		t.Fatalf("bad submit: %v, want the leader's 400", err)
	}
	if len(tokens) != 4 {
		t.Fatalf("the leader saw %d requests, want the bad one once", len(tokens)-3)
	}
}

// A leader that cannot be dialled got nothing, so the refusal says that
// nothing was done (api.ErrNoLeader); a leader's own 503 after it may
// have proposed (a commit not confirmed) stays api.ErrUnavailable.
func TestNoLeaderOnlyWhenNothingWasSent(t *testing.T) {
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	uncertain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		json.NewEncoder(w).Encode(api.Error{Error: "commit not confirmed, it may or may not have happened", Code: api.CodeUnavailable})
	}))
	defer uncertain.Close()
	for _, tc := range []struct {
		name, leader string
		noLeader     bool
	}{
		{"dial refused", strings.TrimPrefix(gone.URL, "http://"), true},
		{"commit not confirmed", strings.TrimPrefix(uncertain.URL, "http://"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := service.Leadership{Self: "m1", Role: raft.Follower.String(), LeaderID: "m2", LeaderHTTP: tc.leader}
			core := newFakeCore(t, New(newLeaderSwitch(l).lead, http.DefaultClient, "http"))
			_, err := core.SubmitDriver(context.Background(), api.SubmitRequest{Token: "t1"})
			if !errors.Is(err, api.ErrUnavailable) || errors.Is(err, api.ErrNoLeader) != tc.noLeader {
				t.Fatalf("err = %v; want ErrUnavailable, ErrNoLeader %v", err, tc.noLeader)
			}
		})
	}
}
