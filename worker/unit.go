package worker

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/model/ids"
	"github.com/drover-project/drover/worker/spark/resourcesfile"
	"github.com/drover-project/drover/worker/unitdir"
)

// A unit is one program the worker runs under a runner of its own: a driver
// attempt or an executor. Both are started, watched, adopted, fenced, killed
// and reported the same way; what tells them apart (their names,
// directories, environment and the vocabulary of their reports) is gathered
// here, so that the rest of the worker has one code path for both.

// unitKind says what a unit is.
type unitKind uint8

const (
	// kindAttempt is attempt n of a driver; attempts count from 1.
	kindAttempt unitKind = iota
	// kindExecutor is executor n of an application; executor IDs count
	// from 0 within their app and are never reused.
	kindExecutor
)

// kindInfo is what differs between kinds, as data rather than as branches.
type kindInfo struct {
	// noun names the kind in log messages.
	noun string
	// idAttr and nAttr are the log attributes (and words in messages)
	// for the unit's ID and its number.
	idAttr, nAttr string
	// checkID validates the unit's ID (package ids), which names a
	// directory, so anything else is refused before it reaches the file
	// system. Driver and app IDs never match each other's form, so their
	// directories never collide in the work dir.
	checkID func(string) error
	// minN is the least valid number.
	minN int
	// dirPrefix comes before the number in the unit's directory name.
	dirPrefix string
	// record is the kind's name in the worker record; a driver attempt's
	// is empty, as in the records written before workers ran executors.
	record string
	// component names the unit in its resources file, as Spark's
	// ResourceID does (package resourcesfile).
	component string
	// alwaysFenced: strict fencing kills the unit even when it is not
	// supervised. The leader declares a lost worker's executors LOST and
	// places new ones, as it relaunches supervised drivers, so an
	// executor cut off from the leaders must stop like a supervised
	// attempt. An unsupervised driver is never relaunched and runs on.
	alwaysFenced bool
}

var kinds = [...]kindInfo{
	kindAttempt: {noun: "attempt", idAttr: "driver", nAttr: "attempt", checkID: ids.CheckDriver,
		minN: 1, dirPrefix: "attempt-", component: resourcesfile.Driver},
	kindExecutor: {noun: "executor", idAttr: "app", nAttr: "executor", checkID: ids.CheckApp,
		minN: 0, record: "executor", alwaysFenced: true, component: resourcesfile.Executor},
}

func (k unitKind) info() kindInfo { return kinds[k] }

// kindOfRecord is the kind a record names, false for a kind this worker
// does not know (a record written by a newer one).
func kindOfRecord(name string) (unitKind, bool) {
	for k, info := range kinds {
		if info.record == name {
			return unitKind(k), true
		}
	}
	return 0, false
}

// unitKey names one unit: attempt n of driver id, or executor n of app id.
type unitKey struct {
	kind unitKind
	id   string
	n    int
}

func attemptKey(driverID string, attempt int) unitKey {
	return unitKey{kindAttempt, driverID, attempt}
}

func executorKey(appID string, executorID int) unitKey {
	return unitKey{kindExecutor, appID, executorID}
}

// valid says whether k is safe to name a directory.
func (k unitKey) valid() bool {
	info := k.kind.info()
	return info.checkID(k.id) == nil && k.n >= info.minN
}

// invalid is the reason a unit with an invalid key is not started.
func (k unitKey) invalid() string {
	info := k.kind.info()
	return fmt.Sprintf("invalid %s ID %q or %s %d", info.idAttr, k.id, info.nAttr, k.n)
}

// unitsIn lists the units whose directories are in the directory of
// id (a driver or app ID) as names lists its entries: "attempt-N" for a
// driver, "N" for an app, N in canonical form. Other IDs and names are
// no unit's.
func unitsIn(id string, names []string) []unitKey {
	var out []unitKey
	for kind, info := range kinds {
		if info.checkID(id) != nil {
			continue
		}
		for _, name := range names {
			s, ok := strings.CutPrefix(name, info.dirPrefix)
			n, err := strconv.Atoi(s)
			if k := (unitKey{unitKind(kind), id, n}); ok && err == nil && strconv.Itoa(n) == s && k.valid() {
				out = append(out, k)
			}
		}
	}
	return out
}

