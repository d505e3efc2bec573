package service

import (
	"context"
	"io"
	"log/slog"
	"net/url"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/security/auth"
)

// Where says which master may answer an endpoint.
type Where uint8

const (
	// AtLeader is the ready leader; any other master forwards the request
	// to it (Router).
	AtLeader Where = iota
	// AtLeaderOrStale is AtLeader, but any master answers a stale read
	// (Read.Stale) from its own tables.
	AtLeaderOrStale
	// Here is the master the request reached, from its own view, never
	// forwarding.
	Here
)

// Query says which parameters of its URL's query an endpoint reads; it
// ignores the others, as Spark's and Nomad's APIs do.
type Query uint8

const (
	// NoQuery reads none.
	NoQuery Query = iota
	// BlockingQuery reads index and wait (a blocking read of one row,
	// Nomad's blocking queries): the answer carries api.HeaderIndex.
	BlockingQuery
	// ListingQuery reads an api.ListQuery: the whole list when it asks
	// for no page, else one page.
	ListingQuery
	// NamespaceQuery reads namespace or all_namespaces
	// (api.ParseNamespaceQuery) into Request.List's Namespace.
	NamespaceQuery
)

// Bound is the per-client bound (Bounds) that an endpoint's requests count
// against, on the master they reach first, for as long as they run.
type Bound uint8

const (
	// Unbounded counts nothing.
	Unbounded Bound = iota
	// SubmitSlot takes one of Bounds.Submits.
	SubmitSlot
	// UploadSlot takes one of Bounds.Uploads.
	UploadSlot
)

// Info is what every step of the chain reads of an endpoint, whatever its
// types: its route, the access it needs, who answers it, what of the query
// it reads and what it counts against.
type Info struct {
	api.Route
	// Access is what the caller needs (auth.Guard.Check). A worker's own
	// traffic (Endpoint.Worker) needs auth.Node and the right to act as
	// that worker instead.
	Access auth.Access
	// Open needs no credential at all: load balancers ask (health).
	Open bool
	// Answer says which master answers; stale is read from the query
	// only where it matters (AtLeaderOrStale).
	Answer Where
	Query  Query
	// Bound is the per-client bound; a blocking read (BlockingQuery with
	// an index) takes one of Bounds.BlockingReads besides.
	Bound Bound
	// Created answers 201 Created rather than 200: the request made a
	// row (a schedule, a run).
	Created bool
}

// Request is a request of an endpoint as its listener decoded it: the row
// its path names ("" for none), its body (or what a hand-written listener
// decoded in its place), and the query of a read.
type Request[In any] struct {
	ID   string
	Body In
	Read Read
	List api.ListQuery
}

// Endpoint is one endpoint of a master described once: the listener
// (package master/httpapi) routes and decodes it, the Chain admits it,
// forwards it or serves it by this description, and the Go client calls it
// through the same api.Endpoint. Adding one: see master/httpapi's DESIGN.md.
type Endpoint[In, Out any] struct {
	Info
	// Serve is the rule, on the master that answers: s is that master's
	// Local (nil in a test's table, whose Serve ignores it).
	Serve func(s *Local, ctx context.Context, c auth.Caller, r Request[In]) (Out, error)
	// Worker, for a worker's own traffic, names the worker the caller
	// acts as (admission.worker checks it); nil for every other endpoint.
	Worker func(r Request[In]) string
	// Index is the ModifyIndex of a blocking read's answer
	// (BlockingQuery), sent back as api.HeaderIndex.
	Index func(Out) uint64
	// Rows is where a whole list, asked for without a page, decodes when
	// a follower forwards it: the page's rows (ListingQuery).
	Rows func(*Out) any
	// Remote sends the request to the leader when this master does not
	// answer it; nil sends it as JSON, body In and answer Out
	// (Leader.JSON). Streams, logs and snapshots set their own.
	Remote func(l Leader, r Request[In]) (Out, error)
	// Admit replaces the admission of Info for an endpoint whose bound is
	// more than a slot held while it runs: a batch admits each of its
	// submissions, a stream holds its slot until it is closed. next runs
	// the rest of the chain.
	Admit func(a *admission, c auth.Caller, r Request[In], next func(Request[In]) (Out, error)) (Out, error)
}

// Router is the forwarding to the leader, package master/forward's
// Forwarder: Route runs here when this master answers itself (it is the
// leader, or stale is set), and otherwise there, once, with a call to the
// leader. Its error is here's, there's, or why no leader could be called
// (api.ErrUnavailable).
type Router interface {
	Route(ctx context.Context, c auth.Caller, stale bool, here func() error, there func(Leader) error) error
}

