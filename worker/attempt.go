package worker

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/internal/procid"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/worker/spark/resourcesfile"
	"github.com/drover-project/drover/worker/unitdir"
)

// runnerSubcommand is the hidden drover subcommand that runs runner.Main.
const runnerSubcommand = "runner"

// adoptPoll is how often the worker looks at an adopted unit's status file
// and runner: an adopted runner's events went to the previous worker.
const adoptPoll = 100 * time.Millisecond

// Reasons of KILLED reports the worker makes up from what it finds on disk.
const (
	// reasonEndedWhileDown: a recorded runner had ended, without a final
	// state, when the worker came back.
	reasonEndedWhileDown = "ended while its worker was down"
	// reasonLeftBehind: a unit directory without a record (its final
	// report was acknowledged, or its runner never started).
	reasonLeftBehind = "ended by a restart of its worker"
	// reasonCleanedUp: a unit assigned again after the cleanup removed
	// its directory (see tombstone).
	reasonCleanedUp = "ended long ago; its directory was cleaned up"
)

// unit is one driver attempt or executor this worker started, adopted from
// a previous worker, or found ended on disk. ended and killReason are
// guarded by workerState.mu.
type unit struct {
	key       unitKey
	dir       string
	supervise bool
	// cmd is the runner this worker started; nil for an adopted runner,
	// or when none was started.
	cmd *exec.Cmd
	// events is the read end of the runner's stdout when cmd is set;
	// closing it lets the watcher go without waiting for the runner.
	events io.Closer
	// pid and start name the runner process (see procid.Start); pid is 0
	// when no runner was started.
	pid   int
	start uint64
	// ended: the runner has exited and the final report is queued.
	ended bool
	// killReason says why the worker asked the runner to stop; it replaces
	// the runner's generic reason in the KILLED report.
	killReason string
	// preemptedBy is the namespace a preemption notice the worker acted
	// on took the unit back for; "" without one.
	preemptedBy string
	// cgroup is the unit's cgroup under isolation, as its spec carries
	// it (Isolation's to read); nil without.
	cgroup json.RawMessage
}

func (u *unit) record() record { return newRecord(u.key, u.dir, u.pid, u.start) }

// fenceable says whether strict fencing kills u (see kindInfo.alwaysFenced).
func (u *unit) fenceable() bool { return u.supervise || u.key.kind.info().alwaysFenced }

// reconcile makes the units this worker runs match the leader's desired set
// (Spark's Worker does the same on LaunchDriver / KillDriver and
// LaunchExecutor / KillExecutor messages, here derived from one full set).
// An attempt of a driver starts only once no other attempt of that driver
// runs here, so a relaunch never overlaps the attempt it supersedes; and no
// unit starts while strict fencing holds.
func (rc *reconciler) reconcile(desired []order) {
	want := make(map[unitKey]bool, len(desired))
	latest := map[string]int{}
	for _, o := range desired {
		want[o.key] = true
		if o.key.kind == kindAttempt {
			latest[o.key.id] = max(latest[o.key.id], o.key.n)
		}
	}
	rc.st.mu.Lock()
	defer rc.st.mu.Unlock()
	for k, u := range rc.st.units {
		switch {
		case want[k]:
		case u.ended:
			// Its report stays queued until acknowledged. Should a stale
			// answer assign it again, its directory stops a rerun.
			delete(rc.st.units, k)
		case u.killReason == "":
			u.killReason = "no longer assigned to worker " + rc.cfg.ID
			if n := latest[k.id]; k.kind == kindAttempt && n > k.n {
				u.killReason = fmt.Sprintf("superseded by attempt %d", n)
			}
			rc.log.Info("killing "+k.kind.info().noun, k.attrs("reason", u.killReason)...)
			u.terminate()
		}
	}
	fenced := rc.lease.fencedLocked(time.Now())
	for _, o := range desired {
		if _, ok := rc.st.units[o.key]; ok || rc.driverBusy(o.key) {
			continue
		}
		if fenced {
			rc.log.Warn("not starting "+o.key.kind.info().noun+": no recent contact with a leader", o.key.attrs()...)
			continue
		}
		rc.st.units[o.key] = rc.start(o)
	}
}

// driverBusy says whether k is an attempt of a driver another of whose
// attempts still runs here. Executors never wait: each has an ID of its own.
func (rc *reconciler) driverBusy(k unitKey) bool {
	if k.kind != kindAttempt {
		return false
	}
	for other, u := range rc.st.units {
		if other.kind == k.kind && other.id == k.id && !u.ended {
			return true
		}
	}
	return false
}

