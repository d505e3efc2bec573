package worker_test

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/metricstest"
	"github.com/drover-project/drover/worker"
	"github.com/drover-project/drover/worker/unitdir"
)

// plenty is a free-space function of a disk that never runs low.
func plenty(string) (int64, error) { return 1 << 50, nil }

// writes is a driver attempt that writes n bytes to its stdout and exits.
func writes(driver string, attempt, n int) api.Assignment {
	return api.Assignment{DriverID: driver, Attempt: attempt, Cores: 1, MemoryMB: 64,
		Argv: []string{"/usr/bin/head", "-c", strconv.Itoa(n), "/dev/zero"}}
}

// settled waits until the worker has acted on the answer to a heartbeat it
// sent after this call: that answer holds every change the test made
// before (assignments emptied, acknowledgements turned on or off), and the
// worker has applied its acknowledgements and reconciled its units.
func (fm *fakeMaster) settled(t *testing.T, w *worker.Worker) {
	t.Helper()
	since := time.Now()
	fm.waitFor(t, "the answer to a later heartbeat acted on", func() bool { return worker.ActedOnSince(w, since) })
}

// age sets the modification times of a unit directory and its status file
// d in the past, as if it ended then.
func age(t *testing.T, dir string, d time.Duration) {
	t.Helper()
	then := time.Now().Add(-d)
	for _, p := range []string{filepath.Join(dir, unitdir.StatusFile), dir} {
		if err := os.Chtimes(p, then, then); err != nil {
			t.Fatal(err)
		}
	}
}

func exists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Lstat(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// A finished attempt or executor whose end is older than the TTL loses
// its directory, and its driver or app directory goes with it once empty;
// a younger one stays, and the artifact cache is never touched. The log
// endpoint then says when and why the files went, the metrics count the
// removals, and an assignment of a removed attempt arriving late runs
// nothing.
func TestCleanupRemovesFinishedUnitsAfterTheTTL(t *testing.T) {
	fm := newFakeMaster(t)
	w, cfg := newWorker(t, fm, func(c *worker.Config) {
		c.CleanupTTL = time.Hour
		c.FreeSpace = plenty
	})
	exec := api.ExecutorAssignment{AppID: appA, ExecutorID: 0, Cores: 1, MemoryMB: 64, Argv: []string{"/bin/echo", "hi"}}
	fm.assign(writes(driverA, 1, 1000), writes(driverB, 1, 1000))
	fm.assignExecutors(exec)
	fm.waitReport(t, driverA, 1, model.DriverFinished)
	fm.waitReport(t, driverB, 1, model.DriverFinished)
	fm.waitExecReport(t, appA, 0, model.ExecExited)
	fm.assign()
	fm.assignExecutors()
	fm.settled(t, w)

	dirA, dirB := attemptPath(cfg, driverA, 1, ""), attemptPath(cfg, driverB, 1, "")
	dirE := executorPath(cfg, appA, 0, "")
	age(t, dirA, 2*time.Hour)
	age(t, dirE, 2*time.Hour)
	age(t, dirB, 30*time.Minute)
	cached := filepath.Join(cfg.WorkDir, "cache", "sha256", strings.Repeat("a", 64))
	if err := os.MkdirAll(filepath.Dir(cached), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cached, []byte("artifact"), 0o400); err != nil {
		t.Fatal(err)
	}
	month := time.Now().Add(-30 * 24 * time.Hour)
	for _, p := range []string{cached, filepath.Dir(cached), filepath.Dir(filepath.Dir(cached))} {
		if err := os.Chtimes(p, month, month); err != nil {
			t.Fatal(err)
		}
	}
	worker.CleanNow(w)

	for _, gone := range []string{filepath.Join(cfg.WorkDir, driverA), filepath.Join(cfg.WorkDir, appA)} {
		if exists(t, gone) {
			t.Errorf("%s is still there", gone)
		}
	}
	for _, kept := range []string{dirB, cached, filepath.Join(cfg.WorkDir, worker.DBFile), filepath.Join(cfg.WorkDir, worker.LeaseFile)} {
		if !exists(t, kept) {
			t.Errorf("%s was removed", kept)
		}
	}

	resp, body := get(t, "http://"+w.HTTPAddr()+"/v1/drivers/"+driverA+"/logs?attempt=1")
	if resp.StatusCode != http.StatusGone || !strings.Contains(body, "--cleanup-ttl 1h0m0s") || !strings.Contains(body, driverA) {
		t.Errorf("log of a removed attempt: %d %s", resp.StatusCode, body)
	}
	resp, body = get(t, "http://"+w.HTTPAddr()+"/v1/apps/"+appA+"/executors/0/logs")
	if resp.StatusCode != http.StatusGone {
		t.Errorf("log of a removed executor: %d %s", resp.StatusCode, body)
	}
	s, err := metricstest.Get(http.DefaultClient, "http://"+w.HTTPAddr()+worker.MetricsPath, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		kind, reason string
		want         float64
	}{{"driver", "ttl", 1}, {"executor", "ttl", 1}, {"driver", "low_disk", 0}} {
		if got, ok := s.Value("drover_worker_cleanup_removed_total", "kind", c.kind, "reason", c.reason); !ok || got != c.want {
			t.Errorf("removed_total{kind=%s,reason=%s} = %v (present %v), want %v", c.kind, c.reason, got, ok, c.want)
		}
	}
	if got, _ := s.Value("drover_worker_cleanup_removed_bytes_total", "reason", "ttl"); got < 1000 {
		t.Errorf("removed_bytes_total{reason=ttl} = %v, want at least the 1000 bytes of output", got)
	}

	// A stale assignment of the removed attempt: reported, never run.
	fm.assign(writes(driverA, 1, 1000))
	r, _ := fm.waitReport(t, driverA, 1, model.DriverKilled)
	if !strings.Contains(r.Reason, "cleaned up") || exists(t, filepath.Join(cfg.WorkDir, driverA)) {
		t.Fatalf("a removed attempt assigned again: report %+v, directory recreated %v", r, exists(t, filepath.Join(cfg.WorkDir, driverA)))
	}
}

// fakeCache is an artifact cache holding freeable bytes, of which it frees
// what it is asked; it notes which of the watched paths existed at each
// ask.
type fakeCache struct {
	mu       sync.Mutex
	freeable int64
	watched  []string
	asks     []int64
	seen     [][]bool
}

func (c *fakeCache) FreeCache(_ context.Context, n int64) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var seen []bool
	for _, p := range c.watched {
		_, err := os.Lstat(p)
		seen = append(seen, err == nil)
	}
	c.asks, c.seen = append(c.asks, n), append(c.seen, seen)
	freed := min(n, c.freeable)
	c.freeable -= freed
	return freed, nil
}

