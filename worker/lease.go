package worker

import (
	"os"
	"time"

	"github.com/drover-project/drover/internal/procid"
	"github.com/drover-project/drover/worker/unitdir"
)

// holder names this daemon's process in its lease file (see procid): its
// runners end their programs as soon as it is gone without detaching. The
// zero value (no /proc) names nobody, and the runners then follow the
// renewals alone.
type holder struct {
	pid   int
	start uint64
}

// self is the holder of this process.
func self() holder {
	pid := os.Getpid()
	start, _, err := procid.Start(pid)
	if err != nil {
		return holder{}
	}
	return holder{pid: pid, start: start}
}

// LeaseFile is the name, in the work dir, of the file whose renewals tell
// the runners that their worker lives, and which names the daemon they
// follow (see Config.Lease, unitdir.Spec.LeaseFile and unitdir.LeaseContent).
const LeaseFile = "worker.lease"

// leasePoll is how often a strict worker checks its contact with a leader,
// as often as a runner checks its lease.
func leasePoll(lease time.Duration) time.Duration {
	return max(min(lease/10, 100*time.Millisecond), time.Millisecond)
}

// renewLease rewrites LeaseFile with the current time, the last leader
// contact and this daemon as its holder (unitdir.LeaseContent), detached
// for Detach's last renewal. When the rewrite fails (a full disk) it
// touches the file instead: a touch needs no space, and a full disk must
// not end every program.
func (w *Worker) renewLease(detached bool) error {
	w.leaseMu.Lock()
	defer w.leaseMu.Unlock()
	now := time.Now()
	w.mu.Lock()
	contact := w.leaseContact
	w.mu.Unlock()
	c := unitdir.LeaseContent{Renewed: now.UnixMilli(), HolderPID: w.holder.pid, HolderStart: w.holder.start, Detached: detached,
		SucceedsPID: w.succeeds.pid, SucceedsStart: w.succeeds.start}
	if !contact.IsZero() {
		c.LeaderContact = contact.UnixMilli()
	}
	if err := unitdir.WriteLease(w.leasePath, c); err != nil {
		if terr := os.Chtimes(w.leasePath, now, now); terr != nil {
			return err
		}
		w.log.Warn("cannot rewrite the lease file; touched it instead", "err", err)
	}
	return nil
}

// previousContact returns, on the monotonic clock of now, when the leader
// last answered the worker that wrote c: the zero time when c names no
// contact. A contact "in the future" (the wall clock stepped back) counts
// as now.
func previousContact(c unitdir.LeaseContent, now time.Time) time.Time {
	if c.LeaderContact <= 0 {
		return time.Time{}
	}
	age := max(now.UnixMilli()-c.LeaderContact, 0)
	return now.Add(-time.Duration(age) * time.Millisecond)
}

// predecessor is the holder c names when it detached, for this daemon's
// renewals to name (unitdir.LeaseContent's SucceedsPID), and nobody
// otherwise: a holder that died without detaching takes its runners'
// programs with it.
func predecessor(c unitdir.LeaseContent) holder {
	if !c.Detached || c.HolderPID <= 0 {
		return holder{}
	}
	return holder{pid: c.HolderPID, start: c.HolderStart}
}
