package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/model/ids"
	"github.com/drover-project/drover/security/auth"
)

// Applications is the rules of applications and their executors
// (AppService, after Spark's RegisterApplication, RequestExecutors,
// KillExecutors and UnregisterApplication). It embeds its master's one
// Core: the tables, the term, the single-flight that collapses the copies of
// a registration and the path to Raft are Core's own, never a second set. It
// is not called Apps: in Local, a field of that name would hide its Apps
// method.
type Applications struct {
	*Core
}

// maxAppMessage bounds the message an app client ends its app with, in
// bytes.
const maxAppMessage = 1024

// appArtifacts are what each executor of the app registered by req
// stages: with req.DriverArtifacts, those of the registering driver d (as
// Spark's executors fetch the application's jars from its driver), then
// req's own. They are resolved here, before Raft, so the log entry names
// every artifact and replays without the driver's row.
func appArtifacts(req api.RegisterAppRequest, d *model.Driver) ([]model.Artifact, error) {
	if !req.DriverArtifacts {
		return normalizeArtifacts(req.Artifacts)
	}
	if d == nil {
		return nil, api.Errorf(api.ErrInvalidRequest, "driver_artifacts needs the registering driver's ID")
	}
	own, err := model.NormalizeArtifacts(req.Artifacts)
	if err != nil {
		return nil, invalidRequest(err)
	}
	all := append(slices.Clone(d.Artifacts), own...)
	if err := model.CheckArtifactPaths(all); err != nil {
		return nil, invalidRequest(err)
	}
	return all, nil
}

// appUser is the user the executors of the app registered by req run
// as: the one req names, or else that of d, the registering driver (nil
// when req names none), as YARN runs a job's containers as the user who
// submitted it. It is resolved here, before Raft, as the artifacts are. A
// driver token may name its own driver's user only: its program runs as
// that user, and an executor run as another would give it that user's
// rights.
func appUser(c auth.Caller, req api.RegisterAppRequest, d *model.Driver) (string, error) {
	if err := model.CheckUser(req.User); err != nil {
		return "", invalidRequest(err)
	}
	own := ""
	if d != nil {
		own = d.User
	}
	switch {
	case req.User == "":
		return own, nil
	case c.Token == auth.DriverToken && req.User != own:
		ownText := strconv.Quote(own)
		if own == "" {
			ownText = "each worker's default"
		}
		return "", api.Errorf(api.ErrForbidden, "%s may run its executors only as its driver's user, %s, not %q", c.Identity, ownText, req.User)
	}
	return req.User, nil
}

// RegisterApp serves V1RegisterApp. A driver token may register an app
// only for its own driver attempt. The app is its driver's namespace's;
// one without a driver is that of req.Namespace, which a namespace token
// must grant, or for a namespace token that names none, the one
// scopedNamespace picks.
func (s *Applications) RegisterApp(_ context.Context, c auth.Caller, req api.RegisterAppRequest) (api.RegisterAppResponse, error) {
	t, err := s.leading()
	if err != nil {
		return api.RegisterAppResponse{}, err
	}
	if err := checkTokenAndName("registration", req.Token, req.Name); err != nil {
		return api.RegisterAppResponse{}, err
	}
	if !c.OwnsDriver(req.DriverID, req.DriverAttempt) {
		return api.RegisterAppResponse{}, api.Errorf(api.ErrForbidden, "%s may register an app only for its own driver attempt", c.Identity)
	}
	// The registering driver's row, from which the app may take its
	// artifacts and its user; a driver the tables do not hold is refused
	// here, before Raft.
	var d *model.Driver
	var ns string
	if req.DriverID != "" {
		// The app is its driver's namespace's, whatever req names.
		if d, err = s.scopedDriver(c, req.DriverID); err != nil {
			return api.RegisterAppResponse{}, err
		}
		ns = d.Namespace
	} else if ns, err = scopedNamespace(c, req.Namespace); err != nil {
		return api.RegisterAppResponse{}, err
	}
	if req.Executors < 0 {
		return api.RegisterAppResponse{}, api.Errorf(api.ErrInvalidRequest, "executors must not be negative, got %d", req.Executors)
	}
	limit := req.Executors
	if limit == 0 {
		limit = -1
	}
	artifacts, err := appArtifacts(req, d)
	if err != nil {
		return api.RegisterAppResponse{}, err
	}
	user, err := appUser(c, req, d)
	if err != nil {
		return api.RegisterAppResponse{}, err
	}
	cmd := &model.RegisterApp{
		Token: req.Token, Name: req.Name, DriverID: req.DriverID, DriverAttempt: req.DriverAttempt, DriverRun: req.DriverRun,
		MaxCores: req.MaxCores, CoresPerExecutor: req.CoresPerExecutor, MemoryPerExecutorMB: req.MemoryPerExecutorMB,
		ExecutorLimit: limit, Argv: req.Argv, Env: req.Env, MaxExecutorRetries: s.cfg.MaxExecutorRetries,
		Artifacts: artifacts, ResourcesPerExecutor: req.ExecutorResources, User: user, Namespace: ns,
	}
	// Validated before an ID is taken, so a refused request burns no
	// number.
	if err := cmd.Validate(); err != nil {
		return api.RegisterAppResponse{}, invalidRequest(err)
	}
	if err := checkNewProgram("executor", cmd.CoresPerExecutor, cmd.MemoryPerExecutorMB, cmd.Env); err != nil {
		return api.RegisterAppResponse{}, err
	}
	if err := s.checkProgramSize("executor program", cmd.ProgramSize()); err != nil {
		return api.RegisterAppResponse{}, err
	}
	// Keyed by namespace too: copies of one registration share one
	// entry, and a registration of another namespace reusing the token
	// is refused rather than handed this one's app.
	v, err, _ := s.submits.Do("app\x00"+model.NamespaceOf(cmd.Namespace)+"\x00"+req.Token, func() (any, error) {
		if id, ok := s.FSM.State().AppByToken(req.Token); ok {
			a, _, _ := s.FSM.State().App(id)
			if a != nil {
				if err := sameNamespace("registration", a.Namespace, cmd.Namespace); err != nil {
					return nil, err
				}
			}
			return fsm.RegisterAppResult{AppID: id, Existing: true}, nil
		}
		done, err := s.admitApp(req.Token)
		if err != nil {
			return nil, err
		}
		defer done()
		at := time.Now()
		cmd.ID, cmd.Time = t.IDs.App(at), at.UnixMilli()
		res, err := fsm.RegisterApp.Commit(s.Apply, cmd)
		if err == nil && !res.Existing {
			s.Log.Info("app registered", "app", cmd.ID, "name", req.Name, "driver", req.DriverID,
				"cores_per_executor", req.CoresPerExecutor, "memory_per_executor_mb", req.MemoryPerExecutorMB)
		}
		return res, err
	})
	if err != nil {
		return api.RegisterAppResponse{}, err
	}
	res := v.(fsm.RegisterAppResult)
	t.Apps.Seen(res.AppID, time.Now())
	return api.RegisterAppResponse{AppID: res.AppID, Existing: res.Existing}, nil
}

