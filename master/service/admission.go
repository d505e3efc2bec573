package service

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/internal/warnonce"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/model/ids"
	"github.com/drover-project/drover/security/auth"
)

// Bounds are the bounds Admit keeps per client IP on this master, each on
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

// Admit returns next behind the access rules: each method first checks
// that the caller has the auth.Access it needs (Guard.Check), a worker's
// own traffic that the caller may act as that worker (Guard.CheckWorker,
// whose notices go to log once per worker), and submissions, app
// registrations, uploads, event streams and blocking reads are bounded per
// client IP (b). It runs on the master the request reached first, in front
// of the forwarding to the leader, so a caller is admitted before any
// master acts for it; the leader admits a forwarded request again by the
// credential the forwarding master carried on, and does not count it
// against the forwarding master's IP. known says whether a submission
// token is committed in this master's tables (fsm.FSM.DriverByToken); nil
// knows none.
func Admit(next Service, g *auth.Guard, log *slog.Logger, b Bounds, known func(token string) bool) Service {
	return &admission{next: next, guard: g, known: known, submitting: newInflight(b.Submits), uploading: newInflight(b.Uploads),
		streaming: newInflight(b.EventStreams), blocking: newInflight(b.BlockingReads),
		noticed: warnonce.New(log, maxNoticed, "worker credentials' notices came for more workers than are logged; further ones are not logged")}
}

