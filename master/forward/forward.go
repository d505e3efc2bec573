// Package forward is the one place a master hands a request to the leader:
// a service.Service that runs each request on this master when it may
// answer (it is the leader, or the read may be stale) and otherwise sends
// it, once, to the leader's /v1 API, with the caller's credential and this
// master's certificate, and returns the leader's answer as if it were its
// own. Followers thus take every request a client sends them, as Spark's
// standby masters do not, and a client never needs to know who leads.
package forward

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/hashicorp/raft"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/master/service"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/security/auth"
)

// leaderPoll is how often a forwarded request checks that the master it
// went to still leads. A leader that stops answering (paused, cut off) is
// replaced within an election timeout; the request is dropped then, so
// the client hears api.ErrUnavailable and retries, instead of waiting on a
// deposed leader.
const leaderPoll = 100 * time.Millisecond

// Forwarder is the decorator. Make one with New.
type Forwarder struct {
	local  service.Service
	lead   func() service.Leadership
	http   *http.Client
	scheme string
}

// New returns a Forwarder in front of local. lead tells, at each request,
// what this master knows of the leader; client carries forwarded requests
// (with TLS, presenting this master's certificate and checking the
// leader's); scheme is "http" or "https".
func New(local service.Service, lead func() service.Leadership, client *http.Client, scheme string) *Forwarder {
	return &Forwarder{local: local, lead: lead, http: client, scheme: scheme}
}

// here reports whether this master answers itself: as the ready leader, as
// one elected a moment ago (whose core then says it is catching up), or
// for a stale read.
func here(l service.Leadership, stale bool) bool {
	return stale || l.Ready || l.Role == raft.Leader.String()
}

// route runs local when this master answers itself, and remote against
// the leader otherwise. A request whose context carries a leader wait
// (WithLeaderWait) and that finds no leader to answer it (api.ErrUnavailable:
// none known, the one known unreachable or deposed, or one elected a moment
// ago and still catching up) is tried again every leaderRetry until one
// answers or the wait ends; the last refusal is returned then. Trying again
// is safe for every request that waits: a submission carries its token, so
// the leader that committed it the first time answers the same driver; a
// kill of a killed driver succeeds; a read changes nothing.
func route[T any](f *Forwarder, ctx context.Context, c auth.Caller, stale bool, local func() (T, error), remote func(*call) (T, error)) (T, error) {
	deadline, waits := leaderDeadline(ctx)
	for {
		out, err := routeOnce(f, ctx, c, stale, local, remote)
		if !waits || !errors.Is(err, api.ErrUnavailable) || c.ForwardedBy != "" {
			return out, err
		}
		wait := min(leaderRetry, time.Until(deadline))
		if wait <= 0 {
			return out, err
		}
		select {
		case <-ctx.Done():
			return out, err
		case <-time.After(wait):
		}
	}
}

// routeOnce is one try of route.
func routeOnce[T any](f *Forwarder, ctx context.Context, c auth.Caller, stale bool, local func() (T, error), remote func(*call) (T, error)) (T, error) {
	l := f.lead()
	if here(l, stale) {
		return local()
	}
	var zero T
	cl, err := f.to(ctx, c, l)
	if err != nil {
		return zero, err
	}
	defer cl.done()
	return remote(cl)
}

// leaderRetry is how often a request that waits for a leader tries again.
// A new leader is ready an election and a Barrier after the old one's
// loss (some 1.2 s with the default Raft timeouts); 50 ms answers within
// a twentieth of a second of it, and each try against a dead leader costs
// one refused dial.
const leaderRetry = 50 * time.Millisecond

// MaxLeaderWait bounds WithLeaderWait (and the master's
// --spark-rest-leader-wait): a request holds its connection and its
// client's submission slot while it waits.
const MaxLeaderWait = time.Minute

type leaderWaitKey struct{}

