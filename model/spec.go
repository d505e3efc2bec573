package model

import (
	"errors"
	"fmt"
	"maps"
	"slices"
)

// The program specs. What a driver runs is declared once, in DriverSpec,
// and embedded in the request that asks for it (api.SubmitRequest), the
// command that commits it (SubmitDriver) and the row that keeps it
// (Driver), as Nomad embeds one Job in its JobRegisterRequest, its log
// entry and its state, and checks it with one Job.Validate. What an
// application's executors run is ExecutorSpec, embedded in the row (App);
// its registration's request and command name the same fields in another
// order and, in the request, under other names, so they keep their own
// (RegisterApp.Spec). The fields stay at the outer level in JSON and in
// MessagePack (both codecs flatten an embedded struct without a tag), so
// the bytes of requests, entries, snapshots and answers are those of the
// structs that declared the fields themselves. Each spec's Validate is
// the one check of the spec: a master runs it before it commits a request,
// and the tables run it again on the entry, wrapping its line in
// ErrInvalidCommand. Since the tables replay every entry with the code
// they run then, a check added to a Validate must pass every entry
// committed before it (fsm/DESIGN.md); a bound on new requests only
// belongs to the master (CheckAsked).

// DriverSpec is a driver's program and what each attempt of it needs
// (Spark's DriverDescription): the argv and environment, cores and memory
// (MiB), supervision with its restart bounds, the artifacts staged before
// it starts, custom resources and the user it runs as. It is the driver's
// description, not its state: nothing changes it once the driver is
// submitted.
type DriverSpec struct {
	Argv      []string          `json:"argv"`
	Env       map[string]string `json:"env,omitempty"`
	Cores     int               `json:"cores"`
	MemoryMB  int64             `json:"memory_mb"`
	Supervise bool              `json:"supervise"`
	// Artifacts are staged into each attempt's directory before the
	// program starts: each names a Source URL (go-getter's options), or
	// an Upload (the digest client.Upload returned) with its Name and
	// Mode; a Dest puts it in a subdirectory. A request names them as
	// its submitter wrote them; commands and rows hold them normalized
	// (NormalizeArtifact).
	Artifacts []Artifact `json:"artifacts,omitempty"`
	// Resources are the custom resources each attempt needs, by name
	// ({"gpu": 1}; Spark's spark.driver.resource.{name}.amount): the
	// attempt is placed only on a worker with that many free addresses,
	// and its program finds the ones it holds in DROVER_RESOURCE_GPU and
	// DROVER_RESOURCES_FILE; the addresses an attempt holds are in its
	// Attempt record. A request no worker offers waits, reported as
	// api.ReasonUnplaceable.
	Resources ResourceAmounts `json:"resources,omitempty"`
	// MaxRestarts, with Supervise, ends the driver FAILED after more than
	// this many failed runs within RestartWindowMS (milliseconds, at
	// least MinRestartWindowMS; 0 counts every failed run), as YARN's
	// maxAppAttempts within attemptFailuresValidityInterval.
	// RescheduleAfter, with Supervise, moves the next attempt to another
	// worker, when one has room, after this many failed runs in a row on
	// one worker (Nomad's restart, then reschedule). 0 leaves each
	// unbounded, as Spark's --supervise is; negative values are refused
	// (CheckSupervision).
	MaxRestarts     int   `json:"max_restarts,omitempty"`
	RestartWindowMS int64 `json:"restart_window_ms,omitempty"`
	RescheduleAfter int   `json:"reschedule_after,omitempty"`
	// User is the user every attempt's program runs as: a name of at
	// most MaxUserLen bytes of [a-z_][a-z0-9_-]*[$]? (CheckUser), never a
	// numeric uid; "" for each worker's default, its --run-as. A worker
	// runs a program as a user its --allowed-users lists only. A retry
	// with the same token yields the first submission's driver, whatever
	// user it names, as it does whatever program it names.
	User string `json:"user,omitempty"`
	// Namespace is the namespace the driver belongs to, "" for
	// DefaultNamespace (and in entries written before namespaces).
	// Priority orders it among the waiting drivers of its namespace,
	// 0 to MaxPriority, higher first; nil (absent, as in entries
	// written before priorities) for the namespace's default
	// (Namespace.Priority).
	Namespace string `json:"namespace,omitempty"`
	Priority  *int   `json:"priority,omitempty"`
	// AppCores is the most cores the executors of the driver's
	// application will hold together (Spark's spark.cores.max, or
	// spark.executor.instances times spark.executor.cores), 0 to
	// MaxAppCores; 0 (absent, as in entries written before it) when
	// unknown. A namespace's driver share counts it from the driver's
	// placement on, less what the app's live executors hold, so that a
	// driver is not started while its executors could never run.
	AppCores int `json:"app_cores,omitempty"`
}

