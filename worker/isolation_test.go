package worker_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-project/drover/isolation"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/worker"
)

// lockedBuffer is a log destination the worker and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestIsolationAutoWithoutCgroupsWarnsAndRuns: where no cgroup can be
// made (here no cgroup file system at the root it is given), auto says
// why in one warning line and runs its drivers without; cgroups refuses
// to start.
func TestIsolationAutoWithoutCgroupsWarnsAndRuns(t *testing.T) {
	fm := newFakeMaster(t)
	var logs lockedBuffer
	nowhere := t.TempDir()
	_, cfg := newWorker(t, fm, func(c *worker.Config) {
		c.CgroupRoot = nowhere
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	fm.assign(sleeper(driverA, 1))
	fm.waitReport(t, driverA, 1, model.DriverRunning)
	pid := programPID(t, cfg, driverA, 1)
	var warnings []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "isolation off") {
			warnings = append(warnings, l)
		}
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "no cgroup file system at "+nowhere) {
		t.Fatalf("want one warning saying why isolation is off, got %q", warnings)
	}
	if st := readStatus(t, cfg, driverA, 1); st.PID != pid {
		t.Fatalf("status %+v", st)
	}
	self, _ := os.ReadFile("/proc/self/cgroup")
	prog, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil || string(prog) != string(self) {
		t.Fatalf("the program's cgroups are not the worker's:\n%s\nworker:\n%s", prog, self)
	}

	cfg2 := cfg
	cfg2.WorkDir = filepath.Join(t.TempDir(), "work")
	cfg2.HTTPPort = 0
	cfg2.Isolation = isolation.ModeCgroups
	if w, err := worker.New(cfg2); err == nil {
		w.Close()
		t.Fatal("--isolation cgroups started without cgroups")
	} else if !strings.Contains(err.Error(), "--isolation cgroups: no cgroup file system") {
		t.Fatalf("error %q does not say why", err)
	}
}

// testInstance writes a work dir's instance ID whose first 8 characters,
// which name the worker's cgroup, are this test process's PID: test runs
// beside each other never share a worker cgroup.
func testInstance(workDir string) string {
	instance := fmt.Sprintf("%08x%024x", os.Getpid(), time.Now().UnixNano())
	if err := os.MkdirAll(workDir, 0o700); err != nil {
		panic(err)
	}
	if err := os.WriteFile(filepath.Join(workDir, worker.InstanceFile), []byte(instance+"\n"), 0o600); err != nil {
		panic(err)
	}
	return instance
}

// isolatedWorker starts a worker that must isolate (skipping without
// root) on a work dir whose instance ID is fixed, and returns the
// manager of the same worker cgroup, for the test to look into.
func isolatedWorker(t *testing.T, fm *fakeMaster, workDir string) (*worker.Worker, worker.Config, *isolation.Manager) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: cgroups need root (CI runs as root)")
	}
	instance := testInstance(workDir)
	w, cfg := newWorker(t, fm, func(c *worker.Config) {
		c.WorkDir = workDir
		c.Isolation = isolation.ModeCgroups
	})
	wm, err := isolation.New(isolation.Config{Name: isolation.WorkerName(cfg.ID, instance)})
	if err != nil {
		t.Fatal(err)
	}
	return w, cfg, wm
}

// TestAttemptRunsInItsCgroup: an attempt's program runs in the cgroup
// named after it with the attempt's limits, its runner outside; once it
// ends the cgroup is gone, and so is the worker's when it shuts down.
func TestAttemptRunsInItsCgroup(t *testing.T) {
	fm := newFakeMaster(t)
	w, cfg, m := isolatedWorker(t, fm, filepath.Join(t.TempDir(), "work"))
	fm.assign(sleeper(driverA, 1))
	fm.waitReport(t, driverA, 1, model.DriverRunning)
	pid := programPID(t, cfg, driverA, 1)
	ref := m.Ref(isolation.UnitName(driverA, 1))
	c, err := isolation.Open(ref)
	if err != nil {
		t.Fatal(err)
	}
	pids, _ := c.Pids()
	if len(pids) != 1 || pids[0] != pid {
		t.Fatalf("cgroup %s holds %v, want the program %d alone (not its runner)", ref, pids, pid)
	}
	limit := ref.Paths["memory"]
	if ref.Version == 2 {
		limit = ref.Path
	}
	want := "memory.limit_in_bytes"
	if ref.Version == 2 {
		want = "memory.max"
	}
	dir := filepath.Join(ref.Root, limit)
	if ref.Version == 1 {
		dir = filepath.Join(ref.Root, "memory", limit)
	}
	if b, err := os.ReadFile(filepath.Join(dir, want)); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(64<<20) {
		t.Fatalf("%s = %q (%v), want the attempt's 64 MiB", want, b, err)
	}
	fm.assign()
	fm.waitReport(t, driverA, 1, model.DriverKilled)
	waitUntil(t, "the attempt's cgroup to be removed", func() bool {
		names, _ := m.Units()
		return len(names) == 0
	})
	w.Close()
	if _, err := os.Stat(dir); err == nil {
		t.Fatal("the attempt's cgroup outlived the attempt")
	}
	if names, err := m.Units(); err == nil {
		t.Fatalf("the worker's cgroup outlived its shutdown, holding %v", names)
	}
}

// TestGoneUnitsCgroupsAreRemovedAtStart: a worker that starts kills and
// removes the cgroups under its own that belong to no unit it adopts,
// whatever still runs in them.
func TestGoneUnitsCgroupsAreRemovedAtStart(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: cgroups need root (CI runs as root)")
	}
	workDir := filepath.Join(t.TempDir(), "work")
	m, err := isolation.New(isolation.Config{Name: isolation.WorkerName("w1", testInstance(workDir))})
	if err != nil {
		t.Skipf("skipped: no usable cgroups: %v", err)
	}
	// What a worker killed with its runners would leave: a unit's cgroup
	// with its program still in it.
	ref, err := m.Create(isolation.UnitName(driverB, 3), isolation.Limits{MemoryMB: 64})
	if err != nil {
		t.Fatal(err)
	}
	c, err := isolation.Open(ref)
	if err != nil {
		t.Fatal(err)
	}
	left := exec.Command("/bin/sleep", "1000")
	if err := c.Start(left); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = left.Wait(); close(exited) }()
	t.Cleanup(func() { _ = left.Process.Kill(); <-exited })

	fm := newFakeMaster(t)
	newWorker(t, fm, func(c *worker.Config) {
		c.WorkDir = workDir
		c.Isolation = isolation.ModeCgroups
	})
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the program in a gone unit's cgroup survived the worker's start")
	}
	if names, _ := m.Units(); len(names) != 0 {
		t.Fatalf("cgroups %v left after the worker's start", names)
	}
}
