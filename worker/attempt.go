package worker

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/runner"
)

// driverIDPattern is Spark's driver ID form. Driver IDs name directories, so
// anything else is refused before it reaches the file system.
var driverIDPattern = regexp.MustCompile(`^driver-[0-9]{14}-[0-9]+$`)

const (
	// runnerSubcommand is the hidden drover subcommand that runs runner.Main.
	runnerSubcommand = "runner"
	// runnerLogFile, in the attempt directory, receives the runner's own
	// log (its stderr).
	runnerLogFile = "runner.log"
)

type attemptKey struct {
	driver  string
	attempt int
}

// attempt is one driver attempt this worker started (or found ended on
// disk). ended and killReason are guarded by Worker.mu.
type attempt struct {
	key attemptKey
	dir string
	// cmd is the runner; nil when none was started.
	cmd *exec.Cmd
	// stdin is the write end of the runner's stdin. The worker never
	// writes to it; its closing (at the latest when this process dies)
	// tells the runner the daemon is gone.
	stdin *os.File
	// ended: the runner has exited and the final report is queued.
	ended bool
	// killReason says why the worker asked the runner to stop; it replaces
	// the runner's generic reason in the KILLED report.
	killReason string
}

func attemptDir(workDir, driverID string, n int) string {
	return filepath.Join(workDir, driverID, "attempt-"+strconv.Itoa(n))
}

// reconcile makes the attempts this worker runs match the leader's desired
// set (Spark's Worker does the same on LaunchDriver / KillDriver messages,
// here derived from one full set). An attempt of a driver starts only once
// no other attempt of that driver runs here, so a relaunch never overlaps
// the attempt it supersedes.
func (w *Worker) reconcile(as []api.Assignment) {
	want := make(map[attemptKey]bool, len(as))
	latest := map[string]int{}
	for _, a := range as {
		want[attemptKey{a.DriverID, a.Attempt}] = true
		latest[a.DriverID] = max(latest[a.DriverID], a.Attempt)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, at := range w.attempts {
		switch {
		case want[k]:
		case at.ended:
			// Its report stays queued until acknowledged. Should a stale
			// answer assign it again, its directory stops a rerun.
			delete(w.attempts, k)
		case at.killReason == "":
			at.killReason = "no longer assigned to worker " + w.cfg.ID
			if n := latest[k.driver]; n > k.attempt {
				at.killReason = fmt.Sprintf("superseded by attempt %d", n)
			}
			w.log.Info("killing attempt", "driver", k.driver, "attempt", k.attempt, "reason", at.killReason)
			at.terminate()
		}
	}
	for _, a := range as {
		k := attemptKey{a.DriverID, a.Attempt}
		if _, ok := w.attempts[k]; ok || w.driverBusy(a.DriverID) {
			continue
		}
		w.attempts[k] = w.start(a)
	}
}

func (w *Worker) driverBusy(driverID string) bool {
	for k, at := range w.attempts {
		if k.driver == driverID && !at.ended {
			return true
		}
	}
	return false
}

// killAll asks every live attempt's runner to stop, for Close.
func (w *Worker) killAll(reason string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, at := range w.attempts {
		if at.ended {
			continue
		}
		if at.killReason == "" {
			at.killReason = reason
		}
		at.terminate()
	}
}

// terminate sends SIGTERM to the runner, which ends the program's process
// group and reports KILLED.
func (at *attempt) terminate() {
	if at.cmd != nil {
		_ = at.cmd.Process.Signal(syscall.SIGTERM)
	}
}

// start launches a's runner, with w.mu held. An attempt that cannot be
// launched comes back ended, its ERROR report queued.
func (w *Worker) start(a api.Assignment) *attempt {
	k := attemptKey{a.DriverID, a.Attempt}
	at := &attempt{key: k}
	end := func(r fsm.AttemptReport) *attempt {
		at.ended = true
		w.queue(r)
		w.log.Warn("attempt not started", "driver", k.driver, "attempt", k.attempt, "state", r.State, "reason", r.Reason)
		return at
	}
	failed := func(reason string) *attempt {
		return end(fsm.AttemptReport{DriverID: k.driver, Attempt: k.attempt, State: fsm.DriverError, Reason: reason})
	}
	if !driverIDPattern.MatchString(k.driver) || k.attempt < 1 {
		return failed(fmt.Sprintf("invalid driver ID %q or attempt %d", k.driver, k.attempt))
	}
	at.dir = attemptDir(w.cfg.WorkDir, k.driver, k.attempt)
	if err := os.MkdirAll(filepath.Dir(at.dir), 0o700); err != nil {
		return failed("cannot create driver directory: " + err.Error())
	}
	if err := os.Mkdir(at.dir, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return end(recovered(k, at.dir))
		}
		return failed("cannot create attempt directory: " + err.Error())
	}
	spec := runner.Spec{
		Argv:        a.Argv,
		Env:         w.programEnv(a),
		Supervise:   a.Supervise,
		KillTimeout: w.cfg.KillTimeout,
		BackoffBase: w.cfg.RestartBackoff,
		BackoffMax:  w.cfg.RestartBackoffMax,
	}
	if err := runner.WriteSpec(at.dir, spec); err != nil {
		return failed("cannot write attempt spec: " + err.Error())
	}
	events, err := w.launch(at)
	if err != nil {
		return failed("cannot start runner: " + err.Error())
	}
	w.log.Info("attempt launched", "driver", k.driver, "attempt", k.attempt, "dir", at.dir, "runner_pid", at.cmd.Process.Pid)
	w.runners.Add(1)
	go w.watch(at, events)
	return at
}

