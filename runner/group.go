package runner

import (
	"errors"
	"syscall"
	"time"
)

// pollInterval is how often endGroup checks whether the group has emptied:
// the kernel gives no notice when the last member of a process group dies.
const pollInterval = 10 * time.Millisecond

// killGrace bounds the wait for the rest of the group after SIGKILL, so that
// a process stuck in the kernel cannot keep the runner from reporting.
const killGrace = 5 * time.Second

// endGroup returns once p is reaped and no process of its group remains. It
// sends SIGTERM to the group (unless p exited leaving nothing behind),
// SIGKILL once the spec's kill timeout has passed, and reaps the group's
// orphans, which the runner inherits as child subreaper. Killing the group
// rather than p alone is what makes a kill complete: a shell's children
// would otherwise run on. hard skips SIGTERM's grace (strict fencing).
func (r *runner) endGroup(p *proc, hard bool) {
	waited := p.waited
	select {
	case <-waited:
		waited = nil
		reapGroup(p.pgid)
		if !groupAlive(p.pgid) {
			return
		}
	default:
	}
	grace := r.spec.KillTimeout
	if hard {
		grace = 0
	}
	signalGroup(p.pgid, syscall.SIGTERM)
	kill := time.NewTimer(grace)
	defer kill.Stop()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	var giveUp <-chan time.Time
	gaveUp := false
	for {
		// Reaping by group before cmd.Wait has reaped p could steal p's
		// exit status, so the orphans wait until p is gone.
		if waited == nil {
			reapGroup(p.pgid)
			if gaveUp || !groupAlive(p.pgid) {
				return
			}
		}
		select {
		case <-waited:
			waited = nil
		case <-kill.C:
			r.log.Warn("program group still alive after SIGTERM, sending SIGKILL", "pgid", p.pgid, "grace", grace)
			signalGroup(p.pgid, syscall.SIGKILL)
			giveUp = time.After(killGrace)
		case <-giveUp:
			r.log.Error("processes of the program group survive SIGKILL", "pgid", p.pgid)
			gaveUp = true
			giveUp = nil
		case <-tick.C:
		}
	}
}

func signalGroup(pgid int, sig syscall.Signal) {
	_ = syscall.Kill(-pgid, sig)
}

// groupAlive reports whether any process (a zombie included) is in group
// pgid. EPERM means one exists that the runner may not signal.
func groupAlive(pgid int) bool {
	return !errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
}

// reapGroup collects every exited child of the runner in group pgid.
func reapGroup(pgid int) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-pgid, &ws, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
	}
}
