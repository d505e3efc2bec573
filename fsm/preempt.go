package fsm

import (
	"fmt"
	"slices"
	"strings"

	"github.com/drover-project/drover/model"
)

// Preemptions counts, for one namespace, the driver attempts and
// executors preempted from it (Suffered) and for it (Caused), from the
// notices the log holds: a unit counts once, when its notice applies.
type Preemptions struct {
	Suffered int64 `json:"suffered"`
	Caused   int64 `json:"caused"`
}

// preemption is the FSM applying preemptions: the apply function of
// PreemptAttempts and the ends of preempted units, which reports reach
// too. A type of its own keeps FSM's method set to what every command
// shares.
type preemption struct{ *FSM }

// apply applies both forms of a PreemptAttempts (see
// model.PreemptAttempts): the command is checked whole first, then each
// item applies on its own or is skipped.
func (f preemption) apply(c *model.PreemptAttempts) error {
	if err := checkPreemptAttempts(c); err != nil {
		return err
	}
	for _, it := range c.Items {
		switch {
		case c.End && it.Executor():
			if e, ok := f.t.Executors[model.ExecutorKey(it.AppID, it.ExecutorID)]; ok && !e.State.Terminal() && e.PreemptedBy != "" {
				f.endExecutor(e, nil, c.Time)
			}
		case c.End:
			if d, ok := f.t.Drivers[it.DriverID]; ok && d.Attempt == it.Attempt && preempted(d) {
				f.endDriver(f.ownDriver(d), nil, c.Time)
			}
		case it.Executor():
			f.noticeExecutor(it, c.Deadline)
		default:
			f.noticeAttempt(it, c.Deadline, c.Time)
		}
	}
	return nil
}

// checkPreemptAttempts refuses a PreemptAttempts that no state could make
// right: no item, an item naming neither or both kinds of unit, a notice
// without its By namespace or with a deadline before its time.
func checkPreemptAttempts(c *model.PreemptAttempts) error {
	if len(c.Items) == 0 {
		return fmt.Errorf("%w: PreemptAttempts holds no item", model.ErrInvalidCommand)
	}
	if !c.End && c.Deadline < c.Time {
		return fmt.Errorf("%w: preemption deadline %d is before its time %d", model.ErrInvalidCommand, c.Deadline, c.Time)
	}
	for _, it := range c.Items {
		if (it.DriverID == "") == (it.AppID == "") {
			return fmt.Errorf("%w: a preemption names a driver attempt or an executor, got %+v", model.ErrInvalidCommand, it)
		}
		if !c.End && model.CheckNamespace(it.By) != nil {
			return fmt.Errorf("%w: a preemption notice names the namespace it is for, got %q", model.ErrInvalidCommand, it.By)
		}
	}
	return nil
}

// preempted says whether d's current attempt is placed, has not ended and
// is under a preemption notice.
func preempted(d *model.Driver) bool {
	if d.State.Terminal() || d.WorkerID == "" {
		return false
	}
	rec := d.CurrentAttempt()
	return rec != nil && !rec.State.Terminal() && rec.PreemptedBy != ""
}

// noticeAttempt marks the current attempt of a placed driver as preempted
// by it.By until deadline; an attempt already noticed, ended, superseded,
// or of it.By's own namespace is left alone.
func (f preemption) noticeAttempt(it model.Preemption, deadline, now int64) {
	d, ok := f.t.Drivers[it.DriverID]
	if !ok || d.State.Terminal() || d.WorkerID == "" || d.Attempt != it.Attempt || model.NamespaceOf(d.Namespace) == it.By {
		return
	}
	if rec := d.CurrentAttempt(); rec == nil || rec.State.Terminal() || rec.PreemptedBy != "" {
		return
	}
	d = f.ownDriver(d)
	rec := d.CurrentAttempt()
	rec.PreemptedBy, rec.PreemptDeadline = f.intern.str(it.By), deadline
	d.UpdatedAt = now
	f.changed(model.EventDriver, d.ID)
	f.t.units(d.WorkerID).touch()
	f.t.countPreemption(d.Namespace, it.By)
}

// noticeExecutor is noticeAttempt for a live executor.
func (f preemption) noticeExecutor(it model.Preemption, deadline int64) {
	e, ok := f.t.Executors[model.ExecutorKey(it.AppID, it.ExecutorID)]
	if !ok || e.State.Terminal() || e.PreemptedBy != "" {
		return
	}
	ns := ""
	if a, ok := f.t.Apps[e.AppID]; ok {
		ns = a.Namespace
	}
	if model.NamespaceOf(ns) == it.By {
		return
	}
	e.PreemptedBy, e.PreemptDeadline = f.intern.str(it.By), deadline
	f.changed(model.EventExecutor, model.ExecutorKey(e.AppID, e.ID))
	f.t.units(e.WorkerID).touch()
	f.t.countPreemption(ns, it.By)
}

// countPreemption counts one unit of namespace victim preempted for by.
func (t *tables) countPreemption(victim, by string) {
	if t.Preemptions == nil {
		t.Preemptions = map[string]Preemptions{}
	}
	v, b := t.Preemptions[model.NamespaceOf(victim)], t.Preemptions[by]
	v.Suffered++
	t.Preemptions[model.NamespaceOf(victim)] = v
	b.Caused++
	t.Preemptions[by] = b
}

