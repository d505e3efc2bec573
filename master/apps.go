package master

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/auth"
	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/model"
)

// appIDPattern is Spark's application ID form.
var appIDPattern = regexp.MustCompile(`^app-[0-9]{14}-[0-9]{1,9}$`)

// appWatchInterval is how often the leader looks for apps whose client
// went quiet, besides on every table change.
const appWatchInterval = time.Second

func (m *Master) appRoutes(mux *http.ServeMux) {
	g := m.guard
	mux.HandleFunc("POST /v1/apps", g.Wrap(auth.App, m.limitSubmits(m.leaderOnly(m.handleRegisterApp))))
	mux.HandleFunc("GET /v1/apps", g.Wrap(auth.Read, m.reader(m.handleApps)))
	mux.HandleFunc("GET /v1/apps/{id}", g.Wrap(auth.AppRead, m.reader(m.handleApp)))
	mux.HandleFunc("GET /v1/apps/{id}/watch", g.Wrap(auth.App, m.leaderOnly(m.handleWatchApp)))
	mux.HandleFunc("POST /v1/apps/{id}/executors", g.Wrap(auth.App, m.leaderOnly(m.handleRequestExecutors)))
	mux.HandleFunc("POST /v1/apps/{id}/executors/kill", g.Wrap(auth.App, m.leaderOnly(m.handleKillExecutors)))
	mux.HandleFunc("POST /v1/apps/{id}/unregister", g.Wrap(auth.App, m.leaderOnly(m.handleUnregisterApp)))
	mux.HandleFunc("POST /v1/apps/{id}/kill", g.Wrap(auth.Submit, m.leaderOnly(m.handleKillApp)))
	mux.HandleFunc("GET /v1/apps/{id}/executors/{eid}/logs", g.Wrap(auth.AppRead, m.reader(m.handleExecutorLogs)))
}

func (m *Master) handleRegisterApp(w http.ResponseWriter, r *http.Request) {
	var req api.RegisterAppRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if !checkTokenAndName(w, "registration", req.Token, req.Name) {
		return
	}
	if id, _ := auth.FromContext(r.Context()); !id.OwnsDriver(req.DriverID, req.DriverAttempt) {
		writeError(w, http.StatusForbidden, fmt.Sprintf("%s may register an app only for its own driver attempt", id))
		return
	}
	switch {
	case req.DriverID != "" && !driverIDPattern.MatchString(req.DriverID):
		writeError(w, http.StatusBadRequest, fmt.Sprintf("%q is not a driver ID (driver-<yyyyMMddHHmmss>-<seq>)", req.DriverID))
		return
	case req.Executors < 0:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("executors must not be negative, got %d", req.Executors))
		return
	}
	limit := req.Executors
	if limit == 0 {
		limit = -1
	}
	cmd := &model.RegisterApp{
		Token: req.Token, Name: req.Name, DriverID: req.DriverID, DriverAttempt: req.DriverAttempt, DriverRun: req.DriverRun,
		MaxCores: req.MaxCores, CoresPerExecutor: req.CoresPerExecutor, MemoryPerExecutorMB: req.MemoryPerExecutorMB,
		ExecutorLimit: limit, Argv: req.Argv, Env: req.Env, MaxExecutorRetries: m.cfg.MaxExecutorRetries,
	}
	// Validate before taking an ID, so a refused request burns no number.
	cmd.ID = "app-00000000000000-0"
	if err := model.ValidateRegisterApp(cmd); err != nil {
		writeApplyError(w, err)
		return
	}
	if !ownEnv(w, req.Env) {
		return
	}
	v, err, _ := m.submits.Do("app\x00"+req.Token, func() (any, error) {
		if id, ok := m.fsm.AppByToken(req.Token); ok {
			return fsm.RegisterAppResult{AppID: id, Existing: true}, nil
		}
		t := time.Now()
		cmd.ID, cmd.Time = m.ids.appID(t), t.UnixMilli()
		res, err := m.apply(model.CmdRegisterApp, cmd)
		if err == nil && !res.(fsm.RegisterAppResult).Existing {
			m.log.Info("app registered", "app", cmd.ID, "name", req.Name, "driver", req.DriverID,
				"cores_per_executor", req.CoresPerExecutor, "memory_per_executor_mb", req.MemoryPerExecutorMB)
		}
		return res, err
	})
	if err != nil {
		writeApplyError(w, err)
		return
	}
	res := v.(fsm.RegisterAppResult)
	m.appContact.seen(res.AppID, time.Now())
	writeJSON(w, http.StatusOK, api.RegisterAppResponse{AppID: res.AppID, Existing: res.Existing})
}

func (m *Master) handleApps(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, m.appStatuses())
}

// appStatuses returns every app with its executors, waiting ones explained.
func (m *Master) appStatuses() []api.AppStatus {
	apps, execs := m.fsm.Apps()
	ws := m.fsm.Workers()
	out := make([]api.AppStatus, len(apps))
	for i, a := range apps {
		out[i] = explainApp(api.AppStatus{App: a, Executors: execs[i]}, ws)
	}
	return out
}

