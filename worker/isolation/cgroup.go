package isolation

import (
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"syscall"
	"time"
)

// pollInterval is how often Wait looks whether a cgroup has emptied.
const pollInterval = 10 * time.Millisecond

// Cgroup is one unit's cgroup, made by Manager.Create and opened from its
// Ref by the runner that supervises the unit, or by a worker that ends
// what a dead runner left.
type Cgroup struct {
	ref Ref
	b   backend
}

// MemoryMB is the memory limit the cgroup was made with, MiB; 0 for none.
func (c *Cgroup) MemoryMB() int64 { return c.ref.Limits.MemoryMB }

// backend is what differs between the versions.
type backend interface {
	// start starts cmd inside the cgroup: the child is in it before it
	// runs an instruction of its own.
	start(cmd *exec.Cmd) error
	// procs lists the processes in the cgroup and its descendants.
	procs() ([]int, error)
	// kill sends SIGKILL to every process in the cgroup such that none
	// can escape by forking meanwhile.
	kill() error
	usage() (Usage, error)
	// remove removes the cgroup's directories, which must be empty.
	remove() error
}

// Open returns the cgroup r names. It fails when r is malformed or the
// cgroup does not exist.
func Open(r Ref) (*Cgroup, error) {
	if err := r.Check(); err != nil {
		return nil, err
	}
	if !r.exists() {
		return nil, fmt.Errorf("cgroup %s: %w", r, fs.ErrNotExist)
	}
	var b backend
	var err error
	if r.Version == 2 {
		b, err = v2Open(r)
	} else {
		b, err = v1Open(r)
	}
	if err != nil {
		return nil, fmt.Errorf("open cgroup %s: %w", r, err)
	}
	return &Cgroup{ref: r, b: b}, nil
}

// Ref is what c was opened from.
func (c *Cgroup) Ref() Ref { return c.ref }

// Start starts cmd in c, race-free: no fork of the program can run
// outside it. On v2 the kernel creates the process in the cgroup
// (clone3's CLONE_INTO_CGROUP, SysProcAttr.CgroupFD; Linux 5.7); on v1 the
// starting thread is moved into the cgroup first and forks there, the
// child inheriting the thread's cgroups, and the thread is then
// discarded. cmd.SysProcAttr's other fields are kept.
func (c *Cgroup) Start(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	return c.b.start(cmd)
}

// Pids lists the processes in c.
func (c *Cgroup) Pids() ([]int, error) { return c.b.procs() }

// Empty says whether no process is left in c. A cgroup that cannot be
// read is taken for empty only when it is gone.
func (c *Cgroup) Empty() bool {
	pids, err := c.b.procs()
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	return len(pids) == 0
}

// Signal sends sig to every process in c: a request to end (SIGTERM) that
// reaches processes that left the program's process group. A process
// forked meanwhile may miss it; Kill misses none.
func (c *Cgroup) Signal(sig syscall.Signal) {
	pids, _ := c.b.procs()
	for _, pid := range pids {
		_ = syscall.Kill(pid, sig)
	}
}

// Kill sends SIGKILL to every process in c, descendants that called
// setsid() or double-forked included: cgroup.kill on v2 (Linux 5.14; the
// library freezes, kills and thaws on older kernels), and on v1 a freeze,
// SIGKILL to every process, and a thaw.
func (c *Cgroup) Kill() error { return c.b.kill() }

// Wait waits up to timeout for c to be empty and says whether it is.
func (c *Cgroup) Wait(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for !c.Empty() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pollInterval)
	}
	return true
}

// Usage reads what c measured so far.
func (c *Cgroup) Usage() (Usage, error) { return c.b.usage() }

// Remove removes c, which must be empty. A cgroup removed meanwhile (by
// the unit's runner and its worker at once) is no error.
func (c *Cgroup) Remove() error {
	if err := c.b.remove(); err != nil && c.ref.exists() {
		return fmt.Errorf("remove cgroup %s: %w", c.ref, err)
	}
	return nil
}

// Destroy kills every process in the cgroup r names, waits up to timeout
// for them to be gone and removes the cgroup: what a worker does to the
// cgroup of a unit whose runner is gone. A cgroup that does not exist is
// no error.
func Destroy(r Ref, timeout time.Duration) error {
	c, err := Open(r)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for deadline := time.Now().Add(timeout); !c.Empty(); {
		if err := c.Kill(); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("kill cgroup %s: %w", r, err)
		}
		if c.Wait(min(100*time.Millisecond, time.Until(deadline))) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup %s: processes survive SIGKILL after %s", r, timeout)
		}
	}
	return c.Remove()
}
