package master

import (
	"context"
	"sync"
	"time"

	"github.com/drover-project/drover/gossip"
	"github.com/drover-project/drover/model"
)

// livenessInterval is how often the leader compares the workers table with
// the gossip pool and the heartbeats even when nothing reports a change.
const livenessInterval = 250 * time.Millisecond

// contacts records when this master, as leader, last heard from each
// worker (or app client): a heartbeat, registration or watch received or
// answered, and any it is holding in a long poll right now.
type contacts struct {
	mu   sync.Mutex
	last map[string]time.Time
	held map[string]int
}

// hold marks a heartbeat of worker in progress until the returned function
// is called.
func (c *contacts) hold(worker string) (release func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held == nil {
		c.held = map[string]int{}
	}
	c.held[worker]++
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.held[worker]--
		if c.held[worker] == 0 {
			delete(c.held, worker)
		}
	}
}

func (c *contacts) seen(worker string, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		c.last = map[string]time.Time{}
	}
	c.last[worker] = t
}

func (c *contacts) get(worker string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held[worker] > 0 {
		return time.Now()
	}
	return c.last[worker]
}

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
			// A decommissioned worker still holding drivers is watched
			// too: should it die before reporting them, they move on.
			if w.State != model.WorkerAlive && (w.State != model.WorkerDecommissioned || w.CoresUsed == 0) {
				delete(lastSeen, w.ID)
				continue
			}
			since := start
			if reg := time.UnixMilli(w.UpdatedAt); reg.After(since) {
				since = reg
			}
			contact := since
			if c := m.contact.get(w.ID); c.After(contact) {
				contact = c
			}
			var reason string
			if m.cfg.strict() {
				wait := m.cfg.Lease + m.cfg.FencingMargin
				if earlyRelaunchBug {
					wait = m.cfg.WorkerTimeout
				}
				if t.Sub(contact) < wait {
					continue
				}
				reason = "no heartbeat for longer than the lease plus margin"
			} else {
				if present[w.ID] {
					lastSeen[w.ID] = t
					continue
				}
				if s, ok := lastSeen[w.ID]; ok {
					since = s
				}
				// A heartbeat inside the grace also proves the worker
				// alive, whatever the pool says (it may be rejoining).
				if t.Sub(since) < m.cfg.WorkerTimeout || t.Sub(contact) < m.cfg.WorkerTimeout {
					continue
				}
				reason = "missing from the gossip pool"
			}
			m.log.Warn("worker lost", "worker", w.ID, "reason", reason, "missing_for", t.Sub(since).Round(time.Millisecond))
			if _, err := m.apply(model.CmdWorkerLost, &model.WorkerLost{
				WorkerID: w.ID, Reason: "worker " + w.ID + " lost: " + reason, Time: now(),
			}); err != nil {
				m.log.Warn("worker loss not committed", "worker", w.ID, "err", err)
			} else {
				m.metrics.workersLost.Inc()
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
