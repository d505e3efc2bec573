// Package service holds the rules of a master, apart from every transport:
// what each request may do, how it is checked, and how it becomes a Raft
// entry. Listeners (the /v1 API, the web UI, Spark's REST protocol) decode
// a request into a Caller and an api value, call one method of Service,
// and encode what it returns; none of them decides anything.
//
// A master's Service is a stack of three values with the same interface:
//
//	Admit (access and per-client bounds) -> forward.Forwarder (to the leader) -> Local (rules, Raft)
//
// so a request is admitted once, on the master it reached first, forwarded
// once when that master does not lead, and decided by the leader's Local.
// Local is three parts over one Core: Core (drivers, workers, this master's
// views, the only writer to Raft), Applications (apps and executors) and
// Operator (the quorum's membership, leadership transfer, snapshots).
// Errors wrap one sentinel of package api or model; api.CodeOf turns it
// into a code and an HTTP status.
package service

import (
	"context"
	"io"
	"net/url"
	"strconv"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/master/events"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/security/auth"
)

// Service is everything a caller can ask of a master. Every method takes
// the caller as its listener established it; reads take a Read saying how
// fresh the answer must be.
type Service interface {
	DriverService
	WorkerService
	AppService
	OperatorService
	BlobService
	// State is this master's own view of the cluster (api.State); it is
	// never forwarded.
	State(ctx context.Context, c auth.Caller) (api.State, error)
	// Allow reports whether the caller has access a, for what is not a
	// method here (a metrics scrape, a log-in check).
	Allow(ctx context.Context, c auth.Caller, a auth.Access) error
	// Health is this master's own health (api.Health), for load
	// balancers: it needs no credential and is never forwarded.
	Health(ctx context.Context) api.Health
	// Events subscribes to the changes this master applies (the event
	// stream): any master answers from its own tables, in the log's
	// order, so a reader that loses one resumes from its last index on
	// another. The caller closes the stream.
	Events(ctx context.Context, c auth.Caller, q EventQuery) (*EventStream, error)
}

// DriverService submits, reads and kills drivers.
type DriverService interface {
	// SubmitDriver adds a driver (Spark's RequestSubmitDriver). A
	// request whose token is known yields the first driver, Existing.
	SubmitDriver(ctx context.Context, c auth.Caller, req api.SubmitRequest) (api.SubmitResponse, error)
	// SubmitDrivers adds several drivers (api.SubmitBatchRequest): each
	// submission is answered in its own api.SubmitResult, as
	// SubmitDriver would answer it alone; only a batch refused whole is
	// an error.
	SubmitDrivers(ctx context.Context, c auth.Caller, req api.SubmitBatchRequest) (api.SubmitBatchResponse, error)
	// KillDriver kills a driver (Spark's RequestKillDriver); killing a
	// KILLED one again succeeds.
	KillDriver(ctx context.Context, c auth.Caller, id string) (api.KillResponse, error)
	// KillAllDrivers kills every driver that has not ended (Spark's
	// RequestKillAllDrivers), with the access a kill needs.
	KillAllDrivers(ctx context.Context, c auth.Caller) (api.KillAllResponse, error)
	// Driver returns one driver, a waiting one with why it waits.
	Driver(ctx context.Context, c auth.Caller, id string, r Read) (*model.Driver, error)
	// Drivers returns the drivers q keeps, ordered by ID: all of them,
	// or a page when q asks for one (api.ListQuery).
	Drivers(ctx context.Context, c auth.Caller, q api.ListQuery, r Read) (api.DriverPage, error)
	// DriverLogs streams a log of one of the driver's attempts from the
	// worker that ran it.
	DriverLogs(ctx context.Context, c auth.Caller, id string, q LogQuery, r Read) (*Log, error)
}

