// Package runner is the supervisor of one driver attempt, run as its own
// small process ("drover runner --dir ATTEMPT_DIR") by the worker daemon. It
// plays the part of Spark's DriverRunner: it launches the user's program,
// relaunches it with back-off when it is supervised and fails
// (runCommandWithRetry), and kills it on request. Being a separate process
// keeps the worker daemon free of fork/exec and wait bookkeeping, and gives
// every attempt one owner that outlives nothing: the runner ends its
// program's whole process group before it exits, and with isolation
// (Spec.Cgroup) every process of the unit's cgroup, those that left the
// group included. The runner stays outside that cgroup, so a program
// killed at its memory limit leaves the runner to report it.
//
// Before the first run the runner stages the spec's artifacts into the
// program's working directory, ProgramDir in the attempt directory
// (package artifact, through the worker's cache), as DriverRunner
// downloads the user's jar; status.json says Staging meanwhile, each
// change of a failing staging (a download's failed try, a failed staging
// and its back-off) is its reason and an EventStaging, and a stop cancels
// the staging at once.
//
// The program runs as the user the spec names (Spec.RunAs), owner of its
// working directory and of nothing else in the attempt directory: the
// runner's files there (the spec, the status, the logs) stay the runner's,
// written where the program cannot plant a link. The runner makes itself
// non-dumpable first, so that no process of its user reads its memory,
// environment or descriptors, and takes the worker's credential from an
// inherited descriptor (Staging.CredentialFD), never from its environment.
//
// The worker talks to a runner through the attempt directory (SpecFile in,
// StatusFile and the program's output out), through the runner's stdout (a
// stream of Event lines, best-effort: StatusFile is the truth), through
// SIGTERM (kill the attempt) and through the worker's lease file (Spec's
// LeaseFile), whose renewals tell the runner its worker still lives and
// which names the daemon holding it (LeaseContent). The runner outlives
// its daemon only when the daemon detaches on purpose (an upgrade): its
// program then runs on for up to the lease, and a worker restarted in time
// adopts it (as Nomad's client reattaches to its executors). A daemon that
// dies without detaching takes its programs with it at once, as Spark's
// WorkerWatcher ends a driver whose worker is gone, so that the leader may
// relaunch them as soon as it learns of the death.
package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/worker/artifact"
	"github.com/drover-project/drover/worker/isolation"
	"github.com/drover-project/drover/worker/unitdir"
)

