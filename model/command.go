package model

// CommandType names one kind of Raft log entry. Values are part of the log
// format, which is forever: a value is never reused, and a command's
// meaning never changes under its value, since every master replays old
// entries with the code it runs now. A change of meaning is a new type.
// Values stay below 0x80, the type byte's bit for fsm.IgnoreUnknownTypeFlag.
type CommandType uint8

// Command types. Each has one payload struct, which returns it from its
// CommandType method, and one apply function, registered with it in
// package fsm. The constant's name, without Cmd, is the command's name in
// logs and errors (CommandType.String, made by stringer: run go generate
// after adding one).
const (
	CmdRegisterWorker CommandType = 1
	CmdSubmitDriver   CommandType = 2
	CmdPlaceDrivers   CommandType = 3
	CmdReportAttempts CommandType = 4
	CmdKillDriver     CommandType = 5
	CmdWorkerLost     CommandType = 6
	// CmdDecommissionWorker is WorkerLost's graceful twin.
	CmdDecommissionWorker CommandType = 7
	CmdRegisterApp        CommandType = 8
	CmdPlaceExecutors     CommandType = 9
	CmdRequestExecutors   CommandType = 10
	CmdKillExecutors      CommandType = 11
	CmdEndApp             CommandType = 12
	// CmdPruneCompleted drops finished drivers and apps beyond the
	// leader's retention counts.
	CmdPruneCompleted CommandType = 13
	// CmdSubmitDrivers is many SubmitDrivers in one entry: the leader
	// commits concurrent submissions together.
	CmdSubmitDrivers CommandType = 14
	// CmdReportBatch is many workers' ReportAttempts in one entry.
	CmdReportBatch CommandType = 15
	// CmdApplyNamespace, CmdDeleteNamespace, CmdCreateACLToken and
	// CmdRevokeACLToken keep the namespaces and ACL tokens tables.
	CmdApplyNamespace  CommandType = 16
	CmdDeleteNamespace CommandType = 17
	CmdCreateACLToken  CommandType = 18
	CmdRevokeACLToken  CommandType = 19
	// CmdPreemptAttempts gives notice to running attempts and executors
	// that they are preempted, and later ends them.
	CmdPreemptAttempts CommandType = 20
	// CmdCreateSchedule, CmdDeleteSchedule, CmdSuspendSchedule and
	// CmdFireSchedule keep the schedules table; a fire also submits its
	// run's driver.
	CmdCreateSchedule  CommandType = 21
	CmdDeleteSchedule  CommandType = 22
	CmdSuspendSchedule CommandType = 23
	CmdFireSchedule    CommandType = 24
)

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
	// Resources are the custom resources the worker offers; absent in
	// entries written before they existed, which offer none.
	Resources Resources `json:"resources,omitempty"`
	Time      int64     `json:"time"`
}

// SubmitDriver adds a driver to the drivers table and to the end of
// waitingDrivers. ID is made by the leader; Token is the client's submission
// token: a second command with a known token changes nothing and yields the
// first driver's ID.
type SubmitDriver struct {
	ID    string `json:"id"`
	Token string `json:"token"`
	Name  string `json:"name,omitempty"`
	// DriverSpec is the program; the fields it gained after the first
	// release (artifacts, resources, restart bounds, user) are absent in
	// entries written before them, and their zero values mean what those
	// entries meant: nothing staged, no resources, unbounded supervision,
	// the worker's default user.
	DriverSpec
	Time int64 `json:"time"`
	// Client is the IP address the submission came from, at the master
	// it reached first (auth.Caller.Client): the key the leader's
	// per-client bound on drivers not yet ended counts it under, which
	// the row keeps so that every master, and so any later leader,
	// counts alike. "" in entries written before it existed, which count
	// under no client.
	Client string `json:"client,omitempty"`
}

// SubmitDrivers is a batch of submissions the leader received at about the
// same time, committed as one Raft entry so that they share its disk write
// and replication instead of paying for one entry each (group commit). Each
// submission applies as a SubmitDriver of its own would, in order: one that
// is refused changes nothing and does not stop the others, and a token
// already known, from an earlier entry or earlier in this batch, yields
// the first driver's ID. An empty batch is refused.
type SubmitDrivers struct {
	Drivers []SubmitDriver `json:"drivers"`
}

