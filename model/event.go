package model

import "errors"

// EventKind is what an Event is about: one of the five tables.
type EventKind string

// Event kinds, one per table.
const (
	EventDriver   EventKind = "driver"
	EventApp      EventKind = "app"
	EventExecutor EventKind = "executor"
	EventWorker   EventKind = "worker"
	// EventSchedule is a schedule's row: created, suspended or resumed,
	// each slot fired, skipped or counted missed (its counts,
	// LastSkipReason and Runs), deleted. The driver a fire starts has an
	// event of its own, naming the schedule and the slot.
	EventSchedule EventKind = "schedule"
)

// Event ops: a row was added or changed (upsert) or dropped (delete), or,
// on a stream that resumes from an index older than the master still
// holds, reset: the events between are lost, and the current rows follow
// as upserts.
const (
	OpUpsert = "upsert"
	OpDelete = "delete"
	OpReset  = "reset"
)

// Event is one change of one row, as GET /v1/events streams it (Nomad's
// event stream in Drover's tables): the Raft Index of the entry that made
// it, the row's kind and ID (an executor's is APP_ID/N), and the row after
// the change in the field of its kind (none for a delete). One entry can
// change several rows; their events share its index and come in the same
// order on every master. The FSM makes them and the API streams them as
// they are (api.Event is this type), so the rows have one shape in both.
type Event struct {
	Index    uint64    `json:"index"`
	Kind     EventKind `json:"kind,omitempty"`
	ID       string    `json:"id,omitempty"`
	Op       string    `json:"op"`
	Driver   *Driver   `json:"driver,omitempty"`
	App      *App      `json:"app,omitempty"`
	Executor *Executor `json:"executor,omitempty"`
	Worker   *Worker   `json:"worker,omitempty"`
	Schedule *Schedule `json:"schedule,omitempty"`
}

// AttemptRef names one attempt of one driver: what a worker says it runs
// and the tables say it should run (api.AttemptRef is this type).
type AttemptRef struct {
	DriverID string `json:"driver_id"`
	Attempt  int    `json:"attempt"`
}

// ErrUnavailable is an answer that cannot be given now but may be on a
// retry: no leader, a commit not confirmed, an event stream that fell
// behind. api.ErrUnavailable is this error, so the API's table of codes
// maps it to 503 wherever it comes from.
var ErrUnavailable = errors.New("unavailable")