// MaxAppCores bounds DriverSpec.AppCores: 2^20 cores, sixteen workers of
// MaxCores each, more than a namespace's quota can usefully name.
const MaxAppCores = 1 << 20

// Validate checks the spec on its own, as it is in a command: the program
// (a non-empty argv, valid environment names not set by Drover, positive
// cores and memory), normalized artifacts (ValidateArtifacts' checks),
// the resource amounts (CheckResourceAmounts), the restart bounds
// (CheckSupervision), the user's form (CheckUser), and the namespace's
// name and the priority's range (CheckNamespace, CheckPriority), and app
// cores of 0 to MaxAppCores (absent in older entries, so 0). It is
// deterministic, reading nothing but s. The error is one line and wraps
// no sentinel: a master refusing a request wraps it in its own
// (api.ErrInvalidRequest), the tables in ErrInvalidCommand. The bounds a
// master puts on a new request alone (CheckAsked) are not here, so that
// entries committed before them apply as they did.
func (s *DriverSpec) Validate() error {
	if err := checkProgram(s.Argv, s.Env, s.Cores, s.MemoryMB); err != nil {
		return err
	}
	if err := checkArtifacts(s.Artifacts); err != nil {
		return err
	}
	if err := CheckResourceAmounts(s.Resources); err != nil {
		return fmt.Errorf("driver resources: %v", err)
	}
	if err := CheckSupervision(s.Supervise, s.MaxRestarts, s.RestartWindowMS, s.RescheduleAfter); err != nil {
		return err
	}
	if s.Namespace != "" {
		if err := CheckNamespace(s.Namespace); err != nil {
			return err
		}
	}
	if s.Priority != nil {
		if err := CheckPriority(*s.Priority); err != nil {
			return err
		}
	}
	if s.AppCores < 0 || s.AppCores > MaxAppCores {
		return fmt.Errorf("app cores must be 0 (unknown) to %d, got %d", MaxAppCores, s.AppCores)
	}
	return CheckUser(s.User)
}

// Clone returns a deep copy of s.
func (s DriverSpec) Clone() DriverSpec {
	s.Argv = slices.Clone(s.Argv)
	s.Env = maps.Clone(s.Env)
	s.Artifacts = slices.Clone(s.Artifacts)
	s.Resources = maps.Clone(s.Resources)
	if s.Priority != nil {
		p := *s.Priority
		s.Priority = &p
	}
	return s
}

// programSize is the size of the strings of s a submitter chooses, in
// bytes (see SubmitDriver.ProgramSize).
func (s *DriverSpec) programSize() int {
	return len(s.User) + len(s.Namespace) + programSize(s.Argv, s.Env, s.Artifacts, s.Resources)
}

// ExecutorSpec is what each executor of an application runs and how many
// may run (Spark's ApplicationDescription): the argv and environment, each
// executor's cores and memory (MiB), artifacts, custom resources and
// user, the cap on the cores of all of them, the limit on live executors
// and how many may fail in a row.
type ExecutorSpec struct {
	// MaxCores caps the cores of all live executors together (Spark's
	// spark.cores.max); 0 means no cap.
	MaxCores            int   `json:"max_cores"`
	CoresPerExecutor    int   `json:"cores_per_executor"`
	MemoryPerExecutorMB int64 `json:"memory_per_executor_mb"`
	// ExecutorLimit caps the number of live executors (Spark's
	// initialExecutorLimit, then executorLimit as requestTotalExecutors
	// sets it); -1 means no cap.
	ExecutorLimit int               `json:"executor_limit"`
	Argv          []string          `json:"argv"`
	Env           map[string]string `json:"env,omitempty"`
	// Artifacts are staged into each executor's directory before it
	// starts (normalized, see NormalizeArtifact).
	Artifacts []Artifact `json:"artifacts,omitempty"`
	// ResourcesPerExecutor are the custom resources each executor needs
	// (Spark's spark.executor.resource.{name}.amount).
	ResourcesPerExecutor ResourceAmounts `json:"resources_per_executor,omitempty"`
	// User is the user each executor's program runs as (see CheckUser);
	// "" leaves it to each worker (its --run-as).
	User string `json:"user,omitempty"`
	// MaxExecutorRetries is the leader's --max-executor-retries when the
	// app registered (Spark's spark.deploy.maxExecutorRetries): the app
	// FAILS when more executors than this fail in a row while none is
	// RUNNING; -1 means never.
	MaxExecutorRetries int `json:"max_executor_retries"`
}

