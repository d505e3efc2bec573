package service

import (
	"context"
	"slices"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/fsm/events"
	"github.com/drover-project/drover/security/auth"
)

// maxPendingEvents bounds what one event stream may fall behind, in events,
// before it is closed with events.ErrTooSlow; its reader resumes from its
// last index.
const maxPendingEvents = 16384

// Events serves V1Events. A namespace token's stream carries the rows of
// its namespaces and the workers' (eventScope).
func (s *Core) Events(_ context.Context, c auth.Caller, q EventQuery) (*EventStream, error) {
	f, err := eventFilter(q)
	if err != nil {
		return nil, err
	}
	if err := s.notFuture(q.After); err != nil {
		return nil, err
	}
	sub, first := s.FSM.Subscribe(q.After, f, maxPendingEvents)
	st := &EventStream{First: first, Sub: sub}
	if c.Token == auth.NamespaceToken {
		scope := &eventScope{c: c, state: s.FSM.State(), ns: map[string]string{}}
		st.keep, st.recheck = scope.keep, func() error { return s.recheck(c) }
		st.First = slices.DeleteFunc(st.First, func(e api.Event) bool { return !scope.keep(e) })
	}
	return st, nil
}

// eventFilter checks a query's kinds and IDs and makes its filter.
func eventFilter(q EventQuery) (events.Filter, error) {
	var f events.Filter
	for _, k := range q.Kinds {
		switch k {
		case api.EventDriver, api.EventApp, api.EventExecutor, api.EventWorker, api.EventSchedule:
		default:
			return f, api.Errorf(api.ErrInvalidRequest, "unknown event kind %q: want driver, app, executor, worker or schedule", k)
		}
		if f.Kinds == nil {
			f.Kinds = map[api.EventKind]bool{}
		}
		f.Kinds[k] = true
	}
	for _, id := range q.IDs {
		if id == "" || len(id) > 256 {
			return f, api.Errorf(api.ErrInvalidRequest, "event ID %q: want a row's ID", id)
		}
		if f.IDs == nil {
			f.IDs = map[string]bool{}
		}
		f.IDs[id] = true
	}
	return f, nil
}

// recheck refuses c once the namespace token it came with is revoked or
// expired (auth.Guard.Recheck): a request held open answers no more
// after that.
func (s *Core) recheck(c auth.Caller) error {
	if s.Guard == nil {
		return nil
	}
	return s.Guard.Recheck(c.Identity)
}

// notFuture refuses an index past this master's Raft log: no entry of the
// cluster has it yet. One past what this master applied but in its log is
// fine: a master that lags catches up, and the reader waits.
func (s *Core) notFuture(index uint64) error {
	if last := s.Raft.LastIndex(); index > last {
		return api.Errorf(api.ErrInvalidRequest, "index %d is past the last entry of master %s's log (%d)", index, s.cfg.ID, last)
	}
	return nil
}

// awaitChange holds a blocking read (r.Index set) until the row of kind
// and id has a ModifyIndex past r.Index, or the wait ends; it returns at
// once for a read that does not block. An event past r.Index means the
// row changed since (or was dropped: the read then says it is unknown).
func (s *Core) awaitChange(ctx context.Context, kind api.EventKind, id string, r Read) error {
	if r.Index == 0 {
		if r.Wait != 0 {
			return api.Errorf(api.ErrInvalidRequest, "wait needs an index")
		}
		return nil
	}
	wait := r.Wait
	switch {
	case wait == 0:
		wait = DefaultWait
	case wait < 0 || wait > MaxWait:
		return api.Errorf(api.ErrInvalidRequest, "wait %s is not between 0 and %s", r.Wait, MaxWait)
	}
	if err := s.notFuture(r.Index); err != nil {
		return err
	}
	sub, first := s.FSM.Subscribe(r.Index, events.Filter{Kinds: map[api.EventKind]bool{kind: true}, IDs: map[string]bool{id: true}}, 1<<20)
	defer sub.Close()
	if first != nil {
		// The changes past r.Index are no longer held: whether the
		// row changed is unknown, so the read answers now.
		return nil
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case <-sub.Ready():
			if bs, err := sub.Take(); err != nil || len(bs) > 0 {
				// A closed subscriber (a restore) is a change too.
				return nil
			}
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