// WithLeaderWait returns ctx marked so that a request made with it that
// finds no leader to answer waits up to d (at most MaxLeaderWait) for one
// instead of failing at once; d <= 0 returns ctx unchanged. It is for
// clients that try each master once and give up, as Spark's
// RestSubmissionClient does: the master's Spark REST listener uses it, the
// /v1 API does not, since Drover's client retries itself.
func WithLeaderWait(ctx context.Context, d time.Duration) context.Context {
	if d <= 0 {
		return ctx
	}
	return context.WithValue(ctx, leaderWaitKey{}, time.Now().Add(min(d, MaxLeaderWait)))
}

// leaderDeadline is when a request made with ctx stops waiting for a
// leader, and whether it waits at all.
func leaderDeadline(ctx context.Context) (time.Time, bool) {
	d, ok := ctx.Value(leaderWaitKey{}).(time.Time)
	return d, ok
}

// SubmitDriver implements service.Service: the local call on the leader, the
// same request sent to the leader on a follower.
func (f *Forwarder) SubmitDriver(ctx context.Context, c auth.Caller, req api.SubmitRequest) (api.SubmitResponse, error) {
	return route(f, ctx, c, false, func() (api.SubmitResponse, error) { return f.local.SubmitDriver(ctx, c, req) },
		func(cl *call) (out api.SubmitResponse, err error) {
			return out, cl.json(http.MethodPost, api.PathDrivers, req, &out)
		})
}

// SubmitDrivers implements service.Service: the local call on the leader,
// the same batch sent to the leader on a follower.
func (f *Forwarder) SubmitDrivers(ctx context.Context, c auth.Caller, req api.SubmitBatchRequest) (api.SubmitBatchResponse, error) {
	return route(f, ctx, c, false, func() (api.SubmitBatchResponse, error) { return f.local.SubmitDrivers(ctx, c, req) },
		func(cl *call) (out api.SubmitBatchResponse, err error) {
			return out, cl.json(http.MethodPost, api.PathSubmitBatch, req, &out)
		})
}

// KillDriver implements service.Service: the local call on the leader, the
// same request sent to the leader on a follower.
func (f *Forwarder) KillDriver(ctx context.Context, c auth.Caller, id string) (api.KillResponse, error) {
	return route(f, ctx, c, false, func() (api.KillResponse, error) { return f.local.KillDriver(ctx, c, id) },
		func(cl *call) (out api.KillResponse, err error) {
			return out, cl.json(http.MethodPost, api.DriverPath(id, "/kill"), nil, &out)
		})
}

// KillAllDrivers implements service.Service: the local call on the leader, the
// same request sent to the leader on a follower.
func (f *Forwarder) KillAllDrivers(ctx context.Context, c auth.Caller) (api.KillAllResponse, error) {
	return route(f, ctx, c, false, func() (api.KillAllResponse, error) { return f.local.KillAllDrivers(ctx, c) },
		func(cl *call) (out api.KillAllResponse, err error) {
			return out, cl.json(http.MethodPost, api.PathKillAllDrivers, nil, &out)
		})
}

// Driver implements service.Service: the local call on the leader, the
// same request sent to the leader on a follower.
func (f *Forwarder) Driver(ctx context.Context, c auth.Caller, id string, r service.Read) (*model.Driver, error) {
	return route(f, ctx, c, r.Stale, func() (*model.Driver, error) { return f.local.Driver(ctx, c, id, r) },
		func(cl *call) (out *model.Driver, err error) {
			return out, cl.read(api.DriverPath(id, ""), r, &out)
		})
}

// Drivers implements service.Service: the local call on the leader, the
// same request sent to the leader on a follower.
func (f *Forwarder) Drivers(ctx context.Context, c auth.Caller, q api.ListQuery, r service.Read) (api.DriverPage, error) {
	return route(f, ctx, c, r.Stale, func() (api.DriverPage, error) { return f.local.Drivers(ctx, c, q, r) },
		func(cl *call) (out api.DriverPage, err error) {
			return out, cl.list(api.PathDrivers, q, &out, &out.Drivers)
		})
}

