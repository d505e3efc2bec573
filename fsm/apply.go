package fsm

import (
	"fmt"
	"slices"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/ids"
	"github.com/drover-project/drover/model"
)

// One apply function per command type. Each validates first and changes the
// tables only when the whole command is acceptable, so a refused command
// leaves no trace.

func (f *FSM) applyRegisterWorker(c *model.RegisterWorker) any {
	if c.ID == "" || c.HTTPAddr == "" || c.Cores <= 0 || c.MemoryMB <= 0 {
		return fmt.Errorf("%w: worker needs an ID, an address, and positive cores and memory", model.ErrInvalidCommand)
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
	w.State = model.WorkerAlive
	w.Message = ""
	w.UpdatedAt = c.Time
	f.changed(api.EventWorker, w.ID)
	return nil
}

func (f *FSM) applySubmitDriver(c *model.SubmitDriver) any {
	if id, ok := f.t.Tokens[c.Token]; ok && c.Token != "" {
		return SubmitResult{DriverID: id, Existing: true}
	}
	seq, err := idSeq(ids.Driver, c.ID)
	if err != nil {
		return err
	}
	if err := model.ValidateProgram(c.Argv, c.Env, c.Cores, c.MemoryMB); err != nil {
		return err
	}
	if err := model.ValidateArtifacts(c.Artifacts); err != nil {
		return err
	}
	if _, ok := f.t.Drivers[c.ID]; ok {
		return fmt.Errorf("%w: driver %s", model.ErrDuplicateID, c.ID)
	}
	d := &model.Driver{
		ID:          c.ID,
		Name:        c.Name,
		Token:       c.Token,
		Argv:        append([]string(nil), c.Argv...),
		Env:         c.Env,
		Cores:       c.Cores,
		MemoryMB:    c.MemoryMB,
		Supervise:   c.Supervise,
		Artifacts:   slices.Clone(c.Artifacts),
		State:       model.DriverSubmitted,
		Attempt:     1,
		SubmittedAt: c.Time,
		UpdatedAt:   c.Time,
		Attempts:    []model.Attempt{},
	}
	f.t.Drivers[d.ID] = d
	f.changed(api.EventDriver, d.ID)
	f.t.WaitingDrivers = append(f.t.WaitingDrivers, d.ID)
	if c.Token != "" {
		f.t.Tokens[c.Token] = d.ID
	}
	if seq >= f.t.NextDriverSeq {
		f.t.NextDriverSeq = seq + 1
	}
	return SubmitResult{DriverID: d.ID}
}

func (f *FSM) applyPlaceDrivers(c *model.PlaceDrivers) any {
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
		placed[d.ID] = true
		d.WorkerID = w.ID
		f.t.units(w.ID).addDriver(d.ID)
		d.UpdatedAt = c.Time
		d.Message = ""
		d.Attempts = append(d.Attempts, model.Attempt{
			Attempt:  d.Attempt,
			WorkerID: w.ID,
			State:    model.DriverSubmitted,
			PlacedAt: c.Time,
		})
		w.CoresUsed += d.Cores
		w.MemoryUsedMB += d.MemoryMB
		f.changed(api.EventDriver, d.ID)
		f.changed(api.EventWorker, w.ID)
		res.Applied = append(res.Applied, p)
	}
	if len(placed) > 0 {
		f.dropWaiting(placed)
	}
	return res
}

// dropWaiting removes the given drivers from waitingDrivers, keeping order.
func (f *FSM) dropWaiting(ids map[string]bool) {
	kept := f.t.WaitingDrivers[:0]
	for _, id := range f.t.WaitingDrivers {
		if !ids[id] {
			kept = append(kept, id)
		}
	}
	f.t.WaitingDrivers = kept
}

// release returns a placed driver's resources to its worker and unplaces it.
func (f *FSM) release(d *model.Driver) {
	if d.WorkerID == "" {
		return
	}
	if w, ok := f.t.Workers[d.WorkerID]; ok {
		w.CoresUsed -= d.Cores
		w.MemoryUsedMB -= d.MemoryMB
		f.changed(api.EventWorker, w.ID)
	}
	f.t.units(d.WorkerID).removeDriver(d.ID)
}

