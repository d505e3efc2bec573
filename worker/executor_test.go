package worker_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/worker"
	"github.com/drover-project/drover/worker/unitdir"
)

const appA = "app-20260101000000-0001"

// execSleeper is sleeper for an executor.
func execSleeper(app string, id int) api.ExecutorAssignment {
	return api.ExecutorAssignment{AppID: app, ExecutorID: id, Cores: 1, MemoryMB: 64,
		Argv: []string{"/bin/sh", "-c", "echo $$; exec sleep 1000"}}
}

// execWaiter is waiter for an executor.
func execWaiter(app string, id int) api.ExecutorAssignment {
	return api.ExecutorAssignment{AppID: app, ExecutorID: id, Cores: 1, MemoryMB: 64,
		Argv: []string{"/bin/sh", "-c", "echo $$; while [ ! -e stop ]; do sleep 0.02; done"}}
}

// executorPath is the file name in the executor's directory,
// WORK_DIR/APP_ID/EXECUTOR_ID.
func executorPath(cfg worker.Config, app string, id int, name string) string {
	return filepath.Join(cfg.WorkDir, app, strconv.Itoa(id), name)
}

func executorPID(t *testing.T, cfg worker.Config, app string, id int) int {
	t.Helper()
	return printedPID(t, executorPath(cfg, app, id, ""))
}

// executorLogs is the worker's log URL of the executor.
func executorLogs(w *worker.Worker, app, id string) string {
	return "http://" + w.HTTPAddr() + strings.NewReplacer("{app}", app, "{id}", id).Replace(worker.ExecutorLogsPath)
}

// TestRunsExecutorsWithEnvAndServesLogs: an executor of the desired set runs
// once, in WORK_DIR/APP_ID/EXECUTOR_ID, with the app's environment under the
// worker's DROVER_ variables, and is reported RUNNING then EXITED or FAILED
// with its exit code, in the executor fields of the heartbeat only.
func TestRunsExecutorsWithEnvAndServesLogs(t *testing.T) {
	fm := newFakeMaster(t)
	w, cfg := newWorker(t, fm, nil)
	fm.assignExecutors(
		api.ExecutorAssignment{AppID: appA, ExecutorID: 0, Cores: 2, MemoryMB: 512,
			Argv: []string{"/bin/sh", "-c", `echo "$DROVER_APP_ID $DROVER_EXECUTOR_ID $DROVER_EXECUTOR_CORES ` +
				`$DROVER_EXECUTOR_MEMORY_MB $DROVER_WORKER_ID $DROVER_MASTERS $EXTRA ${DROVER_DRIVER_ID-none}"; echo problem >&2`},
			Env: map[string]string{"EXTRA": "x", "DROVER_EXECUTOR_ID": "99", "DROVER_WORKER_ID": "spoofed"}},
		api.ExecutorAssignment{AppID: appA, ExecutorID: 1, Argv: []string{"/bin/sh", "-c", "exit 3"}},
	)
	for _, c := range []struct {
		id    int
		state model.ExecutorState
		code  int
	}{{0, model.ExecExited, 0}, {1, model.ExecFailed, 3}} {
		running, ri := fm.waitExecReport(t, appA, c.id, model.ExecRunning)
		end, ei := fm.waitExecReport(t, appA, c.id, c.state)
		if ri > ei || running.ExitCode != nil || end.ExitCode == nil || *end.ExitCode != c.code {
			t.Fatalf("executor %d: running %+v (#%d), end %+v (#%d), want exit code %d", c.id, running, ri, end, ei, c.code)
		}
	}
	dir := executorPath(cfg, appA, 0, "")
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if st, err := os.Stat(d); err != nil || st.Mode().Perm() != unitDirMode() {
			t.Fatalf("%s: %v %v, want a %04o directory", d, st.Mode(), err, unitDirMode())
		}
	}
	stdout := fmt.Sprintf("%s 0 2 512 w1 %s x none\n", appA, fm.addr())
	if b := readStream(t, dir, unitdir.StdoutFile); b != stdout {
		t.Fatalf("stdout = %q, want %q", b, stdout)
	}

	// Still in the desired set: never run again, never listed as running.
	var from int
	fm.set(func() { from = len(fm.heartbeats) })
	fm.waitFor(t, "three more heartbeats", func() bool { return len(fm.heartbeats) >= from+3 })
	fm.set(func() {
		if n := len(fm.executorReports()); n != 4 {
			t.Fatalf("%d executor reports, want 4: RUNNING and the end of each, once", n)
		}
		if r := fm.reports(); len(r) != 0 {
			t.Fatalf("executors reported as driver attempts: %+v", r)
		}
		if last := fm.heartbeats[len(fm.heartbeats)-1]; len(last.RunningExecutors) != 0 || len(last.Running) != 0 {
			t.Fatalf("running after the end: %+v %+v", last.Running, last.RunningExecutors)
		}
	})

	for _, c := range []struct {
		query, body string
		size        int
	}{
		{"", stdout, len(stdout)},
		{"?stream=stdout&offset=5", stdout[5:], len(stdout)},
		{"?stream=stderr", "problem\n", 8},
		{"?offset=1000", "", len(stdout)},
	} {
		resp, body := get(t, executorLogs(w, appA, "0")+c.query)
		if resp.StatusCode != http.StatusOK || body != c.body || resp.Header.Get(api.HeaderLogSize) != strconv.Itoa(c.size) {
			t.Fatalf("GET %s: %d %q size %s; want %q size %d", c.query, resp.StatusCode, body, resp.Header.Get(api.HeaderLogSize), c.body, c.size)
		}
	}
}

