package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/model/ids"
	"github.com/drover-project/drover/security/auth"
)

// SubmitDriver serves V1SubmitDriver: it checks the request on its own,
// then commits a SubmitDriver with an ID from the term's maker, in the
// next group of submissions (submitAll). Copies of one submission (the
// client sends it to every master) make one entry.
func (s *Core) SubmitDriver(_ context.Context, c auth.Caller, req api.SubmitRequest) (api.SubmitResponse, error) {
	t, err := s.leading()
	if err != nil {
		return api.SubmitResponse{}, err
	}
	cmd, err := s.submission(c, req)
	if err != nil {
		return api.SubmitResponse{}, err
	}
	o := s.submitAll(t, []*model.SubmitDriver{cmd})[0]
	if o.Err != nil {
		return api.SubmitResponse{}, o.Err
	}
	return api.SubmitResponse{DriverID: o.DriverID, Existing: o.Existing}, nil
}

// SubmitDrivers serves V1SubmitDrivers: each submission is checked and
// answered as SubmitDriver's own would be, and those that pass wait for
// their entries together, so a batch costs the leader one request and
// few Raft entries.
func (s *Core) SubmitDrivers(_ context.Context, c auth.Caller, req api.SubmitBatchRequest) (api.SubmitBatchResponse, error) {
	t, err := s.leading()
	if err != nil {
		return api.SubmitBatchResponse{}, err
	}
	if err := checkBatch(len(req.Submissions)); err != nil {
		return api.SubmitBatchResponse{}, err
	}
	results := make([]api.SubmitResult, len(req.Submissions))
	cmds := make([]*model.SubmitDriver, 0, len(req.Submissions))
	at := make([]int, 0, len(req.Submissions))
	for i, r := range req.Submissions {
		cmd, err := s.submission(c, r)
		if err != nil {
			results[i].Error = api.ErrorOf(err)
			continue
		}
		cmds = append(cmds, cmd)
		at = append(at, i)
	}
	for j, o := range s.submitAll(t, cmds) {
		r := &results[at[j]]
		if o.Err != nil {
			r.Error = api.ErrorOf(o.Err)
			continue
		}
		r.DriverID, r.Existing = o.DriverID, o.Existing
	}
	return api.SubmitBatchResponse{Results: results}, nil
}

// checkBatch refuses a batch of n submissions that is empty or larger
// than api.MaxBatchSubmissions.
func checkBatch(n int) error {
	switch {
	case n == 0:
		return api.Errorf(api.ErrInvalidRequest, "a batch needs at least one submission")
	case n > api.MaxBatchSubmissions:
		return api.Errorf(api.ErrInvalidRequest, "a batch holds at most %d submissions, not %d", api.MaxBatchSubmissions, n)
	}
	return nil
}

// submission is the free submission from caller c, with this master's
// bound on the size of a program (Config.MaxProgramSize) and its
// namespace's rules (scopedNamespace, checkNamespace) checked too, and the client the
// submission came from recorded in the command.
func (s *Core) submission(c auth.Caller, req api.SubmitRequest) (*model.SubmitDriver, error) {
	cmd, err := submission(req)
	if err != nil {
		return nil, err
	}
	return cmd, admitProgram(s, c, cmd, "nothing submitted")
}

// admitProgram checks what of cmd, a submission checked on its own,
// depends on this master and the tables: the size of its program, and
// its namespace's rules for caller c (scopedNamespace, which may set
// cmd's namespace, and checkNamespace, whose refusal of a namespace that
// does not exist ends with notDone). It records the client in cmd.
func admitProgram(s *Core, c auth.Caller, cmd *model.SubmitDriver, notDone string) error {
	if err := s.checkProgramSize("program", cmd.ProgramSize()); err != nil {
		return err
	}
	// The caller's token decides where a submission that names no
	// namespace goes, and which it may name; then the namespace's rules.
	var err error
	if cmd.Namespace, err = scopedNamespace(c, cmd.Namespace); err != nil {
		return err
	}
	if err := checkNamespace(s.FSM.State(), cmd.Namespace, cmd.Priority, notDone); err != nil {
		return err
	}
	cmd.Client = c.Client
	return nil
}

