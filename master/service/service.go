// Package service holds the rules of a master, apart from every transport:
// what each request may do, how it is checked, and how it becomes a Raft
// entry. Listeners (the /v1 API, the web UI, Spark's REST protocol) decode
// a request into a Caller and a Request, call one Endpoint (endpoints.go,
// each described once) through the master's Chain, and encode what it
// returns; none of them decides anything.
//
// The Chain is one interceptor chain for every endpoint:
//
//	listener (authenticate) -> admission (access, per-client bounds) -> Router (here or the leader) -> Endpoint.Serve on Local (rules, Raft)
//
// so a request is admitted once, on the master it reached first, forwarded
// once when that master does not lead (package master/forward), and
// decided by the leader's Local. Local is parts over one Core: Core
// (drivers, workers, this master's views, the only writer to Raft),
// Applications (apps and executors), Operator (the quorum's membership,
// leadership transfer, snapshots) and Uploads (the store of uploaded
// files).
// Errors wrap one sentinel of package api or model; api.CodeOf turns it
// into a code and an HTTP status.
package service

import (
	"io"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/fsm/events"
)

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
// the query's index are no longer held), then the batches Take gives when
// Sub is Ready. Close ends it.
type EventStream struct {
	First []api.Event
	Sub   *events.Sub
	// keep, when not nil, is the caller's scope: the events it may read
	// (a namespace token's, eventScope); recheck refuses the caller once
	// its token is revoked or expired.
	keep    func(api.Event) bool
	recheck func() error
	// release gives back what admission took for the stream.
	release func()
}

// Take returns the batches queued since the last Take (events.Sub.Take)
// with what the caller may not read left out, and batches left empty
// dropped. A namespace token's stream ends, with the refusal as its
// error, at the first Take after its token was revoked or expired.
func (s *EventStream) Take() ([]events.Batch, error) {
	bs, err := s.Sub.Take()
	if err != nil || s.keep == nil {
		return bs, err
	}
	if err := s.recheck(); err != nil {
		return nil, err
	}
	out := bs[:0]
	for _, b := range bs {
		if b.Events = slices.DeleteFunc(b.Events, func(e api.Event) bool { return !s.keep(e) }); len(b.Events) > 0 {
			out = append(out, b)
		}
	}
	return out, nil
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
