package fsm

import (
	"fmt"
	"slices"
	"time"

	"github.com/drover-project/drover/model"
)

// Schedules: their table's apply functions, and the fire, which accounts
// a slot and submits its run in one entry (model.FireSchedule). Schedule
// rows are shared with snapshots and readers: every change is made to a
// copy (Schedule.Clone) that replaces the row.

// FireOutcome is what a FireSchedule did with its slot.
type FireOutcome string

// Fire outcomes.
const (
	// FireStarted: the run's driver was submitted.
	FireStarted FireOutcome = "fired"
	// FireSkipped: forbid skipped the slot, or the template's submission
	// was refused; FireResult.Reason says which.
	FireSkipped FireOutcome = "skipped"
	// FireMissed: the slot was past the starting deadline.
	FireMissed FireOutcome = "missed"
)

// FireResult is what Apply returns for a FireSchedule it did not refuse:
// the outcome, the run's driver when it started, why it was skipped, and
// the runs that replace killed.
type FireResult struct {
	Outcome  FireOutcome `json:"outcome"`
	DriverID string      `json:"driver_id,omitempty"`
	Reason   string      `json:"reason,omitempty"`
	Killed   []string    `json:"killed,omitempty"`
}

// createSchedule applies c as the entry at index.
func (t *tables) createSchedule(c *model.CreateSchedule, index uint64) error {
	in := &c.Schedule
	// The settings only: a new schedule has no progress.
	s := &model.Schedule{Name: in.Name, Cron: in.Cron, TimeZone: in.TimeZone, Concurrency: in.Concurrency,
		StartingDeadlineMS: in.StartingDeadlineMS, History: in.History, Suspended: in.Suspended, Template: in.Template}
	s.Template.DriverSpec = in.Template.DriverSpec.Clone()
	if err := model.CheckSchedule(s); err != nil {
		return fmt.Errorf("%w: %v", model.ErrInvalidCommand, err)
	}
	if _, ok := t.Schedules[s.Name]; ok {
		return fmt.Errorf("%w: %s", model.ErrScheduleExists, s.Name)
	}
	if t.namespace(s.Template.Namespace) == nil {
		return fmt.Errorf("%w: %s", model.ErrUnknownNamespace, s.Template.Namespace)
	}
	if len(t.Schedules) >= model.MaxSchedules {
		return fmt.Errorf("%w: the cluster has %d schedules, at most %d", model.ErrInvalidCommand, len(t.Schedules), model.MaxSchedules)
	}
	s.CreatedAt, s.ModifyIndex = c.Time, index
	if t.Schedules == nil {
		t.Schedules = map[string]*model.Schedule{}
	}
	t.Schedules[s.Name] = s
	return nil
}

// scheduleChanged records schedule name's row as changed by the entry
// being applied unless err refused it, and returns err.
func scheduleChanged(f *FSM, name string, err error) error {
	if err == nil {
		f.changed(model.EventSchedule, name)
	}
	return err
}

// schedule returns schedule name's row, or ErrUnknownSchedule.
func (t *tables) schedule(name string) (*model.Schedule, error) {
	s, ok := t.Schedules[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s", model.ErrUnknownSchedule, name)
	}
	return s, nil
}

func (t *tables) deleteSchedule(c *model.DeleteSchedule) error {
	if _, err := t.schedule(c.Name); err != nil {
		return err
	}
	delete(t.Schedules, c.Name)
	return nil
}

// suspendSchedule applies c as the entry at index.
func (t *tables) suspendSchedule(c *model.SuspendSchedule, index uint64) error {
	s, err := t.schedule(c.Name)
	if err != nil {
		return err
	}
	s = s.Clone()
	s.Suspended, s.ModifyIndex = c.Suspended, index
	t.Schedules[s.Name] = s
	return nil
}

// liveRuns returns the drivers of s's runs that have not ended, oldest
// first; a run whose driver was pruned has ended.
func (t *tables) liveRuns(s *model.Schedule) []*model.Driver {
	var live []*model.Driver
	for _, r := range s.Runs {
		if d := t.Drivers[r.DriverID]; d != nil && !d.State.Terminal() {
			live = append(live, d)
		}
	}
	return live
}

// firing is FireSchedule's apply function, a type of its own (as
// preemption is) so that the FSM's methods stay the dispatch's.
type firing struct{ *FSM }

