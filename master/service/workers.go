package service

import (
	"context"
	"fmt"
	"net"
	"reflect"
	"slices"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/master/leader"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/model/ids"
	"github.com/drover-project/drover/security/auth"
	"github.com/drover-project/drover/transport/gossip"
)

// memberWait is how long a registration waits for its worker to appear in
// the gossip pool: a worker starts gossiping and registering at once, and
// its join usually lands first by milliseconds.
const memberWait = 3 * time.Second

// RegisterWorker serves V1RegisterWorker. A worker ID held by another
// live process is refused until that process has been silent as long as
// it would take to declare it lost; a worker the leader cannot see in the
// gossip pool (wrong gossip key, wrong addresses) gets no work.
func (s *Core) RegisterWorker(ctx context.Context, _ auth.Caller, req api.RegisterWorkerRequest) (api.RegisterWorkerResponse, error) {
	t, err := s.leading()
	if err != nil {
		return api.RegisterWorkerResponse{}, err
	}
	if err := ids.CheckWorker(req.ID); err != nil {
		return api.RegisterWorkerResponse{}, api.Errorf(api.ErrInvalidRequest, "%v", err)
	}
	if _, _, err := net.SplitHostPort(req.HTTPAddr); err != nil {
		return api.RegisterWorkerResponse{}, api.Errorf(api.ErrInvalidRequest, "http_addr %q: %v", req.HTTPAddr, err)
	}
	if req.Cores <= 0 || req.MemoryMB <= 0 {
		return api.RegisterWorkerResponse{}, api.Errorf(api.ErrInvalidRequest,
			"a worker needs positive cores and memory, got %d cores and %d MiB", req.Cores, req.MemoryMB)
	}
	if err := model.CheckResourceOffer(req.Resources); err != nil {
		return api.RegisterWorkerResponse{}, invalidRequest(fmt.Errorf("worker resources: %v", err))
	}
	if old, ok := s.FSM.State().Worker(req.ID); ok && !s.FSM.State().IsInstance(req.ID, req.Instance) && old.State != model.WorkerDead {
		heard := t.Workers.Get(req.ID)
		if t.Since.After(heard) {
			heard = t.Since
		}
		if quiet := time.Since(heard); quiet < s.cfg.LossDelay {
			return api.RegisterWorkerResponse{}, api.Errorf(api.ErrConflict,
				"worker ID %s is in use by another worker process at %s (heard from %s ago); give this one its own --id",
				req.ID, old.HTTPAddr, quiet.Round(time.Millisecond))
		}
	}
	if !s.cfg.RegisterWithoutGossip && !awaitMember(ctx, s.Pool, req.ID, req.HTTPAddr) {
		t.Outsiders.Seen(req.ID, time.Now())
		return api.RegisterWorkerResponse{}, api.Errorf(api.ErrNotInPool,
			"leader %s does not see worker %s (at %s) in its gossip pool (%s): the worker must reach the masters' gossip ports and they its own, with the same --gossip-key-file",
			s.cfg.ID, req.ID, req.HTTPAddr, s.poolView())
	}
	// A worker sends its registration to every master; the copies that
	// followers forward arrive together, and one Raft entry serves them
	// all. One that finds the worker already registered as it asks
	// commits nothing.
	_, err, _ = s.submits.Do("worker\x00"+req.ID+"\x00"+req.Instance, func() (any, error) {
		if old, ok := s.FSM.State().Worker(req.ID); ok && old.State == model.WorkerAlive && s.FSM.State().IsInstance(req.ID, req.Instance) &&
			old.HTTPAddr == req.HTTPAddr && old.Cores == req.Cores && old.MemoryMB == req.MemoryMB &&
			reflect.DeepEqual(old.Resources, req.Resources) {
			return nil, nil
		}
		res, err := s.Apply(&model.RegisterWorker{
			ID: req.ID, Instance: req.Instance, HTTPAddr: req.HTTPAddr, Cores: req.Cores, MemoryMB: req.MemoryMB, Resources: req.Resources, Time: now(),
		})
		if err == nil {
			s.Log.Info("worker registered", "worker", req.ID, "addr", req.HTTPAddr, "cores", req.Cores, "memory_mb", req.MemoryMB,
				"resources", req.Resources.String())
		}
		return res, err
	})
	if err != nil {
		return api.RegisterWorkerResponse{}, err
	}
	t.Workers.Seen(req.ID, time.Now())
	return api.RegisterWorkerResponse{WorkerID: req.ID}, nil
}

