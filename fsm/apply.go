package fsm

import (
	"fmt"
	"strings"
)

// One apply function per command type. Each validates first and changes the
// tables only when the whole command is acceptable, so a refused command
// leaves no trace.

func (f *FSM) applyRegisterWorker(c *RegisterWorker) any {
	if c.ID == "" || c.HTTPAddr == "" || c.Cores <= 0 || c.MemoryMB <= 0 {
		return fmt.Errorf("%w: worker needs an ID, an address, and positive cores and memory", ErrInvalidCommand)
	}
	w, ok := f.t.Workers[c.ID]
	if !ok {
		w = &Worker{ID: c.ID, RegisteredAt: c.Time}
		f.t.Workers[c.ID] = w
	}
	w.HTTPAddr = c.HTTPAddr
	w.Instance = c.Instance
	w.Cores = c.Cores
	w.MemoryMB = c.MemoryMB
	w.State = WorkerAlive
	w.Message = ""
	w.UpdatedAt = c.Time
	return nil
}

func (f *FSM) applySubmitDriver(c *SubmitDriver) any {
	if id, ok := f.t.Tokens[c.Token]; ok && c.Token != "" {
		return SubmitResult{DriverID: id, Existing: true}
	}
	seq, err := idSeq("driver", c.ID)
	if err != nil {
		return err
	}
	if err := ValidateProgram(c.Argv, c.Env, c.Cores, c.MemoryMB); err != nil {
		return err
	}
	if _, ok := f.t.Drivers[c.ID]; ok {
		return fmt.Errorf("%w: driver %s", ErrDuplicateID, c.ID)
	}
	d := &Driver{
		ID:          c.ID,
		Name:        c.Name,
		Token:       c.Token,
		Argv:        append([]string(nil), c.Argv...),
		Env:         c.Env,
		Cores:       c.Cores,
		MemoryMB:    c.MemoryMB,
		Supervise:   c.Supervise,
		State:       DriverSubmitted,
		Attempt:     1,
		SubmittedAt: c.Time,
		UpdatedAt:   c.Time,
		Attempts:    []Attempt{},
	}
	f.t.Drivers[d.ID] = d
	f.t.WaitingDrivers = append(f.t.WaitingDrivers, d.ID)
	if c.Token != "" {
		f.t.Tokens[c.Token] = d.ID
	}
	if seq >= f.t.NextDriverSeq {
		f.t.NextDriverSeq = seq + 1
	}
	return SubmitResult{DriverID: d.ID}
}

// ValidateProgram checks what a driver, or each executor of an application,
// asks for: a non-empty argv whose program name is not empty, environment
// names that are valid POSIX names and not set by Drover itself, and
// positive cores and memory (MiB). The error is one line.
func ValidateProgram(argv []string, env map[string]string, cores int, memoryMB int64) error {
	switch {
	case len(argv) == 0 || argv[0] == "":
		return fmt.Errorf("%w: the program is empty", ErrInvalidCommand)
	case cores <= 0:
		return fmt.Errorf("%w: cores must be positive, got %d", ErrInvalidCommand, cores)
	case memoryMB <= 0:
		return fmt.Errorf("%w: memory must be positive, got %d MiB", ErrInvalidCommand, memoryMB)
	}
	for _, a := range argv {
		if strings.IndexByte(a, 0) >= 0 {
			return fmt.Errorf("%w: an argument contains a NUL byte", ErrInvalidCommand)
		}
	}
	for k, v := range env {
		if !validEnvName(k) {
			return fmt.Errorf("%w: environment name %q is not [A-Za-z_][A-Za-z0-9_]*", ErrInvalidCommand, k)
		}
		if reservedEnv[k] {
			return fmt.Errorf("%w: environment name %s is set by Drover itself", ErrInvalidCommand, k)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("%w: environment value of %s contains a NUL byte", ErrInvalidCommand, k)
		}
	}
	return nil
}