// pathApp returns the app named in the path with its executors, answering
// 400 or 404 itself when there is none.
func (m *Master) pathApp(w http.ResponseWriter, r *http.Request) (api.AppStatus, bool) {
	id := r.PathValue("id")
	if !appIDPattern.MatchString(id) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("%q is not an app ID (app-<yyyyMMddHHmmss>-<seq>)", id))
		return api.AppStatus{}, false
	}
	s, ok := m.currentApp(id)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("%s: %s", model.ErrUnknownApp, id))
		return s, false
	}
	if caller, _ := auth.FromContext(r.Context()); !caller.OwnsDriver(s.DriverID, s.DriverAttempt) {
		writeError(w, http.StatusForbidden, fmt.Sprintf("%s may act only on its own driver attempt's app", caller))
		return api.AppStatus{}, false
	}
	return s, true
}

func (m *Master) handleApp(w http.ResponseWriter, r *http.Request) {
	if s, ok := m.pathApp(w, r); ok {
		writeJSON(w, http.StatusOK, s)
	}
}

// explainApp sets the message of an app that wants executors and has none
// to why it waits (Spark's "requires more resources than any of our
// workers have"); like explainWaiting, it is computed on read.
func explainApp(s api.AppStatus, ws []*model.Worker) api.AppStatus {
	a := s.App
	if a.State.Terminal() || a.CoresLeft() == 0 || a.ExecutorLimit == 0 {
		return s
	}
	for _, e := range s.Executors {
		if !e.State.Terminal() {
			return s
		}
	}
	a.Message = waitReason(ws, a.CoresPerExecutor, a.MemoryPerExecutorMB, " per executor")
	return s
}

// waitReason says why something asking for cores and memory (MiB) on one
// worker is not placed; what qualifies the request in the message.
func waitReason(ws []*model.Worker, cores int, memoryMB int64, what string) string {
	var alive, fits, room, maxCores int
	var maxMem int64
	for _, w := range ws {
		if w.State != model.WorkerAlive {
			continue
		}
		alive++
		maxCores, maxMem = max(maxCores, w.Cores), max(maxMem, w.MemoryMB)
		if w.Cores >= cores && w.MemoryMB >= memoryMB {
			fits++
		}
		if w.CoresFree() >= cores && w.MemoryFreeMB() >= memoryMB {
			room++
		}
	}
	switch {
	case alive == 0:
		return "waiting: no ALIVE worker"
	case fits == 0:
		return fmt.Sprintf("waiting: %s (asks %d cores, %d MiB%s; the largest worker offers %d cores, %d MiB)",
			api.ReasonUnplaceable, cores, memoryMB, what, maxCores, maxMem)
	case room > 0:
		return waitReasonQueued
	}
	return waitReasonFree
}

// Why something waits that fits on some ALIVE worker: there is room now,
// and the leader's next scheduling round places it; or there is none.
const (
	waitReasonQueued = "queued for placement"
	waitReasonFree   = "waiting for a worker with free resources"
)

// handleWatchApp is the app client's long poll: it answers when the app's
// status differs from the If-None-Match ETag, or after heartbeatWait. Each
// watch, held or not, is contact from the app's client.
func (m *Master) handleWatchApp(w http.ResponseWriter, r *http.Request) {
	s, ok := m.pathApp(w, r)
	if !ok {
		return
	}
	m.appContact.seen(s.ID, time.Now())
	defer m.appContact.hold(s.ID)()
	seen := r.Header.Get("If-None-Match")
	timer := time.NewTimer(m.cfg.heartbeatWait())
	defer timer.Stop()
poll:
	for {
		// Subscribe before reading, so no change falls between the two.
		changed := m.fsm.Changed()
		if cur, ok := m.currentApp(s.ID); ok {
			s = cur
		}
		if appETag(s) != seen || s.State.Terminal() || !m.ready.Load() {
			break
		}
		select {
		case <-changed:
		case <-timer.C:
			break poll
		case <-r.Context().Done():
			return
		case <-m.stop:
			return
		}
	}
	m.appContact.seen(s.ID, time.Now())
	m.writeApp(w, s)
}

func (m *Master) currentApp(id string) (api.AppStatus, bool) {
	a, es, ok := m.fsm.App(id)
	if !ok {
		return api.AppStatus{}, false
	}
	return explainApp(api.AppStatus{App: a, Executors: es}, m.fsm.Workers()), true
}

func (m *Master) writeApp(w http.ResponseWriter, s api.AppStatus) {
	w.Header().Set("ETag", appETag(s))
	writeJSON(w, http.StatusOK, s)
}

