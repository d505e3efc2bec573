package fsm

import (
	"fmt"
	"maps"
	"slices"

	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/model/ids"
)

// One apply function per command type. Each validates first and changes the
// tables only when the whole command is acceptable, so a refused command
// leaves no trace.

func (f *FSM) applyRegisterWorker(c *model.RegisterWorker) error {
	if c.ID == "" || c.HTTPAddr == "" || c.Cores <= 0 || c.MemoryMB <= 0 {
		return fmt.Errorf("%w: worker needs an ID, an address, and positive cores and memory", model.ErrInvalidCommand)
	}
	if err := model.CheckResourceOffer(c.Resources); err != nil {
		return fmt.Errorf("%w: worker resources: %v", model.ErrInvalidCommand, err)
	}
	w, ok := f.t.Workers[c.ID]
	if !ok {
		w = &model.Worker{ID: c.ID, RegisteredAt: c.Time}
		f.t.Workers[c.ID] = w
	}
	w.HTTPAddr = c.HTTPAddr
	w.Instance = c.Instance
	w.Cores = c.Cores
	w.MemoryMB = c.MemoryMB
	// Addresses held beyond a smaller offer stay held until their units
	// end; they are simply never free again.
	w.Resources = c.Resources.Clone()
	w.State = model.WorkerAlive
	w.Message = ""
	w.UpdatedAt = c.Time
	f.changed(model.EventWorker, w.ID)
	return nil
}

// submission is the apply functions of SubmitDriver and SubmitDrivers, and
// the admission and row making that FireSchedule shares with them: one
// path for every driver a client or a schedule submits.
type submission struct{ *FSM }

// one applies SubmitDriver c: a known token gives its driver back
// (Existing), else c is admitted and queued.
func (f submission) one(c *model.SubmitDriver) (SubmitResult, error) {
	if id, ok := f.t.Tokens[c.Token]; ok && c.Token != "" {
		if d := f.t.Drivers[id]; d != nil && model.NamespaceOf(d.Namespace) != model.NamespaceOf(c.Namespace) {
			return SubmitResult{}, fmt.Errorf("%w: the submission's token names a driver of namespace %s", model.ErrTokenInUse, model.NamespaceOf(d.Namespace))
		}
		return SubmitResult{DriverID: id, Existing: true}, nil
	}
	seq, err := f.admit(c)
	if err != nil {
		return SubmitResult{}, err
	}
	d := f.add(c, seq)
	return SubmitResult{DriverID: d.ID}, nil
}

// admit checks submission c (its ID, its spec, and its namespace's
// bounds, admitSubmission) and books it for the rest of the entry; it
// returns the sequence number of c's ID for add.
func (f submission) admit(c *model.SubmitDriver) (int, error) {
	seq, err := idSeq(ids.Driver, c.ID)
	if err != nil {
		return 0, err
	}
	if err := c.DriverSpec.Validate(); err != nil {
		return 0, fmt.Errorf("%w: %v", model.ErrInvalidCommand, err)
	}
	if _, ok := f.t.Drivers[c.ID]; ok {
		return 0, fmt.Errorf("%w: driver %s", model.ErrDuplicateID, c.ID)
	}
	if err := f.t.admitSubmission(c.Namespace, c.Priority); err != nil {
		return 0, err
	}
	return seq, nil
}

