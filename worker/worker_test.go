package worker_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/worker"
	"github.com/drover-project/drover/worker/host"
	"github.com/drover-project/drover/worker/runner"
	"github.com/drover-project/drover/worker/unitdir"
)

// TestMain lets the test binary stand in for "drover runner", which the
// workers under test start as RunnerCommand, and checks that no goroutine
// outlives the tests.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "runner" {
		os.Exit(runner.Main(os.Args[2:]))
	}
	// A race-enabled binary otherwise sleeps a second before it exits,
	// which every runner would add to every test.
	os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	goleak.VerifyTestMain(m)
}

// failSafe bounds every wait, so that a broken worker fails a test instead
// of hanging it; no test relies on it for ordering.
const failSafe = 30 * time.Second

// fakeMaster answers register and heartbeat like a leader would, from a
// desired set the test sets, and records every request.
type fakeMaster struct {
	srv *httptest.Server

	mu          sync.Mutex
	assignments []api.Assignment
	executors   []api.ExecutorAssignment
	// notices are the preemption notices every answer carries; polls
	// is every heartbeat as it arrived, held or not.
	notices []api.PreemptNotice
	polls   []api.HeartbeatRequest
	ack     bool
	// hold makes long polls wait while the assignments match what the
	// worker runs, as the leader does.
	hold bool
	// brief answers a Brief heartbeat as the leader does: the attempts
	// the worker says it runs come back named only, in Kept; briefs
	// counts those answers.
	brief         bool
	briefs        int
	assigned      chan struct{} // closed, and replaced, by assign
	failRegisters int
	unregistered  bool
	registrations []api.RegisterWorkerRequest
	heartbeats    []api.HeartbeatRequest
	received      []time.Time // when each heartbeat arrived
	// down makes register and heartbeat answer 503, as masters without a
	// leader do; refused counts the heartbeats so answered.
	down    bool
	refused int
	// noDecommission answers decommissions 404, as an older master does.
	noDecommission bool
	decommissions  []api.DecommissionWorkerRequest
	// decommissionedAfter is len(heartbeats) at each decommission.
	decommissionedAfter []int
	// changed is closed, and replaced, on every request.
	changed chan struct{}
	// blobs are the uploads it serves (GET api.BlobPath), by SHA-256;
	// blobAuth is the Authorization header of each request for one.
	blobs    map[string][]byte
	blobAuth []string
}

func newFakeMaster(t *testing.T) *fakeMaster {
	fm := &fakeMaster{ack: true, changed: make(chan struct{}), assigned: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/workers/register", func(w http.ResponseWriter, r *http.Request) {
		var req api.RegisterWorkerRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("register body: %v", err)
		}
		fm.mu.Lock()
		defer fm.mu.Unlock()
		defer fm.notify()
		fm.registrations = append(fm.registrations, req)
		if fm.down {
			reply(w, http.StatusServiceUnavailable, api.Error{Error: "no leader"})
			return
		}
		if fm.failRegisters > 0 {
			fm.failRegisters--
			reply(w, http.StatusInternalServerError, api.Error{Error: "not now"})
			return
		}
		fm.unregistered = false
		reply(w, http.StatusOK, api.RegisterWorkerResponse{WorkerID: req.ID})
	})
	mux.HandleFunc("POST /v1/workers/{id}/heartbeat", func(w http.ResponseWriter, r *http.Request) {
		var req api.HeartbeatRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("heartbeat body: %v", err)
		}
		if id := r.PathValue("id"); id != "w1" {
			t.Errorf("heartbeat for worker %q", id)
		}
		fm.mu.Lock()
		fm.polls = append(fm.polls, req)
		fm.notify()
		for fm.hold && !fm.down && req.WaitIndex > 0 && len(req.Reports)+len(req.ExecutorReports) == 0 &&
			sameAttempts(fm.assignments, req.Running) && sameExecutors(fm.executors, req.RunningExecutors) && sameNotices(fm.notices, req.Preempting) {
			assigned := fm.assigned
			fm.mu.Unlock()
			select {
			case <-assigned:
			case <-r.Context().Done():
				return
			}
			fm.mu.Lock()
		}
		defer fm.mu.Unlock()
		if r.Context().Err() != nil {
			// The worker cut this long poll short and has moved on; a
			// request it will never see answered is no heartbeat.
			return
		}
		defer fm.notify()
		if fm.down {
			fm.refused++
			reply(w, http.StatusServiceUnavailable, api.Error{Error: "no leader"})
			return
		}
		fm.heartbeats = append(fm.heartbeats, req)
		fm.received = append(fm.received, time.Now())
		resp := api.HeartbeatResponse{Registered: !fm.unregistered, Index: uint64(len(fm.heartbeats))}
		if resp.Registered {
			resp.Assignments = slices.Clone(fm.assignments)
			resp.Executors = slices.Clone(fm.executors)
			resp.Preempt = slices.Clone(fm.notices)
		}
		if resp.Registered && fm.brief && req.Brief {
			fm.briefs++
			resp.Assignments = slices.DeleteFunc(resp.Assignments, func(a api.Assignment) bool {
				ref := api.AttemptRef{DriverID: a.DriverID, Attempt: a.Attempt}
				if slices.Contains(req.Running, ref) {
					resp.Kept = append(resp.Kept, ref)
					return true
				}
				return false
			})
		}
		if fm.ack {
			resp.Acked = req.Reports
			resp.AckedExecutors = req.ExecutorReports
		}
		reply(w, http.StatusOK, resp)
	})
	mux.HandleFunc("POST /v1/workers/{id}/decommission", func(w http.ResponseWriter, r *http.Request) {
		var req api.DecommissionWorkerRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("decommission body: %v", err)
		}
		if id := r.PathValue("id"); id != "w1" {
			t.Errorf("decommission of worker %q", id)
		}
		fm.mu.Lock()
		defer fm.mu.Unlock()
		defer fm.notify()
		fm.decommissions = append(fm.decommissions, req)
		fm.decommissionedAfter = append(fm.decommissionedAfter, len(fm.heartbeats))
		if fm.noDecommission {
			http.NotFound(w, r)
			return
		}
		reply(w, http.StatusOK, api.RegisterWorkerResponse{WorkerID: r.PathValue("id")})
	})
	mux.HandleFunc("GET "+api.PathBlobs+"/{sum}", func(w http.ResponseWriter, r *http.Request) {
		fm.mu.Lock()
		defer fm.mu.Unlock()
		defer fm.notify()
		fm.blobAuth = append(fm.blobAuth, r.Header.Get("Authorization"))
		body, ok := fm.blobs[r.PathValue("sum")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(body)
	})
	fm.srv = httptest.NewServer(mux)
	t.Cleanup(fm.srv.Close)
	return fm
}

