package ui

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/security/auth"
)

const (
	dRunning  = "driver-20240101000000-1"
	dWaiting  = "driver-20240101000000-2"
	dFinished = "driver-20240101000000-3"
	dHostile  = "driver-20240101000000-4"
	appLive   = "app-20240101000001-1"
	appEnded  = "app-20240101000001-2"
	// t0 is 2024-01-01 00:00:00 UTC in Unix milliseconds.
	t0 = int64(1704067200000)
)

func intp(v int) *int { return &v }

// testState is a follower's view of a cluster with drivers and apps in
// every kind of state, and a name that tries to inject markup.
func testState() *api.State {
	return &api.State{
		ID: "m2", Role: "Follower", Leader: "m1", LeaderHTTP: "127.0.0.1:7102",
		Term: 7, CommitIndex: 420, AppliedIndex: 419,
		Masters: []api.Master{
			{ID: "m1", RaftAddr: "127.0.0.1:7101", HTTPAddr: "127.0.0.1:7102", Suffrage: "Voter", Leader: true, Alive: true},
			{ID: "m2", RaftAddr: "127.0.0.2:7101", HTTPAddr: "127.0.0.2:7102", Suffrage: "Voter", Alive: true},
			{ID: "m3", RaftAddr: "127.0.0.3:7101", Suffrage: "Voter"},
		},
		Workers: []*model.Worker{
			{ID: "w1", HTTPAddr: "127.0.0.11:7402", Cores: 4, CoresUsed: 2, MemoryMB: 4096, MemoryUsedMB: 1536, State: model.WorkerAlive, RegisteredAt: t0},
			{ID: "w2", HTTPAddr: "127.0.0.12:7402", Cores: 8, MemoryMB: 8192, State: model.WorkerDead, Message: "no heartbeat for 1s"},
		},
		Drivers: []*model.Driver{
			{ID: dRunning, Name: "nightly", DriverSpec: model.DriverSpec{User: "etl", Namespace: "etl", Priority: intp(80), Argv: []string{"/bin/sh", "-c", "echo it's on"}, Cores: 1, MemoryMB: 1024, Env: map[string]string{"DROVER_TOKEN": "drv.secret", "AWS_ACCESS_KEY": "AKIA", "MODE": "fast"}},
				State: model.DriverRunning, WorkerID: "w1", Attempt: 1, SubmittedAt: t0, UpdatedAt: t0 + 1000,
				Attempts: []model.Attempt{{Attempt: 1, WorkerID: "w1", State: model.DriverRunning, PlacedAt: t0, StartedAt: t0 + 500}}},
			{ID: dWaiting, DriverSpec: model.DriverSpec{Argv: []string{"/bin/true"}, Cores: 16, MemoryMB: 512}, State: model.DriverSubmitted,
				Message: "waiting: requires more resources than any worker has", SubmittedAt: t0 + 2000},
			{ID: dFinished, Name: "report", DriverSpec: model.DriverSpec{Argv: []string{"/usr/bin/report"}, Cores: 1, MemoryMB: 256, Supervise: true},
				State: model.DriverFinished, WorkerID: "w1", Attempt: 2, ExitCode: intp(0), SubmittedAt: t0, UpdatedAt: t0 + 90_000,
				Attempts: []model.Attempt{
					{Attempt: 1, WorkerID: "w2", State: model.DriverError, PlacedAt: t0, StartedAt: t0 + 100, EndedAt: t0 + 30_000, Reason: "worker w2 lost"},
					{Attempt: 2, WorkerID: "w1", State: model.DriverFinished, PlacedAt: t0 + 31_000, StartedAt: t0 + 31_500, EndedAt: t0 + 90_000, ExitCode: intp(0)},
				}},
			{ID: dHostile, Name: `<script>alert("x")</script>`, DriverSpec: model.DriverSpec{Argv: []string{`"><img src=x>`}}, State: model.DriverKilled,
				SubmittedAt: t0, UpdatedAt: t0 + 5000, Message: `<b>killed</b>`},
		},
		WaitingDrivers: []string{dWaiting},
		Apps: []api.AppStatus{
			{App: &model.App{ID: appLive, Name: "wordcount", ExecutorSpec: model.ExecutorSpec{User: "etl", CoresPerExecutor: 1, MemoryPerExecutorMB: 512, ExecutorLimit: -1, MaxExecutorRetries: 10, Argv: []string{"/bin/executor"}}, DriverID: dRunning, DriverAttempt: 1,
				State: model.AppRunning, CoresGranted: 1,
				SubmittedAt: t0 + 1000},
				Executors: []*model.Executor{
					{AppID: appLive, ID: 3, WorkerID: "w1", Cores: 1, MemoryMB: 512, State: model.ExecRunning, LaunchedAt: t0 + 1100, StartedAt: t0 + 1200},
					{AppID: appLive, ID: 4, WorkerID: "w2", Cores: 1, MemoryMB: 512, State: model.ExecFailed, ExitCode: intp(3), Message: "exited 3", EndedAt: t0 + 1500},
				}},
			{App: &model.App{ID: appEnded, Name: "old", State: model.AppFinished, SubmittedAt: t0, EndedAt: t0 + 60_000}},
		},
	}
}

