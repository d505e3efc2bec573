package fsm

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/model/ids"
)

// Apply functions for applications and executors, following Spark's
// Master: registerApplication, startExecutorsOnWorkers (placement itself is
// the leader's; Apply only checks it), ExecutorStateChanged, and
// removeApplication.

// appNamespace is the namespace of the app c registers: its driver's,
// whatever the entry says, or the entry's for an app without one.
func (f *FSM) appNamespace(c *model.RegisterApp) string {
	if d, ok := f.t.Drivers[c.DriverID]; ok && c.DriverID != "" {
		return d.Namespace
	}
	return c.Namespace
}

func (f *FSM) applyRegisterApp(c *model.RegisterApp) (RegisterAppResult, error) {
	if id, ok := f.t.AppTokens[c.Token]; ok && c.Token != "" {
		if a := f.t.Apps[id]; a != nil && model.NamespaceOf(a.Namespace) != model.NamespaceOf(f.appNamespace(c)) {
			return RegisterAppResult{}, fmt.Errorf("%w: the registration's token names an app of namespace %s", model.ErrTokenInUse, model.NamespaceOf(a.Namespace))
		}
		return RegisterAppResult{AppID: id, Existing: true}, nil
	}
	seq, err := idSeq(ids.App, c.ID)
	if err != nil {
		return RegisterAppResult{}, err
	}
	if err := c.Validate(); err != nil {
		return RegisterAppResult{}, fmt.Errorf("%w: %v", model.ErrInvalidCommand, err)
	}
	if _, ok := f.t.Apps[c.ID]; ok {
		return RegisterAppResult{}, fmt.Errorf("%w: app %s", model.ErrDuplicateID, c.ID)
	}
	ns := f.appNamespace(c)
	if c.DriverID != "" {
		d, ok := f.t.Drivers[c.DriverID]
		switch {
		case !ok:
			return RegisterAppResult{}, fmt.Errorf("%w: %s", model.ErrUnknownDriver, c.DriverID)
		case d.State.Terminal():
			return RegisterAppResult{}, fmt.Errorf("%w: %s is %s", model.ErrDriverEnded, d.ID, d.State)
		case d.Attempt != c.DriverAttempt || d.WorkerID == "":
			return RegisterAppResult{}, fmt.Errorf("%w: %s attempt %d is not the running attempt (%d)", model.ErrStaleAttempt, d.ID, c.DriverAttempt, d.Attempt)
		case c.DriverRun > 0 && d.CurrentAttempt() != nil && c.DriverRun < d.CurrentAttempt().Runs:
			return RegisterAppResult{}, fmt.Errorf("%w: %s attempt %d run %d was restarted (run %d)", model.ErrStaleAttempt, d.ID, d.Attempt, c.DriverRun, d.CurrentAttempt().Runs)
		}
	}
	if f.t.namespace(ns) == nil {
		return RegisterAppResult{}, fmt.Errorf("%w: %s", model.ErrUnknownNamespace, ns)
	}
	a := &model.App{
		Namespace:     ns,
		ID:            c.ID,
		Name:          c.Name,
		Token:         c.Token,
		DriverID:      c.DriverID,
		DriverAttempt: c.DriverAttempt,
		DriverRun:     c.DriverRun,
		ExecutorSpec:  c.Spec().Clone(),
		State:         model.AppWaiting,
		SubmittedAt:   c.Time,
		UpdatedAt:     c.Time,
	}
	f.t.Apps[a.ID] = a
	f.ownedApps[a] = struct{}{}
	f.changed(model.EventApp, a.ID)
	if c.Token != "" {
		f.t.AppTokens[c.Token] = a.ID
	}
	if seq >= f.t.NextAppSeq {
		f.t.NextAppSeq = seq + 1
	}
	return RegisterAppResult{AppID: a.ID}, nil
}

// idSeq returns the sequence number of an ID of kind k, refusing any other
// form as an invalid command.
func idSeq(k ids.Kind, id string) (int, error) {
	seq, err := ids.Seq(k, id)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", model.ErrInvalidCommand, err)
	}
	return seq, nil
}