// WorkerService is a worker's own traffic with the leader, and what the
// UI shows of one worker.
type WorkerService interface {
	// RegisterWorker adds a worker or brings a known one back (Spark's
	// RegisterWorker).
	RegisterWorker(ctx context.Context, c auth.Caller, req api.RegisterWorkerRequest) (api.RegisterWorkerResponse, error)
	// Heartbeat takes a worker's reports and answers with what it should
	// run, held up to a few seconds while nothing changes for it.
	Heartbeat(ctx context.Context, c auth.Caller, id string, req api.HeartbeatRequest) (api.HeartbeatResponse, error)
	// DecommissionWorker stops placements on a worker that is shutting
	// down on purpose.
	DecommissionWorker(ctx context.Context, c auth.Caller, id string, req api.DecommissionWorkerRequest) (api.RegisterWorkerResponse, error)
	// Worker returns one row of the workers table.
	Worker(ctx context.Context, c auth.Caller, id string, r Read) (*model.Worker, error)
	// GossipPeers returns the masters' gossip addresses this master
	// knows, so a worker given only --masters can join their pool.
	GossipPeers(ctx context.Context, c auth.Caller) (api.GossipPeers, error)
}

// AppService registers and drives applications and their executors
// (Spark's RegisterApplication, RequestExecutors, KillExecutors and
// UnregisterApplication).
type AppService interface {
	RegisterApp(ctx context.Context, c auth.Caller, req api.RegisterAppRequest) (api.RegisterAppResponse, error)
	// Apps returns the apps q keeps with their executors, ordered by
	// ID: all of them, or a page when q asks for one (api.ListQuery).
	Apps(ctx context.Context, c auth.Caller, q api.ListQuery, r Read) (api.AppPage, error)
	// App returns one app with its executors.
	App(ctx context.Context, c auth.Caller, id string, r Read) (api.AppStatus, error)
	// WatchApp is an app client's long poll and sign of life: it answers
	// when the app's status differs from etag, or after a few seconds.
	WatchApp(ctx context.Context, c auth.Caller, id, etag string) (AppWatch, error)
	RequestExecutors(ctx context.Context, c auth.Caller, id string, req api.RequestExecutorsRequest) (api.AppStatus, error)
	KillExecutors(ctx context.Context, c auth.Caller, id string, req api.KillExecutorsRequest) (api.AppStatus, error)
	UnregisterApp(ctx context.Context, c auth.Caller, id string, req api.UnregisterAppRequest) (api.AppStatus, error)
	// KillApp ends an app KILLED, from an operator.
	KillApp(ctx context.Context, c auth.Caller, id string) (api.AppStatus, error)
	// ExecutorLogs streams a log of one executor from its worker.
	ExecutorLogs(ctx context.Context, c auth.Caller, appID string, executor int, q LogQuery, r Read) (*Log, error)
}

// OperatorService is the quorum's operations, after Consul's operator raft
// commands on hashicorp/raft's membership changes, and snapshots.
type OperatorService interface {
	RaftPeers(ctx context.Context, c auth.Caller, r Read) (api.RaftPeers, error)
	AddVoter(ctx context.Context, c auth.Caller, req api.AddVoterRequest) (api.RaftPeers, error)
	RemovePeer(ctx context.Context, c auth.Caller, req api.RemovePeerRequest) (api.RaftPeers, error)
	TransferLeadership(ctx context.Context, c auth.Caller, req api.TransferLeadershipRequest) (api.TransferLeadershipResponse, error)
	// SaveSnapshot takes a fresh Raft snapshot on the leader and returns
	// it as an archive: a tar of meta.json (raft.SnapshotMeta),
	// state.bin (the FSM's snapshot) and SHA256SUMS.
	SaveSnapshot(ctx context.Context, c auth.Caller) (*Snapshot, error)
	// RestoreSnapshot replaces the tables with an archive's.
	RestoreSnapshot(ctx context.Context, c auth.Caller, archive io.Reader) (api.RaftPeers, error)
	// ClearCompleted drops every finished driver and app from the tables
	// (Spark's RequestClearCompletedDriversAndApps). It takes operator
	// access: it erases what every user sees of the cluster's history.
	ClearCompleted(ctx context.Context, c auth.Caller) (api.ClearCompletedResponse, error)
}

