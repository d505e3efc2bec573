// Package webui is a master's web UI listener: it serves the pages package
// ui renders, from this master's own tables (stale reads: a follower shows
// its view and links to the leader), through the same service as the API,
// so a page shows what the API would and needs the access it would. A
// browser that cannot send a bearer token logs in at /ui/login, which keeps
// the token in a cookie that grants reads only (package auth). The
// master's listener refuses a form post that another site sent before it
// reaches a page (transport.Gate), so no site can log a visitor in with
// its own token or out.
//
//	GET  /                                      overview
//	GET  /ui/drivers                            ?state=S,..&name=GLOB&worker=W&limit=N&cursor=C: a page of the drivers
//	GET  /ui/drivers/{id}                       a driver and its attempts
//	GET  /ui/drivers/{id}/logs                  ?stream=stdout|stderr&attempt=N: a log's tail
//	GET  /ui/apps/{id}                          an application and its executors
//	GET  /ui/apps/{id}/executors/{eid}/logs     ?stream=stdout|stderr: a log's tail
//	GET  /ui/workers/{id}                       a worker, its drivers and executors
//	GET  /ui/login, POST /ui/login, POST /ui/logout
//
// Every page takes refresh=N (seconds between reloads) or refresh=0.
package webui

import (
	"context"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/master/service"
	"github.com/drover-project/drover/master/ui"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/security/auth"
)

// logTailBytes is how much of the end of a log a log page shows; the
// whole log is a link to the API.
const logTailBytes = 64 << 10

// logFetchTimeout bounds a log page's two requests for a log.
const logFetchTimeout = 10 * time.Second

// stale is how every page reads, and noBody what a page's read takes:
// a page shows this master's own tables.
var (
	stale  = service.Read{Stale: true}
	noBody = service.Request[api.NoBody]{Read: service.Read{Stale: true}}
)

// Config is what the pages work with.
type Config struct {
	// Chain admits each page's reads and answers them (service.Chain).
	Chain *service.Chain
	// Guard establishes callers and checks the tokens people log in with.
	Guard *auth.Guard
	// Leadership and Scheme are for the frame every page has: this
	// master's role and a link to the same page on the leader.
	Leadership func() service.Leadership
	Scheme     string
	Log        *slog.Logger
	// Redact hides the environment values whose names it matches
	// (--redact-regex); nil for ui.DefaultRedactRegex.
	Redact *regexp.Regexp
}

type pages struct{ Config }

// Register adds the UI's pages to mux.
func Register(mux *http.ServeMux, cfg Config) {
	p := &pages{cfg}
	mux.HandleFunc("GET /{$}", p.page(p.overview))
	mux.HandleFunc("GET /ui/drivers", p.page(p.drivers))
	mux.HandleFunc("GET /ui/drivers/{id}", p.page(p.driver))
	mux.HandleFunc("GET /ui/drivers/{id}/logs", p.page(p.driverLog))
	mux.HandleFunc("GET /ui/apps/{id}", p.page(p.app))
	mux.HandleFunc("GET /ui/apps/{id}/executors/{eid}/logs", p.page(p.executorLog))
	mux.HandleFunc("GET /ui/workers/{id}", p.page(p.worker))
	mux.HandleFunc("GET /ui/login", p.loginPage)
	mux.HandleFunc("POST /ui/login", p.login)
	mux.HandleFunc("POST /ui/logout", p.logout)
	mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		p.fail(w, r, api.Errorf(api.ErrNotFound, "no such page: %s", r.URL.Path))
	})
}

// render makes a page for a caller; an error is shown instead of the page.
type render func(r *http.Request, c auth.Caller, f ui.Frame) (ui.Page, error)

// page serves a page: an error of the service becomes an error page, and a
// refusal of access the login form.
func (p *pages) page(h render) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, err := p.Guard.Caller(r)
		var pg ui.Page
		if err == nil {
			pg, err = h(r, c, p.frame(r))
		}
		if err != nil {
			p.fail(w, r, err)
			return
		}
		pg.ServeHTTP(w, r)
	}
}

