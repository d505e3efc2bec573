package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
)

// fakeMaster answers the few API calls the CLI's parsing tests make, as
// a leader would, and records the submissions it takes.
type fakeMaster struct {
	*httptest.Server
	mu        sync.Mutex
	drivers   []*model.Driver
	submitted []api.SubmitRequest
	// placed is the row a submission makes, given its ID; RUNNING on w1
	// unless a test says otherwise.
	placed func(id string) *model.Driver
	// logs answers GET /v1/drivers/{id}/logs when a test sets it.
	logs http.HandlerFunc
	// events are the queries of GET /v1/events: the first gets one
	// driver event past its index, the others a refusal.
	events []url.Values
	// lists are the queries of GET /v1/drivers, which gets every driver
	// whatever it asks: the masters' filters are theirs to test.
	lists []url.Values
	// holdEvents keeps each event stream open after its event, as a
	// master does, until the client goes.
	holdEvents bool
}

func newFakeMaster(t *testing.T, drivers ...*model.Driver) *fakeMaster {
	f := &fakeMaster{drivers: drivers, placed: func(id string) *model.Driver {
		return &model.Driver{ID: id, State: model.DriverRunning, WorkerID: "w1", Attempt: 1,
			Attempts: []model.Attempt{{Attempt: 1, WorkerID: "w1", State: model.DriverRunning}}}
	}}
	mux := http.NewServeMux()
	reply := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("GET /v1/drivers", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.lists = append(f.lists, r.URL.Query())
		if r.URL.Query().Has(api.QueryLimit) {
			reply(w, api.DriverPage{Drivers: f.drivers})
			return
		}
		reply(w, f.drivers)
	})
	mux.HandleFunc("POST /v1/drivers", func(w http.ResponseWriter, r *http.Request) {
		var req api.SubmitRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		defer f.mu.Unlock()
		f.submitted = append(f.submitted, req)
		id := "driver-20260101000000-0100"
		f.drivers = append(f.drivers, f.placed(id))
		reply(w, api.SubmitResponse{DriverID: id})
	})
	mux.HandleFunc("GET /v1/drivers/{id}", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, d := range f.drivers {
			if d.ID == r.PathValue("id") {
				reply(w, d)
				return
			}
		}
		w.WriteHeader(http.StatusNotFound)
		reply(w, api.Error{Error: "unknown driver", Code: api.CodeUnknownDriver})
	})
	mux.HandleFunc("GET /v1/drivers/{id}/logs", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		logs := f.logs
		f.mu.Unlock()
		if logs == nil {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		logs(w, r)
	})
	mux.HandleFunc("GET /v1/state", func(w http.ResponseWriter, r *http.Request) {
		reply(w, api.State{ID: "m1", Role: "Leader", Leader: "m1", LeaderHTTP: f.addr(), AppliedIndex: 7})
	})
	mux.HandleFunc("GET /v1/events", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.events = append(f.events, r.URL.Query())
		n := len(f.events)
		f.mu.Unlock()
		if n > 1 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			reply(w, api.Error{Error: "no more events here", Code: api.CodeInvalidRequest})
			return
		}
		after, _ := strconv.ParseUint(r.URL.Query().Get("index"), 10, 64)
		e := api.Event{Index: after + 1, Kind: api.EventDriver, ID: "driver-20260101000000-0001", Op: api.OpUpsert,
			Driver: &model.Driver{ID: "driver-20260101000000-0001", State: model.DriverSubmitted, ModifyIndex: after + 1, DriverSpec: model.DriverSpec{Argv: shellArgv}}}
		b, _ := json.Marshal(e)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: driver\nid: %d\ndata: %s\n\n", e.Index, b)
		f.mu.Lock()
		hold := f.holdEvents
		f.mu.Unlock()
		if hold {
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}
	})
	// m1 is this fake, m2 an address where nothing listens, m3 a voter
	// whose HTTP address no master knows.
	mux.HandleFunc("GET /v1/operator/raft/peers", func(w http.ResponseWriter, r *http.Request) {
		reply(w, api.RaftPeers{Peers: []api.Master{
			{ID: "m1", RaftAddr: "127.0.0.1:7101", HTTPAddr: f.addr(), Suffrage: "Voter", Leader: true},
			{ID: "m2", RaftAddr: "127.0.0.1:7201", HTTPAddr: "127.0.0.1:1", Suffrage: "Voter"},
			{ID: "m3", RaftAddr: "127.0.0.1:7301", Suffrage: "Voter"},
		}})
	})
	mux.HandleFunc("GET /v1/health", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		reply(w, api.Health{ID: "m1", Status: "degraded", Leader: "m1", Checks: []api.Check{{Name: api.CheckLeader, OK: true, Message: "leader m1"}, {Name: api.CheckPool, Message: "voters missing"}}})
	})
	f.Server = httptest.NewServer(mux)
	t.Cleanup(f.Close)
	return f
}

