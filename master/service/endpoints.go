package service

import (
	"context"
	"fmt"
	"io"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/security/auth"
)

// routes are the JSON endpoints, in the order declared below, which
// Routes gives the listener.
var routes []Routed

// routed adds e to routes.
func routed[In, Out any](e *Endpoint[In, Out]) *Endpoint[In, Out] {
	routes = append(routes, e)
	return e
}

// Routes returns every JSON endpoint of a master, for its /v1 listener to
// route; the others are its listener's to serve by hand.
func Routes() []Routed { return routes }

// The endpoints of a master, each described once: names are those of
// package api's declarations (api.V1SubmitDriver ...), whose routes they
// take.
var (
	V1SubmitDriver = routed(&Endpoint[api.SubmitRequest, api.SubmitResponse]{
		Info: Info{Route: api.V1SubmitDriver.Route, Access: auth.Submit, Bound: SubmitSlot},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[api.SubmitRequest]) (api.SubmitResponse, error) {
			return s.SubmitDriver(ctx, c, r.Body)
		},
	})
	V1SubmitDrivers = routed(&Endpoint[api.SubmitBatchRequest, api.SubmitBatchResponse]{
		Info: Info{Route: api.V1SubmitDrivers.Route, Access: auth.Submit, Bound: SubmitSlot},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[api.SubmitBatchRequest]) (api.SubmitBatchResponse, error) {
			return s.SubmitDrivers(ctx, c, r.Body)
		},
		Admit: admitBatch,
	})
	V1Drivers = routed(&Endpoint[api.NoBody, api.DriverPage]{
		Info: Info{Route: api.V1Drivers.Route, Access: auth.Read, Answer: AtLeaderOrStale, Query: ListingQuery},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[api.NoBody]) (api.DriverPage, error) {
			return s.Drivers(ctx, c, r.List, r.Read)
		},
		Rows: func(p *api.DriverPage) any { return &p.Drivers },
	})
	V1Driver = routed(&Endpoint[api.NoBody, *model.Driver]{
		Info: Info{Route: api.V1Driver.Route, Access: auth.Read, Answer: AtLeaderOrStale, Query: BlockingQuery},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[api.NoBody]) (*model.Driver, error) {
			return s.Driver(ctx, c, r.ID, r.Read)
		},
		Index: func(d *model.Driver) uint64 { return d.ModifyIndex },
	})
	V1KillDriver = routed(&Endpoint[api.NoBody, api.KillResponse]{
		Info: Info{Route: api.V1KillDriver.Route, Access: auth.Submit},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[api.NoBody]) (api.KillResponse, error) {
			return s.KillDriver(ctx, c, r.ID)
		},
	})
	V1KillAllDrivers = routed(&Endpoint[api.NoBody, api.KillAllResponse]{
		Info: Info{Route: api.V1KillAllDrivers.Route, Access: auth.Submit},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, _ Request[api.NoBody]) (api.KillAllResponse, error) {
			return s.KillAllDrivers(ctx, c)
		},
	})
	V1RegisterWorker = routed(&Endpoint[api.RegisterWorkerRequest, api.RegisterWorkerResponse]{
		Info: Info{Route: api.V1RegisterWorker.Route, Access: auth.Node},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[api.RegisterWorkerRequest]) (api.RegisterWorkerResponse, error) {
			return s.RegisterWorker(ctx, c, r.Body)
		},
		Worker: func(r Request[api.RegisterWorkerRequest]) string { return r.Body.ID },
	})
	V1Heartbeat = routed(&Endpoint[api.HeartbeatRequest, api.HeartbeatResponse]{
		Info: Info{Route: api.V1Heartbeat.Route, Access: auth.Node},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[api.HeartbeatRequest]) (api.HeartbeatResponse, error) {
			return s.Heartbeat(ctx, c, r.ID, r.Body)
		},
		Worker: pathWorker[api.HeartbeatRequest],
	})
	V1DecommissionWorker = routed(&Endpoint[api.DecommissionWorkerRequest, api.RegisterWorkerResponse]{
		Info: Info{Route: api.V1DecommissionWorker.Route, Access: auth.Node},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[api.DecommissionWorkerRequest]) (api.RegisterWorkerResponse, error) {
			return s.DecommissionWorker(ctx, c, r.ID, r.Body)
		},
		Worker: pathWorker[api.DecommissionWorkerRequest],
	})
	V1RegisterApp = routed(&Endpoint[api.RegisterAppRequest, api.RegisterAppResponse]{
		Info: Info{Route: api.V1RegisterApp.Route, Access: auth.App, Bound: SubmitSlot},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[api.RegisterAppRequest]) (api.RegisterAppResponse, error) {
			return s.RegisterApp(ctx, c, r.Body)
		},
	})
	V1Apps = routed(&Endpoint[api.NoBody, api.AppPage]{
		Info: Info{Route: api.V1Apps.Route, Access: auth.Read, Answer: AtLeaderOrStale, Query: ListingQuery},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[api.NoBody]) (api.AppPage, error) {
			return s.Apps(ctx, c, r.List, r.Read)
		},
		Rows: func(p *api.AppPage) any { return &p.Apps },
	})
	V1App = routed(&Endpoint[api.NoBody, api.AppStatus]{
		Info: Info{Route: api.V1App.Route, Access: auth.AppRead, Answer: AtLeaderOrStale, Query: BlockingQuery},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[api.NoBody]) (api.AppStatus, error) {
			return s.App(ctx, c, r.ID, r.Read)
		},
		Index: func(a api.AppStatus) uint64 { return a.ModifyIndex },
	})
	V1RequestExecutors = routed(&Endpoint[api.RequestExecutorsRequest, api.AppStatus]{
		Info: Info{Route: api.V1RequestExecutors.Route, Access: auth.App},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[api.RequestExecutorsRequest]) (api.AppStatus, error) {
			return s.RequestExecutors(ctx, c, r.ID, r.Body)
		},
	})
	V1KillExecutors = routed(&Endpoint[api.KillExecutorsRequest, api.AppStatus]{
		Info: Info{Route: api.V1KillExecutors.Route, Access: auth.App},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[api.KillExecutorsRequest]) (api.AppStatus, error) {
			return s.KillExecutors(ctx, c, r.ID, r.Body)
		},
	})
	V1UnregisterApp = routed(&Endpoint[api.UnregisterAppRequest, api.AppStatus]{
		Info: Info{Route: api.V1UnregisterApp.Route, Access: auth.App},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[api.UnregisterAppRequest]) (api.AppStatus, error) {
			return s.UnregisterApp(ctx, c, r.ID, r.Body)
		},
	})
	V1KillApp = routed(&Endpoint[api.NoBody, api.AppStatus]{
		Info: Info{Route: api.V1KillApp.Route, Access: auth.Submit},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[api.NoBody]) (api.AppStatus, error) {
			return s.KillApp(ctx, c, r.ID)
		},
	})
	// V1State is this master's own view: never forwarded.
	V1State = routed(&Endpoint[api.NoBody, api.State]{
		Info: Info{Route: api.V1State.Route, Access: auth.Read, Answer: Here},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, _ Request[api.NoBody]) (api.State, error) {
			return s.State(ctx, c)
		},
	})
	// V1GossipPeers is answered here: any master knows the pool it is in.
	V1GossipPeers = routed(&Endpoint[api.NoBody, api.GossipPeers]{
		Info: Info{Route: api.V1GossipPeers.Route, Access: auth.Node, Answer: Here},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, _ Request[api.NoBody]) (api.GossipPeers, error) {
			return s.GossipPeers(ctx, c)
		},
	})
	V1RaftPeers = routed(&Endpoint[api.NoBody, api.RaftPeers]{
		Info: Info{Route: api.V1RaftPeers.Route, Access: auth.Operator, Answer: AtLeaderOrStale},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[api.NoBody]) (api.RaftPeers, error) {
			return s.RaftPeers(ctx, c, r.Read)
		},
	})
	V1AddVoter = routed(&Endpoint[api.AddVoterRequest, api.RaftPeers]{
		Info: Info{Route: api.V1AddVoter.Route, Access: auth.Operator},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[api.AddVoterRequest]) (api.RaftPeers, error) {
			return s.AddVoter(ctx, c, r.Body)
		},
	})
	V1RemovePeer = routed(&Endpoint[api.RemovePeerRequest, api.RaftPeers]{
		Info: Info{Route: api.V1RemovePeer.Route, Access: auth.Operator},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[api.RemovePeerRequest]) (api.RaftPeers, error) {
			return s.RemovePeer(ctx, c, r.Body)
		},
	})
	V1TransferLeadership = routed(&Endpoint[api.TransferLeadershipRequest, api.TransferLeadershipResponse]{
		Info: Info{Route: api.V1TransferLeadership.Route, Access: auth.Operator},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[api.TransferLeadershipRequest]) (api.TransferLeadershipResponse, error) {
			return s.TransferLeadership(ctx, c, r.Body)
		},
	})
	V1ClearCompleted = routed(&Endpoint[api.NoBody, api.ClearCompletedResponse]{
		Info: Info{Route: api.V1ClearCompleted.Route, Access: auth.Operator},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, _ Request[api.NoBody]) (api.ClearCompletedResponse, error) {
			return s.ClearCompleted(ctx, c)
		},
	})
	V1Namespaces = routed(&Endpoint[api.NoBody, []api.NamespaceStatus]{
		Info: Info{Route: api.V1Namespaces.Route, Access: auth.Read, Answer: AtLeaderOrStale},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[api.NoBody]) ([]api.NamespaceStatus, error) {
			return s.Namespaces(ctx, c, r.Read)
		},
	})
	V1Namespace = routed(&Endpoint[api.NoBody, api.NamespaceStatus]{
		Info: Info{Route: api.V1Namespace.Route, Access: auth.Read, Answer: AtLeaderOrStale},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[api.NoBody]) (api.NamespaceStatus, error) {
			return s.Namespace(ctx, c, r.ID, r.Read)
		},
	})
	V1ApplyNamespace = routed(&Endpoint[api.NamespaceRequest, api.NamespaceStatus]{
		Info: Info{Route: api.V1ApplyNamespace.Route, Access: auth.Operator},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[api.NamespaceRequest]) (api.NamespaceStatus, error) {
			return s.ApplyNamespace(ctx, c, r.ID, r.Body)
		},
	})
	V1DeleteNamespace = routed(&Endpoint[api.NoBody, *model.Namespace]{
		Info: Info{Route: api.V1DeleteNamespace.Route, Access: auth.Operator},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[api.NoBody]) (*model.Namespace, error) {
			return s.DeleteNamespace(ctx, c, r.ID)
		},
	})
	V1CreateACLToken = routed(&Endpoint[api.ACLTokenRequest, api.ACLTokenCreated]{
		Info: Info{Route: api.V1CreateACLToken.Route, Access: auth.Operator},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[api.ACLTokenRequest]) (api.ACLTokenCreated, error) {
			return s.CreateACLToken(ctx, c, r.Body)
		},
	})
	V1ACLTokens = routed(&Endpoint[api.NoBody, []*model.ACLToken]{
		Info: Info{Route: api.V1ACLTokens.Route, Access: auth.Operator, Answer: AtLeaderOrStale},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[api.NoBody]) ([]*model.ACLToken, error) {
			return s.ACLTokens(ctx, c, r.Read)
		},
	})
	V1RevokeACLToken = routed(&Endpoint[api.NoBody, *model.ACLToken]{
		Info: Info{Route: api.V1RevokeACLToken.Route, Access: auth.Operator},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[api.NoBody]) (*model.ACLToken, error) {
			return s.RevokeACLToken(ctx, c, r.ID)
		},
	})
	V1CreateSchedule = routed(&Endpoint[api.ScheduleRequest, api.ScheduleStatus]{
		Info: Info{Route: api.V1CreateSchedule.Route, Access: auth.Submit, Bound: SubmitSlot, Created: true},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[api.ScheduleRequest]) (api.ScheduleStatus, error) {
			return s.CreateSchedule(ctx, c, r.Body)
		},
	})
	V1Schedules = routed(&Endpoint[api.NoBody, api.ScheduleList]{
		Info: Info{Route: api.V1Schedules.Route, Access: auth.Read, Answer: AtLeaderOrStale, Query: NamespaceQuery},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[api.NoBody]) (api.ScheduleList, error) {
			return s.Schedules(ctx, c, r.List, r.Read)
		},
	})
	V1Schedule = routed(&Endpoint[api.NoBody, api.ScheduleStatus]{
		Info: Info{Route: api.V1Schedule.Route, Access: auth.Read, Answer: AtLeaderOrStale},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[api.NoBody]) (api.ScheduleStatus, error) {
			return s.Schedule(ctx, c, r.ID, r.Read)
		},
	})
	V1SuspendSchedule = routed(&Endpoint[api.NoBody, api.ScheduleStatus]{
		Info: Info{Route: api.V1SuspendSchedule.Route, Access: auth.Submit},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[api.NoBody]) (api.ScheduleStatus, error) {
			return s.SuspendSchedule(ctx, c, r.ID, true)
		},
	})
	V1ResumeSchedule = routed(&Endpoint[api.NoBody, api.ScheduleStatus]{
		Info: Info{Route: api.V1ResumeSchedule.Route, Access: auth.Submit},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[api.NoBody]) (api.ScheduleStatus, error) {
			return s.SuspendSchedule(ctx, c, r.ID, false)
		},
	})
	V1RunSchedule = routed(&Endpoint[api.NoBody, api.ScheduleRunResponse]{
		Info: Info{Route: api.V1RunSchedule.Route, Access: auth.Submit, Bound: SubmitSlot, Created: true},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[api.NoBody]) (api.ScheduleRunResponse, error) {
			return s.RunSchedule(ctx, c, r.ID)
		},
	})
	V1DeleteSchedule = routed(&Endpoint[api.NoBody, *model.Schedule]{
		Info: Info{Route: api.V1DeleteSchedule.Route, Access: auth.Submit},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[api.NoBody]) (*model.Schedule, error) {
			return s.DeleteSchedule(ctx, c, r.ID)
		},
	})
)