// frame is what every page says about this master and the leader.
func (p *pages) frame(r *http.Request) ui.Frame {
	l := p.Leadership()
	f := ui.NewFrame(r)
	f.MasterID, f.Role, f.Scheme, f.Leader, f.Redact = l.Self, l.Role, p.Scheme, l.LeaderID, p.Redact
	if l.LeaderID != "" && l.LeaderID != l.Self && l.LeaderHTTP != "" {
		f.LeaderURL = p.Scheme + "://" + l.LeaderHTTP + r.URL.RequestURI()
	}
	return f
}

// fail answers err as a page: the login form for a refusal of access, an
// error page otherwise.
func (p *pages) fail(w http.ResponseWriter, r *http.Request, err error) {
	code, status := api.CodeOf(err)
	if code != api.CodeUnauthenticated && code != api.CodeForbidden {
		ui.Error(p.frame(r), status, err.Error()).ServeHTTP(w, r)
		return
	}
	auth.Challenge(w.Header(), err)
	msg := err.Error()
	if code == api.CodeUnauthenticated {
		// The API's words are about headers a browser cannot send.
		msg = "This page needs read access: log in with a token of this cluster."
	}
	pg, rerr := ui.Login(p.frame(r), ui.LoginForm{Next: r.URL.RequestURI(), Message: msg, NoTokens: p.noTokens()}, status)
	p.serve(w, r, pg, rerr)
}

// serve sends a rendered page, logging a rendering failure (a bug).
func (p *pages) serve(w http.ResponseWriter, r *http.Request, pg ui.Page, err error) {
	if err != nil {
		p.Log.Warn("render page", "path", r.URL.Path, "err", err)
	}
	pg.ServeHTTP(w, r)
}

// noTokens explains, on a master that uses no tokens, what stands in for
// logging in; "" when tokens are configured.
func (p *pages) noTokens() string {
	switch {
	case p.Guard.Tokens():
		return ""
	case p.Guard.Open():
		return "This master uses neither TLS nor tokens: every page is open, and there is nothing to log in with."
	}
	return "This master uses no tokens: the browser's client certificate of the cluster CA is the credential, and there is nothing to log in with."
}

func (p *pages) overview(r *http.Request, c auth.Caller, f ui.Frame) (ui.Page, error) {
	st, err := service.V1State.Call(r.Context(), p.Chain, c, noBody)
	if err != nil {
		return ui.Page{}, err
	}
	// The overview explains waiting drivers as a driver's status does.
	ds, err := service.V1Drivers.Call(r.Context(), p.Chain, c, noBody)
	if err != nil {
		return ui.Page{}, err
	}
	st.Drivers = ds.Drivers
	// The namespaces as GET /v1/namespaces lists them to the caller:
	// the table holds that list's rows and no others.
	nss, err := service.V1Namespaces.Call(r.Context(), p.Chain, c, noBody)
	if err != nil {
		return ui.Page{}, err
	}
	return ui.Overview(f, &st, nss)
}

// drivers is a page of the drivers list, filtered and paged by the
// service as GET /v1/drivers is (api.ListQuery), ui.DriverPageSize rows
// unless the URL gives a limit.
func (p *pages) drivers(r *http.Request, c auth.Caller, f ui.Frame) (ui.Page, error) {
	q, err := api.ParseListQuery(r.URL.Query())
	if err != nil {
		return ui.Page{}, err
	}
	if q.Limit == 0 {
		q.Limit = ui.DriverPageSize
	}
	pg, err := service.V1Drivers.Call(r.Context(), p.Chain, c, service.Request[api.NoBody]{List: q, Read: stale})
	if err != nil {
		return ui.Page{}, err
	}
	return ui.Drivers(f, q, pg)
}