// addr is the fake's host:port, as --masters takes it.
func (f *fakeMaster) addr() string { return strings.TrimPrefix(f.URL, "http://") }

// drover runs the CLI in this process and returns its output and exit
// code.
func drover(args ...string) (stdout, stderr string, code int) {
	var out, errOut bytes.Buffer
	switch args[0] {
	case "client":
		code = runClient(args[1:], &out, &errOut)
	case "operator":
		code = runOperator(args[1:], &out, &errOut)
	}
	return out.String(), errOut.String(), code
}

// The connect flags work before the command and after it, the later
// winning; --timeout must be positive; a program's own arguments after
// "--" are never taken for them.
func TestConnectFlagsEitherSide(t *testing.T) {
	t.Setenv("DROVER_MASTERS", "")
	f := newFakeMaster(t)
	dead := "127.0.0.1:1"
	for _, c := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"client", "--masters", f.addr(), "list"}, 0, ""},
		{[]string{"client", "list", "--masters", f.addr()}, 0, ""},
		{[]string{"client", "--masters", dead, "--timeout", "1s", "list", "--masters", f.addr()}, 0, ""},
		{[]string{"client", "leader", "--timeout", "5s", "--masters", f.addr()}, 0, ""},
		{[]string{"operator", "raft", "list-peers", "--masters", f.addr()}, 0, ""},
		{[]string{"operator", "--timeout", "5s", "raft", "list-peers", "--stale", "--masters", f.addr()}, 0, ""},
		{[]string{"client", "list"}, 1, "no master addresses given"},
		{[]string{"client", "list", "--masters", f.addr(), "--timeout", "0"}, 1, "--timeout must be positive, got 0s"},
		{[]string{"client", "--timeout", "-5s", "list", "--masters", f.addr()}, 1, "--timeout must be positive, got -5s"},
		{[]string{"operator", "raft", "list-peers", "--masters", f.addr(), "--timeout", "0s"}, 1, "--timeout must be positive"},
	} {
		_, stderr, code := drover(c.args...)
		if code != c.code || !strings.Contains(stderr, c.err) {
			t.Errorf("drover %s: exit %d, stderr %q; want %d and %q", strings.Join(c.args, " "), code, stderr, c.code, c.err)
		}
	}
	if stdout, _, code := drover("client", "list", "--help"); code != 0 || !strings.Contains(stdout, "--timeout duration") {
		t.Errorf("client list --help: exit %d, does not show --timeout: %s", code, stdout)
	}
	for _, cmd := range []string{"client", "operator"} {
		if stdout, _, code := drover(cmd, "--help"); code != 0 || !strings.Contains(stdout, "--timeout D      how long to keep trying the masters, positive (default 30s)") {
			t.Errorf("%s --help: exit %d, does not show the default timeout: %s", cmd, code, stdout)
		}
	}

	stdout, stderr, code := drover("client", "submit", "--masters", f.addr(), "--", "/bin/prog", "--masters", "elsewhere", "--timeout", "0")
	if code != 0 || !strings.HasSuffix(stdout, "driver-20260101000000-0100\n") {
		t.Fatalf("submit: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if argv := f.submitted[0].Argv; !slices.Equal(argv, []string{"/bin/prog", "--masters", "elsewhere", "--timeout", "0"}) {
		t.Fatalf("the program got %q", argv)
	}
}

