// Package httpapi is a master's /v1 listener: for each endpoint it
// establishes the caller, decodes the request, calls the service and
// encodes the answer. It decides nothing itself; every rule, forwarding to
// the leader included, is the service's (package service). The endpoints
// are listed in package api; beside them it serves /metrics and Spark's
// master JSON at /json (package masterjson).
package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/internal/strictjson"
	"github.com/drover-project/drover/master/metrics"
	"github.com/drover-project/drover/master/service"
	"github.com/drover-project/drover/master/spark/masterjson"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/security/auth"
	"github.com/drover-project/drover/transport"
)

// snapshotTimeout bounds a snapshot's upload or download, which is as
// large as the tables.
const snapshotTimeout = 10 * time.Minute

// Config is what the listener works with.
type Config struct {
	Service service.Service
	Guard   *auth.Guard
	// Leadership tells what this master knows of the leader, for the
	// headers of every answer.
	Leadership func() service.Leadership
	Metrics    *metrics.Metrics
	Log        *slog.Logger
	// Spark is what /json says of this master.
	Spark masterjson.Site
	// Gate refuses, before any handler, a request under a Host this
	// master does not answer to and a write another site sent
	// (transport.Gate): for the web UI's pages too, which share the
	// listener.
	Gate *transport.Gate
	// EventWriteTimeout is how long a write to an event stream may wait
	// for its reader (master.Config.EventWriteTimeout).
	EventWriteTimeout time.Duration
}

// handlers are the listener's endpoints.
type handlers struct{ Config }