// preempt acts on the leader's preemption notices (api.PreemptNotice):
// each live unit noticed for the first time is asked to stop with the
// grace left until its deadline, by this worker's clock, between SIGTERM
// and SIGKILL (unitdir.RequestPreemption), and reports KILLED with the
// preemption's reason. Its cores stay the leader's to free: the unit
// stays in the desired set until its end is committed.
func (rc *reconciler) preempt(notices []api.PreemptNotice) {
	rc.st.mu.Lock()
	defer rc.st.mu.Unlock()
	for _, n := range notices {
		k := attemptKey(n.DriverID, n.Attempt)
		if n.Executor() {
			k = executorKey(n.AppID, n.ExecutorID)
		}
		u, ok := rc.st.units[k]
		if !ok || u.ended || u.preemptedBy != "" {
			continue
		}
		u.preemptedBy = n.By
		if u.killReason != "" {
			// Already being stopped for another reason.
			continue
		}
		u.killReason = model.PreemptedReason(n.By)
		grace := max(time.Until(time.UnixMilli(n.Deadline)), 0)
		rc.log.Info("preempting "+k.kind.info().noun, k.attrs("for", n.By, "grace", grace.Round(time.Millisecond))...)
		if u.dir != "" {
			_ = unitdir.RequestPreemption(u.dir, grace)
		}
		u.signal(syscall.SIGTERM)
	}
}

// preempting names the live units whose preemption notice this worker
// acted on, for the heartbeat (api.HeartbeatRequest.Preempting). Called
// with the workerState's mu held.
func (rc *reconciler) preempting() []model.Preemption {
	var out []model.Preemption
	for k, u := range rc.st.units {
		if u.ended || u.preemptedBy == "" {
			continue
		}
		p := model.Preemption{DriverID: k.id, Attempt: k.n, By: u.preemptedBy}
		if k.kind == kindExecutor {
			p = model.Preemption{AppID: k.id, ExecutorID: k.n, By: u.preemptedBy}
		}
		out = append(out, p)
	}
	return out
}

// killAll asks every live unit's runner to stop, adopted ones included,
// for Close.
func (rc *reconciler) killAll(reason string) {
	rc.st.mu.Lock()
	defer rc.st.mu.Unlock()
	for _, u := range rc.st.units {
		if u.ended {
			continue
		}
		if u.killReason == "" {
			u.killReason = reason
		}
		u.terminate()
	}
}

// terminate asks the runner to stop (unitdir.RequestStop, then SIGTERM),
// which ends the program's process group and reports KILLED. An adopted
// runner is signalled by PID only while its start time still matches, so
// a reused PID is never hit.
func (u *unit) terminate() { u.stop(false, syscall.SIGTERM) }

// fence asks the runner to stop fenced (unitdir.RequestStop, then SIGUSR2):
// under strict fencing it kills the program's group with SIGKILL at once,
// since the leader relaunches the driver (or replaces the executor) after
// lease plus margin, not after the kill timeout.
func (u *unit) fence() { u.stop(true, syscall.SIGUSR2) }

// stop records the stop in the unit's directory before signalling: a
// runner that is not listening yet reads it before it launches anything.
func (u *unit) stop(fenced bool, sig syscall.Signal) {
	if u.dir != "" {
		_ = unitdir.RequestStop(u.dir, fenced)
	}
	u.signal(sig)
}

func (u *unit) signal(sig syscall.Signal) {
	switch {
	case u.cmd != nil:
		_ = u.cmd.Process.Signal(sig)
	case procid.Alive(u.pid, u.start):
		_ = syscall.Kill(u.pid, sig)
	}
}

