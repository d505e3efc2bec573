package master

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/auth"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/ui"
)

// logTailBytes is how much of the end of a log a log page shows; the
// whole log is a link to the API.
const logTailBytes = 64 << 10

// logFetchTimeout bounds a log page's two requests to a worker.
const logFetchTimeout = 10 * time.Second

// crossOrigin refuses the UI's form posts (log in, log out) when a browser
// says another site sent them (Sec-Fetch-Site, Origin), so no site can
// log a visitor in with its own token or out.
var crossOrigin = http.NewCrossOriginProtection()

// uiRoutes serves the web UI (package ui renders it) from this master's own
// tables: a follower shows its view and links to the leader. Pages need
// Read access, like the API's reads; a browser that cannot send a bearer
// token logs in at /ui/login, which keeps the token in a cookie that grants
// reads only (package auth).
//
//	GET  /                                      overview
//	GET  /ui/drivers/{id}                       a driver and its attempts
//	GET  /ui/drivers/{id}/logs                  ?stream=stdout|stderr&attempt=N: a log's tail
//	GET  /ui/apps/{id}                          an application and its executors
//	GET  /ui/apps/{id}/executors/{eid}/logs     ?stream=stdout|stderr: a log's tail
//	GET  /ui/workers/{id}                       a worker, its drivers and executors
//	GET  /ui/login, POST /ui/login, POST /ui/logout
//
// Every page takes refresh=N (seconds between reloads) or refresh=0.
func (m *Master) uiRoutes(mux *http.ServeMux) {
	page := func(h http.HandlerFunc) http.HandlerFunc { return m.guard.WrapPage(auth.Read, h, m.uiDeny) }
	mux.HandleFunc("GET /{$}", page(m.handleOverview))
	mux.HandleFunc("GET /ui/drivers/{id}", page(m.handleDriverPage))
	mux.HandleFunc("GET /ui/drivers/{id}/logs", page(m.handleDriverLogPage))
	mux.HandleFunc("GET /ui/apps/{id}", page(m.handleAppPage))
	mux.HandleFunc("GET /ui/apps/{id}/executors/{eid}/logs", page(m.handleExecutorLogPage))
	mux.HandleFunc("GET /ui/workers/{id}", page(m.handleWorkerPage))
	mux.HandleFunc("GET /ui/login", m.handleLoginPage)
	mux.HandleFunc("POST /ui/login", m.handleLogin)
	mux.HandleFunc("POST /ui/logout", m.handleLogout)
	mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		m.uiError(w, r, http.StatusNotFound, "no such page: "+r.URL.Path)
	})
}

// uiFrame is what every page says about this master and the leader.
func (m *Master) uiFrame(r *http.Request) ui.Frame {
	f := ui.NewFrame(r)
	f.MasterID, f.Role, f.Scheme = m.cfg.ID, m.raft.State().String(), m.scheme()
	_, leader := m.raft.LeaderWithID()
	f.Leader = string(leader)
	if f.Leader != "" && f.Leader != m.cfg.ID {
		if h := m.leaderHTTP(); h != "" {
			f.LeaderURL = m.scheme() + "://" + h + r.URL.RequestURI()
		}
	}
	return f
}

// serve sends a rendered page, logging a rendering failure (a bug).
func (m *Master) serve(w http.ResponseWriter, r *http.Request, p ui.Page, err error) {
	if err != nil {
		m.log.Warn("render page", "path", r.URL.Path, "err", err)
	}
	p.ServeHTTP(w, r)
}

func (m *Master) uiError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	ui.Error(m.uiFrame(r), status, msg).ServeHTTP(w, r)
}

// uiDeny answers a page the caller may not read with the login form, in
// place of the API's JSON error.
func (m *Master) uiDeny(w http.ResponseWriter, r *http.Request, status int, msg string) {
	if status == http.StatusUnauthorized {
		// The API's words are about headers a browser cannot send.
		msg = "This page needs read access: log in with a token of this cluster."
	}
	p, err := ui.Login(m.uiFrame(r), ui.LoginForm{Next: r.URL.RequestURI(), Message: msg, NoTokens: m.noTokens()}, status)
	m.serve(w, r, p, err)
}