// testNamespaces are the namespaces of testState: the implicit default,
// and etl with a quota, a weight of 3 and preemption.
func testNamespaces() []api.NamespaceStatus {
	return []api.NamespaceStatus{
		{Namespace: model.ImplicitDefault(), Use: api.NamespaceUse{}, Queued: 1, FairShare: 0.25},
		{Namespace: &model.Namespace{Name: "etl", Weight: 3, DriverShare: 0.5, PriorityMax: 90, Preempt: true,
			Quota: model.Quota{Cores: 8, MemoryMB: 16384, Resources: model.ResourceAmounts{"gpu": 2}, RunningDrivers: 4}},
			Use:     api.NamespaceUse{Cores: 2, MemoryMB: 1536, Resources: model.ResourceAmounts{"gpu": 1}, DriverCores: 1, DriverMemoryMB: 1024, RunningDrivers: 1, Executors: 1},
			Running: 1, FairShare: 0.75},
	}
}

// frame is the Frame master would make for a GET of target on follower
// m2 of testState.
func frame(target string) Frame {
	r := httptest.NewRequest(http.MethodGet, target, nil)
	f := NewFrame(r)
	f.MasterID, f.Role, f.Leader, f.Scheme = "m2", "Follower", "m1", "http"
	f.LeaderURL = "http://127.0.0.1:7102" + r.URL.RequestURI()
	f.Now = time.UnixMilli(t0 + 10_000)
	return f
}

