package service

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/auth"
)

// blocking is a Service whose submissions wait for release; every other
// method is the embedded nil interface's, which no test calls.
type blocking struct {
	Service
	entered sync.WaitGroup
	release chan struct{}
}

func (b *blocking) SubmitDriver(context.Context, auth.Caller, api.SubmitRequest) (api.SubmitResponse, error) {
	b.entered.Done()
	<-b.release
	return api.SubmitResponse{DriverID: "d"}, nil
}

// A client IP gets at most maxSubmitsPerClient submissions in flight; more
// are refused with ErrTooManyRequests, other IPs and forwarded requests
// are not held back, and the slots come back when the submissions end.
func TestAdmitBoundsSubmissionsPerClient(t *testing.T) {
	g, err := auth.New(auth.Config{})
	if err != nil {
		t.Fatal(err)
	}
	next := &blocking{release: make(chan struct{})}
	s := Admit(next, g, 2)
	send := func(ip, forwardedBy string) chan error {
		out := make(chan error, 1)
		go func() {
			_, err := s.SubmitDriver(context.Background(), auth.Caller{IP: ip, ForwardedBy: forwardedBy}, api.SubmitRequest{})
			out <- err
		}()
		return out
	}
	next.entered.Add(4)
	held := []chan error{send("10.0.0.1", ""), send("10.0.0.1", ""), send("10.0.0.2", ""), send("10.0.0.1", "m2")}
	next.entered.Wait()
	if err := <-send("10.0.0.1", ""); !errors.Is(err, api.ErrTooManyRequests) {
		t.Fatalf("third submission in flight from one IP: %v, want ErrTooManyRequests", err)
	}
	close(next.release)
	for _, c := range held {
		if err := <-c; err != nil {
			t.Fatalf("held submission: %v", err)
		}
	}
	next.entered.Add(1)
	if err := <-send("10.0.0.1", ""); err != nil {
		t.Fatalf("after the others ended: %v", err)
	}
}

// Admission refuses before anything runs: the next service never sees a
// caller without the access, and the refusal says which kind it is.
func TestAdmitChecksAccessFirst(t *testing.T) {
	g, err := auth.New(auth.Config{OperatorToken: "OperatorTok-0123456789abcdef", SubmitToken: "SubmitTok-abcdefghij0123456"})
	if err != nil {
		t.Fatal(err)
	}
	s := Admit(nil, g, 0)
	ctx := context.Background()
	anon := auth.Caller{}
	if _, err := s.SubmitDriver(ctx, anon, api.SubmitRequest{}); !errors.Is(err, api.ErrUnauthenticated) {
		t.Fatalf("anonymous submit: %v", err)
	}
	sub, err := g.IdentifyToken("SubmitTok-abcdefghij0123456")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RaftPeers(ctx, auth.Caller{Identity: sub}, Read{}); !errors.Is(err, api.ErrForbidden) {
		t.Fatalf("submit token on an operator call: %v", err)
	}
	if _, err := s.Heartbeat(ctx, auth.Caller{Identity: sub}, "w1", api.HeartbeatRequest{}); !errors.Is(err, api.ErrForbidden) {
		t.Fatalf("submit token on a heartbeat: %v", err)
	}
	if err := s.Allow(ctx, auth.Caller{Identity: sub}, auth.Read); err != nil {
		t.Fatalf("submit token reading: %v", err)
	}
}