// add makes the row of submission c, which admit admitted with ID
// sequence number seq, and queues it.
func (f submission) add(c *model.SubmitDriver, seq int) *model.Driver {
	d := &model.Driver{
		ID:     c.ID,
		Name:   f.intern.str(c.Name),
		Token:  c.Token,
		Client: f.intern.str(c.Client),
		DriverSpec: model.DriverSpec{
			Argv:            f.intern.argv(c.Argv),
			Env:             f.intern.env(c.Env),
			Cores:           c.Cores,
			MemoryMB:        c.MemoryMB,
			Supervise:       c.Supervise,
			Artifacts:       slices.Clone(c.Artifacts),
			Resources:       maps.Clone(c.Resources),
			MaxRestarts:     c.MaxRestarts,
			RestartWindowMS: c.RestartWindowMS,
			RescheduleAfter: c.RescheduleAfter,
			User:            f.intern.str(c.User),
			Namespace:       f.intern.str(c.Namespace),
			Priority:        c.Priority,
			AppCores:        c.AppCores,
		},
		State:       model.DriverSubmitted,
		Attempt:     1,
		SubmittedAt: c.Time,
		UpdatedAt:   c.Time,
		Attempts:    []model.Attempt{},
	}
	f.t.Drivers[d.ID] = d
	f.owned[d] = struct{}{}
	f.changed(model.EventDriver, d.ID)
	f.t.WaitingDrivers = append(f.t.WaitingDrivers, d.ID)
	if c.Token != "" {
		f.t.Tokens[c.Token] = d.ID
	}
	if seq >= f.t.NextDriverSeq {
		f.t.NextDriverSeq = seq + 1
	}
	return d
}

// batch applies each submission of SubmitDrivers c as one would apply it
// alone, in order, so that a token twice in the batch makes one driver and
// a refused submission is skipped without a trace while the others apply.
func (f submission) batch(c *model.SubmitDrivers) (SubmitDriversResult, error) {
	if len(c.Drivers) == 0 {
		return SubmitDriversResult{}, fmt.Errorf("%w: SubmitDrivers holds no submission", model.ErrInvalidCommand)
	}
	res := SubmitDriversResult{Outcomes: make([]SubmitOutcome, len(c.Drivers))}
	for i := range c.Drivers {
		res.Outcomes[i].SubmitResult, res.Outcomes[i].Err = f.one(&c.Drivers[i])
	}
	return res, nil
}

func (f *FSM) applyPlaceDrivers(c *model.PlaceDrivers) (PlaceResult, error) {
	var res PlaceResult
	placed := map[string]bool{}
	for _, p := range c.Placements {
		d, ok := f.t.Drivers[p.DriverID]
		if !ok || placed[p.DriverID] || d.WorkerID != "" || d.State.Terminal() || d.Attempt != p.Attempt {
			continue
		}
		w, ok := f.t.Workers[p.WorkerID]
		if !ok || w.State != model.WorkerAlive || w.CoresFree() < d.Cores || w.MemoryFreeMB() < d.MemoryMB {
			continue
		}
		if model.CheckHolding(d.Resources, p.Resources, w.ResourcesFree()) != nil {
			continue
		}
		if !f.t.withinQuota(d.Namespace, d.Cores, d.MemoryMB, d.Resources, 1) {
			continue
		}
		placed[d.ID] = true
		d = f.ownDriver(d)
		d.WorkerID = w.ID
		f.t.units(w.ID).addDriver(d.ID)
		d.UpdatedAt = c.Time
		d.Message = ""
		d.Attempts = append(d.Attempts, model.Attempt{
			Attempt:   d.Attempt,
			WorkerID:  w.ID,
			State:     model.DriverSubmitted,
			PlacedAt:  c.Time,
			Resources: p.Resources.Clone(),
		})
		w.CoresUsed += d.Cores
		w.MemoryUsedMB += d.MemoryMB
		w.ResourcesUsed.Hold(p.Resources)
		f.changed(model.EventDriver, d.ID)
		f.changed(model.EventWorker, w.ID)
		res.Applied = append(res.Applied, p)
	}
	if len(placed) > 0 {
		f.t.dropWaiting(placed)
	}
	return res, nil
}

// dropWaiting removes the given drivers from waitingDrivers, keeping order.
func (t *tables) dropWaiting(ids map[string]bool) {
	kept := t.WaitingDrivers[:0]
	for _, id := range t.WaitingDrivers {
		if !ids[id] {
			kept = append(kept, id)
		}
	}
	t.WaitingDrivers = kept
}

