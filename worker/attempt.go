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
	"time"

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

// adoptPoll is how often the worker looks at an adopted attempt's status
// file and runner: an adopted runner's events went to the previous worker.
const adoptPoll = 100 * time.Millisecond

// Reasons of KILLED reports the worker makes up from what it finds on disk.
const (
	// reasonEndedWhileDown: a recorded runner had ended, without a final
	// state, when the worker came back.
	reasonEndedWhileDown = "ended while its worker was down"
	// reasonLeftBehind: an attempt directory without a record (its final
	// report was acknowledged, or its runner never started).
	reasonLeftBehind = "ended by a restart of its worker"
)

type attemptKey struct {
	driver  string
	attempt int
}

// attempt is one driver attempt this worker started, adopted from a
// previous worker, or found ended on disk. ended and killReason are guarded
// by Worker.mu.
type attempt struct {
	key       attemptKey
	dir       string
	supervise bool
	// cmd is the runner this worker started; nil for an adopted runner,
	// or when none was started.
	cmd *exec.Cmd
	// events is the read end of the runner's stdout when cmd is set;
	// closing it lets the watcher go without waiting for the runner.
	events io.Closer
	// pid and start name the runner process (see procStart); pid is 0
	// when no runner was started.
	pid   int
	start uint64
	// ended: the runner has exited and the final report is queued.
	ended bool
	// killReason says why the worker asked the runner to stop; it replaces
	// the runner's generic reason in the KILLED report.
	killReason string
}

func (at *attempt) record() record {
	return record{DriverID: at.key.driver, Attempt: at.key.attempt, Dir: at.dir, RunnerPID: at.pid, RunnerStart: at.start}
}

func attemptDir(workDir, driverID string, n int) string {
	return filepath.Join(workDir, driverID, "attempt-"+strconv.Itoa(n))
}

