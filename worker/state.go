package worker

import (
	"slices"
	"sync"
	"time"

	"github.com/drover-project/drover/model"
)

// workerState is what the worker's parts share under one lock (mu): the
// units, the reports the leader has not acknowledged, and the times of
// the last contact with a leader. One lock, because every heartbeat must
// see a unit's end and its report in one step (a unit neither running
// nor reported would read to the leader as lost), and strict fencing
// must see the units with the contact it fences them by. Nothing that
// waits (I/O, a channel) is done with mu held.
type workerState struct {
	mu    sync.Mutex
	units map[unitKey]*unit
	// unacked holds the reports the leader has not acknowledged yet,
	// oldest first; each heartbeat carries all of them.
	unacked []report
	// lastContact is when the worker sent the last heartbeat or
	// registration that a leader answered (the send time, not the
	// answer's: the leader may have given up on the worker at any point
	// after it got the request). It starts as the previous worker's on
	// this work dir (see previousContact), zero when unknown: strict
	// fencing holds until a leader answers.
	lastContact time.Time
	// leaseContact is lastContact as the lease file reports it to the
	// runners (unitdir.LeaseContent's LeaderContact): it moves only once
	// the answer has been acted on, so a runner that sees it also finds
	// the stop file of any kill the answer asked for.
	leaseContact time.Time
	// relaunchDue is when the last runner still waiting for a leader's
	// answer before relaunching its program asked for one
	// (unitdir.EventRelaunchDue), zero when none waits: until a request
	// sent since then is answered, heartbeats do not long-poll, and each
	// answer is written to the lease file at once, for the runners that
	// asked earlier.
	relaunchDue time.Time
	// wake asks the session (non-blocking send, buffer 1) to heartbeat
	// now rather than at its next tick.
	wake chan struct{}
}

// report queues r for the leader and asks for a heartbeat now.
func (st *workerState) report(r report) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.queue(r)
}

// queue is report with the workerState's mu held. A RUNNING report replaces an
// unacknowledged one of the same unit, so a supervised program that keeps
// failing while the masters are away does not pile up one report per run.
// A staging report replaces the unit's unacknowledged staging report, and
// any later report drops it: only the latest word on a staging matters.
func (st *workerState) queue(r report) {
	st.unacked = slices.DeleteFunc(st.unacked, func(u report) bool {
		return u.key == r.key && (u.staging || (u.state == model.DriverRunning && r.state == model.DriverRunning && !r.staging))
	})
	st.unacked = append(st.unacked, r)
	st.poke()
}

// poke asks the loop for a heartbeat now.
func (st *workerState) poke() {
	select {
	case st.wake <- struct{}{}:
	default:
	}
}