// DriverLogs implements service.Service: the local call on the leader, the
// same request sent to the leader on a follower.
func (f *Forwarder) DriverLogs(ctx context.Context, c auth.Caller, id string, q service.LogQuery, r service.Read) (*service.Log, error) {
	return route(f, ctx, c, r.Stale, func() (*service.Log, error) { return f.local.DriverLogs(ctx, c, id, q, r) },
		func(cl *call) (*service.Log, error) { return cl.log(api.DriverPath(id, "/logs"), q) })
}

// RegisterWorker implements service.Service: the local call on the leader, the
// same request sent to the leader on a follower.
func (f *Forwarder) RegisterWorker(ctx context.Context, c auth.Caller, req api.RegisterWorkerRequest) (api.RegisterWorkerResponse, error) {
	return route(f, ctx, c, false, func() (api.RegisterWorkerResponse, error) { return f.local.RegisterWorker(ctx, c, req) },
		func(cl *call) (out api.RegisterWorkerResponse, err error) {
			return out, cl.json(http.MethodPost, api.PathRegisterWorker, req, &out)
		})
}

// Heartbeat implements service.Service: the local call on the leader, the
// same request sent to the leader on a follower.
func (f *Forwarder) Heartbeat(ctx context.Context, c auth.Caller, id string, req api.HeartbeatRequest) (api.HeartbeatResponse, error) {
	return route(f, ctx, c, false, func() (api.HeartbeatResponse, error) { return f.local.Heartbeat(ctx, c, id, req) },
		func(cl *call) (out api.HeartbeatResponse, err error) {
			return out, cl.json(http.MethodPost, api.WorkerPath(id, "/heartbeat"), req, &out)
		})
}

// DecommissionWorker implements service.Service: the local call on the leader, the
// same request sent to the leader on a follower.
func (f *Forwarder) DecommissionWorker(ctx context.Context, c auth.Caller, id string, req api.DecommissionWorkerRequest) (api.RegisterWorkerResponse, error) {
	return route(f, ctx, c, false, func() (api.RegisterWorkerResponse, error) { return f.local.DecommissionWorker(ctx, c, id, req) },
		func(cl *call) (out api.RegisterWorkerResponse, err error) {
			return out, cl.json(http.MethodPost, api.WorkerPath(id, "/decommission"), req, &out)
		})
}

// Worker is answered here always: only the UI asks, from its own tables.
func (f *Forwarder) Worker(ctx context.Context, c auth.Caller, id string, r service.Read) (*model.Worker, error) {
	return f.local.Worker(ctx, c, id, service.Read{Stale: true})
}

// RegisterApp implements service.Service: the local call on the leader, the
// same request sent to the leader on a follower.
func (f *Forwarder) RegisterApp(ctx context.Context, c auth.Caller, req api.RegisterAppRequest) (api.RegisterAppResponse, error) {
	return route(f, ctx, c, false, func() (api.RegisterAppResponse, error) { return f.local.RegisterApp(ctx, c, req) },
		func(cl *call) (out api.RegisterAppResponse, err error) {
			return out, cl.json(http.MethodPost, api.PathApps, req, &out)
		})
}

// Apps implements service.Service: the local call on the leader, the
// same request sent to the leader on a follower.
func (f *Forwarder) Apps(ctx context.Context, c auth.Caller, q api.ListQuery, r service.Read) (api.AppPage, error) {
	return route(f, ctx, c, r.Stale, func() (api.AppPage, error) { return f.local.Apps(ctx, c, q, r) },
		func(cl *call) (out api.AppPage, err error) {
			return out, cl.list(api.PathApps, q, &out, &out.Apps)
		})
}

// App implements service.Service: the local call on the leader, the
// same request sent to the leader on a follower.
func (f *Forwarder) App(ctx context.Context, c auth.Caller, id string, r service.Read) (api.AppStatus, error) {
	return route(f, ctx, c, r.Stale, func() (api.AppStatus, error) { return f.local.App(ctx, c, id, r) },
		func(cl *call) (out api.AppStatus, err error) {
			return out, cl.read(api.AppPath(id, ""), r, &out)
		})
}