// Main runs the hidden "runner" subcommand; args are the arguments after it
// (--dir ATTEMPT_DIR). It returns the process exit code: 0 once the attempt
// reached a final state and said so, 1 when the spec could not be read (a
// final ERROR event is still written), 2 on a usage error.
func Main(args []string) int {
	fs := pflag.NewFlagSet("runner", pflag.ContinueOnError)
	dir := fs.String("dir", "", "attempt directory holding "+unitdir.SpecFile)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dir == "" || fs.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: drover runner --dir ATTEMPT_DIR")
		return 2
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "runner:", err)
		return 2
	}

	// Without a handler, a write to a closed stdout (the worker died) would
	// kill the runner with SIGPIPE, and a hang-up of the terminal the worker
	// was started from with SIGHUP: the program would then run on with
	// nobody to end it. Handled, the write fails with EPIPE (events are
	// best-effort) and the hang-up is ignored. Notify rather than Ignore: an
	// ignored signal stays ignored in the program the runner execs.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE, syscall.SIGHUP)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR2)
	// One value from each of the three senders at most: the stop file,
	// the signal watcher and the lease watcher.
	stop := make(chan string, 3)
	go func() {
		if s := <-sigs; s == syscall.SIGUSR2 {
			stop <- unitdir.ReasonFenced
			return
		}
		stop <- unitdir.ReasonKilled
	}()
	// A stop the worker asked for before the handler above was in place
	// came as a signal nobody heard.
	if reason, ok := unitdir.StopRequested(abs); ok {
		stop <- reason
	}

	r := &runner{
		dir:    abs,
		work:   filepath.Join(abs, unitdir.ProgramDir),
		events: json.NewEncoder(os.Stdout),
		log:    slog.New(slog.NewTextHandler(os.Stderr, nil)).With("dir", abs),
		stop:   stop,
	}
	r.status.RunnerPID = os.Getpid()
	// Before the runner holds anything of its worker's: a dumpable
	// process's /proc/PID/environ, mem and fd, and ptrace, are open to
	// every process of its user, the program's included when the worker
	// runs programs as itself. Not dumpable, they are root's. The program
	// is dumpable again once it execs, as any program of its user is.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		r.final(model.DriverError, nil, "cannot make the runner non-dumpable: "+oneLine(err))
		return 1
	}
	spec, err := unitdir.ReadSpec(abs)
	if err != nil {
		r.final(model.DriverError, nil, "cannot read attempt spec: "+oneLine(err))
		return 1
	}
	spec.ApplyDefaults()
	r.spec = spec
	if st := spec.Staging; st != nil && st.CredentialFD > 0 {
		if r.credential, err = readCredential(st.CredentialFD); err != nil {
			r.final(model.DriverError, nil, "cannot read the worker's credential: "+oneLine(err))
			return 1
		}
	}
	r.status.Tethered = spec.LeaseFile != ""
	if spec.Cgroup != nil {
		ref, err := isolation.ParseRef(spec.Cgroup)
		if err == nil {
			r.cg, err = isolation.Open(ref)
		}
		if err != nil {
			r.final(model.DriverError, nil, "cannot open the unit's cgroup: "+oneLine(err))
			return 1
		}
	}
	if err := makeProgramDir(r.work, spec.RunAs); err != nil {
		r.final(model.DriverError, nil, "cannot make the program's directory: "+oneLine(err))
		return 1
	}
	if spec.LeaseFile != "" {
		go watchLease(spec.LeaseFile, spec.Lease, stop)
	}
	becomeSubreaper()
	r.run()
	return 0
}

type runner struct {
	// dir is the attempt directory, work the program's (ProgramDir).
	dir, work string
	spec      unitdir.Spec
	// credential is the worker's token for the masters
	// (Staging.CredentialFD), "" without one.
	credential string
	events     *json.Encoder
	log        *slog.Logger
	// stop yields the reason to kill the attempt; the first value wins.
	stop   <-chan string
	status unitdir.Status
	// root is the attempt directory, stdout and stderr the streams' log
	// files in it, opened at the first launch.
	root           *os.Root
	stdout, stderr *rotator
	// staged pins the cache entries of the staged artifacts while the
	// attempt lives.
	staged *artifact.Staged
	// cg is the unit's cgroup (Spec.Cgroup), nil without isolation.
	cg *isolation.Cgroup
	// progressMu serializes the staging's progress (progress), which the
	// artifacts' fetches report from their goroutines.
	progressMu sync.Mutex
}

// drainGrace bounds how long a run's output is still copied once its
// process group is gone. Only a process that left the group (setsid) can
// hold the pipes open so long; what it writes afterwards is lost.
const drainGrace = 2 * time.Second

// copyBufferSize is the buffer of each stream's copy: a pipe's capacity, so
// that one read takes whatever the program wrote since the last.
const copyBufferSize = 64 << 10

