package leader

import (
	"context"
	"time"

	"github.com/drover-project/drover/gossip"
	"github.com/drover-project/drover/model"
)

// livenessInterval is how often the leader compares the workers table with
// the gossip pool and the heartbeats even when nothing reports a change.
const livenessInterval = 250 * time.Millisecond

// watchWorkers commits WorkerLost for workers that are gone, while this
// master leads.
//
// Default mode: memberlist's dead or left verdict is a hint; a worker is
// declared lost once it has been missing from the pool for WorkerTimeout
// and has not sent a heartbeat for as long.
//
// Strict mode: a worker is declared lost once the leader has not answered
// its heartbeat for Lease+FencingMargin. The worker stops its supervised
// attempts after Lease without an answer, so the relaunch cannot overlap
// them. Gossip plays no part, so a worker cut off from the leader alone is
// still replaced.
//
// Either way a worker's clock starts no earlier than the moment this master
// took over (or the worker registered), so a failover never triggers a mass
// relaunch.
func (t *Term) watchWorkers(ctx context.Context) {
	lastSeen := map[string]time.Time{}
	tick := time.NewTicker(livenessInterval)
	defer tick.Stop()
	for {
		changed := t.d.GossipChanged()
		present := map[string]bool{}
		for _, meta := range t.d.Pool.Alive() {
			if meta.Role == gossip.RoleWorker {
				present[meta.ID] = true
			}
		}
		at := time.Now()
		for _, w := range t.d.FSM.Workers() {
			// A decommissioned worker still holding drivers is watched
			// too: should it die before reporting them, they move on.
			if w.State != model.WorkerAlive && (w.State != model.WorkerDecommissioned || w.CoresUsed == 0) {
				delete(lastSeen, w.ID)
				continue
			}
			since := t.Since
			if reg := time.UnixMilli(w.UpdatedAt); reg.After(since) {
				since = reg
			}
			contact := since
			if c := t.Workers.Get(w.ID); c.After(contact) {
				contact = c
			}
			var reason string
			if t.cfg.Strict {
				wait := t.cfg.Lease + t.cfg.FencingMargin
				if earlyRelaunchBug {
					wait = t.cfg.WorkerTimeout
				}
				if at.Sub(contact) < wait {
					continue
				}
				reason = "no heartbeat for longer than the lease plus margin"
			} else {
				if present[w.ID] {
					lastSeen[w.ID] = at
					continue
				}
				if s, ok := lastSeen[w.ID]; ok {
					since = s
				}
				// A heartbeat inside the grace also proves the worker
				// alive, whatever the pool says (it may be rejoining).
				if at.Sub(since) < t.cfg.WorkerTimeout || at.Sub(contact) < t.cfg.WorkerTimeout {
					continue
				}
				reason = "missing from the gossip pool"
			}
			t.d.Log.Warn("worker lost", "worker", w.ID, "reason", reason, "missing_for", at.Sub(since).Round(time.Millisecond))
			if _, err := t.d.Apply(model.CmdWorkerLost, &model.WorkerLost{
				WorkerID: w.ID, Reason: "worker " + w.ID + " lost: " + reason, Time: now(),
			}); err != nil {
				t.d.Log.Warn("worker loss not committed", "worker", w.ID, "err", err)
			} else {
				t.d.Metrics.WorkersLost.Inc()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-tick.C:
		}
	}
}