// listed returns the IDs and the WORKER and ATTEMPT cells of list's
// table, a row each.
func listed(t *testing.T, stdout string) [][]string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if !strings.HasPrefix(lines[0], "ID ") {
		t.Fatalf("no header: %q", stdout)
	}
	var rows [][]string
	// MESSAGE, the last column, is free text: cut at its header.
	msg := strings.Index(lines[0], "MESSAGE")
	for _, l := range lines[1:] {
		f := strings.Fields(l[:min(msg, len(l))])
		// ID, NAME (may be empty), STATE, WORKER, ATTEMPT, ...: count
		// from the end, which has SUPERVISE, EXIT and SUBMITTED.
		rows = append(rows, []string{f[0], f[len(f)-5], f[len(f)-4]})
	}
	return rows
}

// list passes its filters to the masters, prints what they answer,
// shows a driver that waits for a worker as waiting, and refuses a
// filter that can match nothing before it asks the masters.
func TestListFilters(t *testing.T) {
	one := 1
	f := newFakeMaster(t,
		&model.Driver{ID: "driver-20260101000000-0001", Name: "etl-daily", State: model.DriverRunning, WorkerID: "w1", Attempt: 1,
			Attempts: []model.Attempt{{Attempt: 1, WorkerID: "w1", State: model.DriverRunning}}},
		&model.Driver{ID: "driver-20260101000000-0002", Name: "etl-hourly", State: model.DriverSubmitted, Attempt: 1, Attempts: []model.Attempt{}},
		&model.Driver{ID: "driver-20260101000000-0003", Name: "report", State: model.DriverFinished, WorkerID: "w2", Attempt: 1, ExitCode: &one,
			Attempts: []model.Attempt{{Attempt: 1, WorkerID: "w2", State: model.DriverFinished}}},
		&model.Driver{ID: "driver-20260101000000-0004", State: model.DriverKilled, Attempt: 1, Attempts: []model.Attempt{}},
	)
	list := func(args ...string) (string, string, int) {
		return drover(append([]string{"client", "list", "--masters", f.addr()}, args...)...)
	}
	lastQuery := func() url.Values {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.lists[len(f.lists)-1]
	}
	stdout, _, code := list()
	rows := listed(t, stdout)
	if code != 0 || len(rows) != 4 || !slices.Equal(rows[0], []string{"driver-20260101000000-0001", "w1", "1"}) ||
		!slices.Equal(rows[1], []string{"driver-20260101000000-0002", "(waiting)", "-"}) ||
		!slices.Equal(rows[3], []string{"driver-20260101000000-0004", "-", "-"}) {
		t.Fatalf("list: exit %d\n%s", code, stdout)
	}
	if q := lastQuery(); q.Encode() != "limit=1000&namespace=default" {
		t.Fatalf("list asked %q, want a page of 1000 of the default namespace and no other filter", q.Encode())
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--state", "running"}, "limit=1000&namespace=default&state=RUNNING"},
		{[]string{"--state", "RUNNING,submitted"}, "limit=1000&namespace=default&state=RUNNING%2CSUBMITTED"},
		{[]string{"--state", "running", "--state", "Finished", "--state", "RUNNING"}, "limit=1000&namespace=default&state=RUNNING%2CFINISHED"},
		{[]string{"--name", "etl-*"}, "limit=1000&name=etl-%2A&namespace=default"},
		{[]string{"--name", "etl-*", "--state", "SUBMITTED", "--page-size", "7"}, "limit=7&name=etl-%2A&namespace=default&state=SUBMITTED"},
		{[]string{"--worker", "w2"}, "limit=1000&namespace=default&worker=w2"},
		{[]string{"--name", strings.Repeat("a", api.MaxNameFilter)}, "limit=1000&name=" + strings.Repeat("a", api.MaxNameFilter) + "&namespace=default"},
		{[]string{"--all-namespaces"}, "limit=1000"},
		{[]string{"--namespace", "etl"}, "limit=1000&namespace=etl"},
		{[]string{"--namespace", strings.Repeat("a", model.MaxNamespaceLen)}, "limit=1000&namespace=" + strings.Repeat("a", model.MaxNamespaceLen)},
	} {
		if _, stderr, code := list(c.args...); code != 0 || lastQuery().Encode() != c.want {
			t.Errorf("list %v: exit %d (%s), asked %q; want %q", c.args, code, stderr, lastQuery().Encode(), c.want)
		}
	}
	t.Setenv("DROVER_NAMESPACE", "ml")
	if _, stderr, code := list(); code != 0 || lastQuery().Encode() != "limit=1000&namespace=ml" {
		t.Errorf("list with $DROVER_NAMESPACE ml: exit %d (%s), asked %q; want namespace=ml", code, stderr, lastQuery().Encode())
	}
	if _, stderr, code := list("--namespace", "etl"); code != 0 || lastQuery().Encode() != "limit=1000&namespace=etl" {
		t.Errorf("list --namespace etl with $DROVER_NAMESPACE ml: exit %d (%s), asked %q; want the flag to win", code, stderr, lastQuery().Encode())
	}
	t.Setenv("DROVER_NAMESPACE", "")
	stdout, _, code = list("--json", "--state", "finished", "--name", "rep*")
	var ds []model.Driver
	if err := json.Unmarshal([]byte(stdout), &ds); code != 0 || err != nil || len(ds) != 4 || ds[2].ID != "driver-20260101000000-0003" {
		t.Fatalf("list --json: exit %d, %v: %s", code, err, stdout)
	}
	asked := len(f.lists)
	for _, c := range []struct {
		args []string
		err  string
	}{
		{[]string{"--state", "DONE"}, `--state "DONE" is not a driver state`},
		{[]string{"--state", ""}, "is not a driver state"},
		{[]string{"--name", "etl-["}, "is not a glob"},
		{[]string{"--worker", "../w1"}, "--worker"},
		{[]string{"--page-size", "0"}, "--page-size 0 must be at least 1"},
		{[]string{"--name", strings.Repeat("a", api.MaxNameFilter+1)}, "--name of 257 bytes exceeds 256 bytes"},
		{[]string{"--namespace", "Etl"}, `--namespace (or $DROVER_NAMESPACE): namespace name "Etl" is not a DNS label`},
		{[]string{"--namespace", strings.Repeat("a", model.MaxNamespaceLen+1)}, "namespace name exceeds 63 bytes (it has 64)"},
	} {
		if stdout, stderr, code := list(c.args...); code != 1 || stdout != "" || !strings.Contains(stderr, c.err) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("list %v: exit %d, stdout %q, stderr %q; want exit 1 and one line with %q", c.args, code, stdout, stderr, c.err)
		}
	}
	if len(f.lists) != asked {
		t.Fatal("a refused filter reached the masters")
	}
}

