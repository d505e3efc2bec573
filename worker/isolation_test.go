package worker_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/cgrouptest"
	"github.com/drover-project/drover/worker"
	"github.com/drover-project/drover/worker/host"
	"github.com/drover-project/drover/worker/isolation"
	"github.com/drover-project/drover/worker/unitdir"
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
		c.Isolation = host.Isolation{Root: nowhere}
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
	cfg2.WorkDir = newWorkDir(t)
	cfg2.HTTPPort = 0
	cfg2.Isolation = host.Isolation{Mode: isolation.ModeCgroups, Root: nowhere}
	if w, err := worker.New(cfg2); err == nil {
		w.Close()
		t.Fatal("--isolation cgroups started without cgroups")
	} else if !strings.Contains(err.Error(), "--isolation cgroups: no cgroup file system") {
		t.Fatalf("error %q does not say why", err)
	}
}

// TestIsolationAutoWithoutControllersWarns: where the cgroup file system
// lacks a controller the limits need (here a root holding only the
// machine's v1 memory hierarchy), auto says which in its one warning line
// and runs its drivers without.
func TestIsolationAutoWithoutControllersWarns(t *testing.T) {
	memory := filepath.Join(isolation.DefaultRoot, "memory")
	if _, err := os.Stat(filepath.Join(memory, "cgroup.procs")); err != nil {
		t.Skipf("skipped: no cgroup v1 memory hierarchy at %s", memory)
	}
	root := t.TempDir()
	if err := os.Symlink(memory, filepath.Join(root, "memory")); err != nil {
		t.Fatal(err)
	}
	fm := newFakeMaster(t)
	var logs lockedBuffer
	_, cfg := newWorker(t, fm, func(c *worker.Config) {
		c.Isolation = host.Isolation{Root: root}
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	fm.assign(sleeper(driverA, 1))
	fm.waitReport(t, driverA, 1, model.DriverRunning)
	programPID(t, cfg, driverA, 1)
	var warnings []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "isolation off") {
			warnings = append(warnings, l)
		}
	}
	if want := "no cpu controller: cgroup v1 without a cpu hierarchy at " + filepath.Join(root, "cpu"); len(warnings) != 1 || !strings.Contains(warnings[0], want) {
		t.Fatalf("want one warning saying %q, got %q", want, warnings)
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
// manager of the same worker cgroup, for the test to look into. tune,
// when not nil, adjusts the worker's config.
func isolatedWorker(t *testing.T, fm *fakeMaster, workDir string, tune func(*worker.Config)) (*worker.Worker, worker.Config, *isolation.Manager) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: cgroups need root (CI runs as root)")
	}
	instance := testInstance(workDir)
	w, cfg := newWorker(t, fm, func(c *worker.Config) {
		c.WorkDir = workDir
		c.Isolation = host.Isolation{Mode: isolation.ModeCgroups}
		if tune != nil {
			tune(c)
		}
	})
	wm, err := isolation.New(isolation.Config{Name: unitdir.WorkerCgroupName(cfg.ID, instance)})
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
	w, cfg, m := isolatedWorker(t, fm, filepath.Join(t.TempDir(), "work"), nil)
	fm.assign(sleeper(driverA, 1))
	fm.waitReport(t, driverA, 1, model.DriverRunning)
	pid := programPID(t, cfg, driverA, 1)
	ref := m.Ref(unitdir.CgroupName(driverA, 1))
	c, err := isolation.Open(ref)
	if err != nil {
		t.Fatal(err)
	}
	pids, _ := c.Pids()
	if len(pids) != 1 || pids[0] != pid {
		t.Fatalf("cgroup %s holds %v, want the program %d alone (not its runner)", ref, pids, pid)
	}
	dir := cgrouptest.Dir(ref, "memory")
	cgrouptest.AssertMemoryLimit(t, ref, 64)
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
	m, err := isolation.New(isolation.Config{Name: unitdir.WorkerCgroupName("w1", testInstance(workDir))})
	if err != nil {
		t.Skipf("skipped: no usable cgroups: %v", err)
	}
	// What a worker killed with its runners would leave: a unit's cgroup
	// with its program still in it.
	ref, err := m.Create(unitdir.CgroupName(driverB, 3), isolation.Limits{MemoryMB: 64})
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
		c.Isolation = host.Isolation{Mode: isolation.ModeCgroups}
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

// TestPidsLimitBoundsTheUnit: the worker's pids limit is each unit's
// pids.max, and a program that forks beyond it sees the fork fail inside
// its unit, while the worker goes on launching other units.
func TestPidsLimitBoundsTheUnit(t *testing.T) {
	fm := newFakeMaster(t)
	_, cfg, m := isolatedWorker(t, fm, filepath.Join(t.TempDir(), "work"), func(c *worker.Config) { c.Isolation = host.Isolation{Mode: isolation.ModeCgroups, PidsLimit: 8} })
	// The inner shell forks sleeps until a fork fails (dash then exits 2,
	// bash says "fork: Resource temporarily unavailable"); the program
	// itself lives on, to be looked at.
	bomb := api.Assignment{DriverID: driverA, Attempt: 1, Cores: 1, MemoryMB: 64, Argv: []string{"/bin/sh", "-c",
		`/bin/sh -c 'i=0; while [ $i -lt 20 ]; do sleep 1000 & i=$((i+1)); done; exit 0'; echo "forks ended $?"; exec sleep 1000`}}
	fm.assign(bomb)
	fm.waitReport(t, driverA, 1, model.DriverRunning)
	dir := filepath.Join(cfg.WorkDir, driverA, "attempt-1")
	waitUntil(t, "the fork loop to end", func() bool { return strings.Contains(readStream(t, dir, unitdir.StdoutFile), "forks ended") })
	if out := readStream(t, dir, unitdir.StdoutFile); strings.Contains(out, "forks ended 0") {
		t.Fatalf("all 20 forks succeeded under a pids limit of 8: %q", out)
	}
	if errOut := readStream(t, dir, unitdir.StderrFile); !strings.Contains(strings.ToLower(errOut), "fork") {
		t.Fatalf("stderr %q does not say a fork failed", errOut)
	}
	ref := m.Ref(unitdir.CgroupName(driverA, 1))
	if got := cgrouptest.ReadFile(t, ref, "pids", "pids.max"); got != "8" {
		t.Fatalf("pids.max = %q, want the worker's --pids-limit 8", got)
	}
	if events := cgrouptest.ReadFile(t, ref, "pids", "pids.events"); events == "max 0" || !strings.HasPrefix(events, "max ") {
		t.Fatalf("pids.events = %q, want forks refused at the limit counted", events)
	}
	fm.assign(bomb, sleeper(driverB, 1))
	fm.waitReport(t, driverB, 1, model.DriverRunning)
	fm.assign(sleeper(driverB, 1))
	fm.waitReport(t, driverA, 1, model.DriverKilled)
	waitUntil(t, "the bounded unit's cgroup to be removed", func() bool {
		names, _ := m.Units()
		return !slices.Contains(names, unitdir.CgroupName(driverA, 1))
	})
}

// TestExecutorRunsInItsCgroup: an executor's program runs in the cgroup
// named after its app and ID, with the executor's memory and CPU limits
// and its runner outside; when the executor is no longer wanted, a
// descendant that left the program's session dies with it and the
// cgroup is removed.
func TestExecutorRunsInItsCgroup(t *testing.T) {
	fm := newFakeMaster(t)
	_, cfg, m := isolatedWorker(t, fm, filepath.Join(t.TempDir(), "work"), nil)
	fm.assignExecutors(api.ExecutorAssignment{AppID: appA, ExecutorID: 0, Cores: 1, MemoryMB: 64,
		Argv: []string{"/bin/sh", "-c", `echo $$; setsid /bin/sh -c 'echo $$ > escaped.tmp; mv escaped.tmp escaped; exec sleep 1000' & exec sleep 1000`}})
	fm.waitExecReport(t, appA, 0, model.ExecRunning)
	pid := executorPID(t, cfg, appA, 0)
	var escaped int
	waitUntil(t, "the setsid grandchild's PID", func() bool {
		b, err := os.ReadFile(executorPath(cfg, appA, 0, unitdir.ProgramDir+"/escaped"))
		escaped, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	if sid, err := unix.Getsid(escaped); err != nil || sid != escaped {
		t.Fatalf("grandchild %d has session %d (%v), want one of its own", escaped, sid, err)
	}
	ref := m.Ref(unitdir.CgroupName(appA, 0))
	c, err := isolation.Open(ref)
	if err != nil {
		t.Fatal(err)
	}
	want := []int{pid, escaped}
	slices.Sort(want)
	// The grandchild's mv may not have exited yet when the file it made
	// appears: wait for the cgroup to settle on the two that stay.
	var pids []int
	waitUntil(t, "the cgroup to hold the program and its grandchild alone", func() bool {
		pids, _ = c.Pids()
		slices.Sort(pids)
		return slices.Equal(pids, want)
	})
	cgrouptest.AssertMemoryLimit(t, ref, 64)
	quota, name, want1 := "cpu.cfs_quota_us", "cpu.cfs_quota_us", "100000"
	if ref.Version == 2 {
		quota, name, want1 = "cpu.max", "cpu.max", "100000 100000"
	}
	if got := cgrouptest.ReadFile(t, ref, "cpu", quota); got != want1 {
		t.Fatalf("%s = %q, want one core's %s", name, got, want1)
	}
	fm.assignExecutors()
	fm.waitExecReport(t, appA, 0, model.ExecKilled)
	waitUntil(t, "the setsid grandchild to die with its executor", func() bool { return processEnded(escaped) })
	waitUntil(t, "the executor's cgroup to be removed", func() bool {
		names, _ := m.Units()
		return len(names) == 0
	})
}

// TestIsolationNonePutsNothingInACgroup: with --isolation none a worker
// that could isolate (root, cgroups) makes no cgroup, its programs run in
// the worker's own cgroups, and it warns of no isolation being off.
func TestIsolationNonePutsNothingInACgroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: only root could isolate, so none is no choice without it (CI runs as root)")
	}
	workDir := filepath.Join(t.TempDir(), "work")
	// The cgroup an isolating worker would make, made here to show the
	// machine allows it; the worker must leave it empty.
	wm, err := isolation.New(isolation.Config{Name: unitdir.WorkerCgroupName("w1", testInstance(workDir))})
	if err != nil {
		t.Skipf("skipped: no usable cgroups here, so none is no choice: %v", err)
	}
	defer wm.Remove()
	fm := newFakeMaster(t)
	var logs lockedBuffer
	_, cfg := newWorker(t, fm, func(c *worker.Config) {
		c.WorkDir = workDir
		c.Isolation = host.Isolation{Mode: isolation.ModeNone}
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	fm.assign(sleeper(driverA, 1))
	fm.waitReport(t, driverA, 1, model.DriverRunning)
	pid := programPID(t, cfg, driverA, 1)
	self, _ := os.ReadFile("/proc/self/cgroup")
	prog, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil || string(prog) != string(self) {
		t.Fatalf("the program's cgroups are not the worker's:\n%s\nworker:\n%s", prog, self)
	}
	if st := readStatus(t, cfg, driverA, 1); st.PID != pid {
		t.Fatalf("status %+v", st)
	}
	if names, err := wm.Units(); err != nil || len(names) != 0 {
		t.Fatalf("the worker made unit cgroups %v (%v) under --isolation none", names, err)
	}
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "isolation") || strings.Contains(l, "cgroup") {
			t.Fatalf("--isolation none warned about isolation: %s", l)
		}
	}
}