// awaitMember reports whether the worker id is an alive gossip member
// gossiping from the host of this HTTP address and naming it as its own,
// waiting up to memberWait for it: the leader will watch the worker there
// (gossip.Pool.LookupAt).
func awaitMember(ctx context.Context, pool *gossip.Pool, id, httpAddr string) bool {
	ctx, cancel := context.WithTimeout(ctx, memberWait)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, ok := pool.LookupAt(gossip.RoleWorker, id, httpAddr); ok {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}

// DecommissionWorker serves V1DecommissionWorker.
func (s *Core) DecommissionWorker(_ context.Context, _ auth.Caller, id string, req api.DecommissionWorkerRequest) (api.RegisterWorkerResponse, error) {
	if _, err := s.leading(); err != nil {
		return api.RegisterWorkerResponse{}, err
	}
	if err := checkReason("reason", req.Reason, maxReason); err != nil {
		return api.RegisterWorkerResponse{}, err
	}
	if _, ok := s.FSM.State().Worker(id); ok && !s.FSM.State().IsInstance(id, req.Instance) {
		return api.RegisterWorkerResponse{}, api.Errorf(api.ErrConflict, "worker ID %s is registered by another worker process", id)
	}
	if _, err := s.Apply(&model.DecommissionWorker{WorkerID: id, Reason: req.Reason, Time: now()}); err != nil {
		return api.RegisterWorkerResponse{}, err
	}
	s.Log.Info("worker decommissioned", "worker", id, "reason", req.Reason)
	return api.RegisterWorkerResponse{WorkerID: id}, nil
}

// Heartbeat serves V1Heartbeat. Reports are taken from any known
// worker: a decommissioned one reports the attempts it stops, a lost one
// its zombies' ends; Apply keeps them from touching anything but the
// attempts they name. The answer is the worker's whole desired set, with
// each attempt's driver token.
func (s *Core) Heartbeat(ctx context.Context, _ auth.Caller, id string, req api.HeartbeatRequest) (api.HeartbeatResponse, error) {
	t, err := s.leading()
	if err != nil {
		return api.HeartbeatResponse{}, err
	}
	if err := checkStagingReports(req); err != nil {
		return api.HeartbeatResponse{}, err
	}
	wk, ok := s.FSM.State().Worker(id)
	if !ok || !s.FSM.State().IsInstance(id, req.Instance) {
		return api.HeartbeatResponse{Registered: false, Index: s.FSM.Index()}, nil
	}
	// A heartbeat held in a long poll counts as contact throughout.
	t.Workers.Seen(id, time.Now())
	defer t.Workers.Hold(id)()
	var acked []model.AttemptReport
	var ackedExecs []model.ExecutorReport
	if len(req.Reports) > 0 || len(req.ExecutorReports) > 0 {
		reports := s.stagingNews(id, req.Reports)
		if len(reports) > 0 || len(req.ExecutorReports) > 0 {
			if err := s.reports.commit(model.ReportAttempts{
				WorkerID: id, Reports: reports, Executors: req.ExecutorReports, Time: now(),
			}); err != nil {
				return api.HeartbeatResponse{}, err
			}
		}
		acked, ackedExecs = req.Reports, req.ExecutorReports
	}
	if wk.State != model.WorkerAlive {
		return api.HeartbeatResponse{Registered: false, Acked: acked, AckedExecutors: ackedExecs, Index: s.FSM.Index()}, nil
	}
	if len(acked) == 0 && len(ackedExecs) == 0 && req.WaitIndex > 0 {
		s.waitForChange(ctx, t, id, req)
	}
	if s.cfg.Strict {
		// The worker fences itself by this answer: it must come from a
		// leader a quorum still follows, not from one deposed a moment ago.
		if err := s.Raft.VerifyLeader().Error(); err != nil {
			return api.HeartbeatResponse{}, fmt.Errorf("%w: leadership not confirmed: %v", api.ErrUnavailable, err)
		}
	}
	t.Workers.Seen(id, time.Now())
	// Tokens only on the answer: running() compares assignments on every
	// commit a held heartbeat wakes for, and needs no HMAC.
	var known []api.AttemptRef
	var knownExecs []api.ExecutorRef
	if req.Brief {
		known, knownExecs = req.Running, req.RunningExecutors
	}
	ds, kept := s.FSM.State().DriversOn(id, known)
	as := make([]api.Assignment, len(ds))
	for i, d := range ds {
		as[i] = assignment(d)
		as[i].Token = s.Guard.DriverToken(d.ID, d.Attempt)
	}
	es, keptExecs := briefExecutors(executorAssignments(s.FSM.State(), id), knownExecs)
	var notices []api.PreemptNotice
	for _, n := range s.FSM.State().Notices(id) {
		notices = append(notices, api.PreemptNotice{Preemption: n.Preemption, Deadline: n.Deadline})
	}
	return api.HeartbeatResponse{
		Preempt:        notices,
		Registered:     true,
		Assignments:    as,
		Executors:      es,
		Kept:           kept,
		KeptExecutors:  keptExecs,
		Acked:          acked,
		AckedExecutors: ackedExecs,
		Index:          s.FSM.Index(),
	}, nil
}

// checkStagingReports refuses a heartbeat carrying a staging report whose
// line exceeds model.MaxStagingReason, which a worker's runner cuts to it.
func checkStagingReports(req api.HeartbeatRequest) error {
	for _, r := range req.Reports {
		if r.Staging {
			if err := checkReason("staging reason of "+r.DriverID, r.Reason, model.MaxStagingReason); err != nil {
				return err
			}
		}
	}
	for _, r := range req.ExecutorReports {
		if r.Staging {
			if err := checkReason("staging reason of "+model.ExecutorKey(r.AppID, r.ExecutorID), r.Reason, model.MaxStagingReason); err != nil {
				return err
			}
		}
	}
	return nil
}

// stagingNews drops from a worker's reports the staging reports its
// driver's row says already (a resend whose acknowledgement was lost), so
// that they cost no Raft entry; Apply would ignore them too. They are
// acknowledged all the same.
func (s *Core) stagingNews(workerID string, rs []model.AttemptReport) []model.AttemptReport {
	return slices.DeleteFunc(slices.Clone(rs), func(r model.AttemptReport) bool {
		if !r.Staging {
			return false
		}
		d, ok := s.FSM.State().Driver(r.DriverID)
		return ok && d.Staging && d.Message == r.Reason && d.Attempt == r.Attempt && d.WorkerID == workerID
	})
}

// briefExecutors splits a worker's desired executors into those known
// names, as refs, and the others, in full.
func briefExecutors(es []api.ExecutorAssignment, known []api.ExecutorRef) (full []api.ExecutorAssignment, kept []api.ExecutorRef) {
	full = make([]api.ExecutorAssignment, 0, len(es))
	for _, e := range es {
		if ref := (api.ExecutorRef{AppID: e.AppID, ExecutorID: e.ExecutorID}); slices.Contains(known, ref) {
			kept = append(kept, ref)
			continue
		}
		full = append(full, e)
	}
	return full, kept
}

// waitForChange holds a heartbeat until the worker's desired set, or its
// preemption notices, differ from what it runs and has acted on, or
// HeartbeatWait passes, or the term ends.
func (s *Core) waitForChange(ctx context.Context, t *leader.Term, workerID string, req api.HeartbeatRequest) {
	timer := time.NewTimer(s.cfg.HeartbeatWait)
	defer timer.Stop()
	for {
		changed := s.FSM.State().WorkerChanged(workerID)
		as, es := running(s.FSM.State(), workerID)
		if !sameSet(as, req.Running) || !sameSet(es, req.RunningExecutors) || !sameSet(noticed(s.FSM.State(), workerID), req.Preempting) {
			return
		}
		select {
		case <-changed:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		case <-t.Done():
			return
		}
	}
}

// sameSet reports whether a and b hold the same elements, given that
// neither repeats one.
func sameSet[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	set := make(map[T]bool, len(b))
	for _, x := range b {
		set[x] = true
	}
	for _, x := range a {
		if !set[x] {
			return false
		}
	}
	return true
}

// running is the set of attempts and executors a worker should run, in the
// form it reports what it runs.
func running(f *fsm.State, workerID string) ([]api.AttemptRef, []api.ExecutorRef) {
	es := executorAssignments(f, workerID)
	er := make([]api.ExecutorRef, len(es))
	for i, e := range es {
		er[i] = api.ExecutorRef{AppID: e.AppID, ExecutorID: e.ExecutorID}
	}
	return f.AttemptsOn(workerID), er
}

// noticed is the units of a worker under a preemption notice, in the
// form the worker names those it has acted on.
func noticed(f *fsm.State, workerID string) []model.Preemption {
	ns := f.Notices(workerID)
	out := make([]model.Preemption, len(ns))
	for i, n := range ns {
		out[i] = n.Preemption
	}
	return out
}

// assignment is what a worker needs to launch a driver's current attempt.
// Argv, Env, Artifacts and Resources are the row's own, not copies: Apply
// never changes them in place (a row's program is fixed at submission, an
// attempt's addresses at placement), and the answer only encodes them.
func assignment(d *model.Driver) api.Assignment {
	a := api.Assignment{
		DriverID: d.ID, Attempt: d.Attempt, Argv: d.Argv, Env: d.Env,
		Cores: d.Cores, MemoryMB: d.MemoryMB, Supervise: d.Supervise, Artifacts: d.Artifacts,
		MaxRestarts: d.MaxRestarts, RestartWindowMS: d.RestartWindowMS, RescheduleAfter: d.RescheduleAfter,
		Failures: d.FailuresBefore(d.Attempt), User: d.User,
	}
	if rec := d.CurrentAttempt(); rec != nil {
		a.Resources = rec.Resources
	}
	return a
}

// executorAssignments is the desired set of executors of a worker: every
// live executor placed on it, with its app's program.
func executorAssignments(f *fsm.State, workerID string) []api.ExecutorAssignment {
	es, apps := f.ExecutorsOn(workerID)
	out := make([]api.ExecutorAssignment, len(es))
	for i, e := range es {
		out[i] = api.ExecutorAssignment{
			AppID: e.AppID, ExecutorID: e.ID, Argv: apps[i].Argv, Env: apps[i].Env,
			Cores: e.Cores, MemoryMB: e.MemoryMB, Artifacts: apps[i].Artifacts, Resources: e.Resources, User: apps[i].User,
		}
	}
	return out
}

// Worker serves Worker.
func (s *Core) Worker(_ context.Context, _ auth.Caller, id string, r Read) (*model.Worker, error) {
	if err := s.readable(r); err != nil {
		return nil, err
	}
	if err := ids.CheckWorker(id); err != nil {
		return nil, api.Errorf(api.ErrInvalidRequest, "%v", err)
	}
	w, ok := s.FSM.State().Worker(id)
	if !ok {
		return nil, api.Errorf(model.ErrUnknownWorker, "%s: %s", model.ErrUnknownWorker, id)
	}
	return w, nil
}