// reconcile makes the attempts this worker runs match the leader's desired
// set (Spark's Worker does the same on LaunchDriver / KillDriver messages,
// here derived from one full set). An attempt of a driver starts only once
// no other attempt of that driver runs here, so a relaunch never overlaps
// the attempt it supersedes; and none starts while strict fencing holds.
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
	fenced := w.fencedLocked(time.Now())
	for _, a := range as {
		k := attemptKey{a.DriverID, a.Attempt}
		if _, ok := w.attempts[k]; ok || w.driverBusy(a.DriverID) {
			continue
		}
		if fenced {
			w.log.Warn("not starting attempt: no recent contact with a leader", "driver", k.driver, "attempt", k.attempt)
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

// killAll asks every live attempt's runner to stop, adopted ones
// included, for Close.
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
// group and reports KILLED. An adopted runner is signalled by PID only while
// its start time still matches, so a reused PID is never hit.
func (at *attempt) terminate() { at.signal(syscall.SIGTERM) }

// fence sends SIGUSR2 to the runner: under strict fencing it kills the
// program's group with SIGKILL at once, since the leader relaunches the
// driver after lease plus margin, not after the kill timeout.
func (at *attempt) fence() { at.signal(syscall.SIGUSR2) }

func (at *attempt) signal(sig syscall.Signal) {
	switch {
	case at.cmd != nil:
		_ = at.cmd.Process.Signal(sig)
	case runnerAlive(at.pid, at.start):
		_ = syscall.Kill(at.pid, sig)
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
			// An attempt number runs at most once: its directory is left
			// by an earlier run of this worker, with no record to adopt.
			return end(reportFromDisk(k, at.dir, reasonLeftBehind))
		}
		return failed("cannot create attempt directory: " + err.Error())
	}
	at.supervise = a.Supervise
	// Recorded before the runner starts, so that no runner ever runs
	// unknown to the next worker on this work dir (findRunner covers a
	// death between the start and the update below).
	if err := w.db.put(at.record()); err != nil {
		return failed("cannot record attempt: " + err.Error())
	}
	spec := runner.Spec{
		Argv:        a.Argv,
		Env:         w.programEnv(a),
		Supervise:   a.Supervise,
		KillTimeout: w.cfg.KillTimeout,
		BackoffBase: w.cfg.RestartBackoff,
		BackoffMax:  w.cfg.RestartBackoffMax,
		LeaseFile:   w.leasePath,
		Lease:       w.cfg.Lease,
	}
	if err := runner.WriteSpec(at.dir, spec); err != nil {
		return failed("cannot write attempt spec: " + err.Error())
	}
	events, err := w.launch(at)
	if err != nil {
		return failed("cannot start runner: " + err.Error())
	}
	at.pid = at.cmd.Process.Pid
	if at.start, _, err = procStart(at.pid); err != nil {
		w.log.Warn("cannot read the runner's start time; a restarted worker will not adopt it", "pid", at.pid, "err", err)
	}
	if err := w.db.put(at.record()); err != nil {
		w.log.Warn("cannot record the runner's PID; a restarted worker will look for it", "pid", at.pid, "err", err)
	}
	w.log.Info("attempt launched", "driver", k.driver, "attempt", k.attempt, "dir", at.dir, "runner_pid", at.pid)
	w.runners.Add(1)
	go w.watch(at, events)
	return at
}

// reportFromDisk is the report for an attempt whose runner is gone and whose
// events nobody saw: the runner's last status when it is final, else KILLED
// with reason. The attempt is never run again under the same number.
func reportFromDisk(k attemptKey, dir, reason string) fsm.AttemptReport {
	r := fsm.AttemptReport{DriverID: k.driver, Attempt: k.attempt, State: fsm.DriverKilled, Reason: reason}
	if st, err := runner.ReadStatus(dir); err == nil {
		r.Runs = st.Runs
		if st.State.Terminal() {
			r.State, r.ExitCode, r.Reason = st.State, st.ExitCode, st.Reason
		}
	}
	return r
}

// adopt takes over the attempts in the record, for New: an attempt whose
// runner still runs is watched through its status file and counts as
// running; one whose runner is gone is reported from its status file (or
// KILLED, reasonEndedWhileDown) and never run again. The reports go out
// until acknowledged, like any other.
func (w *Worker) adopt() error {
	recs, err := w.db.all()
	if err != nil {
		return fmt.Errorf("read the worker record: %w", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, rec := range recs {
		k := attemptKey{rec.DriverID, rec.Attempt}
		at := &attempt{key: k, dir: rec.Dir, pid: rec.RunnerPID, start: rec.RunnerStart}
		if at.pid == 0 {
			if at.pid, at.start = findRunner(at.dir); at.pid != 0 {
				if err := w.db.put(at.record()); err != nil {
					w.log.Warn("cannot record the runner's PID", "driver", k.driver, "attempt", k.attempt, "err", err)
				}
			}
		}
		w.attempts[k] = at
		if !runnerAlive(at.pid, at.start) {
			at.ended = true
			r := reportFromDisk(k, at.dir, reasonEndedWhileDown)
			w.queue(r)
			w.log.Info("attempt ended while the worker was down", "driver", k.driver, "attempt", k.attempt, "state", r.State, "reason", r.Reason)
			continue
		}
		spec, err := runner.ReadSpec(at.dir)
		// Unknown counts as supervised: strict fencing then errs on the
		// side of killing it.
		at.supervise = err != nil || spec.Supervise
		w.log.Info("adopted attempt", "driver", k.driver, "attempt", k.attempt, "runner_pid", at.pid)
		w.runners.Add(1)
		go w.follow(at)
	}
	return nil
}

// follow watches an adopted runner through its status file and its process,
// reporting RUNNING for each launch it had not reported and the final state,
// until the runner is gone or the worker lets go of it (quit).
func (w *Worker) follow(at *attempt) {
	defer w.runners.Done()
	k := at.key
	tick := time.NewTicker(adoptPoll)
	defer tick.Stop()
	reported := 0
	for {
		st, err := runner.ReadStatus(at.dir)
		switch {
		case err == nil && st.State.Terminal():
			// Written once the program's group is gone.
			w.finish(at, fsm.AttemptReport{State: st.State, ExitCode: st.ExitCode, Runs: st.Runs, Reason: st.Reason}, false)
			return
		case err == nil && st.State == fsm.DriverRunning && st.Runs > reported:
			reported = st.Runs
			w.log.Info("attempt running", "driver", k.driver, "attempt", k.attempt, "run", st.Runs, "pid", st.PID)
			w.report(fsm.AttemptReport{DriverID: k.driver, Attempt: k.attempt, State: fsm.DriverRunning, Runs: st.Runs})
		}
		if !runnerAlive(at.pid, at.start) {
			// The runner writes its final status before it exits, so
			// look once more before calling the end lost.
			if st, err := runner.ReadStatus(at.dir); err == nil && st.State.Terminal() {
				w.finish(at, fsm.AttemptReport{State: st.State, ExitCode: st.ExitCode, Runs: st.Runs, Reason: st.Reason}, false)
			} else {
				w.finish(at, fsm.AttemptReport{State: fsm.DriverError, Runs: st.Runs,
					Reason: "runner ended without a final state; see " + filepath.Join(at.dir, runnerLogFile)}, true)
			}
			return
		}
		select {
		case <-w.quit:
			return
		case <-tick.C:
		}
	}
}

// launch starts the runner of at and returns its event stream. The runner
// gets no stdin: it learns that its worker lives from the lease file alone.
func (w *Worker) launch(at *attempt) (io.ReadCloser, error) {
	logFile, err := os.OpenFile(filepath.Join(at.dir, runnerLogFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(w.cfg.RunnerCommand, runnerSubcommand, "--dir", at.dir)
	cmd.Dir = at.dir
	cmd.Stderr = logFile
	// Its own session: neither a Ctrl-C meant for the daemon nor the
	// hang-up of the daemon's terminal reaches the runners, which must
	// outlive the daemon and which the daemon stops itself.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	events, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		return nil, err
	}
	at.cmd, at.events = cmd, events
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

// watch follows the events of a runner this worker started until it exits,
// reporting RUNNING on each launch and the final state once the runner is
// gone. When the worker lets go of the runner (Detach) it returns at the end
// of the events without waiting: the runner lives on.
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
	select {
	case <-w.quit:
		return
	default:
	}
	waitErr := at.cmd.Wait()

	r := fsm.AttemptReport{}
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
	w.finish(at, r, lost)
}

// finish marks at ended and queues its final report r (its driver and
// attempt filled in here). lost says the runner's own word on the end is
// missing. A runner told to stop that ended KILLED, or that died before it
// could say (SIGTERM before its handler was set), was killed for the
// worker's reason.
func (w *Worker) finish(at *attempt, r fsm.AttemptReport, lost bool) {
	k := at.key
	r.DriverID, r.Attempt = k.driver, k.attempt
	if lost && killOrphan(at.dir) {
		// The runner died (kill -9) with its program still running: the
		// program is ended here, and the attempt counts as killed, so a
		// supervised driver is relaunched rather than left in ERROR.
		r.State = fsm.DriverKilled
		r.Reason = "its runner died; the program was killed with it"
		w.log.Warn("runner died, killed its program", "driver", k.driver, "attempt", k.attempt)
	}
	w.mu.Lock()
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

// killOrphan ends the program a dead runner left behind, and reports
// whether there was one. The program leads its own process group, recorded
// in status.json; it is taken for this attempt's program only while its
// working directory is still the attempt directory, so a reused PID is never
// killed.
func killOrphan(dir string) bool {
	st, err := runner.ReadStatus(dir)
	if err != nil || st.PID <= 0 {
		return false
	}
	if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", st.PID)); err != nil || cwd != dir {
		return false
	}
	_ = syscall.Kill(-st.PID, syscall.SIGKILL)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if errors.Is(syscall.Kill(-st.PID, 0), syscall.ESRCH) {
			break
		}
	}
	return true
}
