package worker

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/drover-project/drover/internal/procid"
	"github.com/drover-project/drover/worker/unitdir"
)

// leaseKeeper is the part of the worker that keeps its lease file
// (LeaseFile): it renews it every Lease/4 and whenever a waiting runner
// needs the latest contact, and in strict fencing it stops the units once
// no leader has answered for the lease. It owns leaseMu and the file;
// the contact times it writes are the workerState's.
type leaseKeeper struct {
	cfg  Config
	log  *slog.Logger
	st   *workerState
	path string
	// holder is this daemon, as its lease file names it.
	holder holder
	// succeeds, fixed at the start, is the detached daemon this one took
	// over the work dir from, or nobody (see predecessor).
	succeeds holder
	// leaseMu orders the lease file's rewrites, so that the last one
	// carries the latest contact.
	leaseMu  sync.Mutex
	keepStop chan struct{}
	keepDone chan struct{}
}

// newLeaseKeeper reads the lease file a previous daemon on the work dir
// left, if any: adopted attempts are fenced from that daemon's last
// contact, since the leader counts from then, not from this start.
func newLeaseKeeper(cfg Config, log *slog.Logger, st *workerState) *leaseKeeper {
	lk := &leaseKeeper{cfg: cfg, log: log, st: st, path: filepath.Join(cfg.WorkDir, LeaseFile), holder: self(),
		keepStop: make(chan struct{}), keepDone: make(chan struct{})}
	prev := unitdir.ReadLease(lk.path)
	st.lastContact = previousContact(prev, time.Now())
	st.leaseContact = st.lastContact
	lk.succeeds = predecessor(prev)
	return lk
}

// start renews the lease file from now on, until stop.
func (lk *leaseKeeper) start() { go lk.keep() }

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
func (lk *leaseKeeper) renewLease(detached bool) error {
	lk.leaseMu.Lock()
	defer lk.leaseMu.Unlock()
	now := time.Now()
	lk.st.mu.Lock()
	contact := lk.st.leaseContact
	lk.st.mu.Unlock()
	c := unitdir.LeaseContent{Renewed: now.UnixMilli(), HolderPID: lk.holder.pid, HolderStart: lk.holder.start, Detached: detached,
		SucceedsPID: lk.succeeds.pid, SucceedsStart: lk.succeeds.start}
	if !contact.IsZero() {
		c.LeaderContact = contact.UnixMilli()
	}
	if err := unitdir.WriteLease(lk.path, c); err != nil {
		if terr := os.Chtimes(lk.path, now, now); terr != nil {
			return err
		}
		lk.log.Warn("cannot rewrite the lease file; touched it instead", "err", err)
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

// keep renews the lease file every Lease/4 and, in strict fencing, checks
// the contact with the leader every leasePoll, until stop.
func (lk *leaseKeeper) keep() {
	defer close(lk.keepDone)
	renew := time.NewTicker(max(lk.cfg.Lease/4, time.Millisecond))
	defer renew.Stop()
	var fence <-chan time.Time
	if lk.cfg.Fencing == FencingStrict {
		t := time.NewTicker(leasePoll(lk.cfg.Lease))
		defer t.Stop()
		fence = t.C
	}
	for {
		select {
		case <-lk.keepStop:
			return
		case <-renew.C:
			if err := lk.renewLease(false); err != nil {
				lk.log.Error("cannot renew the lease file; runners will end their programs", "err", err)
			}
		case <-fence:
			lk.fence(time.Now())
		}
	}
}

func (lk *leaseKeeper) stop() {
	close(lk.keepStop)
	<-lk.keepDone
}

// actedOn records that the answer to a request sent at sent has been
// acted on, and tells the runners at once while one of them waits (see
// relaunchDue); otherwise the next renewal tells them.
func (lk *leaseKeeper) actedOn(sent time.Time) {
	lk.st.mu.Lock()
	if sent.After(lk.st.leaseContact) {
		lk.st.leaseContact = sent
	}
	waiting := !lk.st.relaunchDue.IsZero()
	if waiting && !sent.Before(lk.st.relaunchDue) {
		lk.st.relaunchDue = time.Time{}
	}
	lk.st.mu.Unlock()
	if waiting {
		if err := lk.renewLease(false); err != nil {
			lk.log.Warn("cannot renew the lease file for a relaunch; the next renewal tells it", "err", err)
		}
	}
}

// askForRelaunch records that a runner waits for a leader's answer before
// relaunching its program, and has the heartbeat loop ask at once.
func (lk *leaseKeeper) askForRelaunch() {
	lk.st.mu.Lock()
	lk.st.relaunchDue = time.Now()
	lk.st.mu.Unlock()
	lk.st.poke()
}

// fencedLocked reports, with the workerState's mu held, whether strict fencing forbids
// running supervised attempts and executors, and starting anything, at now.
func (lk *leaseKeeper) fencedLocked(now time.Time) bool {
	return lk.cfg.Fencing == FencingStrict && now.Sub(lk.st.lastContact) > lk.cfg.Lease
}

// fence kills the supervised attempts and the executors once no leader has
// answered for the lease, in strict fencing (see FencingStrict).
func (lk *leaseKeeper) fence(now time.Time) {
	lk.st.mu.Lock()
	defer lk.st.mu.Unlock()
	if !lk.fencedLocked(now) {
		return
	}
	reason := fmt.Sprintf("fenced: no contact with a leader for %s", lk.cfg.Lease)
	for k, u := range lk.st.units {
		if u.ended || !u.fenceable() || u.killReason != "" {
			continue
		}
		u.killReason = reason
		lk.log.Warn("killing "+k.kind.info().noun, k.attrs("reason", reason)...)
		u.fence()
	}
}