// Placement puts attempt Attempt of driver DriverID on worker WorkerID.
// Resources are the worker's addresses the attempt holds: exactly the
// amounts the driver asks for, each address free when the placement
// applies (absent in older entries, whose drivers ask for none).
type Placement struct {
	DriverID  string    `json:"driver_id"`
	Attempt   int       `json:"attempt"`
	WorkerID  string    `json:"worker_id"`
	Resources Resources `json:"resources,omitempty"`
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
	// Failures are the ends (Unix ms) of the attempt's failed runs that
	// its bounded supervision counts, all that the runner kept, oldest
	// first: each report carries them all, so the latest is right.
	Failures []int64 `json:"failures,omitempty"`
	// Reschedule, on a FAILED report of a supervised attempt, says the
	// runner gave up on this worker after RescheduleAfter failed runs in
	// a row: the driver is relaunched, away from this worker when another
	// has room, rather than ended. False keeps a FAILED report's old
	// meaning: the driver ends FAILED.
	Reschedule bool `json:"reschedule,omitempty"`
	// Staging, on a SUBMITTED report, says the attempt's program has not
	// started because its artifacts are being staged, and Reason is what
	// the staging says now: "fetch URL: 503 Service Unavailable, try 3,
	// next in 4s". Workers send one per change, and the leader commits
	// one only when it changes the driver's message. False keeps a
	// report's old meaning: older entries have none.
	Staging bool `json:"staging,omitempty"`
}

// MaxStagingReason bounds the Reason of a Staging report, in bytes: a
// URL and a one-line cause fit. The runner cuts a longer line; the leader
// refuses a heartbeat that carries one.
const MaxStagingReason = 1024

// ExecutorReport is what a worker says about one executor it runs (Spark's
// ExecutorStateChanged): RUNNING, EXITED (exit 0), FAILED (non-zero, or
// could not launch) or KILLED (by the worker, unasked: it is shutting down).
type ExecutorReport struct {
	AppID      string        `json:"app_id"`
	ExecutorID int           `json:"executor_id"`
	State      ExecutorState `json:"state"`
	ExitCode   *int          `json:"exit_code,omitempty"`
	Reason     string        `json:"reason,omitempty"`
	// Staging, on a LAUNCHING report, is AttemptReport.Staging for an
	// executor: Reason is what its staging says now.
	Staging bool `json:"staging,omitempty"`
}

// ReportAttempts commits a batch of reports from one worker about its
// driver attempts and its executors. A report about an attempt other than
// the driver's current one, or from a worker other than the attempt's, only
// updates that attempt's history record; a report about an executor that
// has ended or lives on another worker is ignored.
type ReportAttempts struct {
	WorkerID  string           `json:"worker_id"`
	Reports   []AttemptReport  `json:"reports"`
	Executors []ExecutorReport `json:"executors,omitempty"`
	Time      int64            `json:"time"`
}

// ReportBatch commits the heartbeat reports of several workers in one
// entry: each ReportAttempts applies in order, exactly as it would as an
// entry of its own, with its own worker and time. The leader gathers the
// reports that arrive while the previous batch commits, so that a
// thousand workers reporting at once cost a few entries rather than a
// thousand.
type ReportBatch struct {
	Reports []ReportAttempts `json:"reports"`
}