// WatchApp implements service.Service: the local call on the leader, the
// same request sent to the leader on a follower.
func (f *Forwarder) WatchApp(ctx context.Context, c auth.Caller, id, etag string) (service.AppWatch, error) {
	return route(f, ctx, c, false, func() (service.AppWatch, error) { return f.local.WatchApp(ctx, c, id, etag) },
		func(cl *call) (service.AppWatch, error) { return cl.watch(api.AppPath(id, "/watch"), etag) })
}

// RequestExecutors implements service.Service: the local call on the leader, the
// same request sent to the leader on a follower.
func (f *Forwarder) RequestExecutors(ctx context.Context, c auth.Caller, id string, req api.RequestExecutorsRequest) (api.AppStatus, error) {
	return route(f, ctx, c, false, func() (api.AppStatus, error) { return f.local.RequestExecutors(ctx, c, id, req) },
		func(cl *call) (out api.AppStatus, err error) {
			return out, cl.json(http.MethodPost, api.AppPath(id, "/executors"), req, &out)
		})
}

// KillExecutors implements service.Service: the local call on the leader, the
// same request sent to the leader on a follower.
func (f *Forwarder) KillExecutors(ctx context.Context, c auth.Caller, id string, req api.KillExecutorsRequest) (api.AppStatus, error) {
	return route(f, ctx, c, false, func() (api.AppStatus, error) { return f.local.KillExecutors(ctx, c, id, req) },
		func(cl *call) (out api.AppStatus, err error) {
			return out, cl.json(http.MethodPost, api.AppPath(id, "/executors/kill"), req, &out)
		})
}

// UnregisterApp implements service.Service: the local call on the leader, the
// same request sent to the leader on a follower.
func (f *Forwarder) UnregisterApp(ctx context.Context, c auth.Caller, id string, req api.UnregisterAppRequest) (api.AppStatus, error) {
	return route(f, ctx, c, false, func() (api.AppStatus, error) { return f.local.UnregisterApp(ctx, c, id, req) },
		func(cl *call) (out api.AppStatus, err error) {
			return out, cl.json(http.MethodPost, api.AppPath(id, "/unregister"), req, &out)
		})
}

// KillApp implements service.Service: the local call on the leader, the
// same request sent to the leader on a follower.
func (f *Forwarder) KillApp(ctx context.Context, c auth.Caller, id string) (api.AppStatus, error) {
	return route(f, ctx, c, false, func() (api.AppStatus, error) { return f.local.KillApp(ctx, c, id) },
		func(cl *call) (out api.AppStatus, err error) {
			return out, cl.json(http.MethodPost, api.AppPath(id, "/kill"), nil, &out)
		})
}

// ExecutorLogs implements service.Service: the local call on the leader, the
// same request sent to the leader on a follower.
func (f *Forwarder) ExecutorLogs(ctx context.Context, c auth.Caller, appID string, executor int, q service.LogQuery, r service.Read) (*service.Log, error) {
	return route(f, ctx, c, r.Stale, func() (*service.Log, error) { return f.local.ExecutorLogs(ctx, c, appID, executor, q, r) },
		func(cl *call) (*service.Log, error) { return cl.log(api.ExecutorLogsPath(appID, executor), q) })
}

// State is this master's own view: never forwarded.
func (f *Forwarder) State(ctx context.Context, c auth.Caller) (api.State, error) {
	return f.local.State(ctx, c)
}

// GossipPeers is answered here: any master knows the pool it is in.
func (f *Forwarder) GossipPeers(ctx context.Context, c auth.Caller) (api.GossipPeers, error) {
	return f.local.GossipPeers(ctx, c)
}

// Events is served by this master: every master holds the same events
// under the same indexes, in the log's order, so a stream needs no leader.
func (f *Forwarder) Events(ctx context.Context, c auth.Caller, q service.EventQuery) (*service.EventStream, error) {
	return f.local.Events(ctx, c, q)
}

