package service

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/security/auth"
	"github.com/drover-project/drover/security/pki"
)

// workerCalls is a rules value that counts the worker traffic that reaches it;
// every other method is the embedded nil interface's, which no test calls.
type workerCalls struct {
	rules
	n int
}

func (w *workerCalls) RegisterWorker(context.Context, auth.Caller, api.RegisterWorkerRequest) (api.RegisterWorkerResponse, error) {
	w.n++
	return api.RegisterWorkerResponse{}, nil
}

func (w *workerCalls) Heartbeat(context.Context, auth.Caller, string, api.HeartbeatRequest) (api.HeartbeatResponse, error) {
	w.n++
	return api.HeartbeatResponse{}, nil
}

func (w *workerCalls) DecommissionWorker(context.Context, auth.Caller, string, api.DecommissionWorkerRequest) (api.RegisterWorkerResponse, error) {
	w.n++
	return api.RegisterWorkerResponse{}, nil
}

// TestAdmitHoldsWorkersToTheirID: w1's certificate registers, heartbeats
// and decommissions as w1, and as w2 is refused 403 before the request
// goes any further; an older worker with the operator token gets through,
// its notice logged once however often it comes.
func TestAdmitHoldsWorkersToTheirID(t *testing.T) {
	ctx := context.Background()
	g, err := auth.New(auth.Config{TLS: true, OperatorToken: "OperatorTok-0123456789abcdef", SubmitToken: "SubmitTok-abcdefghij0123456"})
	if err != nil {
		t.Fatal(err)
	}
	next := &workerCalls{}
	s := admitThrough(next, g, slog.Default(), Bounds{}, nil)
	w1 := auth.Caller{Identity: auth.Identity{Role: pki.RoleWorker, NodeID: "w1"}}
	calls := map[string]func(id string) error{
		"register": func(id string) error {
			_, err := s.RegisterWorker(ctx, w1, api.RegisterWorkerRequest{ID: id})
			return err
		},
		"heartbeat": func(id string) error { _, err := s.Heartbeat(ctx, w1, id, api.HeartbeatRequest{}); return err },
		"decommission": func(id string) error {
			_, err := s.DecommissionWorker(ctx, w1, id, api.DecommissionWorkerRequest{})
			return err
		},
	}
	for name, call := range calls {
		before := next.n
		if err := call("w2"); !errors.Is(err, api.ErrForbidden) || !strings.Contains(err.Error(), "worker certificate of w1 may not act as w2") {
			t.Errorf("%s as w2: %v, want 403", name, err)
		}
		if next.n != before {
			t.Errorf("%s as w2 went past admission", name)
		}
		if err := call("w1"); err != nil || next.n != before+1 {
			t.Errorf("%s as w1: %v (calls %d)", name, err, next.n-before)
		}
	}

	var logged bytes.Buffer
	plain, err := auth.New(auth.Config{OperatorToken: "OperatorTok-0123456789abcdef", NodeToken: "NodeTok-0123456789ABCDEFGHIJ"})
	if err != nil {
		t.Fatal(err)
	}
	s = admitThrough(next, plain, slog.New(slog.NewTextHandler(&logged, nil)), Bounds{}, nil)
	op := auth.Caller{Identity: auth.Identity{Token: auth.OperatorToken}}
	node := auth.Caller{Identity: auth.Identity{Token: auth.NodeToken}}
	for range 3 {
		for _, c := range []auth.Caller{op, node} {
			if _, err := s.Heartbeat(ctx, c, "w7", api.HeartbeatRequest{}); err != nil {
				t.Fatalf("%s: %v", c.Identity, err)
			}
		}
	}
	if n := strings.Count(logged.String(), "presents the operator token"); n != 1 || strings.Count(logged.String(), "\n") != 1 {
		t.Fatalf("logged %q: want the operator token's notice once, and nothing for the node token", logged.String())
	}
}

// A worker ID that is no worker ID is refused 400 before the guard
// quotes it: an unbound worker certificate (with
// --allow-unbound-worker-certs) or the operator token naming a megabyte
// ID by path or body logs no notice and gets a refusal that quotes a
// short prefix of it, and nothing goes further.
func TestAdmitChecksTheWorkerIDFirst(t *testing.T) {
	ctx := context.Background()
	huge := strings.Repeat("w", 1<<20)
	for _, c := range []struct {
		name   string
		cfg    auth.Config
		caller auth.Identity
	}{
		{"unbound certificate", auth.Config{TLS: true, OperatorToken: "OperatorTok-0123456789abcdef", AllowUnboundWorkerCerts: true}, auth.Identity{Role: pki.RoleWorker}},
		{"operator token", auth.Config{OperatorToken: "OperatorTok-0123456789abcdef", NodeToken: "NodeTok-0123456789ABCDEFGHIJ"}, auth.Identity{Token: auth.OperatorToken}},
	} {
		g, err := auth.New(c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		var logged bytes.Buffer
		next := &workerCalls{}
		s := admitThrough(next, g, slog.New(slog.NewTextHandler(&logged, nil)), Bounds{}, nil)
		caller := auth.Caller{Identity: c.caller}
		for _, id := range []string{huge, "../w1", "w" + strings.Repeat("1", 64)} {
			for what, err := range map[string]error{
				"register":  func() error { _, err := s.RegisterWorker(ctx, caller, api.RegisterWorkerRequest{ID: id}); return err }(),
				"heartbeat": func() error { _, err := s.Heartbeat(ctx, caller, id, api.HeartbeatRequest{}); return err }(),
				"decommission": func() error {
					_, err := s.DecommissionWorker(ctx, caller, id, api.DecommissionWorkerRequest{})
					return err
				}(),
			} {
				if !errors.Is(err, api.ErrInvalidRequest) || len(err.Error()) > 200 {
					t.Errorf("%s: %s as %.20q...: %.300v, want a short 400", c.name, what, id, err)
				}
			}
		}
		if next.n != 0 || logged.Len() != 0 {
			t.Errorf("%s: %d calls went past admission and it logged %.300q, want none", c.name, next.n, logged.String())
		}
		// A valid ID still passes, its notice logged once.
		for range 2 {
			if _, err := s.Heartbeat(ctx, caller, "w1", api.HeartbeatRequest{}); err != nil {
				t.Fatalf("%s: heartbeat as w1: %v", c.name, err)
			}
		}
		if strings.Count(logged.String(), "\n") != 1 || !strings.Contains(logged.String(), "w1") {
			t.Errorf("%s: logged %q, want one notice naming w1", c.name, logged.String())
		}
	}
}