// KillDriver ends a driver on request: a waiting one leaves waitingDrivers, a
// placed one stops being assigned to its worker, which then kills it.
type KillDriver struct {
	DriverID string `json:"driver_id"`
	Reason   string `json:"reason,omitempty"`
	Time     int64  `json:"time"`
	// AttemptReason says Reason is also the reason of the driver's current
	// attempt, which its worker's final report (KILLED, "no longer
	// assigned to worker w1") then ends without replacing: who asked for
	// the kill is the master's to say, the worker knows only that the
	// attempt was taken from it. False, as in entries written before the
	// field, leaves the attempt's reason to that report.
	AttemptReason bool `json:"attempt_reason,omitempty"`
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

// RegisterApp adds an application (Spark's RegisterApplication). ID is made
// by the leader in Spark's form app-<yyyyMMddHHmmss>-<seq>; Token works as
// SubmitDriver's does. DriverID and DriverAttempt, when set, must name the
// current attempt of an unfinished driver; DriverRun, when set, must not be
// older than the runs its worker has reported. ExecutorLimit is -1 for no cap;
// MaxExecutorRetries is -1 for never failing the app.
type RegisterApp struct {
	ID            string `json:"id"`
	Token         string `json:"token"`
	Name          string `json:"name,omitempty"`
	DriverID      string `json:"driver_id,omitempty"`
	DriverAttempt int    `json:"driver_attempt,omitempty"`
	DriverRun     int    `json:"driver_run,omitempty"`
	// Namespace is the app's (App.Namespace): the leader sets its
	// driver's; absent in older entries, for DefaultNamespace.
	Namespace           string            `json:"namespace,omitempty"`
	MaxCores            int               `json:"max_cores"`
	CoresPerExecutor    int               `json:"cores_per_executor"`
	MemoryPerExecutorMB int64             `json:"memory_per_executor_mb"`
	ExecutorLimit       int               `json:"executor_limit"`
	Argv                []string          `json:"argv"`
	Env                 map[string]string `json:"env,omitempty"`
	MaxExecutorRetries  int               `json:"max_executor_retries"`
	// Artifacts are staged into each executor's directory; normalized
	// (NormalizeArtifact), absent in older entries.
	Artifacts []Artifact `json:"artifacts,omitempty"`
	// ResourcesPerExecutor are the custom resources each executor needs;
	// absent in older entries, whose executors need none.
	ResourcesPerExecutor ResourceAmounts `json:"resources_per_executor,omitempty"`
	// User is the user the app's executors run as (CheckUser), resolved
	// by the leader before the entry is made (the registering driver's,
	// unless the request named one); absent in older entries, whose
	// executors run as their worker's default user, as "" still means.
	User string `json:"user,omitempty"`
	Time int64  `json:"time"`
}

// ExecutorPlacement puts executor ExecutorID of app AppID on worker
// WorkerID. ExecutorID must be the app's NextExecutorID when it applies, so
// a placement committed twice makes one executor. Resources are the
// addresses it holds, as Placement's are.
type ExecutorPlacement struct {
	AppID      string    `json:"app_id"`
	ExecutorID int       `json:"executor_id"`
	WorkerID   string    `json:"worker_id"`
	Resources  Resources `json:"resources,omitempty"`
}

// PlaceExecutors commits a batch of the leader's executor placements. Each
// is checked again at apply time (app unfinished, under its core cap and
// executor limit, worker ALIVE with room); one that no longer holds is
// skipped, the others apply.
type PlaceExecutors struct {
	Placements []ExecutorPlacement `json:"placements"`
	Time       int64               `json:"time"`
}

// RequestExecutors sets an app's ExecutorLimit to Total (Spark's
// RequestExecutors): the scheduler places more when it rises; lowering it
// kills nothing, so live executors above it stay until they end.
type RequestExecutors struct {
	AppID string `json:"app_id"`
	Total int    `json:"total"`
	Time  int64  `json:"time"`
}

// KillExecutors kills live executors of an app and lowers its executor
// limit by as many, so they are not replaced (Spark's KillExecutors with
// the target adjusted). All IDs must name executors of the app.
type KillExecutors struct {
	AppID       string `json:"app_id"`
	ExecutorIDs []int  `json:"executor_ids"`
	Time        int64  `json:"time"`
}

// EndApp ends an unfinished application in State (FINISHED, FAILED or
// KILLED) and kills its live executors: Spark's UnregisterApplication, a
// kill from an operator, or the leader giving up on a silent client.
type EndApp struct {
	AppID  string           `json:"app_id"`
	State  ApplicationState `json:"state"`
	Reason string           `json:"reason,omitempty"`
	Time   int64            `json:"time"`
}

// PruneCompleted removes finished drivers and apps, with their tokens and
// executors (Spark's spark.deploy.retainedDrivers and retainedApplications).
// The leader picks the oldest beyond its retention counts; an ID that is
// unknown or not finished is skipped.
type PruneCompleted struct {
	DriverIDs []string `json:"driver_ids,omitempty"`
	AppIDs    []string `json:"app_ids,omitempty"`
}

// ApplyNamespace creates a namespace, or replaces the settings of one that
// exists, keeping its CreatedAt. Lowering its quota ends nothing (Quota).
type ApplyNamespace struct {
	Namespace Namespace `json:"namespace"`
	Time      int64     `json:"time"`
}

// DeleteNamespace drops a namespace that holds no driver or app that has
// not ended (ErrNamespaceInUse otherwise), and takes it from every ACL
// token that names it. DefaultNamespace cannot be deleted: its row goes,
// and it is ImplicitDefault again. Ended drivers and apps keep its name.
type DeleteNamespace struct {
	Name string `json:"name"`
	Time int64  `json:"time"`
}

// CreateACLToken adds an ACL token, made by the master that received the
// request (accessor, the secret's hash, CreatedAt); every namespace it
// names must exist, and neither its accessor nor its hash may be taken.
type CreateACLToken struct {
	Token ACLToken `json:"token"`
	Time  int64    `json:"time"`
}

// RevokeACLToken drops an ACL token: every master refuses it from the
// entry's index on.
type RevokeACLToken struct {
	Accessor string `json:"accessor"`
	Time     int64  `json:"time"`
}

// Preemption names one unit a PreemptAttempts entry preempts: attempt
// Attempt of driver DriverID, or executor ExecutorID of app AppID (AppID
// set), and By, the namespace it is taken back for.
type Preemption struct {
	DriverID   string `json:"driver_id,omitempty"`
	Attempt    int    `json:"attempt,omitempty"`
	AppID      string `json:"app_id,omitempty"`
	ExecutorID int    `json:"executor_id,omitempty"`
	By         string `json:"by,omitempty"`
}

// Executor says whether p names an executor rather than a driver attempt.
func (p Preemption) Executor() bool { return p.AppID != "" }

// PreemptAttempts is the leader's fair-share preemption (YARN's
// preemption monitor, Kueue's preemption), in two forms. The notice (End
// false) marks each named unit, still running its current attempt or
// live, as preempted by its By namespace until Deadline (Unix ms): its
// worker sends the program SIGTERM at once and it keeps its cores, memory
// and resources until it ends. The end (End true) ends each named unit
// under notice as preempted: a supervised driver is relaunched
// (RELAUNCHING, "preempted by namespace X"), with no failed run counted
// against its restart bounds; an unsupervised one ends KILLED with that
// reason; an executor ends KILLED and counts no retry of its app. A unit
// whose state no longer holds (already noticed, ended, superseded, of
// By's own namespace) is skipped, as PlaceDrivers skips placements; a
// report of a unit's exit after its notice ends it the same way. A
// command with no item, an item that names neither or both kinds of
// unit, a notice without By or whose Deadline is before Time is refused.
type PreemptAttempts struct {
	Items    []Preemption `json:"items"`
	Deadline int64        `json:"deadline,omitempty"`
	End      bool         `json:"end,omitempty"`
	Time     int64        `json:"time"`
}

// PreemptedReason is the reason a unit preempted for namespace by ends
// with, and its driver waits with when it is relaunched.
func PreemptedReason(by string) string { return "preempted by namespace " + by }

// CreateSchedule adds a schedule with the settings of Schedule (its
// progress fields are ignored) and CreatedAt Time. Refused when the name
// is taken (ErrScheduleExists), the settings fail CheckSchedule, the
// template's namespace does not exist (ErrUnknownNamespace) or the
// cluster has MaxSchedules.
type CreateSchedule struct {
	Schedule Schedule `json:"schedule"`
	Time     int64    `json:"time"`
}

// DeleteSchedule drops a schedule. Its runs that have not ended go on,
// and keep its name in their Driver.Schedule.
type DeleteSchedule struct {
	Name string `json:"name"`
	Time int64  `json:"time"`
}

// SuspendSchedule suspends a schedule (Suspended true) or resumes it
// (false): while suspended none of its slots fires, and on resume the
// slots it passed are counted missed but the latest, which fires if
// within the starting deadline, as after an outage. A manual run is
// allowed while suspended: it is an operator's explicit request.
type SuspendSchedule struct {
	Name      string `json:"name"`
	Suspended bool   `json:"suspended"`
	Time      int64  `json:"time"`
}

// FireSchedule accounts one slot of a schedule and starts its run, as
// the leader computed it (master/schedule.Due): Slot (Unix ms) is the
// slot, Missed the due slots after the last accounted one and before
// Slot, counted missed, DSTSkipped the local times in that span that did
// not exist. Late says Slot itself is past the starting deadline:
// counted missed, no driver. Otherwise DriverID and Time are the run's
// driver's ID and submission time.
//
// A slot at or before the schedule's Since is refused (ErrSlotAccounted),
// so each slot fires at most once whatever the leaders, their clocks or
// retries do; a suspended schedule refuses it too (ErrScheduleSuspended).
// A slot that passes is accounted whatever follows: forbid skips it
// while a run has not ended, replace kills those runs (as KillDriver,
// in this entry), and a submission the template makes that would be
// refused (its namespace full or gone) skips it with the refusal as the
// reason.
//
// Manual is a run asked for by an operator (`schedule run`): Slot is
// its own instant, it does not move the last accounted slot, is not
// refused by it nor by suspension, and counts in ManualRuns only. It
// follows the concurrency policy; a submission refused, or a forbid
// skip, refuses or skips it without any trace, and carries no
// Missed, DSTSkipped or Late.
type FireSchedule struct {
	Name       string `json:"name"`
	Slot       int64  `json:"slot"`
	Manual     bool   `json:"manual,omitempty"`
	Missed     int64  `json:"missed,omitempty"`
	Late       bool   `json:"late,omitempty"`
	DSTSkipped int64  `json:"dst_skipped,omitempty"`
	DriverID   string `json:"driver_id,omitempty"`
	Time       int64  `json:"time"`
}
