package worker

import (
	"log/slog"
	"sync"
	"time"
)

// reconciler is the part of the worker that runs the units: it starts
// what the leader's desired set adds, kills what it drops or supersedes,
// adopts after a restart what a previous daemon left, follows every
// runner and queues its reports in the workerState. It owns the units'
// runners and cgroups; the units themselves are the workerState's, under
// its lock.
type reconciler struct {
	cfg     Config
	log     *slog.Logger
	db      *store
	metrics *workerMetrics
	st      *workerState
	lease   *leaseKeeper
	janitor *janitor
	// users says who programs run as.
	users *users
	// iso makes the units' cgroups; nil without isolation.
	iso Cgroups
	// untethered, fixed by adopt, says that a runner it adopted does not
	// follow its daemon (unitdir.Status's Tethered): an older version's,
	// left by the daemon this one upgraded.
	untethered bool
	// quit is closed by Detach (and by Close when runners outlast its
	// wait): the watchers return without waiting for their runners, which
	// live on.
	quit chan struct{}
	// runners counts the goroutines that watch runner processes.
	runners sync.WaitGroup
}

// sweepCgroups kills and removes, at start, the cgroups under the
// worker's whose units it did not adopt as running: those of units that
// ended while it was down, whose programs must not outlive them, and of
// units whose record is gone.
func (rc *reconciler) sweepCgroups() {
	if rc.iso == nil {
		return
	}
	rc.st.mu.Lock()
	live := map[string]bool{}
	for k, u := range rc.st.units {
		if !u.ended {
			live[k.cgroup()] = true
		}
	}
	rc.st.mu.Unlock()
	removed, err := rc.iso.Sweep(func(name string) bool { return live[name] }, orphanGrace)
	if len(removed) > 0 {
		rc.log.Info("removed the cgroups of units that are gone", "cgroups", removed)
	}
	if err != nil {
		rc.log.Warn("cannot remove the cgroups of units that are gone", "err", err)
	}
}

// release makes every watcher return without waiting for its runner: the
// adopted ones see quit, the others the end of their event pipe.
func (rc *reconciler) release() {
	close(rc.quit)
	rc.st.mu.Lock()
	defer rc.st.mu.Unlock()
	for _, u := range rc.st.units {
		if u.events != nil {
			_ = u.events.Close()
		}
	}
}

// awaitRunners waits up to d for every watched runner to end, then lets go
// of those left (see release).
func (rc *reconciler) awaitRunners(d time.Duration) {
	done := make(chan struct{})
	go func() {
		rc.runners.Wait()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-t.C:
	}
	rc.log.Error("runners still alive after the kill timeout; they end their programs once this daemon has exited", "waited", d)
	rc.release()
	<-done
}

// removeWorkerCgroup removes the worker's cgroup once its units have
// ended. Runners still alive keep their units' cgroups, and so the
// worker's, for the next worker on this work dir.
func (rc *reconciler) removeWorkerCgroup() {
	if rc.iso == nil {
		return
	}
	if err := rc.iso.Remove(); err != nil {
		rc.log.Info("keeping the worker's cgroup", "err", err)
	}
}
