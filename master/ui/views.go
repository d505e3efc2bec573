package ui

import (
	"bytes"
	"cmp"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/internal/plural"
	"github.com/drover-project/drover/model"
)

// recentFinished is how many finished drivers and apps the overview lists
// (a master keeps up to 200 of each); their counts cover all of them.
const recentFinished = 25

// DefaultRedactRegex is the default of a master's --redact-regex: Spark's
// default spark.redaction.regex, with "_" beside "." since environment
// names use it. A page shows no value of an environment variable whose
// name matches the master's pattern.
const DefaultRedactRegex = `(?i)secret|password|token|access[._]?key`

var defaultRedact = regexp.MustCompile(DefaultRedactRegex)

// previewBytes is how much of an environment value or an argv element a
// page shows; the rest is said by its length, and the JSON API keeps the
// whole. A driver's environment may hold a megabyte, which would make a
// page of a megabyte.
const previewBytes = 256

// programPreview is how many characters of a program the drivers
// tables show, in one line, and argPreview how many of each of its
// arguments.
const (
	programPreview = 120
	argPreview     = 48
)

// redacted replaces a hidden value, as Spark's UI writes it.
const redacted = "*********(redacted)"

var funcs = template.FuncMap{
	"time":        formatTime,
	"dur":         duration,
	"exit":        exitCode,
	"mib":         mib,
	"pct":         percent,
	"rows":        func(p framer, ds []*model.Driver) any { return struct{ P, Ds any }{p, ds} },
	"appRows":     func(p framer, as []api.AppStatus) any { return struct{ P, As any }{p, as} },
	"attemptRows": func(p framer, rs []placedAttempt) any { return struct{ P, Rows any }{p, rs} },
	"execRows":    func(p framer, es []*model.Executor) any { return struct{ P, Rows any }{p, es} },
	"cls":         stateClass,
	"since":       workerSince,
	"argv":        func(argv []string) string { return shellWords(argv, previewBytes) },
	"program":     program,
	"staging":     staging,
	"env":         envRows,
	"cursorURL":   cursorURL,
	"listURL": func(p framer, states ...string) template.URL {
		return cursorURL(p, api.ListQuery{States: states}, "")
	},
	"lower":        strings.ToLower,
	"namespace":    model.NamespaceOf,
	"share":        share,
	"driverURL":    func(p framer, id string) template.URL { return p.frame().ui(nil, "drivers", id) },
	"appURL":       func(p framer, id string) template.URL { return p.frame().ui(nil, "apps", id) },
	"workerURL":    func(p framer, id string) template.URL { return p.frame().ui(nil, "workers", id) },
	"driverLogURL": driverLogURL,
	"execLogURL":   execLogURL,
	"rawDriverLog": rawDriverLog,
	"rawExecLog":   rawExecLog,
	"masterURL": func(p framer, hostPort string) string {
		if hostPort == "" {
			return ""
		}
		return p.frame().Scheme + "://" + hostPort + "/"
	},
}

// ui links to /ui/SEG/SEG..., each segment escaped; "" when a segment is
// empty (no worker yet, say), which the templates check before linking.
func (f Frame) ui(q url.Values, segs ...string) template.URL {
	for _, s := range segs {
		if s == "" {
			return ""
		}
	}
	return f.link("/ui/"+strings.Join(segs, "/"), q)
}

func driverLogURL(p framer, id string, attempt int, stream string) template.URL {
	return p.frame().ui(url.Values{"stream": {stream}, "attempt": {strconv.Itoa(attempt)}}, "drivers", id, "logs")
}

func execLogURL(p framer, appID string, eid int, stream string) template.URL {
	return p.frame().ui(url.Values{"stream": {stream}}, "apps", appID, "executors", strconv.Itoa(eid), "logs")
}

// rawDriverLog and rawExecLog link to the whole log through the API,
// answered from this master's tables (stale=true) like the page.
func rawDriverLog(id string, attempt int, stream string) string {
	q := url.Values{"stream": {stream}, "attempt": {strconv.Itoa(attempt)}, "stale": {"true"}}
	return "/v1/drivers/" + url.PathEscape(id) + "/logs?" + q.Encode()
}

func rawExecLog(appID string, eid int, stream string) string {
	q := url.Values{"stream": {stream}, "stale": {"true"}}
	return "/v1/apps/" + url.PathEscape(appID) + "/executors/" + strconv.Itoa(eid) + "/logs?" + q.Encode()
}

