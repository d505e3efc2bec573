package master

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/raft"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/auth"
	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/gossip"
	"github.com/drover-project/drover/internal/strictjson"
	"github.com/drover-project/drover/model"
)

// driverIDPattern is Spark's driver ID form; anything else is refused before
// it reaches the tables or a worker's file system.
var driverIDPattern = regexp.MustCompile(`^driver-[0-9]{14}-[0-9]{1,9}$`)

// workerIDPattern bounds worker IDs to names safe in paths, logs and gossip.
var workerIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func (m *Master) startHTTP() error {
	mux := http.NewServeMux()
	g := m.guard
	mux.HandleFunc("POST /v1/drivers", g.Wrap(auth.Submit, m.limitSubmits(m.leaderOnly(m.handleSubmit))))
	mux.HandleFunc("GET /v1/drivers", g.Wrap(auth.Read, m.reader(m.handleList)))
	mux.HandleFunc("GET /v1/drivers/{id}", g.Wrap(auth.Read, m.reader(m.handleStatus)))
	mux.HandleFunc("POST /v1/drivers/{id}/kill", g.Wrap(auth.Submit, m.leaderOnly(m.handleKill)))
	mux.HandleFunc("GET /v1/drivers/{id}/logs", g.Wrap(auth.Read, m.reader(m.handleLogs)))
	mux.HandleFunc("POST /v1/workers/register", g.Wrap(auth.Node, m.leaderOnly(m.handleRegisterWorker)))
	mux.HandleFunc("POST /v1/workers/{id}/heartbeat", g.Wrap(auth.Node, m.leaderOnly(m.handleHeartbeat)))
	mux.HandleFunc("POST /v1/workers/{id}/decommission", g.Wrap(auth.Node, m.leaderOnly(m.handleDecommission)))
	m.appRoutes(mux)
	mux.HandleFunc("GET /v1/state", g.Wrap(auth.Read, m.handleState))
	m.uiRoutes(mux)
	m.operatorRoutes(mux)
	m.metricsRoutes(mux)
	mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no such endpoint: %s %s", r.Method, r.URL.Path))
	})
	ln, err := net.Listen("tcp", m.cfg.httpAddr())
	if err != nil {
		return fmt.Errorf("http listen: %w", err)
	}
	ln = m.conns.Wrap(ln)
	m.ln = ln
	if m.tls.http != nil {
		ln = tls.NewListener(ln, m.tls.http)
	}
	m.server = m.newHTTPServer(m.metrics.instrument(m.withLeaderHeader(mux)))
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		if err := m.server.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.log.Error("http server", "err", err)
		}
	}()
	return nil
}

// newHTTPServer is an HTTP server with the timeouts and limits of every
// listener of a master.
func (m *Master) newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		// Handshake failures and the like are what any client can cause,
		// as often as it likes: debug, not info.
		ErrorLog: slog.NewLogLogger(m.log.With("component", "http").Handler(), slog.LevelDebug),
	}
}

func (m *Master) withLeaderHeader(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(api.HeaderServedBy, m.cfg.ID)
		if l := m.leaderHTTP(); l != "" {
			w.Header().Set(api.HeaderLeader, l)
		}
		if r.Header.Get(api.HeaderForwarded) != "" && !m.forwardedByPeer(r) {
			writeError(w, http.StatusForbidden, api.HeaderForwarded+" may only come from a master certificate")
			return
		}
		limit := int64(api.MaxBodyBytes)
		if r.Method == http.MethodPost && r.URL.Path == "/v1/operator/snapshot" {
			// A snapshot is as large as the tables; give it time too.
			limit = api.MaxSnapshotBytes
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(10 * time.Minute))
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		h.ServeHTTP(w, r)
	})
}

// leaderHTTP returns the leader's HTTP address, from its Raft ID and the
// gossip metadata, or "" when no leader is known.
func (m *Master) leaderHTTP() string {
	_, id := m.raft.LeaderWithID()
	if id == "" {
		return ""
	}
	if string(id) == m.cfg.ID {
		return m.cfg.httpAddr()
	}
	meta, ok := m.pool.Lookup(gossip.RoleMaster, string(id))
	if !ok {
		return ""
	}
	return meta.HTTP
}