// release returns a placed driver's resources, and the addresses its
// current attempt holds, to its worker and unplaces it.
func (f *FSM) release(d *model.Driver) {
	// Every caller sets the message of the attempt's end.
	d.Staging = false
	if d.WorkerID == "" {
		return
	}
	if w, ok := f.t.Workers[d.WorkerID]; ok {
		w.CoresUsed -= d.Cores
		w.MemoryUsedMB -= d.MemoryMB
		if rec := d.CurrentAttempt(); rec != nil {
			w.ResourcesUsed.Release(rec.Resources)
		}
		f.changed(model.EventWorker, w.ID)
	}
	f.t.units(d.WorkerID).removeDriver(d.ID)
}

func (f *FSM) applyReportAttempts(c *model.ReportAttempts) error {
	for _, r := range c.Reports {
		d, ok := f.t.Drivers[r.DriverID]
		if !ok {
			continue
		}
		// What the rows keep of the report: a state's constant rather
		// than a decoded copy of its name, and reasons ("exit status 1")
		// shared.
		r.State, r.Reason = driverState(r.State), f.intern.str(r.Reason)
		rec := d.AttemptRecord(r.Attempt)
		if rec == nil || rec.WorkerID != c.WorkerID {
			continue
		}
		// A stale or late report changes the attempt's history only.
		stale := r.Attempt != d.Attempt || d.WorkerID != c.WorkerID || d.State.Terminal()
		if r.Staging {
			// Only the current attempt's staging speaks for the driver;
			// the history keeps no such line.
			if !stale {
				f.applyStaging(d, r, c.Time)
			}
			continue
		}
		if stale && rec.State.Terminal() {
			// Nor that: an ended record stays as it ended.
			continue
		}
		d = f.ownDriver(d)
		rec = d.AttemptRecord(r.Attempt)
		if updateRecord(rec, r, model.FailuresKept(d.MaxRestarts, d.RescheduleAfter), c.Time) {
			f.changed(model.EventDriver, d.ID)
		}
		if stale {
			continue
		}
		f.applyCurrentReport(d, r, c.Time)
	}
	f.applyExecutorReports(c.WorkerID, c.Executors, c.Time)
	return nil
}

// applyReportBatch applies each worker's reports in order. A
// ReportAttempts refuses nothing, so neither does a batch of them: each
// changes what it would have changed as an entry of its own.
func (f *FSM) applyReportBatch(c *model.ReportBatch) error {
	for i := range c.Reports {
		f.applyReportAttempts(&c.Reports[i])
	}
	return nil
}

// updateRecord applies a report to an attempt's history record, keeping
// at most kept of its failed runs, and says whether it changed it.
func updateRecord(rec *model.Attempt, r model.AttemptReport, kept int, now int64) bool {
	if rec.State.Terminal() {
		return false
	}
	before := *rec
	failures := len(rec.Failures)
	if r.Runs > rec.Runs {
		rec.Runs = r.Runs
	}
	// Each report carries all the failures its runner kept, so a later
	// one has more; one from before it, delivered late, has fewer.
	if fs := model.KeepFailures(r.Failures, kept); len(fs) > len(rec.Failures) {
		rec.Failures = fs
	}
	switch r.State {
	case model.DriverRunning:
		if rec.StartedAt == 0 {
			rec.StartedAt = now
		}
		rec.State = model.DriverRunning
	case model.DriverFinished, model.DriverFailed, model.DriverKilled, model.DriverError:
		rec.State = r.State
		rec.EndedAt = now
		rec.ExitCode = model.CloneExitCode(r.ExitCode)
		// A record not ended has a reason only from a KillDriver with
		// AttemptReason, the master's word on who ended it, which the
		// worker's report does not replace. Before that field no such
		// record existed, so entries of older logs apply as they did.
		if r.Reason != "" && rec.Reason == "" {
			rec.Reason = r.Reason
		}
		rec.Rescheduled = r.State == model.DriverFailed && r.Reschedule
	}
	return len(rec.Failures) != failures || rec.Runs != before.Runs || rec.State != before.State || rec.StartedAt != before.StartedAt ||
		rec.EndedAt != before.EndedAt || rec.Reason != before.Reason || rec.ExitCode != before.ExitCode
}