// run stages the artifacts, then launches the program until the attempt
// reaches a final state, which it records. It follows Spark's
// DriverRunner: downloadUserJar, then runCommandWithRetry.
func (r *runner) run() {
	defer r.closeOutput()
	defer r.removeCgroup()
	if len(r.spec.Artifacts) > 0 {
		if !r.stage() {
			return
		}
		defer r.staged.Release()
	}
	backoff := r.spec.BackoffBase
	inARow := 0
	for n := 1; ; n++ {
		if reason, ok := r.stopped(); ok {
			r.final(model.DriverKilled, nil, reason)
			return
		}
		p, err := r.start(n)
		if err != nil {
			r.final(model.DriverError, nil, oneLine(err))
			return
		}
		began := time.Now()
		code, reason := r.wait(p)
		r.status.PID = 0
		r.status.ExitCode = &code
		failure := r.measure(p)
		r.emit(unitdir.Event{Event: unitdir.EventExited, Run: n, Code: &code})
		switch {
		case reason != "":
			r.final(model.DriverKilled, &code, reason)
			return
		case code == 0:
			r.final(model.DriverFinished, &code, "")
			return
		case !r.spec.Supervise:
			r.final(model.DriverFailed, &code, failure)
			return
		}
		inARow++
		if reason, ok := r.bounded(time.Now(), inARow, failure); ok {
			r.final(model.DriverFailed, &code, reason)
			return
		}
		if time.Since(began) > r.spec.StableRun {
			backoff = r.spec.BackoffBase
		}
		r.status.Reason = failure + "; relaunching in " + backoff.String()
		r.writeStatus()
		r.log.Info("program failed, relaunching", "run", n, "code", code, "backoff", backoff)
		if reason, ok := r.pause(backoff); ok {
			r.final(model.DriverKilled, nil, reason)
			return
		}
		if reason, ok := r.awaitContact(n, failure); ok {
			r.final(model.DriverKilled, nil, reason)
			return
		}
		backoff = min(backoff*2, r.spec.BackoffMax)
	}
}

// awaitContact holds the relaunch after run n, whose end failure
// describes, until the lease file shows a leader contact since now
// (Spec.RelaunchAfterContact), or returns early with the reason of a
// stop. Contact is compared on the wall clock, the only one the worker
// and the runner share: a step back of the clock while a relaunch waits
// delays it by the step.
func (r *runner) awaitContact(n int, failure string) (string, bool) {
	if !r.spec.RelaunchAfterContact {
		return "", false
	}
	due := time.Now().UnixMilli()
	r.status.Reason = failure + "; relaunch waits for a leader to answer the worker"
	r.writeStatus()
	r.emit(unitdir.Event{Event: unitdir.EventRelaunchDue, Run: n})
	tick := time.NewTicker(leasePoll(r.spec.Lease))
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			if unitdir.ReadLease(r.spec.LeaseFile).LeaderContact >= due {
				return "", false
			}
		case reason := <-r.stop:
			return reason, true
		}
	}
}

// bounded records a failed run that ended at now, the inARow-th of this
// attempt, and says whether the restart bounds end the attempt, and why:
// more than MaxRestarts failed runs within RestartWindow, counting the
// earlier attempts' (YARN's maxAppAttempts within
// attemptFailuresValidityInterval), or RescheduleAfter failed runs in a
// row here (Nomad's restart attempts, then reschedule), which sets
// Reschedule. last describes the run's end.
func (r *runner) bounded(now time.Time, inARow int, last string) (string, bool) {
	kept := model.FailuresKept(r.spec.MaxRestarts, r.spec.RescheduleAfter)
	if kept == 0 {
		return "", false
	}
	at := now.UnixMilli()
	r.status.Failures = model.KeepFailures(append(r.status.Failures, at), kept)
	if limit := r.spec.MaxRestarts; limit > 0 {
		all := model.KeepFailures(append(slices.Clone(r.spec.Failures), r.status.Failures...), limit+1)
		window := r.spec.RestartWindow.Milliseconds()
		if n := model.FailuresInWindow(all, at, window); n > limit {
			counted := all[len(all)-n:]
			within := ""
			if window > 0 {
				within = " within " + r.spec.RestartWindow.String()
			}
			took := time.Duration(at-counted[0]) * time.Millisecond
			return fmt.Sprintf("%d runs failed in %s, more than the %d restarts allowed%s; the last %s", n, took, limit, within, last), true
		}
	}
	if k := r.spec.RescheduleAfter; k > 0 && inARow >= k {
		r.status.Reschedule = true
		return fmt.Sprintf("%d runs failed in a row on this worker (reschedule after %d); the last %s", inARow, k, last), true
	}
	return "", false
}

// stopped returns the reason of a stop asked for so far, if any.
func (r *runner) stopped() (string, bool) {
	select {
	case reason := <-r.stop:
		return reason, true
	default:
	}
	// The signal watcher may not have passed a signal on yet: the file
	// says it at once.
	return unitdir.StopRequested(r.dir)
}

