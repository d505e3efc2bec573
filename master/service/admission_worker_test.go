package service

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/auth"
	"github.com/drover-project/drover/pki"
)

// workerCalls is a Service that counts the worker traffic that reaches it;
// every other method is the embedded nil interface's, which no test calls.
type workerCalls struct {
	Service
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
	s := Admit(next, g, slog.Default(), Bounds{}, nil)
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
	s = Admit(next, plain, slog.New(slog.NewTextHandler(&logged, nil)), Bounds{}, nil)
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