// start launches o's runner, with the workerState's mu held. A unit that cannot be launched
// comes back ended, its ERROR report (FAILED for an executor) queued; one
// whose user this worker does not run programs as, FAILED.
func (rc *reconciler) start(o order) *unit {
	k := o.key
	u := &unit{key: k}
	end := func(r report) *unit {
		u.ended = true
		rc.st.queue(r)
		rc.log.Warn(k.kind.info().noun+" not started", k.attrs("state", r.state, "reason", r.reason)...)
		return u
	}
	failed := func(reason string) *unit {
		return end(report{key: k, state: model.DriverError, reason: reason})
	}
	if !k.valid() {
		return failed(k.invalid())
	}
	if _, ok := rc.db.tombstone(k); ok {
		// Its directory, which would stop the rerun, was cleaned up.
		return end(report{key: k, state: model.DriverKilled, reason: reasonCleanedUp})
	}
	acct, refused := rc.users.forUnit(o.user, rc.cfg.ID)
	if refused != "" {
		// FAILED without a reschedule, nothing made: any run of it here
		// would be refused alike, and the leader cannot tell which
		// worker would not (docs/security.md, Users).
		return end(report{key: k, state: model.DriverFailed, reason: refused})
	}
	u.dir = k.dir(rc.cfg.WorkDir)
	// Made by earlier workers with other modes, or under a umask, the
	// directories get theirs explicitly.
	mode := rc.users.dirMode()
	if err := makeDirs(filepath.Dir(u.dir), mode); err != nil {
		return failed(fmt.Sprintf("cannot create %s directory: %v", k.kind.info().idAttr, err))
	}
	if err := os.Mkdir(u.dir, mode); err != nil {
		if errors.Is(err, fs.ErrExist) {
			// A unit runs at most once: its directory is left by an
			// earlier run of this worker, with no record to adopt.
			return end(reportFromDisk(k, u.dir, reasonLeftBehind))
		}
		return failed(fmt.Sprintf("cannot create %s directory: %v", k.kind.info().noun, err))
	}
	if err := os.Chmod(u.dir, mode); err != nil {
		return failed(fmt.Sprintf("cannot create %s directory: %v", k.kind.info().noun, err))
	}
	u.supervise = o.supervise
	// Recorded before the runner starts, so that no runner ever runs
	// unknown to the next worker on this work dir (findRunner covers a
	// death between the start and the update below).
	if err := rc.db.put(u.record()); err != nil {
		return failed(fmt.Sprintf("cannot record %s: %v", k.kind.info().noun, err))
	}
	spec := unitdir.Spec{
		Argv:        o.argv,
		Env:         rc.programEnv(o, acct),
		RunAs:       rc.users.identity(acct),
		Supervise:   o.supervise,
		KillTimeout: rc.cfg.KillTimeout,
		BackoffBase: rc.cfg.RestartBackoff,
		BackoffMax:  rc.cfg.RestartBackoffMax,
		LeaseFile:   rc.lease.path,
		Lease:       rc.cfg.Lease,
		// A relaunch waits for a leader's word: it may have moved the
		// driver to another worker while this one was cut off.
		RelaunchAfterContact: o.supervise,

		LogMaxFileSize: rc.cfg.LogMaxFileSize,
		LogMaxFiles:    rc.cfg.LogMaxFiles,

		MaxRestarts:     o.bounds.maxRestarts,
		RestartWindow:   o.bounds.window,
		RescheduleAfter: o.bounds.rescheduleAfter,
		Failures:        o.bounds.failures,
		Resources:       o.resources,
	}
	if len(o.resources) > 0 {
		b, err := resourcesfile.Encode(k.component(), o.resources)
		if err == nil {
			err = unitdir.WriteResources(u.dir, b)
		}
		if err != nil {
			return failed(fmt.Sprintf("cannot write %s resources file: %v", k.kind.info().noun, err))
		}
	}
	credential := ""
	if len(o.artifacts) > 0 {
		spec.Artifacts, spec.Staging = o.artifacts, rc.staging()
		if tok := rc.cfg.mastersToken(); tok != "" {
			spec.Staging.CredentialFD, credential = credentialFD, tok
		}
	}
	if rc.iso != nil {
		cg, err := rc.iso.Create(k.cgroup(), o.memoryMB, o.cores)
		if err != nil {
			return failed(fmt.Sprintf("cannot create %s cgroup: %v", k.kind.info().noun, err))
		}
		u.cgroup, spec.Cgroup = cg, cg
	}
	if err := unitdir.WriteSpec(u.dir, spec); err != nil {
		rc.removeCgroup(u)
		return failed(fmt.Sprintf("cannot write %s spec: %v", k.kind.info().noun, err))
	}
	events, err := rc.launch(u, credential)
	if err != nil {
		rc.removeCgroup(u)
		return failed("cannot start runner: " + err.Error())
	}
	u.pid = u.cmd.Process.Pid
	if u.start, _, err = procid.Start(u.pid); err != nil {
		rc.log.Warn("cannot read the runner's start time; a restarted worker will not adopt it", "pid", u.pid, "err", err)
	}
	if err := rc.db.put(u.record()); err != nil {
		rc.log.Warn("cannot record the runner's PID; a restarted worker will look for it", "pid", u.pid, "err", err)
	}
	rc.log.Info(k.kind.info().noun+" launched", k.attrs("dir", u.dir, "runner_pid", u.pid)...)
	rc.metrics.launches.WithLabelValues(kindLabel[k.kind]).Inc()
	rc.runners.Add(1)
	go rc.watch(u, events)
	return u
}