func (c *fakeCache) held() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.freeable
}

// usage is the disk space of the files under dir, as the worker counts it.
func usage(t *testing.T, dir string) int64 {
	t.Helper()
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // removed meanwhile
		}
		if info, err := d.Info(); err == nil {
			total += info.Sys().(*syscall.Stat_t).Blocks * 512
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return total
}

// On a disk whose free space falls below the threshold, the cleanup asks
// the artifact cache for the shortfall first, then removes finished
// units' directories oldest first, and stops as soon as the free space is
// back: the newest finished unit and the live one stay. The disk is
// simulated: its free space is a capacity less what the work dir and the
// cache hold.
func TestCleanupMakesRoomOnALowDisk(t *testing.T) {
	const (
		unit    = 1 << 20
		minFree = 64 << 20
	)
	var capacity atomic.Int64
	capacity.Store(1 << 50)
	cache := &fakeCache{freeable: unit / 2}
	var workDir string
	fm := newFakeMaster(t)
	w, cfg := newWorker(t, fm, func(c *worker.Config) {
		workDir = c.WorkDir
		c.CleanupTTL = 0 // space alone
		c.MinFreeDisk = minFree
		c.Cache = cache
		c.FreeSpace = func(string) (int64, error) {
			return capacity.Load() - usage(t, workDir) - cache.held(), nil
		}
	})
	const driverC, driverD = "driver-20260101000000-3", "driver-20260101000000-4"
	fm.assign(writes(driverA, 1, unit), writes(driverB, 1, unit), writes(driverC, 1, unit))
	for _, d := range []string{driverA, driverB, driverC} {
		fm.waitReport(t, d, 1, model.DriverFinished)
	}
	live := sleeper(driverD, 1)
	fm.assign(live)
	programPID(t, cfg, driverD, 1)
	fm.settled(t, w)
	dirs := map[string]string{}
	for i, d := range []string{driverA, driverB, driverC} {
		dirs[d] = attemptPath(cfg, d, 1, "")
		age(t, dirs[d], time.Duration(3-i)*time.Hour) // A oldest
	}
	cache.watched = []string{dirs[driverA], dirs[driverB], dirs[driverC]}

	// Short by the cache's half unit and one and a half units more: the
	// cache, then A and B, must go.
	capacity.Store(usage(t, workDir) + cache.held() + minFree - unit/2 - unit - unit/2)
	worker.CleanNow(w)

	cache.mu.Lock()
	asks, seen := cache.asks, cache.seen
	cache.mu.Unlock()
	if len(asks) == 0 || asks[0] < unit/2+unit || seen[0][0] == false || seen[0][1] == false || seen[0][2] == false {
		t.Fatalf("the cache was asked for %v with the units present %v; want the whole shortfall first, before any unit went", asks, seen)
	}
	if exists(t, dirs[driverA]) || exists(t, dirs[driverB]) {
		t.Errorf("the two oldest finished attempts are still there")
	}
	if !exists(t, dirs[driverC]) {
		t.Errorf("the newest finished attempt was removed, beyond what the disk needed")
	}
	if !exists(t, attemptPath(cfg, driverD, 1, "")) {
		t.Errorf("the live attempt's directory was removed")
	}
	if free, _ := cfg.FreeSpace(""); free < minFree {
		t.Errorf("free space %d after the pass, below %d", free, minFree)
	}

	// A disk that stays low takes every finished unit and never a live one.
	capacity.Store(0)
	worker.CleanNow(w)
	if exists(t, dirs[driverC]) || !exists(t, attemptPath(cfg, driverD, 1, "")) {
		t.Errorf("on a full disk: finished attempt kept %v, live attempt kept %v",
			exists(t, dirs[driverC]), exists(t, attemptPath(cfg, driverD, 1, "")))
	}
	s, err := metricstest.Get(http.DefaultClient, "http://"+w.HTTPAddr()+worker.MetricsPath, "")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Value("drover_worker_cleanup_removed_total", "kind", "driver", "reason", "low_disk"); got != 3 {
		t.Errorf("removed_total{reason=low_disk} = %v, want 3", got)
	}
	if got, _ := s.Value("drover_worker_cleanup_cache_freed_bytes_total"); got != unit/2 {
		t.Errorf("cache_freed_bytes_total = %v, want %d", got, unit/2)
	}
	if _, ok := s.Value("drover_worker_work_dir_free_bytes"); !ok {
		t.Error("no drover_worker_work_dir_free_bytes")
	}
}