// pause waits d, or returns early with the reason of a stop.
func (r *runner) pause(d time.Duration) (string, bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return "", false
	case reason := <-r.stop:
		return reason, true
	}
}

// readCredential reads the credential from the inherited descriptor fd,
// up to MaxCredential bytes, and closes it.
func readCredential(fd int) (string, error) {
	f := os.NewFile(uintptr(fd), "credential")
	if f == nil {
		return "", fmt.Errorf("descriptor %d is not open", fd)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, unitdir.MaxCredential+1))
	switch {
	case err != nil:
		return "", err
	case len(b) > unitdir.MaxCredential:
		return "", fmt.Errorf("longer than %d bytes", unitdir.MaxCredential)
	}
	return strings.TrimSpace(string(b)), nil
}

// makeProgramDir makes dir, the program's working directory, 0700 and,
// with id, owned by that user. Its parent is the attempt directory, which
// only the worker's user may write, so nothing can stand at dir but what
// this makes.
func makeProgramDir(dir string, id *unitdir.Identity) error {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	if id == nil {
		return nil
	}
	return os.Lchown(dir, int(id.UID), int(id.GID))
}

// stage stages the spec's artifacts into the program's directory, and
// reports whether the program may start; when not, the final state is
// recorded: FAILED with the staging's one-line reason, or KILLED when a
// stop came (which cancels a staging at once). A supervised attempt
// stages again after the back-off, as it relaunches a failed run, until
// it succeeds or is stopped. Status says Staging meanwhile, with the last
// failure as its reason.
func (r *runner) stage() bool {
	stager, err := r.stager()
	if err != nil {
		r.final(model.DriverError, nil, "cannot stage artifacts: "+oneLine(err))
		return false
	}
	backoff := r.spec.BackoffBase
	for try := 1; ; try++ {
		if reason, ok := r.stopped(); ok {
			r.final(model.DriverKilled, nil, reason)
			return false
		}
		r.status.State, r.status.Staging = model.DriverSubmitted, true
		r.writeStatus()
		began := time.Now()
		staged, reason, err := r.stageOnce(stager)
		switch {
		case reason != "":
			r.final(model.DriverKilled, nil, reason)
			return false
		case err == nil:
			r.staged = staged
			r.status.Staging, r.status.Reason = false, ""
			r.log.Info("artifacts staged", "artifacts", len(r.spec.Artifacts), "fetched", staged.Fetched, "took", time.Since(began))
			r.emit(unitdir.Event{Event: unitdir.EventStaged, Fetched: staged.Fetched})
			return true
		case !r.spec.Supervise:
			r.final(model.DriverFailed, nil, oneLine(err))
			return false
		}
		// A failed staging is a failed run of the attempt to the restart
		// bounds: a URL that never answers must not keep a bounded
		// driver waiting for ever.
		if reason, ok := r.bounded(time.Now(), try, "staging failed: "+oneLine(err)); ok {
			r.final(model.DriverFailed, nil, reason)
			return false
		}
		r.progress(oneLine(err) + "; staging again in " + backoff.String())
		r.log.Warn("staging failed, trying again", "try", try, "err", err, "backoff", backoff)
		if reason, ok := r.pause(backoff); ok {
			r.final(model.DriverKilled, nil, reason)
			return false
		}
		backoff = min(backoff*2, r.spec.BackoffMax)
	}
}

// progress makes detail what the staging says now: the status's reason,
// and an EventStaging, which the worker passes on to the leader. Only a
// change is written and told, so a worker's reports, and the leader's
// entries, follow the changes: each failed try of a download, at least
// the fetch's retry pause apart (1 s doubling to 30 s), and each failed
// staging of a supervised attempt, at least its back-off apart. A line
// longer than model.MaxStagingReason is cut to it.
func (r *runner) progress(detail string) {
	if len(detail) > model.MaxStagingReason {
		detail = strings.ToValidUTF8(detail[:model.MaxStagingReason-len("...")], "") + "..."
	}
	r.progressMu.Lock()
	defer r.progressMu.Unlock()
	if detail == r.status.Reason {
		return
	}
	r.status.Reason = detail
	r.writeStatus()
	r.emit(unitdir.Event{Event: unitdir.EventStaging, Reason: detail})
}

