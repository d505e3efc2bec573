package worker_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/worker"
	"github.com/drover-project/drover/worker/unitdir"
)

// waiter runs until the test creates the file "stop" in its attempt
// directory (its working directory), then exits 0. It prints its PID first,
// so a second run would show as a second line.
func waiter(driver string, attempt int) api.Assignment {
	return api.Assignment{DriverID: driver, Attempt: attempt, Cores: 1, MemoryMB: 64,
		Argv: []string{"/bin/sh", "-c", "echo $$; while [ ! -e stop ]; do sleep 0.02; done"}}
}

func attemptPath(cfg worker.Config, driver string, attempt int, name string) string {
	return filepath.Join(cfg.WorkDir, driver, "attempt-"+strconv.Itoa(attempt), name)
}

func readStatus(t *testing.T, cfg worker.Config, driver string, attempt int) unitdir.Status {
	t.Helper()
	st, err := unitdir.ReadStatus(filepath.Dir(attemptPath(cfg, driver, attempt, unitdir.StatusFile)))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// sameWorkDir makes a worker start on cfg's work dir, as a restarted daemon.
func sameWorkDir(cfg worker.Config) func(*worker.Config) {
	return func(c *worker.Config) {
		c.WorkDir = cfg.WorkDir
		c.Lease = cfg.Lease
	}
}

// processEnded reports whether pid is gone or a zombie: a detached worker
// no longer reaps the runners it started.
func processEnded(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X')
}

// waitUntil polls cond, for what only the file system or the process table
// tells.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(failSafe)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// readLease reads the worker's lease file as its runners do.
func readLease(t *testing.T, cfg worker.Config) unitdir.LeaseContent {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(cfg.WorkDir, worker.LeaseFile))
	if err != nil {
		t.Fatal(err)
	}
	var c unitdir.LeaseContent
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("lease file %q: %v", b, err)
	}
	return c
}

// The lease file names the daemon, which its runners follow, and its last
// renewal at a detach says so, so that they keep their programs for the
// next daemon.
func TestLeaseNamesItsDaemon(t *testing.T) {
	fm := newFakeMaster(t)
	w, cfg := newWorker(t, fm, nil)
	c := readLease(t, cfg)
	if c.HolderPID != os.Getpid() || c.HolderStart == 0 || c.Detached || !w.Tethered() {
		t.Fatalf("lease %+v (tethered %v), want held by this process (%d), not detached", c, w.Tethered(), os.Getpid())
	}
	if err := w.Detach(); err != nil {
		t.Fatal(err)
	}
	if d := readLease(t, cfg); d.HolderPID != c.HolderPID || d.HolderStart != c.HolderStart || !d.Detached {
		t.Fatalf("lease after the detach %+v, want %d's and detached", d, c.HolderPID)
	}
	// The next daemon names the detached one it succeeds, for runners
	// that missed the detached renewal; one that follows a daemon which
	// died without detaching names nobody.
	w2, _ := newWorker(t, fm, sameWorkDir(cfg))
	if d := readLease(t, cfg); d.SucceedsPID != c.HolderPID || d.SucceedsStart != c.HolderStart || d.Detached {
		t.Fatalf("lease of the next daemon %+v, want it to succeed %d", d, c.HolderPID)
	}
	if err := w2.Close(); err != nil {
		t.Fatal(err)
	}
	crashed := c
	crashed.Renewed = time.Now().UnixMilli()
	b, err := json.Marshal(crashed)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg.WorkDir, worker.LeaseFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	newWorker(t, fm, sameWorkDir(cfg))
	if d := readLease(t, cfg); d.SucceedsPID != 0 || d.SucceedsStart != 0 {
		t.Fatalf("lease after a daemon that did not detach %+v, want it to succeed nobody", d)
	}
}

