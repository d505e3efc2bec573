package service

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/master/leader"
	"github.com/drover-project/drover/model"
)

// Submissions are committed in groups (group commit, as databases batch
// the transactions that wait for one log flush): every submission that
// arrives while earlier ones are being committed waits for the next
// SubmitDrivers entry rather than making an entry of its own. A Raft entry
// costs the same disk write, replication round and apply on every master
// whether it holds one submission or hundreds, so under load the cost per
// submission falls as the groups grow, while a lone submission is
// committed at once, without waiting for company.
const (
	// submitGroups bounds the entries of submissions in flight at once.
	// More than one lets a group be encoded and handed to Raft while the
	// one before is replicated; few enough that, under load, each group
	// gathers many submissions.
	submitGroups = 2
	// maxSubmitGroup bounds the submissions of one entry, so that one
	// entry's apply holds the tables' lock for a few milliseconds at most
	// and stays far below fsm.MaxCommandSize in the common case.
	maxSubmitGroup = 512
)

// submitQueue holds the submissions waiting for an entry, and those
// committing, by token. The zero value is empty.
type submitQueue struct {
	mu      sync.Mutex
	waiting []*queuedSubmit
	// byToken holds every submission queued or committing, so that a
	// copy of one (a client sends each to every master, followers
	// forward theirs here, and a client retries) waits for its outcome
	// instead of making a second entry and ID.
	byToken map[string]*queuedSubmit
	// groups is the number of goroutines committing groups, at most
	// submitGroups.
	groups int
	// byClient counts the submissions of byToken by client ("" left
	// out), for the bound on one client's drivers (Core.admitDriver).
	byClient map[string]int
}

// queuedSubmit is one submission waiting in the queue, and the callers
// its outcome goes to, the call of submitAll that queued it first.
type queuedSubmit struct {
	cmd     *model.SubmitDriver
	waiters []submitWaiter
}

// submitWaiter is one place an outcome goes: item i of a call of
// submitAll.
type submitWaiter struct {
	w *submitWait
	i int
}

// submitWait is one call of submitAll: its outcomes, and how many are yet
// to come.
type submitWait struct {
	outcomes []fsm.SubmitOutcome
	left     atomic.Int32
	done     chan struct{}
}

// deliver sets the outcome of item i and wakes the caller once all are in.
func (w *submitWait) deliver(i int, o fsm.SubmitOutcome) {
	w.outcomes[i] = o
	if w.left.Add(-1) == 0 {
		close(w.done)
	}
}

// submitAll commits cmds, which passed their checks, with whatever other
// submissions wait with them, and returns each one's outcome in order:
// the SubmitResult, Apply's refusal of that submission alone, or an error
// wrapping api.ErrUnavailable when Raft did not commit its entry (the
// outcome is then unknown, and a client retries with the same token). A
// submission whose token the tables know already yields that driver,
// Existing, without an entry, and one whose token names a driver of
// another namespace, queued or applied, is refused (sameNamespace); one
// whose token is queued or committing shares that submission's outcome (the copies of one submission a client
// sent to every master), Existing when the token came earlier in cmds.
// One that would take the drivers not ended, or its namespace's waiting
// drivers, past a bound is refused (Core.admitDriver, Core.admitQueued).
// The others get their ID and time from term t as they join the queue,
// all at once, so one call's submissions go into the same entry when they
// fit.
func (s *Core) submitAll(t *leader.Term, cmds []*model.SubmitDriver) []fsm.SubmitOutcome {
	if len(cmds) == 0 {
		return nil
	}
	w := &submitWait{outcomes: make([]fsm.SubmitOutcome, len(cmds)), done: make(chan struct{})}
	w.left.Store(int32(len(cmds)))
	q := &s.queue
	q.mu.Lock()
	for i, cmd := range cmds {
		if qs, ok := q.byToken[cmd.Token]; ok {
			if err := sameNamespace("submission", qs.cmd.Namespace, cmd.Namespace); err != nil {
				w.deliver(i, fsm.SubmitOutcome{Err: err})
				continue
			}
			qs.waiters = append(qs.waiters, submitWaiter{w, i})
			continue
		}
		if id, ok := s.FSM.State().DriverByToken(cmd.Token); ok {
			d, _ := s.FSM.State().Driver(id)
			if err := sameNamespace("submission", d.Namespace, cmd.Namespace); err != nil {
				w.deliver(i, fsm.SubmitOutcome{Err: err})
				continue
			}
			w.deliver(i, fsm.SubmitOutcome{SubmitResult: fsm.SubmitResult{DriverID: id, Existing: true}})
			continue
		}
		err := s.admitDriver(cmd.Client)
		if err == nil {
			err = s.queue.admitQueued(s.FSM.State(), cmd.Namespace)
		}
		if err != nil {
			w.deliver(i, fsm.SubmitOutcome{Err: err})
			continue
		}
		at := time.Now()
		cmd.ID, cmd.Time = t.IDs.Driver(at), at.UnixMilli()
		qs := &queuedSubmit{cmd: cmd, waiters: []submitWaiter{{w, i}}}
		q.queued(qs)
		q.waiting = append(q.waiting, qs)
	}
	start := len(q.waiting) > 0 && q.groups < submitGroups
	if start {
		q.groups++
	}
	q.mu.Unlock()
	if start {
		go s.commitSubmits()
	}
	<-w.done
	return w.outcomes
}