// doc parses a page, failing on a render error or an unexpected status.
func doc(t *testing.T, p Page, err error, status int) *html.Node {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if p.Status != status {
		t.Fatalf("status %d, want %d", p.Status, status)
	}
	n, err := html.Parse(strings.NewReader(string(p.Body)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// byID returns the element with this id, failing when there is none.
func byID(t *testing.T, n *html.Node, id string) *html.Node {
	t.Helper()
	found := findID(n, id)
	if found == nil {
		t.Fatalf("no element with id %q", id)
	}
	return found
}

// findID returns the element with this id, nil when there is none.
func findID(n *html.Node, id string) *html.Node {
	var found *html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		for _, a := range n.Attr {
			if a.Key == "id" && a.Val == id {
				found = n
			}
		}
		for c := n.FirstChild; c != nil && found == nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return found
}

// text is the text content of n, spaces collapsed.
func text(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
		if n.Type == html.ElementNode && (n.Data == "td" || n.Data == "th" || n.Data == "dt" || n.Data == "dd") {
			b.WriteString(" ")
		}
	}
	walk(n)
	return strings.Join(strings.Fields(b.String()), " ")
}

// links lists the href of every <a> under n.
func links(n *html.Node) []string {
	var out []string
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "a" {
			for _, a := range n.Attr {
				if a.Key == "href" {
					out = append(out, a.Val)
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return out
}

func hasLink(t *testing.T, n *html.Node, href string) {
	t.Helper()
	for _, l := range links(n) {
		if l == href {
			return
		}
	}
	t.Fatalf("no link to %q among %q", href, links(n))
}

func contains(t *testing.T, n *html.Node, want ...string) {
	t.Helper()
	got := text(n)
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Fatalf("%q does not contain %q", got, w)
		}
	}
}

func TestOverviewOnFollower(t *testing.T) {
	p, err := Overview(frame("/"), testState(), testNamespaces())
	n := doc(t, p, err, http.StatusOK)
	body := string(p.Body)
	if !strings.Contains(body, `<meta http-equiv="refresh" content="5">`) {
		t.Fatal("no meta refresh every 5 s")
	}
	contains(t, byID(t, n, "follower"), "This master's view (follower m2)", "The leader is m1")
	if got := links(byID(t, n, "follower")); len(got) != 1 || got[0] != "http://127.0.0.1:7102/" {
		t.Fatalf("follower note links %q, want the leader's page", got)
	}
	contains(t, byID(t, n, "self"), "m2 (Follower)", "term 7", "commit index 420", "applied index 419")
	contains(t, byID(t, n, "alive"), "1 of 2")
	contains(t, byID(t, n, "driver-counts"), "1 RUNNING", "1 SUBMITTED", "1 FINISHED", "1 KILLED")
	contains(t, byID(t, n, "app-counts"), "1 RUNNING", "1 FINISHED", "1 live executors")

	masters := byID(t, n, "masters")
	contains(t, masters, "m1", "127.0.0.1:7101", "leader", "m2 (this master)")
	hasLink(t, masters, "http://127.0.0.2:7102/")
	// m3 is out of the gossip pool: it does not answer, and says so
	// rather than that its address is unknown.
	if got := text(masters); !strings.Contains(got, "m1 up") || !strings.Contains(got, "m3 down") || strings.Contains(got, "unknown") {
		t.Fatalf("masters table %q: want m1 up and m3 down", got)
	}

	// Each namespace the view holds is a row: weight, quota (none for
	// the implicit default), use, fair share, queued and running.
	nss := byID(t, n, "namespaces")
	contains(t, nss, "default 1 none nothing 25.0 % 1 0",
		"etl preempts 3 8 cores · 16.0 GiB · gpu 2 · 4 running drivers 2 cores · 1.5 GiB · gpu 1 · 1 executor 75.0 % 0 1")

	workers := byID(t, n, "workers")
	contains(t, workers, "w1", "ALIVE", "2 / 4", "1.5 GiB / 4.0 GiB", "w2", "DEAD", "no heartbeat for 1s")
	hasLink(t, workers, "/ui/workers/w1")
	if !strings.Contains(body, `style="width:50%"`) {
		t.Fatal("no half-full cores bar for w1")
	}

	// Each driver row names its namespace, and its priority where
	// the submission asked for one.
	running := byID(t, n, "running-drivers")
	contains(t, running, dRunning, "nightly", "etl priority 80", "RUNNING", "10.0 s")
	hasLink(t, running, "/ui/drivers/"+dRunning)
	waiting := byID(t, n, "waiting-drivers")
	contains(t, waiting, dWaiting, "default", "requires more resources")
	if strings.Contains(text(waiting), "priority") {
		t.Fatalf("waiting drivers %q: a priority for a driver that asked for none", text(waiting))
	}
	completed := byID(t, n, "completed-drivers")
	contains(t, completed, dFinished, "FINISHED", "1.5 min", dHostile)
	contains(t, byID(t, n, "running-apps"), appLive, "wordcount", dRunning)
	contains(t, byID(t, n, "completed-apps"), appEnded, "1.0 min")
}

// The namespaces table shows the rows the view is given and no others:
// a caller whose view holds etl alone sees etl's row alone, and a view
// without namespaces has no table. Its cells are text, never markup.
func TestNamespacesTableShowsWhatTheViewHolds(t *testing.T) {
	p, err := Overview(frame("/"), testState(), testNamespaces()[1:])
	n := doc(t, p, err, http.StatusOK)
	if got := text(byID(t, n, "namespaces")); !strings.Contains(got, "etl") || strings.Contains(got, "default") {
		t.Fatalf("namespaces table %q: want etl's row alone", got)
	}
	p, err = Overview(frame("/"), testState(), nil)
	if n := doc(t, p, err, http.StatusOK); findID(n, "namespaces") != nil {
		t.Fatal("a namespaces table without namespaces")
	}
	hostile := testNamespaces()
	hostile[1].Name = `<script>alert("ns")</script>`
	hostile[1].Quota.Resources = model.ResourceAmounts{`<img src=x>`: 1}
	p, err = Overview(frame("/"), testState(), hostile)
	n = doc(t, p, err, http.StatusOK)
	if body := string(p.Body); strings.Contains(body, `<script>alert("ns")`) || strings.Contains(body, "<img") {
		t.Fatal("a namespace's name or resource is markup on the page")
	}
	contains(t, byID(t, n, "namespaces"), `<script>alert("ns")</script>`, "<img src=x> 1")
}

// Names, arguments and messages come from users; the page shows them as
// text, never as markup.
// A driver placed on a worker that is still staging its artifacts has
// not started: it is listed with the waiting drivers, saying "staging"
// and its worker's last line, not with the running ones.
func TestStagingDriversWait(t *testing.T) {
	const staged, placed = "driver-20240101000000-5", "driver-20240101000000-6"
	s := testState()
	s.Drivers = append(s.Drivers,
		&model.Driver{ID: staged, DriverSpec: model.DriverSpec{Argv: []string{"/bin/true"}, Cores: 1, MemoryMB: 512}, State: model.DriverSubmitted, WorkerID: "w1", Attempt: 1,
			Staging: true, Message: "fetching http://127.0.0.9/app.jar: connection refused, try 3, next in 8s", SubmittedAt: t0,
			Attempts: []model.Attempt{{Attempt: 1, WorkerID: "w1", State: model.DriverSubmitted, PlacedAt: t0}}},
		&model.Driver{ID: placed, DriverSpec: model.DriverSpec{Argv: []string{"/bin/true"}, Cores: 1, MemoryMB: 512}, State: model.DriverSubmitted, WorkerID: "w1", Attempt: 1,
			SubmittedAt: t0, Attempts: []model.Attempt{{Attempt: 1, WorkerID: "w1", State: model.DriverSubmitted, PlacedAt: t0}}})
	p, err := Overview(frame("/"), s, nil)
	n := doc(t, p, err, http.StatusOK)
	if running := text(byID(t, n, "running-drivers")); strings.Contains(running, staged) || strings.Contains(running, placed) || !strings.Contains(running, dRunning) {
		t.Fatalf("running drivers %q: want %s alone", running, dRunning)
	}
	contains(t, byID(t, n, "waiting-drivers"), dWaiting, staged, "staging on w1: fetching http://127.0.0.9/app.jar: connection refused, try 3, next in 8s",
		placed, "staging on w1")
	hasLink(t, byID(t, n, "running-drivers").Parent, "/ui/drivers?state=RUNNING")
}

func TestEscapesEverything(t *testing.T) {
	s := testState()
	ov, err := Overview(frame("/"), s, nil)
	if err != nil {
		t.Fatal(err)
	}
	dp, err := Driver(frame("/ui/drivers/"+dHostile), s.Drivers[3], s.Apps)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []Page{ov, dp} {
		body := string(p.Body)
		for _, bad := range []string{"<script", "<img", "<b>killed"} {
			if strings.Contains(body, bad) {
				t.Fatalf("page holds %q unescaped", bad)
			}
		}
		if !strings.Contains(body, "&lt;script&gt;") {
			t.Fatal("the hostile name is not shown escaped")
		}
	}
	n := doc(t, dp, nil, http.StatusOK)
	contains(t, byID(t, n, "argv"), `'"><img src=x>'`)
}

func TestPauseAndRefresh(t *testing.T) {
	s := testState()
	p, err := Overview(frame("/?refresh=0"), s, nil)
	n := doc(t, p, err, http.StatusOK)
	if strings.Contains(string(p.Body), `http-equiv="refresh"`) {
		t.Fatal("a paused page reloads itself")
	}
	contains(t, byID(t, n, "refresh"), "paused", "resume")
	hasLink(t, n, "/")
	// Links stay paused.
	hasLink(t, byID(t, n, "running-drivers"), "/ui/drivers/"+dRunning+"?refresh=0")

	p, err = Overview(frame("/?refresh=12"), s, nil)
	n = doc(t, p, err, http.StatusOK)
	if !strings.Contains(string(p.Body), `<meta http-equiv="refresh" content="12">`) {
		t.Fatal("refresh=12 does not reload every 12 s")
	}
	hasLink(t, byID(t, n, "refresh"), "/?refresh=0")
	hasLink(t, byID(t, n, "running-drivers"), "/ui/drivers/"+dRunning)

	// The pause link keeps the page's other parameters.
	f := frame("/ui/drivers/" + dRunning + "/logs?stream=stderr&attempt=1")
	if got, want := f.PauseURL(), "/ui/drivers/"+dRunning+"/logs?attempt=1&refresh=0&stream=stderr"; got != want {
		t.Fatalf("PauseURL %q, want %q", got, want)
	}
	if f := frame("/?refresh=-3"); f.Refresh != DefaultRefresh {
		t.Fatalf("refresh=-3 gives %d", f.Refresh)
	}
	if f := frame("/?refresh=999999"); f.Refresh != maxRefresh {
		t.Fatalf("refresh=999999 gives %d", f.Refresh)
	}
}

func TestDriverPage(t *testing.T) {
	s := testState()
	p, err := Driver(frame("/ui/drivers/"+dFinished), s.Drivers[2], s.Apps)
	n := doc(t, p, err, http.StatusOK)
	contains(t, byID(t, n, "driver-id"), dFinished)
	contains(t, byID(t, n, "driver-state"), "FINISHED")
	attempts := byID(t, n, "attempts")
	contains(t, attempts, "w2", "ERROR", "worker w2 lost", "w1", "FINISHED", "58.5 s")
	for _, l := range []string{
		"/ui/drivers/" + dFinished + "/logs?attempt=1&stream=stdout",
		"/ui/drivers/" + dFinished + "/logs?attempt=1&stream=stderr",
		"/ui/drivers/" + dFinished + "/logs?attempt=2&stream=stdout",
		"/ui/workers/w2",
	} {
		hasLink(t, attempts, l)
	}

	// The running driver lists the app it registered, and hides secrets
	// in its environment as Spark's UI does.
	p, err = Driver(frame("/ui/drivers/"+dRunning), s.Drivers[0], s.Apps)
	n = doc(t, p, err, http.StatusOK)
	hasLink(t, n, "/ui/apps/"+appLive)
	contains(t, n, "MODE fast", "DROVER_TOKEN "+redacted, "AWS_ACCESS_KEY "+redacted)
	if strings.Contains(string(p.Body), "drv.secret") || strings.Contains(string(p.Body), "AKIA") {
		t.Fatal("a secret environment value is shown")
	}
	contains(t, byID(t, n, "argv"), `/bin/sh -c 'echo it'\''s on'`)
	contains(t, byID(t, n, "driver-user"), "etl")
	contains(t, byID(t, n, "driver-namespace"), "etl · priority 80")

	// Not placed yet.
	p, err = Driver(frame("/ui/drivers/"+dWaiting), s.Drivers[1], s.Apps)
	n = doc(t, p, err, http.StatusOK)
	contains(t, n, "not placed on a worker yet", "requires more resources")
	contains(t, byID(t, n, "driver-user"), "the worker's default")
	contains(t, byID(t, n, "driver-namespace"), "default")
}

func TestAppPage(t *testing.T) {
	s := testState()
	p, err := App(frame("/ui/apps/"+appLive), s.Apps[0])
	n := doc(t, p, err, http.StatusOK)
	contains(t, byID(t, n, "app-state"), "RUNNING")
	execs := byID(t, n, "executors")
	contains(t, execs, "3", "RUNNING", "w1", "4", "FAILED", "exited 3")
	hasLink(t, execs, "/ui/apps/"+appLive+"/executors/3/logs?stream=stdout")
	hasLink(t, execs, "/ui/apps/"+appLive+"/executors/4/logs?stream=stderr")
	hasLink(t, n, "/ui/drivers/"+dRunning)
	contains(t, byID(t, n, "app-user"), "etl")

	p, err = App(frame("/ui/apps/"+appEnded), s.Apps[1])
	n = doc(t, p, err, http.StatusOK)
	contains(t, n, "no executor yet", "none (registered by a program outside the cluster)")
	contains(t, byID(t, n, "app-user"), "the worker's default")
}

func TestWorkerPage(t *testing.T) {
	s := testState()
	p, err := Worker(frame("/ui/workers/w1"), s.Workers[0], s.Drivers, s.Apps)
	n := doc(t, p, err, http.StatusOK)
	contains(t, byID(t, n, "worker-cores"), "2 / 4 used")
	contains(t, byID(t, n, "worker-memory"), "1.5 GiB / 4.0 GiB used")
	contains(t, byID(t, n, "running-drivers"), dRunning)
	contains(t, byID(t, n, "finished-drivers"), dFinished, "FINISHED")
	contains(t, byID(t, n, "running-executors"), appLive)
	hasLink(t, byID(t, n, "running-drivers"), "/ui/drivers/"+dRunning+"/logs?attempt=1&stream=stdout")
	if strings.Contains(text(byID(t, n, "finished-drivers")), dRunning) {
		t.Fatal("a running driver is listed as finished")
	}

	// The dead worker ran the first attempt of the finished driver and
	// the failed executor.
	p, err = Worker(frame("/ui/workers/w2"), s.Workers[1], s.Drivers, s.Apps)
	n = doc(t, p, err, http.StatusOK)
	contains(t, byID(t, n, "worker-state"), "DEAD")
	contains(t, byID(t, n, "finished-drivers"), dFinished, "ERROR")
	contains(t, byID(t, n, "finished-executors"), appLive, "FAILED")
	contains(t, byID(t, n, "running-drivers"), "none")
}

// A worker that registered again shows when it did, beside its first
// registration; one that is gone, since when.
func TestWorkerPageShowsTheLastRegistration(t *testing.T) {
	s := testState()
	w := *s.Workers[0]
	w.UpdatedAt = t0 + 3_600_000
	p, err := Worker(frame("/ui/workers/w1"), &w, s.Drivers, s.Apps)
	n := doc(t, p, err, http.StatusOK)
	contains(t, byID(t, n, "worker-registered"), "2024-01-01 00:00:00")
	contains(t, byID(t, n, "worker-since"), "2024-01-01 01:00:00")
	contains(t, n, "First registered", "Last registered")
	w.State = model.WorkerDead
	p, err = Worker(frame("/ui/workers/w1"), &w, s.Drivers, s.Apps)
	contains(t, doc(t, p, err, http.StatusOK), "Lost")
	p, err = Overview(frame("/"), &api.State{Workers: []*model.Worker{s.Workers[0], &w}}, nil)
	contains(t, byID(t, doc(t, p, err, http.StatusOK), "workers"), "State since", "2024-01-01 01:00:00")
}

func TestLogPage(t *testing.T) {
	l := Log{DriverID: dRunning, Attempt: 1, WorkerID: "w1", Stream: "stdout",
		Tail: []byte("ial line\nsecond <line>\nthird \xff line\n"), Size: 1000}
	p, err := LogPage(frame("/ui/drivers/"+dRunning+"/logs?stream=stdout&attempt=1"), l)
	n := doc(t, p, err, http.StatusOK)
	// The tail starts at a whole line, and bytes that are not UTF-8 show
	// as replacement characters.
	if got, want := byID(t, n, "log").FirstChild.Data, "second <line>\nthird \uFFFD line\n"; got != want {
		t.Fatalf("log %q, want %q", got, want)
	}
	contains(t, byID(t, n, "extent"), "from byte 973", "of 1000")
	hasLink(t, n, "/v1/drivers/"+dRunning+"/logs?attempt=1&stale=true&stream=stdout")
	hasLink(t, n, "/ui/drivers/"+dRunning+"/logs?attempt=1&stream=stderr")
	hasLink(t, n, "/ui/workers/w1")

	p, err = LogPage(frame("/ui/apps/"+appLive+"/executors/3/logs?stream=stderr"),
		Log{AppID: appLive, ExecutorID: 3, Stream: "stderr", Err: "worker w1 at 127.0.0.11:7402: connection refused", Status: http.StatusBadGateway})
	n = doc(t, p, err, http.StatusBadGateway)
	contains(t, byID(t, n, "headline"), "does not answer now")
	contains(t, byID(t, n, "message"), "connection refused")
	hasLink(t, n, "/v1/apps/"+appLive+"/executors/3/logs?stale=true&stream=stderr")
	hasLink(t, n, "/ui/apps/"+appLive+"/executors/3/logs?stream=stdout")

	p, err = LogPage(frame("/"), Log{DriverID: dRunning, Attempt: 1, Stream: "stderr"})
	contains(t, doc(t, p, err, http.StatusOK), "0 bytes.", "empty")

	// A log gone for good says so before why.
	p, err = LogPage(frame("/"), Log{DriverID: dRunning, Attempt: 1, Stream: "stdout", WorkerID: "w1",
		Err: "attempt 1 of " + dRunning + " ran on worker w1, which the masters no longer know: its logs went with it", Status: http.StatusGone})
	n = doc(t, p, err, http.StatusGone)
	contains(t, byID(t, n, "headline"), "no longer kept anywhere")
	contains(t, byID(t, n, "message"), "no longer know")
	if findID(n, "log") != nil {
		t.Fatal("a gone log shows a log")
	}

	// An error without a status is the worker's fault.
	p, err = LogPage(frame("/"), Log{DriverID: dRunning, Attempt: 1, Stream: "stdout", Err: "no route"})
	contains(t, doc(t, p, err, http.StatusBadGateway), "no route")
}

func TestErrorAndLoginPages(t *testing.T) {
	p := Error(frame("/ui/drivers/driver-20990101000000-9"), http.StatusNotFound, "unknown driver: driver-20990101000000-9")
	n := doc(t, p, nil, http.StatusNotFound)
	contains(t, n, "404 Not Found", "unknown driver: driver-20990101000000-9")
	if strings.Contains(string(p.Body), `http-equiv="refresh"`) {
		t.Fatal("an error page reloads itself")
	}

	f := frame("/ui/login")
	p, err := Login(f, LoginForm{Next: "/ui/drivers/" + dRunning, Message: "read access needs a token"}, http.StatusUnauthorized)
	n = doc(t, p, err, http.StatusUnauthorized)
	body := string(p.Body)
	for _, want := range []string{`<form class="login" method="post" action="/ui/login">`, `type="password"`,
		`name="next" value="/ui/drivers/` + dRunning + `"`} {
		if !strings.Contains(body, want) {
			t.Fatalf("login page lacks %q", want)
		}
	}
	if strings.Contains(body, `http-equiv="refresh"`) {
		t.Fatal("the login page reloads under a person typing")
	}
	contains(t, byID(t, n, "message"), "read access needs a token")

	p, err = Login(f, LoginForm{NoTokens: "This master uses no tokens."}, http.StatusOK)
	if n = doc(t, p, err, http.StatusOK); strings.Contains(string(p.Body), "<form class=\"login\"") {
		t.Fatal("a login form on a master without tokens")
	}
	contains(t, byID(t, n, "no-tokens"), "uses no tokens")

	// With the cookie set, every page offers to log out.
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.AddCookie(&http.Cookie{Name: auth.CookieName, Value: "x"})
	if f := NewFrame(r); !f.LoggedIn {
		t.Fatal("NewFrame does not see the login cookie")
	} else if p, _ := Overview(f, testState(), nil); !strings.Contains(string(p.Body), `action="/ui/logout"`) {
		t.Fatal("no log out button while logged in")
	}
}

func TestPageHeaders(t *testing.T) {
	rec := httptest.NewRecorder()
	Error(frame("/"), http.StatusNotFound, "gone").ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != http.StatusNotFound {
		t.Fatalf("status %d", rec.Code)
	}
	for k, want := range map[string]string{
		"Content-Type":            "text/html; charset=utf-8",
		"Content-Security-Policy": contentSecurityPolicy,
		"X-Frame-Options":         "DENY",
		"Cache-Control":           "no-store",
		"X-Content-Type-Options":  "nosniff",
	} {
		if got := rec.Header().Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	if !strings.Contains(contentSecurityPolicy, "default-src 'none'") || strings.Contains(contentSecurityPolicy, "script-src") {
		t.Error("the policy must allow no script")
	}
}

func TestFrameRefusesOtherHosts(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.URL.Path = "//evil.example/x"
	if got := NewFrame(r).PauseURL(); got != "/?refresh=0" {
		t.Fatalf("PauseURL %q for a path naming another host", got)
	}
}

// A split gossip pool is said on the overview, naming who is missing;
// a whole one says nothing.
func TestOverviewSaysThePoolIsSplit(t *testing.T) {
	s := testState()
	p, err := Overview(frame("/"), s, nil)
	n := doc(t, p, err, http.StatusOK)
	if findID(n, "pool-split") != nil {
		t.Fatal("a whole pool is reported split")
	}
	s.PoolSplit = []api.PoolMember{{Role: "master", ID: "m3"}, {Role: "worker", ID: "w2"}}
	p, err = Overview(frame("/"), s, nil)
	n = doc(t, p, err, http.StatusOK)
	contains(t, byID(t, n, "pool-split"), "Gossip pool split", "master m3, worker w2", "gossip keys")
}

// A worker offering custom resources shows what it offers and holds, and
// each attempt and executor on it what it holds.
func TestWorkerPageShowsResources(t *testing.T) {
	s := testState()
	w := s.Workers[0]
	w.Resources, w.ResourcesUsed = model.Resources{"gpu": {"0", "1", "2"}}, model.Resources{"gpu": {"0", "2"}}
	s.Drivers[0].Attempts[0].Resources = model.Resources{"gpu": {"2"}}
	s.Apps[0].Executors[0].Resources = model.Resources{"gpu": {"0"}}
	p, err := Worker(frame("/ui/workers/w1"), w, s.Drivers, s.Apps)
	n := doc(t, p, err, http.StatusOK)
	contains(t, byID(t, n, "worker-resources"), "gpu=0,1,2")
	contains(t, byID(t, n, "worker-resources-held"), "gpu=0,2")
	contains(t, byID(t, n, "running-drivers"), "gpu=2")
	contains(t, byID(t, n, "running-executors"), "gpu=0")
}