// submit returns once the driver runs, and otherwise never hangs: a
// driver no worker can hold exits 3 at once, one still queued when
// --timeout is up exits 4, and one its namespace holds back (quota,
// driver share) exits 4 at once; either way the ID is the last line of
// stdout and the reason is on stderr.
func TestSubmitExitCodes(t *testing.T) {
	for _, c := range []struct {
		name   string
		driver *model.Driver
		args   []string
		code   int
		stderr string
	}{
		{"running", nil, nil, 0, "RUNNING attempt 1 on w1"},
		{"unplaceable", &model.Driver{State: model.DriverSubmitted, Attempt: 1,
			Message: "waiting: " + api.ReasonUnplaceable + " (asks 100 cores, 1024 MiB; the largest worker offers 2 cores, 4096 MiB)"},
			[]string{"--wait"}, 3, "cannot be placed (waiting: " + api.ReasonUnplaceable},
		{"queued at the timeout", &model.Driver{State: model.DriverSubmitted, Attempt: 1, Message: "waiting: no ALIVE worker"},
			[]string{"--timeout", "1s"}, 4, "was accepted but is not RUNNING after --timeout 1s (it is driver-20260101000000-0100 SUBMITTED: waiting: no ALIVE worker)"},
		// Its namespace holds it back: said at the first read, long
		// before --timeout.
		{"at its namespace's quota", &model.Driver{State: model.DriverSubmitted, Attempt: 1, Message: "namespace etl is at its cores quota (4 of 4)"},
			[]string{"--timeout", "20s"}, 4, "drover: driver-20260101000000-0100 was accepted and waits: namespace etl is at its cores quota (4 of 4); it stays queued until its namespace has room"},
		{"at its namespace's driver share", &model.Driver{State: model.DriverSubmitted, Attempt: 1, Message: "driver share of etl reached (2 of 2 cores)"},
			[]string{"--timeout", "20s"}, 4, "was accepted and waits: driver share of etl reached (2 of 2 cores);"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeMaster(t)
			if c.driver != nil {
				f.placed = func(id string) *model.Driver { d := *c.driver; d.ID = id; return &d }
			}
			start := time.Now()
			args := append(append([]string{"client", "submit", "--masters", f.addr()}, c.args...), "--", "/bin/true")
			stdout, stderr, code := drover(args...)
			lines := strings.Split(strings.TrimSpace(stdout), "\n")
			if code != c.code || lines[len(lines)-1] != "driver-20260101000000-0100" || !strings.Contains(stderr, c.stderr) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want %d, the ID and %q", code, stdout, stderr, c.code, c.stderr)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Fatalf("took %s", took)
			}
		})
	}
}

