package unitdir

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/drover-project/drover/internal/strictjson"
	"github.com/drover-project/drover/model"
)

// EventKind names a line of the runner's progress stream.
type EventKind string

// The events a runner writes on its stdout, one JSON object a line.
const (
	// EventStarted: run Run of the program started with process ID PID,
	// which is also its process group ID.
	EventStarted EventKind = "started"
	// EventExited: run Run ended with Code (128+N when killed by signal N).
	EventExited EventKind = "exited"
	// EventFinal: the attempt ended in State after Runs launches; it is
	// always the last line.
	EventFinal EventKind = "final"
	// EventStaged: the artifacts are in place, before the first run;
	// Fetched of them were downloaded into the cache rather than found
	// there.
	EventStaged EventKind = "staged"
	// EventStaging: what the staging of the artifacts says changed, to
	// Reason: a failed try of a download that is tried again
	// (artifact.Retry), or a failed staging and the pause before the
	// next (a supervised attempt). One per change; the program has not
	// started.
	EventStaging EventKind = "staging"
	// EventRelaunchDue: the back-off after run Run is over, and the
	// runner waits for a leader to answer its worker before the next run
	// (Spec.RelaunchAfterContact).
	EventRelaunchDue EventKind = "relaunch-due"
)

// Event is one line of the runner's stdout. Fields not meaningful for a kind
// are omitted.
type Event struct {
	Event EventKind `json:"event"`
	// Time is when the runner saw what the event says.
	Time time.Time `json:"time"`
	PID  int       `json:"pid,omitempty"`
	Run  int       `json:"run,omitempty"`
	// Code is the exit code of an exited event.
	Code *int `json:"code,omitempty"`
	// State is FINISHED, FAILED, KILLED or ERROR in a final event.
	State    model.DriverState `json:"state,omitempty"`
	ExitCode *int              `json:"exit_code,omitempty"`
	Runs     int               `json:"runs,omitempty"`
	Reason   string            `json:"reason,omitempty"`
	Fetched  int               `json:"fetched,omitempty"`
	// Failures and Reschedule are Status's, in started and final events.
	Failures   []int64 `json:"failures,omitempty"`
	Reschedule bool    `json:"reschedule,omitempty"`
	// Tethered says that the runner follows the daemon its lease file
	// names (LeaseContent): it ends its program as soon as that daemon
	// dies without detaching. A runner of an older version, adopted by a
	// newer daemon after an upgrade, leaves it out, and its program may
	// outlive a crash of that daemon by the lease.
	Tethered bool `json:"tethered,omitempty"`
}

// Status is the content of StatusFile: the runner's latest word on its
// attempt, kept on disk so that a worker that did not see the event stream
// (it restarted, or the runner died mid-line) can still learn the outcome.
type Status struct {
	// State is SUBMITTED while the runner stages the artifacts (Staging),
	// RUNNING from the first launch until the attempt ends (back-off
	// pauses included), then the final state.
	State model.DriverState `json:"state"`
	// Staging says the runner is staging the artifacts, or waiting to try
	// again after a failure (Reason says which); the program has not
	// started.
	Staging bool `json:"staging,omitempty"`
	// RunnerPID is the runner's own process ID.
	RunnerPID int `json:"runner_pid"`
	// PID is the process (and process group) ID of the live run; 0 when no
	// run is live.
	PID int `json:"pid,omitempty"`
	// Runs counts launches so far.
	Runs int `json:"runs"`
	// ExitCode is the last run's exit code, if a run has ended.
	ExitCode *int   `json:"exit_code,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// MemoryPeakBytes and CPUMicros are what the unit's cgroup measured
	// until the last run ended (isolation.Usage), over all the runs;
	// absent without isolation.
	MemoryPeakBytes uint64 `json:"memory_peak_bytes,omitempty"`
	CPUMicros       uint64 `json:"cpu_usec,omitempty"`
	// UpdatedAt is when the runner wrote this, in Unix milliseconds.
	UpdatedAt int64 `json:"updated_at"`
	// Failures are the ends (Unix ms, the runner's clock) of this
	// attempt's failed runs that its restart bounds count, oldest first;
	// empty when unbounded. Reschedule, in a FAILED final state, says the
	// attempt gave up on its worker after RescheduleAfter of them in a
	// row. Both outlive the worker in this file, so a worker that adopts
	// the runner reports them.
	Failures   []int64 `json:"failures,omitempty"`
	Reschedule bool    `json:"reschedule,omitempty"`
	// Tethered says that the runner follows the daemon its lease file
	// names (LeaseContent): it ends its program as soon as that daemon
	// dies without detaching. A runner of an older version, adopted by a
	// newer daemon after an upgrade, leaves it out, and its program may
	// outlive a crash of that daemon by the lease.
	Tethered bool `json:"tethered,omitempty"`
}

// WriteStatus writes st into dir/StatusFile, whole or not at all,
// readable by its owner only: the runner does, after every change.
func WriteStatus(dir string, st Status) error {
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encode status: %w", err)
	}
	return writeFileAtomic(dir, StatusFile, b, private)
}

// ReadStatus returns the Status a runner last wrote in dir. The error wraps
// fs.ErrNotExist when the runner never wrote one (it had not launched yet).
func ReadStatus(dir string) (Status, error) {
	return readFile[Status](dir, StatusFile)
}

// readFile decodes dir/name strictly into a T. An error opening it is
// os.Open's (fs.ErrNotExist when it is missing); a decoding error names
// the file.
func readFile[T any](dir, name string) (T, error) {
	var v T
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		return v, err
	}
	defer f.Close()
	if err := strictjson.Decode(f, &v); err != nil {
		return v, fmt.Errorf("%s: %v", name, err)
	}
	return v, nil
}