// reservedEnv names the variables drivers and executors get from their
// worker.
var reservedEnv = map[string]bool{
	"DROVER_DRIVER_ID": true, "DROVER_ATTEMPT": true, "DROVER_WORKER_ID": true, "DROVER_MASTERS": true,
	"DROVER_RUN": true, "DROVER_APP_ID": true, "DROVER_EXECUTOR_ID": true, "DROVER_EXECUTOR_CORES": true, "DROVER_EXECUTOR_MEMORY_MB": true,
}

func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

func (f *FSM) applyPlaceDrivers(c *PlaceDrivers) any {
	var res PlaceResult
	placed := map[string]bool{}
	for _, p := range c.Placements {
		d, ok := f.t.Drivers[p.DriverID]
		if !ok || placed[p.DriverID] || d.WorkerID != "" || d.State.Terminal() || d.Attempt != p.Attempt {
			continue
		}
		w, ok := f.t.Workers[p.WorkerID]
		if !ok || w.State != WorkerAlive || w.CoresFree() < d.Cores || w.MemoryFreeMB() < d.MemoryMB {
			continue
		}
		placed[d.ID] = true
		d.WorkerID = w.ID
		f.t.units(w.ID).addDriver(d.ID)
		d.UpdatedAt = c.Time
		d.Message = ""
		d.Attempts = append(d.Attempts, Attempt{
			Attempt:  d.Attempt,
			WorkerID: w.ID,
			State:    DriverSubmitted,
			PlacedAt: c.Time,
		})
		w.CoresUsed += d.Cores
		w.MemoryUsedMB += d.MemoryMB
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
func (f *FSM) release(d *Driver) {
	if d.WorkerID == "" {
		return
	}
	if w, ok := f.t.Workers[d.WorkerID]; ok {
		w.CoresUsed -= d.Cores
		w.MemoryUsedMB -= d.MemoryMB
	}
	f.t.units(d.WorkerID).removeDriver(d.ID)
}

func (f *FSM) applyReportAttempts(c *ReportAttempts) any {
	for _, r := range c.Reports {
		d, ok := f.t.Drivers[r.DriverID]
		if !ok {
			continue
		}
		rec := d.attemptRecord(r.Attempt)
		if rec == nil || rec.WorkerID != c.WorkerID {
			continue
		}
		updateRecord(rec, r, c.Time)
		if r.Attempt != d.Attempt || d.WorkerID != c.WorkerID || d.State.Terminal() {
			// A stale or late report: history only.
			continue
		}
		f.applyCurrentReport(d, r, c.Time)
	}
	f.applyExecutorReports(c.WorkerID, c.Executors, c.Time)
	return nil
}

func updateRecord(rec *Attempt, r AttemptReport, now int64) {
	if rec.State.Terminal() {
		return
	}
	if r.Runs > rec.Runs {
		rec.Runs = r.Runs
	}
	switch r.State {
	case DriverRunning:
		if rec.StartedAt == 0 {
			rec.StartedAt = now
		}
		rec.State = DriverRunning
	case DriverFinished, DriverFailed, DriverKilled, DriverError:
		rec.State = r.State
		rec.EndedAt = now
		rec.ExitCode = cloneInt(r.ExitCode)
		if r.Reason != "" {
			rec.Reason = r.Reason
		}
	}
}

func (f *FSM) applyCurrentReport(d *Driver, r AttemptReport, now int64) {
	d.UpdatedAt = now
	switch r.State {
	case DriverRunning:
		d.State = DriverRunning
		f.driverRestarted(d, r.Runs, now)
	case DriverFinished, DriverFailed, DriverError:
		d.State = r.State
		d.ExitCode = cloneInt(r.ExitCode)
		d.Message = r.Reason
		f.release(d)
		f.driverAttemptEnded(d, d.Attempt, now)
	case DriverKilled:
		// The worker killed an attempt nobody asked to kill (it is shutting
		// down): a supervised driver goes on elsewhere.
		if d.Supervise {
			f.relaunch(d, now, "attempt killed on worker "+d.WorkerID)
			return
		}
		d.State = DriverKilled
		d.ExitCode = cloneInt(r.ExitCode)
		d.Message = r.Reason
		f.release(d)
		f.driverAttemptEnded(d, d.Attempt, now)
	}
}

// relaunch moves a supervised driver to its next attempt and back to the end
// of waitingDrivers (Spark's Master.relaunchDriver).
func (f *FSM) relaunch(d *Driver, now int64, reason string) {
	f.release(d)
	if rec := d.currentAttempt(); rec != nil && !rec.State.Terminal() {
		rec.State = DriverError
		rec.EndedAt = now
		rec.Reason = reason
	}
	d.Attempt++
	d.WorkerID = ""
	d.State = DriverRelaunching
	d.Message = reason
	d.UpdatedAt = now
	f.t.WaitingDrivers = append(f.t.WaitingDrivers, d.ID)
	f.driverAttemptEnded(d, d.Attempt-1, now)
}

func (f *FSM) applyKillDriver(c *KillDriver) any {
	d, ok := f.t.Drivers[c.DriverID]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownDriver, c.DriverID)
	}
	if d.State == DriverKilled {
		// Kill is idempotent, so a client's retry after a timeout or a
		// failover gets the same answer as the first try.
		return nil
	}
	if d.State.Terminal() {
		return fmt.Errorf("%w: %s is %s", ErrDriverEnded, d.ID, d.State)
	}
	if d.WorkerID == "" {
		f.dropWaiting(map[string]bool{d.ID: true})
	}
	f.release(d)
	d.State = DriverKilled
	d.Message = c.Reason
	if d.Message == "" {
		d.Message = "killed on request"
	}
	d.UpdatedAt = c.Time
	f.driverAttemptEnded(d, d.Attempt, c.Time)
	return nil
}