// list-peers says of each voter whether it answers its health check, not
// only whether it leads.
func TestListPeersReachability(t *testing.T) {
	f := newFakeMaster(t)
	stdout, stderr, code := drover("operator", "raft", "list-peers", "--masters", f.addr())
	var rows []string
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		rows = append(rows, strings.Join(strings.Fields(l), " "))
	}
	want := []string{
		"ID ADDRESS HTTP SUFFRAGE STATE REACHABLE",
		"m1 127.0.0.1:7101 " + f.addr() + " Voter leader yes, degraded",
		"m2 127.0.0.1:7201 127.0.0.1:1 Voter follower no",
		"m3 127.0.0.1:7301 Voter follower unknown",
	}
	if code != 0 || !slices.Equal(rows, want) {
		t.Fatalf("exit %d:\n%s", code, stdout)
	}
	if !strings.Contains(stderr, "m2 does not answer: 127.0.0.1:1: connection refused") || strings.Contains(stderr, "m3") {
		t.Fatalf("stderr %q, want why m2 does not answer", stderr)
	}
}

// status --json and list --json name the submission token for what it is,
// and keep the fields scripts read.
func TestJSONNamesTheSubmissionToken(t *testing.T) {
	f := newFakeMaster(t, &model.Driver{ID: "driver-20260101000000-0001", Token: "spark-rest-0123abcd", State: model.DriverRunning,
		WorkerID: "w1", Attempt: 1, Attempts: []model.Attempt{{Attempt: 1, WorkerID: "w1", State: model.DriverRunning}}})
	status, _, code := drover("client", "status", "driver-20260101000000-0001", "--json", "--masters", f.addr())
	list, _, code2 := drover("client", "list", "--json", "--masters", f.addr())
	var one map[string]any
	var all []map[string]any
	if code != 0 || code2 != 0 || json.Unmarshal([]byte(status), &one) != nil || json.Unmarshal([]byte(list), &all) != nil || len(all) != 1 {
		t.Fatalf("status: exit %d %s; list: exit %d %s", code, status, code2, list)
	}
	for _, obj := range []map[string]any{one, all[0]} {
		if _, ok := obj["token"]; ok || obj["submission_token"] != "spark-rest-0123abcd" {
			t.Fatalf("token fields of %v", obj)
		}
		for _, k := range []string{"id", "state", "worker_id", "attempt", "supervise", "exit_code"} {
			if _, ok := obj[k]; !ok {
				t.Fatalf("%s missing from %v", k, obj)
			}
		}
	}
}

// shellArgv is a program whose arguments hold the characters
// encoding/json escapes for HTML by default.
var shellArgv = []string{"/bin/sh", "-c", "run <in >out 2>&1"}

// The client's JSON (status, list, watch) is for terminals and scripts,
// not HTML: an argv's <, > and & print as themselves, not as \u003c,
// \u003e and \u0026.
func TestJSONOutputIsNotHTMLEscaped(t *testing.T) {
	const id = "driver-20260101000000-0001"
	f := newFakeMaster(t, &model.Driver{ID: id, State: model.DriverRunning, WorkerID: "w1", Attempt: 1, DriverSpec: model.DriverSpec{Argv: shellArgv}})
	for _, args := range [][]string{
		{"client", "status", id, "--json"}, {"client", "list", "--json"}, {"client", "watch", "--json", "--index", "1"},
	} {
		stdout, stderr, _ := drover(append(args, "--masters", f.addr())...)
		if !strings.Contains(stdout, `"run <in >out 2>&1"`) || strings.Contains(stdout, `\u00`) {
			t.Errorf("drover %s printed %q (stderr %q); want the argv as it is", strings.Join(args, " "), stdout, stderr)
		}
	}
}