// endDriver ends d's current attempt, under notice, as preempted:
// the attempt's record ends KILLED with the preemption's reason and exit
// (nil when the leader ended it at its deadline); a supervised driver is
// relaunched, which counts no failed run against its restart bounds
// (those count the runs its runner reports failed), and an unsupervised
// one ends KILLED. d is owned by the entry.
func (f preemption) endDriver(d *model.Driver, exit *int, now int64) {
	rec := d.CurrentAttempt()
	reason := model.PreemptedReason(rec.PreemptedBy)
	rec.State, rec.EndedAt, rec.Reason, rec.ExitCode = model.DriverKilled, now, reason, model.CloneExitCode(exit)
	if d.Supervise {
		f.relaunch(d, now, reason)
		return
	}
	f.release(d)
	d.State, d.Message, d.ExitCode, d.UpdatedAt = model.DriverKilled, reason, model.CloneExitCode(exit), now
	f.changed(model.EventDriver, d.ID)
	f.driverAttemptEnded(d, d.Attempt, now)
}

// endExecutor ends executor e, under notice, KILLED with the
// preemption's reason. Its app counts no retry, and the scheduler
// replaces it by the app's rules, as after any KILLED executor.
func (f preemption) endExecutor(e *model.Executor, exit *int, now int64) {
	f.FSM.endExecutor(e, model.ExecKilled, exit, model.PreemptedReason(e.PreemptedBy), now)
}

// Preemptions returns namespace name's counts of preemptions suffered and
// caused, zero for a namespace with none.
func (s *State) Preemptions(name string) Preemptions {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.t.Preemptions[model.NamespaceOf(name)]
}

// Preempted says whether any notice was ever given: until one is, no
// unit can be under notice, and a leader with no namespace that may
// preempt has nothing to look at.
func (s *State) Preempted() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.t.Preemptions) > 0
}

// Unit is one running driver attempt or live executor as the preemption
// round weighs it: what it holds, whose it is, its priority (an
// executor's is its app's driver's, its namespace's default without one)
// and since when it runs (its start, or its placement before it started;
// Unix ms), with its notice if it is under one.
type Unit struct {
	// Ref names the unit: DriverID and Attempt, or AppID and
	// ExecutorID; By is empty.
	Ref       model.Preemption
	Namespace string
	Priority  int
	Since     int64
	Cores     int
	MemoryMB  int64
	Resources model.ResourceAmounts
	// PreemptedBy and Deadline are its notice's, empty and 0 without.
	PreemptedBy string
	Deadline    int64
}

// Units returns every placed, unfinished driver attempt and live
// executor, ordered by worker then ID: the preemption round's candidates,
// and the notices it must end at their deadlines.
func (s *State) Units() []Unit {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []Unit
	nss := map[string]*model.Namespace{}
	priority := func(ns string, p *int) int {
		n, ok := nss[ns]
		if !ok {
			n = s.t.namespace(ns)
			nss[ns] = n
		}
		if n == nil {
			return model.DefaultPriority
		}
		return n.Priority(p)
	}
	for _, w := range sortedKeys(s.t.on) {
		u := s.t.on[w]
		for _, id := range sortedKeys(u.drivers) {
			d := s.t.Drivers[id]
			rec := d.CurrentAttempt()
			if rec == nil {
				continue
			}
			out = append(out, Unit{
				Ref: model.Preemption{DriverID: id, Attempt: d.Attempt}, Namespace: model.NamespaceOf(d.Namespace),
				Priority: priority(d.Namespace, d.Priority), Since: cmpOr(rec.StartedAt, rec.PlacedAt),
				Cores: d.Cores, MemoryMB: d.MemoryMB, Resources: rec.Resources.Counts(),
				PreemptedBy: rec.PreemptedBy, Deadline: rec.PreemptDeadline,
			})
		}
		for _, k := range sortedKeys(u.executors) {
			e := s.t.Executors[k]
			a := s.t.Apps[e.AppID]
			var ns string
			var p *int
			if a != nil {
				ns = a.Namespace
				if d, ok := s.t.Drivers[a.DriverID]; ok {
					p = d.Priority
				}
			}
			out = append(out, Unit{
				Ref: model.Preemption{AppID: e.AppID, ExecutorID: e.ID}, Namespace: model.NamespaceOf(ns),
				Priority: priority(ns, p), Since: cmpOr(e.StartedAt, e.LaunchedAt),
				Cores: e.Cores, MemoryMB: e.MemoryMB, Resources: e.Resources.Counts(),
				PreemptedBy: e.PreemptedBy, Deadline: e.PreemptDeadline,
			})
		}
	}
	return out
}

// cmpOr returns a unless it is 0, then b.
func cmpOr(a, b int64) int64 {
	if a != 0 {
		return a
	}
	return b
}

// Notices returns what a worker must know of the preemptions of the
// units it runs: each one under notice, with its deadline, ordered by
// driver or app ID.
func (s *State) Notices(workerID string) []Notice {
	s.mu.RLock()
	defer s.mu.RUnlock()
	u, ok := s.t.on[workerID]
	if !ok {
		return nil
	}
	var out []Notice
	for id := range u.drivers {
		d := s.t.Drivers[id]
		if rec := d.CurrentAttempt(); rec != nil && rec.PreemptedBy != "" {
			out = append(out, Notice{Preemption: model.Preemption{DriverID: id, Attempt: d.Attempt, By: rec.PreemptedBy}, Deadline: rec.PreemptDeadline})
		}
	}
	for k := range u.executors {
		if e := s.t.Executors[k]; e.PreemptedBy != "" {
			out = append(out, Notice{Preemption: model.Preemption{AppID: e.AppID, ExecutorID: e.ID, By: e.PreemptedBy}, Deadline: e.PreemptDeadline})
		}
	}
	slices.SortFunc(out, func(a, b Notice) int {
		if c := strings.Compare(a.DriverID+a.AppID, b.DriverID+b.AppID); c != 0 {
			return c
		}
		return a.ExecutorID - b.ExecutorID
	})
	return out
}

// Notice is one unit under a preemption notice, with its deadline (Unix
// ms, the leader's clock).
type Notice struct {
	model.Preemption
	Deadline int64
}
