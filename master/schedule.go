package master

import (
	"context"
	"time"

	"github.com/drover-project/drover/fsm"
)

// scheduleInterval is the scheduler's fallback tick; it normally wakes on
// every table change.
const scheduleInterval = time.Second

// schedule places waiting drivers while this master leads. Each round reads
// the tables, plans placements, and commits them as one PlaceDrivers entry;
// workers act only on what is committed.
func (m *Master) schedule(ctx context.Context) {
	tick := time.NewTicker(scheduleInterval)
	defer tick.Stop()
	for {
		changed := m.fsm.Changed()
		if ps := plan(m.fsm.WaitingDrivers(), m.fsm.Workers()); len(ps) > 0 {
			if _, err := m.apply(fsm.CmdPlaceDrivers, &fsm.PlaceDrivers{Placements: ps, Time: now()}); err != nil {
				m.log.Warn("placement not committed", "err", err, "placements", len(ps))
			} else {
				for _, p := range ps {
					m.log.Info("placed driver", "driver", p.DriverID, "attempt", p.Attempt, "worker", p.WorkerID)
				}
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

// plan places waiting drivers in queue order, each on the ALIVE worker with
// room that has the most free cores (then memory, then ID), which spreads
// drivers out the way Spark's Master.schedule does by walking a shuffled
// worker list. A driver that fits nowhere waits; those behind it may still
// be placed.
func plan(waiting []*fsm.Driver, workers []*fsm.Worker) []fsm.Placement {
	var alive []*fsm.Worker
	for _, w := range workers {
		if w.State == fsm.WorkerAlive {
			alive = append(alive, w)
		}
	}
	var out []fsm.Placement
	for _, d := range waiting {
		var best *fsm.Worker
		for _, w := range alive {
			if w.CoresFree() < d.Cores || w.MemoryFreeMB() < d.MemoryMB {
				continue
			}
			if best == nil || better(w, best) {
				best = w
			}
		}
		if best == nil {
			continue
		}
		best.CoresUsed += d.Cores
		best.MemoryUsedMB += d.MemoryMB
		out = append(out, fsm.Placement{DriverID: d.ID, Attempt: d.Attempt, WorkerID: best.ID})
	}
	return out
}

func better(a, b *fsm.Worker) bool {
	if a.CoresFree() != b.CoresFree() {
		return a.CoresFree() > b.CoresFree()
	}
	if a.MemoryFreeMB() != b.MemoryFreeMB() {
		return a.MemoryFreeMB() > b.MemoryFreeMB()
	}
	return a.ID < b.ID
}