// --artifact URLs go with the submission as the user wrote them; one the
// master would refuse is refused before anything is sent.
func TestSubmitArtifacts(t *testing.T) {
	f := newFakeMaster(t)
	sum := strings.Repeat("0", 64)
	_, stderr, code := drover("client", "submit", "--masters", f.addr(), "--artifact", "https://h/app.sh?checksum=sha256:"+sum,
		"--artifact", "file:///opt/lib.tgz", "--", "./app.sh")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := []model.Artifact{{Source: "https://h/app.sh?checksum=sha256:" + sum}, {Source: "file:///opt/lib.tgz"}}
	if got := f.submitted[0].Artifacts; !slices.Equal(got, want) {
		t.Fatalf("artifacts %+v, want %+v", got, want)
	}
	for _, bad := range []string{"ftp://h/a", "https://h/a?checksum=md5:00", "https://h/"} {
		_, stderr, code := drover("client", "submit", "--masters", f.addr(), "--artifact", bad, "--", "./a")
		if code != 1 || !strings.HasPrefix(stderr, "drover: --artifact: invalid artifact: ") || strings.Count(stderr, "\n") != 1 {
			t.Errorf("--artifact %s: exit %d, stderr %q; want 1 and one line", bad, code, stderr)
		}
	}
	if len(f.submitted) != 1 {
		t.Fatalf("refused artifacts reached the master: %d submissions", len(f.submitted))
	}
}

// watch refuses at once, in one line, an ID that looks like a driver's,
// an app's or an executor's but is not one, instead of waiting for ever
// for an event that cannot come.
func TestWatchRefusesMalformedIDs(t *testing.T) {
	f := newFakeMaster(t)
	for _, id := range []string{"driver-nope", "app-20261202015633-x", "app-20261202015633-0001/x", "bad/worker/name", "-w"} {
		_, stderr, code := drover("client", "watch", "--masters", f.addr(), "--", id)
		if code != 1 || !strings.HasPrefix(stderr, "drover: watch: invalid ID") || strings.Count(stderr, "\n") != 1 {
			t.Errorf("watch %s: exit %d, stderr %q; want 1 and one line", id, code, stderr)
		}
	}
}

// status, kill, logs, app and kill-app refuse an ID of the wrong form or
// length at once, in one line naming the form, before any request.
func TestCommandsRefuseMalformedIDs(t *testing.T) {
	f := newFakeMaster(t)
	long := "driver-" + strings.Repeat("a", 100_000)
	for _, args := range [][]string{
		{"status", long}, {"kill", long}, {"logs", "driver-1"}, {"app", "driver-20260101000000-0001"}, {"kill-app", "app-x"},
	} {
		_, stderr, code := drover(append([]string{"client", "--masters", f.addr()}, args...)...)
		if code != 1 || !strings.HasPrefix(stderr, "drover: invalid ID: ") || !strings.Contains(stderr, "<yyyyMMddHHmmss>-<seq>") ||
			strings.Count(stderr, "\n") != 1 || len(stderr) > 200 {
			t.Errorf("%s: exit %d, stderr %.300q; want 1 and one short line naming the form", args[0], code, stderr)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.drivers)+len(f.lists) != 0 {
		t.Fatal("a malformed ID reached the master")
	}
}

// watch without an ID passes --index and --kind on to the masters, or
// starts from the applied index when no --index is given; prints each
// event (--json: the event as JSON, one a line); and resumes after the
// last entry it printed.
func TestWatchPassesItsQueryOn(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		index string
	}{
		{[]string{"--index", "41", "--kind", "driver", "--json"}, "41"},
		{[]string{"--kind", "driver", "--json"}, "7"},
	} {
		f := newFakeMaster(t)
		args := append([]string{"client", "watch", "--masters", f.addr()}, tc.args...)
		stdout, stderr, code := drover(args...)
		after, _ := strconv.ParseUint(tc.index, 10, 64)
		var e api.Event
		if code != 1 || !strings.Contains(stderr, "no more events here") || strings.Count(stdout, "\n") != 1 ||
			json.Unmarshal([]byte(stdout), &e) != nil || e.Index != after+1 || e.Driver == nil {
			t.Fatalf("%v: exit %d, stdout %q, stderr %q; want one JSON event at %d, then the refusal", args, code, stdout, stderr, after+1)
		}
		f.mu.Lock()
		qs := f.events
		f.mu.Unlock()
		if len(qs) != 2 || qs[0].Get("index") != tc.index || qs[0].Get("kind") != "driver" ||
			qs[1].Get("index") != strconv.FormatUint(after+1, 10) || qs[1].Get("kind") != "driver" {
			t.Fatalf("%v: the masters were asked %v, want index %s then %d, kind driver", args, qs, tc.index, after+1)
		}
	}
}