// checkProgramSize refuses a program (what names it) of size bytes over
// Config.MaxProgramSize, naming the bound and the size.
func (s *Core) checkProgramSize(what string, size int) error {
	if limit := s.cfg.MaxProgramSize; limit > 0 && size > limit {
		return api.Errorf(api.ErrTooLarge, "%s of %d bytes exceeds --max-program-size of %d bytes (its name, user, argv, environment, artifacts and resource names count)",
			what, size, limit)
	}
	return nil
}

// submission checks one submission on its own and returns the command
// that commits it, without the ID and time the queue gives it. The size
// of its program is Core.submission's to check, which knows the bound.
func submission(req api.SubmitRequest) (*model.SubmitDriver, error) {
	if err := checkTokenAndName("submission", req.Token, req.Name); err != nil {
		return nil, err
	}
	cmd, err := program(req.Name, req.DriverSpec)
	if err != nil {
		return nil, err
	}
	cmd.Token = req.Token
	return cmd, nil
}

// program checks a driver's name and spec on their own, as a submission
// and a schedule's template have them, and returns the command without
// token, ID or time.
func program(name string, spec model.DriverSpec) (*model.SubmitDriver, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	var err error
	if spec.Artifacts, err = normalizeArtifacts(spec.Artifacts); err != nil {
		return nil, err
	}
	if err := spec.Validate(); err != nil {
		return nil, invalidRequest(err)
	}
	if err := checkNewProgram("driver", spec.Cores, spec.MemoryMB, spec.Env); err != nil {
		return nil, err
	}
	return &model.SubmitDriver{Name: name, DriverSpec: spec}, nil
}

// KilledByClient and KilledByKillAll are the reasons a killed driver and
// its attempt show: who asked, since the worker that ends the attempt
// knows only that it was taken away.
const (
	// KilledByClient ends a driver killed alone (drover client kill,
	// POST /v1/drivers/ID/kill, Spark REST's kill).
	KilledByClient = "killed by a client request"
	// KilledByKillAll ends each driver of a kill of every driver (POST
	// /v1/drivers/killall, Spark REST's killall).
	KilledByKillAll = "killed by kill-all"
)

// KillDriver serves V1KillDriver.
func (s *Core) KillDriver(_ context.Context, c auth.Caller, id string) (api.KillResponse, error) {
	if _, err := s.leading(); err != nil {
		return api.KillResponse{}, err
	}
	d, err := s.scopedDriver(c, id)
	if err != nil {
		return api.KillResponse{}, err
	}
	if _, err := s.Apply(&model.KillDriver{DriverID: d.ID, Reason: KilledByClient, AttemptReason: true, Time: now()}); err != nil {
		return api.KillResponse{}, err
	}
	return api.KillResponse{DriverID: d.ID}, nil
}

// KillAllDrivers serves V1KillAllDrivers: one KillDriver entry for each
// driver that has not ended, all handed to Raft together. A driver that
// ends or is dropped before its entry applies is skipped; an entry Raft
// did not commit fails the request, which a retry repeats harmlessly,
// since killing a KILLED driver again succeeds. A namespace token kills
// the drivers of its namespaces only.
func (s *Core) KillAllDrivers(_ context.Context, c auth.Caller) (api.KillAllResponse, error) {
	if _, err := s.leading(); err != nil {
		return api.KillAllResponse{}, err
	}
	var live []string
	var kills []model.Command
	at := now()
	for _, d := range s.FSM.State().Drivers() {
		if !d.State.Terminal() && c.InNamespace(d.Namespace) {
			live = append(live, d.ID)
			kills = append(kills, &model.KillDriver{DriverID: d.ID, Reason: KilledByKillAll, AttemptReason: true, Time: at})
		}
	}
	out := api.KillAllResponse{DriverIDs: []string{}}
	for i, err := range s.applyAll(kills) {
		switch {
		case err == nil:
			out.DriverIDs = append(out.DriverIDs, live[i])
		case errors.Is(err, model.ErrDriverEnded), errors.Is(err, model.ErrUnknownDriver):
		default:
			return api.KillAllResponse{}, err
		}
	}
	if len(live) > 0 {
		s.Log.Info("killed every driver on request", "drivers", len(out.DriverIDs))
	}
	return out, nil
}

