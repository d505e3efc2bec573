package model

import (
	"strconv"
	"strings"
)

// ApplicationState is the lifecycle state of an application, with the names
// of Spark's org.apache.spark.deploy.master.ApplicationState.
type ApplicationState string

// Application states, as in Spark standalone.
const (
	// AppWaiting: registered, no executor has reported RUNNING yet.
	AppWaiting ApplicationState = "WAITING"
	// AppRunning: at least one executor has reported RUNNING.
	AppRunning ApplicationState = "RUNNING"
	// AppFinished: unregistered by its client, or its driver finished.
	AppFinished ApplicationState = "FINISHED"
	// AppFailed: its executors failed too often in a row, its driver
	// failed, or its client stopped talking to the masters.
	AppFailed ApplicationState = "FAILED"
	// AppKilled: killed on request, or its driver was killed.
	AppKilled ApplicationState = "KILLED"
	// AppUnknown is kept for parity with Spark; Drover does not produce it.
	AppUnknown ApplicationState = "UNKNOWN"
)

// Terminal reports whether s is a final state: FINISHED, FAILED or KILLED.
func (s ApplicationState) Terminal() bool {
	switch s {
	case AppFinished, AppFailed, AppKilled:
		return true
	}
	return false
}

// ApplicationStates returns every ApplicationState, in Spark's order.
func ApplicationStates() []ApplicationState {
	return []ApplicationState{AppWaiting, AppRunning, AppFinished, AppFailed, AppKilled, AppUnknown}
}

// ExecutorState is the state of one executor, with the names of Spark's
// org.apache.spark.deploy.ExecutorState.
type ExecutorState string

// Executor states, as in Spark standalone.
const (
	// ExecLaunching: placed on a worker that has not reported it started.
	ExecLaunching ExecutorState = "LAUNCHING"
	// ExecRunning: its worker reported the process started.
	ExecRunning ExecutorState = "RUNNING"
	// ExecKilled: killed on request, because its application ended, or by
	// its worker while shutting down.
	ExecKilled ExecutorState = "KILLED"
	// ExecFailed: the process exited non-zero or could not be launched.
	ExecFailed ExecutorState = "FAILED"
	// ExecLost: its worker was lost.
	ExecLost ExecutorState = "LOST"
	// ExecExited: the process exited 0.
	ExecExited ExecutorState = "EXITED"
)

// Terminal reports whether s is a final state: KILLED, FAILED, LOST or
// EXITED.
func (s ExecutorState) Terminal() bool {
	switch s {
	case ExecKilled, ExecFailed, ExecLost, ExecExited:
		return true
	}
	return false
}

// ExecutorStateOf maps a run's state, as a runner reports it in driver
// terms, to an executor's: RUNNING, EXITED for FINISHED, KILLED, and FAILED
// for FAILED or ERROR (a program that could not be launched, as in Spark).
func ExecutorStateOf(s DriverState) ExecutorState {
	switch s {
	case DriverRunning:
		return ExecRunning
	case DriverFinished:
		return ExecExited
	case DriverKilled:
		return ExecKilled
	default:
		return ExecFailed
	}
}

