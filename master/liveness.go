package master

import (
	"context"
	"time"

	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/gossip"
)

// livenessInterval is how often the leader compares the workers table with
// the gossip pool even when the pool reports no change.
const livenessInterval = 250 * time.Millisecond

// watchWorkers turns the gossip pool's view into committed WorkerLost
// entries while this master leads. memberlist's dead or left verdict is a
// hint: a worker is declared lost only after it has been missing from the
// pool for WorkerTimeout. A new leader counts every worker as seen at the
// moment it took over, so a failover never triggers a mass relaunch.
func (m *Master) watchWorkers(ctx context.Context) {
	lastSeen := map[string]time.Time{}
	start := time.Now()
	tick := time.NewTicker(livenessInterval)
	defer tick.Stop()
	for {
		present := map[string]bool{}
		for _, meta := range m.pool.Alive() {
			if meta.Role == gossip.RoleWorker {
				present[meta.ID] = true
			}
		}
		t := time.Now()
		for _, w := range m.fsm.Workers() {
			if w.State != fsm.WorkerAlive {
				delete(lastSeen, w.ID)
				continue
			}
			if present[w.ID] {
				lastSeen[w.ID] = t
				continue
			}
			seen, ok := lastSeen[w.ID]
			if !ok {
				// Never seen in this term: count from when this master
				// took over, or from the worker's (re-)registration if
				// later, since a worker registers before it has joined.
				seen = start
				if reg := time.UnixMilli(w.UpdatedAt); reg.After(seen) {
					seen = reg
				}
			}
			if t.Sub(seen) < m.cfg.WorkerTimeout {
				continue
			}
			m.log.Warn("worker lost", "worker", w.ID, "missing_for", t.Sub(seen).Round(time.Millisecond))
			if _, err := m.apply(fsm.CmdWorkerLost, &fsm.WorkerLost{
				WorkerID: w.ID, Reason: "worker " + w.ID + " lost: missing from the gossip pool", Time: now(),
			}); err != nil {
				m.log.Warn("worker loss not committed", "worker", w.ID, "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-m.gossipChanged:
		case <-tick.C:
		}
	}
}
