// Package httpapi is a master's /v1 listener: for each endpoint it
// establishes the caller, decodes the request, calls the endpoint through
// the master's chain (service.Chain) and encodes the answer. It decides
// nothing itself; every rule, forwarding to the leader included, is the
// service's (package service). It routes every JSON endpoint from its
// description (service.Routes); the others it serves by hand, and beside
// them /metrics and Spark's master JSON at /json (package masterjson).
// DESIGN.md says how an endpoint is described and how to add one.
package httpapi

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
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
	// Chain admits each request and has this master or the leader
	// answer it (service.Chain).
	Chain *service.Chain
	// Endpoints are the JSON endpoints it routes; nil routes
	// service.Routes(), every one a master has. A test routes its own.
	Endpoints []service.Routed
	Guard     *auth.Guard
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

// Register adds the /v1 endpoints and /metrics to mux: each JSON endpoint
// from its description (serve), the others by hand.
func Register(mux *http.ServeMux, cfg Config) {
	h := &handlers{cfg}
	eps := cfg.Endpoints
	if eps == nil {
		eps = service.Routes()
	}
	for _, e := range eps {
		mux.HandleFunc(e.Describe().String(), h.serve(e))
	}
	if cfg.Endpoints != nil {
		// A test's table: its endpoints alone.
		return
	}
	mux.HandleFunc(api.V1DriverLogs.String(), h.driverLogs)
	mux.HandleFunc(api.V1Events.String(), h.events)
	mux.HandleFunc(api.V1WatchApp.String(), h.watchApp)
	mux.HandleFunc(api.V1ExecutorLogs.String(), h.executorLogs)
	// No credential: load balancers and service managers ask.
	mux.HandleFunc(api.V1Health.String(), func(w http.ResponseWriter, r *http.Request) {
		hl, _ := service.V1Health.Call(r.Context(), h.Chain, auth.Caller{}, service.Request[api.NoBody]{})
		status := http.StatusOK
		if hl.Status != "ok" {
			status = http.StatusServiceUnavailable
		}
		writeJSON(w, status, hl)
	})
	mux.HandleFunc(api.V1Upload.String(), h.upload)
	// GET also matches HEAD.
	mux.HandleFunc(api.V1Blob.String(), h.blob)
	mux.HandleFunc(api.V1SaveSnapshot.String(), h.saveSnapshot)
	mux.HandleFunc(api.V1RestoreSnapshot.String(), h.restoreSnapshot)
	// Every master answers from its own view, never forwarding: a
	// dashboard picks the leader's tables with drover_raft_state, and
	// each master's Raft and gossip health is its own.
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		c, ok := h.caller(w, r)
		if !ok {
			return
		}
		if err := h.Chain.Allow(c, auth.ClusterRead); err != nil {
			h.writeError(w, err)
			return
		}
		h.Metrics.Handler.ServeHTTP(w, r)
	})
	// Spark's master JSON, from this master's own view as a Spark
	// master's is, with the access of /v1/state.
	sparkJSON := func(w http.ResponseWriter, r *http.Request) {
		c, ok := h.caller(w, r)
		if !ok {
			return
		}
		st, err := service.V1State.Call(r.Context(), h.Chain, c, service.Request[api.NoBody]{})
		if err != nil {
			h.writeError(w, err)
			return
		}
		out, err := h.Spark.Render(&st, time.Now(), r.PathValue("field"))
		h.reply(w, out, err)
	}
	mux.HandleFunc("GET /json", sparkJSON)
	mux.HandleFunc("GET /json/{$}", sparkJSON)
	mux.HandleFunc("GET /json/{field}", sparkJSON)
	// The catch-all matches a path of an endpoint asked with another
	// method too, since it is more general than the endpoints' method
	// patterns, where ServeMux would answer 405 on its own; so it asks
	// the mux which methods the path takes.
	ws := &wrongMethods{mux: mux, h: h, shadows: map[string]bool{}}
	mux.HandleFunc("/v1/", ws.answer)
	ws.shadow(eps)
}

// wrongMethods answers a request for a path of the API with a method the
// path does not take: 405 with the Allow header, or 404 for a path no
// endpoint has.
type wrongMethods struct {
	mux *http.ServeMux
	h   *handlers
	// shadows are the patterns registered only to answer 405 (shadow).
	shadows map[string]bool
}

func (ws *wrongMethods) answer(w http.ResponseWriter, r *http.Request) {
	if allow := ws.allowed(r); len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		ws.h.writeError(w, api.Errorf(api.ErrMethodNotAllowed, "%s %s: the endpoint takes %s", r.Method, r.URL.Path, strings.Join(allow, ", ")))
		return
	}
	ws.h.writeError(w, api.Errorf(api.ErrNotFound, "no such endpoint: %s %s", r.Method, r.URL.Path))
}

// shadow routes to answer the literal path of each endpoint of eps
// asked with a method another endpoint takes on a wildcard that matches
// it: GET /v1/drivers/kill-all would otherwise reach GET
// /v1/drivers/{id} and be refused as a driver ID it is not, where it is
// the kill-all endpoint asked with the wrong method.
func (ws *wrongMethods) shadow(eps []service.Routed) {
	for _, e := range eps {
		path := e.Describe().Pattern
		if strings.Contains(path, "{") {
			continue
		}
		for _, m := range methods {
			probe := &http.Request{Method: m, URL: &url.URL{Path: path}, Header: http.Header{}}
			_, pattern := ws.mux.Handler(probe)
			if _, p, _ := strings.Cut(pattern, " "); pattern == "" || pattern == "/v1/" || p == path {
				continue
			}
			ws.shadows[m+" "+path] = true
			ws.mux.HandleFunc(m+" "+path, ws.answer)
		}
	}
}