// noTokens explains, on a master that uses no tokens, what stands in for
// logging in; "" when tokens are configured.
func (m *Master) noTokens() string {
	switch {
	case m.guard.Tokens():
		return ""
	case m.guard.Open():
		return "This master uses neither TLS nor tokens: every page is open, and there is nothing to log in with."
	}
	return "This master uses no tokens: the browser's client certificate of the cluster CA is the credential, and there is nothing to log in with."
}

func (m *Master) handleOverview(w http.ResponseWriter, r *http.Request) {
	s := m.State()
	explainWaiting(s.Drivers, s.Workers)
	p, err := ui.Overview(m.uiFrame(r), &s)
	m.serve(w, r, p, err)
}

// pageDriver returns the driver named in the path, answering 400 or 404
// itself (as pages) when there is none.
func (m *Master) pageDriver(w http.ResponseWriter, r *http.Request) (*model.Driver, bool) {
	id := r.PathValue("id")
	if !driverIDPattern.MatchString(id) {
		m.uiError(w, r, http.StatusBadRequest, fmt.Sprintf("%q is not a driver ID (driver-<yyyyMMddHHmmss>-<seq>)", id))
		return nil, false
	}
	d, ok := m.fsm.Driver(id)
	if !ok {
		m.uiError(w, r, http.StatusNotFound, fmt.Sprintf("%s: %s", model.ErrUnknownDriver, id))
		return nil, false
	}
	return explainWaiting([]*model.Driver{d}, m.fsm.Workers())[0], true
}

func (m *Master) handleDriverPage(w http.ResponseWriter, r *http.Request) {
	if d, ok := m.pageDriver(w, r); ok {
		p, err := ui.Driver(m.uiFrame(r), d, m.appStatuses())
		m.serve(w, r, p, err)
	}
}

// pageStream returns the stream the query names (stdout by default),
// answering 400 itself for anything else.
func (m *Master) pageStream(w http.ResponseWriter, r *http.Request) (string, bool) {
	switch s := r.URL.Query().Get("stream"); s {
	case "", "stdout":
		return "stdout", true
	case "stderr":
		return s, true
	default:
		m.uiError(w, r, http.StatusBadRequest, fmt.Sprintf("stream %q must be stdout or stderr", s))
		return "", false
	}
}

func (m *Master) handleDriverLogPage(w http.ResponseWriter, r *http.Request) {
	d, ok := m.pageDriver(w, r)
	if !ok {
		return
	}
	stream, ok := m.pageStream(w, r)
	if !ok {
		return
	}
	if len(d.Attempts) == 0 {
		m.uiError(w, r, http.StatusNotFound, fmt.Sprintf("%s has not been placed on a worker yet", d.ID))
		return
	}
	rec := d.Attempts[len(d.Attempts)-1]
	if a := r.URL.Query().Get("attempt"); a != "" {
		n, err := strconv.Atoi(a)
		var found bool
		for _, x := range d.Attempts {
			if err == nil && x.Attempt == n {
				rec, found = x, true
			}
		}
		if !found {
			m.uiError(w, r, http.StatusNotFound, fmt.Sprintf("%s has no attempt %q", d.ID, a))
			return
		}
	}
	l := ui.Log{DriverID: d.ID, Attempt: rec.Attempt, WorkerID: rec.WorkerID, Stream: stream}
	m.fetchTail(r.Context(), &l, "/v1/drivers/"+d.ID+"/logs", url.Values{"attempt": {strconv.Itoa(rec.Attempt)}})
	p, err := ui.LogPage(m.uiFrame(r), l)
	m.serve(w, r, p, err)
}