// Leader is one request on its way to the leader's /v1 API, carrying the
// caller's credential; its answer is the leader's, a refusal decoded to
// its sentinel (api.Error.Err).
type Leader interface {
	// JSON sends in as the JSON body (nil for none) to path with query
	// and decodes the answer into out.
	JSON(method, path string, query url.Values, in, out any) error
	// Log asks for a part of a log; Watch holds an app watch; Snapshot
	// fetches a snapshot archive and Restore sends one.
	Log(path string, q LogQuery) (*Log, error)
	Watch(path, etag string) (AppWatch, error)
	Snapshot() (*Snapshot, error)
	Restore(archive io.Reader, out any) error
}

// Chain is the one way into a master's rules for every listener:
// authenticate (the listener's), then admit (access and per-client
// bounds, on the master the request reached first), then forward to the
// leader or serve here (Router), then the endpoint's Serve on this
// master's Local. Make one with NewChain.
type Chain struct {
	admission *admission
	router    Router
	local     *Local
}

// NewChain returns the chain in front of local. The leader admits a
// forwarded request again by the credential the forwarding master carried
// on, and does not count it against the forwarding master's IP. known says
// whether a submission token is committed in this master's tables
// (fsm.State.DriverByToken), which a batch short of slots uses; nil knows
// none. Guard.CheckWorker's notices go to log once per worker.
func NewChain(local *Local, router Router, g *auth.Guard, log *slog.Logger, b Bounds, known func(token string) bool) *Chain {
	return &Chain{admission: newAdmission(g, log, b, known), router: router, local: local}
}

// Allow reports whether the caller has access a, for what is not an
// endpoint (a metrics scrape, a log-in check).
func (ch *Chain) Allow(c auth.Caller, a auth.Access) error {
	return ch.admission.guard.Check(c.Identity, a)
}

// Call runs r through ch: admission, then this master or the leader.
func (e *Endpoint[In, Out]) Call(ctx context.Context, ch *Chain, c auth.Caller, r Request[In]) (Out, error) {
	next := func(r Request[In]) (Out, error) { return e.route(ctx, ch, c, r) }
	if e.Admit != nil {
		return e.Admit(ch.admission, c, r, next)
	}
	var worker *string
	if e.Worker != nil {
		id := e.Worker(r)
		worker = &id
	}
	release, err := ch.admission.admit(&e.Info, c, r.Read, worker)
	if err != nil {
		var zero Out
		return zero, err
	}
	defer release()
	return next(r)
}

// route serves r here or has the leader answer it.
func (e *Endpoint[In, Out]) route(ctx context.Context, ch *Chain, c auth.Caller, r Request[In]) (out Out, err error) {
	if e.Answer == Here {
		return e.Serve(ch.local, ctx, c, r)
	}
	err = ch.router.Route(ctx, c, e.Answer == AtLeaderOrStale && r.Read.Stale,
		func() (err error) {
			out, err = e.Serve(ch.local, ctx, c, r)
			return err
		},
		func(l Leader) (err error) {
			if e.Remote != nil {
				out, err = e.Remote(l, r)
				return err
			}
			return e.sendJSON(l, r, &out)
		})
	return out, err
}

// sendJSON sends r to the leader as the client would, and decodes the
// answer into out.
func (e *Endpoint[In, Out]) sendJSON(l Leader, r Request[In], out *Out) error {
	var body any
	if _, none := any(r.Body).(api.NoBody); !none {
		body = r.Body
	}
	query, into := r.Read.Values(), any(out)
	if e.Query == NamespaceQuery {
		query = r.List.Values()
	}
	if e.Query == ListingQuery {
		query = r.List.Values()
		if !r.List.Paged() {
			into = e.Rows(out)
		}
	}
	return l.JSON(e.Method, e.Path(r.ID), query, body, into)
}

// Routed is an endpoint with its types erased, for the listener that
// routes every JSON endpoint alike (package master/httpapi).
type Routed interface {
	// Describe is the endpoint's Info.
	Describe() *Info
	// NewBody returns a pointer to a fresh body to decode into, nil for
	// an endpoint that takes none.
	NewBody() any
	// Invoke runs the request through ch: body is what NewBody returned,
	// decoded. index is the answer's ModifyIndex for a blocking read.
	Invoke(ctx context.Context, ch *Chain, c auth.Caller, id string, body any, rd Read, q api.ListQuery) (out any, index uint64, err error)
}

// Describe implements Routed.
func (e *Endpoint[In, Out]) Describe() *Info { return &e.Info }

// NewBody implements Routed.
func (e *Endpoint[In, Out]) NewBody() any {
	in := new(In)
	if _, none := any(*in).(api.NoBody); none {
		return nil
	}
	return in
}

// Invoke implements Routed.
func (e *Endpoint[In, Out]) Invoke(ctx context.Context, ch *Chain, c auth.Caller, id string, body any, rd Read, q api.ListQuery) (any, uint64, error) {
	r := Request[In]{ID: id, Read: rd, List: q}
	if body != nil {
		r.Body = *body.(*In)
	}
	out, err := e.Call(ctx, ch, c, r)
	if err != nil {
		return nil, 0, err
	}
	var index uint64
	if e.Index != nil {
		index = e.Index(out)
	}
	return out, index, nil
}
