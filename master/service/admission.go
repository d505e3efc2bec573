package service

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/internal/warnonce"
	"github.com/drover-project/drover/model/ids"
	"github.com/drover-project/drover/security/auth"
)

// Bounds are the bounds the Chain keeps per client IP on this master, each on
// requests in flight; 0 is no bound. More are refused with
// api.ErrTooManyRequests. As Consul's http_max_conns_per_client counts
// connections, they count the requests that hold a master's resources
// for long.
type Bounds struct {
	// Submits bounds submissions and app registrations
	// (--max-submits-per-client).
	Submits int
	// Uploads bounds uploads (--max-uploads-per-client): each holds a
	// temp file and a push to every voter.
	Uploads int
	// EventStreams bounds event streams open
	// (--max-event-streams-per-client): each holds a goroutine, a
	// connection and a queue of events for as long as its reader reads.
	EventStreams int
	// BlockingReads bounds blocking reads waiting for a change
	// (--max-blocking-reads-per-client): each holds a goroutine, a
	// connection and a subscription for up to its wait.
	BlockingReads int
}

// Defaults of Bounds' event streams and blocking reads.
const (
	DefaultMaxEventStreamsPerClient  = 16
	DefaultMaxBlockingReadsPerClient = 64
)

// admission is the chain's first step (Chain): each request is checked
// for the auth.Access its endpoint needs (Guard.Check), a worker's own
// traffic for the right to act as that worker (Guard.CheckWorker, whose
// notices go to the log once per worker), and submissions, app
// registrations, uploads, event streams and blocking reads are bounded per
// client IP (Bounds). It runs on the master the request reached first, in
// front of the forwarding to the leader, so a caller is admitted before
// any master acts for it.
type admission struct {
	guard      *auth.Guard
	known      func(token string) bool
	submitting *inflight
	uploading  *inflight
	streaming  *inflight
	blocking   *inflight

	// noticed logs each notice of Guard.CheckWorker once, keyed by the
	// notice, which names its (checked) worker.
	noticed *warnonce.Set
}

func newAdmission(g *auth.Guard, log *slog.Logger, b Bounds, known func(token string) bool) *admission {
	return &admission{guard: g, known: known, submitting: newInflight(b.Submits), uploading: newInflight(b.Uploads),
		streaming: newInflight(b.EventStreams), blocking: newInflight(b.BlockingReads),
		noticed: warnonce.New(log, maxNoticed, "worker credentials' notices came for more workers than are logged; further ones are not logged")}
}

// maxNoticed bounds the notices remembered, so that callers naming ever
// new worker IDs can neither grow the set without end nor flood the log:
// past it, one line says further notices go unlogged.
const maxNoticed = 4096

// admit admits c for an endpoint e: a worker's own traffic when worker is
// set (the worker it acts as), else e.Access; then it takes the slots of
// e.Bound and, for a read that blocks, a blocking read slot. The returned
// function gives them back.
func (a *admission) admit(e *Info, c auth.Caller, r Read, worker *string) (func(), error) {
	nothing := func() {}
	switch {
	case e.Open:
		return nothing, nil
	case worker != nil:
		if err := a.worker(c, *worker); err != nil {
			return nil, err
		}
		return nothing, nil
	}
	switch {
	case e.Bound == SubmitSlot:
		return a.slot(c, e.Access, a.submitting, "too many submissions in flight from this client; retry shortly")
	case e.Bound == UploadSlot:
		return a.slot(c, e.Access, a.uploading,
			fmt.Sprintf("this client has %d uploads in flight here, the bound of --max-uploads-per-client; retry once one ends", a.uploading.max))
	case e.Query == BlockingQuery && r.Index != 0:
		return a.slot(c, e.Access, a.blocking,
			fmt.Sprintf("this client has %d blocking reads waiting here, the bound of --max-blocking-reads-per-client; retry once one answers", a.blocking.max))
	}
	return nothing, a.guard.Check(c.Identity, e.Access)
}

// worker admits c for the traffic of worker id: Node access, a valid
// worker ID (ids.CheckWorker, else api.ErrInvalidRequest), and the right
// to act as that worker (Guard.CheckWorker), whose notice it logs the
// first time it comes. The ID is checked before CheckWorker quotes it in
// a notice or a refusal, so neither carries more than a worker ID's 64
// characters whatever the path or body held.
func (a *admission) worker(c auth.Caller, id string) error {
	if err := a.guard.Check(c.Identity, auth.Node); err != nil {
		return err
	}
	if err := ids.CheckWorker(id); err != nil {
		return api.Errorf(api.ErrInvalidRequest, "%v", err)
	}
	notice, err := a.guard.CheckWorker(c.Identity, id)
	if err == nil && notice != "" {
		a.noticed.Warn(notice, notice, "worker", id, "deprecated", true)
	}
	return err
}