// appETag is a strong HTTP entity tag of an app's status.
func appETag(s api.AppStatus) string {
	b, _ := json.Marshal(s)
	sum := sha256.Sum256(b)
	return `"` + hex.EncodeToString(sum[:12]) + `"`
}

// appCommand applies a command about the app in the path and answers with
// the app's status.
func (m *Master) appCommand(w http.ResponseWriter, r *http.Request, make func(id string) (model.CommandType, any)) {
	s, ok := m.pathApp(w, r)
	if !ok {
		return
	}
	t, payload := make(s.ID)
	if payload == nil {
		return
	}
	if _, err := m.apply(t, payload); err != nil {
		writeApplyError(w, err)
		return
	}
	if cur, ok := m.currentApp(s.ID); ok {
		s = cur
	}
	writeJSON(w, http.StatusOK, s)
}

func (m *Master) handleRequestExecutors(w http.ResponseWriter, r *http.Request) {
	var req api.RequestExecutorsRequest
	if !decodeBody(w, r, &req) {
		return
	}
	m.appCommand(w, r, func(id string) (model.CommandType, any) {
		return model.CmdRequestExecutors, &model.RequestExecutors{AppID: id, Total: req.Total, Time: now()}
	})
}

func (m *Master) handleKillExecutors(w http.ResponseWriter, r *http.Request) {
	var req api.KillExecutorsRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if len(req.ExecutorIDs) == 0 {
		writeError(w, http.StatusBadRequest, "executor_ids is empty")
		return
	}
	m.appCommand(w, r, func(id string) (model.CommandType, any) {
		return model.CmdKillExecutors, &model.KillExecutors{AppID: id, ExecutorIDs: req.ExecutorIDs, Time: now()}
	})
}

func (m *Master) handleUnregisterApp(w http.ResponseWriter, r *http.Request) {
	var req api.UnregisterAppRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if req.State == "" {
		req.State = model.AppFinished
	}
	if req.State != model.AppFinished && req.State != model.AppFailed {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("an app unregisters FINISHED or FAILED, not %q", req.State))
		return
	}
	if len(req.Message) > 1024 {
		writeError(w, http.StatusBadRequest, "message exceeds 1024 bytes")
		return
	}
	m.appCommand(w, r, func(id string) (model.CommandType, any) {
		return model.CmdEndApp, &model.EndApp{AppID: id, State: req.State, Reason: req.Message, Time: now()}
	})
}

func (m *Master) handleKillApp(w http.ResponseWriter, r *http.Request) {
	if !noBody(w, r) {
		return
	}
	m.appCommand(w, r, func(id string) (model.CommandType, any) {
		return model.CmdEndApp, &model.EndApp{AppID: id, State: model.AppKilled, Time: now()}
	})
}

// handleExecutorLogs proxies to the worker that ran the executor.
func (m *Master) handleExecutorLogs(w http.ResponseWriter, r *http.Request) {
	s, ok := m.pathApp(w, r)
	if !ok {
		return
	}
	e, ok := pathExecutor(s, r.PathValue("eid"))
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("%s has no executor %q", s.ID, r.PathValue("eid")))
		return
	}
	q := r.URL.Query()
	q.Del("stale")
	m.proxyToWorker(w, r, e.WorkerID, q, fmt.Sprintf("executor %d of %s", e.ID, s.ID))
}

// pathExecutor returns the executor of s whose ID is eid. IDs are not
// positions: the rows of old finished executors are dropped.
func pathExecutor(s api.AppStatus, eid string) (*model.Executor, bool) {
	n, err := strconv.Atoi(eid)
	if err != nil || strconv.Itoa(n) != eid {
		return nil, false
	}
	for _, e := range s.Executors {
		if e.ID == n {
			return e, true
		}
	}
	return nil, false
}

// watchApps ends apps whose client stopped watching for AppTimeout, while
// this master leads. Like a worker's, an app's clock starts no earlier than
// the moment this master took over, so a failover ends no app.
func (m *Master) watchApps(ctx context.Context) {
	start := time.Now()
	tick := time.NewTicker(appWatchInterval)
	defer tick.Stop()
	for {
		apps, _ := m.fsm.LiveApps()
		t := time.Now()
		for _, a := range apps {
			if a.State.Terminal() {
				continue
			}
			heard := start
			for _, t := range []time.Time{time.UnixMilli(a.SubmittedAt), m.appContact.get(a.ID)} {
				if t.After(heard) {
					heard = t
				}
			}
			if t.Sub(heard) < m.cfg.AppTimeout {
				continue
			}
			reason := fmt.Sprintf("application client not heard from for %s", m.cfg.AppTimeout)
			m.log.Warn("app client lost", "app", a.ID, "silent_for", t.Sub(heard).Round(time.Millisecond))
			if _, err := m.apply(model.CmdEndApp, &model.EndApp{AppID: a.ID, State: model.AppFailed, Reason: reason, Time: now()}); err != nil {
				m.log.Warn("app end not committed", "app", a.ID, "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