// Register adds the /v1 endpoints and /metrics to mux.
func Register(mux *http.ServeMux, cfg Config) {
	h := &handlers{cfg}
	s := cfg.Service
	mux.HandleFunc("POST /v1/drivers", post(h, s.SubmitDriver))
	mux.HandleFunc("POST "+api.PathSubmitBatch, post(h, s.SubmitDrivers))
	mux.HandleFunc("GET /v1/drivers", list(h, s.Drivers, func(p api.DriverPage) page[*model.Driver] {
		return page[*model.Driver]{name: "drivers", rows: p.Drivers, next: p.Next}
	}))
	mux.HandleFunc("GET /v1/drivers/{id}", blocking(h, func(ctx context.Context, c auth.Caller, r *http.Request, rd service.Read) (any, uint64, error) {
		d, err := s.Driver(ctx, c, r.PathValue("id"), rd)
		if err != nil {
			return nil, 0, err
		}
		return d, d.ModifyIndex, nil
	}))
	mux.HandleFunc("POST /v1/drivers/{id}/kill", action(h, func(ctx context.Context, c auth.Caller, r *http.Request) (any, error) {
		return s.KillDriver(ctx, c, r.PathValue("id"))
	}))
	mux.HandleFunc("POST "+api.PathKillAllDrivers, action(h, func(ctx context.Context, c auth.Caller, r *http.Request) (any, error) {
		return s.KillAllDrivers(ctx, c)
	}))
	mux.HandleFunc("GET /v1/drivers/{id}/logs", h.driverLogs)
	mux.HandleFunc("POST /v1/workers/register", post(h, s.RegisterWorker))
	mux.HandleFunc("POST /v1/workers/{id}/heartbeat", postID(h, s.Heartbeat))
	mux.HandleFunc("POST /v1/workers/{id}/decommission", postID(h, s.DecommissionWorker))
	mux.HandleFunc("POST /v1/apps", post(h, s.RegisterApp))
	mux.HandleFunc("GET /v1/apps", list(h, s.Apps, func(p api.AppPage) page[api.AppStatus] {
		return page[api.AppStatus]{name: "apps", rows: p.Apps, next: p.Next}
	}))
	mux.HandleFunc("GET /v1/apps/{id}", blocking(h, func(ctx context.Context, c auth.Caller, r *http.Request, rd service.Read) (any, uint64, error) {
		a, err := s.App(ctx, c, r.PathValue("id"), rd)
		if err != nil {
			return nil, 0, err
		}
		return a, a.ModifyIndex, nil
	}))
	mux.HandleFunc("GET /v1/events", h.events)
	mux.HandleFunc("GET /v1/apps/{id}/watch", h.watchApp)
	mux.HandleFunc("POST /v1/apps/{id}/executors", postID(h, s.RequestExecutors))
	mux.HandleFunc("POST /v1/apps/{id}/executors/kill", postID(h, s.KillExecutors))
	mux.HandleFunc("POST /v1/apps/{id}/unregister", postID(h, s.UnregisterApp))
	mux.HandleFunc("POST /v1/apps/{id}/kill", action(h, func(ctx context.Context, c auth.Caller, r *http.Request) (any, error) {
		return s.KillApp(ctx, c, r.PathValue("id"))
	}))
	mux.HandleFunc("GET /v1/apps/{id}/executors/{eid}/logs", h.executorLogs)
	mux.HandleFunc("GET /v1/state", get(h, func(ctx context.Context, c auth.Caller, r *http.Request) (any, error) {
		return s.State(ctx, c)
	}))
	mux.HandleFunc("GET /v1/gossip", get(h, func(ctx context.Context, c auth.Caller, r *http.Request) (any, error) {
		return s.GossipPeers(ctx, c)
	}))
	// No credential: load balancers and service managers ask.
	mux.HandleFunc("GET /v1/health", func(w http.ResponseWriter, r *http.Request) {
		hl := s.Health(r.Context())
		status := http.StatusOK
		if hl.Status != "ok" {
			status = http.StatusServiceUnavailable
		}
		writeJSON(w, status, hl)
	})
	mux.HandleFunc("GET /v1/operator/raft/peers", get(h, func(ctx context.Context, c auth.Caller, r *http.Request) (any, error) {
		return s.RaftPeers(ctx, c, read(r))
	}))
	mux.HandleFunc("POST /v1/operator/raft/add-voter", post(h, s.AddVoter))
	mux.HandleFunc("POST /v1/operator/raft/remove-peer", post(h, s.RemovePeer))
	mux.HandleFunc("POST /v1/operator/raft/transfer-leadership", post(h, s.TransferLeadership))
	mux.HandleFunc("PUT /v1/blobs/{sum}", h.upload)
	// GET also matches HEAD.
	mux.HandleFunc("GET /v1/blobs/{sum}", h.blob)
	mux.HandleFunc("GET /v1/operator/snapshot", h.saveSnapshot)
	mux.HandleFunc("POST /v1/operator/snapshot", h.restoreSnapshot)
	mux.HandleFunc("POST "+api.PathClearCompleted, action(h, func(ctx context.Context, c auth.Caller, r *http.Request) (any, error) {
		return s.ClearCompleted(ctx, c)
	}))
	// Every master answers from its own view, never forwarding: a
	// dashboard picks the leader's tables with drover_raft_state, and
	// each master's Raft and gossip health is its own.
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		c, ok := h.caller(w, r)
		if !ok {
			return
		}
		if err := s.Allow(r.Context(), c, auth.Read); err != nil {
			h.writeError(w, err)
			return
		}
		h.Metrics.Handler.ServeHTTP(w, r)
	})
	// Spark's master JSON, from this master's own view as a Spark
	// master's is, with the access of /v1/state.
	sparkJSON := get(h, func(ctx context.Context, c auth.Caller, r *http.Request) (any, error) {
		st, err := s.State(ctx, c)
		if err != nil {
			return nil, err
		}
		return h.Spark.Render(&st, time.Now(), r.PathValue("field"))
	})
	mux.HandleFunc("GET /json", sparkJSON)
	mux.HandleFunc("GET /json/{$}", sparkJSON)
	mux.HandleFunc("GET /json/{field}", sparkJSON)
	mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		h.writeError(w, api.Errorf(api.ErrNotFound, "no such endpoint: %s %s", r.Method, r.URL.Path))
	})
}

// Wrap puts what every answer of a master's listener shares around mux:
// the X-Drover-Served-By and X-Drover-Leader headers, the bound on request
// bodies (api.MaxBodyBytes; a snapshot upload api.MaxSnapshotBytes, with
// more time; an uploaded file the store's own, --max-upload), the count
// of requests in the metrics, and the Gate in front of them all.
func Wrap(mux http.Handler, cfg Config) http.Handler {
	h := &handlers{cfg}
	return cfg.Metrics.Instrument(cfg.Gate.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l := cfg.Leadership()
		w.Header().Set(api.HeaderServedBy, l.Self)
		if l.LeaderHTTP != "" {
			w.Header().Set(api.HeaderLeader, l.LeaderHTTP)
		}
		limit := int64(api.MaxBodyBytes)
		switch {
		case r.Method == http.MethodPost && r.URL.Path == api.PathSnapshot:
			limit = api.MaxSnapshotBytes
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(snapshotTimeout))
		case r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, api.PathBlobs+"/"):
			// The store bounds the file, before reading it when
			// Content-Length says it is too large.
			limit = -1
		}
		if limit >= 0 {
			r.Body = http.MaxBytesReader(w, r.Body, limit)
		}
		mux.ServeHTTP(w, r)
	}), h.writeError))
}