// reportFromDisk is the report for a unit whose runner is gone and whose
// events nobody saw: the runner's last status when it is final, else KILLED
// with reason. The unit is never run again under the same key.
func reportFromDisk(k unitKey, dir, reason string) report {
	r := report{key: k, state: model.DriverKilled, reason: reason}
	if st, err := unitdir.ReadStatus(dir); err == nil {
		r.runs, r.failures = st.Runs, st.Failures
		if st.State.Terminal() {
			r = statusReport(st)
			r.key = k
		}
	}
	return r
}

// statusReport is the report of a runner's final status, without its
// key.
func statusReport(st unitdir.Status) report {
	return report{state: st.State, exitCode: st.ExitCode, runs: st.Runs, reason: st.Reason, failures: st.Failures, reschedule: st.Reschedule}
}

// adopt takes over the units in the record, for New: a unit whose runner
// still runs is watched through its status file and counts as running; one
// whose runner is gone is reported from its status file (or KILLED,
// reasonEndedWhileDown) and never run again. The reports go out until
// acknowledged, like any other.
func (rc *reconciler) adopt() error {
	recs, err := rc.db.all()
	if err != nil {
		return fmt.Errorf("read the worker record: %w", err)
	}
	rc.st.mu.Lock()
	defer rc.st.mu.Unlock()
	for _, rec := range recs {
		k, ok := rec.key()
		if !ok {
			// Written by a newer worker: its runner ends with the lease.
			rc.log.Warn("ignoring a record of an unknown kind", "kind", rec.Kind, "dir", rec.Dir)
			continue
		}
		u := &unit{key: k, dir: rec.Dir, pid: rec.RunnerPID, start: rec.RunnerStart}
		if u.pid == 0 {
			if u.pid, u.start = findRunner(u.dir); u.pid != 0 {
				if err := rc.db.put(u.record()); err != nil {
					rc.log.Warn("cannot record the runner's PID", k.attrs("err", err)...)
				}
			}
		}
		rc.st.units[k] = u
		spec, specErr := unitdir.ReadSpec(u.dir)
		u.cgroup = spec.Cgroup
		if !procid.Alive(u.pid, u.start) {
			// Whatever its dead runner left in the cgroup goes with it.
			rc.removeCgroup(u)
			u.ended = true
			r := reportFromDisk(k, u.dir, reasonEndedWhileDown)
			rc.st.queue(r)
			rc.log.Info(k.kind.info().noun+" ended while the worker was down", k.attrs("state", r.state, "reason", r.reason)...)
			continue
		}
		// Unknown counts as supervised: strict fencing then errs on the
		// side of killing it.
		u.supervise = specErr != nil || spec.Supervise
		if st, err := unitdir.ReadStatus(u.dir); (err != nil || !st.Tethered) && !rc.untethered {
			rc.untethered = true
			rc.log.Warn("an adopted runner does not end its program when this daemon dies (an older version's); the leader waits for gossip to declare this worker lost until it restarts",
				k.attrs("runner_pid", u.pid)...)
		}
		attrs := k.attrs("runner_pid", u.pid)
		if u.cgroup != nil && rc.cfg.Isolation != nil {
			attrs = append(attrs, "cgroup", rc.cfg.Isolation.CgroupPath(u.cgroup))
		}
		rc.log.Info("adopted "+k.kind.info().noun, attrs...)
		rc.runners.Add(1)
		go rc.follow(u)
	}
	return nil
}

