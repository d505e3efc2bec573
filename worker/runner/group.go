package runner

import (
	"errors"
	"syscall"
	"time"

	"github.com/drover-project/drover/worker/isolation"
	"github.com/drover-project/drover/worker/unitdir"
)

// pollInterval is how often endGroup checks whether the run's processes
// are gone: the kernel gives no notice when the last member of a process
// group dies.
const pollInterval = 10 * time.Millisecond

// killGrace bounds the wait for the rest of the group after SIGKILL, so that
// a process stuck in the kernel cannot keep the runner from reporting.
const killGrace = 5 * time.Second

// tree is everything a run must end with: the program's process group, or
// with isolation the unit's cgroup, which also holds the descendants that
// left the group (setsid) or double-forked.
type tree struct {
	pgid int
	// cg is the unit's cgroup, nil without isolation.
	cg *isolation.Cgroup
}

// alive says whether any process of the tree remains. In a group a
// zombie counts, so the orphans are reaped first.
func (t tree) alive() bool {
	if t.cg != nil {
		return !t.cg.Empty()
	}
	return !errors.Is(syscall.Kill(-t.pgid, 0), syscall.ESRCH)
}

// terminate asks every process of the tree to end (SIGTERM).
func (t tree) terminate() {
	_ = syscall.Kill(-t.pgid, syscall.SIGTERM)
	if t.cg != nil {
		t.cg.Signal(syscall.SIGTERM)
	}
}

// kill ends every process of the tree (SIGKILL); a cgroup's kill misses
// none that forks meanwhile.
func (t tree) kill() error {
	if t.cg != nil {
		return t.cg.Kill()
	}
	return syscall.Kill(-t.pgid, syscall.SIGKILL)
}

// endGroup returns once p is reaped and no process of its tree remains. It
// sends SIGTERM to the tree (unless p exited leaving nothing behind),
// SIGKILL once the spec's kill timeout has passed, and reaps the orphans,
// which the runner inherits as child subreaper. Killing the tree rather
// than p alone is what makes a kill complete: a shell's children would
// otherwise run on. hard skips SIGTERM's grace (strict fencing).
func (r *runner) endGroup(p *proc, hard bool) {
	t := tree{pgid: p.pgid, cg: r.cg}
	waited := p.waited
	select {
	case <-waited:
		waited = nil
		reapChildren()
		if !t.alive() {
			t.settle()
			return
		}
	default:
	}
	grace := r.spec.KillTimeout
	if g, ok := unitdir.StopGrace(r.dir); ok {
		// A preemption: the masters' grace, not the worker's.
		grace = g
	}
	if hard {
		grace = 0
	}
	t.terminate()
	kill := time.NewTimer(grace)
	defer kill.Stop()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	var giveUp <-chan time.Time
	gaveUp := false
	for {
		// Reaping before cmd.Wait has reaped p could steal p's exit
		// status, so the orphans wait until p is gone.
		if waited == nil {
			reapChildren()
			if gaveUp || !t.alive() {
				t.settle()
				return
			}
		}
		select {
		case <-waited:
			waited = nil
		case <-kill.C:
			r.log.Warn("program still alive after SIGTERM, sending SIGKILL", "pgid", p.pgid, "grace", grace, "cgroup", r.cg != nil)
			if err := t.kill(); err != nil {
				r.log.Error("cannot kill the program", "err", err)
			}
			giveUp = time.After(killGrace)
		case <-giveUp:
			r.log.Error("processes of the program survive SIGKILL", "pgid", p.pgid)
			gaveUp = true
			giveUp = nil
		case <-tick.C:
		}
	}
}

// settle reaps, once a unit's cgroup is empty, the children the runner
// inherited from it: a process leaves its cgroup before it becomes a
// zombie, so the last of them may not be reapable yet. Every child of the
// runner was in the cgroup, so each is dead or dying, and none is waited
// for long; a process group does not bound the descendants that way.
func (t tree) settle() {
	if t.cg == nil {
		return
	}
	for deadline := time.Now().Add(killGrace); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if !reapChildren() {
			return
		}
	}
}

// reapChildren collects every exited child of the runner (between runs it
// has no child but the program and the orphans it inherits), and says
// whether any child is left.
func reapChildren() bool {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
		case err != nil:
			return false
		case pid <= 0:
			return true
		}
	}
}