// stageOnce runs one staging, cancelled by a stop, whose reason it then
// returns.
func (r *runner) stageOnce(s *artifact.Stager) (*artifact.Staged, string, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		staged *artifact.Staged
		err    error
	}
	done := make(chan result, 1)
	go func() {
		st, err := s.Stage(ctx, r.work, r.spec.Artifacts)
		done <- result{st, err}
	}()
	select {
	case res := <-done:
		return res.staged, "", res.err
	case reason := <-r.stop:
		cancel()
		// Stage returns at once, having removed what it made.
		res := <-done
		res.staged.Release()
		return nil, reason, nil
	}
}

// stager is the Stager of the spec's Staging: the worker's cache, and,
// for uploads, a client of the masters with the worker's TLS files and
// its credential. The tree is built in the attempt directory, which the
// program's user cannot write, and given to that user, whose rights
// open file:// artifacts.
func (r *runner) stager() (*artifact.Stager, error) {
	st := r.spec.Staging
	cache, err := artifact.OpenCache(st.CacheDir)
	if err != nil {
		return nil, err
	}
	s := &artifact.Stager{
		Cache:   cache,
		Limits:  st.ArtifactLimits,
		HTTP:    artifact.NewHTTPClient(st.BindIP),
		Scratch: r.dir,
		Log:     r.log,
		OnRetry: func(rt artifact.Retry) { r.progress(rt.String()) },
	}
	if id := r.spec.RunAs; id != nil {
		s.Owner = &artifact.Owner{Name: id.Name, UID: int(id.UID), GID: int(id.GID)}
		for _, g := range id.Groups {
			s.Owner.Groups = append(s.Owner.Groups, int(g))
		}
	}
	if len(st.Masters) > 0 {
		opts, err := client.SecureOptions(st.TLSCA, st.TLSCert, st.TLSKey, "")
		if err != nil {
			return nil, err
		}
		// The worker's, whatever the runner's environment says.
		opts.Token = r.credential
		opts.BindIP = st.BindIP
		c, err := client.New(st.Masters, opts)
		if err != nil {
			return nil, err
		}
		s.Blobs = c
	}
	return s, nil
}

// proc is one run of the program.
type proc struct {
	cmd  *exec.Cmd
	pgid int
	// waited is closed once cmd.Wait has reaped the process; its exit
	// status is then in cmd.ProcessState.
	waited chan struct{}
	// pipes are the read ends of the run's stdout and stderr; copied is
	// done once both are copied to their end.
	pipes  [2]*os.File
	copied sync.WaitGroup
	// oomKills is the unit's cgroup's count of out-of-memory kills when
	// the run started.
	oomKills uint64
}

// start launches run n.
func (r *runner) start(n int) (*proc, error) {
	path, err := r.lookPath(r.spec.Argv[0])
	if err != nil {
		return nil, r.notStarted(err)
	}
	if err := r.openOutput(); err != nil {
		return nil, err
	}
	// The program writes into pipes rather than into the files, so that
	// the runner can rotate them under it.
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd := &exec.Cmd{
		Path: path,
		Args: r.spec.Argv,
		// DROVER_RUN numbers the runs of one attempt, so an application
		// the program registers is tied to this run: when a supervised
		// program is restarted in place, the master ends the apps of
		// the runs before.
		Env:    append(append([]string(nil), r.spec.Env...), "DROVER_RUN="+strconv.Itoa(n)),
		Dir:    r.work,
		Stdout: outW,
		Stderr: errW,
		// Its own group, so a kill reaches everything it spawned and
		// nothing else; with isolation its cgroup also reaches what
		// left the group. Its user's credentials, set after the fork.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Credential: credential(r.spec.RunAs)},
	}
	var oomKills uint64
	if r.cg != nil {
		if u, uerr := r.cg.Usage(); uerr == nil {
			oomKills = u.OOMKills
		}
		err = r.cg.Start(cmd)
	} else {
		err = cmd.Start()
	}
	// The program holds the write ends now: its exit ends the copies.
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, fmt.Errorf("cannot start %q: %v", r.spec.Argv[0], rootCause(err))
	}
	p := &proc{cmd: cmd, pgid: cmd.Process.Pid, waited: make(chan struct{}), pipes: [2]*os.File{outR, errR}, oomKills: oomKills}
	p.copied.Add(2)
	go r.copyStream(r.stdout, outR, &p.copied)
	go r.copyStream(r.stderr, errR, &p.copied)
	go func() {
		_ = cmd.Wait() // a non-zero exit is an error too; ProcessState tells
		close(p.waited)
	}()
	r.status.State = model.DriverRunning
	r.status.PID = p.pgid
	r.status.Runs = n
	r.status.Reason = ""
	r.writeStatus()
	r.emit(unitdir.Event{Event: unitdir.EventStarted, PID: p.pgid, Run: n, Failures: r.status.Failures})
	r.log.Info("program started", "run", n, "pid", p.pgid, "argv", r.spec.Argv, "user", userName(r.spec.RunAs))
	return p, nil
}

