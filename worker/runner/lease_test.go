package runner_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/drover-project/drover/internal/procid"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/worker/unitdir"
)

// testLease is short so that the tests wait out several leases quickly, and
// long enough that a loaded machine still renews it in time.
const testLease = 400 * time.Millisecond

// spawnRunner is the "spawn-runner DIR" mode of the test binary: a stand-in
// for a worker daemon that a test kills with SIGKILL. It holds the runner's
// stdin open and reads its events, as the worker did when the runner took
// stdin EOF for its worker's death.
func spawnRunner(dir string) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	log, err := os.Create(filepath.Join(dir, "runner.log"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cmd := exec.Command(self, "runner", "--dir", dir)
	cmd.Stderr = log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stdin.Close()
	events, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(cmd.Process.Pid)
	_, _ = io.Copy(io.Discard, events)
	select {} // until killed
}

// renewer keeps a lease file fresh the way the worker does, by replacing it
// every lease/4, until stopped.
type renewer struct {
	path string
	quit chan struct{}
	done chan struct{}
	once sync.Once
}

// newLeaseFile writes a lease file in a fresh directory and returns its path.
func newLeaseFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "worker.lease")
	if err := os.WriteFile(path, []byte("0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func renew(t *testing.T, path string) *renewer {
	r := &renewer{path: path, quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		tick := time.NewTicker(testLease / 4)
		defer tick.Stop()
		for {
			select {
			case <-r.quit:
				return
			case now := <-tick.C:
				tmp := path + ".tmp"
				err := os.WriteFile(tmp, []byte(strconv.FormatInt(now.UnixMilli(), 10)+"\n"), 0o600)
				if err == nil {
					err = os.Rename(tmp, path)
				}
				if err != nil {
					t.Errorf("renew lease: %v", err)
				}
			}
		}
	}()
	t.Cleanup(r.stop)
	return r
}

// stop ends the renewals; the lease is last renewed before stop returns.
func (r *renewer) stop() {
	r.once.Do(func() { close(r.quit) })
	<-r.done
}

func TestStaleLeaseKillsProgram(t *testing.T) {
	lease := newLeaseFile(t)
	began := time.Now()
	h := startRunner(t, unitdir.Spec{
		Argv:      []string{"/bin/sh", "-c", `sleep 1000 & echo $! > child; wait`},
		LeaseFile: lease,
		Lease:     testLease,
	})
	s := h.next(unitdir.EventStarted)
	child, err := strconv.Atoi(h.waitFile("child"))
	if err != nil {
		t.Fatal(err)
	}
	ex := h.next(unitdir.EventExited)
	e := h.final()
	if e.State != model.DriverKilled || e.Reason != unitdir.LeaseExpiredReason(testLease) {
		t.Fatalf("final = %+v, want KILLED with %q", e, unitdir.LeaseExpiredReason(testLease))
	}
	if lived := ex.Time.Sub(began); lived < testLease {
		t.Fatalf("program killed %v after the runner started, before the lease %v ran out", lived, testLease)
	}
	assertGone(t, "process group", -s.PID)
	assertGone(t, "child sleep", child)
}

func TestFreshLeaseKeepsProgramRunning(t *testing.T) {
	lease := newLeaseFile(t)
	r := renew(t, lease)
	h := startRunner(t, unitdir.Spec{
		Argv:      []string{"/bin/sh", "-c", `exec sleep 1000`},
		LeaseFile: lease,
		Lease:     testLease,
	})
	s := h.next(unitdir.EventStarted)
	select {
	case e := <-h.events:
		t.Fatalf("event %+v while the lease was renewed", e)
	case <-time.After(5 * testLease):
	}
	if err := syscall.Kill(s.PID, 0); err != nil {
		t.Fatalf("program gone while the lease was renewed: %v", err)
	}
	r.stop()
	stopped := time.Now()
	ex := h.next(unitdir.EventExited)
	e := h.final()
	if e.State != model.DriverKilled || e.Reason != unitdir.LeaseExpiredReason(testLease) {
		t.Fatalf("final = %+v after the renewals stopped", e)
	}
	if waited := ex.Time.Sub(stopped); waited < testLease-testLease/4 {
		t.Fatalf("program killed %v after the last renewal, before the lease %v ran out", waited, testLease)
	}
	assertGone(t, "process group", -s.PID)
}

// TestRunnerSurvivesItsStartersSIGKILL: the runner and its program outlive
// the process that started them (a worker killed by SIGKILL, its pipes
// closed) while the lease is renewed, take no SIGHUP, and still end the
// program and record it once the renewals stop, although every event it then
// writes goes to a pipe nobody reads.
func TestRunnerSurvivesItsStartersSIGKILL(t *testing.T) {
	dir := t.TempDir()
	lease := newLeaseFile(t)
	r := renew(t, lease)
	if err := unitdir.WriteSpec(dir, unitdir.Spec{
		Argv:      []string{"/bin/sh", "-c", `echo $$ > pid; exec sleep 1000`},
		LeaseFile: lease,
		Lease:     testLease,
	}); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	starter := exec.Command(self, "spawn-runner", dir)
	starter.Stderr = os.Stderr
	out, err := starter.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := starter.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	runnerPID, perr := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || perr != nil {
		_ = starter.Process.Kill()
		_ = starter.Wait()
		t.Fatalf("starter printed %q: %v %v", line, err, perr)
	}
	h := &harness{t: t, dir: dir}
	t.Cleanup(func() {
		// Whatever happened, leave no runner or program behind.
		_ = syscall.Kill(runnerPID, syscall.SIGKILL)
		if pid, err := strconv.Atoi(strings.TrimSpace(readOr(filepath.Join(dir, "pid")))); err == nil {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
		if t.Failed() {
			t.Logf("runner log:\n%s", readOr(filepath.Join(dir, "runner.log")))
		}
	})
	pid, err := strconv.Atoi(h.waitFile("pid"))
	if err != nil {
		t.Fatal(err)
	}
	if err := starter.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = starter.Wait()
	// A hang-up of the worker's terminal must not end the runner either.
	if err := syscall.Kill(runnerPID, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * testLease) // the program must live through it
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("program gone after its starter's SIGKILL although the lease was renewed: %v", err)
	}
	if st, err := unitdir.ReadStatus(dir); err != nil || st.State != model.DriverRunning || st.PID != pid {
		t.Fatalf("status = %+v, %v; want RUNNING with PID %d", st, err, pid)
	}

	r.stop()
	st := waitStatus(t, dir, func(st unitdir.Status) bool { return st.State.Terminal() })
	if st.State != model.DriverKilled || st.Reason != unitdir.LeaseExpiredReason(testLease) {
		t.Fatalf("status = %+v, want KILLED with %q", st, unitdir.LeaseExpiredReason(testLease))
	}
	assertGone(t, "process group", -pid)
	deadline := time.Now().Add(failSafe)
	for !processEnded(runnerPID) {
		if time.Now().After(deadline) {
			t.Fatalf("runner %d still running after its final status", runnerPID)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitStatus polls dir's StatusFile until cond holds. Polling is the only
// way here: the runner's events go to a dead process.
func waitStatus(t *testing.T, dir string, cond func(unitdir.Status) bool) unitdir.Status {
	t.Helper()
	deadline := time.Now().Add(failSafe)
	for {
		st, err := unitdir.ReadStatus(dir)
		if err == nil && cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("status never reached the expected state; last %+v, %v", st, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// processEnded reports whether pid is gone or a zombie: an orphaned runner's
// new parent may not reap it.
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

func readOr(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// A lapsed lease kills at once: a program that ignores SIGTERM is gone long
// before the kill timeout, so it cannot outlive its worker by more than the
// lease, nor overlap the leader's relaunch.
func TestLeaseExpiryKillsWithoutGrace(t *testing.T) {
	lease := newLeaseFile(t)
	h := startRunner(t, unitdir.Spec{
		Argv:        []string{"/bin/sh", "-c", `trap '' TERM; while :; do sleep 0.05; done`},
		LeaseFile:   lease,
		Lease:       testLease,
		KillTimeout: time.Minute,
	})
	s := h.next(unitdir.EventStarted)
	ex := h.next(unitdir.EventExited)
	if lived := ex.Time.Sub(s.Time); lived > testLease+5*time.Second {
		t.Fatalf("program lived %v, want about the lease %v: no SIGTERM grace", lived, testLease)
	}
	if e := h.final(); e.State != model.DriverKilled || e.Reason != unitdir.LeaseExpiredReason(testLease) {
		t.Fatalf("final = %+v", e)
	}
	assertGone(t, "process group", -s.PID)
}

// startHolder starts a process to stand for the worker daemon a lease file
// names, and returns it with the lease content naming it. It is killed when
// the test ends.
func startHolder(t *testing.T) (*exec.Cmd, unitdir.LeaseContent) {
	t.Helper()
	cmd := exec.Command("sleep", "1000")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killHolder(cmd) })
	start, running, err := procid.Start(cmd.Process.Pid)
	if err != nil || !running {
		t.Fatalf("holder %d: %v (running %v)", cmd.Process.Pid, err, running)
	}
	return cmd, unitdir.LeaseContent{Renewed: time.Now().UnixMilli(), HolderPID: cmd.Process.Pid, HolderStart: start}
}

// killHolder kills a holder with SIGKILL and reaps it; a second call does
// nothing.
func killHolder(cmd *exec.Cmd) {
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
}

// writeLease replaces the lease file at path with c, as a renewal does.
func writeLease(t *testing.T, path string, c unitdir.LeaseContent) {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestHolderDeathKillsProgram: the daemon the lease file names dies without
// detaching, and the runner ends its program at once, long before the
// lease (a minute) could run out.
func TestHolderDeathKillsProgram(t *testing.T) {
	lease := newLeaseFile(t)
	holder, c := startHolder(t)
	writeLease(t, lease, c)
	h := startRunner(t, unitdir.Spec{
		Argv:      []string{"/bin/sh", "-c", `exec sleep 1000`},
		LeaseFile: lease,
		Lease:     time.Minute,
	})
	s := h.next(unitdir.EventStarted)
	killHolder(holder)
	h.next(unitdir.EventExited)
	if e := h.final(); e.State != model.DriverKilled || e.Reason != unitdir.DaemonGoneReason(c.HolderPID) {
		t.Fatalf("final = %+v, want KILLED with %q", e, unitdir.DaemonGoneReason(c.HolderPID))
	}
	assertGone(t, "process group", -s.PID)
}

// TestDetachedHolderLeavesTheLease: a daemon that detached before it died
// leaves the program running until the lease runs out, for the next daemon
// to adopt.
func TestDetachedHolderLeavesTheLease(t *testing.T) {
	lease := newLeaseFile(t)
	holder, c := startHolder(t)
	c.Detached = true
	writeLease(t, lease, c)
	h := startRunner(t, unitdir.Spec{
		Argv:      []string{"/bin/sh", "-c", `exec sleep 1000`},
		LeaseFile: lease,
		Lease:     testLease,
	})
	s := h.next(unitdir.EventStarted)
	killHolder(holder)
	ex := h.next(unitdir.EventExited)
	if e := h.final(); e.State != model.DriverKilled || e.Reason != unitdir.LeaseExpiredReason(testLease) {
		t.Fatalf("final = %+v, want KILLED with %q", e, unitdir.LeaseExpiredReason(testLease))
	}
	// The lease counts from the runner's start at the latest.
	if lived := ex.Time.Sub(s.Time); lived < testLease-testLease/4 {
		t.Fatalf("program killed %v after its start, before the lease %v ran out", lived, testLease)
	}
}

// TestRunnerFollowsTheAdoptingHolder: after a detach, the daemon that
// renews the lease next (adopting the attempt) is the one the runner
// follows: the detached one's death changes nothing, the new one's ends the
// program. The runner knows of the detach from the old daemon's last
// renewal, or, when the new daemon rewrote the file before the runner
// looked, from the new one's naming the detached daemon it succeeds.
func TestRunnerFollowsTheAdoptingHolder(t *testing.T) {
	for _, seen := range []bool{true, false} {
		t.Run(fmt.Sprintf("detached-renewal-seen=%v", seen), func(t *testing.T) {
			old, c := startHolder(t)
			c.Detached = seen
			h, lease := runFollowing(t, c)
			adopter, next := startHolder(t)
			next.SucceedsPID, next.SucceedsStart = c.HolderPID, c.HolderStart
			writeLease(t, lease, next)
			killHolder(old)
			killHolder(adopter)
			h.next(unitdir.EventExited)
			if e := h.final(); e.State != model.DriverKilled || e.Reason != unitdir.DaemonGoneReason(next.HolderPID) {
				t.Fatalf("final = %+v, want KILLED with %q", e, unitdir.DaemonGoneReason(next.HolderPID))
			}
		})
	}
}

// TestNewHolderWithoutDetachKillsProgram: another daemon renews the lease
// while the one the runner followed had not detached (it died and a new one
// started within a poll): the attempt ends all the same, since the leader
// may be relaunching it already.
func TestNewHolderWithoutDetachKillsProgram(t *testing.T) {
	_, c := startHolder(t)
	h, lease := runFollowing(t, c)
	_, next := startHolder(t)
	writeLease(t, lease, next)
	h.next(unitdir.EventExited)
	if e := h.final(); e.State != model.DriverKilled || e.Reason != unitdir.DaemonGoneReason(c.HolderPID) {
		t.Fatalf("final = %+v, want KILLED with %q", e, unitdir.DaemonGoneReason(c.HolderPID))
	}
}

// runFollowing writes c to a new lease file and starts a runner of a long
// program that follows it, with a minute's lease; it returns once the
// program started, with the lease file's path.
func runFollowing(t *testing.T, c unitdir.LeaseContent) (*harness, string) {
	t.Helper()
	lease := newLeaseFile(t)
	writeLease(t, lease, c)
	h := startRunner(t, unitdir.Spec{
		Argv:      []string{"/bin/sh", "-c", `exec sleep 1000`},
		LeaseFile: lease,
		Lease:     time.Minute,
	})
	h.next(unitdir.EventStarted)
	return h, lease
}

// heldRelaunch starts a supervised program that fails its first run and
// finishes its second, relaunched only after contact, with a lease file
// whose last leader contact is an hour old; it returns once the runner
// holds the relaunch.
func heldRelaunch(t *testing.T) (*harness, string, unitdir.Event) {
	t.Helper()
	lease := newLeaseFile(t)
	writeLease(t, lease, unitdir.LeaseContent{Renewed: time.Now().UnixMilli(), LeaderContact: time.Now().Add(-time.Hour).UnixMilli()})
	h := startRunner(t, unitdir.Spec{
		Argv:                 []string{"/bin/sh", "-c", `n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count; [ $n -ge 2 ]`},
		Supervise:            true,
		BackoffBase:          10 * time.Millisecond,
		LeaseFile:            lease,
		Lease:                time.Minute,
		RelaunchAfterContact: true,
	})
	h.next(unitdir.EventStarted)
	h.next(unitdir.EventExited)
	due := h.next(unitdir.EventRelaunchDue)
	if due.Run != 1 {
		t.Fatalf("relaunch due = %+v, want after run 1", due)
	}
	return h, lease, due
}

// TestRelaunchWaitsForLeaderContact: a supervised relaunch waits, past its
// back-off, until the lease file shows a leader contact no earlier than
// the back-off's end; an older contact, however recent the renewal, does
// not release it.
func TestRelaunchWaitsForLeaderContact(t *testing.T) {
	h, lease, due := heldRelaunch(t)
	st := waitStatus(t, h.dir, func(s unitdir.Status) bool { return strings.Contains(s.Reason, "waits for a leader") })
	if st.State != model.DriverRunning || st.PID != 0 {
		t.Fatalf("status while held = %+v, want RUNNING with no live run", st)
	}
	writeLease(t, lease, unitdir.LeaseContent{Renewed: time.Now().UnixMilli(), LeaderContact: due.Time.Add(-time.Second).UnixMilli()})
	select {
	case e := <-h.events:
		t.Fatalf("event %+v with a leader contact from before the back-off ended", e)
	case <-time.After(10 * leasePollFor(time.Minute)):
	}
	contact := time.Now()
	writeLease(t, lease, unitdir.LeaseContent{Renewed: contact.UnixMilli(), LeaderContact: contact.UnixMilli()})
	if s := h.next(unitdir.EventStarted); s.Run != 2 || s.Time.Before(contact) {
		t.Fatalf("started = %+v, want run 2 after the contact at %v", s, contact)
	}
	h.next(unitdir.EventExited)
	if e := h.final(); e.State != model.DriverFinished || e.Runs != 2 {
		t.Fatalf("final = %+v, want FINISHED after 2 runs", e)
	}
}

// TestStopEndsHeldRelaunch: a stop while the relaunch waits for contact
// ends the attempt KILLED without another run.
func TestStopEndsHeldRelaunch(t *testing.T) {
	h, _, _ := heldRelaunch(t)
	if err := h.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if e := h.final(); e.State != model.DriverKilled || e.Runs != 1 || e.Reason != unitdir.ReasonKilled {
		t.Fatalf("final = %+v, want KILLED after 1 run", e)
	}
}

// leasePollFor is the runner's poll of a lease file, for a test to wait a
// few of them.
func leasePollFor(lease time.Duration) time.Duration { return min(lease/10, 100*time.Millisecond) }
