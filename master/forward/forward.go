// Package forward is the one place a master hands a request to the leader:
// the Router of the master's service.Chain, which runs each request on
// this master when it may answer (it is the leader, or the read may be
// stale) and otherwise sends it, once, to the leader's /v1 API as its
// endpoint describes it (service.Endpoint), with the caller's credential
// and this master's certificate, and returns the leader's answer as if it
// were its own. Followers thus take every request a client sends them, as Spark's
// standby masters do not, and a client never needs to know who leads.
package forward

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/hashicorp/raft"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/master/service"
	"github.com/drover-project/drover/security/auth"
)

// leaderPoll is how often a forwarded request checks that the master it
// went to still leads. A leader that stops answering (paused, cut off) is
// replaced within an election timeout; the request is dropped then, so
// the client hears api.ErrUnavailable and retries, instead of waiting on a
// deposed leader.
const leaderPoll = 100 * time.Millisecond

// Forwarder is the service.Router of a master. Make one with New.
type Forwarder struct {
	lead   func() service.Leadership
	http   *http.Client
	scheme string
}

// New returns a Forwarder. lead tells, at each request, what this master
// knows of the leader; client carries forwarded requests (with TLS,
// presenting this master's certificate and checking the leader's); scheme
// is "http" or "https".
func New(lead func() service.Leadership, client *http.Client, scheme string) *Forwarder {
	return &Forwarder{lead: lead, http: client, scheme: scheme}
}

// answersHere reports whether this master answers itself: as the ready leader, as
// one elected a moment ago (whose core then says it is catching up), or
// for a stale read.
func answersHere(l service.Leadership, stale bool) bool {
	return stale || l.Ready || l.Role == raft.Leader.String()
}

// Route implements service.Router: it runs here when this master answers
// itself, and there against the leader otherwise. A request whose context carries a leader wait
// (WithLeaderWait) and that finds no leader to answer it (api.ErrUnavailable:
// none known, the one known unreachable or deposed, or one elected a moment
// ago and still catching up) is tried again every leaderRetry until one
// answers or the wait ends; the last refusal is returned then. Trying again
// is safe for every request that waits: a submission carries its token, so
// the leader that committed it the first time answers the same driver; a
// kill of a killed driver succeeds; a read changes nothing.
func (f *Forwarder) Route(ctx context.Context, c auth.Caller, stale bool, here func() error, there func(service.Leader) error) error {
	deadline, waits := leaderDeadline(ctx)
	for {
		err := f.routeOnce(ctx, c, stale, here, there)
		if !waits || !errors.Is(err, api.ErrUnavailable) || c.ForwardedBy != "" {
			return err
		}
		wait := min(leaderRetry, time.Until(deadline))
		if wait <= 0 {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// routeOnce is one try of Route.
func (f *Forwarder) routeOnce(ctx context.Context, c auth.Caller, stale bool, here func() error, there func(service.Leader) error) error {
	l := f.lead()
	if answersHere(l, stale) {
		return here()
	}
	cl, err := f.to(ctx, c, l)
	if err != nil {
		return err
	}
	defer cl.done()
	return there(cl)
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
