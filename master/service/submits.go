package service

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/drover-project/drover/fsm"
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

// submitQueue holds the submissions waiting for an entry. The zero value
// is empty.
type submitQueue struct {
	mu      sync.Mutex
	waiting []*queuedSubmit
	// groups is the number of goroutines committing groups, at most
	// submitGroups.
	groups int
}

// queuedSubmit is one submission waiting in the queue, and where its
// outcome goes.
type queuedSubmit struct {
	cmd  *model.SubmitDriver
	done chan fsm.SubmitOutcome
}

// submit commits cmd together with whatever other submissions wait with it
// and returns its own outcome: the SubmitResult, Apply's refusal of this
// submission alone, or an error wrapping api.ErrUnavailable when Raft did
// not commit the entry (the outcome is then unknown, and a client retries
// with the same token).
func (s *Core) submit(cmd *model.SubmitDriver) (fsm.SubmitResult, error) {
	q := &queuedSubmit{cmd: cmd, done: make(chan fsm.SubmitOutcome, 1)}
	s.queue.mu.Lock()
	s.queue.waiting = append(s.queue.waiting, q)
	start := s.queue.groups < submitGroups
	if start {
		s.queue.groups++
	}
	s.queue.mu.Unlock()
	if start {
		go s.commitSubmits()
	}
	o := <-q.done
	return o.SubmitResult, o.Err
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
	var t model.CommandType
	var payload any
	if len(group) == 1 {
		t, payload = model.CmdSubmitDriver, group[0].cmd
	} else {
		c := &model.SubmitDrivers{Drivers: make([]model.SubmitDriver, len(group))}
		for i, q := range group {
			c.Drivers[i] = *q.cmd
		}
		t, payload = model.CmdSubmitDrivers, c
	}
	data, err := fsm.Encode(t, payload)
	if errors.Is(err, model.ErrInvalidCommand) && len(group) > 1 {
		half := len(group) / 2
		s.commitGroup(group[:half])
		s.commitGroup(group[half:])
		return
	}
	p := pending{err: err}
	if err == nil {
		p = pending{f: s.Raft.Apply(data, s.cfg.ApplyTimeout), start: time.Now()}
	}
	res, err := p.wait(s)
	outcomes := make([]fsm.SubmitOutcome, len(group))
	switch r := res.(type) {
	case fsm.SubmitResult:
		outcomes[0].SubmitResult = r
	case fsm.SubmitDriversResult:
		copy(outcomes, r.Outcomes)
	default:
		if err == nil {
			err = fmt.Errorf("%w: %s answered %T", model.ErrInvalidCommand, t, res)
		}
		for i := range outcomes {
			outcomes[i].Err = err
		}
	}
	for i, q := range group {
		q.done <- outcomes[i]
	}
}