// commitSubmits commits groups of waiting submissions, one after the
// other, until none waits.
func (s *Core) commitSubmits() {
	for {
		s.queue.mu.Lock()
		n := min(len(s.queue.waiting), maxSubmitGroup)
		if n == 0 {
			s.queue.groups--
			s.queue.mu.Unlock()
			return
		}
		group := s.queue.waiting[:n:n]
		s.queue.waiting = s.queue.waiting[n:]
		if len(s.queue.waiting) == 0 {
			s.queue.waiting = nil
		}
		s.queue.mu.Unlock()
		s.commitGroup(group)
	}
}

// commitGroup commits one group and hands each submission its outcome. A
// lone submission is a SubmitDriver, the entry every version of the log
// knows; more are one SubmitDrivers. A group whose entry would exceed
// fsm.MaxCommandSize is committed in halves, so that only a submission too
// large on its own is refused.
func (s *Core) commitGroup(group []*queuedSubmit) {
	outcomes := make([]fsm.SubmitOutcome, len(group))
	var err error
	if len(group) == 1 {
		outcomes[0].SubmitResult, err = fsm.SubmitDriver.Commit(s.Apply, group[0].cmd)
	} else {
		c := &model.SubmitDrivers{Drivers: make([]model.SubmitDriver, len(group))}
		for i, q := range group {
			c.Drivers[i] = *q.cmd
		}
		var res fsm.SubmitDriversResult
		// The tables refuse no batch of two or more as a whole, so an
		// invalid command is one too large to encode.
		if res, err = fsm.SubmitDrivers.Commit(s.Apply, c); errors.Is(err, model.ErrInvalidCommand) {
			half := len(group) / 2
			s.commitGroup(group[:half])
			s.commitGroup(group[half:])
			return
		}
		copy(outcomes, res.Outcomes)
	}
	if err != nil {
		for i := range outcomes {
			outcomes[i].Err = err
		}
	}
	// The tables hold the committed tokens by now, so a copy that comes
	// after a submission leaves the queue finds its driver there; one
	// that came before is among its waiters, which cannot grow once the
	// lock is held.
	s.queue.mu.Lock()
	defer s.queue.mu.Unlock()
	for i, q := range group {
		s.queue.done(q)
		for j, w := range q.waiters {
			o := outcomes[i]
			// A later waiter from the call that queued it gave its token
			// again, which yields the first's driver as Existing, as in
			// one SubmitDrivers entry.
			if j > 0 && w.w == q.waiters[0].w && o.Err == nil {
				o.Existing = true
			}
			w.w.deliver(w.i, o)
		}
	}
}

// sameNamespace refuses, with model.ErrTokenInUse, a submission or app
// registration (what) into namespace asked whose token already names a
// row of namespace has: a retry key yields only its own namespace's row,
// so that no namespace learns, or takes, another's.
func sameNamespace(what, has, asked string) error {
	if model.NamespaceOf(has) == model.NamespaceOf(asked) {
		return nil
	}
	return api.Errorf(model.ErrTokenInUse, "the %s's token names a row of another namespace: nothing done; use a token of your own", what)
}
