// Package model is Drover's data model: the rows of the replicated tables
// (workers, drivers with their attempts, applications, executors), their
// states with Spark's names, the payloads of the commands that change them,
// and the rules a command must meet on its own. It is a leaf: it imports
// no Raft, no gossip and no network code, so a program that only reads or
// submits (the client, a driver) links none of them. The Raft state machine
// that applies these commands is package fsm.
package model

import (
	"slices"
)

// DriverState is the lifecycle state of a driver, with the names of Spark's
// org.apache.spark.deploy.master.DriverState.
type DriverState string

// Driver states, as in Spark standalone.
const (
	// DriverSubmitted: accepted and either waiting for a worker or placed on
	// one that has not yet reported it running.
	DriverSubmitted DriverState = "SUBMITTED"
	// DriverRunning: the worker of the current attempt reported it started.
	DriverRunning DriverState = "RUNNING"
	// DriverFinished: the program exited 0.
	DriverFinished DriverState = "FINISHED"
	// DriverRelaunching: a supervised driver whose attempt was lost waits
	// for a new placement under a higher attempt number.
	DriverRelaunching DriverState = "RELAUNCHING"
	// DriverUnknown: the state could not be determined (kept for parity with
	// Spark; Drover does not currently produce it).
	DriverUnknown DriverState = "UNKNOWN"
	// DriverKilled: killed on request.
	DriverKilled DriverState = "KILLED"
	// DriverFailed: the program exited non-zero and is not supervised.
	DriverFailed DriverState = "FAILED"
	// DriverError: the program could not be launched, or an unsupervised
	// driver's worker was lost.
	DriverError DriverState = "ERROR"
)

// Terminal reports whether s is a final state: FINISHED, KILLED, FAILED or
// ERROR.
func (s DriverState) Terminal() bool {
	switch s {
	case DriverFinished, DriverKilled, DriverFailed, DriverError:
		return true
	}
	return false
}

// DriverStates returns every DriverState, in Spark's order.
func DriverStates() []DriverState {
	return []DriverState{DriverSubmitted, DriverRunning, DriverFinished, DriverRelaunching, DriverUnknown, DriverKilled, DriverFailed, DriverError}
}

// WorkerState is a worker's state in the workers table, with the names of
// Spark's org.apache.spark.deploy.master.WorkerState.
type WorkerState string

// Worker states, as in Spark standalone.
const (
	WorkerAlive          WorkerState = "ALIVE"
	WorkerDead           WorkerState = "DEAD"
	WorkerDecommissioned WorkerState = "DECOMMISSIONED"
	WorkerUnknown        WorkerState = "UNKNOWN"
)

// Driver is one row of the drivers table. Times are Unix milliseconds chosen
// by the leader; memory is in MiB (Spark's driver memory is in MB, too).
type Driver struct {
	ID    string `json:"id"`
	Name  string `json:"name,omitempty"`
	Token string `json:"token,omitempty"`
	// Client is the IP address the driver was submitted from
	// (SubmitDriver.Client), "" when its entry did not say.
	Client string `json:"client,omitempty"`
	DriverSpec

	State DriverState `json:"state"`
	// WorkerID is the worker of the current attempt; empty while the driver
	// waits in waitingDrivers.
	WorkerID string `json:"worker_id"`
	// Attempt is the current attempt number, counting from 1. A relaunch
	// raises it before the new placement, so reports about the previous
	// attempt are fenced off at once.
	Attempt int `json:"attempt"`
	// ExitCode is the exit code of the attempt that ended the driver, if any.
	ExitCode *int `json:"exit_code"`
	// Message says why the driver ended, or why it still waits.
	Message string `json:"message,omitempty"`
	// Staging says that Message is what the current attempt's staging of
	// its artifacts said last (AttemptReport.Staging): the driver is
	// SUBMITTED or RELAUNCHING on its worker, its program not started.
	// Both are cleared when the program starts; the attempt's end sets
	// its own message.
	Staging bool `json:"staging,omitempty"`
	// Schedule and Slot name the schedule and the slot (Unix ms) whose
	// FireSchedule made the driver; "" and 0 for every other driver, and
	// in rows written before schedules existed. A deleted schedule's
	// drivers keep its name.
	Schedule    string    `json:"schedule,omitempty"`
	Slot        int64     `json:"slot,omitempty"`
	SubmittedAt int64     `json:"submitted_at"`
	UpdatedAt   int64     `json:"updated_at"`
	Attempts    []Attempt `json:"attempts"`
	// ModifyIndex is the Raft index of the entry that last changed the
	// row (Nomad's ModifyIndex): a blocking read waits for it to pass an
	// index, and the event stream carries it.
	ModifyIndex uint64 `json:"modify_index,omitempty"`
}