// pageApp returns the app named in the path, answering 400 or 404 itself
// (as pages) when there is none.
func (m *Master) pageApp(w http.ResponseWriter, r *http.Request) (api.AppStatus, bool) {
	id := r.PathValue("id")
	if !appIDPattern.MatchString(id) {
		m.uiError(w, r, http.StatusBadRequest, fmt.Sprintf("%q is not an app ID (app-<yyyyMMddHHmmss>-<seq>)", id))
		return api.AppStatus{}, false
	}
	s, ok := m.currentApp(id)
	if !ok {
		m.uiError(w, r, http.StatusNotFound, fmt.Sprintf("%s: %s", model.ErrUnknownApp, id))
	}
	return s, ok
}

func (m *Master) handleAppPage(w http.ResponseWriter, r *http.Request) {
	if s, ok := m.pageApp(w, r); ok {
		p, err := ui.App(m.uiFrame(r), s)
		m.serve(w, r, p, err)
	}
}

func (m *Master) handleExecutorLogPage(w http.ResponseWriter, r *http.Request) {
	s, ok := m.pageApp(w, r)
	if !ok {
		return
	}
	e, ok := pathExecutor(s, r.PathValue("eid"))
	if !ok {
		m.uiError(w, r, http.StatusNotFound, fmt.Sprintf("%s has no executor %q", s.ID, r.PathValue("eid")))
		return
	}
	stream, ok := m.pageStream(w, r)
	if !ok {
		return
	}
	l := ui.Log{AppID: s.ID, ExecutorID: e.ID, WorkerID: e.WorkerID, Stream: stream}
	m.fetchTail(r.Context(), &l, fmt.Sprintf("/v1/apps/%s/executors/%d/logs", s.ID, e.ID), url.Values{})
	p, err := ui.LogPage(m.uiFrame(r), l)
	m.serve(w, r, p, err)
}

func (m *Master) handleWorkerPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !workerIDPattern.MatchString(id) {
		m.uiError(w, r, http.StatusBadRequest, fmt.Sprintf("worker ID %q must match %s", id, workerIDPattern))
		return
	}
	wk, ok := m.fsm.Worker(id)
	if !ok {
		m.uiError(w, r, http.StatusNotFound, fmt.Sprintf("%s: %s", model.ErrUnknownWorker, id))
		return
	}
	p, err := ui.Worker(m.uiFrame(r), wk, m.fsm.Drivers(), m.appStatuses())
	m.serve(w, r, p, err)
}

// fetchTail fills in the last logTailBytes of the log at path on l's
// worker, with query q (the stream is l's), or why it could not. It asks
// twice: once past the end for the size, then for the tail, so a long log
// never crosses the network whole.
func (m *Master) fetchTail(ctx context.Context, l *ui.Log, path string, q url.Values) {
	ctx, cancel := context.WithTimeout(ctx, logFetchTimeout)
	defer cancel()
	wk, ok := m.fsm.Worker(l.WorkerID)
	if !ok {
		l.Err, l.Status = fmt.Sprintf("worker %s, which keeps the log, is unknown", l.WorkerID), http.StatusNotFound
		return
	}
	q.Set("stream", l.Stream)
	get := func(offset int64) ([]byte, int64, error) {
		q.Set("offset", strconv.FormatInt(offset, 10))
		u := url.URL{Scheme: m.scheme(), Host: wk.HTTPAddr, Path: path, RawQuery: q.Encode()}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return nil, 0, err
		}
		m.asMasterToWorker(req.Header)
		resp, err := m.toWorkers.Do(req)
		if err != nil {
			l.Status = http.StatusBadGateway
			return nil, 0, fmt.Errorf("worker %s at %s: %w", wk.ID, wk.HTTPAddr, err)
		}
		defer resp.Body.Close()
		// The worker sends what was there when it answered; a log that
		// grew since the first request is still cut at twice the tail.
		b, err := io.ReadAll(io.LimitReader(resp.Body, 2*logTailBytes))
		if resp.StatusCode != http.StatusOK {
			var e struct{ Error string }
			if json.Unmarshal(b, &e) != nil || e.Error == "" {
				e.Error = resp.Status
			}
			l.Status = resp.StatusCode
			return nil, 0, fmt.Errorf("worker %s: %s", wk.ID, e.Error)
		}
		if err != nil {
			l.Status = http.StatusBadGateway
			return nil, 0, err
		}
		// The size header is worker.HeaderLogSize, spelled out rather
		// than importing the worker for one name.
		size, _ := strconv.ParseInt(resp.Header.Get("X-Drover-Log-Size"), 10, 64)
		return b, size, nil
	}
	_, size, err := get(math.MaxInt64)
	if err == nil {
		l.Tail, l.Size, err = get(max(size-logTailBytes, 0))
	}
	if err != nil {
		l.Err = err.Error()
	}
}