// apply applies c (see model.FireSchedule): everything is checked, and
// the run's submission admitted, before anything changes.
func (f firing) apply(c *model.FireSchedule) (FireResult, error) {
	s, err := f.t.schedule(c.Name)
	if err != nil {
		return FireResult{}, err
	}
	switch {
	case c.Slot <= 0 || c.Missed < 0 || c.DSTSkipped < 0:
		return FireResult{}, fmt.Errorf("%w: a fire needs a positive slot and counts that are not negative", model.ErrInvalidCommand)
	case c.Manual && (c.Late || c.Missed > 0 || c.DSTSkipped > 0):
		return FireResult{}, fmt.Errorf("%w: a manual run is never late and accounts no other slot", model.ErrInvalidCommand)
	case !c.Late && c.DriverID == "":
		return FireResult{}, fmt.Errorf("%w: a fire that is not late needs its run's driver ID", model.ErrInvalidCommand)
	}
	if !c.Manual {
		since := s.Since()
		switch {
		case c.Slot <= since:
			return FireResult{}, fmt.Errorf("%w: slot %d of schedule %s is not after %d", model.ErrSlotAccounted, c.Slot, s.Name, since)
		case s.Suspended:
			return FireResult{}, fmt.Errorf("%w: %s", model.ErrScheduleSuspended, s.Name)
		case c.Missed > (c.Slot-since+999)/1000-1:
			// Slots are a second apart at least, so that many fit
			// strictly between the two.
			return FireResult{}, fmt.Errorf("%w: %d missed slots do not fit between %d and %d", model.ErrInvalidCommand, c.Missed, since, c.Slot)
		}
	}
	live := f.t.liveRuns(s)
	var res FireResult
	var run *model.SubmitDriver
	var seq int
	switch {
	case c.Late:
		res.Outcome = FireMissed
	case s.Concurrency == model.ConcurrencyForbid && len(live) > 0:
		res.Outcome, res.Reason = FireSkipped, fmt.Sprintf("run %s has not ended (concurrency forbid)", live[len(live)-1].ID)
	default:
		run = &model.SubmitDriver{}
		*run = s.Template
		// The run's row takes its argv over (interner.argv); the
		// template's stays the schedule row's, which readers hold.
		run.Argv = slices.Clone(run.Argv)
		run.ID, run.Time = c.DriverID, c.Time
		if seq, err = submission(f).admit(run); err != nil {
			if c.Manual {
				return FireResult{}, err
			}
			res.Outcome, res.Reason, run = FireSkipped, err.Error(), nil
		} else {
			res.Outcome, res.DriverID = FireStarted, run.ID
		}
	}
	if c.Manual && res.Outcome != FireStarted {
		// A manual run that forbid skips leaves no trace.
		return res, nil
	}
	s = s.Clone()
	s.ModifyIndex = f.index
	f.t.Schedules[s.Name] = s
	f.changed(model.EventSchedule, s.Name)
	if !c.Manual {
		s.LastSlot = c.Slot
		s.Missed += c.Missed
		s.DSTSkipped += c.DSTSkipped
	}
	switch res.Outcome {
	case FireMissed:
		s.Missed++
		return res, nil
	case FireSkipped:
		s.Skipped++
		s.LastSkipReason = res.Reason
		return res, nil
	}
	if s.Concurrency == model.ConcurrencyReplace {
		reason := fmt.Sprintf("replaced by schedule %s's run of slot %s", s.Name, time.UnixMilli(c.Slot).UTC().Format(time.RFC3339))
		for _, d := range live {
			f.killDriver(d, &model.KillDriver{DriverID: d.ID, Reason: reason, Time: c.Time, AttemptReason: true})
			res.Killed = append(res.Killed, d.ID)
		}
	}
	d := submission(f).add(run, seq)
	d.Schedule, d.Slot = f.intern.str(s.Name), c.Slot
	s.Runs = append(s.Runs, model.ScheduleRun{Slot: c.Slot, DriverID: d.ID, Manual: c.Manual})
	if c.Manual {
		s.ManualRuns++
	} else {
		s.Fired++
		s.LastFired = c.Slot
	}
	f.t.trimRuns(s)
	return res, nil
}

// trimRuns drops the ended runs of s, a copy the entry owns, beyond its
// History, oldest first.
func (t *tables) trimRuns(s *model.Schedule) {
	ended := 0
	for _, r := range s.Runs {
		if d := t.Drivers[r.DriverID]; d == nil || d.State.Terminal() {
			ended++
		}
	}
	drop := ended - s.History
	s.Runs = slices.DeleteFunc(s.Runs, func(r model.ScheduleRun) bool {
		if d := t.Drivers[r.DriverID]; drop > 0 && (d == nil || d.State.Terminal()) {
			drop--
			return true
		}
		return false
	})
}

// checkSchedules checks a restored snapshot's schedules: rows under
// their own names, valid settings, progress that is not negative.
func checkSchedules(t *tables) error {
	for name, s := range t.Schedules {
		if s == nil || s.Name != name {
			return fmt.Errorf("schedule row %q is inconsistent", name)
		}
		if err := model.CheckSchedule(s); err != nil {
			return fmt.Errorf("schedule %s: %v", name, err)
		}
		if s.LastSlot < 0 || s.Fired < 0 || s.Missed < 0 || s.Skipped < 0 || s.DSTSkipped < 0 || s.ManualRuns < 0 {
			return fmt.Errorf("schedule %s: negative progress", name)
		}
		for _, r := range s.Runs {
			if r.DriverID == "" {
				return fmt.Errorf("schedule %s: a run without a driver", name)
			}
		}
	}
	return nil
}

// Schedule returns schedule name's row, or false. The row is the
// table's own, which no entry changes: do not change it.
func (s *State) Schedule(name string) (*model.Schedule, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	sc, ok := s.t.Schedules[name]
	return sc, ok
}

// Schedules returns every schedule's row, by name; the table's own, as
// Schedule's are.
func (s *State) Schedules() []*model.Schedule {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*model.Schedule, 0, len(s.t.Schedules))
	for _, name := range sortedKeys(s.t.Schedules) {
		out = append(out, s.t.Schedules[name])
	}
	return out
}