// read is the consistency a read asks for: stale=true lets any master
// answer from its own tables.
func read(r *http.Request) service.Read {
	return service.Read{Stale: r.URL.Query().Get("stale") == "true"}
}

// blocking serves a read of one row that takes index and wait (a blocking
// read, Nomad's blocking queries): f answers with the row and its
// ModifyIndex, sent back as api.HeaderIndex for the next read to wait on.
func blocking(h *handlers, f func(context.Context, auth.Caller, *http.Request, service.Read) (any, uint64, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, ok := h.caller(w, r)
		if !ok {
			return
		}
		rd, err := blockingRead(r)
		if err != nil {
			h.writeError(w, err)
			return
		}
		if rd.Index != 0 {
			// The server's timeouts are for answers that do not wait;
			// net/http ends the request's context at the read deadline.
			rc := http.NewResponseController(w)
			_ = rc.SetWriteDeadline(time.Now().Add(max(rd.Wait, service.DefaultWait) + 10*time.Second))
			_ = rc.SetReadDeadline(time.Time{})
		}
		out, index, err := f(r.Context(), c, r, rd)
		if err == nil {
			w.Header().Set(api.HeaderIndex, strconv.FormatUint(index, 10))
		}
		h.reply(w, out, err)
	}
}

// blockingRead decodes stale, index and wait.
func blockingRead(r *http.Request) (service.Read, error) {
	rd := read(r)
	q := r.URL.Query()
	if s := q.Get("index"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return rd, api.Errorf(api.ErrInvalidRequest, "index %q is not a Raft index", s)
		}
		rd.Index = n
	}
	if s := q.Get("wait"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			return rd, api.Errorf(api.ErrInvalidRequest, "wait %q is not a duration (30s, 5m)", s)
		}
		if d <= 0 {
			return rd, api.Errorf(api.ErrInvalidRequest, "wait %q must be positive", s)
		}
		rd.Wait = d
	}
	return rd, nil
}

// caller establishes who r comes from, answering the refusal itself.
func (h *handlers) caller(w http.ResponseWriter, r *http.Request) (auth.Caller, bool) {
	c, err := h.Guard.Caller(r)
	if err != nil {
		h.writeError(w, err)
		return auth.Caller{}, false
	}
	return c, true
}

// bodyCaller is caller for a request with a body: it also refuses, before
// the body is read, a caller without any credential where the masters
// require one, and a body whose declared type checkType refuses.
func (h *handlers) bodyCaller(w http.ResponseWriter, r *http.Request, checkType func(http.Header) error) (auth.Caller, bool) {
	c, ok := h.caller(w, r)
	if !ok {
		return auth.Caller{}, false
	}
	if err := h.Guard.CheckCredential(c.Identity); err != nil {
		h.writeError(w, err)
		return auth.Caller{}, false
	}
	if err := checkType(r.Header); err != nil {
		h.writeError(w, err)
		return auth.Caller{}, false
	}
	return c, true
}

// post serves an endpoint whose body is a JSON In. Every such endpoint
// needs a credential where the masters require one, so a caller without
// any is refused before its body is read, as is a body not declared JSON
// (api.CheckJSON: what a browser posts across sites is not).
func post[In, Out any](h *handlers, f func(context.Context, auth.Caller, In) (Out, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, ok := h.bodyCaller(w, r, api.CheckJSON)
		if !ok {
			return
		}
		var in In
		if err := decodeBody(r, &in); err != nil {
			h.writeError(w, err)
			return
		}
		out, err := f(r.Context(), c, in)
		h.reply(w, out, err)
	}
}

// postID is post for an endpoint whose path names a row.
func postID[In, Out any](h *handlers, f func(context.Context, auth.Caller, string, In) (Out, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		post(h, func(ctx context.Context, c auth.Caller, in In) (Out, error) {
			return f(ctx, c, r.PathValue("id"), in)
		})(w, r)
	}
}

