package worker_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/worker"
	"github.com/drover-project/drover/worker/unitdir"
)

const appScript = "#!/bin/sh\necho \"staged $DROVER_WORKER_ID\"\n"

// files serves artifacts by path; a path in hold hangs until released.
// The first unavailable requests are answered 503.
type files struct {
	*httptest.Server
	mu          sync.Mutex
	bodies      map[string][]byte
	hold        map[string]chan struct{}
	unavailable atomic.Int32
	arrived     chan string
}

func newFiles(t *testing.T) *files {
	f := &files{bodies: map[string][]byte{}, hold: map[string]chan struct{}{}, arrived: make(chan string, 100)}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.arrived <- r.URL.Path
		if f.unavailable.Add(-1) >= 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		f.mu.Lock()
		body, ok := f.bodies[r.URL.Path]
		hold := f.hold[r.URL.Path]
		f.mu.Unlock()
		if hold != nil {
			select {
			case <-hold:
			case <-r.Context().Done():
				return
			}
		}
		if !ok {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
	}))
	t.Cleanup(f.Close)
	return f
}

// serve serves body at p and returns the artifact that names it, with its
// checksum when checksum is set.
func (f *files) serve(t *testing.T, p string, body []byte, checksum bool) model.Artifact {
	t.Helper()
	f.mu.Lock()
	f.bodies[p] = body
	f.mu.Unlock()
	source := f.URL + p
	if checksum {
		s := sha256.Sum256(body)
		source += "?checksum=sha256:" + hex.EncodeToString(s[:])
	}
	a, err := model.NormalizeArtifact(model.Artifact{Source: source})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// holdUntil makes requests for p hang until release is closed.
func (f *files) holdUntil(p string, release chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hold[p] = release
}

// A driver with an http artifact runs it as ./app.sh from its attempt's
// directory.
func TestDriverRunsStagedArtifact(t *testing.T) {
	fm := newFakeMaster(t)
	_, cfg := newWorker(t, fm, nil)
	srv := newFiles(t)
	a := srv.serve(t, "/app.sh", []byte(appScript), false)
	fm.assign(api.Assignment{DriverID: driverA, Attempt: 1, Argv: []string{"./app.sh"}, Artifacts: []model.Artifact{a}})
	if r, _ := fm.waitReport(t, driverA, 1, model.DriverFinished); r.Runs != 1 {
		t.Fatalf("finished = %+v", r)
	}
	if b := readStream(t, attemptPath(cfg, driverA, 1, ""), unitdir.StdoutFile); b != "staged w1\n" {
		t.Fatalf("stdout = %q", b)
	}
}

// An executor gets the artifacts of its assignment (the app's) staged
// into its own directory, verified, before its program starts.
func TestExecutorGetsAppArtifacts(t *testing.T) {
	fm := newFakeMaster(t)
	_, cfg := newWorker(t, fm, nil)
	srv := newFiles(t)
	script := srv.serve(t, "/run.sh", []byte("#!/bin/sh\nexec cat conf/input.txt\n"), true)
	input := srv.serve(t, "/input.txt", []byte("shard 3\n"), true)
	input.Dest = "conf"
	fm.assignExecutors(api.ExecutorAssignment{AppID: appA, ExecutorID: 0, Argv: []string{"./run.sh"}, Artifacts: []model.Artifact{script, input}})
	fm.waitExecReport(t, appA, 0, model.ExecExited)
	dir := executorPath(cfg, appA, 0, "")
	if b := readStream(t, dir, unitdir.StdoutFile); b != "shard 3\n" {
		t.Fatalf("stdout = %q", b)
	}
	if fi, err := os.Stat(filepath.Join(dir, unitdir.ProgramDir, "run.sh")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("run.sh: %v, %v; want a 0755 file", fi, err)
	}
}

// An upload is read from the masters with the worker's node token (masters
// with tokens and no TLS), staged with the mode it was uploaded with, and
// run.
func TestUploadIsReadWithTheWorkersToken(t *testing.T) {
	fm := newFakeMaster(t)
	body := []byte(appScript)
	s := sha256.Sum256(body)
	sum := hex.EncodeToString(s[:])
	fm.set(func() { fm.blobs = map[string][]byte{sum: body} })
	_, cfg := newWorker(t, fm, func(c *worker.Config) { c.NodeToken = "worker-secret-0123456789" })
	a, err := model.NormalizeArtifact(model.Artifact{Upload: sum, Name: "app.sh", Mode: 0o750})
	if err != nil {
		t.Fatal(err)
	}
	fm.assign(api.Assignment{DriverID: driverA, Attempt: 1, Argv: []string{"./app.sh"}, Artifacts: []model.Artifact{a}})
	fm.waitReport(t, driverA, 1, model.DriverFinished)
	dir := attemptPath(cfg, driverA, 1, "")
	if b := readStream(t, dir, unitdir.StdoutFile); b != "staged w1\n" {
		t.Fatalf("stdout = %q", b)
	}
	if fi, err := os.Stat(filepath.Join(dir, unitdir.ProgramDir, "app.sh")); err != nil || fi.Mode().Perm() != 0o750 {
		t.Fatalf("app.sh: %v, %v; want mode 0750", fi, err)
	}
	fm.set(func() {
		if len(fm.blobAuth) != 1 || fm.blobAuth[0] != "Bearer worker-secret-0123456789" {
			t.Fatalf("upload requests carried %q; want one with the worker's node token", fm.blobAuth)
		}
	})
}

// A runner holds no secret of its worker in its environment, which a
// process of the runner's user could read in /proc/PID/environ: not the
// worker's token, with which it reads uploads (it comes through a pipe),
// nor any DROVER_ variable of the worker's own environment.
func TestRunnerEnvironmentHoldsNoSecret(t *testing.T) {
	const token = "worker-secret-0123456789"
	t.Setenv("DROVER_GOSSIP_KEY", "gossip-secret-0123456789")
	fm := newFakeMaster(t)
	body := []byte(appScript + "while [ ! -e done ]; do sleep 0.02; done\n")
	s := sha256.Sum256(body)
	sum := hex.EncodeToString(s[:])
	fm.set(func() { fm.blobs = map[string][]byte{sum: body} })
	_, cfg := newWorker(t, fm, func(c *worker.Config) { c.NodeToken = token })
	a, err := model.NormalizeArtifact(model.Artifact{Upload: sum, Name: "app.sh"})
	if err != nil {
		t.Fatal(err)
	}
	fm.assign(api.Assignment{DriverID: driverA, Attempt: 1, Argv: []string{"./app.sh"}, Artifacts: []model.Artifact{a}})
	fm.waitReport(t, driverA, 1, model.DriverRunning)
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", readStatus(t, cfg, driverA, 1).RunnerPID))
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{token, "DROVER_TOKEN=", "gossip-secret", "DROVER_GOSSIP_KEY="} {
		if bytes.Contains(env, []byte(secret)) {
			t.Errorf("the runner's environment holds %q", secret)
		}
	}
	if err := os.WriteFile(attemptPath(cfg, driverA, 1, unitdir.ProgramDir+"/done"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	fm.waitReport(t, driverA, 1, model.DriverFinished)
	fm.set(func() {
		if len(fm.blobAuth) != 1 || fm.blobAuth[0] != "Bearer "+token {
			t.Errorf("upload requests carried %q; want one with the worker's token", fm.blobAuth)
		}
	})
}

// An artifact whose server hangs fails the attempt, saying so, within the
// worker's artifact timeout.
func TestHangingArtifactFailsAttempt(t *testing.T) {
	fm := newFakeMaster(t)
	newWorker(t, fm, func(c *worker.Config) {
		c.ArtifactStallTimeout = 100 * time.Millisecond
		c.ArtifactTimeout = 500 * time.Millisecond
	})
	srv := newFiles(t)
	release := make(chan struct{})
	defer close(release)
	srv.holdUntil("/app.sh", release)
	a := srv.serve(t, "/app.sh", []byte(appScript), false)
	fm.assign(api.Assignment{DriverID: driverA, Attempt: 1, Argv: []string{"./app.sh"}, Artifacts: []model.Artifact{a}})
	r, _ := fm.waitReport(t, driverA, 1, model.DriverFailed)
	if want := "fetch " + a.URL + ": timed out after 500ms ("; !strings.HasPrefix(r.Reason, want) || r.Runs != 0 {
		t.Fatalf("failed = %+v, want reason %q... after 0 runs", r, want)
	}
	fm.set(func() {
		for _, r := range fm.reports() {
			if r.State == model.DriverRunning {
				t.Fatalf("reported %+v for an attempt that never started", r)
			}
		}
	})
}

// Each change of a staging's progress reaches the leader as it happens:
// a SUBMITTED report with Staging and the runner's line for a driver, a
// LAUNCHING one for an executor, each sent until acknowledged and then
// never again, before the RUNNING report of the program's start.
func TestStagingProgressIsReported(t *testing.T) {
	fm := newFakeMaster(t)
	newWorker(t, fm, nil)
	srv := newFiles(t)
	srv.unavailable.Store(1)
	a := srv.serve(t, "/app.sh", []byte(appScript), false)
	fm.assign(api.Assignment{DriverID: driverA, Attempt: 1, Argv: []string{"./app.sh"}, Artifacts: []model.Artifact{a}})
	want := "fetching " + a.URL + ": 503 Service Unavailable, try 1, next in 1s"
	r, i := fm.waitReport(t, driverA, 1, model.DriverSubmitted)
	if !r.Staging || r.Reason != want {
		t.Fatalf("staging report %+v, want %q", r, want)
	}
	_, j := fm.waitReport(t, driverA, 1, model.DriverRunning)
	fm.set(func() {
		n := 0
		for _, r := range fm.reports() {
			if r.Staging {
				n++
			}
		}
		if n != 1 || j < i {
			t.Fatalf("%d staging reports, RUNNING at %d after staging at %d; want one, before RUNNING", n, j, i)
		}
	})

	srv.unavailable.Store(1)
	e := srv.serve(t, "/run.sh", []byte(appScript), false)
	fm.assignExecutors(api.ExecutorAssignment{AppID: appA, ExecutorID: 0, Argv: []string{"./run.sh"}, Artifacts: []model.Artifact{e}})
	er, _ := fm.waitExecReport(t, appA, 0, model.ExecLaunching)
	if want := "fetching " + e.URL + ": 503 Service Unavailable, try 1, next in 1s"; !er.Staging || er.Reason != want {
		t.Fatalf("executor staging report %+v, want %q", er, want)
	}
	fm.waitExecReport(t, appA, 0, model.ExecRunning)
}

// A worker restarted while a runner stages adopts it as it is: the new
// worker reports RUNNING once the program starts, and the end.
func TestAdoptedStagingRunnerIsFollowed(t *testing.T) {
	fm := newFakeMaster(t)
	w1, cfg := newWorker(t, fm, func(c *worker.Config) { c.Lease = time.Second })
	srv := newFiles(t)
	release := make(chan struct{})
	srv.holdUntil("/app.sh", release)
	// It runs until the test creates "done", so that the new worker,
	// which follows the status file, sees it running.
	a := srv.serve(t, "/app.sh", []byte(appScript+"while [ ! -e done ]; do sleep 0.02; done\n"), true)
	fm.assign(api.Assignment{DriverID: driverA, Attempt: 1, Argv: []string{"./app.sh"}, Artifacts: []model.Artifact{a}})
	<-srv.arrived
	waitUntil(t, "status.json to say staging", func() bool {
		st, err := unitdir.ReadStatus(filepath.Dir(attemptPath(cfg, driverA, 1, unitdir.StatusFile)))
		return err == nil && st.Staging && st.State == model.DriverSubmitted
	})
	w1.Detach()
	newWorker(t, fm, sameWorkDir(cfg))
	close(release)
	_, ri := fm.waitReport(t, driverA, 1, model.DriverRunning)
	if err := os.WriteFile(attemptPath(cfg, driverA, 1, unitdir.ProgramDir+"/done"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	finished, fi := fm.waitReport(t, driverA, 1, model.DriverFinished)
	if ri > fi || finished.Runs != 1 {
		t.Fatalf("running #%d, finished %+v #%d", ri, finished, fi)
	}
	if b := readStream(t, attemptPath(cfg, driverA, 1, ""), unitdir.StdoutFile); b != "staged w1\n" {
		t.Fatalf("stdout = %q", b)
	}
}

// A runner SIGKILLed while it stages ends its attempt KILLED, not ERROR,
// as one that dies while its program runs: a supervised driver is
// relaunched.
func TestRunnerDeathWhileStagingIsAKill(t *testing.T) {
	fm := newFakeMaster(t)
	_, cfg := newWorker(t, fm, nil)
	srv := newFiles(t)
	release := make(chan struct{})
	defer close(release)
	srv.holdUntil("/app.sh", release)
	a := srv.serve(t, "/app.sh", []byte(appScript), false)
	fm.assign(api.Assignment{DriverID: driverA, Attempt: 1, Supervise: true, Argv: []string{"./app.sh"}, Artifacts: []model.Artifact{a}})
	<-srv.arrived
	var st unitdir.Status
	waitUntil(t, "status.json to say staging", func() bool {
		var err error
		st, err = unitdir.ReadStatus(filepath.Dir(attemptPath(cfg, driverA, 1, unitdir.StatusFile)))
		return err == nil && st.Staging && st.RunnerPID > 0
	})
	if err := syscall.Kill(st.RunnerPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if r, _ := fm.waitReport(t, driverA, 1, model.DriverKilled); !strings.Contains(r.Reason, "died while staging") {
		t.Fatalf("killed = %+v", r)
	}
}

// awaitRunnerExit waits until the runner of attempt 1 of driver has exited.
func awaitRunnerExit(t *testing.T, cfg worker.Config, driver string) {
	t.Helper()
	waitUntil(t, driver+"'s runner to exit", func() bool {
		st, err := unitdir.ReadStatus(filepath.Dir(attemptPath(cfg, driver, 1, unitdir.StatusFile)))
		return err == nil && st.State.Terminal() && processEnded(st.RunnerPID)
	})
}

// entryExists says whether the worker's cache holds an entry for a.
func entryExists(cfg worker.Config, a model.Artifact) bool {
	_, err := os.Stat(filepath.Join(cfg.WorkDir, worker.CacheDir, "sha256", a.SHA256))
	return err == nil
}

// The worker trims its cache once a staging adds an entry, evicting an
// entry no live unit uses and keeping one a running driver staged; it
// also frees space when asked (the work-dir cleanup's low-disk path),
// keeping that entry still.
func TestCacheTrimKeepsLiveUnitsEntries(t *testing.T) {
	fm := newFakeMaster(t)
	w, cfg := newWorker(t, fm, func(c *worker.Config) { c.CacheSizeMB = 1 })
	srv := newFiles(t)
	blob := func(c byte) []byte { return bytes.Repeat([]byte{c}, 400<<10) }
	pinned := srv.serve(t, "/pinned", blob('p'), true)
	unused := srv.serve(t, "/unused", blob('u'), true)
	added := srv.serve(t, "/added", blob('a'), true)
	live := waiter(driverA, 1)
	live.Artifacts = []model.Artifact{pinned}
	done := api.Assignment{DriverID: driverB, Attempt: 1, Argv: []string{"/bin/true"}, Artifacts: []model.Artifact{unused}}
	fm.assign(live, done)
	fm.waitReport(t, driverA, 1, model.DriverRunning)
	fm.waitReport(t, driverB, 1, model.DriverFinished)
	// B's runner has ended: nothing pins its entry any more.
	awaitRunnerExit(t, cfg, driverB)
	if !entryExists(cfg, pinned) || !entryExists(cfg, unused) {
		t.Fatal("entries missing before the cache outgrew its bound")
	}
	third := api.Assignment{DriverID: "driver-20260101000000-3", Attempt: 1, Argv: []string{"/bin/true"}, Artifacts: []model.Artifact{added}}
	fm.assign(live, done, third)
	fm.waitReport(t, third.DriverID, 1, model.DriverFinished)
	waitUntil(t, "the unused entry to be evicted", func() bool { return !entryExists(cfg, unused) })
	if !entryExists(cfg, pinned) || !entryExists(cfg, added) {
		t.Fatal("the trim evicted more than the least recently used unpinned entry")
	}
	awaitRunnerExit(t, cfg, third.DriverID)
	freed, err := w.FreeCache(context.Background(), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if freed != 400<<10 || entryExists(cfg, added) || !entryExists(cfg, pinned) {
		t.Fatalf("FreeCache freed %d bytes: it must free all but the running driver's entry", freed)
	}
}

// Unless told otherwise, the work-dir cleanup asks the worker's own
// artifact cache for room when the disk runs low: an entry no live unit
// uses goes, before any unit's directory.
func TestLowDiskEvictsTheWorkersCache(t *testing.T) {
	var low atomic.Bool
	fm := newFakeMaster(t)
	_, cfg := newWorker(t, fm, func(c *worker.Config) {
		c.CleanupTTL = 0
		c.MinFreeDisk = 64 << 20
		c.FreeSpace = func(string) (int64, error) {
			if low.Load() {
				return 1 << 20, nil
			}
			return 1 << 40, nil
		}
	})
	srv := newFiles(t)
	a := srv.serve(t, "/data", bytes.Repeat([]byte{'d'}, 100<<10), true)
	fm.assign(api.Assignment{DriverID: driverA, Attempt: 1, Argv: []string{"/bin/true"}, Artifacts: []model.Artifact{a}})
	fm.waitReport(t, driverA, 1, model.DriverFinished)
	awaitRunnerExit(t, cfg, driverA)
	if !entryExists(cfg, a) {
		t.Fatal("no cache entry after the staging")
	}
	low.Store(true)
	waitUntil(t, "the cleanup to evict the unused cache entry", func() bool { return !entryExists(cfg, a) })
}