// leaderOnly runs h on the ready leader and forwards the request to the
// leader from anywhere else.
func (m *Master) leaderOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if m.ready.Load() {
			h(w, r)
			return
		}
		m.forward(w, r)
	}
}

// reader runs h locally when the caller accepts a stale answer (stale=true)
// or this master is the ready leader, and forwards to the leader otherwise.
// On the leader the read is linearizable: it first confirms with a quorum
// that it still leads (raft.VerifyLeader), and every entry it acknowledged
// is already applied.
func (m *Master) reader(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("stale") == "true" {
			h(w, r)
			return
		}
		if !m.ready.Load() {
			m.forward(w, r)
			return
		}
		if err := m.raft.VerifyLeader().Error(); err != nil {
			writeError(w, http.StatusServiceUnavailable, "leadership not confirmed: "+err.Error())
			return
		}
		h(w, r)
	}
}

// forward proxies the request to the leader, once: a request that was
// already forwarded is answered 503 instead, so two masters with different
// ideas of the leader cannot bounce it between them.
func (m *Master) forward(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(api.HeaderForwarded) != "" {
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("master %s is not the leader", m.cfg.ID))
		return
	}
	if m.raft.State() == raft.Leader {
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("master %s was just elected and is catching up", m.cfg.ID))
		return
	}
	_, leaderID := m.raft.LeaderWithID()
	leader := m.leaderHTTP()
	if leader == "" {
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("master %s knows no leader", m.cfg.ID))
		return
	}
	// A leader that stops answering (paused, cut off) is replaced within
	// an election timeout; drop the forwarded request then, so the client
	// hears 503 and retries, instead of waiting on a deposed leader.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if _, id := m.raft.LeaderWithID(); id != leaderID {
					cancel()
					return
				}
			}
		}
	}()
	r = r.WithContext(ctx)
	target := &url.URL{Scheme: m.scheme(), Host: leader}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = leader
			pr.Out.Header.Set(api.HeaderForwarded, m.cfg.ID)
		},
		Transport: m.fwd.Transport,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit))
				return
			}
			writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("master %s could not reach leader %s: %v", m.cfg.ID, leader, err))
		},
	}
	proxy.ServeHTTP(w, r)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	e := api.Error{Error: msg}
	if status == http.StatusServiceUnavailable {
		e.Leader = w.Header().Get(api.HeaderLeader)
	}
	writeJSON(w, status, e)
}

// writeApplyError maps an error from apply or validation to a status code.
func writeApplyError(w http.ResponseWriter, err error) {
	var unavailable *unavailableError
	switch {
	case errors.As(err, &unavailable):
		writeError(w, http.StatusServiceUnavailable, err.Error())
	case errors.Is(err, model.ErrUnknownDriver), errors.Is(err, model.ErrUnknownWorker),
		errors.Is(err, model.ErrUnknownApp), errors.Is(err, model.ErrUnknownExecutor):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, model.ErrDriverEnded), errors.Is(err, model.ErrAppEnded), errors.Is(err, model.ErrStaleAttempt):
		writeError(w, http.StatusConflict, err.Error())
	case errors.Is(err, model.ErrInvalidCommand):
		writeError(w, http.StatusBadRequest, err.Error())
	default:
		writeError(w, http.StatusInternalServerError, err.Error())
	}
}

// checkTokenAndName answers 400 itself unless a request carries a token
// (for what: submission, registration) of at most api.MaxTokenLen bytes and
// a valid name.
func checkTokenAndName(w http.ResponseWriter, what, token, name string) bool {
	var msg string
	switch {
	case token == "":
		msg = "a " + what + " token is required"
	case len(token) > api.MaxTokenLen:
		msg = fmt.Sprintf("token exceeds %d bytes", api.MaxTokenLen)
	case validName(name) != nil:
		msg = validName(name).Error()
	default:
		return true
	}
	writeError(w, http.StatusBadRequest, msg)
	return false
}

// validName checks a driver's or app's name: at most 256 bytes of UTF-8
// text without control characters, since names end up in terminals, logs
// and pages.
func validName(s string) error {
	if len(s) > 256 {
		return errors.New("name exceeds 256 bytes")
	}
	if !utf8.ValidString(s) {
		return errors.New("name is not UTF-8")
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("name contains the control character %U", r)
		}
	}
	return nil
}