// component is the Spark component whose resources file the unit gets.
func (k unitKey) component() string { return k.kind.info().component }

// dir is k's directory: WORK_DIR/DRIVER_ID/attempt-N for an attempt,
// WORK_DIR/APP_ID/EXECUTOR_ID for an executor. k must be valid.
func (k unitKey) dir(workDir string) string {
	return filepath.Join(workDir, k.id, k.kind.info().dirPrefix+strconv.Itoa(k.n))
}

// cgroup is the name of k's cgroup under the worker's (package isolation).
func (k unitKey) cgroup() string { return unitdir.CgroupName(k.id, k.n) }

// attrs are k's log attributes.
func (k unitKey) attrs(more ...any) []any {
	info := k.kind.info()
	return append([]any{info.idAttr, k.id, info.nAttr, k.n}, more...)
}

// String names k for people: "driver-... attempt 2", "app-... executor 3".
func (k unitKey) String() string {
	return fmt.Sprintf("%s %s %d", k.id, k.kind.info().nAttr, k.n)
}

// order is one unit the leader wants run, with what start needs to launch
// it.
type order struct {
	key  unitKey
	argv []string
	// env is the submission's or the app's environment.
	env map[string]string
	// vars are the kind's own DROVER_ variables, which env cannot override.
	vars      map[string]string
	supervise bool
	// artifacts are staged into the unit's directory before its program
	// starts.
	artifacts []model.Artifact
	// resources are the addresses the unit holds.
	resources model.Resources
	// bounds are an attempt's restart bounds and its earlier attempts'
	// failed runs, as unitdir.Spec has them.
	bounds bounds
	// cores and memoryMB are what the leader set aside for the unit: its
	// cgroup's limits under isolation.
	cores    int
	memoryMB int64
	// user is the user the submission (or the app) asks the program to
	// run as, "" for the worker's default: a name of model.CheckUser's
	// form, which the worker still has to resolve and allow.
	user string
}

// bounds are the restart bounds of a supervised driver's attempt.
type bounds struct {
	maxRestarts, rescheduleAfter int
	window                       time.Duration
	failures                     []int64
}

// orders is the desired set of a heartbeat answer: its driver attempts,
// then its executors. Executors are never supervised: the leader replaces
// a failed one with a new executor instead.
func orders(resp api.HeartbeatResponse) []order {
	out := make([]order, 0, len(resp.Assignments)+len(resp.Executors))
	for _, a := range resp.Assignments {
		vars := map[string]string{
			"DROVER_DRIVER_ID": a.DriverID,
			"DROVER_ATTEMPT":   strconv.Itoa(a.Attempt),
		}
		if a.Token != "" {
			vars[client.EnvToken] = a.Token
		}
		setSize(vars, "DRIVER", a.Cores, a.MemoryMB)
		out = append(out, order{key: attemptKey(a.DriverID, a.Attempt), argv: a.Argv, env: a.Env, supervise: a.Supervise, vars: vars,
			artifacts: a.Artifacts, resources: a.Resources, cores: a.Cores, memoryMB: a.MemoryMB, bounds: bounds{maxRestarts: a.MaxRestarts, rescheduleAfter: a.RescheduleAfter,
				window: time.Duration(a.RestartWindowMS) * time.Millisecond, failures: a.Failures}, user: a.User})
	}
	for _, e := range resp.Executors {
		out = append(out, order{key: executorKey(e.AppID, e.ExecutorID), argv: e.Argv, env: e.Env, artifacts: e.Artifacts, resources: e.Resources,
			cores: e.Cores, memoryMB: e.MemoryMB, user: e.User,
			vars: map[string]string{
				"DROVER_APP_ID":      e.AppID,
				"DROVER_EXECUTOR_ID": strconv.Itoa(e.ExecutorID),
			}})
		setSize(out[len(out)-1].vars, "EXECUTOR", e.Cores, e.MemoryMB)
	}
	return out
}