// Read says how fresh a read must be.
type Read struct {
	// Stale lets any master answer from its own tables, which may lag
	// the leader's; otherwise the leader answers after confirming with a
	// quorum that it still leads (linearizable).
	Stale bool
	// Index, when not 0, makes a read of one row a blocking read
	// (Nomad's blocking queries): the answer waits until the row's
	// ModifyIndex passes Index, or Wait (default DefaultWait, at most
	// MaxWait) passes, and then is the row as it is.
	Index uint64
	Wait  time.Duration
}

// Values is r as the query of a read (index, wait), as the /v1 API takes
// it; stale reads are answered where they arrive and never sent on.
func (r Read) Values() url.Values {
	v := url.Values{}
	if r.Index != 0 {
		v.Set("index", strconv.FormatUint(r.Index, 10))
	}
	if r.Wait != 0 {
		v.Set("wait", r.Wait.String())
	}
	return v
}

// Bounds of a blocking read's wait.
const (
	DefaultWait = 5 * time.Minute
	MaxWait     = 10 * time.Minute
)

// EventQuery picks the events of a stream: those past index After, of the
// kinds (none: all) and row IDs (none: all) given.
type EventQuery struct {
	After uint64
	Kinds []api.EventKind
	IDs   []string
}

// EventStream is a subscription to the changes a master applies: first
// the events in First (a reset and the current rows, when the events past
// the query's index are no longer held), then the batches Sub gives. Close
// ends it.
type EventStream struct {
	First []api.Event
	Sub   *events.Sub
	// release gives back what admission took for the stream.
	release func()
}

// Close ends the subscription.
func (s *EventStream) Close() {
	s.Sub.Close()
	if s.release != nil {
		s.release()
	}
}

// LogQuery names a part of one log: its stream (api.StreamStdout or
// api.StreamStderr, "" for stdout), the byte offset to start at, and for a
// driver the attempt (0 for the latest placed).
type LogQuery struct {
	Stream  string
	Offset  int64
	Attempt int
}

// Values is q as the query of a log request (stream, offset, attempt), the
// form both masters and workers take.
func (q LogQuery) Values() url.Values {
	v := url.Values{"offset": {strconv.FormatInt(q.Offset, 10)}}
	if q.Stream != "" {
		v.Set("stream", q.Stream)
	}
	if q.Attempt > 0 {
		v.Set("attempt", strconv.Itoa(q.Attempt))
	}
	return v
}

// Log is a part of a log as its worker sends it: the bytes from Start up
// to Size, the stream's size when the worker answered (rotated bytes
// included). Start is the query's offset or, when the bytes there were
// rotated away, where the stream now starts (api.HeaderLogStart). The
// caller closes Body.
type Log struct {
	Start int64
	Size  int64
	Body  io.ReadCloser
}

// AppWatch is the answer to a watch: the app's status and its entity tag,
// to send back on the next watch.
type AppWatch struct {
	Status api.AppStatus
	ETag   string
}

// Snapshot is a snapshot archive: a file Name for it and its bytes, which
// the caller closes.
type Snapshot struct {
	Name string
	Body io.ReadCloser
}

// Leadership is what a master knows of the leader, at one moment.
type Leadership struct {
	// Self is this master's ID, and HTTP its API address.
	Self, HTTP string
	// Role is Raft's state of this master: Leader, Follower, Candidate or
	// Shutdown.
	Role string
	// Ready is true while this master leads and has applied every entry
	// of earlier terms: only then does it decide anything.
	Ready bool
	// LeaderID and LeaderHTTP name the leader, "" when none is known (or
	// its HTTP address is not). LeaderHTTP is what the leader said on its
	// Raft port (Deps.MasterHTTP), never its gossip metadata.
	LeaderID, LeaderHTTP string
}