// follow watches an adopted runner through its status file and its
// process, reporting each change of its staging's progress, RUNNING for
// each launch it had not reported and the final state, until the runner
// is gone or the worker lets go of it (quit).
func (rc *reconciler) follow(u *unit) {
	defer rc.runners.Done()
	k := u.key
	tick := time.NewTicker(adoptPoll)
	defer tick.Stop()
	reported := 0
	staging := ""
	for {
		st, err := unitdir.ReadStatus(u.dir)
		switch {
		case err == nil && st.State.Terminal():
			// Written once the program's group is gone.
			rc.finish(u, statusReport(st), false)
			return
		case err == nil && st.Staging && st.Reason != "" && st.Reason != staging:
			staging = st.Reason
			rc.st.report(report{key: k, state: model.DriverSubmitted, reason: st.Reason, staging: true})
		case err == nil && st.State == model.DriverRunning && st.Runs > reported:
			reported = st.Runs
			rc.log.Info(k.kind.info().noun+" running", k.attrs("run", st.Runs, "pid", st.PID)...)
			rc.st.report(report{key: k, state: model.DriverRunning, runs: st.Runs, failures: st.Failures})
		}
		if !procid.Alive(u.pid, u.start) {
			// The runner writes its final status before it exits, so
			// look once more before calling the end lost.
			if st, err := unitdir.ReadStatus(u.dir); err == nil && st.State.Terminal() {
				rc.finish(u, statusReport(st), false)
			} else {
				rc.finish(u, report{state: model.DriverError, runs: st.Runs, failures: st.Failures,
					reason: "runner ended without a final state; see " + filepath.Join(u.dir, unitdir.LogFile)}, true)
			}
			return
		}
		select {
		case <-rc.quit:
			return
		case <-tick.C:
		}
	}
}

// credentialFD is the descriptor the runner inherits the worker's
// credential on (unitdir.Staging.CredentialFD): the first after stdin,
// stdout and stderr, as exec.Cmd.ExtraFiles numbers them.
const credentialFD = 3

// launch starts the runner of u and returns its event stream. The runner
// gets no stdin: it learns that its worker lives from the lease file alone.
// A credential ("" for none) goes to it through a pipe, never through its
// environment or a file: a pipe's bytes are gone once read, and the
// runner reads them before it starts anything.
func (rc *reconciler) launch(u *unit, credential string) (io.ReadCloser, error) {
	logFile, err := os.OpenFile(filepath.Join(u.dir, unitdir.LogFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(rc.cfg.RunnerCommand, runnerSubcommand, "--dir", u.dir)
	cmd.Dir = u.dir
	cmd.Env = runnerEnv()
	cmd.Stderr = logFile
	if credential != "" {
		r, err := credentialPipe(credential)
		if err != nil {
			return nil, err
		}
		defer r.Close()
		cmd.ExtraFiles = []*os.File{r}
	}
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
	u.cmd, u.events = cmd, events
	return events, nil
}

// credentialPipe returns the read end of a pipe that holds credential
// and then ends. A credential is at most unitdir.MaxCredential bytes
// (Config.validate), well within a pipe's buffer, so the write never
// waits for the reader.
func credentialPipe(credential string) (*os.File, error) {
	r, wr, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	_, err = wr.WriteString(credential)
	if cerr := wr.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// runnerEnv is the runner's own environment (the program's is the
// spec's): the worker's without its DROVER_ variables, which may hold
// the worker's secrets (DROVER_OPERATOR_TOKEN, DROVER_GOSSIP_KEY, ...)
// and of which the runner needs none.
func runnerEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "DROVER_") })
}

// watch follows the events of a runner this worker started until it
// exits, reporting each change of its staging's progress, RUNNING on each
// launch and the final state once the runner is gone. When the worker
// lets go of the runner (Detach) it returns at the end of the events
// without waiting: the runner lives on.
func (rc *reconciler) watch(u *unit, events io.Reader) {
	defer rc.runners.Done()
	k := u.key
	var final *unitdir.Event
	sc := bufio.NewScanner(events)
	for sc.Scan() {
		var e unitdir.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			rc.log.Warn("bad runner event", k.attrs("line", sc.Text())...)
			continue
		}
		switch e.Event {
		case unitdir.EventStarted:
			rc.log.Info(k.kind.info().noun+" running", k.attrs("run", e.Run, "pid", e.PID)...)
			if e.Run > 1 {
				rc.metrics.restarts.Inc()
			}
			rc.st.report(report{key: k, state: model.DriverRunning, runs: e.Run, failures: e.Failures})
		case unitdir.EventExited:
			if e.Code != nil {
				rc.log.Info("program exited", k.attrs("run", e.Run, "code", *e.Code)...)
			}
		case unitdir.EventStaging:
			rc.log.Info(k.kind.info().noun+" staging", k.attrs("progress", e.Reason)...)
			rc.st.report(report{key: k, state: model.DriverSubmitted, reason: e.Reason, staging: true})
		case unitdir.EventRelaunchDue:
			rc.lease.askForRelaunch()
		case unitdir.EventStaged:
			if e.Fetched > 0 {
				rc.janitor.trimCacheSoon()
			}
		case unitdir.EventFinal:
			final = &e
		}
	}
	// A scan error leaves the pipe unread; drain it so the runner can exit.
	_, _ = io.Copy(io.Discard, events)
	select {
	case <-rc.quit:
		return
	default:
	}
	waitErr := u.cmd.Wait()

	r := report{}
	lost := false
	if final != nil {
		r = report{state: final.State, exitCode: final.ExitCode, runs: final.Runs, reason: final.Reason, failures: final.Failures, reschedule: final.Reschedule}
	} else if st, err := unitdir.ReadStatus(u.dir); err == nil && st.State.Terminal() {
		// The event was lost (the runner died mid-line): the status
		// file, written before the event, has it.
		r = statusReport(st)
	} else {
		lost = true
		r.state = model.DriverError
		r.runs, r.failures = st.Runs, st.Failures
		r.reason = fmt.Sprintf("runner ended without a final state (%v); see %s", waitErrText(waitErr), filepath.Join(u.dir, unitdir.LogFile))
	}
	rc.finish(u, r, lost)
}