// ownEnv answers 400 itself when a submission sets a DROVER_ variable: the
// worker sets those (the driver's token and CA among them), and the
// replicated tables already refuse the ones they know; a new one is refused
// here, before Raft, so that older log entries replay as they did.
func ownEnv(w http.ResponseWriter, env map[string]string) bool {
	for k := range env {
		if strings.HasPrefix(k, "DROVER_") {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("environment name %s is reserved: DROVER_ variables are set by the worker", k))
			return false
		}
	}
	return true
}

// noBody answers 400 itself when a request that takes no body has one.
func noBody(w http.ResponseWriter, r *http.Request) bool {
	var b [1]byte
	if n, _ := r.Body.Read(b[:]); n > 0 {
		writeError(w, http.StatusBadRequest, "this request takes no body")
		return false
	}
	return true
}

// decodeBody reads a strict JSON body into v, answering 400 or 413 itself.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := strictjson.Decode(r.Body, v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit))
			return false
		}
		writeError(w, http.StatusBadRequest, err.Error())
		return false
	}
	return true
}

func (m *Master) handleSubmit(w http.ResponseWriter, r *http.Request) {
	var req api.SubmitRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if !checkTokenAndName(w, "submission", req.Token, req.Name) {
		return
	}
	if err := model.ValidateProgram(req.Argv, req.Env, req.Cores, req.MemoryMB); err != nil {
		writeApplyError(w, err)
		return
	}
	if !ownEnv(w, req.Env) {
		return
	}
	v, err, _ := m.submits.Do(req.Token, func() (any, error) {
		if id, ok := m.fsm.DriverByToken(req.Token); ok {
			return fsm.SubmitResult{DriverID: id, Existing: true}, nil
		}
		t := time.Now()
		return m.apply(model.CmdSubmitDriver, &model.SubmitDriver{
			ID: m.ids.driverID(t), Token: req.Token, Name: req.Name, Argv: req.Argv, Env: req.Env,
			Cores: req.Cores, MemoryMB: req.MemoryMB, Supervise: req.Supervise, Time: t.UnixMilli(),
		})
	})
	if err != nil {
		writeApplyError(w, err)
		return
	}
	res := v.(fsm.SubmitResult)
	writeJSON(w, http.StatusOK, api.SubmitResponse{DriverID: res.DriverID, Existing: res.Existing})
}

func (m *Master) handleList(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, explainWaiting(m.fsm.Drivers(), m.fsm.Workers()))
}

// explainWaiting sets the message of each waiting driver to why it waits;
// the tables hold no such reason, since it changes with every worker.
func explainWaiting(ds []*model.Driver, ws []*model.Worker) []*model.Driver {
	for _, d := range ds {
		if d.WorkerID != "" || d.State.Terminal() {
			continue
		}
		reason := waitReason(ws, d.Cores, d.MemoryMB, "")
		// A relaunching driver keeps saying why it was relaunched while
		// there is room for it somewhere.
		if d.Message == "" || (reason != waitReasonFree && reason != waitReasonQueued) {
			d.Message = reason
		}
	}
	return ds
}

// pathDriver returns the driver named in the path, answering 400 or 404
// itself when there is none.
func (m *Master) pathDriver(w http.ResponseWriter, r *http.Request) (*model.Driver, bool) {
	id := r.PathValue("id")
	if !driverIDPattern.MatchString(id) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("%q is not a driver ID (driver-<yyyyMMddHHmmss>-<seq>)", id))
		return nil, false
	}
	d, ok := m.fsm.Driver(id)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("%s: %s", model.ErrUnknownDriver, id))
		return nil, false
	}
	return d, true
}

func (m *Master) handleStatus(w http.ResponseWriter, r *http.Request) {
	if d, ok := m.pathDriver(w, r); ok {
		writeJSON(w, http.StatusOK, explainWaiting([]*model.Driver{d}, m.fsm.Workers())[0])
	}
}

func (m *Master) handleKill(w http.ResponseWriter, r *http.Request) {
	if !noBody(w, r) {
		return
	}
	d, ok := m.pathDriver(w, r)
	if !ok {
		return
	}
	if _, err := m.apply(model.CmdKillDriver, &model.KillDriver{DriverID: d.ID, Time: now()}); err != nil {
		writeApplyError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.KillResponse{DriverID: d.ID})
}

