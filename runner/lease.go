package runner

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

// LeaseExpiredReason is the reason of the KILLED final state of an attempt
// whose worker did not renew its lease file for longer than lease.
func LeaseExpiredReason(lease time.Duration) string {
	return fmt.Sprintf("worker gone longer than the lease (%s)", lease)
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

// watchLease sends LeaseExpiredReason on stop once path has not been renewed
// for lease, then returns.
//
// A renewal is any change of the file (see leaseStamp), and its age is
// measured on the runner's monotonic clock from when the runner saw it,
// rather than by comparing the time the worker wrote with the wall clock: a
// step of the wall clock (NTP, a suspended VM) then neither kills every
// program early nor keeps them alive after their worker died. The price is
// at most one poll interval of extra life. The lease counts from the
// runner's start, so a worker that dies before its first renewal is still
// noticed.
func watchLease(path string, lease time.Duration, stop chan<- string) {
	last := statLease(path)
	renewed := time.Now()
	tick := time.NewTicker(leasePoll(lease))
	defer tick.Stop()
	for range tick.C {
		// A missing file renews nothing: the worker may have lost its
		// work dir; it renews again by writing the file anew.
		if s := statLease(path); s.exists && s != last {
			last, renewed = s, time.Now()
			continue
		}
		if time.Since(renewed) > lease {
			stop <- LeaseExpiredReason(lease)
			return
		}
	}
}
