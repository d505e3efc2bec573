package runner

import (
	"encoding/json"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/drover-project/drover/internal/procid"
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

// succeeds reports whether c's holder took over from prev's after prev's
// detached.
func (c LeaseContent) succeeds(prev LeaseContent) bool {
	return prev.HolderPID > 0 && c.SucceedsPID == prev.HolderPID && c.SucceedsStart == prev.HolderStart
}

// tethered reports whether a runner must end its program as soon as the
// holder of c is gone.
func (c LeaseContent) tethered() bool { return c.HolderPID > 0 && c.HolderStart > 0 && !c.Detached }

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

// maxLeasePoll bounds the pause between two looks at the lease file, so that
// a long lease is still noticed expiring within a tenth of a second.
const maxLeasePoll = 100 * time.Millisecond

// leasePoll is how often the runner looks at the lease file: a tenth of the
// lease, so a program outlives the lease by at most that much, and at least
// every maxLeasePoll.
func leasePoll(lease time.Duration) time.Duration {
	return max(min(lease/10, maxLeasePoll), time.Millisecond)
}

// leaseStamp is what identifies one renewal of the lease file: a rewrite
// replaces the file (a new inode), a touch changes its modification time.
type leaseStamp struct {
	exists     bool
	dev, ino   uint64
	size       int64
	mtimeNanos int64
}

func statLease(path string) leaseStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return leaseStamp{}
	}
	s := leaseStamp{exists: true, size: fi.Size(), mtimeNanos: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.dev, s.ino = uint64(st.Dev), uint64(st.Ino)
	}
	return s
}

// watchLease sends a reason on stop, then returns: LeaseExpiredReason once
// path has not been renewed for lease, DaemonGoneReason as soon as the
// daemon holding the lease (LeaseContent) has died without detaching.
//
// A renewal is any change of the file (see leaseStamp), and its age is
// measured on the runner's monotonic clock from when the runner saw it,
// rather than by comparing the time the worker wrote with the wall clock: a
// step of the wall clock (NTP, a suspended VM) then neither kills every
// program early nor keeps them alive after their worker died. The price is
// at most one poll interval of extra life. The lease counts from the
// runner's start, so a worker that dies before its first renewal is still
// noticed.
//
// A new holder that renews the file before this runner saw the old one
// dead (a daemon restarted within a poll) does not save the attempt unless
// it succeeds a detached one (LeaseContent's SucceedsPID): otherwise the
// old holder did not detach, so it died, and the leader may already be
// relaunching its drivers.
func watchLease(path string, lease time.Duration, stop chan<- string) {
	last := statLease(path)
	holder := ReadLease(path)
	renewed := time.Now()
	tick := time.NewTicker(leasePoll(lease))
	defer tick.Stop()
	for range tick.C {
		// A missing file renews nothing: the worker may have lost its
		// work dir; it renews again by writing the file anew.
		if s := statLease(path); s.exists && s != last {
			last, renewed = s, time.Now()
			next := ReadLease(path)
			if holder.tethered() && (next.HolderPID != holder.HolderPID || next.HolderStart != holder.HolderStart) && !next.succeeds(holder) {
				stop <- DaemonGoneReason(holder.HolderPID)
				return
			}
			holder = next
		}
		if holder.tethered() && !procid.Alive(holder.HolderPID, holder.HolderStart) {
			stop <- DaemonGoneReason(holder.HolderPID)
			return
		}
		if time.Since(renewed) > lease {
			stop <- LeaseExpiredReason(lease)
			return
		}
	}
}