type admission struct {
	next       Service
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

// maxNoticed bounds the notices remembered, so that callers naming ever
// new worker IDs can neither grow the set without end nor flood the log:
// past it, one line says further notices go unlogged.
const maxNoticed = 4096

// admitted runs f when c has access, and returns its results.
func admitted[T any](a *admission, c auth.Caller, access auth.Access, f func() (T, error)) (T, error) {
	if err := a.guard.Check(c.Identity, access); err != nil {
		var zero T
		return zero, err
	}
	return f()
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

// workerAdmitted runs f when c may act as worker id (admission.worker).
func workerAdmitted[T any](a *admission, c auth.Caller, id string, f func() (T, error)) (T, error) {
	if err := a.worker(c, id); err != nil {
		var zero T
		return zero, err
	}
	return f()
}

// bounded admits c for a and takes one of its IP's submission slots; the
// returned function gives the slot back.
func (a *admission) bounded(c auth.Caller, access auth.Access) (func(), error) {
	return a.slot(c, access, a.submitting, "too many submissions in flight from this client; retry shortly")
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

// read admits c for a read with access, taking one of its IP's blocking
// read slots when r blocks (r.Index set).
func (a *admission) read(c auth.Caller, access auth.Access, r Read) (func(), error) {
	if r.Index == 0 {
		return func() {}, a.guard.Check(c.Identity, access)
	}
	return a.slot(c, access, a.blocking,
		fmt.Sprintf("this client has %d blocking reads waiting here, the bound of --max-blocking-reads-per-client; retry once one answers", a.blocking.max))
}

func (a *admission) SubmitDriver(ctx context.Context, c auth.Caller, req api.SubmitRequest) (api.SubmitResponse, error) {
	release, err := a.bounded(c, auth.Submit)
	if err != nil {
		return api.SubmitResponse{}, err
	}
	defer release()
	return a.next.SubmitDriver(ctx, c, req)
}

// SubmitDrivers takes one of the client IP's slots for each submission of
// the batch, as many as are free. When they are too few, a submission that
// costs the leader an answer but no entry needs none (costsNoEntry: it is
// invalid, its token is committed on this master already, or it came
// earlier in the batch), so a client that sends a whole batch again after
// part of it was refused moves on instead of spending its slots on what is
// done. The batch keeps at least one slot, which bounds the batches a
// client holds in flight. The submissions left without a slot are each
// answered api.ErrTooManyRequests, in their place, to be retried, and the
// others go on together. A batch that finds no slot free is refused whole,
// as a lone submission would be.
func (a *admission) SubmitDrivers(ctx context.Context, c auth.Caller, req api.SubmitBatchRequest) (api.SubmitBatchResponse, error) {
	if err := a.guard.Check(c.Identity, auth.Submit); err != nil {
		return api.SubmitBatchResponse{}, err
	}
	if err := checkBatch(len(req.Submissions)); err != nil {
		return api.SubmitBatchResponse{}, err
	}
	if c.ForwardedBy != "" {
		return a.next.SubmitDrivers(ctx, c, req)
	}
	n := len(req.Submissions)
	k := a.submitting.acquireUpTo(c.IP, n)
	if k == 0 {
		return api.SubmitBatchResponse{}, api.Errorf(api.ErrTooManyRequests, "too many submissions in flight from this client; retry shortly")
	}
	if k == n {
		defer a.submitting.releaseN(c.IP, k)
		return a.next.SubmitDrivers(ctx, c, req)
	}
	// Short of slots: only now is it worth sorting out the submissions
	// that need none.
	admit := make([]bool, n)
	var fresh []int
	first := map[string]bool{}
	for i, r := range req.Submissions {
		if a.costsNoEntry(r, first) {
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
		return a.next.SubmitDrivers(ctx, c, req)
	}
	for _, i := range fresh[:k] {
		admit[i] = true
	}
	var part api.SubmitBatchRequest
	for i, r := range req.Submissions {
		if admit[i] {
			part.Submissions = append(part.Submissions, r)
		}
	}
	out, err := a.next.SubmitDrivers(ctx, c, part)
	if err != nil {
		return out, err
	}
	if len(out.Results) != len(part.Submissions) {
		return api.SubmitBatchResponse{}, api.Errorf(api.ErrInternal, "%d answers to a batch of %d", len(out.Results), len(part.Submissions))
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

func (a *admission) KillDriver(ctx context.Context, c auth.Caller, id string) (api.KillResponse, error) {
	return admitted(a, c, auth.Submit, func() (api.KillResponse, error) { return a.next.KillDriver(ctx, c, id) })
}

func (a *admission) KillAllDrivers(ctx context.Context, c auth.Caller) (api.KillAllResponse, error) {
	return admitted(a, c, auth.Submit, func() (api.KillAllResponse, error) { return a.next.KillAllDrivers(ctx, c) })
}

// Driver takes a blocking read slot when r blocks.
func (a *admission) Driver(ctx context.Context, c auth.Caller, id string, r Read) (*model.Driver, error) {
	release, err := a.read(c, auth.Read, r)
	if err != nil {
		return nil, err
	}
	defer release()
	return a.next.Driver(ctx, c, id, r)
}

func (a *admission) Drivers(ctx context.Context, c auth.Caller, q api.ListQuery, r Read) (api.DriverPage, error) {
	return admitted(a, c, auth.Read, func() (api.DriverPage, error) { return a.next.Drivers(ctx, c, q, r) })
}

func (a *admission) DriverLogs(ctx context.Context, c auth.Caller, id string, q LogQuery, r Read) (*Log, error) {
	return admitted(a, c, auth.Read, func() (*Log, error) { return a.next.DriverLogs(ctx, c, id, q, r) })
}

func (a *admission) RegisterWorker(ctx context.Context, c auth.Caller, req api.RegisterWorkerRequest) (api.RegisterWorkerResponse, error) {
	return workerAdmitted(a, c, req.ID, func() (api.RegisterWorkerResponse, error) { return a.next.RegisterWorker(ctx, c, req) })
}

func (a *admission) Heartbeat(ctx context.Context, c auth.Caller, id string, req api.HeartbeatRequest) (api.HeartbeatResponse, error) {
	return workerAdmitted(a, c, id, func() (api.HeartbeatResponse, error) { return a.next.Heartbeat(ctx, c, id, req) })
}

func (a *admission) DecommissionWorker(ctx context.Context, c auth.Caller, id string, req api.DecommissionWorkerRequest) (api.RegisterWorkerResponse, error) {
	return workerAdmitted(a, c, id, func() (api.RegisterWorkerResponse, error) { return a.next.DecommissionWorker(ctx, c, id, req) })
}

func (a *admission) Worker(ctx context.Context, c auth.Caller, id string, r Read) (*model.Worker, error) {
	return admitted(a, c, auth.Read, func() (*model.Worker, error) { return a.next.Worker(ctx, c, id, r) })
}

func (a *admission) RegisterApp(ctx context.Context, c auth.Caller, req api.RegisterAppRequest) (api.RegisterAppResponse, error) {
	release, err := a.bounded(c, auth.App)
	if err != nil {
		return api.RegisterAppResponse{}, err
	}
	defer release()
	return a.next.RegisterApp(ctx, c, req)
}

func (a *admission) Apps(ctx context.Context, c auth.Caller, q api.ListQuery, r Read) (api.AppPage, error) {
	return admitted(a, c, auth.Read, func() (api.AppPage, error) { return a.next.Apps(ctx, c, q, r) })
}

// App takes a blocking read slot when r blocks.
func (a *admission) App(ctx context.Context, c auth.Caller, id string, r Read) (api.AppStatus, error) {
	release, err := a.read(c, auth.AppRead, r)
	if err != nil {
		return api.AppStatus{}, err
	}
	defer release()
	return a.next.App(ctx, c, id, r)
}

func (a *admission) WatchApp(ctx context.Context, c auth.Caller, id, etag string) (AppWatch, error) {
	return admitted(a, c, auth.App, func() (AppWatch, error) { return a.next.WatchApp(ctx, c, id, etag) })
}

func (a *admission) RequestExecutors(ctx context.Context, c auth.Caller, id string, req api.RequestExecutorsRequest) (api.AppStatus, error) {
	return admitted(a, c, auth.App, func() (api.AppStatus, error) { return a.next.RequestExecutors(ctx, c, id, req) })
}

func (a *admission) KillExecutors(ctx context.Context, c auth.Caller, id string, req api.KillExecutorsRequest) (api.AppStatus, error) {
	return admitted(a, c, auth.App, func() (api.AppStatus, error) { return a.next.KillExecutors(ctx, c, id, req) })
}

func (a *admission) UnregisterApp(ctx context.Context, c auth.Caller, id string, req api.UnregisterAppRequest) (api.AppStatus, error) {
	return admitted(a, c, auth.App, func() (api.AppStatus, error) { return a.next.UnregisterApp(ctx, c, id, req) })
}

func (a *admission) KillApp(ctx context.Context, c auth.Caller, id string) (api.AppStatus, error) {
	return admitted(a, c, auth.Submit, func() (api.AppStatus, error) { return a.next.KillApp(ctx, c, id) })
}

func (a *admission) ExecutorLogs(ctx context.Context, c auth.Caller, appID string, executor int, q LogQuery, r Read) (*Log, error) {
	return admitted(a, c, auth.AppRead, func() (*Log, error) { return a.next.ExecutorLogs(ctx, c, appID, executor, q, r) })
}

func (a *admission) State(ctx context.Context, c auth.Caller) (api.State, error) {
	return admitted(a, c, auth.Read, func() (api.State, error) { return a.next.State(ctx, c) })
}

func (a *admission) GossipPeers(ctx context.Context, c auth.Caller) (api.GossipPeers, error) {
	return admitted(a, c, auth.Node, func() (api.GossipPeers, error) { return a.next.GossipPeers(ctx, c) })
}

// Events takes one of the client IP's stream slots, given back when the
// stream is closed.
func (a *admission) Events(ctx context.Context, c auth.Caller, q EventQuery) (*EventStream, error) {
	release, err := a.slot(c, auth.Read, a.streaming,
		fmt.Sprintf("this client holds %d event streams open here, the bound of --max-event-streams-per-client; retry once one ends", a.streaming.max))
	if err != nil {
		return nil, err
	}
	st, err := a.next.Events(ctx, c, q)
	if err != nil {
		release()
		return nil, err
	}
	st.release = release
	return st, nil
}

// Health needs no credential: a load balancer or a service manager asks.
func (a *admission) Health(ctx context.Context) api.Health { return a.next.Health(ctx) }

func (a *admission) Allow(_ context.Context, c auth.Caller, access auth.Access) error {
	return a.guard.Check(c.Identity, access)
}

func (a *admission) RaftPeers(ctx context.Context, c auth.Caller, r Read) (api.RaftPeers, error) {
	return admitted(a, c, auth.Operator, func() (api.RaftPeers, error) { return a.next.RaftPeers(ctx, c, r) })
}

func (a *admission) AddVoter(ctx context.Context, c auth.Caller, req api.AddVoterRequest) (api.RaftPeers, error) {
	return admitted(a, c, auth.Operator, func() (api.RaftPeers, error) { return a.next.AddVoter(ctx, c, req) })
}

func (a *admission) RemovePeer(ctx context.Context, c auth.Caller, req api.RemovePeerRequest) (api.RaftPeers, error) {
	return admitted(a, c, auth.Operator, func() (api.RaftPeers, error) { return a.next.RemovePeer(ctx, c, req) })
}

func (a *admission) TransferLeadership(ctx context.Context, c auth.Caller, req api.TransferLeadershipRequest) (api.TransferLeadershipResponse, error) {
	return admitted(a, c, auth.Operator, func() (api.TransferLeadershipResponse, error) { return a.next.TransferLeadership(ctx, c, req) })
}

func (a *admission) SaveSnapshot(ctx context.Context, c auth.Caller) (*Snapshot, error) {
	return admitted(a, c, auth.Operator, func() (*Snapshot, error) { return a.next.SaveSnapshot(ctx, c) })
}

func (a *admission) RestoreSnapshot(ctx context.Context, c auth.Caller, archive io.Reader) (api.RaftPeers, error) {
	return admitted(a, c, auth.Operator, func() (api.RaftPeers, error) { return a.next.RestoreSnapshot(ctx, c, archive) })
}

func (a *admission) ClearCompleted(ctx context.Context, c auth.Caller) (api.ClearCompletedResponse, error) {
	return admitted(a, c, auth.Operator, func() (api.ClearCompletedResponse, error) { return a.next.ClearCompleted(ctx, c) })
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