func (f *FSM) applyReportAttempts(c *model.ReportAttempts) any {
	for _, r := range c.Reports {
		d, ok := f.t.Drivers[r.DriverID]
		if !ok {
			continue
		}
		rec := d.AttemptRecord(r.Attempt)
		if rec == nil || rec.WorkerID != c.WorkerID {
			continue
		}
		if updateRecord(rec, r, c.Time) {
			f.changed(api.EventDriver, d.ID)
		}
		if r.Attempt != d.Attempt || d.WorkerID != c.WorkerID || d.State.Terminal() {
			// A stale or late report: history only.
			continue
		}
		f.applyCurrentReport(d, r, c.Time)
	}
	f.applyExecutorReports(c.WorkerID, c.Executors, c.Time)
	return nil
}

// updateRecord applies a report to an attempt's history record, and says
// whether it changed it.
func updateRecord(rec *model.Attempt, r model.AttemptReport, now int64) bool {
	if rec.State.Terminal() {
		return false
	}
	before := *rec
	if r.Runs > rec.Runs {
		rec.Runs = r.Runs
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
		if r.Reason != "" {
			rec.Reason = r.Reason
		}
	}
	return *rec != before
}

func (f *FSM) applyCurrentReport(d *model.Driver, r model.AttemptReport, now int64) {
	d.UpdatedAt = now
	f.changed(api.EventDriver, d.ID)
	switch r.State {
	case model.DriverRunning:
		d.State = model.DriverRunning
		f.driverRestarted(d, r.Runs, now)
	case model.DriverFinished, model.DriverFailed, model.DriverError:
		d.State = r.State
		d.ExitCode = model.CloneExitCode(r.ExitCode)
		d.Message = r.Reason
		f.release(d)
		f.driverAttemptEnded(d, d.Attempt, now)
	case model.DriverKilled:
		// The worker killed an attempt nobody asked to kill (it is shutting
		// down): a supervised driver goes on elsewhere.
		if d.Supervise {
			f.relaunch(d, now, "attempt killed on worker "+d.WorkerID)
			return
		}
		d.State = model.DriverKilled
		d.ExitCode = model.CloneExitCode(r.ExitCode)
		d.Message = r.Reason
		f.release(d)
		f.driverAttemptEnded(d, d.Attempt, now)
	}
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
	f.changed(api.EventDriver, d.ID)
	f.t.WaitingDrivers = append(f.t.WaitingDrivers, d.ID)
	f.driverAttemptEnded(d, d.Attempt-1, now)
}

func (f *FSM) applyKillDriver(c *model.KillDriver) any {
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
	if d.WorkerID == "" {
		f.dropWaiting(map[string]bool{d.ID: true})
	}
	f.release(d)
	d.State = model.DriverKilled
	d.Message = c.Reason
	if d.Message == "" {
		d.Message = "killed on request"
	}
	d.UpdatedAt = c.Time
	f.changed(api.EventDriver, d.ID)
	f.driverAttemptEnded(d, d.Attempt, c.Time)
	return nil
}

// applyDecommissionWorker only stops new placements on the worker: its
// drivers stay placed until it reports them KILLED (so a relaunch never
// overlaps the attempt being stopped), or until it is lost.
func (f *FSM) applyDecommissionWorker(c *model.DecommissionWorker) any {
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
	f.changed(api.EventWorker, w.ID)
	return nil
}

// applyWorkerLost takes a worker out of scheduling (Spark's
// Master.removeWorker): supervised drivers on it get their next attempt and
// wait again; the others end ERROR, with the reason. Its executors are LOST,
// which counts no retry: the scheduler replaces them.
func (f *FSM) applyWorkerLost(c *model.WorkerLost) any {
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
	f.changed(api.EventWorker, w.ID)
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
		d := f.t.Drivers[id]
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
		f.changed(api.EventDriver, d.ID)
		f.driverAttemptEnded(d, d.Attempt, now)
	}
	return nil
}