// recovered is the report for an attempt whose directory an earlier run of
// this worker left behind. That run's runner saw its daemon exit and killed
// the program, so the attempt must not run again under the same number; the
// runner's last status tells how it ended.
func recovered(k attemptKey, dir string) fsm.AttemptReport {
	r := fsm.AttemptReport{DriverID: k.driver, Attempt: k.attempt, State: fsm.DriverKilled,
		Reason: "ended by a restart of its worker"}
	if st, err := runner.ReadStatus(dir); err == nil {
		r.Runs = st.Runs
		if st.State.Terminal() {
			r.State, r.ExitCode, r.Reason = st.State, st.ExitCode, st.Reason
		}
	}
	return r
}

// launch starts the runner of at and returns its event stream.
func (w *Worker) launch(at *attempt) (io.ReadCloser, error) {
	logFile, err := os.OpenFile(filepath.Join(at.dir, runnerLogFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer stdinR.Close()
	cmd := exec.Command(w.cfg.RunnerCommand, runnerSubcommand, "--dir", at.dir)
	cmd.Dir = at.dir
	cmd.Stdin = stdinR
	cmd.Stderr = logFile
	// Its own group: a Ctrl-C meant for the daemon must not reach the
	// runners, which the daemon stops itself.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	events, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		stdinW.Close()
		return nil, err
	}
	at.cmd, at.stdin = cmd, stdinW
	return events, nil
}

// programEnv is the program's whole environment: the worker's own (as
// Spark's CommandUtils passes the worker's environment on), the
// submission's on top, and the DROVER_ variables, which a submission cannot
// override, last.
func (w *Worker) programEnv(a api.Assignment) []string {
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	maps.Copy(env, a.Env)
	env["DROVER_DRIVER_ID"] = a.DriverID
	env["DROVER_ATTEMPT"] = strconv.Itoa(a.Attempt)
	env["DROVER_WORKER_ID"] = w.cfg.ID
	env["DROVER_MASTERS"] = strings.Join(w.cfg.Masters, ",")
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// watch follows a runner's events until it exits, reporting RUNNING on each
// launch and the final state once the runner is gone.
func (w *Worker) watch(at *attempt, events io.Reader) {
	defer w.runners.Done()
	k := at.key
	var final *runner.Event
	sc := bufio.NewScanner(events)
	for sc.Scan() {
		var e runner.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			w.log.Warn("bad runner event", "driver", k.driver, "attempt", k.attempt, "line", sc.Text())
			continue
		}
		switch e.Event {
		case runner.EventStarted:
			w.log.Info("attempt running", "driver", k.driver, "attempt", k.attempt, "run", e.Run, "pid", e.PID)
			w.report(fsm.AttemptReport{DriverID: k.driver, Attempt: k.attempt, State: fsm.DriverRunning, Runs: e.Run})
		case runner.EventExited:
			if e.Code != nil {
				w.log.Info("program exited", "driver", k.driver, "attempt", k.attempt, "run", e.Run, "code", *e.Code)
			}
		case runner.EventFinal:
			final = &e
		}
	}
	// A scan error leaves the pipe unread; drain it so the runner can exit.
	_, _ = io.Copy(io.Discard, events)
	waitErr := at.cmd.Wait()
	at.stdin.Close()

	r := fsm.AttemptReport{DriverID: k.driver, Attempt: k.attempt}
	lost := false
	if final == nil {
		// The event was lost (the runner died mid-line): the status
		// file, written before the event, may still have it.
		if st, err := runner.ReadStatus(at.dir); err == nil && st.State.Terminal() {
			final = &runner.Event{State: st.State, ExitCode: st.ExitCode, Runs: st.Runs, Reason: st.Reason}
		} else {
			lost = true
			r.State = fsm.DriverError
			r.Runs = st.Runs
			r.Reason = fmt.Sprintf("runner ended without a final state (%v); see %s", waitErrText(waitErr), filepath.Join(at.dir, runnerLogFile))
		}
	}
	if final != nil {
		r.State, r.ExitCode, r.Runs, r.Reason = final.State, final.ExitCode, final.Runs, final.Reason
	}
	w.mu.Lock()
	// A runner told to stop that died before it could say so (SIGTERM
	// before its handler was set) was still killed.
	if at.killReason != "" && (r.State == fsm.DriverKilled || lost) {
		r.State, r.Reason = fsm.DriverKilled, at.killReason
	}
	at.ended = true
	w.queue(r)
	w.mu.Unlock()
	w.log.Info("attempt ended", "driver", k.driver, "attempt", k.attempt, "state", r.State, "runs", r.Runs, "reason", r.Reason)
}

func waitErrText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}
