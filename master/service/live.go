package service

import (
	"iter"
	"maps"
	"sync"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/internal/plural"
	"github.com/drover-project/drover/model"
)

// The bounds on what has not ended (Config.MaxLiveDrivers,
// MaxLiveDriversPerClient, MaxLiveApps) are the leader's to keep: it
// alone commits submissions and registrations. It counts the rows the
// tables hold (fsm.State.Live, the same on every master, so a new leader
// starts from where the old one stopped) and what it has handed to Raft
// and not seen applied yet, and refuses what would pass a bound before
// any entry is made, so that no committed index holds more than a bound
// allows. Rows and what is in flight are added up exactly
// (fsm.State.LiveWith) only when their sum with every submission in flight
// counted reaches a bound: the usual submission costs a lookup.

// admitDriver refuses a submission from client with api.ErrLimitReached,
// naming the bound, when the drivers not ended with the submissions in
// flight (s.queue.byToken) are at a bound already. Called with
// s.queue.mu held; the caller queues what it admits.
func (s *Core) admitDriver(client string) error {
	q := &s.queue
	l := s.FSM.State().Live(client)
	l.Drivers += len(q.byToken)
	l.ClientDrivers += q.byClient[client]
	if s.overLive(l, client) == nil {
		return nil
	}
	return s.overLive(s.FSM.State().LiveWith(client, q.submitting(), nil), client)
}

// overLive is the refusal of a submission from client when l is at a
// bound on drivers not ended, nil otherwise.
func (s *Core) overLive(l fsm.Live, client string) error {
	if limit := s.cfg.MaxLiveDrivers; limit > 0 && l.Drivers >= limit {
		return api.Errorf(api.ErrLimitReached, "drivers that have not ended are at --max-live-drivers (%d): nothing submitted; submit again once some have ended", limit)
	}
	if limit := s.cfg.MaxLiveDriversPerClient; limit > 0 && client != "" && l.ClientDrivers >= limit {
		return api.Errorf(api.ErrLimitReached, "drivers from %s that have not ended are at --max-live-drivers-per-client (%d): nothing submitted; submit again once some have ended",
			client, limit)
	}
	return nil
}

// admitQueued refuses a submission to namespace ns ("" for the default)
// with model.ErrQueueFull, naming the bound, when the namespace's drivers
// waiting for a placement with its submissions in flight are at its
// MaxQueuedDrivers already, in the tables st. Called with q.mu held, as
// Core.admitDriver. The waiting drivers are read before which of those in flight have
// applied, so that one applied in between is counted at most once: a
// count that falls short lets the tables refuse the submission
// themselves (fsm's admitSubmission), and none is ever refused that
// fits.
func (q *submitQueue) admitQueued(st *fsm.State, ns string) error {
	ns = model.NamespaceOf(ns)
	n, ok := st.Namespace(ns)
	if !ok || n.MaxQueuedDrivers == 0 {
		return nil
	}
	queued := st.NamespaceUse(ns).Queued
	if queued+len(q.byToken) < n.MaxQueuedDrivers {
		return nil
	}
	for token, qs := range q.byToken {
		if model.NamespaceOf(qs.cmd.Namespace) != ns {
			continue
		}
		if _, applied := st.DriverByToken(token); !applied {
			queued++
		}
	}
	if queued >= n.MaxQueuedDrivers {
		return api.Errorf(model.ErrQueueFull, "namespace %s has %s waiting, its --max-queued-drivers (%d): nothing submitted; submit again once some are placed",
			ns, plural.Count(queued, "driver"), n.MaxQueuedDrivers)
	}
	return nil
}

// submitting yields the token and client of every submission queued or
// committing. Called with q.mu held.
func (q *submitQueue) submitting() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for token, qs := range q.byToken {
			if !yield(token, qs.cmd.Client) {
				return
			}
		}
	}
}

// queued files qs in the queue under its token. Called with q.mu held.
func (q *submitQueue) queued(qs *queuedSubmit) {
	if q.byToken == nil {
		q.byToken, q.byClient = map[string]*queuedSubmit{}, map[string]int{}
	}
	q.byToken[qs.cmd.Token] = qs
	if c := qs.cmd.Client; c != "" {
		q.byClient[c]++
	}
}

// done takes qs out of the queue, once its entry is applied or has
// failed. Called with q.mu held.
func (q *submitQueue) done(qs *queuedSubmit) {
	delete(q.byToken, qs.cmd.Token)
	if c := qs.cmd.Client; c != "" {
		if q.byClient[c]--; q.byClient[c] <= 0 {
			delete(q.byClient, c)
		}
	}
}

// registrations is the app registrations handed to Raft and not yet
// applied, by token.
type registrations struct {
	mu     sync.Mutex
	tokens map[string]struct{}
}

// admitApp counts the registration with token as in flight, or refuses it
// with api.ErrLimitReached when the apps not ended with those in flight
// are at Config.MaxLiveApps already. The function it returns takes the
// registration off the count, once its entry is applied or has failed.
func (s *Core) admitApp(token string) (func(), error) {
	r := &s.registering
	r.mu.Lock()
	defer r.mu.Unlock()
	if limit := s.cfg.MaxLiveApps; limit > 0 && s.FSM.State().Live("").Apps+len(r.tokens) >= limit &&
		s.FSM.State().LiveWith("", nil, maps.Keys(r.tokens)).Apps >= limit {
		return nil, api.Errorf(api.ErrLimitReached, "apps that have not ended are at --max-live-apps (%d): nothing registered; register again once some have ended", limit)
	}
	if r.tokens == nil {
		r.tokens = map[string]struct{}{}
	}
	r.tokens[token] = struct{}{}
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.tokens, token)
	}, nil
}