// maxExecutorID bounds an app's executor IDs in a restored snapshot, far
// beyond any real count of launches, so that the next ID never overflows.
const maxExecutorID = 1 << 53

func (f *FSM) applyPlaceExecutors(c *model.PlaceExecutors) (PlaceExecutorsResult, error) {
	var res PlaceExecutorsResult
	for _, p := range c.Placements {
		a, ok := f.t.Apps[p.AppID]
		if !ok || a.State.Terminal() || p.ExecutorID != a.NextExecutorID {
			continue
		}
		if left := a.CoresLeft(); left >= 0 && left < a.CoresPerExecutor {
			continue
		}
		if a.ExecutorLimit >= 0 && f.t.liveExecutors(a.ID) >= a.ExecutorLimit {
			continue
		}
		w, ok := f.t.Workers[p.WorkerID]
		if !ok || w.State != model.WorkerAlive || w.CoresFree() < a.CoresPerExecutor || w.MemoryFreeMB() < a.MemoryPerExecutorMB {
			continue
		}
		if model.CheckHolding(a.ResourcesPerExecutor, p.Resources, w.ResourcesFree()) != nil {
			continue
		}
		if !f.t.withinQuota(a.Namespace, a.CoresPerExecutor, a.MemoryPerExecutorMB, a.ResourcesPerExecutor, 0) {
			continue
		}
		e := &model.Executor{
			AppID:      a.ID,
			ID:         p.ExecutorID,
			WorkerID:   w.ID,
			Cores:      a.CoresPerExecutor,
			MemoryMB:   a.MemoryPerExecutorMB,
			Resources:  p.Resources.Clone(),
			State:      model.ExecLaunching,
			LaunchedAt: c.Time,
		}
		f.t.Executors[model.ExecutorKey(a.ID, e.ID)] = e
		f.t.units(w.ID).addExecutor(model.ExecutorKey(a.ID, e.ID))
		a = f.ownApp(a.ID)
		a.NextExecutorID++
		a.CoresGranted += e.Cores
		a.UpdatedAt = c.Time
		w.CoresUsed += e.Cores
		w.MemoryUsedMB += e.MemoryMB
		w.ResourcesUsed.Hold(e.Resources)
		f.changed(model.EventExecutor, model.ExecutorKey(a.ID, e.ID))
		f.changed(model.EventApp, a.ID)
		f.changed(model.EventWorker, w.ID)
		res.Applied = append(res.Applied, p)
	}
	return res, nil
}

// liveExecutors counts an app's executors that have not ended.
func (t *tables) liveExecutors(appID string) int {
	n := 0
	for _, e := range t.executorsOf(appID) {
		if !e.State.Terminal() {
			n++
		}
	}
	return n
}