// The endpoints whose listener decodes and encodes them by hand (streams,
// logs, uploads, snapshots, health), and the one read listeners make that
// has no route of its own. They take the same chain.
var (
	// V1Health needs no credential and is this master's own.
	V1Health = &Endpoint[api.NoBody, api.Health]{
		Info: Info{Route: api.V1Health.Route, Open: true, Answer: Here},
		Serve: func(s *Local, ctx context.Context, _ auth.Caller, _ Request[api.NoBody]) (api.Health, error) {
			return s.Health(ctx), nil
		},
	}
	// V1DriverLogs streams a log of one of the driver's attempts from the
	// worker that ran it.
	V1DriverLogs = &Endpoint[LogQuery, *Log]{
		Info: Info{Route: api.V1DriverLogs, Access: auth.Read, Answer: AtLeaderOrStale},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[LogQuery]) (*Log, error) {
			return s.DriverLogs(ctx, c, r.ID, r.Body, r.Read)
		},
		Remote: func(l Leader, r Request[LogQuery]) (*Log, error) { return l.Log(api.V1DriverLogs.Path(r.ID), r.Body) },
	}
	// V1ExecutorLogs streams a log of one executor from its worker.
	V1ExecutorLogs = &Endpoint[ExecutorLogQuery, *Log]{
		Info: Info{Route: api.V1ExecutorLogs, Access: auth.AppRead, Answer: AtLeaderOrStale},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[ExecutorLogQuery]) (*Log, error) {
			return s.ExecutorLogs(ctx, c, r.ID, r.Body.Executor, r.Body.LogQuery, r.Read)
		},
		Remote: func(l Leader, r Request[ExecutorLogQuery]) (*Log, error) {
			return l.Log(api.ExecutorLogsPath(r.ID, r.Body.Executor), r.Body.LogQuery)
		},
	}
	// V1WatchApp is an app client's long poll; its body is the entity tag
	// it last saw.
	V1WatchApp = &Endpoint[string, AppWatch]{
		Info: Info{Route: api.V1WatchApp, Access: auth.App},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[string]) (AppWatch, error) {
			return s.WatchApp(ctx, c, r.ID, r.Body)
		},
		Remote: func(l Leader, r Request[string]) (AppWatch, error) { return l.Watch(api.V1WatchApp.Path(r.ID), r.Body) },
	}
	// V1Events is served by the master it reached: every master holds
	// the same events under the same indexes, in the log's order, so a
	// stream needs no leader. It holds a slot of Bounds.EventStreams
	// until it is closed.
	V1Events = &Endpoint[EventQuery, *EventStream]{
		Info: Info{Route: api.V1Events, Access: auth.Read, Answer: Here},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[EventQuery]) (*EventStream, error) {
			return s.Events(ctx, c, r.Body)
		},
		Admit: admitStream,
	}
	V1SaveSnapshot = &Endpoint[api.NoBody, *Snapshot]{
		Info: Info{Route: api.V1SaveSnapshot, Access: auth.Operator},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, _ Request[api.NoBody]) (*Snapshot, error) {
			return s.SaveSnapshot(ctx, c)
		},
		Remote: func(l Leader, _ Request[api.NoBody]) (*Snapshot, error) { return l.Snapshot() },
	}
	// V1RestoreSnapshot's body is the archive.
	V1RestoreSnapshot = &Endpoint[io.Reader, api.RaftPeers]{
		Info: Info{Route: api.V1RestoreSnapshot, Access: auth.Operator},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[io.Reader]) (api.RaftPeers, error) {
			return s.RestoreSnapshot(ctx, c, r.Body)
		},
		Remote: func(l Leader, r Request[io.Reader]) (out api.RaftPeers, err error) {
			return out, l.Restore(r.Body, &out)
		},
	}
	// V1Upload is this master's own: every master keeps a store, and the
	// one an upload reaches pushes it to the other voters itself. The
	// path names the file's SHA-256.
	V1Upload = &Endpoint[Upload, api.UploadResponse]{
		Info: Info{Route: api.V1Upload, Access: auth.Submit, Answer: Here, Bound: UploadSlot},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[Upload]) (api.UploadResponse, error) {
			return s.Upload(ctx, c, r.ID, r.Body.Size, r.Body.Body)
		},
	}
	// V1Blob is served from this master's own store.
	V1Blob = &Endpoint[api.NoBody, *Blob]{
		Info: Info{Route: api.V1Blob, Access: auth.BlobRead, Answer: Here},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[api.NoBody]) (*Blob, error) {
			return s.Blob(ctx, c, r.ID)
		},
	}
	// Worker is one row of the workers table, which only the web UI and
	// Spark's REST status ask for, from this master's own tables.
	Worker = &Endpoint[api.NoBody, *model.Worker]{
		Info: Info{Access: auth.Read, Answer: Here},
		Serve: func(s *Local, ctx context.Context, c auth.Caller, r Request[api.NoBody]) (*model.Worker, error) {
			return s.Worker(ctx, c, r.ID, Read{Stale: true})
		},
	}
)

// ExecutorLogQuery is a request for a log of executor Executor of the app
// the path names.
type ExecutorLogQuery struct {
	Executor int
	LogQuery
}

// Upload is an uploaded file as its listener received it: the length its
// sender declared (-1 for none) and the body, read only when the file is
// new to this master.
type Upload struct {
	Size int64
	Body io.Reader
}

// pathWorker is the worker of an endpoint whose path names it.
func pathWorker[In any](r Request[In]) string { return r.ID }

// admitStream takes one of the client IP's stream slots, given back when
// the stream is closed.
func admitStream(a *admission, c auth.Caller, r Request[EventQuery], next func(Request[EventQuery]) (*EventStream, error)) (*EventStream, error) {
	release, err := a.slot(c, auth.Read, a.streaming,
		fmt.Sprintf("this client holds %d event streams open here, the bound of --max-event-streams-per-client; retry once one ends", a.streaming.max))
	if err != nil {
		return nil, err
	}
	st, err := next(r)
	if err != nil {
		release()
		return nil, err
	}
	st.release = release
	return st, nil
}