// Attempt is one placement of a driver on a worker. Within one attempt a
// supervised driver may be run several times on the same worker (Spark's
// DriverRunner.runCommandWithRetry); Runs counts those launches.
type Attempt struct {
	Attempt   int         `json:"attempt"`
	WorkerID  string      `json:"worker_id"`
	State     DriverState `json:"state"`
	PlacedAt  int64       `json:"placed_at"`
	StartedAt int64       `json:"started_at,omitempty"`
	EndedAt   int64       `json:"ended_at,omitempty"`
	ExitCode  *int        `json:"exit_code"`
	Runs      int         `json:"runs,omitempty"`
	Reason    string      `json:"reason,omitempty"`
	// Resources are the addresses of its worker's custom resources the
	// attempt holds, chosen by the leader in its placement; they are
	// free again once the attempt ends.
	Resources Resources `json:"resources,omitempty"`
	// Failures are the ends (Unix ms, by the runner's clock) of the
	// attempt's failed runs that a bounded supervision counts, oldest
	// first, as its worker reported them; empty for an unbounded driver.
	Failures []int64 `json:"failures,omitempty"`
	// Rescheduled says the attempt ended after RescheduleAfter failed
	// runs in a row, so the next one avoids its worker.
	Rescheduled bool `json:"rescheduled,omitempty"`
	// PreemptedBy is the namespace a PreemptAttempts notice took the
	// attempt back for, and PreemptDeadline (Unix ms, the leader's clock)
	// when the leader ends it if its program has not ended by then;
	// empty and 0 for an attempt never preempted, as in every row before
	// preemption existed.
	PreemptedBy     string `json:"preempted_by,omitempty"`
	PreemptDeadline int64  `json:"preempt_deadline,omitempty"`
}

// Worker is one row of the workers table. Memory is in MiB.
type Worker struct {
	ID string `json:"id"`
	// Instance identifies the worker process's work dir; see
	// api.RegisterWorkerRequest. It is the secret that ties a heartbeat
	// to the process that registered, so it stays in the FSM (log entries
	// and snapshots) and no read shows it: reads copy rows with View.
	Instance string      `json:"instance,omitempty"`
	HTTPAddr string      `json:"http_addr"`
	Cores    int         `json:"cores"`
	MemoryMB int64       `json:"memory_mb"`
	State    WorkerState `json:"state"`
	// CoresUsed and MemoryUsedMB are the sums over the placed, unfinished
	// drivers and the live executors on this worker. They are kept by Apply and rebuilt on Restore.
	CoresUsed    int   `json:"cores_used"`
	MemoryUsedMB int64 `json:"memory_used_mb"`
	// Resources are the custom resources the worker offers (Spark's
	// spark.worker.resource.*), ResourcesUsed the addresses of them its
	// placed, unfinished drivers and live executors hold, each list
	// sorted; the latter is kept by Apply and rebuilt on Restore.
	Resources     Resources `json:"resources,omitempty"`
	ResourcesUsed Resources `json:"resources_used,omitempty"`
	// RegisteredAt is the worker's first registration, kept when it
	// registers again. UpdatedAt is the row's last change: a registration
	// while the worker is ALIVE, its loss or decommissioning otherwise.
	RegisteredAt int64  `json:"registered_at"`
	UpdatedAt    int64  `json:"updated_at"`
	Message      string `json:"message,omitempty"`
	// ModifyIndex is as Driver's.
	ModifyIndex uint64 `json:"modify_index,omitempty"`
}

// CoresFree is the number of cores not used by drivers or executors.
func (w *Worker) CoresFree() int { return w.Cores - w.CoresUsed }

// MemoryFreeMB is the memory, in MiB, not used by drivers or executors.
func (w *Worker) MemoryFreeMB() int64 { return w.MemoryMB - w.MemoryUsedMB }

// ResourcesFree is the addresses of the worker's custom resources that
// nothing holds, in the order of its offer.
func (w *Worker) ResourcesFree() Resources { return Free(w.Resources, w.ResourcesUsed) }

// CouldHold reports whether w, idle, could hold a unit asking for cores,
// memoryMB (MiB) and res: whether waiting for it can ever help
// (api.ReasonUnplaceable when no ALIVE worker could).
func (w *Worker) CouldHold(cores int, memoryMB int64, res ResourceAmounts) bool {
	return w.Cores >= cores && w.MemoryMB >= memoryMB && res.Fits(w.Resources.Counts())
}

// Clone returns a deep copy of w.
func (w *Worker) Clone() *Worker {
	c := *w
	c.Resources = w.Resources.Clone()
	c.ResourcesUsed = w.ResourcesUsed.Clone()
	return &c
}

// View returns a deep copy of w without its Instance: the row as reads of
// the tables (the API, events, the web UI, Spark's JSON) show it.
func (w *Worker) View() *Worker {
	c := w.Clone()
	c.Instance = ""
	return c
}

// Clone returns a deep copy of d: changing the copy changes nothing in d.
func (d *Driver) Clone() *Driver {
	c := *d
	c.DriverSpec = d.DriverSpec.Clone()
	c.ExitCode = CloneExitCode(d.ExitCode)
	c.Attempts = make([]Attempt, len(d.Attempts))
	for i, a := range d.Attempts {
		a.ExitCode = CloneExitCode(a.ExitCode)
		a.Resources = a.Resources.Clone()
		a.Failures = slices.Clone(a.Failures)
		c.Attempts[i] = a
	}
	return &c
}

// CloneExitCode returns a copy of an exit code, nil for nil.
func CloneExitCode(p *int) *int {
	if p == nil {
		return nil
	}
	return new(*p)
}

// CurrentAttempt returns the history record of the current attempt, or nil
// when the current attempt has not been placed yet.
func (d *Driver) CurrentAttempt() *Attempt {
	return d.AttemptRecord(d.Attempt)
}

// AttemptRecord returns the history record of attempt n, or nil when that
// attempt was never placed. The pointer is into d.Attempts.
func (d *Driver) AttemptRecord(n int) *Attempt {
	for i := len(d.Attempts) - 1; i >= 0; i-- {
		if d.Attempts[i].Attempt == n {
			return &d.Attempts[i]
		}
	}
	return nil
}
