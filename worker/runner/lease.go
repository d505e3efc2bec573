package runner

import (
	"os"
	"syscall"
	"time"

	"github.com/drover-project/drover/internal/procid"
	"github.com/drover-project/drover/worker/unitdir"
)

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
	holder := unitdir.ReadLease(path)
	renewed := time.Now()
	tick := time.NewTicker(leasePoll(lease))
	defer tick.Stop()
	for range tick.C {
		// A missing file renews nothing: the worker may have lost its
		// work dir; it renews again by writing the file anew.
		if s := statLease(path); s.exists && s != last {
			last, renewed = s, time.Now()
			next := unitdir.ReadLease(path)
			if holder.Tethered() && (next.HolderPID != holder.HolderPID || next.HolderStart != holder.HolderStart) && !next.Succeeds(holder) {
				stop <- unitdir.DaemonGoneReason(holder.HolderPID)
				return
			}
			holder = next
		}
		if holder.Tethered() && !procid.Alive(holder.HolderPID, holder.HolderStart) {
			stop <- unitdir.DaemonGoneReason(holder.HolderPID)
			return
		}
		if time.Since(renewed) > lease {
			stop <- unitdir.LeaseExpiredReason(lease)
			return
		}
	}
}