// applyDecommissionWorker only stops new placements on the worker: its
// drivers stay placed until it reports them KILLED (so a relaunch never
// overlaps the attempt being stopped), or until it is lost.
func (f *FSM) applyDecommissionWorker(c *DecommissionWorker) any {
	w, ok := f.t.Workers[c.WorkerID]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownWorker, c.WorkerID)
	}
	w.State = WorkerDecommissioned
	w.Message = c.Reason
	if w.Message == "" {
		w.Message = "worker " + w.ID + " decommissioned"
	}
	w.UpdatedAt = c.Time
	return nil
}

// applyWorkerLost takes a worker out of scheduling (Spark's
// Master.removeWorker): supervised drivers on it get their next attempt and
// wait again; the others end ERROR, with the reason. Its executors are LOST,
// which counts no retry: the scheduler replaces them.
func (f *FSM) applyWorkerLost(c *WorkerLost) any {
	w, ok := f.t.Workers[c.WorkerID]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownWorker, c.WorkerID)
	}
	reason, now := c.Reason, c.Time
	if reason == "" {
		reason = "worker " + w.ID + " lost"
	}
	w.State = WorkerDead
	w.Message = reason
	w.UpdatedAt = now
	// Executors first: an app that ends with a driver on this worker
	// would otherwise record them KILLED rather than LOST.
	// The worker's index entry holds exactly its live executors and
	// unfinished placed drivers; taken as sorted copies, since ending them
	// changes the entry, and map order is random while relaunch order
	// decides queue order.
	u := f.t.units(w.ID)
	for _, k := range sortedKeys(u.executors) {
		f.endExecutor(f.t.Executors[k], ExecLost, nil, reason, now)
	}
	ids := sortedKeys(u.drivers)
	for _, id := range ids {
		d := f.t.Drivers[id]
		if d.Supervise {
			f.relaunch(d, now, reason)
			continue
		}
		f.release(d)
		if rec := d.currentAttempt(); rec != nil && !rec.State.Terminal() {
			rec.State = DriverError
			rec.EndedAt = now
			rec.Reason = reason
		}
		d.State = DriverError
		d.Message = reason
		d.UpdatedAt = now
		f.driverAttemptEnded(d, d.Attempt, now)
	}
	return nil
}