// methods are those an endpoint of the API may take (HEAD with GET).
var methods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete}

// allowed returns the methods whose patterns on the mux match r's path,
// other than the catch-all's and the shadows', in the order of methods:
// those the Allow header of a 405 lists, as ServeMux's own 405 does.
func (ws *wrongMethods) allowed(r *http.Request) []string {
	var out []string
	for _, m := range methods {
		probe := &http.Request{Method: m, URL: r.URL, Host: r.Host, Header: http.Header{}}
		if _, pattern := ws.mux.Handler(probe); pattern != "" && pattern != "/v1/" && !ws.shadows[pattern] {
			out = append(out, m)
		}
	}
	return out
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

// serve serves a JSON endpoint as e describes it. Every refusal the
// listener makes comes before the chain: a POST that takes no body and
// came with one; a caller whose credential proves nothing; where the
// masters require a credential, a body from a caller without any, or not
// declared JSON (api.CheckJSON: what a browser posts across sites is not),
// before the body is read; a body that is not strict JSON; a query that
// does not parse. A blocking read (service.BlockingQuery) takes index and
// wait (Nomad's blocking queries) and answers with the row's ModifyIndex
// as api.HeaderIndex, for the next read to wait on.
func (h *handlers) serve(e service.Routed) http.HandlerFunc {
	info := e.Describe()
	return func(w http.ResponseWriter, r *http.Request) {
		body := e.NewBody()
		if body == nil && r.Method == http.MethodPost {
			var b [1]byte
			if n, _ := r.Body.Read(b[:]); n > 0 {
				h.writeError(w, api.Errorf(api.ErrInvalidRequest, "this request takes no body"))
				return
			}
		}
		var c auth.Caller
		var ok bool
		if body != nil {
			c, ok = h.bodyCaller(w, r, api.CheckJSON)
		} else {
			c, ok = h.caller(w, r)
		}
		if !ok {
			return
		}
		var rd service.Read
		var q api.ListQuery
		var err error
		switch {
		case body != nil:
			err = decodeBody(r, body)
		case info.Query == service.BlockingQuery:
			rd, err = blockingRead(r)
		case info.Query == service.ListingQuery:
			q, err = api.ParseListQuery(r.URL.Query())
		case info.Query == service.NamespaceQuery:
			q, err = api.ParseNamespaceQuery(r.URL.Query())
		}
		if err != nil {
			h.writeError(w, err)
			return
		}
		if info.Answer == service.AtLeaderOrStale {
			rd.Stale = read(r).Stale
		}
		if rd.Index != 0 {
			// The server's timeouts are for answers that do not wait;
			// net/http ends the request's context at the read deadline.
			rc := http.NewResponseController(w)
			_ = rc.SetWriteDeadline(time.Now().Add(max(rd.Wait, service.DefaultWait) + 10*time.Second))
			_ = rc.SetReadDeadline(time.Time{})
		}
		out, index, err := e.Invoke(r.Context(), h.Chain, c, r.PathValue("id"), body, rd, q)
		if err == nil && info.Query == service.BlockingQuery {
			w.Header().Set(api.HeaderIndex, strconv.FormatUint(index, 10))
		}
		if err == nil && info.Query == service.ListingQuery {
			out = listed(out, q.Paged())
		}
		if err == nil && info.Created {
			writeJSON(w, http.StatusCreated, out)
			return
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

// listed is a list's answer as reply writes it: the whole list as a JSON
// array when the query asks for no page, which is what clients that
// predate paging read, and otherwise the page as an object naming its
// rows and the next cursor (api.DriverPage, api.AppPage).
func listed(out any, paged bool) any {
	switch p := out.(type) {
	case api.DriverPage:
		return page[*model.Driver]{name: "drivers", rows: p.Drivers, next: p.Next, paged: paged}
	case api.AppPage:
		return page[api.AppStatus]{name: "apps", rows: p.Apps, next: p.Next, paged: paged}
	}
	return out
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
// (fsm.State.Drivers), so a read of a table whose programs are large costs
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
	l, err := service.V1DriverLogs.Call(r.Context(), h.Chain, c, service.Request[service.LogQuery]{ID: id, Body: q, Read: read(r)})
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
	l, err := service.V1ExecutorLogs.Call(r.Context(), h.Chain, c,
		service.Request[service.ExecutorLogQuery]{ID: id, Body: service.ExecutorLogQuery{Executor: n, LogQuery: q}, Read: read(r)})
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
	a, err := service.V1WatchApp.Call(r.Context(), h.Chain, c, service.Request[string]{ID: r.PathValue("id"), Body: r.Header.Get("If-None-Match")})
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
	snap, err := service.V1SaveSnapshot.Call(r.Context(), h.Chain, c, service.Request[api.NoBody]{})
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
	peers, err := service.V1RestoreSnapshot.Call(r.Context(), h.Chain, c, service.Request[io.Reader]{Body: r.Body})
	h.reply(w, peers, err)
}