// handleLogs proxies to the worker that ran the driver's latest attempt,
// which keeps the files (Spark's UI links to the worker the same way).
func (m *Master) handleLogs(w http.ResponseWriter, r *http.Request) {
	d, ok := m.pathDriver(w, r)
	if !ok {
		return
	}
	if len(d.Attempts) == 0 {
		writeError(w, http.StatusNotFound, fmt.Sprintf("%s has not been placed on a worker yet", d.ID))
		return
	}
	rec := d.Attempts[len(d.Attempts)-1]
	q := r.URL.Query()
	q.Del("stale")
	if a := q.Get("attempt"); a != "" {
		n, err := strconv.Atoi(a)
		var found bool
		for _, x := range d.Attempts {
			if err == nil && x.Attempt == n {
				rec, found = x, true
			}
		}
		if !found {
			writeError(w, http.StatusNotFound, fmt.Sprintf("%s has no attempt %q", d.ID, a))
			return
		}
	}
	q.Set("attempt", strconv.Itoa(rec.Attempt))
	m.proxyToWorker(w, r, rec.WorkerID, q, d.ID)
}

// proxyToWorker passes a log request on to a worker, which keeps the files
// (Spark's UI links to the worker the same way), with query q; what names
// the driver or executor in errors.
func (m *Master) proxyToWorker(w http.ResponseWriter, r *http.Request, workerID string, q url.Values, what string) {
	wk, ok := m.fsm.Worker(workerID)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("worker %s of %s is unknown", workerID, what))
		return
	}
	target := &url.URL{Scheme: m.scheme(), Host: wk.HTTPAddr}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.URL.RawQuery = q.Encode()
			m.asMasterToWorker(pr.Out.Header)
		},
		Transport: m.toWorkers.Transport,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			writeError(w, http.StatusBadGateway, fmt.Sprintf("worker %s at %s: %v", wk.ID, wk.HTTPAddr, err))
		},
	}
	proxy.ServeHTTP(w, r)
}

// asMasterToWorker makes h, the headers of a request this master passes on
// to a worker, carry this master's credential and not the caller's: the
// caller's token (in Authorization or the UI's cookie) is for the masters;
// a worker knows masters by their certificate, or without TLS by the
// operator token.
func (m *Master) asMasterToWorker(h http.Header) {
	h.Del("Authorization")
	h.Del("Cookie")
	if m.tls.worker == nil && m.cfg.OperatorToken != "" {
		h.Set("Authorization", "Bearer "+m.cfg.OperatorToken)
	}
}

// memberWait is how long a registration waits for its worker to appear in
// the gossip pool: a worker starts gossiping and registering at once, and
// its join usually lands first by milliseconds.
const memberWait = 3 * time.Second