// Driver serves V1Driver; with r.Index it is a blocking read. A driver
// of a namespace the caller may not see is refused before the read
// waits, and again after, should the ID have come to name another row.
func (s *Core) Driver(ctx context.Context, c auth.Caller, id string, r Read) (*model.Driver, error) {
	if err := ids.CheckDriver(id); err != nil {
		return nil, api.Errorf(api.ErrInvalidRequest, "%v", err)
	}
	if d, ok := s.FSM.State().Driver(id); ok {
		if err := inScope(c, d.ID, d.Namespace); err != nil {
			return nil, err
		}
	}
	if err := s.awaitChange(ctx, api.EventDriver, id, r); err != nil {
		return nil, err
	}
	if err := s.recheck(c); err != nil {
		return nil, err
	}
	if err := s.readable(r); err != nil {
		return nil, err
	}
	return atOneIndex(s.FSM, func() (*model.Driver, error) {
		d, err := s.scopedDriver(c, id)
		if err != nil {
			return nil, err
		}
		ws := s.FSM.State().Workers()
		return explainWaiting([]*model.Driver{d}, ws, newTenants(s.FSM.State(), ws, s.cfg.MaxRunningDrivers))[0], nil
	})
}

// DriverLogs serves V1DriverLogs: the log is the worker's that ran
// the attempt, which keeps the files (Spark's UI links to the worker the
// same way).
func (s *Core) DriverLogs(ctx context.Context, c auth.Caller, id string, q LogQuery, r Read) (*Log, error) {
	if err := s.readable(r); err != nil {
		return nil, err
	}
	d, err := s.scopedDriver(c, id)
	if err != nil {
		return nil, err
	}
	rec, err := logAttempt(d, q.Attempt)
	if err != nil {
		return nil, err
	}
	q.Attempt = rec.Attempt
	return s.workerLog(ctx, logUnit{what: fmt.Sprintf("attempt %d of %s", rec.Attempt, d.ID), workerID: rec.WorkerID,
		path: api.DriverPath(d.ID, "/logs"), ended: rec.State.Terminal()}, q)
}

// logAttempt returns the record of the attempt a log query names: the
// latest placed one for 0.
func logAttempt(d *model.Driver, attempt int) (model.Attempt, error) {
	if len(d.Attempts) == 0 {
		return model.Attempt{}, api.Errorf(api.ErrNotFound, "%s has not been placed on a worker yet", d.ID)
	}
	if attempt == 0 {
		return d.Attempts[len(d.Attempts)-1], nil
	}
	if rec := d.AttemptRecord(attempt); rec != nil {
		return *rec, nil
	}
	return model.Attempt{}, api.Errorf(api.ErrNotFound, "%s has no attempt %d", d.ID, attempt)
}

// scopedDriver returns the driver with ID id (driver), refused with
// api.ErrForbidden naming its namespace when c may not see it.
func (s *Core) scopedDriver(c auth.Caller, id string) (*model.Driver, error) {
	d, err := s.driver(id)
	if err != nil {
		return nil, err
	}
	return d, inScope(c, d.ID, d.Namespace)
}

// driver returns the driver with ID id, refusing an ID of another form
// before it reaches the tables or a worker's file system.
func (s *Core) driver(id string) (*model.Driver, error) {
	if err := ids.CheckDriver(id); err != nil {
		return nil, api.Errorf(api.ErrInvalidRequest, "%v", err)
	}
	d, ok := s.FSM.State().Driver(id)
	if !ok {
		return nil, api.Errorf(model.ErrUnknownDriver, "%s: %s", model.ErrUnknownDriver, id)
	}
	return d, nil
}