// wait returns p's exit code once p and every process of its group are gone,
// and the stop reason if a stop ended it.
func (r *runner) wait(p *proc) (code int, reason string) {
	select {
	case <-p.waited:
	case reason = <-r.stop:
		r.log.Info("killing program", "pid", p.pgid, "reason", reason)
	}
	// Either way the group is ended: on a stop to kill the program, on a
	// normal exit so that nothing it left behind outlives its run.
	// Only a kill on request gets the SIGTERM grace. A lapsed lease, a
	// fence or the daemon's death gets none: the lease was the grace, or
	// the leader may relaunch the driver elsewhere any moment.
	hard := reason != "" && reason != unitdir.ReasonKilled
	r.endGroup(p, hard)
	// Everything the run wrote is in the files before its end is told.
	p.drain()
	return p.exitCode(), reason
}

// copyStream copies src, the read end of a run's stdout or stderr, into
// dst until src ends (every writer is gone) or its read deadline passes
// (drain). Bytes that cannot be written (a full disk) are dropped and the
// copy goes on, so that the program never blocks on its output.
func (r *runner) copyStream(dst *rotator, src *os.File, done *sync.WaitGroup) {
	defer done.Done()
	buf := make([]byte, copyBufferSize)
	failing := false
	for {
		n, err := src.Read(buf)
		if n > 0 {
			_, werr := dst.Write(buf[:n])
			if werr != nil && !failing {
				r.log.Error("cannot write the program's output; dropping it until a write succeeds", "stream", dst.stream, "err", werr)
			}
			failing = werr != nil
		}
		if err != nil {
			return
		}
	}
}

// drain waits for p's output to be copied, up to drainGrace, then closes
// p's pipes. The group is gone, so the pipes normally end at once.
func (p *proc) drain() {
	deadline := time.Now().Add(drainGrace)
	for _, f := range p.pipes {
		_ = f.SetReadDeadline(deadline)
	}
	p.copied.Wait()
	for _, f := range p.pipes {
		f.Close()
	}
}

// removeCgroup removes the unit's cgroup once the attempt has ended, and
// with it every process: the cgroup lives as long as its runner (or, when
// the runner dies, until its worker removes it).
func (r *runner) removeCgroup() {
	if r.cg == nil {
		return
	}
	if err := r.cg.Remove(); err != nil {
		r.log.Warn("cannot remove the unit's cgroup; its worker will", "err", err)
	}
}

// measure records what the unit's cgroup measured once run p has ended,
// and returns how p failed, should it have: out of memory when the kernel
// killed a process of the unit at its limit during the run (on v2 that
// ends the whole unit; on v1 the largest process alone, and the run fails
// when its program does), else how the program exited.
func (r *runner) measure(p *proc) string {
	if r.cg == nil {
		return p.describeExit()
	}
	u, err := r.cg.Usage()
	if err != nil {
		r.log.Warn("cannot read the cgroup's accounting", "err", err)
		return p.describeExit()
	}
	r.status.MemoryPeakBytes, r.status.CPUMicros = u.MemoryPeakBytes, u.CPUMicros
	if u.OOMKills > p.oomKills {
		limit := r.cg.MemoryMB()
		r.log.Warn("program killed out of memory", "limit_mb", limit, "kills", u.OOMKills-p.oomKills)
		return isolation.OOMReason(limit)
	}
	return p.describeExit()
}