// App is one row of the apps table (Spark's ApplicationInfo). Memory is in
// MiB, times Unix milliseconds chosen by the leader.
type App struct {
	ID    string `json:"id"`
	Name  string `json:"name,omitempty"`
	Token string `json:"token,omitempty"`
	// DriverID and DriverAttempt name the driver attempt that registered
	// the application, if any: when that attempt ends, so does the app.
	DriverID      string `json:"driver_id,omitempty"`
	DriverAttempt int    `json:"driver_attempt,omitempty"`
	// DriverRun is the run of that attempt (its DROVER_RUN), if known: a
	// supervised driver restarted in place is a new run, and the apps of
	// earlier runs end.
	DriverRun int `json:"driver_run,omitempty"`
	// Namespace is the namespace the app and its executors belong to:
	// its driver's, or the one its registration named; "" for
	// DefaultNamespace.
	Namespace string `json:"namespace,omitempty"`
	// ExecutorSpec is what each executor runs and how many may run; of
	// its fields, RequestExecutors and KillExecutors change ExecutorLimit.
	ExecutorSpec

	State ApplicationState `json:"state"`
	// RetryCount counts executor failures since the last executor that
	// exited 0 (Spark's ApplicationInfo.retryCount).
	RetryCount int `json:"retry_count"`
	// NextExecutorID is the ID the next executor gets; IDs count from 0.
	NextExecutorID int `json:"next_executor_id"`
	// FirstExecutorID is the lowest ID that may still have a row: rows of
	// finished executors beyond RetainedExecutors are dropped, oldest
	// first.
	FirstExecutorID int `json:"first_executor_id,omitempty"`
	// CoresGranted is the sum of the cores of live executors. It is kept
	// by Apply and rebuilt on Restore.
	CoresGranted int    `json:"cores_granted"`
	Message      string `json:"message,omitempty"`
	SubmittedAt  int64  `json:"submitted_at"`
	UpdatedAt    int64  `json:"updated_at"`
	EndedAt      int64  `json:"ended_at,omitempty"`
	// ModifyIndex is as Driver's.
	ModifyIndex uint64 `json:"modify_index,omitempty"`
}

// RetainedExecutors is how many finished executors an app keeps in the
// executors table; older ones are dropped, so an app whose executors keep
// ending holds a bounded history.
const RetainedExecutors = 100

// CoresLeft is how many more cores the app may be granted: -1 when
// MaxCores is 0 (no cap).
func (a *App) CoresLeft() int {
	if a.MaxCores == 0 {
		return -1
	}
	return max(a.MaxCores-a.CoresGranted, 0)
}

// Executor is one row of the executors table (Spark's ExecutorDesc). ID
// counts from 0 within its app; a replacement gets a new ID.
type Executor struct {
	AppID    string `json:"app_id"`
	ID       int    `json:"id"`
	WorkerID string `json:"worker_id"`
	Cores    int    `json:"cores"`
	MemoryMB int64  `json:"memory_mb"`
	// Resources are the worker's addresses the executor holds while it
	// lives.
	Resources Resources     `json:"resources,omitempty"`
	State     ExecutorState `json:"state"`
	ExitCode  *int          `json:"exit_code"`
	Message   string        `json:"message,omitempty"`
	// Staging says that Message is what the executor's staging of its
	// artifacts said last (ExecutorReport.Staging), while it is
	// LAUNCHING; both are cleared when it runs.
	Staging    bool  `json:"staging,omitempty"`
	LaunchedAt int64 `json:"launched_at"`
	StartedAt  int64 `json:"started_at,omitempty"`
	EndedAt    int64 `json:"ended_at,omitempty"`
	// PreemptedBy and PreemptDeadline are Attempt's, for an executor
	// under a preemption notice.
	PreemptedBy     string `json:"preempted_by,omitempty"`
	PreemptDeadline int64  `json:"preempt_deadline,omitempty"`
	// ModifyIndex is as Driver's.
	ModifyIndex uint64 `json:"modify_index,omitempty"`
}

// ExecutorKey is the executors table's key for executor id of app: APP_ID/ID.
func ExecutorKey(appID string, id int) string {
	return appID + "/" + strconv.Itoa(id)
}

// ParseExecutorKey splits an ExecutorKey; ok is false if s is not one.
func ParseExecutorKey(s string) (appID string, id int, ok bool) {
	i := strings.LastIndexByte(s, '/')
	if i <= 0 {
		return "", 0, false
	}
	id, err := strconv.Atoi(s[i+1:])
	if err != nil || id < 0 {
		return "", 0, false
	}
	return s[:i], id, true
}

// Clone returns a deep copy of a.
func (a *App) Clone() *App {
	c := *a
	c.ExecutorSpec = a.ExecutorSpec.Clone()
	return &c
}

// Clone returns a deep copy of e.
func (e *Executor) Clone() *Executor {
	c := *e
	c.ExitCode = CloneExitCode(e.ExitCode)
	c.Resources = e.Resources.Clone()
	return &c
}