// setSize tells a program the cores and memory (MiB) it was placed with
// and is held to, as DROVER_<KIND>_CORES and DROVER_<KIND>_MEMORY_MB (kind
// DRIVER or EXECUTOR), as Spark's worker tells an executor through
// --cores and SPARK_EXECUTOR_MEMORY: a program sizes its thread pools and
// heap by them rather than by the machine's.
func setSize(vars map[string]string, kind string, cores int, memoryMB int64) {
	vars["DROVER_"+kind+"_CORES"] = strconv.Itoa(cores)
	vars["DROVER_"+kind+"_MEMORY_MB"] = strconv.FormatInt(memoryMB, 10)
}

// report is a state change of a unit, queued until the leader acknowledges
// it. Its state is the runner's, in driver terms; the wire forms translate
// it for executors.
type report struct {
	key      unitKey
	state    model.DriverState
	exitCode *int
	runs     int
	reason   string
	// failures and reschedule are the runner's (unitdir.Status).
	failures   []int64
	reschedule bool
	// staging says reason is what the unit's staging says now
	// (unitdir.EventStaging); state is then SUBMITTED.
	staging bool
}

func (r report) attemptReport() model.AttemptReport {
	return model.AttemptReport{DriverID: r.key.id, Attempt: r.key.n, State: r.state, ExitCode: r.exitCode, Runs: r.runs, Reason: r.reason,
		Failures: r.failures, Reschedule: r.reschedule, Staging: r.staging}
}

func (r report) executorReport() model.ExecutorReport {
	return model.ExecutorReport{AppID: r.key.id, ExecutorID: r.key.n, State: r.executorState(), ExitCode: r.exitCode, Reason: r.reason, Staging: r.staging}
}

// executorState is r's state in executor terms: a staging executor is
// LAUNCHING.
func (r report) executorState() model.ExecutorState {
	if r.staging {
		return model.ExecLaunching
	}
	return model.ExecutorStateOf(r.state)
}

// ackID is what a report and the leader's echo of it share: the unit, the
// state as sent and, for attempts, the run count, so that a newer RUNNING
// report of a supervised attempt is not taken as acknowledged; for a
// staging report its line, so that the acknowledgement of one does not
// drop a newer one queued meanwhile. Executor reports carry no run
// count: an executor runs once.
type ackID struct {
	key     unitKey
	state   string
	runs    int
	staging string
}

func (r report) ackID() ackID {
	staging := stagingLine(r.staging, r.reason)
	if r.key.kind == kindExecutor {
		return ackID{r.key, string(r.executorState()), 0, staging}
	}
	return ackID{r.key, string(r.state), r.runs, staging}
}

// stagingLine is the staging field of the ackID of a report with these
// fields.
func stagingLine(staging bool, reason string) string {
	if staging {
		return reason
	}
	return ""
}

// acked lists what resp acknowledges, and the units whose final report it
// acknowledges.
func acked(resp api.HeartbeatResponse) (ids map[ackID]bool, done []unitKey) {
	ids = map[ackID]bool{}
	for _, a := range resp.Acked {
		k := attemptKey(a.DriverID, a.Attempt)
		ids[ackID{k, string(a.State), a.Runs, stagingLine(a.Staging, a.Reason)}] = true
		if a.State.Terminal() {
			done = append(done, k)
		}
	}
	for _, e := range resp.AckedExecutors {
		k := executorKey(e.AppID, e.ExecutorID)
		ids[ackID{k, string(e.State), 0, stagingLine(e.Staging, e.Reason)}] = true
		if e.State.Terminal() {
			done = append(done, k)
		}
	}
	return ids, done
}