// A worker that adopts a runner which does not follow its daemon (an
// older version's, after an upgrade) does not say it is tethered: its
// death would leave that program running for the lease.
func TestAdoptingAnUntetheredRunnerUntethers(t *testing.T) {
	fm := newFakeMaster(t)
	w1, cfg := newWorker(t, fm, func(c *worker.Config) { c.Lease = 10 * time.Second })
	fm.assign(waiter(driverA, 1))
	fm.waitReport(t, driverA, 1, model.DriverRunning)
	w1.Detach()
	path := attemptPath(cfg, driverA, 1, unitdir.StatusFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if st["tethered"] != true {
		t.Fatalf("the runner's status %s does not say it is tethered", b)
	}
	delete(st, "tethered")
	if b, err = json.Marshal(st); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if w2, _ := newWorker(t, fm, sameWorkDir(cfg)); w2.Tethered() {
		t.Fatal("a worker that adopted an untethered runner says it is tethered")
	}
	if err := os.WriteFile(attemptPath(cfg, driverA, 1, unitdir.ProgramDir+"/stop"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	fm.waitReport(t, driverA, 1, model.DriverFinished)
}

func TestDetachedAttemptIsAdoptedNotRestarted(t *testing.T) {
	const lease = 400 * time.Millisecond
	fm := newFakeMaster(t)
	w1, cfg := newWorker(t, fm, func(c *worker.Config) { c.Lease = lease })
	fm.assign(waiter(driverA, 1))
	fm.waitReport(t, driverA, 1, model.DriverRunning)
	pid := programPID(t, cfg, driverA, 1)
	runnerPID := readStatus(t, cfg, driverA, 1).RunnerPID
	w1.Detach()

	var from int
	fm.set(func() { from = len(fm.heartbeats) })
	w2, _ := newWorker(t, fm, sameWorkDir(cfg))
	if !w2.Tethered() {
		t.Error("a worker that adopted a runner of its own version is not tethered")
	}
	fm.waitFor(t, "the new worker to list the attempt as running", func() bool {
		return slices.ContainsFunc(fm.heartbeats[from:], func(hb api.HeartbeatRequest) bool {
			return slices.Equal(hb.Running, []api.AttemptRef{{DriverID: driverA, Attempt: 1}})
		})
	})
	// Several leases: the new worker renews the lease the runner watches.
	time.Sleep(3 * lease)
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("adopted program gone: %v", err)
	}
	if err := os.WriteFile(attemptPath(cfg, driverA, 1, unitdir.ProgramDir+"/stop"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	finished, _ := fm.waitReport(t, driverA, 1, model.DriverFinished)
	if finished.ExitCode == nil || *finished.ExitCode != 0 || finished.Runs != 1 {
		t.Fatalf("finished = %+v", finished)
	}
	if b := readStream(t, attemptPath(cfg, driverA, 1, ""), unitdir.StdoutFile); b != fmt.Sprintf("%d\n", pid) {
		t.Fatalf("stdout = %q: the program ran more than once", b)
	}
	if st := readStatus(t, cfg, driverA, 1); st.RunnerPID != runnerPID || st.Runs != 1 {
		t.Fatalf("status = %+v: another runner (was %d) or another run", st, runnerPID)
	}
}

// TestAttemptEndedWhileWorkerDownIsReportedNotRerun: a recorded attempt
// whose runner ended while no worker ran is reported from its status file
// (or KILLED when that is not final), never run again, and forgotten once
// the report is acknowledged.
func TestAttemptEndedWhileWorkerDownIsReportedNotRerun(t *testing.T) {
	for _, c := range []struct {
		name   string
		state  model.DriverState
		reason string
	}{
		{"program exited", model.DriverFinished, ""},
		{"runner killed", model.DriverKilled, "ended while its worker was down"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fm := newFakeMaster(t)
			w1, cfg := newWorker(t, fm, nil)
			fm.assign(waiter(driverA, 1))
			fm.waitReport(t, driverA, 1, model.DriverRunning)
			pid := programPID(t, cfg, driverA, 1)
			runnerPID := readStatus(t, cfg, driverA, 1).RunnerPID
			w1.Detach()
			if c.state == model.DriverFinished {
				if err := os.WriteFile(attemptPath(cfg, driverA, 1, unitdir.ProgramDir+"/stop"), nil, 0o600); err != nil {
					t.Fatal(err)
				}
				waitUntil(t, "the final status", func() bool {
					st, err := unitdir.ReadStatus(filepath.Dir(attemptPath(cfg, driverA, 1, unitdir.StatusFile)))
					return err == nil && st.State.Terminal()
				})
			} else {
				_ = syscall.Kill(runnerPID, syscall.SIGKILL)
				_ = syscall.Kill(-pid, syscall.SIGKILL)
			}
			waitUntil(t, "the runner's end", func() bool { return processEnded(runnerPID) })

			var from int
			fm.set(func() { from = len(fm.reports()) })
			w2, _ := newWorker(t, fm, sameWorkDir(cfg))
			r, at := fm.waitReport(t, driverA, 1, c.state)
			if at < from || r.Reason != c.reason || r.Runs != 1 {
				t.Fatalf("report #%d (from #%d) = %+v, want %s with reason %q after one run", at, from, r, c.state, c.reason)
			}
			fm.set(func() {
				if slices.ContainsFunc(fm.reports()[from:], func(r model.AttemptReport) bool { return r.State == model.DriverRunning }) {
					t.Fatalf("RUNNING reported after the restart: %+v", fm.reports()[from:])
				}
			})
			if b := readStream(t, attemptPath(cfg, driverA, 1, ""), unitdir.StdoutFile); b != fmt.Sprintf("%d\n", pid) {
				t.Fatalf("stdout = %q: the attempt ran again", b)
			}

			// Acknowledged, the record is gone: a third worker has
			// nothing to report. A heartbeat without the report shows
			// that the worker has taken the acknowledgement in.
			fm.waitFor(t, "a heartbeat after the acknowledgement", func() bool {
				return len(fm.heartbeats[len(fm.heartbeats)-1].Reports) == 0 && len(fm.reports()) > at
			})
			fm.assign()
			w2.Detach()
			fm.set(func() { from = len(fm.heartbeats) })
			newWorker(t, fm, sameWorkDir(cfg))
			fm.waitFor(t, "three heartbeats of the third worker", func() bool { return len(fm.heartbeats) >= from+3 })
			fm.set(func() {
				for _, hb := range fm.heartbeats[from:] {
					if len(hb.Reports) > 0 || len(hb.Running) > 0 {
						t.Fatalf("third worker sent %+v", hb)
					}
				}
			})
		})
	}
}

// TestFencing: with no answer from the masters for longer than the lease, a
// strict worker kills its supervised attempt and its executor and keeps its
// unsupervised attempt; a default worker keeps all three. Either way the
// worker stays alive and renews the lease, so the runners keep what it
// keeps.
func TestFencing(t *testing.T) {
	const lease = 500 * time.Millisecond
	for _, mode := range []worker.FencingMode{worker.FencingStrict, worker.FencingDefault} {
		t.Run(string(mode), func(t *testing.T) {
			fm := newFakeMaster(t)
			_, cfg := newWorker(t, fm, func(c *worker.Config) {
				c.Fencing = mode
				c.Lease = lease
			})
			supervised := sleeper(driverA, 1)
			supervised.Supervise = true
			fm.assign(supervised, sleeper(driverB, 1))
			fm.assignExecutors(execSleeper(appA, 0))
			fm.waitReport(t, driverA, 1, model.DriverRunning)
			fm.waitReport(t, driverB, 1, model.DriverRunning)
			fm.waitExecReport(t, appA, 0, model.ExecRunning)
			pidA := programPID(t, cfg, driverA, 1)
			pidB := programPID(t, cfg, driverB, 1)
			pidE := executorPID(t, cfg, appA, 0)

			fm.set(func() { fm.down = true })
			down := time.Now()
			if mode == worker.FencingStrict {
				waitUntil(t, "the supervised program's and the executor's end", func() bool {
					return errors.Is(syscall.Kill(-pidA, 0), syscall.ESRCH) && errors.Is(syscall.Kill(-pidE, 0), syscall.ESRCH)
				})
				// The last answered heartbeat went out at most about an
				// interval before the masters went down.
				if after := time.Since(down); after < lease-5*cfg.HeartbeatInterval {
					t.Fatalf("supervised attempt killed %v after the masters went down, before the lease %v", after, lease)
				}
			}
			time.Sleep(3 * lease)
			if mode == worker.FencingDefault {
				if err := syscall.Kill(pidA, 0); err != nil {
					t.Fatalf("supervised program gone in default fencing: %v", err)
				}
				if err := syscall.Kill(pidE, 0); err != nil {
					t.Fatalf("executor gone in default fencing: %v", err)
				}
			}
			if err := syscall.Kill(pidB, 0); err != nil {
				t.Fatalf("unsupervised program gone: %v", err)
			}

			fm.set(func() { fm.down = false })
			var back int
			fm.set(func() { back = len(fm.heartbeats) })
			if mode == worker.FencingStrict {
				killed, _ := fm.waitReport(t, driverA, 1, model.DriverKilled)
				want := "fenced: no contact with a leader for 500ms"
				if killed.Reason != want {
					t.Fatalf("killed = %+v, want reason %q", killed, want)
				}
				if killed, _ := fm.waitExecReport(t, appA, 0, model.ExecKilled); killed.Reason != want {
					t.Fatalf("executor killed = %+v, want reason %q", killed, want)
				}
			}
			fm.waitFor(t, "three heartbeats after the masters came back", func() bool { return len(fm.heartbeats) >= back+3 })
			fm.set(func() {
				for _, r := range fm.reports() {
					if r.State != model.DriverRunning && (r.DriverID == driverB || mode == worker.FencingDefault) {
						t.Fatalf("report %+v: the attempt should have been kept", r)
					}
				}
				running := fm.heartbeats[len(fm.heartbeats)-1].Running
				want := []api.AttemptRef{{DriverID: driverA, Attempt: 1}, {DriverID: driverB, Attempt: 1}}
				if mode == worker.FencingStrict {
					want = want[1:]
				}
				if !slices.Equal(running, want) {
					t.Fatalf("running = %+v, want %+v", running, want)
				}
				if mode == worker.FencingStrict {
					return
				}
				if r := fm.executorReports(); len(r) != 1 {
					t.Fatalf("executor reports %+v: the executor should have been kept", r)
				}
				if running := fm.heartbeats[len(fm.heartbeats)-1].RunningExecutors; !slices.Equal(running, []api.ExecutorRef{{AppID: appA}}) {
					t.Fatalf("running executors = %+v", running)
				}
			})
		})
	}
}

func TestStrictFencingNeedsLeaseAboveTwoHeartbeats(t *testing.T) {
	cfg := worker.DefaultConfig()
	cfg.ID, cfg.Masters, cfg.WorkDir, cfg.Cores, cfg.MemoryMB = "w1", []string{"127.0.0.1:1"}, t.TempDir(), 1, 64
	cfg.Fencing = worker.FencingStrict
	cfg.Lease = 2 * cfg.HeartbeatInterval
	if _, err := worker.New(cfg); err == nil || !strings.Contains(err.Error(), "lease") {
		t.Fatalf("New = %v, want an error about the lease", err)
	}
}

func TestSecondWorkerOnWorkDirFails(t *testing.T) {
	fm := newFakeMaster(t)
	_, cfg := newWorker(t, fm, nil)
	cfg.HTTPPort = 0
	if w, err := worker.New(cfg); err == nil {
		w.Close()
		t.Fatal("a second worker started on the same work dir")
	} else if !strings.Contains(err.Error(), "another worker") {
		t.Fatalf("error %q does not say the work dir is in use", err)
	}
}
