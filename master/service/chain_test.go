package service

import (
	"context"
	"log/slog"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/security/auth"
)

// rules are the rules the admission tests fake, one method per endpoint
// they call; a fake embeds the nil interface for those it does not.
type rules interface {
	SubmitDriver(ctx context.Context, c auth.Caller, req api.SubmitRequest) (api.SubmitResponse, error)
	SubmitDrivers(ctx context.Context, c auth.Caller, req api.SubmitBatchRequest) (api.SubmitBatchResponse, error)
	Driver(ctx context.Context, c auth.Caller, id string, r Read) (*model.Driver, error)
	App(ctx context.Context, c auth.Caller, id string, r Read) (api.AppStatus, error)
	Events(ctx context.Context, c auth.Caller, q EventQuery) (*EventStream, error)
	RaftPeers(ctx context.Context, c auth.Caller, r Read) (api.RaftPeers, error)
	RegisterWorker(ctx context.Context, c auth.Caller, req api.RegisterWorkerRequest) (api.RegisterWorkerResponse, error)
	Heartbeat(ctx context.Context, c auth.Caller, id string, req api.HeartbeatRequest) (api.HeartbeatResponse, error)
	DecommissionWorker(ctx context.Context, c auth.Caller, id string, req api.DecommissionWorkerRequest) (api.RegisterWorkerResponse, error)
}

// servedHere is a Router of a master that answers everything itself.
type servedHere struct{}

func (servedHere) Route(_ context.Context, _ auth.Caller, _ bool, here func() error, _ func(Leader) error) error {
	return here()
}

// through runs requests through a Chain whose endpoints are the master's
// own descriptions (access, bounds, admission) with next as their rules.
type through struct {
	ch   *Chain
	next rules
}

func admitThrough(next rules, g *auth.Guard, log *slog.Logger, b Bounds, known func(string) bool) *through {
	return &through{ch: NewChain(nil, servedHere{}, g, log, b, known), next: next}
}

// served is e with Serve replaced by serve.
func served[In, Out any](e *Endpoint[In, Out], serve func(context.Context, auth.Caller, Request[In]) (Out, error)) *Endpoint[In, Out] {
	f := *e
	f.Serve = func(_ *Local, ctx context.Context, c auth.Caller, r Request[In]) (Out, error) {
		return serve(ctx, c, r)
	}
	return &f
}

func (t *through) SubmitDriver(ctx context.Context, c auth.Caller, req api.SubmitRequest) (api.SubmitResponse, error) {
	return served(V1SubmitDriver, func(ctx context.Context, c auth.Caller, r Request[api.SubmitRequest]) (api.SubmitResponse, error) {
		return t.next.SubmitDriver(ctx, c, r.Body)
	}).Call(ctx, t.ch, c, Request[api.SubmitRequest]{Body: req})
}

func (t *through) SubmitDrivers(ctx context.Context, c auth.Caller, req api.SubmitBatchRequest) (api.SubmitBatchResponse, error) {
	return served(V1SubmitDrivers, func(ctx context.Context, c auth.Caller, r Request[api.SubmitBatchRequest]) (api.SubmitBatchResponse, error) {
		return t.next.SubmitDrivers(ctx, c, r.Body)
	}).Call(ctx, t.ch, c, Request[api.SubmitBatchRequest]{Body: req})
}

func (t *through) Driver(ctx context.Context, c auth.Caller, id string, rd Read) (*model.Driver, error) {
	return served(V1Driver, func(ctx context.Context, c auth.Caller, r Request[api.NoBody]) (*model.Driver, error) {
		return t.next.Driver(ctx, c, r.ID, r.Read)
	}).Call(ctx, t.ch, c, Request[api.NoBody]{ID: id, Read: rd})
}

func (t *through) App(ctx context.Context, c auth.Caller, id string, rd Read) (api.AppStatus, error) {
	return served(V1App, func(ctx context.Context, c auth.Caller, r Request[api.NoBody]) (api.AppStatus, error) {
		return t.next.App(ctx, c, r.ID, r.Read)
	}).Call(ctx, t.ch, c, Request[api.NoBody]{ID: id, Read: rd})
}

func (t *through) Events(ctx context.Context, c auth.Caller, q EventQuery) (*EventStream, error) {
	return served(V1Events, func(ctx context.Context, c auth.Caller, r Request[EventQuery]) (*EventStream, error) {
		return t.next.Events(ctx, c, r.Body)
	}).Call(ctx, t.ch, c, Request[EventQuery]{Body: q})
}

func (t *through) RaftPeers(ctx context.Context, c auth.Caller, rd Read) (api.RaftPeers, error) {
	return served(V1RaftPeers, func(ctx context.Context, c auth.Caller, r Request[api.NoBody]) (api.RaftPeers, error) {
		return t.next.RaftPeers(ctx, c, r.Read)
	}).Call(ctx, t.ch, c, Request[api.NoBody]{Read: rd})
}

func (t *through) RegisterWorker(ctx context.Context, c auth.Caller, req api.RegisterWorkerRequest) (api.RegisterWorkerResponse, error) {
	return served(V1RegisterWorker, func(ctx context.Context, c auth.Caller, r Request[api.RegisterWorkerRequest]) (api.RegisterWorkerResponse, error) {
		return t.next.RegisterWorker(ctx, c, r.Body)
	}).Call(ctx, t.ch, c, Request[api.RegisterWorkerRequest]{Body: req})
}

func (t *through) Heartbeat(ctx context.Context, c auth.Caller, id string, req api.HeartbeatRequest) (api.HeartbeatResponse, error) {
	return served(V1Heartbeat, func(ctx context.Context, c auth.Caller, r Request[api.HeartbeatRequest]) (api.HeartbeatResponse, error) {
		return t.next.Heartbeat(ctx, c, r.ID, r.Body)
	}).Call(ctx, t.ch, c, Request[api.HeartbeatRequest]{ID: id, Body: req})
}

func (t *through) DecommissionWorker(ctx context.Context, c auth.Caller, id string, req api.DecommissionWorkerRequest) (api.RegisterWorkerResponse, error) {
	return served(V1DecommissionWorker, func(ctx context.Context, c auth.Caller, r Request[api.DecommissionWorkerRequest]) (api.RegisterWorkerResponse, error) {
		return t.next.DecommissionWorker(ctx, c, r.ID, r.Body)
	}).Call(ctx, t.ch, c, Request[api.DecommissionWorkerRequest]{ID: id, Body: req})
}

// Allow is the chain's.
func (t *through) Allow(_ context.Context, c auth.Caller, a auth.Access) error {
	return t.ch.Allow(c, a)
}