func sameAttempts(as []api.Assignment, running []api.AttemptRef) bool {
	return slices.EqualFunc(as, running, func(a api.Assignment, r api.AttemptRef) bool {
		return a.DriverID == r.DriverID && a.Attempt == r.Attempt
	})
}

func sameExecutors(es []api.ExecutorAssignment, running []api.ExecutorRef) bool {
	return slices.EqualFunc(es, running, func(e api.ExecutorAssignment, r api.ExecutorRef) bool {
		return e.AppID == r.AppID && e.ExecutorID == r.ExecutorID
	})
}

// sameNotices says whether the worker names as noticed (req.Preempting)
// exactly the units of ns.
func sameNotices(ns []api.PreemptNotice, noticed []model.Preemption) bool {
	if len(ns) != len(noticed) {
		return false
	}
	for _, n := range ns {
		if !slices.Contains(noticed, n.Preemption) {
			return false
		}
	}
	return true
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (fm *fakeMaster) addr() string { return strings.TrimPrefix(fm.srv.URL, "http://") }

func (fm *fakeMaster) notify() {
	close(fm.changed)
	fm.changed = make(chan struct{})
}

// assign sets the desired set every heartbeat answer carries.
func (fm *fakeMaster) assign(as ...api.Assignment) {
	fm.mu.Lock()
	defer fm.mu.Unlock()
	fm.assignments = as
	close(fm.assigned)
	fm.assigned = make(chan struct{})
}

// preempt sets the preemption notices every heartbeat answer carries.
func (fm *fakeMaster) preempt(ns ...api.PreemptNotice) {
	fm.mu.Lock()
	defer fm.mu.Unlock()
	fm.notices = ns
	close(fm.assigned)
	fm.assigned = make(chan struct{})
}

// assignExecutors sets the desired executors every heartbeat answer
// carries.
func (fm *fakeMaster) assignExecutors(es ...api.ExecutorAssignment) {
	fm.mu.Lock()
	defer fm.mu.Unlock()
	fm.executors = es
	close(fm.assigned)
	fm.assigned = make(chan struct{})
}

func (fm *fakeMaster) set(f func()) {
	fm.mu.Lock()
	defer fm.mu.Unlock()
	f()
}

// waitFor blocks until cond, evaluated with fm.mu held, is true.
func (fm *fakeMaster) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(failSafe)
	for {
		fm.mu.Lock()
		ok := cond()
		ch := fm.changed
		fm.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// reports lists every report received, in order, with fm.mu held.
func (fm *fakeMaster) reports() []model.AttemptReport {
	var out []model.AttemptReport
	for _, hb := range fm.heartbeats {
		out = append(out, hb.Reports...)
	}
	return out
}

// executorReports lists every executor report received, in order, with
// fm.mu held.
func (fm *fakeMaster) executorReports() []model.ExecutorReport {
	var out []model.ExecutorReport
	for _, hb := range fm.heartbeats {
		out = append(out, hb.ExecutorReports...)
	}
	return out
}

// waitReport waits for a report of the attempt in state and returns it with
// its position among all reports received.
func (fm *fakeMaster) waitReport(t *testing.T, driver string, attempt int, state model.DriverState) (model.AttemptReport, int) {
	t.Helper()
	return waitFirst(t, fm, fmt.Sprintf("%s report of %s attempt %d", state, driver, attempt), fm.reports,
		func(r model.AttemptReport) bool {
			return r.DriverID == driver && r.Attempt == attempt && r.State == state
		})
}

// waitExecReport waits for a report of the executor in state and returns it
// with its position among all executor reports received.
func (fm *fakeMaster) waitExecReport(t *testing.T, app string, id int, state model.ExecutorState) (model.ExecutorReport, int) {
	t.Helper()
	return waitFirst(t, fm, fmt.Sprintf("%s report of %s executor %d", state, app, id), fm.executorReports,
		func(r model.ExecutorReport) bool { return r.AppID == app && r.ExecutorID == id && r.State == state })
}

// waitFirst waits until list (called with fm.mu held) has an element that
// match accepts, and returns the first with its position.
func waitFirst[R any](t *testing.T, fm *fakeMaster, what string, list func() []R, match func(R) bool) (R, int) {
	t.Helper()
	var found R
	at := -1
	fm.waitFor(t, what, func() bool {
		all := list()
		if at = slices.IndexFunc(all, match); at >= 0 {
			found = all[at]
		}
		return at >= 0
	})
	return found, at
}

// assertPaced fails unless heartbeats from..to-1 came, together, at
// least half the interval apart on average: the worker must not spin. It
// judges their span rather than each gap, since a heartbeat held up in
// transit on a loaded machine arrives just before the next one.
func (fm *fakeMaster) assertPaced(t *testing.T, from, to int, interval time.Duration) {
	t.Helper()
	from = max(from, 1)
	if to <= from {
		return
	}
	if span, n := fm.received[to-1].Sub(fm.received[from-1]), to-from; span < time.Duration(n)*interval/2 {
		t.Fatalf("heartbeats %d to %d came within %v; want at least %v (half the interval each)", from, to-1, span, time.Duration(n)*interval/2)
	}
}

// newWorker starts a worker of fm with test timings; tune, when not nil,
// adjusts its config.
func newWorker(t *testing.T, fm *fakeMaster, tune func(*worker.Config)) (*worker.Worker, worker.Config) {
	t.Helper()
	return newWorkerAt(t, fm.addr(), tune)
}

// newWorkerAt is newWorker for a master at addr (host:port).
func newWorkerAt(t *testing.T, addr string, tune func(*worker.Config)) (*worker.Worker, worker.Config) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := worker.DefaultConfig()
	cfg.ID = "w1"
	cfg.Masters = []string{addr}
	cfg.WorkDir = newWorkDir(t)
	cfg.Cores = 4
	cfg.MemoryMB = 1024
	cfg.RunnerCommand = self
	cfg.HeartbeatInterval = 20 * time.Millisecond
	cfg.RequestTimeout = 3 * time.Second
	cfg.KillTimeout = 2 * time.Second
	cfg.RestartBackoff = 20 * time.Millisecond
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// As drover worker's defaults: cgroups where the machine allows.
	cfg.Isolation, cfg.Artifacts = host.Isolation{}, host.Artifacts{}
	if tune != nil {
		tune(&cfg)
	}
	w, err := worker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w, cfg
}

// newWorkDir is a work dir to be made in a new temporary directory, which
// like every directory above it lets every user through (0711): a worker
// run as root (as in CI) runs programs as nobody, who must reach their
// working directories below it.
func newWorkDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for d := dir; strings.HasPrefix(d, os.TempDir()+"/"); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "work")
}