// Health is this master's own.
func (f *Forwarder) Health(ctx context.Context) api.Health { return f.local.Health(ctx) }

// Allow is answered here: every master holds the same access rules.
func (f *Forwarder) Allow(ctx context.Context, c auth.Caller, a auth.Access) error {
	return f.local.Allow(ctx, c, a)
}

// RaftPeers implements service.Service: the local call on the leader, the
// same request sent to the leader on a follower.
func (f *Forwarder) RaftPeers(ctx context.Context, c auth.Caller, r service.Read) (api.RaftPeers, error) {
	return route(f, ctx, c, r.Stale, func() (api.RaftPeers, error) { return f.local.RaftPeers(ctx, c, r) },
		func(cl *call) (out api.RaftPeers, err error) {
			return out, cl.json(http.MethodGet, api.PathRaftPeers, nil, &out)
		})
}

// AddVoter implements service.Service: the local call on the leader, the
// same request sent to the leader on a follower.
func (f *Forwarder) AddVoter(ctx context.Context, c auth.Caller, req api.AddVoterRequest) (api.RaftPeers, error) {
	return route(f, ctx, c, false, func() (api.RaftPeers, error) { return f.local.AddVoter(ctx, c, req) },
		func(cl *call) (out api.RaftPeers, err error) {
			return out, cl.json(http.MethodPost, api.PathAddVoter, req, &out)
		})
}

// RemovePeer implements service.Service: the local call on the leader, the
// same request sent to the leader on a follower.
func (f *Forwarder) RemovePeer(ctx context.Context, c auth.Caller, req api.RemovePeerRequest) (api.RaftPeers, error) {
	return route(f, ctx, c, false, func() (api.RaftPeers, error) { return f.local.RemovePeer(ctx, c, req) },
		func(cl *call) (out api.RaftPeers, err error) {
			return out, cl.json(http.MethodPost, api.PathRemovePeer, req, &out)
		})
}

// TransferLeadership implements service.Service: the local call on the leader, the
// same request sent to the leader on a follower.
func (f *Forwarder) TransferLeadership(ctx context.Context, c auth.Caller, req api.TransferLeadershipRequest) (api.TransferLeadershipResponse, error) {
	return route(f, ctx, c, false, func() (api.TransferLeadershipResponse, error) { return f.local.TransferLeadership(ctx, c, req) },
		func(cl *call) (out api.TransferLeadershipResponse, err error) {
			return out, cl.json(http.MethodPost, api.PathTransferLeadership, req, &out)
		})
}

// SaveSnapshot implements service.Service: the local call on the leader, the
// same request sent to the leader on a follower.
func (f *Forwarder) SaveSnapshot(ctx context.Context, c auth.Caller) (*service.Snapshot, error) {
	return route(f, ctx, c, false, func() (*service.Snapshot, error) { return f.local.SaveSnapshot(ctx, c) },
		func(cl *call) (*service.Snapshot, error) { return cl.snapshot() })
}

// RestoreSnapshot implements service.Service: the local call on the leader, the
// same request sent to the leader on a follower.
func (f *Forwarder) RestoreSnapshot(ctx context.Context, c auth.Caller, archive io.Reader) (api.RaftPeers, error) {
	return route(f, ctx, c, false, func() (api.RaftPeers, error) { return f.local.RestoreSnapshot(ctx, c, archive) },
		func(cl *call) (out api.RaftPeers, err error) { return out, cl.restore(archive, &out) })
}

// ClearCompleted implements service.Service: the local call on the leader, the
// same request sent to the leader on a follower.
func (f *Forwarder) ClearCompleted(ctx context.Context, c auth.Caller) (api.ClearCompletedResponse, error) {
	return route(f, ctx, c, false, func() (api.ClearCompletedResponse, error) { return f.local.ClearCompleted(ctx, c) },
		func(cl *call) (out api.ClearCompletedResponse, err error) {
			return out, cl.json(http.MethodPost, api.PathClearCompleted, nil, &out)
		})
}