// logs --attempt N reads that attempt, never another; bytes rotated away
// are said on stderr and the stream goes on where it now starts; a log
// the cluster no longer holds is one line and exit 1; --attempt is for
// drivers only.
func TestLogsOfAnAttemptAcrossRotation(t *testing.T) {
	const id = "driver-20260101000000-0001"
	d := &model.Driver{ID: id, State: model.DriverFinished, Attempt: 2, WorkerID: "w2", Attempts: []model.Attempt{
		{Attempt: 1, WorkerID: "w1", State: model.DriverKilled}, {Attempt: 2, WorkerID: "w2", State: model.DriverFinished}}}
	f := newFakeMaster(t, d)
	// Attempt 1's stream is 300 bytes, of which the first 200 were
	// rotated away; attempt 2's says so.
	kept := strings.Repeat("x", 99) + "\n"
	var mu sync.Mutex
	var asked []string
	f.logs = func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		mu.Lock()
		asked = append(asked, q.Get("attempt")+"@"+q.Get("offset"))
		mu.Unlock()
		if q.Get("attempt") != "1" {
			w.Header().Set(api.HeaderLogSize, "16")
			_, _ = w.Write([]byte("attempt 2 output"))
			return
		}
		w.Header().Set(api.HeaderLogSize, "300")
		offset := q.Get("offset")
		if offset == "300" {
			w.Header().Set(api.HeaderLogStart, "300")
			return
		}
		w.Header().Set(api.HeaderLogStart, "200")
		_, _ = w.Write([]byte(kept))
	}
	out, errOut, code := drover("client", "--masters", f.addr(), "logs", id, "--attempt", "1", "--follow")
	if code != 0 || out != kept || errOut != "--- bytes 0 to 200 were rotated away ---\n" {
		t.Fatalf("logs --attempt 1 --follow: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	mu.Lock()
	got := slices.Clone(asked)
	mu.Unlock()
	if !slices.Equal(got, []string{"1@0", "1@300"}) {
		t.Fatalf("asked for attempt@offset %v, want the rotated-away offset once, then past the kept bytes", got)
	}
	if out, _, code := drover("client", "--masters", f.addr(), "logs", id); code != 0 || out != "attempt 2 output" {
		t.Fatalf("logs of the latest attempt: exit %d, %q", code, out)
	}

	f.logs = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusGone)
		_ = json.NewEncoder(w).Encode(api.Error{Code: api.CodeGone, Error: "attempt 1 of " + id + " ran on worker w1, which the masters no longer know: its logs went with it"})
	}
	out, errOut, code = drover("client", "--masters", f.addr(), "logs", id, "--attempt", "1", "--follow")
	if code != 1 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "no longer know") {
		t.Fatalf("logs of a gone attempt: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	for _, args := range [][]string{{"--attempt", "-1"}, {"--attempt", "0"}, {"--attempt", "1", "--executor", "0"}} {
		if _, errOut, code := drover(append([]string{"client", "--masters", f.addr(), "logs", id}, args...)...); code != 1 || !strings.Contains(errOut, "--attempt") {
			t.Fatalf("logs %v: exit %d, stderr %q", args, code, errOut)
		}
	}
}