// applyStaging makes what the current attempt's staging says (a Staging
// report) the driver's message, until its program starts. A report that
// says what the row says already, or comes once the program started,
// changes nothing, not even UpdatedAt, so that no event follows it.
func (f *FSM) applyStaging(d *model.Driver, r model.AttemptReport, now int64) {
	if rec := d.CurrentAttempt(); rec == nil || rec.State != model.DriverSubmitted || (d.Staging && d.Message == r.Reason) {
		return
	}
	d = f.ownDriver(d)
	d.Message, d.Staging, d.UpdatedAt = r.Reason, true, now
	f.changed(model.EventDriver, d.ID)
}

func (f *FSM) applyCurrentReport(d *model.Driver, r model.AttemptReport, now int64) {
	d.UpdatedAt = now
	f.changed(model.EventDriver, d.ID)
	if rec := d.CurrentAttempt(); rec.PreemptedBy != "" && r.State.Terminal() && r.State != model.DriverFinished {
		// The program ended after its preemption notice, whether by
		// the SIGTERM the notice sent or on its own: it ends preempted,
		// not FAILED. One that finished its work keeps FINISHED.
		rec.Rescheduled = false
		preemption{f}.endDriver(d, r.ExitCode, now)
		return
	}
	switch r.State {
	case model.DriverRunning:
		if d.Staging {
			// The program started: its staging has nothing more to say.
			// Rows of older entries never have Staging set, so their
			// RUNNING reports keep their meaning.
			d.Message, d.Staging = "", false
		}
		d.State = model.DriverRunning
		f.driverRestarted(d, r.Runs, now)
	case model.DriverFailed:
		if r.Reschedule && d.Supervise {
			// The runner gave up on this worker, not on the driver.
			f.relaunch(d, now, "rescheduled away from worker "+d.WorkerID+": "+r.Reason)
			return
		}
		f.endDriver(d, r, now)
	case model.DriverFinished, model.DriverError:
		f.endDriver(d, r, now)
	case model.DriverKilled:
		// The worker killed an attempt nobody asked to kill (it is shutting
		// down): a supervised driver goes on elsewhere.
		if d.Supervise {
			f.relaunch(d, now, "attempt killed on worker "+d.WorkerID)
			return
		}
		f.endDriver(d, r, now)
	}
}

// endDriver ends a driver in the state of its current attempt's final
// report.
func (f *FSM) endDriver(d *model.Driver, r model.AttemptReport, now int64) {
	d.State = r.State
	d.ExitCode = model.CloneExitCode(r.ExitCode)
	d.Message = r.Reason
	f.release(d)
	f.driverAttemptEnded(d, d.Attempt, now)
}

// relaunch moves a supervised driver to its next attempt and back to the end
// of waitingDrivers (Spark's Master.relaunchDriver).
func (f *FSM) relaunch(d *model.Driver, now int64, reason string) {
	f.release(d)
	if rec := d.CurrentAttempt(); rec != nil && !rec.State.Terminal() {
		rec.State = model.DriverError
		rec.EndedAt = now
		rec.Reason = reason
	}
	d.Attempt++
	d.WorkerID = ""
	d.State = model.DriverRelaunching
	d.Message = reason
	d.UpdatedAt = now
	f.changed(model.EventDriver, d.ID)
	f.t.WaitingDrivers = append(f.t.WaitingDrivers, d.ID)
	f.driverAttemptEnded(d, d.Attempt-1, now)
}

