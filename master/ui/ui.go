// Package ui renders the web UI every master serves: a cluster overview in
// the manner of Spark's standalone master page, and a page for one driver,
// application, worker or log. It only renders; package master routes the
// requests, checks access and gathers the data, from its own tables (a
// follower shows its own, possibly stale, view and links to the leader).
//
// Pages are html/template, so everything from the tables is escaped; the
// CSS is inline and there is no script, so the pages work offline and under
// a Content-Security-Policy that forbids scripts. They reload themselves
// with a meta refresh every DefaultRefresh seconds; refresh=N in the query
// changes that and refresh=0 pauses it, and the links of a paused page keep
// it paused.
package ui

import (
	"bytes"
	"embed"
	"html/template"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/drover-project/drover/security/auth"
)

//go:embed templates/*.html
var files embed.FS

// DefaultRefresh is how often a page reloads itself, in seconds, unless
// its URL says otherwise.
const DefaultRefresh = 5

// maxRefresh bounds refresh=N, so a typo cannot make a page that never
// reloads while claiming to.
const maxRefresh = 3600

// Frame is what every page shows around its content: the master serving
// it, the leader, and how the page reloads. NewFrame fills in what the
// request says; the caller fills in the rest.
type Frame struct {
	// MasterID is the ID of the master serving the page; Role its Raft
	// state (Leader, Follower, Candidate); Leader the leader's ID, ""
	// when none is known.
	MasterID, Role, Leader string
	// LeaderURL is this page on the leader, "" when this master leads or
	// the leader's address is unknown.
	LeaderURL string
	// Scheme is http or https: how to reach the other masters.
	Scheme string
	// Refresh is the seconds between reloads; 0 means paused.
	Refresh int
	// LoggedIn is true when the browser holds the login cookie, so the
	// page offers to log out.
	LoggedIn bool
	// Now is when the page is made: the durations of things still
	// running end there.
	Now time.Time
	// Redact hides the values of the environment variables whose names
	// it matches (the master's --redact-regex); nil for
	// DefaultRedactRegex.
	Redact *regexp.Regexp

	// path and query are the request's, for the pause and resume links.
	path  string
	query url.Values
	// still marks a page that never reloads and offers no pause (a form
	// being filled in, an error).
	still bool
}

// NewFrame returns the Frame of a page answering r: its refresh period,
// login state, time, and the links to pause or resume it.
func NewFrame(r *http.Request) Frame {
	f := Frame{Refresh: DefaultRefresh, Now: time.Now(), path: r.URL.Path, query: r.URL.Query()}
	if s := f.query.Get("refresh"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n >= 0 {
			f.Refresh = min(n, maxRefresh)
		}
	}
	if c, err := r.Cookie(auth.CookieName); err == nil && c.Value != "" {
		f.LoggedIn = true
	}
	// Only a path of this host: "//host" would be another site's.
	if !strings.HasPrefix(f.path, "/") || strings.HasPrefix(f.path, "//") {
		f.path = "/"
	}
	return f
}

// frame lets the template functions reach the Frame of any page's data,
// which embeds one.
func (f Frame) frame() Frame { return f }

type framer interface{ frame() Frame }

// Paused reports whether the page does not reload itself.
func (f Frame) Paused() bool { return f.Refresh == 0 }

// Still reports whether the page never reloads, so it offers no pause.
func (f Frame) Still() bool { return f.still }

// stillFrame is f for a page that must not reload under a person typing
// or reading an error; links from it keep the reloads as they were.
func stillFrame(f Frame) Frame {
	f.still = true
	return f
}

// PauseURL is this page with its reloads paused.
func (f Frame) PauseURL() string { return f.self("0") }

// ResumeURL is this page reloading every DefaultRefresh seconds.
func (f Frame) ResumeURL() string { return f.self("") }

// Follower reports whether the page comes from a master that does not
// lead, so its tables may lag the leader's.
func (f Frame) Follower() bool { return f.Role != "Leader" }

func (f Frame) self(refresh string) string {
	q := url.Values{}
	for k, v := range f.query {
		q[k] = v
	}
	q.Del("refresh")
	if refresh != "" {
		q.Set("refresh", refresh)
	}
	u := url.URL{Path: f.path, RawQuery: q.Encode()}
	return u.String()
}

// link is path p of this host, paused if the page is: clicking through a
// paused page should not start the reloads again.
func (f Frame) link(p string, q url.Values) template.URL {
	if f.Paused() {
		if q == nil {
			q = url.Values{}
		}
		q.Set("refresh", "0")
	}
	u := url.URL{Path: p, RawQuery: q.Encode()}
	// The path is built from escaped segments under a fixed prefix, so
	// the URL is a relative one of this host.
	return template.URL(u.EscapedPath() + queryPart(u.RawQuery))
}

func queryPart(q string) string {
	if q == "" {
		return ""
	}
	return "?" + q
}

// Page is a rendered page and its HTTP status.
type Page struct {
	Status int
	Body   []byte
}

// contentSecurityPolicy allows the inline style and nothing else: no
// script, no framing, forms posting only here.
const contentSecurityPolicy = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// ServeHTTP writes the page. It is never cached (it shows argv and
// environments) and never framed (its forms could be clickjacked).
func (p Page) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	_, _ = w.Write(p.Body)
}

// pages holds one template per page, each the layout with its content.
var pages = parsePages("overview", "drivers", "driver", "app", "worker", "log", "login", "error")

func parsePages(names ...string) map[string]*template.Template {
	base := template.Must(template.New("layout").Funcs(funcs).ParseFS(files, "templates/layout.html", "templates/parts.html"))
	out := make(map[string]*template.Template, len(names))
	for _, n := range names {
		out[n] = template.Must(template.Must(base.Clone()).ParseFS(files, "templates/"+n+".html"))
	}
	return out
}

// render executes page name with data. A failure (a bug: the tests render
// every page) yields a plain 500 page as well as the error, so a caller can
// log the error and still answer.
func render(name string, status int, data any) (Page, error) {
	var b bytes.Buffer
	if err := pages[name].ExecuteTemplate(&b, "layout", data); err != nil {
		return Page{Status: http.StatusInternalServerError,
			Body: []byte("<!doctype html><title>Drover</title><p>The page could not be rendered; the master's log says why.</p>")}, err
	}
	return Page{Status: status, Body: b.Bytes()}, nil
}

// Error renders a page that only says msg, with the given status: a 404
// for an unknown ID, a 400 for a malformed one.
func Error(f Frame, status int, msg string) Page {
	p, err := render("error", status, struct {
		Frame
		Status  int
		Text    string
		Message string
	}{stillFrame(f), status, http.StatusText(status), msg})
	if err != nil {
		p.Status = status
	}
	return p
}

// LoginForm is what the login page says besides its form.
type LoginForm struct {
	// Next is where to go after logging in: a path of this master.
	Next string
	// Message says why the page is shown (the refusal of the page the
	// person asked for), Err what was wrong with the token they gave.
	Message, Err string
	// NoTokens explains, when not "", that this master uses no tokens,
	// so there is nothing to log in with.
	NoTokens string
}

// Login renders the login form with the given status: 200 when asked for,
// 401 or 403 in place of a page the browser may not see yet.
func Login(f Frame, l LoginForm, status int) (Page, error) {
	return render("login", status, struct {
		Frame
		LoginForm
	}{stillFrame(f), l})
}