func (m *Master) handleLoginPage(w http.ResponseWriter, r *http.Request) {
	p, err := ui.Login(m.uiFrame(r), ui.LoginForm{Next: r.URL.Query().Get("next"), NoTokens: m.noTokens()}, http.StatusOK)
	m.serve(w, r, p, err)
}

// handleLogin checks the token a person pasted and keeps it in the
// browser: HttpOnly (no script reads it), SameSite=Strict (no other site's
// request carries it), Secure over TLS; and in any case it only reads.
func (m *Master) handleLogin(w http.ResponseWriter, r *http.Request) {
	if err := crossOrigin.Check(r); err != nil {
		m.uiError(w, r, http.StatusForbidden, "a login must come from this master's own page")
		return
	}
	next := safeNext(r.PostFormValue("next"))
	form := ui.LoginForm{Next: next, NoTokens: m.noTokens()}
	status := http.StatusOK
	tok := strings.TrimSpace(r.PostFormValue("token"))
	if form.NoTokens == "" {
		id, err := m.guard.IdentifyToken(tok)
		id.Cookie = true
		switch {
		case auth.CheckToken(tok) != nil:
			form.Err, status = "That is not a token: a token is 16 to 128 characters of A-Z a-z 0-9 -._~+/=.", http.StatusBadRequest
		case err != nil:
			form.Err, status = "That token is not one of this cluster's.", http.StatusForbidden
		case !m.guard.Allows(id, auth.Read):
			form.Err, status = "That token cannot read the cluster (a driver's token reads its own application only).", http.StatusForbidden
		default:
			http.SetCookie(w, m.loginCookie(r, tok))
			http.Redirect(w, r, next, http.StatusSeeOther)
			return
		}
	}
	p, err := ui.Login(m.uiFrame(r), form, status)
	m.serve(w, r, p, err)
}

func (m *Master) handleLogout(w http.ResponseWriter, r *http.Request) {
	if err := crossOrigin.Check(r); err != nil {
		m.uiError(w, r, http.StatusForbidden, "a logout must come from this master's own page")
		return
	}
	c := m.loginCookie(r, "")
	c.MaxAge = -1
	http.SetCookie(w, c)
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

// loginCookie is the cookie that carries tok for the UI. It lasts as long
// as the browser session: a token outlives no browser left open elsewhere.
func (m *Master) loginCookie(r *http.Request, tok string) *http.Cookie {
	return &http.Cookie{
		Name: auth.CookieName, Value: tok, Path: "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	}
}

// safeNext is where a login sends the browser: next when it is a page of
// this master, else the overview, so the form cannot send anyone to
// another site.
func safeNext(next string) string {
	u, err := url.Parse(next)
	switch {
	case err != nil, u.Scheme != "", u.Host != "", u.User != nil,
		!strings.HasPrefix(next, "/"), strings.HasPrefix(next, "//"), strings.ContainsAny(next, "\\\r\n\t"),
		u.Path != "/" && !strings.HasPrefix(u.Path, "/ui/"), u.Path == "/ui/login":
		return "/"
	}
	return next
}