// Validate checks the spec on its own, as DriverSpec.Validate does: the
// executor program (checkProgram's checks of argv, environment, cores
// and memory), a core cap that is 0 or holds one executor, an executor
// limit of -1 or more, max executor retries of -1 or more, the resource
// amounts, the user's form and normalized artifacts. Deterministic; the
// error is one line and wraps no sentinel.
func (s *ExecutorSpec) Validate() error {
	if err := checkProgram(s.Argv, s.Env, s.CoresPerExecutor, s.MemoryPerExecutorMB); err != nil {
		return err
	}
	switch {
	case s.MaxCores < 0:
		return fmt.Errorf("max cores must not be negative, got %d", s.MaxCores)
	case s.MaxCores > 0 && s.MaxCores < s.CoresPerExecutor:
		return fmt.Errorf("max cores %d is less than the %d cores of one executor", s.MaxCores, s.CoresPerExecutor)
	case s.ExecutorLimit < -1:
		return fmt.Errorf("executor limit must be -1 (none) or more, got %d", s.ExecutorLimit)
	case s.MaxExecutorRetries < -1:
		return fmt.Errorf("max executor retries must be -1 (never fail) or more, got %d", s.MaxExecutorRetries)
	}
	if err := CheckResourceAmounts(s.ResourcesPerExecutor); err != nil {
		return fmt.Errorf("executor resources: %v", err)
	}
	if err := CheckUser(s.User); err != nil {
		return err
	}
	return checkArtifacts(s.Artifacts)
}

// Clone returns a deep copy of s.
func (s ExecutorSpec) Clone() ExecutorSpec {
	s.Argv = slices.Clone(s.Argv)
	s.Env = maps.Clone(s.Env)
	s.Artifacts = slices.Clone(s.Artifacts)
	s.ResourcesPerExecutor = maps.Clone(s.ResourcesPerExecutor)
	return s
}

// programSize is the size of the strings of s a registering client
// chooses, in bytes (see RegisterApp.ProgramSize).
func (s *ExecutorSpec) programSize() int {
	return len(s.User) + programSize(s.Argv, s.Env, s.Artifacts, s.ResourcesPerExecutor)
}

// Spec returns the registration's ExecutorSpec, sharing c's slices and
// maps: what the app's row embeds. RegisterApp declares the fields
// itself rather than embedding the spec because its entries have always
// named max_executor_retries after env, and the row after user, while
// encoding/json writes an embedded struct's fields together: embedded in
// both, one of them would change its bytes.
func (c *RegisterApp) Spec() ExecutorSpec {
	return ExecutorSpec{
		MaxCores: c.MaxCores, CoresPerExecutor: c.CoresPerExecutor, MemoryPerExecutorMB: c.MemoryPerExecutorMB,
		ExecutorLimit: c.ExecutorLimit, Argv: c.Argv, Env: c.Env, Artifacts: c.Artifacts,
		ResourcesPerExecutor: c.ResourcesPerExecutor, User: c.User, MaxExecutorRetries: c.MaxExecutorRetries,
	}
}

// Validate checks a registration on its own, without the tables: its
// spec (ExecutorSpec.Validate), then that a driver attempt or run comes
// with a driver ID, an attempt of 1 or more and a run not negative, and
// the namespace's name (CheckNamespace). The
// error is one line and wraps no sentinel, as the spec's.
func (c *RegisterApp) Validate() error {
	spec := c.Spec()
	if err := spec.Validate(); err != nil {
		return err
	}
	switch {
	case c.DriverID == "" && (c.DriverAttempt != 0 || c.DriverRun != 0):
		return errors.New("a driver attempt or run needs a driver ID")
	case c.DriverID != "" && (c.DriverAttempt < 1 || c.DriverRun < 0):
		return errors.New("driver attempt must be 1 or more and run not negative")
	}
	if c.Namespace != "" {
		return CheckNamespace(c.Namespace)
	}
	return nil
}
