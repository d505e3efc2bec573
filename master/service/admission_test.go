package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/fsm/events"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/security/auth"
)

// blocking is a rules value whose submissions wait for release; every other
// method is the embedded nil interface's, which no test calls.
type blocking struct {
	rules
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
	s := admitThrough(next, g, slog.Default(), Bounds{Submits: 2}, nil)
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
	s := admitThrough(nil, g, slog.Default(), Bounds{}, nil)
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

// SubmitDrivers records the batches it gets and answers each submission
// with a driver named by its token, after entered and release as
// SubmitDriver does.
func (b *blocking) SubmitDrivers(_ context.Context, _ auth.Caller, req api.SubmitBatchRequest) (api.SubmitBatchResponse, error) {
	b.entered.Done()
	<-b.release
	var out api.SubmitBatchResponse
	for _, r := range req.Submissions {
		out.Results = append(out.Results, api.SubmitResult{SubmitResponse: api.SubmitResponse{DriverID: "d-" + r.Token}})
	}
	return out, nil
}

// A batch takes one of the client IP's slots per submission, as many as
// are free: the submissions beyond them are each answered
// too_many_requests, in their place, and only a batch that finds no slot
// free is refused whole. A forwarded batch takes none.
func TestAdmitBoundsBatchesPerSubmission(t *testing.T) {
	g, err := auth.New(auth.Config{})
	if err != nil {
		t.Fatal(err)
	}
	next := &blocking{release: make(chan struct{})}
	s := admitThrough(next, g, slog.Default(), Bounds{Submits: 4}, nil)
	batch := func(tokens ...string) api.SubmitBatchRequest {
		var req api.SubmitBatchRequest
		for _, tok := range tokens {
			req.Submissions = append(req.Submissions, valid(tok))
		}
		return req
	}
	type answer struct {
		res api.SubmitBatchResponse
		err error
	}
	send := func(forwardedBy string, req api.SubmitBatchRequest) chan answer {
		out := make(chan answer, 1)
		go func() {
			res, err := s.SubmitDrivers(context.Background(), auth.Caller{IP: "10.0.0.1", ForwardedBy: forwardedBy}, req)
			out <- answer{res, err}
		}()
		return out
	}
	next.entered.Add(1)
	first := send("", batch("a", "b"))
	next.entered.Wait()
	next.entered.Add(2)
	second := send("", batch("c", "d", "e", "f"))
	forwarded := send("m2", batch("g", "h", "i", "j", "k"))
	next.entered.Wait()
	// Four slots, all taken: two by the first batch, two by the second.
	if a := <-send("", batch("x")); !errors.Is(a.err, api.ErrTooManyRequests) {
		t.Fatalf("a batch with no slot free: %+v, want ErrTooManyRequests", a)
	}
	close(next.release)
	if a := <-first; a.err != nil || len(a.res.Results) != 2 || a.res.Results[1].DriverID != "d-b" {
		t.Fatalf("first batch: %+v", a)
	}
	a := <-second
	if a.err != nil || len(a.res.Results) != 4 {
		t.Fatalf("second batch: %+v", a)
	}
	for i, r := range a.res.Results {
		over := r.Error != nil && r.Error.Code == api.CodeTooManyRequests && r.DriverID == ""
		if want := i >= 2; over != want || (!over && r.DriverID != "d-"+string(rune('c'+i))) {
			t.Errorf("second batch, submission %d: %+v; want too_many_requests %v", i, r, want)
		}
	}
	if a := <-forwarded; a.err != nil || len(a.res.Results) != 5 || a.res.Results[4].Error != nil {
		t.Fatalf("forwarded batch: %+v", a)
	}
	// The slots came back.
	next.entered.Add(1)
	if a := <-send("", batch("l", "m", "n", "o")); a.err != nil || a.res.Results[3].Error != nil {
		t.Fatalf("after the others ended: %+v", a)
	}
	for _, n := range []int{0, api.MaxBatchSubmissions + 1} {
		if _, err := s.SubmitDrivers(context.Background(), auth.Caller{IP: "10.0.0.1"}, api.SubmitBatchRequest{Submissions: make([]api.SubmitRequest, n)}); !errors.Is(err, api.ErrInvalidRequest) {
			t.Errorf("a batch of %d: %v, want ErrInvalidRequest", n, err)
		}
	}
}

// committing is a rules value that commits every submission it gets, with a
// driver named by its token, and can hold a batch until released.
type committing struct {
	rules
	mu        sync.Mutex
	committed map[string]bool
	// entered hears of each batch before hold holds it.
	entered chan struct{}
	hold    chan struct{}
}

func (c *committing) known(token string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.committed[token]
}

func (c *committing) SubmitDrivers(_ context.Context, _ auth.Caller, req api.SubmitBatchRequest) (api.SubmitBatchResponse, error) {
	if c.hold != nil {
		c.entered <- struct{}{}
		<-c.hold
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var out api.SubmitBatchResponse
	for _, r := range req.Submissions {
		out.Results = append(out.Results, api.SubmitResult{SubmitResponse: api.SubmitResponse{DriverID: "d-" + r.Token, Existing: c.committed[r.Token]}})
		c.committed[r.Token] = true
	}
	return out, nil
}

// valid is a submission that passes the checks, with token tok.
func valid(tok string) api.SubmitRequest {
	return api.SubmitRequest{Token: tok, DriverSpec: model.DriverSpec{Argv: []string{"/bin/true"}, Cores: 1, MemoryMB: 64}}
}

// A client that sends its whole batch again after part of it was refused
// moves on: the submissions already committed take no slot, and every
// answer stays in its submission's place. A batch still needs one free
// slot, even when all of it is committed.
func TestAdmitLetsCommittedSubmissionsThrough(t *testing.T) {
	g, err := auth.New(auth.Config{})
	if err != nil {
		t.Fatal(err)
	}
	next := &committing{committed: map[string]bool{}}
	s := admitThrough(next, g, slog.Default(), Bounds{Submits: 4}, next.known)
	var req api.SubmitBatchRequest
	for i := range 10 {
		req.Submissions = append(req.Submissions, valid(string(rune('a'+i))))
	}
	caller := auth.Caller{IP: "10.0.0.1"}
	var refused []int
	for round := 1; ; round++ {
		if round > 3 {
			t.Fatalf("still %d refused after %d sends of the whole batch of 10 at 4 slots", len(refused), round-1)
		}
		out, err := s.SubmitDrivers(context.Background(), caller, req)
		if err != nil || len(out.Results) != 10 {
			t.Fatalf("round %d: %+v, %v", round, out, err)
		}
		refused = refused[:0]
		for i, r := range out.Results {
			switch {
			case r.Error != nil && r.Error.Code == api.CodeTooManyRequests:
				refused = append(refused, i)
			case r.Error != nil || r.DriverID != "d-"+req.Submissions[i].Token:
				t.Fatalf("round %d, submission %d: %+v", round, i, r)
			}
		}
		// Four new ones a round, the first still waiting.
		if want := max(10-4*round, 0); len(refused) != want || (want > 0 && refused[0] != 10-want) {
			t.Fatalf("round %d: refused %v, want the last %d", round, refused, want)
		}
		if len(refused) == 0 {
			break
		}
	}

	// Submissions refused on their own, and repeats of a token earlier
	// in the batch, need no slot either: four of each and two new ones
	// fit in four slots.
	var mixed api.SubmitBatchRequest
	for i := range 4 {
		bad := valid(fmt.Sprint("bad", i))
		bad.Argv = nil
		mixed.Submissions = append(mixed.Submissions, bad, valid("new1"))
	}
	mixed.Submissions = append(mixed.Submissions, valid("new2"))
	out, err := s.SubmitDrivers(context.Background(), caller, mixed)
	if err != nil || len(out.Results) != len(mixed.Submissions) {
		t.Fatalf("mixed batch: %+v, %v", out, err)
	}
	for i, r := range out.Results {
		if r.Error != nil && r.Error.Code == api.CodeTooManyRequests {
			t.Errorf("mixed batch, submission %d (%s) refused for want of a slot", i, mixed.Submissions[i].Token)
		}
	}

	next.entered, next.hold = make(chan struct{}, 1), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		_, err := s.SubmitDrivers(context.Background(), caller, api.SubmitBatchRequest{Submissions: []api.SubmitRequest{{Token: "w"}, {Token: "x"}, {Token: "y"}, {Token: "z"}}})
		held <- err
	}()
	<-next.entered
	if _, err := s.SubmitDrivers(context.Background(), caller, req); !errors.Is(err, api.ErrTooManyRequests) {
		t.Fatalf("a committed batch with no slot free: %v, want ErrTooManyRequests", err)
	}
	close(next.hold)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
}

// Driver and App wait for release, as SubmitDriver does: a blocking read
// held by the leader.
func (b *blocking) Driver(context.Context, auth.Caller, string, Read) (*model.Driver, error) {
	b.entered.Done()
	<-b.release
	return &model.Driver{}, nil
}

func (b *blocking) App(context.Context, auth.Caller, string, Read) (api.AppStatus, error) {
	b.entered.Done()
	<-b.release
	return api.AppStatus{}, nil
}

// Events answers at once with a stream of a buffer of its own.
func (b *blocking) Events(context.Context, auth.Caller, EventQuery) (*EventStream, error) {
	sub, _ := events.New(events.Bounds{Events: 1}).Subscribe(0, events.Filter{}, 1)
	return &EventStream{Sub: sub}, nil
}

// A client IP gets at most BlockingReads blocking reads of drivers and
// apps together in flight; the next is refused with ErrTooManyRequests
// naming the bound, while reads that do not block, other IPs and reads a
// master forwarded are not held back, and the slots come back as the
// reads answer.
func TestAdmitBoundsBlockingReadsPerClient(t *testing.T) {
	g, err := auth.New(auth.Config{})
	if err != nil {
		t.Fatal(err)
	}
	next := &blocking{release: make(chan struct{})}
	s := admitThrough(next, g, slog.Default(), Bounds{BlockingReads: 2}, nil)
	ctx := context.Background()
	wait := Read{Index: 5}
	answers := make(chan error, 10)
	read := func(ip, forwardedBy string, app bool, r Read) {
		go func() {
			c := auth.Caller{IP: ip, ForwardedBy: forwardedBy}
			var err error
			if app {
				_, err = s.App(ctx, c, "app-20261129120000-0000", r)
			} else {
				_, err = s.Driver(ctx, c, "driver-20261129120000-0000", r)
			}
			answers <- err
		}()
	}
	next.entered.Add(6)
	read("10.0.0.1", "", false, wait)
	read("10.0.0.1", "", true, wait)
	read("10.0.0.2", "", false, wait)
	read("10.0.0.1", "m2", false, wait)
	read("10.0.0.1", "", false, Read{})
	read("10.0.0.1", "", true, Read{Stale: true})
	entered := make(chan struct{})
	go func() {
		next.entered.Wait()
		close(entered)
	}()
	select {
	case err := <-answers:
		t.Fatalf("a read within the bounds answered before its release: %v", err)
	case <-entered:
	}
	for _, app := range []bool{false, true} {
		read("10.0.0.1", "", app, wait)
		if err := <-answers; !errors.Is(err, api.ErrTooManyRequests) || !strings.Contains(err.Error(), "2 blocking reads waiting here, the bound of --max-blocking-reads-per-client") {
			t.Fatalf("a third blocking read from one IP (app %v): %v, want ErrTooManyRequests naming the bound", app, err)
		}
	}
	close(next.release)
	for range 6 {
		if err := <-answers; err != nil {
			t.Fatalf("held read: %v", err)
		}
	}
	next.entered.Add(2)
	read("10.0.0.1", "", false, wait)
	read("10.0.0.1", "", true, wait)
	for range 2 {
		if err := <-answers; err != nil {
			t.Fatalf("after the others answered: %v", err)
		}
	}
}

// A client IP holds at most EventStreams streams open; the next is
// refused naming the bound, and closing one gives its slot back.
func TestAdmitBoundsEventStreamsPerClient(t *testing.T) {
	g, err := auth.New(auth.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s := admitThrough(&blocking{}, g, slog.Default(), Bounds{EventStreams: 2}, nil)
	ctx := context.Background()
	open := func(ip string) (*EventStream, error) { return s.Events(ctx, auth.Caller{IP: ip}, EventQuery{}) }
	var streams []*EventStream
	for _, ip := range []string{"10.0.0.1", "10.0.0.1", "10.0.0.2"} {
		st, err := open(ip)
		if err != nil {
			t.Fatalf("stream from %s: %v", ip, err)
		}
		streams = append(streams, st)
	}
	_, err = open("10.0.0.1")
	if !errors.Is(err, api.ErrTooManyRequests) || !strings.Contains(err.Error(), "2 event streams open here, the bound of --max-event-streams-per-client") {
		t.Fatalf("a third stream from one IP: %v, want ErrTooManyRequests naming the bound", err)
	}
	streams[0].Close()
	st, err := open("10.0.0.1")
	if err != nil {
		t.Fatalf("after one was closed: %v", err)
	}
	st.Close()
	for _, st := range streams[1:] {
		st.Close()
	}
}
