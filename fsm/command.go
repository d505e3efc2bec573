package fsm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/drover-project/drover/internal/strictjson"
)

// CommandType names one kind of Raft log entry. Values are part of the log
// format and must never be reused.
type CommandType uint8

// Command types. Each has one payload struct and one apply function.
const (
	CmdRegisterWorker CommandType = 1
	CmdSubmitDriver   CommandType = 2
	CmdPlaceDrivers   CommandType = 3
	CmdReportAttempts CommandType = 4
	CmdKillDriver     CommandType = 5
	CmdWorkerLost     CommandType = 6
	// CmdDecommissionWorker is WorkerLost's graceful twin.
	CmdDecommissionWorker CommandType = 7
)

func (t CommandType) String() string {
	switch t {
	case CmdRegisterWorker:
		return "RegisterWorker"
	case CmdSubmitDriver:
		return "SubmitDriver"
	case CmdPlaceDrivers:
		return "PlaceDrivers"
	case CmdReportAttempts:
		return "ReportAttempts"
	case CmdKillDriver:
		return "KillDriver"
	case CmdWorkerLost:
		return "WorkerLost"
	case CmdDecommissionWorker:
		return "DecommissionWorker"
	}
	return fmt.Sprintf("CommandType(%d)", uint8(t))
}

// FormatVersion is the version byte that starts every encoded command. A
// master refuses entries of a version it does not know rather than guess.
const FormatVersion byte = 1

// MaxCommandSize bounds an encoded command, in bytes; Decode refuses larger
// input so a corrupt or hostile entry cannot make a master allocate without
// limit.
const MaxCommandSize = 8 << 20

// RegisterWorker adds a worker to the workers table or brings a known one
// back to ALIVE with the given address and resources (Spark's
// RegisterWorker, minus the duplicate-ID rejection: a worker that restarts or
// returns from a partition re-registers under its own ID).
type RegisterWorker struct {
	ID       string `json:"id"`
	Instance string `json:"instance,omitempty"`
	HTTPAddr string `json:"http_addr"`
	Cores    int    `json:"cores"`
	MemoryMB int64  `json:"memory_mb"`
	Time     int64  `json:"time"`
}

// SubmitDriver adds a driver to the drivers table and to the end of
// waitingDrivers. ID is made by the leader; Token is the client's submission
// token: a second command with a known token changes nothing and yields the
// first driver's ID.
type SubmitDriver struct {
	ID        string            `json:"id"`
	Token     string            `json:"token"`
	Name      string            `json:"name,omitempty"`
	Argv      []string          `json:"argv"`
	Env       map[string]string `json:"env,omitempty"`
	Cores     int               `json:"cores"`
	MemoryMB  int64             `json:"memory_mb"`
	Supervise bool              `json:"supervise"`
	Time      int64             `json:"time"`
}

// Placement puts attempt Attempt of driver DriverID on worker WorkerID.
type Placement struct {
	DriverID string `json:"driver_id"`
	Attempt  int    `json:"attempt"`
	WorkerID string `json:"worker_id"`
}

// PlaceDrivers commits a batch of the leader's placements. Each placement is
// checked again at apply time (driver still waiting with that attempt, worker
// ALIVE with room); one that no longer holds is skipped, the others apply.
type PlaceDrivers struct {
	Placements []Placement `json:"placements"`
	Time       int64       `json:"time"`
}

// AttemptReport is what a worker says about one attempt it runs: RUNNING,
// FINISHED (exit 0), FAILED (non-zero), KILLED, or ERROR (could not launch).
type AttemptReport struct {
	DriverID string      `json:"driver_id"`
	Attempt  int         `json:"attempt"`
	State    DriverState `json:"state"`
	ExitCode *int        `json:"exit_code,omitempty"`
	Runs     int         `json:"runs,omitempty"`
	Reason   string      `json:"reason,omitempty"`
}

// ReportAttempts commits a batch of reports from one worker. A report about
// an attempt other than the driver's current one, or from a worker other than
// the attempt's, only updates that attempt's history record.
type ReportAttempts struct {
	WorkerID string          `json:"worker_id"`
	Reports  []AttemptReport `json:"reports"`
	Time     int64           `json:"time"`
}

// KillDriver ends a driver on request: a waiting one leaves waitingDrivers, a
// placed one stops being assigned to its worker, which then kills it.
type KillDriver struct {
	DriverID string `json:"driver_id"`
	Reason   string `json:"reason,omitempty"`
	Time     int64  `json:"time"`
}

// WorkerLost marks a worker DEAD (Spark's Master.removeWorker): supervised
// drivers on it get the next attempt number and go back to waitingDrivers as
// RELAUNCHING; the others become ERROR.
type WorkerLost struct {
	WorkerID string `json:"worker_id"`
	Reason   string `json:"reason,omitempty"`
	Time     int64  `json:"time"`
}

// DecommissionWorker marks a worker that is shutting down on purpose
// DECOMMISSIONED (Spark's worker decommissioning): nothing new is placed on
// it. It then kills its drivers and reports them KILLED, which relaunches
// the supervised ones elsewhere. A decommissioned worker that registers
// again is ALIVE again.
type DecommissionWorker struct {
	WorkerID string `json:"worker_id"`
	Reason   string `json:"reason,omitempty"`
	Time     int64  `json:"time"`
}

// Encode returns the log entry for a command: FormatVersion, the type byte,
// then the payload as JSON.
func Encode(t CommandType, payload any) ([]byte, error) {
	body, err := json.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", t, err)
	}
	out := make([]byte, 0, len(body)+2)
	out = append(out, FormatVersion, byte(t))
	return append(out, body...), nil
}

// ErrMalformed wraps every decoding failure.
var ErrMalformed = errors.New("malformed command")

// Decode parses a log entry made by Encode into its type and a pointer to its
// payload struct. Unknown versions, types or fields, trailing data and
// oversize entries are errors wrapping ErrMalformed.
func Decode(b []byte) (CommandType, any, error) {
	if len(b) < 2 {
		return 0, nil, fmt.Errorf("%w: %d bytes", ErrMalformed, len(b))
	}
	if len(b) > MaxCommandSize {
		return 0, nil, fmt.Errorf("%w: %d bytes exceeds %d", ErrMalformed, len(b), MaxCommandSize)
	}
	if b[0] != FormatVersion {
		return 0, nil, fmt.Errorf("%w: format version %d, want %d", ErrMalformed, b[0], FormatVersion)
	}
	t := CommandType(b[1])
	var payload any
	switch t {
	case CmdRegisterWorker:
		payload = new(RegisterWorker)
	case CmdSubmitDriver:
		payload = new(SubmitDriver)
	case CmdPlaceDrivers:
		payload = new(PlaceDrivers)
	case CmdReportAttempts:
		payload = new(ReportAttempts)
	case CmdKillDriver:
		payload = new(KillDriver)
	case CmdWorkerLost:
		payload = new(WorkerLost)
	case CmdDecommissionWorker:
		payload = new(DecommissionWorker)
	default:
		return 0, nil, fmt.Errorf("%w: unknown type %d", ErrMalformed, b[1])
	}
	if err := strictjson.Decode(bytes.NewReader(b[2:]), payload); err != nil {
		return 0, nil, fmt.Errorf("%w: %s: %v", ErrMalformed, t, err)
	}
	return t, payload, nil
}