func (f *FSM) applyKillDriver(c *model.KillDriver) error {
	d, ok := f.t.Drivers[c.DriverID]
	if !ok {
		return fmt.Errorf("%w: %s", model.ErrUnknownDriver, c.DriverID)
	}
	if d.State == model.DriverKilled {
		// Kill is idempotent, so a client's retry after a timeout or a
		// failover gets the same answer as the first try.
		return nil
	}
	if d.State.Terminal() {
		return fmt.Errorf("%w: %s is %s", model.ErrDriverEnded, d.ID, d.State)
	}
	f.killDriver(d, c)
	return nil
}

// killDriver ends driver d, which has not ended, KILLED as c asks.
func (f *FSM) killDriver(d *model.Driver, c *model.KillDriver) {
	if d.WorkerID == "" {
		f.t.dropWaiting(map[string]bool{d.ID: true})
	}
	d = f.ownDriver(d)
	f.release(d)
	d.State = model.DriverKilled
	d.Message = c.Reason
	if d.Message == "" {
		d.Message = "killed on request"
	}
	if rec := d.CurrentAttempt(); c.AttemptReason && rec != nil && !rec.State.Terminal() {
		rec.Reason = d.Message
	}
	d.UpdatedAt = c.Time
	f.changed(model.EventDriver, d.ID)
	f.driverAttemptEnded(d, d.Attempt, c.Time)
}

// applyDecommissionWorker only stops new placements on the worker: its
// drivers stay placed until it reports them KILLED (so a relaunch never
// overlaps the attempt being stopped), or until it is lost.
func (f *FSM) applyDecommissionWorker(c *model.DecommissionWorker) error {
	w, ok := f.t.Workers[c.WorkerID]
	if !ok {
		return fmt.Errorf("%w: %s", model.ErrUnknownWorker, c.WorkerID)
	}
	w.State = model.WorkerDecommissioned
	w.Message = c.Reason
	if w.Message == "" {
		w.Message = "worker " + w.ID + " decommissioned"
	}
	w.UpdatedAt = c.Time
	f.changed(model.EventWorker, w.ID)
	return nil
}

// applyWorkerLost takes a worker out of scheduling (Spark's
// Master.removeWorker): supervised drivers on it get their next attempt and
// wait again; the others end ERROR, with the reason. Its executors are LOST,
// which counts no retry: the scheduler replaces them.
func (f *FSM) applyWorkerLost(c *model.WorkerLost) error {
	w, ok := f.t.Workers[c.WorkerID]
	if !ok {
		return fmt.Errorf("%w: %s", model.ErrUnknownWorker, c.WorkerID)
	}
	reason, now := c.Reason, c.Time
	if reason == "" {
		reason = "worker " + w.ID + " lost"
	}
	w.State = model.WorkerDead
	w.Message = reason
	w.UpdatedAt = now
	f.changed(model.EventWorker, w.ID)
	// Executors first: an app that ends with a driver on this worker
	// would otherwise record them KILLED rather than LOST.
	// The worker's index entry holds exactly its live executors and
	// unfinished placed drivers; taken as sorted copies, since ending them
	// changes the entry, and map order is random while relaunch order
	// decides queue order.
	u := f.t.units(w.ID)
	for _, k := range sortedKeys(u.executors) {
		f.endExecutor(f.t.Executors[k], model.ExecLost, nil, reason, now)
	}
	ids := sortedKeys(u.drivers)
	for _, id := range ids {
		d := f.ownDriver(f.t.Drivers[id])
		if d.Supervise {
			f.relaunch(d, now, reason)
			continue
		}
		f.release(d)
		if rec := d.CurrentAttempt(); rec != nil && !rec.State.Terminal() {
			rec.State = model.DriverError
			rec.EndedAt = now
			rec.Reason = reason
		}
		d.State = model.DriverError
		d.Message = reason
		d.UpdatedAt = now
		f.changed(model.EventDriver, d.ID)
		f.driverAttemptEnded(d, d.Attempt, now)
	}
	return nil
}