// executorsOf returns an app's executors in ID order. Executor IDs of one
// app are dense from FirstExecutorID, but for dropped finished ones, so
// this walks those keys instead of the whole table; unless the range is
// wider than the table (a long-lived executor ahead of many dropped ones,
// or a snapshot's NextExecutorID), where walking it would take
// unboundedly long and scanning the rows does not.
func (t *tables) executorsOf(appID string) []*model.Executor {
	a, ok := t.Apps[appID]
	if !ok {
		return nil
	}
	var out []*model.Executor
	if a.NextExecutorID-a.FirstExecutorID > len(t.Executors) {
		for _, e := range t.Executors {
			if e.AppID == appID && e.ID >= a.FirstExecutorID && e.ID < a.NextExecutorID {
				out = append(out, e)
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
		return out
	}
	for id := a.FirstExecutorID; id < a.NextExecutorID; id++ {
		if e, ok := t.Executors[model.ExecutorKey(appID, id)]; ok {
			out = append(out, e)
		}
	}
	return out
}

// endExecutor moves a live executor to a final state and returns its
// resources to its worker and its app.
func (f *FSM) endExecutor(e *model.Executor, state model.ExecutorState, exit *int, reason string, now int64) {
	if e.State.Terminal() {
		return
	}
	e.State = state
	e.ExitCode = model.CloneExitCode(exit)
	e.Message, e.Staging = reason, false
	e.EndedAt = now
	f.changed(model.EventExecutor, model.ExecutorKey(e.AppID, e.ID))
	if w, ok := f.t.Workers[e.WorkerID]; ok {
		w.CoresUsed -= e.Cores
		w.MemoryUsedMB -= e.MemoryMB
		w.ResourcesUsed.Release(e.Resources)
		f.changed(model.EventWorker, w.ID)
	}
	f.t.units(e.WorkerID).removeExecutor(model.ExecutorKey(e.AppID, e.ID))
	if _, ok := f.t.Apps[e.AppID]; ok {
		a := f.ownApp(e.AppID)
		a.CoresGranted -= e.Cores
		a.UpdatedAt = now
		f.changed(model.EventApp, a.ID)
		f.dropOldExecutors(a)
	}
}

// dropOldExecutors keeps the newest RetainedExecutors finished executors
// of an app and drops the older rows; a is the app's row, owned by the
// entry (ownApp).
func (f *FSM) dropOldExecutors(a *model.App) {
	es := f.t.executorsOf(a.ID)
	finished := 0
	for _, e := range es {
		if e.State.Terminal() {
			finished++
		}
	}
	for _, e := range es {
		if finished <= model.RetainedExecutors {
			break
		}
		if e.State.Terminal() {
			delete(f.t.Executors, model.ExecutorKey(a.ID, e.ID))
			f.changed(model.EventExecutor, model.ExecutorKey(a.ID, e.ID))
			finished--
		}
	}
	// FirstExecutorID moves up to the lowest ID left, or to
	// NextExecutorID when none is.
	a.FirstExecutorID = a.NextExecutorID
	for _, e := range es {
		if _, ok := f.t.Executors[model.ExecutorKey(a.ID, e.ID)]; ok {
			a.FirstExecutorID = e.ID
			break
		}
	}
}

// applyExecutorReports handles a worker's executor reports (Spark's
// Master handling ExecutorStateChanged).
func (f *FSM) applyExecutorReports(workerID string, reports []model.ExecutorReport, now int64) {
	for _, r := range reports {
		e, ok := f.t.Executors[model.ExecutorKey(r.AppID, r.ExecutorID)]
		if !ok || e.WorkerID != workerID || e.State.Terminal() {
			continue
		}
		if r.Staging {
			f.applyExecutorStaging(e, r)
			continue
		}
		if e.PreemptedBy != "" && r.State.Terminal() {
			// An executor that ends after its preemption notice ends
			// preempted, whatever its exit: no retry of its app counts.
			preemption{f}.endExecutor(e, r.ExitCode, now)
			continue
		}
		a := f.t.Apps[e.AppID]
		switch r.State {
		case model.ExecRunning:
			if e.State == model.ExecLaunching {
				// Rows of older entries never have Staging set.
				if e.Staging {
					e.Message, e.Staging = "", false
				}
				e.State = model.ExecRunning
				e.StartedAt = now
				a = f.ownApp(a.ID)
				a.UpdatedAt = now
				f.changed(model.EventExecutor, model.ExecutorKey(e.AppID, e.ID))
				f.changed(model.EventApp, a.ID)
			}
			if a.State == model.AppWaiting {
				a = f.ownApp(a.ID)
				a.State = model.AppRunning
				f.changed(model.EventApp, a.ID)
			}
		case model.ExecExited:
			f.endExecutor(e, model.ExecExited, r.ExitCode, r.Reason, now)
			a = f.ownApp(a.ID)
			a.RetryCount = 0
			f.changed(model.EventApp, a.ID)
		case model.ExecKilled:
			// Killed by its worker unasked (the worker is shutting down):
			// not the app's fault, so no retry is counted; the scheduler
			// places a replacement.
			f.endExecutor(e, model.ExecKilled, r.ExitCode, r.Reason, now)
		case model.ExecFailed:
			f.endExecutor(e, model.ExecFailed, r.ExitCode, r.Reason, now)
			a = f.ownApp(a.ID)
			a.RetryCount++
			f.changed(model.EventApp, a.ID)
			if a.MaxExecutorRetries >= 0 && a.RetryCount > a.MaxExecutorRetries && !f.t.anyRunning(a.ID) {
				f.endApp(a, model.AppFailed, fmt.Sprintf("%d executors failed in a row (max executor retries %d); last: %s",
					a.RetryCount, a.MaxExecutorRetries, executorEnd(e)), now)
			}
		}
	}
}

// applyExecutorStaging makes what a LAUNCHING executor's staging says
// (a Staging report) its message, as applyStaging does for a driver: a
// report that changes nothing sends no event.
func (f *FSM) applyExecutorStaging(e *model.Executor, r model.ExecutorReport) {
	if r.State != model.ExecLaunching || e.State != model.ExecLaunching || (e.Staging && e.Message == r.Reason) {
		return
	}
	e.Message, e.Staging = f.intern.str(r.Reason), true
	f.changed(model.EventExecutor, model.ExecutorKey(e.AppID, e.ID))
}

func (t *tables) anyRunning(appID string) bool {
	for _, e := range t.executorsOf(appID) {
		if e.State == model.ExecRunning {
			return true
		}
	}
	return false
}

func executorEnd(e *model.Executor) string {
	s := fmt.Sprintf("executor %d on %s", e.ID, e.WorkerID)
	if e.ExitCode != nil {
		s += fmt.Sprintf(" exited %d", *e.ExitCode)
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// endApp moves an unfinished app to a final state and kills its live
// executors; their workers stop them once they leave the desired set
// (Spark's Master.removeApplication).
func (f *FSM) endApp(a *model.App, state model.ApplicationState, reason string, now int64) {
	if a.State.Terminal() {
		return
	}
	for _, e := range f.t.executorsOf(a.ID) {
		f.endExecutor(e, model.ExecKilled, nil, "application "+string(state), now)
	}
	a = f.ownApp(a.ID)
	a.State = state
	a.Message = reason
	a.EndedAt = now
	a.UpdatedAt = now
	f.changed(model.EventApp, a.ID)
}

// driverAttemptEnded ends the apps that an attempt of a driver registered,
// when that attempt ends or is superseded: the app's client went with it.
func (f *FSM) driverAttemptEnded(d *model.Driver, attempt int, now int64) {
	state := model.AppFailed
	switch d.State {
	case model.DriverFinished:
		state = model.AppFinished
	case model.DriverKilled:
		state = model.AppKilled
	}
	for _, id := range f.t.appIDs() {
		a := f.t.Apps[id]
		if a.DriverID == d.ID && a.DriverAttempt == attempt && !a.State.Terminal() {
			f.endApp(a, state, fmt.Sprintf("driver %s attempt %d ended %s", d.ID, attempt, attemptOutcome(d, attempt)), now)
		}
	}
}

func attemptOutcome(d *model.Driver, attempt int) string {
	if d.Attempt != attempt {
		return "(relaunched as attempt " + strconv.Itoa(d.Attempt) + ")"
	}
	return string(d.State)
}

// driverRestarted ends the apps that earlier runs of a driver's current
// attempt registered, once its worker reports a later run: a supervised
// program restarted in place is a new client.
func (f *FSM) driverRestarted(d *model.Driver, run int, now int64) {
	for _, id := range f.t.appIDs() {
		a := f.t.Apps[id]
		if a.DriverID == d.ID && a.DriverAttempt == d.Attempt && a.DriverRun > 0 && a.DriverRun < run && !a.State.Terminal() {
			f.endApp(a, model.AppFailed, fmt.Sprintf("driver %s attempt %d run %d ended (restarted as run %d)", d.ID, d.Attempt, a.DriverRun, run), now)
		}
	}
}

// appIDs returns the app IDs in order, so loops that change state are
// deterministic.
func (t *tables) appIDs() []string {
	ids := make([]string, 0, len(t.Apps))
	for id := range t.Apps {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func (f *FSM) applyRequestExecutors(c *model.RequestExecutors) error {
	a, err := f.t.liveApp(c.AppID)
	if err != nil {
		return err
	}
	if c.Total < 0 {
		return fmt.Errorf("%w: executor total must not be negative, got %d", model.ErrInvalidCommand, c.Total)
	}
	a = f.ownApp(a.ID)
	a.ExecutorLimit = c.Total
	a.UpdatedAt = c.Time
	f.changed(model.EventApp, a.ID)
	return nil
}

func (f *FSM) applyKillExecutors(c *model.KillExecutors) error {
	a, err := f.t.liveApp(c.AppID)
	if err != nil {
		return err
	}
	seen := map[int]bool{}
	for _, id := range c.ExecutorIDs {
		if _, ok := f.t.Executors[model.ExecutorKey(a.ID, id)]; !ok || seen[id] {
			return fmt.Errorf("%w: %s has no executor %d (or it is named twice)", model.ErrUnknownExecutor, a.ID, id)
		}
		seen[id] = true
	}
	live := f.t.liveExecutors(a.ID)
	killed := 0
	for _, id := range c.ExecutorIDs {
		e := f.t.Executors[model.ExecutorKey(a.ID, id)]
		if !e.State.Terminal() {
			f.endExecutor(e, model.ExecKilled, nil, "killed on request", c.Time)
			killed++
		}
	}
	a = f.ownApp(a.ID)
	// Spark's killExecutors adjusts the target, so the scheduler does not
	// bring the killed executors straight back.
	if killed > 0 {
		if a.ExecutorLimit < 0 {
			a.ExecutorLimit = live
		}
		a.ExecutorLimit = max(a.ExecutorLimit-killed, 0)
	}
	a.UpdatedAt = c.Time
	f.changed(model.EventApp, a.ID)
	return nil
}

func (f *FSM) applyEndApp(c *model.EndApp) error {
	a, ok := f.t.Apps[c.AppID]
	if !ok {
		return fmt.Errorf("%w: %s", model.ErrUnknownApp, c.AppID)
	}
	if !c.State.Terminal() {
		return fmt.Errorf("%w: an app can only end FINISHED, FAILED or KILLED, not %q", model.ErrInvalidCommand, c.State)
	}
	if a.State == c.State {
		// Idempotent, like KillDriver: a retried request gets the same
		// answer.
		return nil
	}
	if a.State.Terminal() {
		return fmt.Errorf("%w: %s is %s", model.ErrAppEnded, a.ID, a.State)
	}
	reason := c.Reason
	if reason == "" {
		reason = map[model.ApplicationState]string{model.AppFinished: "unregistered", model.AppFailed: "failed", model.AppKilled: "killed on request"}[c.State]
	}
	f.endApp(a, c.State, reason, c.Time)
	return nil
}

// liveApp returns an unfinished app, or the error that says why not.
func (t *tables) liveApp(id string) (*model.App, error) {
	a, ok := t.Apps[id]
	if !ok {
		return nil, fmt.Errorf("%w: %s", model.ErrUnknownApp, id)
	}
	if a.State.Terminal() {
		return nil, fmt.Errorf("%w: %s is %s", model.ErrAppEnded, a.ID, a.State)
	}
	return a, nil
}

func (f *FSM) applyPruneCompleted(c *model.PruneCompleted) error {
	for _, id := range c.DriverIDs {
		d, ok := f.t.Drivers[id]
		if !ok || !d.State.Terminal() {
			continue
		}
		delete(f.t.Drivers, id)
		f.changed(model.EventDriver, id)
		if d.Token != "" && f.t.Tokens[d.Token] == id {
			delete(f.t.Tokens, d.Token)
		}
	}
	for _, id := range c.AppIDs {
		a, ok := f.t.Apps[id]
		if !ok || !a.State.Terminal() {
			continue
		}
		for _, e := range f.t.executorsOf(id) {
			delete(f.t.Executors, model.ExecutorKey(id, e.ID))
			f.changed(model.EventExecutor, model.ExecutorKey(id, e.ID))
		}
		delete(f.t.Apps, id)
		f.changed(model.EventApp, id)
		if a.Token != "" && f.t.AppTokens[a.Token] == id {
			delete(f.t.AppTokens, a.Token)
		}
	}
	return nil
}