func (p *pages) driver(r *http.Request, c auth.Caller, f ui.Frame) (ui.Page, error) {
	d, err := service.V1Driver.Call(r.Context(), p.Chain, c, service.Request[api.NoBody]{ID: r.PathValue("id"), Read: stale})
	if err != nil {
		return ui.Page{}, err
	}
	apps, err := service.V1Apps.Call(r.Context(), p.Chain, c, noBody)
	if err != nil {
		return ui.Page{}, err
	}
	return ui.Driver(f, d, apps.Apps)
}

// stream returns the stream the query names (stdout by default).
func stream(r *http.Request) (string, error) {
	switch s := r.URL.Query().Get("stream"); s {
	case "", api.StreamStdout:
		return api.StreamStdout, nil
	case api.StreamStderr:
		return s, nil
	default:
		return "", api.Errorf(api.ErrInvalidRequest, "stream %q must be stdout or stderr", s)
	}
}

func (p *pages) driverLog(r *http.Request, c auth.Caller, f ui.Frame) (ui.Page, error) {
	d, err := service.V1Driver.Call(r.Context(), p.Chain, c, service.Request[api.NoBody]{ID: r.PathValue("id"), Read: stale})
	if err != nil {
		return ui.Page{}, err
	}
	s, err := stream(r)
	if err != nil {
		return ui.Page{}, err
	}
	if len(d.Attempts) == 0 {
		return ui.Page{}, api.Errorf(api.ErrNotFound, "%s has not been placed on a worker yet", d.ID)
	}
	rec := d.Attempts[len(d.Attempts)-1]
	if a := r.URL.Query().Get("attempt"); a != "" {
		n, err := strconv.Atoi(a)
		if err != nil || d.AttemptRecord(n) == nil {
			return ui.Page{}, api.Errorf(api.ErrNotFound, "%s has no attempt %q", d.ID, a)
		}
		rec = *d.AttemptRecord(n)
	}
	l := ui.Log{DriverID: d.ID, Attempt: rec.Attempt, WorkerID: rec.WorkerID, Stream: s}
	tail(r.Context(), &l, func(ctx context.Context, offset int64) (*service.Log, error) {
		return service.V1DriverLogs.Call(ctx, p.Chain, c, service.Request[service.LogQuery]{ID: d.ID,
			Body: service.LogQuery{Stream: s, Offset: offset, Attempt: rec.Attempt}, Read: stale})
	})
	return ui.LogPage(f, l)
}

func (p *pages) app(r *http.Request, c auth.Caller, f ui.Frame) (ui.Page, error) {
	st, err := service.V1App.Call(r.Context(), p.Chain, c, service.Request[api.NoBody]{ID: r.PathValue("id"), Read: stale})
	if err != nil {
		return ui.Page{}, err
	}
	return ui.App(f, st)
}

func (p *pages) executorLog(r *http.Request, c auth.Caller, f ui.Frame) (ui.Page, error) {
	st, err := service.V1App.Call(r.Context(), p.Chain, c, service.Request[api.NoBody]{ID: r.PathValue("id"), Read: stale})
	if err != nil {
		return ui.Page{}, err
	}
	e, ok := executor(st, r.PathValue("eid"))
	if !ok {
		return ui.Page{}, api.Errorf(api.ErrNotFound, "%s has no executor %q", st.ID, r.PathValue("eid"))
	}
	s, err := stream(r)
	if err != nil {
		return ui.Page{}, err
	}
	l := ui.Log{AppID: st.ID, ExecutorID: e.ID, WorkerID: e.WorkerID, Stream: s}
	tail(r.Context(), &l, func(ctx context.Context, offset int64) (*service.Log, error) {
		return service.V1ExecutorLogs.Call(ctx, p.Chain, c, service.Request[service.ExecutorLogQuery]{ID: st.ID,
			Body: service.ExecutorLogQuery{Executor: e.ID, LogQuery: service.LogQuery{Stream: s, Offset: offset}}, Read: stale})
	})
	return ui.LogPage(f, l)
}