// App serves V1App; with r.Index it is a blocking read. A driver
// token reads only its own attempt's app.
func (s *Applications) App(ctx context.Context, c auth.Caller, id string, r Read) (api.AppStatus, error) {
	if err := ids.CheckApp(id); err != nil {
		return api.AppStatus{}, api.Errorf(api.ErrInvalidRequest, "%v", err)
	}
	if a, _, ok := s.FSM.State().App(id); ok {
		if err := inScope(c, a.ID, a.Namespace); err != nil {
			return api.AppStatus{}, err
		}
	}
	if err := s.awaitChange(ctx, api.EventApp, id, r); err != nil {
		return api.AppStatus{}, err
	}
	if err := s.recheck(c); err != nil {
		return api.AppStatus{}, err
	}
	if err := s.readable(r); err != nil {
		return api.AppStatus{}, err
	}
	return s.ownApp(c, id)
}

// ownApp returns the app with ID id, as the caller may see it.
func (s *Applications) ownApp(c auth.Caller, id string) (api.AppStatus, error) {
	if err := ids.CheckApp(id); err != nil {
		return api.AppStatus{}, api.Errorf(api.ErrInvalidRequest, "%v", err)
	}
	st, ok := s.currentApp(id)
	if !ok {
		return api.AppStatus{}, api.Errorf(model.ErrUnknownApp, "%s: %s", model.ErrUnknownApp, id)
	}
	if !c.OwnsDriver(st.DriverID, st.DriverAttempt) {
		return api.AppStatus{}, api.Errorf(api.ErrForbidden, "%s may act only on its own driver attempt's app", c.Identity)
	}
	return st, inScope(c, st.ID, st.Namespace)
}

func (s *Applications) currentApp(id string) (api.AppStatus, bool) {
	st, _ := atOneIndex(s.FSM, func() (api.AppStatus, error) {
		a, es, ok := s.FSM.State().App(id)
		if !ok {
			return api.AppStatus{}, nil
		}
		ws := s.FSM.State().Workers()
		return explainApp(api.AppStatus{App: a, Executors: es}, ws, newTenants(s.FSM.State(), ws, s.cfg.MaxRunningDrivers)), nil
	})
	return st, st.App != nil
}