// unitDirMode is the mode of the directories a worker makes for units:
// 0711 where it runs as root, and so runs programs as another user who
// must pass through them, 0700 otherwise.
func unitDirMode() os.FileMode {
	if os.Geteuid() == 0 {
		return 0o711
	}
	return 0o700
}

const (
	driverA = "driver-20260101000000-1"
	driverB = "driver-20260101000000-2"
)

func sleeper(driver string, attempt int) api.Assignment {
	// Prints its PID (also its process group) so the test can check it is
	// gone afterwards.
	return api.Assignment{DriverID: driver, Attempt: attempt, Argv: []string{"/bin/sh", "-c", "echo $$; exec sleep 1000"}, Cores: 1, MemoryMB: 64}
}

// programPID waits until the program of the attempt has printed its PID.
func programPID(t *testing.T, cfg worker.Config, driver string, attempt int) int {
	t.Helper()
	return printedPID(t, filepath.Join(cfg.WorkDir, driver, "attempt-"+strconv.Itoa(attempt)))
}

// readStream returns what the program of the unit directory dir wrote to
// stream (unitdir.StdoutFile or unitdir.StderrFile), "" before it starts.
func readStream(t *testing.T, dir, stream string) string {
	t.Helper()
	root, err := os.OpenRoot(dir)
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	l, err := unitdir.OpenLog(root, stream, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	b, err := io.ReadAll(l)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// printedPID waits until the program of the unit directory dir has
// printed its PID to its stdout.
func printedPID(t *testing.T, dir string) int {
	t.Helper()
	deadline := time.Now().Add(failSafe)
	for time.Now().Before(deadline) {
		if b := readStream(t, dir, unitdir.StdoutFile); strings.HasSuffix(b, "\n") {
			pid, err := strconv.Atoi(strings.TrimSpace(b))
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("program never printed its PID to the stdout of %s", dir)
	return 0
}

func assertGone(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("process group %d still exists: kill 0 = %v", pid, err)
	}
}

func TestRegistersRetriesAndRegistersAgain(t *testing.T) {
	fm := newFakeMaster(t)
	fm.set(func() { fm.failRegisters = 2 })
	w, _ := newWorker(t, fm, nil)
	fm.waitFor(t, "a heartbeat", func() bool { return len(fm.heartbeats) > 0 })
	fm.set(func() {
		if len(fm.registrations) != 3 {
			t.Fatalf("registrations = %d, want 3 (two refused)", len(fm.registrations))
		}
		r := fm.registrations[2]
		if r.ID != "w1" || r.HTTPAddr != w.HTTPAddr() || r.Cores != 4 || r.MemoryMB != 1024 {
			t.Fatalf("registration = %+v", r)
		}
		fm.unregistered = true
	})
	fm.waitFor(t, "a fourth registration", func() bool { return len(fm.registrations) == 4 })
}

func TestRunsAssignmentWithEnvAndServesLogs(t *testing.T) {
	fm := newFakeMaster(t)
	w, cfg := newWorker(t, fm, nil)
	fm.assign(api.Assignment{
		DriverID: driverA, Attempt: 1, Cores: 3, MemoryMB: 768,
		Argv: []string{"/bin/sh", "-c", `echo "$DROVER_DRIVER_ID $DROVER_ATTEMPT $DROVER_WORKER_ID $DROVER_MASTERS $EXTRA ` +
			`$DROVER_DRIVER_CORES $DROVER_DRIVER_MEMORY_MB"; echo problem >&2`},
		// An old submission may name the variables the worker sets now:
		// the worker's win.
		Env: map[string]string{"EXTRA": "x", "DROVER_WORKER_ID": "spoofed", "DROVER_DRIVER_CORES": "64"},
	})
	running, ri := fm.waitReport(t, driverA, 1, model.DriverRunning)
	finished, fi := fm.waitReport(t, driverA, 1, model.DriverFinished)
	if running.Runs != 1 || ri > fi || finished.ExitCode == nil || *finished.ExitCode != 0 || finished.Runs != 1 {
		t.Fatalf("reports: running %+v (#%d), finished %+v (#%d)", running, ri, finished, fi)
	}
	dir := filepath.Join(cfg.WorkDir, driverA, "attempt-1")
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if st, err := os.Stat(d); err != nil || st.Mode().Perm() != unitDirMode() {
			t.Fatalf("%s: %v %v, want a %04o directory", d, st.Mode(), err, unitDirMode())
		}
	}
	stdout := driverA + " 1 w1 " + fm.addr() + " x 3 768\n"
	if b := readStream(t, dir, unitdir.StdoutFile); b != stdout {
		t.Fatalf("stdout = %q, want %q", b, stdout)
	}

	// Still assigned (the leader has not caught up): never run again.
	fm.set(func() { fi = len(fm.heartbeats) })
	fm.waitFor(t, "three more heartbeats", func() bool { return len(fm.heartbeats) >= fi+3 })
	fm.set(func() {
		// Nothing to report: long polls (which fm answers at once) at the
		// interval.
		fm.assertPaced(t, fi+1, len(fm.heartbeats), cfg.HeartbeatInterval)
		last := fm.heartbeats[len(fm.heartbeats)-1]
		if len(last.Running) != 0 {
			t.Fatalf("running after the end: %+v", last.Running)
		}
		count := map[model.DriverState]int{}
		for _, r := range fm.reports() {
			count[r.State]++
		}
		if count[model.DriverRunning] != 1 || count[model.DriverFinished] != 1 {
			t.Fatalf("reports by state %v: the ended attempt was started or reported again", count)
		}
	})

	base := "http://" + w.HTTPAddr() + "/v1/drivers/" + driverA + "/logs"
	for _, c := range []struct {
		query, body string
		size        int
	}{
		{"", stdout, len(stdout)},
		{"?stream=stdout&attempt=1&offset=5", stdout[5:], len(stdout)},
		{"?stream=stderr", "problem\n", 8},
		{"?offset=1000", "", len(stdout)},
	} {
		resp, body := get(t, base+c.query)
		if resp.StatusCode != http.StatusOK || body != c.body || resp.Header.Get(api.HeaderLogSize) != strconv.Itoa(c.size) {
			t.Fatalf("GET %s: %d %q size %s; want %q size %d", c.query, resp.StatusCode, body, resp.Header.Get(api.HeaderLogSize), c.body, c.size)
		}
	}
	if resp, body := get(t, "http://"+w.HTTPAddr()+"/v1/health"); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"ok"`) {
		t.Fatalf("health: %d %s", resp.StatusCode, body)
	}
}

// The log endpoint serves a logical offset range across the rotated
// files, and says where the stream now starts when the offset asked for
// was rotated away.
func TestServesLogsAcrossRotation(t *testing.T) {
	fm := newFakeMaster(t)
	w, _ := newWorker(t, fm, func(c *worker.Config) { c.LogMaxFileSize, c.LogMaxFiles = 64, 2 })
	// 26 lines of 10 bytes; files of 64 keep bytes 192 to 260.
	lines := `for c in a b c d e f g h i j k l m n o p q r s t u v w x y z; do echo "$c........"; done`
	fm.assign(api.Assignment{DriverID: driverA, Attempt: 1, Argv: []string{"/bin/sh", "-c", lines}})
	fm.assignExecutors(api.ExecutorAssignment{AppID: appA, ExecutorID: 0, Argv: []string{"/bin/sh", "-c", lines + " >&2"}})
	fm.waitReport(t, driverA, 1, model.DriverFinished)
	fm.waitExecReport(t, appA, 0, model.ExecExited)
	var all strings.Builder
	for c := 'a'; c <= 'z'; c++ {
		fmt.Fprintf(&all, "%c........\n", c)
	}
	full := all.String()
	for _, c := range []struct {
		path          string
		offset, start int
	}{
		{"/v1/drivers/" + driverA + "/logs?offset=0", 0, 192},
		{"/v1/drivers/" + driverA + "/logs?offset=191&attempt=1", 191, 192},
		{"/v1/drivers/" + driverA + "/logs?offset=250", 250, 250},
		{"/v1/drivers/" + driverA + "/logs?offset=260", 260, 260},
		{"/v1/apps/" + appA + "/executors/0/logs?stream=stderr&offset=100", 100, 192},
	} {
		resp, body := get(t, "http://"+w.HTTPAddr()+c.path)
		if resp.StatusCode != http.StatusOK || body != full[c.start:] ||
			resp.Header.Get(api.HeaderLogSize) != "260" || resp.Header.Get(api.HeaderLogStart) != strconv.Itoa(c.start) {
			t.Fatalf("GET %s: %d %q size %s start %s; want %q size 260 start %d", c.path, resp.StatusCode, body,
				resp.Header.Get(api.HeaderLogSize), resp.Header.Get(api.HeaderLogStart), full[c.start:], c.start)
		}
	}
}

func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func TestUnassignedAttemptIsKilled(t *testing.T) {
	fm := newFakeMaster(t)
	_, cfg := newWorker(t, fm, nil)
	fm.assign(sleeper(driverA, 1))
	fm.waitReport(t, driverA, 1, model.DriverRunning)
	pid := programPID(t, cfg, driverA, 1)
	fm.assign()
	killed, _ := fm.waitReport(t, driverA, 1, model.DriverKilled)
	if !strings.Contains(killed.Reason, "no longer assigned") {
		t.Fatalf("killed = %+v", killed)
	}
	assertGone(t, pid)
}

// A worker asks for brief answers, and an attempt a brief answer names
// only (Kept) runs on untouched, counts as in use, and is killed once no
// answer names it.
func TestBriefAnswersKeepWhatRuns(t *testing.T) {
	fm := newFakeMaster(t)
	fm.set(func() { fm.brief = true })
	_, cfg := newWorker(t, fm, nil)
	fm.assign(sleeper(driverA, 1))
	fm.waitReport(t, driverA, 1, model.DriverRunning)
	pid := programPID(t, cfg, driverA, 1)
	fm.assign(sleeper(driverA, 1), sleeper(driverB, 1))
	fm.waitReport(t, driverB, 1, model.DriverRunning)
	fm.set(func() { fm.briefs = 0 })
	fm.waitFor(t, "brief answers keeping both attempts", func() bool { return fm.briefs >= 2 })
	var reports []model.AttemptReport
	fm.set(func() { reports = fm.reports() })
	for _, r := range reports {
		if r.State != model.DriverRunning {
			t.Fatalf("report %+v while both attempts were assigned", r)
		}
	}
	if got := programPID(t, cfg, driverA, 1); got != pid {
		t.Fatalf("the kept attempt's program is %d, was %d", got, pid)
	}
	fm.assign(sleeper(driverB, 1))
	killed, _ := fm.waitReport(t, driverA, 1, model.DriverKilled)
	if !strings.Contains(killed.Reason, "no longer assigned") {
		t.Fatalf("killed = %+v", killed)
	}
	assertGone(t, pid)
}

func TestSupersededAttemptIsKilledBeforeTheNextStarts(t *testing.T) {
	const killTimeout = 300 * time.Millisecond
	fm := newFakeMaster(t)
	_, cfg := newWorker(t, fm, func(c *worker.Config) { c.KillTimeout = killTimeout })
	// Attempt 1 ignores SIGTERM, so it takes the whole kill timeout to die:
	// attempt 2 must wait for it.
	stubborn := sleeper(driverA, 1)
	stubborn.Argv = []string{"/bin/sh", "-c", "trap '' TERM; echo $$; exec sleep 1000"}
	fm.assign(stubborn)
	fm.waitReport(t, driverA, 1, model.DriverRunning)
	pid := programPID(t, cfg, driverA, 1)
	fm.assign(sleeper(driverA, 2))
	killed, ki := fm.waitReport(t, driverA, 1, model.DriverKilled)
	_, ri := fm.waitReport(t, driverA, 2, model.DriverRunning)
	if killed.Reason != "superseded by attempt 2" || ki > ri {
		t.Fatalf("killed %+v (#%d), attempt 2 running at #%d", killed, ki, ri)
	}
	assertGone(t, pid)
	fm.set(func() {
		for _, hb := range fm.heartbeats {
			if len(hb.Running) > 1 {
				t.Fatalf("two attempts of one driver ran at once: %+v", hb.Running)
			}
		}
	})
}

// TestReportsAreResentUntilAcked: a report, of an attempt or an executor, is
// carried by every heartbeat until the leader acknowledges it, and never
// after.
func TestReportsAreResentUntilAcked(t *testing.T) {
	exit3 := []string{"/bin/sh", "-c", "exit 3"}
	for _, c := range []struct {
		name   string
		assign func(*fakeMaster)
		// failed returns the FAILED report's exit code if hb carries it.
		failed func(hb api.HeartbeatRequest) (*int, bool)
	}{
		{"attempt",
			func(fm *fakeMaster) { fm.assign(api.Assignment{DriverID: driverA, Attempt: 1, Argv: exit3}) },
			func(hb api.HeartbeatRequest) (*int, bool) {
				i := slices.IndexFunc(hb.Reports, func(r model.AttemptReport) bool { return r.State == model.DriverFailed })
				if i < 0 {
					return nil, false
				}
				return hb.Reports[i].ExitCode, true
			}},
		{"executor",
			func(fm *fakeMaster) {
				fm.assignExecutors(api.ExecutorAssignment{AppID: appA, ExecutorID: 0, Argv: exit3})
			},
			func(hb api.HeartbeatRequest) (*int, bool) {
				i := slices.IndexFunc(hb.ExecutorReports, func(r model.ExecutorReport) bool { return r.State == model.ExecFailed })
				if i < 0 {
					return nil, false
				}
				return hb.ExecutorReports[i].ExitCode, true
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			fm := newFakeMaster(t)
			_, cfg := newWorker(t, fm, nil)
			fm.set(func() { fm.ack = false })
			c.assign(fm)
			carrying := func(from int) int {
				n := 0
				for _, hb := range fm.heartbeats[from:] {
					if _, ok := c.failed(hb); ok {
						n++
					}
				}
				return n
			}
			fm.waitFor(t, "the FAILED report in three heartbeats", func() bool { return carrying(0) >= 3 })
			var acked int
			fm.set(func() {
				first := slices.IndexFunc(fm.heartbeats, func(hb api.HeartbeatRequest) bool {
					_, ok := c.failed(hb)
					return ok
				})
				fm.assertPaced(t, first+1, len(fm.heartbeats), cfg.HeartbeatInterval)
				if code, _ := c.failed(fm.heartbeats[first]); code == nil || *code != 3 {
					t.Fatalf("FAILED report with exit code %v, want 3", code)
				}
				fm.ack = true
				acked = len(fm.heartbeats) + 1 // the first answer to ack
			})
			fm.waitFor(t, "a heartbeat without reports", func() bool {
				last := fm.heartbeats[len(fm.heartbeats)-1]
				return len(fm.heartbeats) > acked && len(last.Reports)+len(last.ExecutorReports) == 0
			})
			fm.set(func() {
				if n := carrying(acked); n != 0 {
					t.Fatalf("the FAILED report was sent %d times after it was acked", n)
				}
			})
		})
	}
}

// TestCloseKillsAttemptsAndDecommissions: Close decommissions the worker
// with the leader, once, and only then kills both an attempt it started and
// one it adopted, and an adopted executor, and reports them, so that the
// leader never places a relaunch back on the worker that is going away.
func TestCloseKillsAttemptsAndDecommissions(t *testing.T) {
	fm := newFakeMaster(t)
	w1, cfg := newWorker(t, fm, nil)
	a := sleeper(driverA, 1)
	a.Supervise = true
	fm.assign(a)
	fm.assignExecutors(execSleeper(appA, 0))
	fm.waitReport(t, driverA, 1, model.DriverRunning)
	fm.waitExecReport(t, appA, 0, model.ExecRunning)
	pidA := programPID(t, cfg, driverA, 1)
	pidE := executorPID(t, cfg, appA, 0)
	w1.Detach()
	w2, _ := newWorker(t, fm, func(c *worker.Config) { c.WorkDir = cfg.WorkDir })
	fm.assign(a, sleeper(driverB, 1))
	fm.waitReport(t, driverB, 1, model.DriverRunning)
	pidB := programPID(t, cfg, driverB, 1)
	w2.Close()
	fm.set(func() {
		if len(fm.decommissions) != 1 || fm.decommissions[0].Reason != "worker shut down" {
			t.Fatalf("decommissions = %+v, want one with reason %q", fm.decommissions, "worker shut down")
		}
		for _, d := range []string{driverA, driverB} {
			assertOnlyAfter(t, fm, "KILLED reports of "+d, func(hb api.HeartbeatRequest) []model.AttemptReport { return hb.Reports },
				func(r model.AttemptReport) bool {
					return r.DriverID == d && r.State == model.DriverKilled && strings.Contains(r.Reason, "shut down")
				})
		}
		assertOnlyAfter(t, fm, "KILLED reports of the executor", func(hb api.HeartbeatRequest) []model.ExecutorReport { return hb.ExecutorReports },
			func(r model.ExecutorReport) bool {
				return r.AppID == appA && r.State == model.ExecKilled && strings.Contains(r.Reason, "shut down")
			})
	})
	assertGone(t, pidA)
	assertGone(t, pidB)
	assertGone(t, pidE)
	if _, err := http.Get("http://" + w2.HTTPAddr() + "/v1/health"); err == nil {
		t.Fatal("HTTP server still answers after Close")
	}
}

// assertOnlyAfter fails unless the heartbeats (with fm.mu held) carry a
// report that match accepts after the first decommission and none before;
// pick takes the reports of one kind from a heartbeat.
func assertOnlyAfter[R any](t *testing.T, fm *fakeMaster, what string, pick func(api.HeartbeatRequest) []R, match func(R) bool) {
	t.Helper()
	var before, after []R
	for i, hb := range fm.heartbeats {
		if i < fm.decommissionedAfter[0] {
			before = append(before, pick(hb)...)
		} else {
			after = append(after, pick(hb)...)
		}
	}
	if slices.ContainsFunc(before, match) || !slices.ContainsFunc(after, match) {
		t.Fatalf("%s before the decommission %+v, after it %+v; want one after only", what, before, after)
	}
}

func TestCloseCopesWithoutDecommissionEndpoint(t *testing.T) {
	fm := newFakeMaster(t)
	fm.set(func() { fm.noDecommission = true })
	w, _ := newWorker(t, fm, nil)
	fm.waitFor(t, "a heartbeat", func() bool { return len(fm.heartbeats) > 0 })
	w.Close()
	fm.set(func() {
		if len(fm.decommissions) != 1 {
			t.Fatalf("decommissions = %d, want one try", len(fm.decommissions))
		}
	})
}

func TestLogEndpointRefusesBadRequests(t *testing.T) {
	fm := newFakeMaster(t)
	w, cfg := newWorker(t, fm, nil)
	// A file a path escape would reach.
	if err := os.WriteFile(filepath.Join(filepath.Dir(cfg.WorkDir), "secret"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := "http://" + w.HTTPAddr()
	for _, c := range []struct {
		path   string
		status int
	}{
		{"/v1/drivers/..%2Fsecret/logs", http.StatusBadRequest},
		{"/v1/drivers/..%2F..%2F..%2Fetc%2Fpasswd/logs", http.StatusBadRequest},
		{"/v1/drivers/driver-1/logs", http.StatusBadRequest},
		{"/v1/drivers/" + driverA + "%2F..%2F..%2Fsecret/logs", http.StatusBadRequest},
		{"/v1/drivers/" + driverA + "/logs?stream=..%2F..%2Fsecret", http.StatusBadRequest},
		{"/v1/drivers/" + driverA + "/logs?attempt=..%2F..", http.StatusBadRequest},
		{"/v1/drivers/" + driverA + "/logs?offset=-1", http.StatusBadRequest},
		{"/v1/drivers/" + driverA + "/logs", http.StatusNotFound},
		{"/v1/drivers/" + driverA + "/logs?attempt=1", http.StatusNotFound},
		{"/v1/drivers/../../secret/logs", http.StatusNotFound},
		{"/v1/apps/..%2Fsecret/executors/0/logs", http.StatusBadRequest},
		{"/v1/apps/..%2F..%2F..%2Fetc%2Fpasswd/executors/0/logs", http.StatusBadRequest},
		{"/v1/apps/app-1/executors/0/logs", http.StatusBadRequest},
		{"/v1/apps/" + driverA + "/executors/0/logs", http.StatusBadRequest},
		{"/v1/apps/" + appA + "%2F..%2F..%2Fsecret/executors/0/logs", http.StatusBadRequest},
		{"/v1/apps/" + appA + "/executors/..%2F..%2Fsecret/logs", http.StatusBadRequest},
		{"/v1/apps/" + appA + "/executors/..%2F..%2F..%2Fsecret/logs", http.StatusBadRequest},
		{"/v1/apps/" + appA + "/executors/-1/logs", http.StatusBadRequest},
		{"/v1/apps/" + appA + "/executors/01/logs", http.StatusBadRequest},
		{"/v1/apps/" + appA + "/executors/x/logs", http.StatusBadRequest},
		{"/v1/apps/" + appA + "/executors/0/logs?stream=..%2F..%2Fsecret", http.StatusBadRequest},
		{"/v1/apps/" + appA + "/executors/0/logs?offset=-1", http.StatusBadRequest},
		{"/v1/apps/" + appA + "/executors/0/logs", http.StatusNotFound},
		{"/v1/apps/../../secret/executors/0/logs", http.StatusNotFound},
		{"/v1/apps/" + appA + "/executors/../../../secret/logs", http.StatusNotFound},
	} {
		resp, body := get(t, base+c.path)
		var e api.Error
		if resp.StatusCode != c.status || json.Unmarshal([]byte(body), &e) != nil || e.Error == "" || strings.Count(body, "\n") != 1 {
			t.Fatalf("GET %s: %d %q, want %d and a one-line JSON error", c.path, resp.StatusCode, body, c.status)
		}
	}
}

func TestBrokenRunnerIsReportedAsError(t *testing.T) {
	for _, c := range []struct{ command, reason string }{
		{"/nonexistent/drover", "cannot start runner"},
		{"/bin/true", "runner ended without a final state"},
	} {
		t.Run(filepath.Base(c.command), func(t *testing.T) {
			fm := newFakeMaster(t)
			newWorker(t, fm, func(cfg *worker.Config) { cfg.RunnerCommand = c.command })
			fm.assign(sleeper(driverA, 1))
			r, _ := fm.waitReport(t, driverA, 1, model.DriverError)
			if !strings.Contains(r.Reason, c.reason) {
				t.Fatalf("report = %+v, want reason %q", r, c.reason)
			}
		})
	}
}

func TestReportsCutALongPollShort(t *testing.T) {
	fm := newFakeMaster(t)
	fm.set(func() { fm.hold = true })
	// A report that waited for the held heartbeat would arrive a whole
	// request timeout late; the bound is a third of it, so that a loaded
	// machine's scheduling delays (over a second seen on two busy cores)
	// cannot be mistaken for that wait.
	const requestTimeout = time.Minute
	newWorker(t, fm, func(c *worker.Config) { c.RequestTimeout = requestTimeout })
	fm.waitFor(t, "a first heartbeat", func() bool { return len(fm.heartbeats) > 0 })
	began := time.Now()
	fm.assign(api.Assignment{DriverID: driverA, Attempt: 1, Argv: []string{"/bin/sh", "-c", "exit 0"}})
	fm.waitReport(t, driverA, 1, model.DriverFinished)
	if took := time.Since(began); took > requestTimeout/3 {
		t.Fatalf("FINISHED reached the master %v after the assignment: reports waited for a long poll", took)
	}
}

// A runner killed with SIGKILL leaves its program running; the worker ends
// it and reports the attempt KILLED, so a supervised driver is relaunched.
func TestDeadRunnersProgramIsKilled(t *testing.T) {
	fm := newFakeMaster(t)
	_, cfg := newWorker(t, fm, nil)
	fm.assign(sleeper(driverA, 1))
	fm.waitReport(t, driverA, 1, model.DriverRunning)
	pid := programPID(t, cfg, driverA, 1)
	st := readStatus(t, cfg, driverA, 1)
	if err := syscall.Kill(st.RunnerPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r, _ := fm.waitReport(t, driverA, 1, model.DriverKilled)
	if !strings.Contains(r.Reason, "runner died") {
		t.Fatalf("report = %+v", r)
	}
	assertGone(t, pid)
}

// A runner killed with SIGKILL while its program writes: the program dies
// of SIGPIPE on the pipe nobody reads, and the attempt still counts as
// killed (not ERROR), so a supervised driver is relaunched.
func TestDeadRunnersWritingProgramIsReportedKilled(t *testing.T) {
	fm := newFakeMaster(t)
	_, cfg := newWorker(t, fm, func(c *worker.Config) { c.LogMaxFileSize, c.LogMaxFiles = 64<<10, 2 })
	fm.assign(api.Assignment{DriverID: driverA, Attempt: 1, Argv: []string{"yes"}, Supervise: true})
	fm.waitReport(t, driverA, 1, model.DriverRunning)
	st := readStatus(t, cfg, driverA, 1)
	if err := syscall.Kill(st.RunnerPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r, _ := fm.waitReport(t, driverA, 1, model.DriverKilled)
	if !strings.Contains(r.Reason, "runner died") {
		t.Fatalf("report = %+v", r)
	}
	// Dead, if not yet reaped by whoever inherited it.
	waitUntil(t, "the program to end", func() bool { return processEnded(st.PID) })
}