// executor returns the executor of s whose ID is eid. IDs are not
// positions: the rows of old finished executors are dropped.
func executor(s api.AppStatus, eid string) (*model.Executor, bool) {
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

func (p *pages) worker(r *http.Request, c auth.Caller, f ui.Frame) (ui.Page, error) {
	wk, err := service.Worker.Call(r.Context(), p.Chain, c, service.Request[api.NoBody]{ID: r.PathValue("id")})
	if err != nil {
		return ui.Page{}, err
	}
	ds, err := service.V1Drivers.Call(r.Context(), p.Chain, c, noBody)
	if err != nil {
		return ui.Page{}, err
	}
	apps, err := service.V1Apps.Call(r.Context(), p.Chain, c, noBody)
	if err != nil {
		return ui.Page{}, err
	}
	return ui.Worker(f, wk, ds.Drivers, apps.Apps)
}

// tail fills in the last logTailBytes of a log, or why it could not. It
// asks twice: once past the end for the size, then for the tail, so a long
// log never crosses the network whole.
func tail(ctx context.Context, l *ui.Log, get func(ctx context.Context, offset int64) (*service.Log, error)) {
	ctx, cancel := context.WithTimeout(ctx, logFetchTimeout)
	defer cancel()
	read := func(offset int64) ([]byte, int64, error) {
		lg, err := get(ctx, offset)
		if err != nil {
			return nil, 0, err
		}
		defer lg.Body.Close()
		// The worker sends what was there when it answered; a log that
		// grew since the first request is still cut at twice the tail.
		b, err := io.ReadAll(io.LimitReader(lg.Body, 2*logTailBytes))
		return b, lg.Size, err
	}
	_, size, err := read(math.MaxInt64)
	if err == nil {
		l.Tail, l.Size, err = read(max(size-logTailBytes, 0))
	}
	if err != nil {
		l.Err = err.Error()
		_, l.Status = api.CodeOf(err)
	}
}

func (p *pages) loginPage(w http.ResponseWriter, r *http.Request) {
	pg, err := ui.Login(p.frame(r), ui.LoginForm{Next: r.URL.Query().Get("next"), NoTokens: p.noTokens()}, http.StatusOK)
	p.serve(w, r, pg, err)
}

// login checks the token a person pasted and keeps it in the browser:
// HttpOnly (no script reads it), SameSite=Strict (no other site's request
// carries it), Secure over TLS; and in any case it only reads. A login
// that another site posts never gets here (transport.Gate).
func (p *pages) login(w http.ResponseWriter, r *http.Request) {
	next := safeNext(r.PostFormValue("next"))
	form := ui.LoginForm{Next: next, NoTokens: p.noTokens()}
	status := http.StatusOK
	tok := strings.TrimSpace(r.PostFormValue("token"))
	if form.NoTokens == "" {
		id, err := p.Guard.IdentifyToken(tok)
		id.Cookie = true
		switch {
		case auth.CheckToken(tok) != nil:
			form.Err, status = "That is not a token: a token is 16 to 128 characters of A-Z a-z 0-9 -._~+/=.", http.StatusBadRequest
		case err != nil:
			form.Err, status = "That token is not one of this cluster's.", http.StatusForbidden
		case p.Chain.Allow(auth.Caller{Identity: id}, auth.Read) != nil:
			form.Err, status = "That token cannot read the cluster (a driver's token reads its own application only).", http.StatusForbidden
		default:
			http.SetCookie(w, loginCookie(r, tok))
			http.Redirect(w, r, next, http.StatusSeeOther)
			return
		}
	}
	pg, err := ui.Login(p.frame(r), form, status)
	p.serve(w, r, pg, err)
}

func (p *pages) logout(w http.ResponseWriter, r *http.Request) {
	c := loginCookie(r, "")
	c.MaxAge = -1
	http.SetCookie(w, c)
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

// loginCookie is the cookie that carries tok for the UI. It lasts as long
// as the browser session: a token outlives no browser left open elsewhere.
func loginCookie(r *http.Request, tok string) *http.Cookie {
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