// get serves an endpoint that takes no body.
func get(h *handlers, f func(context.Context, auth.Caller, *http.Request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, ok := h.caller(w, r)
		if !ok {
			return
		}
		out, err := f(r.Context(), c, r)
		h.reply(w, out, err)
	}
}

// list serves a list of rows (api.ListQuery): the whole list as a JSON
// array when the query asks for no page, which is what clients that
// predate paging read, and otherwise the page as an object naming its
// rows and the next cursor (api.DriverPage, api.AppPage).
func list[P any, T any](h *handlers, f func(context.Context, auth.Caller, api.ListQuery, service.Read) (P, error), rows func(P) page[T]) http.HandlerFunc {
	return get(h, func(ctx context.Context, c auth.Caller, r *http.Request) (any, error) {
		q, err := api.ParseListQuery(r.URL.Query())
		if err != nil {
			return nil, err
		}
		p, err := f(ctx, c, q, read(r))
		if err != nil {
			return nil, err
		}
		out := rows(p)
		out.paged = q.Paged()
		return out, nil
	})
}

// page is an answer that lists rows of the tables, which reply writes a
// row at a time (writeList): alone as an array, or when paged in the
// object {"NAME": [rows], "next": cursor}.
type page[T any] struct {
	name  string
	rows  []T
	next  string
	paged bool
}