// TestUnassignedExecutorIsKilled: executors of one app run side by side and
// are listed as running; one that leaves the desired set is killed and
// reported KILLED, the other runs on.
func TestUnassignedExecutorIsKilled(t *testing.T) {
	fm := newFakeMaster(t)
	_, cfg := newWorker(t, fm, nil)
	fm.assign(sleeper(driverA, 1))
	fm.assignExecutors(execSleeper(appA, 1), execSleeper(appA, 0))
	fm.waitExecReport(t, appA, 0, model.ExecRunning)
	fm.waitExecReport(t, appA, 1, model.ExecRunning)
	fm.waitReport(t, driverA, 1, model.DriverRunning)
	pid0 := executorPID(t, cfg, appA, 0)
	pid1 := executorPID(t, cfg, appA, 1)
	both := []api.ExecutorRef{{AppID: appA, ExecutorID: 0}, {AppID: appA, ExecutorID: 1}}
	fm.waitFor(t, "both executors and the attempt listed as running", func() bool {
		last := fm.heartbeats[len(fm.heartbeats)-1]
		return slices.Equal(last.RunningExecutors, both) && slices.Equal(last.Running, []api.AttemptRef{{DriverID: driverA, Attempt: 1}})
	})

	fm.assignExecutors(execSleeper(appA, 1))
	killed, _ := fm.waitExecReport(t, appA, 0, model.ExecKilled)
	if !strings.Contains(killed.Reason, "no longer assigned") {
		t.Fatalf("killed = %+v", killed)
	}
	assertGone(t, pid0)
	fm.waitFor(t, "executor 1 alone listed as running", func() bool {
		return slices.Equal(fm.heartbeats[len(fm.heartbeats)-1].RunningExecutors, both[1:])
	})
	if err := syscall.Kill(pid1, 0); err != nil {
		t.Fatalf("executor 1 gone: %v", err)
	}
	fm.set(func() {
		if slices.ContainsFunc(fm.executorReports(), func(r model.ExecutorReport) bool { return r.ExecutorID == 1 && r.State != model.ExecRunning }) ||
			slices.ContainsFunc(fm.reports(), func(r model.AttemptReport) bool { return r.State != model.DriverRunning }) {
			t.Fatalf("reports %+v %+v: only executor 0 should have ended", fm.reports(), fm.executorReports())
		}
	})
}

// TestDetachedExecutorIsAdoptedNotRestarted: a worker restarted on the same
// work dir adopts the executor the previous one left running, lists it as
// running and reports its end, without running it again.
func TestDetachedExecutorIsAdoptedNotRestarted(t *testing.T) {
	fm := newFakeMaster(t)
	w1, cfg := newWorker(t, fm, nil)
	fm.assignExecutors(execWaiter(appA, 2))
	fm.waitExecReport(t, appA, 2, model.ExecRunning)
	pid := executorPID(t, cfg, appA, 2)
	dir := filepath.Dir(executorPath(cfg, appA, 2, unitdir.StatusFile))
	st, err := unitdir.ReadStatus(dir)
	if err != nil {
		t.Fatal(err)
	}
	w1.Detach()

	var from int
	fm.set(func() { from = len(fm.heartbeats) })
	newWorker(t, fm, sameWorkDir(cfg))
	fm.waitFor(t, "the new worker to list the executor as running", func() bool {
		return slices.ContainsFunc(fm.heartbeats[from:], func(hb api.HeartbeatRequest) bool {
			return slices.Equal(hb.RunningExecutors, []api.ExecutorRef{{AppID: appA, ExecutorID: 2}})
		})
	})
	if err := os.WriteFile(executorPath(cfg, appA, 2, unitdir.ProgramDir+"/stop"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	exited, _ := fm.waitExecReport(t, appA, 2, model.ExecExited)
	if exited.ExitCode == nil || *exited.ExitCode != 0 {
		t.Fatalf("exited = %+v", exited)
	}
	if b := readStream(t, executorPath(cfg, appA, 2, ""), unitdir.StdoutFile); b != fmt.Sprintf("%d\n", pid) {
		t.Fatalf("stdout = %q: the executor ran more than once", b)
	}
	if after, err := unitdir.ReadStatus(dir); err != nil || after.RunnerPID != st.RunnerPID || after.Runs != 1 {
		t.Fatalf("status = %+v, %v: another runner (was %d) or another run", after, err, st.RunnerPID)
	}
}

// An executor whose runner dies is killed with it and reported KILLED.
func TestDeadExecutorRunnersProgramIsKilled(t *testing.T) {
	fm := newFakeMaster(t)
	_, cfg := newWorker(t, fm, nil)
	fm.assignExecutors(execSleeper(appA, 0))
	fm.waitExecReport(t, appA, 0, model.ExecRunning)
	pid := executorPID(t, cfg, appA, 0)
	st, err := unitdir.ReadStatus(filepath.Dir(executorPath(cfg, appA, 0, unitdir.StatusFile)))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(st.RunnerPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r, _ := fm.waitExecReport(t, appA, 0, model.ExecKilled)
	if !strings.Contains(r.Reason, "runner died") {
		t.Fatalf("report = %+v", r)
	}
	assertGone(t, pid)
}

// An executor with an invalid app ID is never launched, and reported FAILED.
func TestInvalidExecutorIsReportedFailed(t *testing.T) {
	fm := newFakeMaster(t)
	_, cfg := newWorker(t, fm, nil)
	fm.assignExecutors(api.ExecutorAssignment{AppID: "../app", ExecutorID: 0, Argv: []string{"/bin/true"}})
	r, _ := fm.waitExecReport(t, "../app", 0, model.ExecFailed)
	if !strings.Contains(r.Reason, "invalid app ID") {
		t.Fatalf("report = %+v", r)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(cfg.WorkDir), "app")); err == nil {
		t.Fatal("a directory was made outside the work dir")
	}
}