// WatchApp serves V1WatchApp: it answers when the app's status
// differs from etag, the app ends, the term ends, or HeartbeatWait passes.
// Each watch, held or not, is contact from the app's client.
func (s *Applications) WatchApp(ctx context.Context, c auth.Caller, id, etag string) (AppWatch, error) {
	t, err := s.leading()
	if err != nil {
		return AppWatch{}, err
	}
	st, err := s.ownApp(c, id)
	if err != nil {
		return AppWatch{}, err
	}
	t.Apps.Seen(st.ID, time.Now())
	defer t.Apps.Hold(st.ID)()
	timer := time.NewTimer(s.cfg.HeartbeatWait)
	defer timer.Stop()
poll:
	for {
		// Subscribe before reading, so no change falls between the two.
		changed := s.FSM.Changed()
		if cur, ok := s.currentApp(st.ID); ok {
			st = cur
		}
		if appETag(st) != etag || st.State.Terminal() {
			break
		}
		select {
		case <-changed:
		case <-timer.C:
			break poll
		case <-ctx.Done():
			return AppWatch{}, fmt.Errorf("%w: watch ended: %v", api.ErrUnavailable, ctx.Err())
		case <-t.Done():
			break poll
		}
	}
	if err := s.recheck(c); err != nil {
		return AppWatch{}, err
	}
	t.Apps.Seen(st.ID, time.Now())
	return AppWatch{Status: st, ETag: appETag(st)}, nil
}

// appETag is a strong HTTP entity tag of an app's status.
func appETag(s api.AppStatus) string {
	b, _ := json.Marshal(s)
	sum := sha256.Sum256(b)
	return `"` + hex.EncodeToString(sum[:12]) + `"`
}

// appCommand commits a command about the app id, which the caller must
// own, and answers with the app's status after it.
func (s *Applications) appCommand(c auth.Caller, id string, payload func(appID string) model.Command) (api.AppStatus, error) {
	if _, err := s.leading(); err != nil {
		return api.AppStatus{}, err
	}
	st, err := s.ownApp(c, id)
	if err != nil {
		return api.AppStatus{}, err
	}
	if _, err := s.Apply(payload(st.ID)); err != nil {
		return api.AppStatus{}, err
	}
	if cur, ok := s.currentApp(st.ID); ok {
		st = cur
	}
	return st, nil
}

// RequestExecutors serves V1RequestExecutors.
func (s *Applications) RequestExecutors(_ context.Context, c auth.Caller, id string, req api.RequestExecutorsRequest) (api.AppStatus, error) {
	// The tables refuse it too, as an invalid command; refused here, it
	// reads as the request it is and costs no log entry.
	if req.Total < 0 {
		return api.AppStatus{}, invalidRequest(fmt.Errorf("executor total must not be negative, got %d", req.Total))
	}
	return s.appCommand(c, id, func(appID string) model.Command {
		return &model.RequestExecutors{AppID: appID, Total: req.Total, Time: now()}
	})
}

// KillExecutors serves V1KillExecutors.
func (s *Applications) KillExecutors(_ context.Context, c auth.Caller, id string, req api.KillExecutorsRequest) (api.AppStatus, error) {
	if len(req.ExecutorIDs) == 0 {
		return api.AppStatus{}, api.Errorf(api.ErrInvalidRequest, "executor_ids is empty")
	}
	return s.appCommand(c, id, func(appID string) model.Command {
		return &model.KillExecutors{AppID: appID, ExecutorIDs: req.ExecutorIDs, Time: now()}
	})
}

// UnregisterApp serves V1UnregisterApp: the app ends FINISHED (the default)
// or FAILED.
func (s *Applications) UnregisterApp(_ context.Context, c auth.Caller, id string, req api.UnregisterAppRequest) (api.AppStatus, error) {
	if req.State == "" {
		req.State = model.AppFinished
	}
	if req.State != model.AppFinished && req.State != model.AppFailed {
		return api.AppStatus{}, api.Errorf(api.ErrInvalidRequest, "an app unregisters FINISHED or FAILED, not %q", req.State)
	}
	if err := checkReason("message", req.Message, maxAppMessage); err != nil {
		return api.AppStatus{}, err
	}
	return s.appCommand(c, id, func(appID string) model.Command {
		return &model.EndApp{AppID: appID, State: req.State, Reason: req.Message, Time: now()}
	})
}

// KillApp serves V1KillApp.
func (s *Applications) KillApp(_ context.Context, c auth.Caller, id string) (api.AppStatus, error) {
	return s.appCommand(c, id, func(appID string) model.Command {
		return &model.EndApp{AppID: appID, State: model.AppKilled, Time: now()}
	})
}

// ExecutorLogs serves V1ExecutorLogs. Executor IDs are not positions: the
// rows of old finished executors are dropped.
func (s *Applications) ExecutorLogs(ctx context.Context, c auth.Caller, appID string, executor int, q LogQuery, r Read) (*Log, error) {
	if err := s.readable(r); err != nil {
		return nil, err
	}
	st, err := s.ownApp(c, appID)
	if err != nil {
		return nil, err
	}
	for _, e := range st.Executors {
		if e.ID == executor {
			q.Attempt = 0
			return s.workerLog(ctx, logUnit{what: fmt.Sprintf("executor %d of %s", e.ID, st.ID), workerID: e.WorkerID,
				path: api.ExecutorLogsPath(st.ID, e.ID), ended: e.State.Terminal()}, q)
		}
	}
	return nil, api.Errorf(model.ErrUnknownExecutor, "%s has no executor %d", st.ID, executor)
}