func (p page[T]) write(w http.ResponseWriter, log *slog.Logger) {
	if p.rows == nil {
		// No rows are an empty list, never null.
		p.rows = []T{}
	}
	if !p.paged {
		writeList(w, log, p.rows)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriter(w)
	name, _ := json.Marshal(p.name)
	_, _ = bw.WriteString("{" + string(name) + ":")
	if !writeRows(bw, log, p.rows) {
		return
	}
	if p.next != "" {
		next, _ := json.Marshal(p.next)
		_, _ = bw.WriteString(`,"next":` + string(next))
	}
	_, _ = bw.WriteString("}\n")
	_ = bw.Flush()
}

// writeList writes rows as a JSON array with 200, the same bytes as
// writeJSON, but encoding one row at a time: the rows are the tables' own
// (fsm.FSM.Drivers), so a read of a table whose programs are large costs
// the encoding of one row, not a buffer of the whole answer (which
// encoding/json fills before it writes, and keeps in its pool). A row that
// cannot be encoded cuts the answer short, which its reader cannot
// decode, and is logged.
func writeList[T any](w http.ResponseWriter, log *slog.Logger, rows []T) {
	if rows == nil {
		// As writeJSON writes a nil slice.
		writeJSON(w, http.StatusOK, rows)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriter(w)
	if writeRows(bw, log, rows) {
		_ = bw.WriteByte('\n')
		_ = bw.Flush()
	}
}

// writeRows writes rows as a JSON array, a row at a time, reporting
// whether it wrote them all.
func writeRows[T any](bw *bufio.Writer, log *slog.Logger, rows []T) bool {
	_ = bw.WriteByte('[')
	for i, row := range rows {
		if i > 0 {
			_ = bw.WriteByte(',')
		}
		b, err := json.Marshal(row)
		if err != nil {
			log.Warn("answer cut short: a row cannot be encoded", "err", err)
			return false
		}
		if _, err := bw.Write(b); err != nil {
			return false
		}
	}
	_, err := bw.WriteString("]")
	return err == nil
}

// action is get for a POST that must come without a body.
func action(h *handlers, f func(context.Context, auth.Caller, *http.Request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var b [1]byte
		if n, _ := r.Body.Read(b[:]); n > 0 {
			h.writeError(w, api.Errorf(api.ErrInvalidRequest, "this request takes no body"))
			return
		}
		get(h, f)(w, r)
	}
}

// reply writes out as JSON with 200, or the error.
func (h *handlers) reply(w http.ResponseWriter, out any, err error) {
	if err != nil {
		h.writeError(w, err)
		return
	}
	if l, ok := out.(interface {
		write(http.ResponseWriter, *slog.Logger)
	}); ok {
		l.write(w, h.Log)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// decodeBody reads a strict JSON body into v: unknown fields, trailing data
// and a body over its bound are refused.
func decodeBody(r *http.Request, v any) error {
	if err := strictjson.Decode(r.Body, v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return api.Errorf(api.ErrTooLarge, "request body exceeds %d bytes", mbe.Limit)
		}
		return api.Errorf(api.ErrInvalidRequest, "%v", err)
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers err with its code's status and an api.Error body; a
// refusal of access carries the challenge and closes the connection, and a
// 503 names the leader when one is known, so a client can go there.
func (h *handlers) writeError(w http.ResponseWriter, err error) {
	code, status := api.CodeOf(err)
	if status == http.StatusInternalServerError {
		h.Log.Warn("request failed", "err", err)
	}
	if code == api.CodeUnauthenticated || code == api.CodeForbidden {
		auth.Challenge(w.Header(), err)
	}
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	e := api.Error{Error: err.Error(), Code: code}
	if status == http.StatusServiceUnavailable {
		e.Leader = w.Header().Get(api.HeaderLeader)
	}
	writeJSON(w, status, e)
}

// logQuery decodes a log request's stream, offset and (for drivers)
// attempt.
func logQuery(r *http.Request, what string) (service.LogQuery, error) {
	q := r.URL.Query()
	lq := service.LogQuery{Stream: q.Get("stream")}
	if s := q.Get("offset"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return lq, api.Errorf(api.ErrInvalidRequest, "offset %q must be a byte count", s)
		}
		lq.Offset = n
	}
	if s := q.Get("attempt"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || strconv.Itoa(n) != s {
			return lq, api.Errorf(api.ErrNotFound, "%s has no attempt %q", what, s)
		}
		lq.Attempt = n
	}
	return lq, nil
}

func (h *handlers) driverLogs(w http.ResponseWriter, r *http.Request) {
	c, ok := h.caller(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	q, err := logQuery(r, id)
	if err != nil {
		h.writeError(w, err)
		return
	}
	l, err := h.Service.DriverLogs(r.Context(), c, id, q, read(r))
	h.writeLog(w, l, err)
}

func (h *handlers) executorLogs(w http.ResponseWriter, r *http.Request) {
	c, ok := h.caller(w, r)
	if !ok {
		return
	}
	id, eid := r.PathValue("id"), r.PathValue("eid")
	n, err := strconv.Atoi(eid)
	if err != nil || n < 0 || strconv.Itoa(n) != eid {
		h.writeError(w, api.Errorf(api.ErrNotFound, "%s has no executor %q", id, eid))
		return
	}
	q, err := logQuery(r, id)
	if err == nil && q.Attempt != 0 {
		err = api.Errorf(api.ErrInvalidRequest, "an executor's log takes no attempt")
	}
	if err != nil {
		h.writeError(w, err)
		return
	}
	l, err := h.Service.ExecutorLogs(r.Context(), c, id, n, q, read(r))
	h.writeLog(w, l, err)
}

// writeLog sends a log as text that a browser shows and never sniffs into
// anything else.
func (h *handlers) writeLog(w http.ResponseWriter, l *service.Log, err error) {
	if err != nil {
		h.writeError(w, err)
		return
	}
	defer l.Body.Close()
	w.Header().Set(api.HeaderLogSize, strconv.FormatInt(l.Size, 10))
	w.Header().Set(api.HeaderLogStart, strconv.FormatInt(l.Start, 10))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, l.Body)
}

func (h *handlers) watchApp(w http.ResponseWriter, r *http.Request) {
	c, ok := h.caller(w, r)
	if !ok {
		return
	}
	a, err := h.Service.WatchApp(r.Context(), c, r.PathValue("id"), r.Header.Get("If-None-Match"))
	if err != nil {
		h.writeError(w, err)
		return
	}
	w.Header().Set("ETag", a.ETag)
	writeJSON(w, http.StatusOK, a.Status)
}

func (h *handlers) saveSnapshot(w http.ResponseWriter, r *http.Request) {
	c, ok := h.caller(w, r)
	if !ok {
		return
	}
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(snapshotTimeout))
	snap, err := h.Service.SaveSnapshot(r.Context(), c)
	if err != nil {
		h.writeError(w, err)
		return
	}
	defer snap.Body.Close()
	w.Header().Set("Content-Type", api.ContentTypeTar)
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", snap.Name))
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, snap.Body)
}

// restoreSnapshot refuses a caller without a credential and a body not
// declared an archive (api.CheckArchive) before it reads the body.
func (h *handlers) restoreSnapshot(w http.ResponseWriter, r *http.Request) {
	c, ok := h.bodyCaller(w, r, api.CheckArchive)
	if !ok {
		return
	}
	peers, err := h.Service.RestoreSnapshot(r.Context(), c, r.Body)
	h.reply(w, peers, err)
}