// workerSince names what a worker's UpdatedAt marks. The workers table
// changes a row only when the worker registers, is lost or is
// decommissioned, so while it is ALIVE that is its latest registration
// (RegisteredAt is the first, kept across re-registrations), and otherwise
// when it became what it is: derived on the page, so the tables and the
// log keep their meaning.
func workerSince(w *model.Worker) string {
	switch w.State {
	case model.WorkerAlive:
		return "Last registered"
	case model.WorkerDead:
		return "Lost"
	case model.WorkerDecommissioned:
		return "Decommissioned"
	}
	return "Updated"
}

// formatTime shows Unix milliseconds in UTC, "" for none.
func formatTime(ms int64) string {
	if ms == 0 {
		return ""
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05")
}

// duration is the time from start to end (Unix milliseconds), or to the
// page's time while end is 0; "" before start.
func duration(p framer, start, end int64) string {
	if start == 0 {
		return ""
	}
	stop := time.UnixMilli(end)
	if end == 0 {
		stop = p.frame().Now
	}
	d := stop.Sub(time.UnixMilli(start))
	switch {
	case d < 0:
		return ""
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s"
	case d < time.Hour:
		return strconv.FormatFloat(d.Minutes(), 'f', 1, 64) + " min"
	}
	return strconv.FormatFloat(d.Hours(), 'f', 1, 64) + " h"
}

func exitCode(p *int) string {
	if p == nil {
		return ""
	}
	return strconv.Itoa(*p)
}

// mib shows a size in MiB the way Spark's UI does: MiB below a GiB.
func mib(v int64) string {
	if v < 1024 {
		return strconv.FormatInt(v, 10) + " MiB"
	}
	return strconv.FormatFloat(float64(v)/1024, 'f', 1, 64) + " GiB"
}

// percent is used/total as a whole percentage in [0, 100], for a bar;
// cores are ints and memory int64s.
func percent(used, total any) int64 {
	u, t := toInt64(used), toInt64(total)
	if t <= 0 || u <= 0 {
		return 0
	}
	return min(u*100/t, 100)
}

func toInt64(v any) int64 {
	switch x := v.(type) {
	case int:
		return int64(x)
	case int64:
		return x
	}
	return 0
}

// stateClass colours a driver's, app's, executor's or worker's state.
func stateClass(s any) string {
	switch fmt.Sprint(s) {
	case "FINISHED", "EXITED", "ALIVE":
		return "ok"
	case "RUNNING":
		return "run"
	case "SUBMITTED", "WAITING", "RELAUNCHING", "LAUNCHING", "DECOMMISSIONED":
		return "wait"
	case "FAILED", "ERROR", "KILLED", "LOST", "DEAD":
		return "bad"
	}
	return ""
}

// shellWords shows an argv as a shell would take it: words with anything
// but safe characters single-quoted, each cut to its first n bytes with
// its whole length said after it. It is for reading; the program never
// goes through a shell.
func shellWords(argv []string, n int) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		head, cut := preview(a, n)
		if a != "" && strings.Trim(head, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=+./:,@%") == "" {
			out[i] = head
		} else {
			out[i] = "'" + strings.ReplaceAll(head, "'", `'\''`) + "'"
		}
		if cut {
			out[i] += fmt.Sprintf("…(%d bytes)", len(a))
		}
	}
	return strings.Join(out, " ")
}

// program is an argv in one short line, for a column of the drivers
// tables: its words cut to argPreview bytes, the whole to programPreview
// characters.
func program(argv []string) string {
	s, cut := preview(shellWords(argv, argPreview), programPreview)
	if cut {
		s += "…"
	}
	return s
}

// preview is the first n bytes of s, cut back to a whole character, and
// whether anything was cut.
func preview(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n], true
}

// envRow is one variable of an environment as a page shows it: its value
// cut to previewBytes, Size its whole length when it was cut (0
// otherwise).
type envRow struct {
	Name, Value string
	Size        int
}

