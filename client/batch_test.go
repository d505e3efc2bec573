package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
)

// fakeLeader answers submissions alone and in batches, each driver named
// by its token, and records the requests: the number of submissions each
// held (1 for one alone). answer, when set, may refuse a submission, in
// its place in a batch or with its code's status alone.
type fakeLeader struct {
	mu       sync.Mutex
	requests []int
	// hold, when set, holds the requests that find it set until it is
	// closed.
	hold   chan struct{}
	answer func(req api.SubmitRequest) *api.Error
	// noBatch answers the batch endpoint as an older master does: 404,
	// not_found.
	noBatch bool
	// arrived counts the requests that came, held or not.
	arrived int
	// bound, when set, is a master's bound on the submissions in flight
	// (--max-submits-per-client): a batch takes the free slots for its
	// first submissions while it is served (commit, the time it holds
	// them), the others are refused too_many_requests in place, and a
	// batch that finds none free is refused whole (429). refused counts
	// the submissions refused so.
	bound, inflight, refused int
	commit                   time.Duration
}

func (f *fakeLeader) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	hold := f.hold
	f.arrived++
	f.mu.Unlock()
	if hold != nil {
		<-hold
	}
	switch r.URL.Path {
	case api.PathDrivers:
		var req api.SubmitRequest
		if json.NewDecoder(r.Body).Decode(&req) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		f.record(1)
		if f.answer != nil {
			if e := f.answer(req); e != nil {
				w.WriteHeader(e.Code.Status())
				_ = json.NewEncoder(w).Encode(e)
				return
			}
		}
		_ = json.NewEncoder(w).Encode(api.SubmitResponse{DriverID: "d-" + req.Token})
	case api.PathSubmitBatch:
		if f.noBatch {
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(api.Error{Error: "no such endpoint", Code: api.CodeNotFound})
			return
		}
		var req api.SubmitBatchRequest
		if json.NewDecoder(r.Body).Decode(&req) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		f.record(len(req.Submissions))
		admitted := f.admit(len(req.Submissions))
		if admitted == 0 {
			w.WriteHeader(http.StatusTooManyRequests)
			_ = json.NewEncoder(w).Encode(api.Error{Error: "too many submissions in flight", Code: api.CodeTooManyRequests})
			return
		}
		time.Sleep(f.commit)
		f.mu.Lock()
		if f.bound > 0 {
			f.inflight -= admitted
		}
		f.mu.Unlock()
		var out api.SubmitBatchResponse
		for i, s := range req.Submissions {
			var e *api.Error
			if f.answer != nil {
				e = f.answer(s)
			}
			if i >= admitted {
				e = &api.Error{Error: "too many submissions in flight", Code: api.CodeTooManyRequests}
			}
			if e != nil {
				out.Results = append(out.Results, api.SubmitResult{Error: e})
				continue
			}
			out.Results = append(out.Results, api.SubmitResult{SubmitResponse: api.SubmitResponse{DriverID: "d-" + s.Token}})
		}
		_ = json.NewEncoder(w).Encode(out)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// admit takes up to n slots of the bound and returns how many, counting
// the submissions refused.
func (f *fakeLeader) admit(n int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.bound == 0 {
		return n
	}
	k := min(n, f.bound-f.inflight)
	f.inflight += k
	f.refused += n - k
	return k
}

func (f *fakeLeader) record(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, n)
}

// submitAll submits one request per token from goroutines of their own
// and returns each one's answer and error, in the order of tokens.
func submitAll(c *Client, tokens []string) ([]api.SubmitResponse, []error) {
	res := make([]api.SubmitResponse, len(tokens))
	errs := make([]error, len(tokens))
	var wg sync.WaitGroup
	for i, tok := range tokens {
		wg.Go(func() {
			res[i], errs[i] = c.Submit(context.Background(), api.SubmitRequest{Token: tok})
		})
	}
	wg.Wait()
	return res, errs
}