// slot admits c for a and takes one of its IP's slots of l, or refuses it
// with api.ErrTooManyRequests and the message full; the returned function
// gives the slot back. A forwarded request takes none: the master it
// reached first took it.
func (a *admission) slot(c auth.Caller, access auth.Access, l *inflight, full string) (func(), error) {
	if err := a.guard.Check(c.Identity, access); err != nil {
		return nil, err
	}
	if c.ForwardedBy != "" {
		return func() {}, nil
	}
	if !l.acquire(c.IP) {
		return nil, api.Errorf(api.ErrTooManyRequests, "%s", full)
	}
	return func() { l.release(c.IP) }, nil
}

// admitBatch admits a batch of submissions (V1SubmitDrivers): it takes
// one of the client IP's slots for each submission of the batch, as many
// as are free. When they are too few, a submission that costs the leader
// an answer but no entry needs none (costsNoEntry: it is invalid, its
// token is committed on this master already, or it came earlier in the
// batch), so a client that sends a whole batch again after part of it was
// refused moves on instead of spending its slots on what is done. The
// batch keeps at least one slot, which bounds the batches a client holds
// in flight. The submissions left without a slot are each answered
// api.ErrTooManyRequests, in their place, to be retried, and the others go
// on together. A batch that finds no slot free is refused whole, as a lone
// submission would be.
func admitBatch(a *admission, c auth.Caller, r Request[api.SubmitBatchRequest], next func(Request[api.SubmitBatchRequest]) (api.SubmitBatchResponse, error)) (api.SubmitBatchResponse, error) {
	req := r.Body
	if err := a.guard.Check(c.Identity, auth.Submit); err != nil {
		return api.SubmitBatchResponse{}, err
	}
	if err := checkBatch(len(req.Submissions)); err != nil {
		return api.SubmitBatchResponse{}, err
	}
	if c.ForwardedBy != "" {
		return next(r)
	}
	n := len(req.Submissions)
	k := a.submitting.acquireUpTo(c.IP, n)
	if k == 0 {
		return api.SubmitBatchResponse{}, api.Errorf(api.ErrTooManyRequests, "too many submissions in flight from this client; retry shortly")
	}
	if k == n {
		defer a.submitting.releaseN(c.IP, k)
		return next(r)
	}
	// Short of slots: only now is it worth sorting out the submissions
	// that need none.
	admit := make([]bool, n)
	var fresh []int
	first := map[string]bool{}
	for i, s := range req.Submissions {
		if a.costsNoEntry(s, first) {
			admit[i] = true
		} else {
			fresh = append(fresh, i)
		}
	}
	if need := max(len(fresh), 1); k > need {
		a.submitting.releaseN(c.IP, k-need)
		k = need
	}
	defer a.submitting.releaseN(c.IP, k)
	if k >= len(fresh) {
		return next(r)
	}
	for _, i := range fresh[:k] {
		admit[i] = true
	}
	part := r
	part.Body = api.SubmitBatchRequest{}
	for i, s := range req.Submissions {
		if admit[i] {
			part.Body.Submissions = append(part.Body.Submissions, s)
		}
	}
	out, err := next(part)
	if err != nil {
		return out, err
	}
	if len(out.Results) != len(part.Body.Submissions) {
		return api.SubmitBatchResponse{}, api.Errorf(api.ErrInternal, "%d answers to a batch of %d", len(out.Results), len(part.Body.Submissions))
	}
	over := api.ErrorOf(api.Errorf(api.ErrTooManyRequests, "too many submissions in flight from this client; retry this one shortly"))
	results := make([]api.SubmitResult, len(req.Submissions))
	answered := out.Results
	for i := range results {
		if !admit[i] {
			results[i].Error = over
			continue
		}
		results[i], answered = answered[0], answered[1:]
	}
	return api.SubmitBatchResponse{Results: results}, nil
}

// costsNoEntry says whether submission r of a batch will be answered
// without a Raft entry of its own, and so needs no slot: it is refused
// (the checks of a submission are local and cheap), its token is committed
// already (known), or its token came earlier in the batch, whose driver it
// yields (seen holds the batch's tokens so far, and r's is added).
func (a *admission) costsNoEntry(r api.SubmitRequest, seen map[string]bool) bool {
	if _, err := submission(r); err != nil {
		return true
	}
	if seen[r.Token] || (a.known != nil && a.known(r.Token)) {
		return true
	}
	seen[r.Token] = true
	return false
}

// inflight counts requests in flight per key, up to max each.
type inflight struct {
	max int
	mu  sync.Mutex
	n   map[string]int
}

func newInflight(max int) *inflight { return &inflight{max: max, n: map[string]int{}} }

func (l *inflight) acquire(key string) bool {
	if l.max <= 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[key] >= l.max {
		return false
	}
	l.n[key]++
	return true
}

func (l *inflight) release(key string) { l.releaseN(key, 1) }

// acquireUpTo takes up to n slots of key, as many as are free, and
// returns how many it took.
func (l *inflight) acquireUpTo(key string, n int) int {
	if l.max <= 0 {
		return n
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	k := min(n, l.max-l.n[key])
	if k <= 0 {
		return 0
	}
	l.n[key] += k
	return k
}

// releaseN gives back n slots of key.
func (l *inflight) releaseN(key string, n int) {
	if l.max <= 0 || n <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[key] -= n; l.n[key] <= 0 {
		delete(l.n, key)
	}
}
