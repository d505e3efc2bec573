package service

import (
	"fmt"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
)

// explainWaiting sets the message of each waiting driver to why it waits;
// the tables hold no such reason, since it changes with every worker. The
// rows are the tables' own (fsm.State.Drivers), which must not change: a
// waiting driver's is replaced in ds by a copy with the message, which
// shares the rest of the row, its program included.
func explainWaiting(ds []*model.Driver, ws []*model.Worker) []*model.Driver {
	for i, d := range ds {
		if d.WorkerID != "" || d.State.Terminal() {
			continue
		}
		reason := waitReason(ws, d.Cores, d.MemoryMB, d.Resources, "")
		// A relaunching driver keeps saying why it was relaunched while
		// there is room for it somewhere.
		if d.Message == "" || (reason != waitReasonFree && reason != waitReasonQueued) {
			c := *d
			c.Message = reason
			ds[i] = &c
		}
	}
	return ds
}

// explainApp sets the message of an app that wants executors and has none
// to why it waits (Spark's "requires more resources than any of our
// workers have"); like explainWaiting, it is computed on read, on a copy
// of the app's row.
func explainApp(s api.AppStatus, ws []*model.Worker) api.AppStatus {
	a := s.App
	if a.State.Terminal() || a.CoresLeft() == 0 || a.ExecutorLimit == 0 {
		return s
	}
	for _, e := range s.Executors {
		if !e.State.Terminal() {
			return s
		}
	}
	c := *a
	c.Message = waitReason(ws, a.CoresPerExecutor, a.MemoryPerExecutorMB, a.ResourcesPerExecutor, " per executor")
	s.App = &c
	return s
}

// waitReason says why something asking for cores, memory (MiB) and custom
// resources on one worker is not placed; what qualifies the request in
// the message. A resource no ALIVE worker offers enough of makes the
// request unplaceable, as too many cores do.
func waitReason(ws []*model.Worker, cores int, memoryMB int64, res model.ResourceAmounts, what string) string {
	var alive, fits, room, maxCores int
	var maxMem int64
	most := model.ResourceAmounts{}
	for name := range res {
		most[name] = 0
	}
	for _, w := range ws {
		if w.State != model.WorkerAlive {
			continue
		}
		alive++
		maxCores, maxMem = max(maxCores, w.Cores), max(maxMem, w.MemoryMB)
		offered := w.Resources.Counts()
		for name := range res {
			most[name] = max(most[name], offered[name])
		}
		if w.Cores >= cores && w.MemoryMB >= memoryMB && res.Fits(offered) {
			fits++
		}
		if w.CoresFree() >= cores && w.MemoryFreeMB() >= memoryMB && res.Fits(w.ResourcesFree().Counts()) {
			room++
		}
	}
	asks, offers := "", ""
	if len(res) > 0 {
		asks, offers = ", "+res.String(), ", "+most.String()
	}
	switch {
	case alive == 0:
		return "waiting: no ALIVE worker"
	case fits == 0:
		return fmt.Sprintf("waiting: %s (asks %d cores, %d MiB%s%s; the largest worker offers %d cores, %d MiB%s)",
			api.ReasonUnplaceable, cores, memoryMB, asks, what, maxCores, maxMem, offers)
	case room > 0:
		return waitReasonQueued
	}
	return waitReasonFree
}

// Why something waits that fits on some ALIVE worker: there is room now,
// and the leader's next scheduling round places it; or there is none.
const (
	waitReasonQueued = "queued for placement"
	waitReasonFree   = "waiting for a worker with free resources"
)