// awaitMember reports whether the worker id, with this HTTP address, is an
// alive gossip member, waiting up to memberWait for it.
func (m *Master) awaitMember(ctx context.Context, id, httpAddr string) bool {
	ctx, cancel := context.WithTimeout(ctx, memberWait)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if meta, ok := m.pool.Lookup(gossip.RoleWorker, id); ok && meta.HTTP == httpAddr {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}

func (m *Master) handleRegisterWorker(w http.ResponseWriter, r *http.Request) {
	var req api.RegisterWorkerRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if !workerIDPattern.MatchString(req.ID) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("worker ID %q must match %s", req.ID, workerIDPattern))
		return
	}
	if _, _, err := net.SplitHostPort(req.HTTPAddr); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("http_addr %q: %v", req.HTTPAddr, err))
		return
	}
	if req.Cores <= 0 || req.MemoryMB <= 0 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("a worker needs positive cores and memory, got %d cores and %d MiB", req.Cores, req.MemoryMB))
		return
	}
	if old, ok := m.fsm.Worker(req.ID); ok && old.Instance != req.Instance && old.State != model.WorkerDead {
		// Another process holds this worker ID. Take over only once it
		// has been silent as long as it would take to declare it lost.
		heard := m.contact.get(req.ID)
		if since := time.Unix(0, m.leadingSince.Load()); since.After(heard) {
			heard = since
		}
		if quiet := time.Since(heard); quiet < m.cfg.lossDelay() {
			writeError(w, http.StatusConflict, fmt.Sprintf(
				"worker ID %s is in use by another worker process at %s (heard from %s ago); give this one its own --id",
				req.ID, old.HTTPAddr, quiet.Round(time.Millisecond)))
			return
		}
	}
	if !m.cfg.RegisterWithoutGossip && !m.awaitMember(r.Context(), req.ID, req.HTTPAddr) {
		writeError(w, http.StatusConflict, fmt.Sprintf(
			"worker %s at %s is not a member of the gossip pool: check its --join addresses and that its --gossip-key-file matches the masters'",
			req.ID, req.HTTPAddr))
		return
	}
	// A worker sends its registration to every master; the copies that
	// followers forward arrive together, and one Raft entry serves them
	// all. One that finds the worker already registered as it asks
	// commits nothing.
	_, err, _ := m.submits.Do("worker\x00"+req.ID+"\x00"+req.Instance, func() (any, error) {
		if old, ok := m.fsm.Worker(req.ID); ok && old.State == model.WorkerAlive && old.Instance == req.Instance &&
			old.HTTPAddr == req.HTTPAddr && old.Cores == req.Cores && old.MemoryMB == req.MemoryMB {
			return nil, nil
		}
		res, err := m.apply(model.CmdRegisterWorker, &model.RegisterWorker{
			ID: req.ID, Instance: req.Instance, HTTPAddr: req.HTTPAddr, Cores: req.Cores, MemoryMB: req.MemoryMB, Time: now(),
		})
		if err == nil {
			m.log.Info("worker registered", "worker", req.ID, "addr", req.HTTPAddr, "cores", req.Cores, "memory_mb", req.MemoryMB)
		}
		return res, err
	})
	if err != nil {
		writeApplyError(w, err)
		return
	}
	m.contact.seen(req.ID, time.Now())
	writeJSON(w, http.StatusOK, api.RegisterWorkerResponse{WorkerID: req.ID})
}

func (m *Master) handleDecommission(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var req api.DecommissionWorkerRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if len(req.Reason) > 256 {
		writeError(w, http.StatusBadRequest, "reason exceeds 256 bytes")
		return
	}
	if wk, ok := m.fsm.Worker(id); ok && wk.Instance != req.Instance {
		writeError(w, http.StatusConflict, fmt.Sprintf("worker ID %s is registered by another worker process", id))
		return
	}
	if _, err := m.apply(model.CmdDecommissionWorker, &model.DecommissionWorker{WorkerID: id, Reason: req.Reason, Time: now()}); err != nil {
		writeApplyError(w, err)
		return
	}
	m.log.Info("worker decommissioned", "worker", id, "reason", req.Reason)
	writeJSON(w, http.StatusOK, api.RegisterWorkerResponse{WorkerID: id})
}

func (m *Master) handleHeartbeat(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var req api.HeartbeatRequest
	if !decodeBody(w, r, &req) {
		return
	}
	wk, ok := m.fsm.Worker(id)
	if !ok || wk.Instance != req.Instance {
		writeJSON(w, http.StatusOK, api.HeartbeatResponse{Registered: false, Index: m.fsm.Index()})
		return
	}
	// A heartbeat held in a long poll counts as contact throughout.
	m.contact.seen(id, time.Now())
	defer m.contact.hold(id)()
	// Reports are taken from any known worker: a decommissioned one
	// reports the attempts it stops, a lost one its zombies' ends. Apply
	// keeps them from touching anything but the attempts they name.
	var acked []model.AttemptReport
	var ackedExecs []model.ExecutorReport
	if len(req.Reports) > 0 || len(req.ExecutorReports) > 0 {
		if _, err := m.apply(model.CmdReportAttempts, &model.ReportAttempts{
			WorkerID: id, Reports: req.Reports, Executors: req.ExecutorReports, Time: now(),
		}); err != nil {
			writeApplyError(w, err)
			return
		}
		acked, ackedExecs = req.Reports, req.ExecutorReports
	}
	if wk.State != model.WorkerAlive {
		writeJSON(w, http.StatusOK, api.HeartbeatResponse{Registered: false, Acked: acked, AckedExecutors: ackedExecs, Index: m.fsm.Index()})
		return
	}
	if len(acked) == 0 && len(ackedExecs) == 0 && req.WaitIndex > 0 {
		m.waitForChange(r.Context(), id, req)
	}
	if m.cfg.strict() {
		// The worker fences itself by this answer: it must come from a
		// leader a quorum still follows, not from one deposed a moment ago.
		if err := m.raft.VerifyLeader().Error(); err != nil {
			writeError(w, http.StatusServiceUnavailable, "leadership not confirmed: "+err.Error())
			return
		}
	}
	m.contact.seen(id, time.Now())
	// Tokens only on the answer: running() compares assignments on every
	// commit a held heartbeat wakes for, and needs no HMAC.
	as := m.assignments(id)
	for i := range as {
		as[i].Token = m.guard.DriverToken(as[i].DriverID, as[i].Attempt)
	}
	writeJSON(w, http.StatusOK, api.HeartbeatResponse{
		Registered:     true,
		Assignments:    as,
		Executors:      m.executorAssignments(id),
		Acked:          acked,
		AckedExecutors: ackedExecs,
		Index:          m.fsm.Index(),
	})
}