func (p *proc) exitCode() int {
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return p.cmd.ProcessState.ExitCode()
}

func (p *proc) describeExit() string {
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ok && ws.Signaled() {
		return "killed by signal " + ws.Signal().String()
	}
	return fmt.Sprintf("exited with code %d", p.cmd.ProcessState.ExitCode())
}

// notStarted is the one line that says why lookPath found no program. A
// relative path that is not there says where it was looked for, which a
// submitter who tried it in their own directory does not expect, and how
// a file gets there.
func (r *runner) notStarted(err error) error {
	name := r.spec.Argv[0]
	if strings.Contains(name, "/") && !filepath.IsAbs(name) && errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("cannot start %q: no such file in %s, the working directory a relative program is looked for in; "+
			"stage it there with submit --upload FILE or --artifact URL", name, r.work)
	}
	return fmt.Errorf("cannot start %q: %v", name, rootCause(err))
}

// lookPath resolves the program with exec.LookPath: a bare name in the PATH
// of the program's own environment, a relative path against the program's
// working directory (not the runner's).
func (r *runner) lookPath(name string) (string, error) {
	if strings.Contains(name, "/") {
		if !filepath.IsAbs(name) {
			name = filepath.Join(r.work, name)
		}
		return exec.LookPath(name)
	}
	for _, d := range filepath.SplitList(pathEnv(&r.spec)) {
		// An empty entry would mean the current directory: never search it.
		if d == "" {
			continue
		}
		if p, err := exec.LookPath(filepath.Join(d, name)); err == nil {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

// openOutput opens the streams' log files, once for all the runs.
func (r *runner) openOutput() error {
	if r.root != nil {
		return nil
	}
	root, err := os.OpenRoot(r.dir)
	if err != nil {
		return err
	}
	stdout, err := openRotator(root, unitdir.StdoutFile, r.spec.LogMaxFileSize, r.spec.LogMaxFiles)
	if err != nil {
		root.Close()
		return err
	}
	stderr, err := openRotator(root, unitdir.StderrFile, r.spec.LogMaxFileSize, r.spec.LogMaxFiles)
	if err != nil {
		stdout.Close()
		root.Close()
		return err
	}
	r.root, r.stdout, r.stderr = root, stdout, stderr
	return nil
}

func (r *runner) closeOutput() {
	if r.root == nil {
		return
	}
	r.stdout.Close()
	r.stderr.Close()
	r.root.Close()
}

// final records the attempt's final state in StatusFile, then announces it.
// The order matters: a worker that saw the event may rely on the file.
func (r *runner) final(state model.DriverState, code *int, reason string) {
	r.status.State = state
	r.status.PID = 0
	r.status.ExitCode = code
	r.status.Reason = reason
	r.writeStatus()
	r.emit(unitdir.Event{Event: unitdir.EventFinal, State: state, ExitCode: code, Runs: r.status.Runs, Reason: reason,
		Failures: r.status.Failures, Reschedule: r.status.Reschedule})
	r.log.Info("attempt ended", "state", state, "runs", r.status.Runs, "reason", reason)
}

func (r *runner) writeStatus() {
	r.status.UpdatedAt = time.Now().UnixMilli()
	if err := unitdir.WriteStatus(r.dir, r.status); err != nil {
		r.log.Error("cannot write status", "err", err)
	}
}

func (r *runner) emit(e unitdir.Event) {
	e.Time = time.Now()
	if err := r.events.Encode(e); err != nil {
		// The worker is gone; StatusFile still tells the outcome.
		r.log.Warn("cannot write event", "event", e.Event, "err", err)
	}
}

func rootCause(err error) error {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		err = u
	}
}

func oneLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}
