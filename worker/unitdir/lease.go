package unitdir

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/drover-project/drover/internal/atomicfile"
)

// LeaseExpiredReason is the reason of the KILLED final state of an attempt
// whose worker did not renew its lease file for longer than lease.
func LeaseExpiredReason(lease time.Duration) string {
	return fmt.Sprintf("worker gone longer than the lease (%s)", lease)
}

// DaemonGoneReason is the reason of the KILLED final state of an attempt
// whose worker daemon died without detaching: its pid (the lease holder's)
// is given.
func DaemonGoneReason(pid int) string {
	return fmt.Sprintf("worker daemon (pid %d) died without detaching", pid)
}

// LeaseContent is what the worker daemon writes in its lease file (JSON).
// Fields added later are ignored by older readers; a file that does not
// parse, or names no holder, is followed by its renewals alone.
type LeaseContent struct {
	// Renewed is when the daemon wrote the file, Unix milliseconds.
	Renewed int64 `json:"renewed_ms"`
	// LeaderContact is when a leader last answered the daemon, Unix
	// milliseconds, absent when none has yet. The next daemon on the
	// work dir fences its adopted attempts from it.
	LeaderContact int64 `json:"leader_contact_ms,omitempty"`
	// HolderPID and HolderStart name the daemon that wrote the file (see
	// procid.Start). A runner follows that process: once it has died
	// without Detached, or another process writes the file while it was
	// not Detached, the runner ends its program at once rather than at
	// the end of the lease. This is Spark's WorkerWatcher (a driver or
	// executor exits when the connection to its worker drops), and it is
	// what lets the leader relaunch a driver as soon as it knows that
	// the daemon is gone.
	HolderPID   int    `json:"holder_pid,omitempty"`
	HolderStart uint64 `json:"holder_start,omitempty"`
	// Detached says the holder leaves on purpose, for the next daemon on
	// the work dir to adopt its attempts (Worker.Detach): its runners
	// then keep their programs for the lease.
	Detached bool `json:"detached,omitempty"`
	// SucceedsPID and SucceedsStart name the holder this one took over
	// from when that one's last renewal said Detached, and are absent
	// otherwise. A runner that missed that renewal (the next daemon
	// rewrote the file within a poll) learns from them that its daemon
	// left on purpose and did not die.
	SucceedsPID   int    `json:"succeeds_pid,omitempty"`
	SucceedsStart uint64 `json:"succeeds_start,omitempty"`
}

// Succeeds reports whether c's holder took over from prev's after prev's
// detached.
func (c LeaseContent) Succeeds(prev LeaseContent) bool {
	return prev.HolderPID > 0 && c.SucceedsPID == prev.HolderPID && c.SucceedsStart == prev.HolderStart
}

// Tethered reports whether a runner must end its program as soon as the
// holder of c is gone.
func (c LeaseContent) Tethered() bool { return c.HolderPID > 0 && c.HolderStart > 0 && !c.Detached }

// WriteLease replaces the lease file at path with c, whole or not at
// all. Not synced: the lease only matters while this machine runs, and a
// sync at every renewal would cost more than it protects.
func WriteLease(path string, c LeaseContent) error {
	b, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("encode lease: %w", err)
	}
	return atomicfile.Replace(path, b, private, false)
}

// ReadLease reads the lease file at path, as a runner does and as the next
// daemon on the work dir does at its start; a file that is missing or does
// not parse reads as the zero content, which names no holder.
func ReadLease(path string) LeaseContent {
	var c LeaseContent
	if b, err := os.ReadFile(path); err == nil && json.Unmarshal(b, &c) != nil {
		c = LeaseContent{}
	}
	return c
}