// waitForChange holds a heartbeat until the worker's desired set differs
// from what it runs, or heartbeatWait passes, or leadership is lost.
func (m *Master) waitForChange(ctx context.Context, workerID string, req api.HeartbeatRequest) {
	timer := time.NewTimer(m.cfg.heartbeatWait())
	defer timer.Stop()
	for {
		changed := m.fsm.WorkerChanged(workerID)
		as, es := m.running(workerID)
		if !sameSet(as, req.Running) || !sameSet(es, req.RunningExecutors) || !m.ready.Load() {
			return
		}
		select {
		case <-changed:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		case <-m.stop:
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
func (m *Master) running(workerID string) ([]api.AttemptRef, []api.ExecutorRef) {
	as := m.assignments(workerID)
	es := m.executorAssignments(workerID)
	ar := make([]api.AttemptRef, len(as))
	for i, a := range as {
		ar[i] = api.AttemptRef{DriverID: a.DriverID, Attempt: a.Attempt}
	}
	er := make([]api.ExecutorRef, len(es))
	for i, e := range es {
		er[i] = api.ExecutorRef{AppID: e.AppID, ExecutorID: e.ExecutorID}
	}
	return ar, er
}

// executorAssignments is the desired set of executors of a worker: every
// live executor placed on it, with its app's program.
func (m *Master) executorAssignments(workerID string) []api.ExecutorAssignment {
	es, apps := m.fsm.ExecutorsOn(workerID)
	out := make([]api.ExecutorAssignment, len(es))
	for i, e := range es {
		out[i] = api.ExecutorAssignment{
			AppID: e.AppID, ExecutorID: e.ID, Argv: apps[i].Argv, Env: apps[i].Env,
			Cores: e.Cores, MemoryMB: e.MemoryMB,
		}
	}
	return out
}

// assignments is the desired set of a worker: the current attempt of every
// unfinished driver placed on it.
func (m *Master) assignments(workerID string) []api.Assignment {
	ds := m.fsm.DriversOn(workerID)
	out := make([]api.Assignment, 0, len(ds))
	for _, d := range ds {
		out = append(out, api.Assignment{
			DriverID: d.ID, Attempt: d.Attempt, Argv: d.Argv, Env: d.Env,
			Cores: d.Cores, MemoryMB: d.MemoryMB, Supervise: d.Supervise,
		})
	}
	return out
}

// State returns this master's own view of the cluster (what /v1/state
// serves).
func (m *Master) State() api.State {
	s := api.State{
		ID:             m.cfg.ID,
		Role:           m.raft.State().String(),
		LeaderHTTP:     m.leaderHTTP(),
		CommitIndex:    m.raft.CommitIndex(),
		AppliedIndex:   m.raft.AppliedIndex(),
		Workers:        m.fsm.Workers(),
		Drivers:        m.fsm.Drivers(),
		WaitingDrivers: []string{},
	}
	_, leaderID := m.raft.LeaderWithID()
	s.Leader = string(leaderID)
	fmt.Sscan(m.raft.Stats()["term"], &s.Term)
	for _, d := range m.fsm.WaitingDrivers() {
		s.WaitingDrivers = append(s.WaitingDrivers, d.ID)
	}
	if peers, err := m.peers(); err == nil {
		s.Masters = peers.Peers
	}
	s.Apps = m.appStatuses()
	s.StateHash, _ = m.fsm.StateHash()
	return s
}

func (m *Master) handleState(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, m.State())
}