// However old and however full the disk, the cleanup never removes the
// directory of a live unit, of one a restarted worker adopted, or of one
// whose final report the leader has not acknowledged; the last goes at the
// first pass after the acknowledgement.
func TestCleanupKeepsLiveAdoptedAndUnacknowledgedUnits(t *testing.T) {
	full := func(c *worker.Config) {
		c.CleanupTTL = time.Nanosecond
		c.FreeSpace = func(string) (int64, error) { return 0, nil }
	}
	fm := newFakeMaster(t)
	w1, cfg := newWorker(t, fm, full)
	fm.assign(waiter(driverA, 1))
	programPID(t, cfg, driverA, 1)
	fm.settled(t, w1)
	// Detached, the first worker's attempt runs on for the second to
	// adopt.
	if err := w1.Detach(); err != nil {
		t.Fatal(err)
	}
	fm.set(func() { fm.ack = false })
	w2, _ := newWorker(t, fm, func(c *worker.Config) { full(c); sameWorkDir(cfg)(c) })
	fm.assign(waiter(driverA, 1), writes(driverB, 1, 10))
	fm.assignExecutors(execSleeper(appA, 0))
	fm.waitReport(t, driverB, 1, model.DriverFinished)
	executorPID(t, cfg, appA, 0)
	// B is no longer assigned, and its end is not acknowledged.
	fm.assign(waiter(driverA, 1))
	fm.settled(t, w2)

	adopted, unacked := attemptPath(cfg, driverA, 1, ""), attemptPath(cfg, driverB, 1, "")
	live := executorPath(cfg, appA, 0, "")
	for _, d := range []string{adopted, unacked, live} {
		age(t, d, 30*24*time.Hour)
	}
	worker.CleanNow(w2)
	for _, d := range []string{adopted, unacked, live} {
		if !exists(t, d) {
			t.Fatalf("%s was removed", d)
		}
	}

	fm.set(func() { fm.ack = true })
	fm.settled(t, w2)
	worker.CleanNow(w2)
	if exists(t, unacked) {
		t.Error("the acknowledged attempt is still there")
	}
	if !exists(t, adopted) || !exists(t, live) {
		t.Error("a live unit was removed")
	}
	if err := os.WriteFile(filepath.Join(adopted, unitdir.ProgramDir, "stop"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	fm.waitReport(t, driverA, 1, model.DriverFinished)
}