// waitFor waits until cond, read under c's queue lock and f's, holds.
func waitFor(t *testing.T, c *Client, f *fakeLeader, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.submits.mu.Lock()
		f.mu.Lock()
		ok := cond()
		f.mu.Unlock()
		c.submits.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 10 s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// answers is what submitAll returns.
type answers struct {
	res []api.SubmitResponse
	err []error
}

// submitTogether submits one request per token, all queued before a
// sender takes any, so that they go in one batch, and returns where
// their answers will come.
func submitTogether(t *testing.T, c *Client, f *fakeLeader, tokens []string) chan answers {
	t.Helper()
	c.submits.mu.Lock()
	c.submits.sending = batchesInFlight
	c.submits.mu.Unlock()
	done := make(chan answers, 1)
	go func() {
		res, errs := submitAll(c, tokens)
		done <- answers{res, errs}
	}()
	waitFor(t, c, f, "queued submissions", func() bool { return len(c.submits.waiting) == len(tokens) })
	c.submits.mu.Lock()
	c.submits.sending = 1
	c.submits.mu.Unlock()
	go c.submits.send()
	return done
}

// Submissions made while others are out wait, and go together in one
// batch request once a sender is free; each gets its own answer.
func TestConcurrentSubmitsGoInBatches(t *testing.T) {
	f := &fakeLeader{hold: make(chan struct{})}
	c := newClient(t, Options{}, server(t, f.ServeHTTP))
	tokens := make([]string, batchesInFlight+30)
	for i := range tokens {
		tokens[i] = NewToken()
	}
	// The first batchesInFlight submissions go out alone, one after
	// the other, and are held; the rest queue behind them.
	var held []chan answers
	for i := range batchesInFlight {
		done := make(chan answers, 1)
		go func() {
			res, errs := submitAll(c, tokens[i:i+1])
			done <- answers{res, errs}
		}()
		held = append(held, done)
		waitFor(t, c, f, "held request", func() bool { return f.arrived == i+1 })
	}
	rest := make(chan answers, 1)
	go func() {
		res, errs := submitAll(c, tokens[batchesInFlight:])
		rest <- answers{res, errs}
	}()
	waitFor(t, c, f, "queued submissions", func() bool { return len(c.submits.waiting) == len(tokens)-batchesInFlight })
	f.mu.Lock()
	close(f.hold)
	f.hold = nil
	f.mu.Unlock()
	var res []api.SubmitResponse
	var errs []error
	for _, done := range append(held, rest) {
		a := <-done
		res, errs = append(res, a.res...), append(errs, a.err...)
	}
	for i, tok := range tokens {
		if errs[i] != nil || res[i].DriverID != "d-"+tok {
			t.Errorf("submission %d: %+v, %v; want d-%s", i, res[i], errs[i], tok)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.requests) != batchesInFlight+1 || f.requests[len(f.requests)-1] != len(tokens)-batchesInFlight {
		t.Errorf("requests of %v submissions, want %d alone and then one batch of %d", f.requests, batchesInFlight, len(tokens)-batchesInFlight)
	}
}

// Each submission of a batch takes its own answer: a refusal is its own
// *APIError with its code's sentinel, and one answered unavailable or
// too_many_requests is sent again, with its token, until it is committed.
func TestBatchAnswersEachSubmission(t *testing.T) {
	var mu sync.Mutex
	tries := map[string]int{}
	f := &fakeLeader{answer: func(req api.SubmitRequest) *api.Error {
		mu.Lock()
		defer mu.Unlock()
		tries[req.Token]++
		switch {
		case req.Token == "invalid":
			return &api.Error{Error: "a program is required", Code: api.CodeInvalidRequest}
		case req.Token == "lost" && tries[req.Token] < 3:
			return &api.Error{Error: "not committed", Code: api.CodeUnavailable}
		case req.Token == "busy" && tries[req.Token] < 2:
			return &api.Error{Error: "too many", Code: api.CodeTooManyRequests}
		case req.Token == "full":
			return &api.Error{Error: "drivers that have not ended are at --max-live-drivers (4)", Code: api.CodeLimitReached}
		}
		return nil
	}}
	c := newClient(t, Options{RetryInterval: time.Millisecond, MaxRetryInterval: 5 * time.Millisecond}, server(t, f.ServeHTTP))
	tokens := []string{"ok", "invalid", "lost", "busy", "full"}
	a := <-submitTogether(t, c, f, tokens)
	mu.Lock()
	defer mu.Unlock()
	for i, tok := range tokens {
		var refused *APIError
		switch tok {
		case "invalid":
			if !errors.As(a.err[i], &refused) || refused.Status != http.StatusBadRequest || !errors.Is(a.err[i], api.ErrInvalidRequest) {
				t.Errorf("the invalid submission: %v, want a 400 wrapping ErrInvalidRequest", a.err[i])
			}
			continue
		case "full":
			if !errors.As(a.err[i], &refused) || refused.Status != http.StatusTooManyRequests || !errors.Is(a.err[i], api.ErrLimitReached) {
				t.Errorf("the submission past a bound: %v, want a 429 wrapping ErrLimitReached", a.err[i])
			}
			continue
		}
		if a.err[i] != nil || a.res[i].DriverID != "d-"+tok {
			t.Errorf("%s: %+v, %v", tok, a.res[i], a.err[i])
		}
	}
	if tries["lost"] != 3 || tries["busy"] != 2 || tries["ok"] != 1 || tries["invalid"] != 1 || tries["full"] != 1 {
		t.Errorf("tries per token: %v", tries)
	}
}

// Against a master that knows no batch endpoint, the submissions of the
// refused batch, and those of the next minute, go on their own; then
// batches are tried again.
func TestSubmitsAloneWhereBatchesAreUnknown(t *testing.T) {
	f := &fakeLeader{noBatch: true}
	c := newClient(t, Options{}, server(t, f.ServeHTTP))
	tokens := []string{"a", "b", "c"}
	a := <-submitTogether(t, c, f, tokens)
	for i, err := range a.err {
		if err != nil || a.res[i].DriverID != "d-"+tokens[i] {
			t.Errorf("%s: %+v, %v", tokens[i], a.res[i], err)
		}
	}
	if _, errs := submitAll(c, []string{"d", "e"}); errs[0] != nil || errs[1] != nil {
		t.Fatalf("after the refusal: %v", errs)
	}
	f.mu.Lock()
	if len(f.requests) != 5 {
		t.Errorf("requests of %v submissions, want 5 alone", f.requests)
	}
	// The minute passes, and the master has been upgraded.
	f.noBatch, f.requests = false, nil
	f.mu.Unlock()
	c.submits.aloneUntil.Store(time.Now().Add(-time.Second).UnixNano())
	if a := <-submitTogether(t, c, f, []string{"f", "g"}); a.err[0] != nil || a.err[1] != nil {
		t.Fatalf("after the minute: %v", a.err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.requests) != 1 || f.requests[0] != 2 {
		t.Errorf("requests of %v submissions after the minute, want one batch of 2", f.requests)
	}
}

// A caller that gives up while its submission is refused as over the
// master's bound hears so: the last answer is in its error.
func TestGivingUpSaysTheLastAnswer(t *testing.T) {
	f := &fakeLeader{answer: func(req api.SubmitRequest) *api.Error {
		if req.Token == "never" {
			return &api.Error{Error: "too many submissions in flight from this client", Code: api.CodeTooManyRequests}
		}
		return nil
	}}
	c := newClient(t, Options{}, server(t, f.ServeHTTP))
	ctx, cancel := context.WithCancel(context.Background())
	c.submits.mu.Lock()
	c.submits.sending = batchesInFlight
	c.submits.mu.Unlock()
	done := make(chan error, 2)
	for _, tok := range []string{"never", "ok"} {
		go func() {
			_, err := c.Submit(map[string]context.Context{"never": ctx, "ok": context.Background()}[tok], api.SubmitRequest{Token: tok})
			if tok == "never" {
				done <- err
			} else if err != nil {
				t.Errorf("ok: %v", err)
			}
		}()
	}
	waitFor(t, c, f, "queued submissions", func() bool { return len(c.submits.waiting) == 2 })
	c.submits.mu.Lock()
	c.submits.sending = 1
	c.submits.mu.Unlock()
	go c.submits.send()
	// The batch, then the refused one again, alone.
	waitFor(t, c, f, "a refusal", func() bool { return f.arrived >= 3 })
	cancel()
	if err := <-done; !errors.Is(err, ErrNoMaster) || !strings.Contains(err.Error(), "last answer: too many submissions in flight") {
		t.Fatalf("giving up: %v", err)
	}
}

// A caller that gives up while its submission waits gets ErrNoMaster
// at once, and the submission is not sent.
func TestGivenUpSubmissionIsNotSent(t *testing.T) {
	f := &fakeLeader{}
	c := newClient(t, Options{}, server(t, f.ServeHTTP))
	c.submits.mu.Lock()
	c.submits.sending = batchesInFlight
	c.submits.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Submit(ctx, api.SubmitRequest{Token: "gone"})
		done <- err
	}()
	waitFor(t, c, f, "queued submission", func() bool { return len(c.submits.waiting) == 1 })
	cancel()
	if err := <-done; !errors.Is(err, ErrNoMaster) {
		t.Fatalf("a submission given up: %v, want ErrNoMaster", err)
	}
	// The sender that starts now finds it given up.
	c.submits.mu.Lock()
	c.submits.sending = 0
	c.submits.mu.Unlock()
	if res, err := c.Submit(context.Background(), api.SubmitRequest{Token: "next"}); err != nil || res.DriverID != "d-next" {
		t.Fatalf("the next submission: %+v, %v", res, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.requests) != 1 {
		t.Errorf("requests of %v submissions, want the next one alone", f.requests)
	}
}

// Against a master that admits few submissions at once, the batches
// shrink to what it admits, and those it refuses as over its bound go
// again at once: every submission is made, without sending each refused
// one dozens of times.
func TestBatchesShrinkToTheMastersBound(t *testing.T) {
	f := &fakeLeader{bound: 5, commit: 2 * time.Millisecond}
	c := newClient(t, Options{}, server(t, f.ServeHTTP))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 300
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = c.Submit(ctx, api.SubmitRequest{Token: NewToken()})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("submission %d: %v", i, err)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refused > batchesInFlight*maxBatch+n {
		t.Errorf("%d submissions refused as over the bound on the way to %d made", f.refused, n)
	}
	t.Logf("%d requests, %d submissions refused as over the bound", len(f.requests), f.refused)
}