// finish marks u ended and queues its final report r (its key filled in
// here). lost says the runner's own word on the end is missing. A runner
// told to stop that ended KILLED, or that died before it could say (SIGTERM
// before its handler was set), was killed for the worker's reason.
func (rc *reconciler) finish(u *unit, r report, lost bool) {
	k := u.key
	r.key = k
	if lost {
		st, _ := unitdir.ReadStatus(u.dir)
		switch {
		case rc.killOrphan(u):
			// The runner died (kill -9) during a run: the program is
			// ended here, if its output pipe's closing did not end it
			// already, and the unit counts as killed, so a supervised
			// driver is relaunched rather than left in ERROR.
			r.state = model.DriverKilled
			r.reason = "its runner died; the program was killed with it"
			rc.log.Warn("runner died, killed its program", k.attrs()...)
		case st.Staging:
			// Died before any program started: killed too, for the
			// same relaunch; what it had fetched is in the cache.
			r.state = model.DriverKilled
			r.reason = "its runner died while staging the artifacts"
			rc.log.Warn("runner died while staging", k.attrs()...)
		}
	}
	rc.removeCgroup(u)
	rc.st.mu.Lock()
	if u.killReason != "" && (r.state == model.DriverKilled || lost) {
		r.state, r.reason = model.DriverKilled, u.killReason
	}
	u.ended = true
	rc.st.queue(r)
	rc.st.mu.Unlock()
	rc.log.Info(k.kind.info().noun+" ended", k.attrs("state", r.state, "runs", r.runs, "reason", r.reason)...)
}

func waitErrText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// killOrphan ends the program a dead runner left behind, and reports
// whether the runner died during a run: its status.json names a live run.
// Under isolation the unit's cgroup holds everything the program started,
// and all of it is killed. Without, the program may be gone already,
// killed by SIGPIPE at its next write into the output pipe its runner no
// longer reads; it leads its own process group, recorded in status.json,
// and is taken for this unit's program only while its working directory
// is still the unit's (unitdir.ProgramDir, or for a runner of an older
// version the unit's directory itself), so a reused PID is never killed.
func (rc *reconciler) killOrphan(u *unit) bool {
	st, err := unitdir.ReadStatus(u.dir)
	live := err == nil && st.PID > 0
	switch {
	case u.cgroup != nil:
		rc.removeCgroup(u)
	case !live:
		return false
	default:
		if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", st.PID)); err != nil || (cwd != u.dir && cwd != filepath.Join(u.dir, unitdir.ProgramDir)) {
			return true
		}
		_ = syscall.Kill(-st.PID, syscall.SIGKILL)
	}
	// Until whoever inherited them has reaped them, so that the report
	// of a killed program comes once it is gone.
	for deadline := time.Now().Add(orphanGrace); live && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if errors.Is(syscall.Kill(-st.PID, 0), syscall.ESRCH) {
			break
		}
	}
	return live
}

// orphanGrace bounds the wait for a dead runner's program to be gone
// after its SIGKILL.
const orphanGrace = 5 * time.Second

// removeCgroup kills whatever is left in u's cgroup and removes it, once
// u has ended or could not start: the cgroup of a unit is never used
// again.
func (rc *reconciler) removeCgroup(u *unit) {
	if u.cgroup == nil || rc.cfg.Isolation == nil {
		return
	}
	if err := rc.cfg.Isolation.DestroyCgroup(u.cgroup, orphanGrace); err != nil {
		rc.log.Warn("cannot remove the cgroup of a unit that ended", u.key.attrs("err", err)...)
	}
}