// envRows is an environment sorted by name, with the values whose names
// the page's redaction pattern matches hidden (Spark's
// spark.redaction.regex) and long ones cut.
func envRows(p framer, env map[string]string) []envRow {
	redact := cmp.Or(p.frame().Redact, defaultRedact)
	out := make([]envRow, 0, len(env))
	for k, v := range env {
		r := envRow{Name: k}
		if redact.MatchString(k) {
			r.Value = redacted
		} else if head, cut := preview(v, previewBytes); cut {
			r.Value, r.Size = head, len(v)
		} else {
			r.Value = v
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b envRow) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// count is one state and how many are in it.
type count struct {
	State string
	N     int
}

// counts tallies states in the order given, leaving out those with none.
func counts(order []string, states []string) []count {
	n := map[string]int{}
	for _, s := range states {
		n[s]++
	}
	var out []count
	for _, s := range order {
		if n[s] > 0 {
			out = append(out, count{s, n[s]})
			delete(n, s)
		}
	}
	// A state this package does not know still shows.
	var rest []string
	for s := range n {
		rest = append(rest, s)
	}
	slices.Sort(rest)
	for _, s := range rest {
		out = append(out, count{s, n[s]})
	}
	return out
}

var (
	driverStateOrder = []string{"RUNNING", "SUBMITTED", "RELAUNCHING", "FINISHED", "FAILED", "KILLED", "ERROR", "UNKNOWN"}
	appStateOrder    = []string{"RUNNING", "WAITING", "FINISHED", "FAILED", "KILLED", "UNKNOWN"}
)

type overview struct {
	Frame
	S *api.State
	// Namespaces are the rows of the namespaces table, by name.
	Namespaces []namespaceRow
	// Alive counts ALIVE workers; Cores, Memory and their Used sums are
	// over them, as Spark's summary counts.
	Alive, Cores, CoresUsed    int
	MemoryMB, MemoryUsedMB     int64
	DriverCounts, AppCounts    []count
	Running, Waiting, Ended    []*model.Driver
	RunningTotal, WaitingTotal int
	EndedTotal                 int
	ActiveApps, EndedApps      []api.AppStatus
	EndedAppsTotal, Executors  int
}

// Overview renders the cluster overview from a master's State and the
// namespaces nss the caller may read (GET /v1/namespaces), by name: the
// table shows the rows it is given, so a caller whose view leaves out
// other namespaces sees only its own.
func Overview(f Frame, s *api.State, nss []api.NamespaceStatus) (Page, error) {
	v := overview{Frame: f, S: s, Namespaces: namespaceRows(nss)}
	for _, w := range s.Workers {
		if w.State == model.WorkerAlive {
			v.Alive++
			v.Cores += w.Cores
			v.CoresUsed += w.CoresUsed
			v.MemoryMB += w.MemoryMB
			v.MemoryUsedMB += w.MemoryUsedMB
		}
	}
	queue := map[string]int{}
	for i, id := range s.WaitingDrivers {
		queue[id] = i + 1
	}
	var states []string
	for _, d := range s.Drivers {
		states = append(states, string(d.State))
		switch {
		case d.State.Terminal():
			v.Ended = append(v.Ended, d)
		case d.State == model.DriverRunning:
			v.Running = append(v.Running, d)
		default:
			// Queued, or placed and staging its artifacts on its
			// worker: its program has not started.
			v.Waiting = append(v.Waiting, d)
		}
	}
	v.DriverCounts = counts(driverStateOrder, states)
	// Waiting drivers in the order they will be placed; the others
	// newest first, as Spark lists completed drivers.
	slices.SortStableFunc(v.Waiting, func(a, b *model.Driver) int { return queueOrder(queue[a.ID], queue[b.ID]) })
	slices.SortStableFunc(v.Ended, func(a, b *model.Driver) int { return cmp.Compare(b.UpdatedAt, a.UpdatedAt) })
	// Each list shows its first recentFinished rows and links to the
	// drivers list, which pages: a table of a hundred thousand running
	// drivers is not one page.
	v.RunningTotal, v.WaitingTotal, v.EndedTotal = len(v.Running), len(v.Waiting), len(v.Ended)
	v.Running = v.Running[:min(len(v.Running), recentFinished)]
	v.Waiting = v.Waiting[:min(len(v.Waiting), recentFinished)]
	v.Ended = v.Ended[:min(len(v.Ended), recentFinished)]

	states = states[:0]
	for _, a := range s.Apps {
		states = append(states, string(a.State))
		if a.State.Terminal() {
			v.EndedApps = append(v.EndedApps, a)
		} else {
			v.ActiveApps = append(v.ActiveApps, a)
		}
		for _, e := range a.Executors {
			if !e.State.Terminal() {
				v.Executors++
			}
		}
	}
	v.AppCounts = counts(appStateOrder, states)
	slices.SortStableFunc(v.EndedApps, func(a, b api.AppStatus) int { return cmp.Compare(b.EndedAt, a.EndedAt) })
	v.EndedAppsTotal = len(v.EndedApps)
	v.EndedApps = v.EndedApps[:min(len(v.EndedApps), recentFinished)]
	return render("overview", http.StatusOK, v)
}

// namespaceRow is one namespace of the overview's table: its status,
// and its quota and use as the parts the page lists ("8 cores",
// "2.0 GiB", "gpu 1", ...), nothing for a quota that bounds nothing.
type namespaceRow struct {
	api.NamespaceStatus
	Quota, Use []string
}

func namespaceRows(nss []api.NamespaceStatus) []namespaceRow {
	out := make([]namespaceRow, len(nss))
	for i, n := range nss {
		q, u := n.Namespace.Quota, n.Use
		out[i] = namespaceRow{NamespaceStatus: n, Use: amounts(u.Cores, u.MemoryMB, u.Resources)}
		out[i].Quota = amounts(q.Cores, q.MemoryMB, q.Resources)
		if q.RunningDrivers > 0 {
			out[i].Quota = append(out[i].Quota, plural.Count(q.RunningDrivers, "running driver"))
		}
		if u.Executors > 0 {
			out[i].Use = append(out[i].Use, plural.Count(u.Executors, "executor"))
		}
	}
	return out
}

// amounts lists the cores, memory and custom resources that are not 0,
// resources by name.
func amounts(cores int, memoryMB int64, res model.ResourceAmounts) []string {
	var out []string
	if cores > 0 {
		out = append(out, plural.Count(cores, "core"))
	}
	if memoryMB > 0 {
		out = append(out, mib(memoryMB))
	}
	for _, k := range slices.Sorted(maps.Keys(res)) {
		out = append(out, k+" "+strconv.Itoa(res[k]))
	}
	return out
}

// share shows a fraction of the cluster as a percentage with one
// decimal.
func share(f float64) string { return strconv.FormatFloat(f*100, 'f', 1, 64) + " %" }

// staging reports whether d is placed on a worker that has not yet
// started its program: the worker is fetching its artifacts (its
// message, when set, is how the last try went) or about to launch it.
func staging(d *model.Driver) bool {
	return d.WorkerID != "" && !d.State.Terminal() && d.State != model.DriverRunning
}

// queueOrder puts queued positions (1, 2, ...) first, in order, and
// drivers missing from the queue (0) after them.
func queueOrder(a, b int) int {
	switch {
	case a == b:
		return 0
	case a == 0:
		return 1
	case b == 0:
		return -1
	}
	return a - b
}

// DriverPageSize is how many rows a page of the drivers list shows
// unless its URL says limit=N (within the master's --max-list-page).
const DriverPageSize = 100

// stateOption is one choice of the drivers list's state filter.
type stateOption struct {
	Name     string
	Selected bool
}

// Drivers renders one page of the drivers list: the page p the master
// chose by query q (api.ListQuery: states, a name glob, a worker, a
// limit and a cursor), with a form to change the filter and links to the
// first and the next page. The master filters and pages, so a page of a
// table of a million drivers costs its rows only.
func Drivers(f Frame, q api.ListQuery, p api.DriverPage) (Page, error) {
	v := struct {
		Frame
		Q      api.ListQuery
		Rows   []*model.Driver
		Next   string
		States []stateOption
	}{Frame: f, Q: q, Rows: p.Drivers, Next: p.Next}
	for _, st := range model.DriverStates() {
		v.States = append(v.States, stateOption{string(st), len(q.States) == 1 && q.States[0] == string(st)})
	}
	if len(q.States) > 1 {
		v.States = append(v.States, stateOption{strings.Join(q.States, ","), true})
	}
	return render("drivers", http.StatusOK, v)
}

// cursorURL is the drivers list of query q from cursor on ("" for the
// first page).
func cursorURL(p framer, q api.ListQuery, cursor string) template.URL {
	q.Cursor = cursor
	return p.frame().link("/ui/drivers", q.Values())
}

// Driver renders the page of driver d; apps are all apps, of which the
// page lists those d registered.
func Driver(f Frame, d *model.Driver, apps []api.AppStatus) (Page, error) {
	v := struct {
		Frame
		D    *model.Driver
		Apps []api.AppStatus
	}{Frame: f, D: d}
	for _, a := range apps {
		if a.DriverID == d.ID {
			v.Apps = append(v.Apps, a)
		}
	}
	return render("driver", http.StatusOK, v)
}

// App renders the page of one application and its executors.
func App(f Frame, a api.AppStatus) (Page, error) {
	return render("app", http.StatusOK, struct {
		Frame
		A api.AppStatus
	}{f, a})
}

// placedAttempt is one attempt of a driver, for a worker's page.
type placedAttempt struct {
	D *model.Driver
	A model.Attempt
}

// Worker renders the page of worker w: its resources, and the driver
// attempts and executors it runs or ran, found in drivers and apps (all of
// them).
func Worker(f Frame, w *model.Worker, drivers []*model.Driver, apps []api.AppStatus) (Page, error) {
	v := struct {
		Frame
		W                   *model.Worker
		Running, Ended      []placedAttempt
		LiveExecs, EndExecs []*model.Executor
	}{Frame: f, W: w}
	for _, d := range drivers {
		for _, a := range d.Attempts {
			if a.WorkerID != w.ID {
				continue
			}
			// Only the current attempt of an unfinished driver runs;
			// every earlier one has ended, whatever it last reported.
			if a.Attempt == d.Attempt && d.WorkerID == w.ID && !d.State.Terminal() {
				v.Running = append(v.Running, placedAttempt{d, a})
			} else {
				v.Ended = append(v.Ended, placedAttempt{d, a})
			}
		}
	}
	slices.SortStableFunc(v.Ended, func(a, b placedAttempt) int { return cmp.Compare(b.A.EndedAt, a.A.EndedAt) })
	v.Ended = v.Ended[:min(len(v.Ended), recentFinished)]
	for _, a := range apps {
		for _, e := range a.Executors {
			switch {
			case e.WorkerID != w.ID:
			case e.State.Terminal():
				v.EndExecs = append(v.EndExecs, e)
			default:
				v.LiveExecs = append(v.LiveExecs, e)
			}
		}
	}
	slices.SortStableFunc(v.EndExecs, func(a, b *model.Executor) int { return cmp.Compare(b.EndedAt, a.EndedAt) })
	v.EndExecs = v.EndExecs[:min(len(v.EndExecs), recentFinished)]
	return render("worker", http.StatusOK, v)
}

// Log is the tail of one driver attempt's or executor's log.
type Log struct {
	// DriverID and Attempt name a driver attempt's log; otherwise AppID
	// and ExecutorID name an executor's.
	DriverID   string
	Attempt    int
	AppID      string
	ExecutorID int
	// WorkerID is the worker that keeps the file.
	WorkerID string
	// Stream is stdout or stderr.
	Stream string
	// Tail is the end of the log, whose size is Size bytes.
	Tail []byte
	Size int64
	// Err says why there is no tail; Status is then the page's status
	// (502 if 0).
	Err    string
	Status int
}

// LogPage renders the tail of a log in a <pre>, with links to the other
// stream, to the whole log and back. A log that cannot be shown gets a
// sentence saying what that means before Err: gone for good (410), or
// out of reach for now (502).
func LogPage(f Frame, l Log) (Page, error) {
	status := http.StatusOK
	var headline string
	if l.Err != "" {
		status = cmp.Or(l.Status, http.StatusBadGateway)
		switch status {
		case http.StatusGone:
			headline = "This log is no longer kept anywhere."
		case http.StatusBadGateway:
			headline = "The worker that keeps this log does not answer now; the page asks again when it reloads."
		}
	}
	tail := l.Tail
	from := max(l.Size-int64(len(tail)), 0)
	if from > 0 {
		// Start at a whole line: the cut falls anywhere.
		if i := bytes.IndexByte(tail, '\n'); i >= 0 && i < len(tail)-1 {
			from += int64(i + 1)
			tail = tail[i+1:]
		}
	}
	return render("log", status, struct {
		Frame
		L        Log
		Headline string
		Text     string
		From     int64
	}{f, l, headline, strings.ToValidUTF8(string(tail), "\uFFFD"), from})
}
