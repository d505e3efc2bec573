package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/drover-project/drover/internal/atomicfile"
	"github.com/drover-project/drover/internal/strictjson"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/worker/artifact"
	"github.com/drover-project/drover/worker/isolation"
)

// Names of the files in an attempt directory.
const (
	// SpecFile is written by the worker before it starts the runner.
	SpecFile = "spec.json"
	// StatusFile is the runner's latest Status, replaced atomically.
	StatusFile = "status.json"
	// StdoutFile and StderrFile name the program's two output streams,
	// each one stream across the runs of an attempt, kept in rotated
	// files named after them (LogFileName).
	StdoutFile = "stdout"
	StderrFile = "stderr"
	// LogFile receives the runner's own log (its stderr); the worker
	// opens it for the runner.
	LogFile = "runner.log"
	// ResourcesFile lists the custom resources' addresses the unit holds,
	// in Spark's resources file format (package resourcesfile), written by the
	// worker for the program ($DROVER_RESOURCES_FILE), readable by it.
	ResourcesFile = "resources.json"
	// ProgramDir is the program's working directory, made by the runner
	// and owned by the program's user (Spec.RunAs): the artifacts are
	// staged into it and a relative Argv[0] is found in it. Everything
	// else in the attempt directory is the runner's and the worker's,
	// which the program may read where it needs to (ResourcesFile) but
	// not change: the attempt directory is its owner's alone to write.
	// Runners before it ran the program in the attempt directory itself.
	ProgramDir = "work"
)

// Defaults applied to zero Spec durations. The back-off values are Spark's
// DriverRunner ones (1s doubling), with a cap Spark lacks so that a driver
// that keeps failing is still retried every minute.
const (
	DefaultKillTimeout = 10 * time.Second
	DefaultBackoffBase = time.Second
	DefaultBackoffMax  = 60 * time.Second
	DefaultStableRun   = 5 * time.Second
	// DefaultLease is the lease of a Spec that names a LeaseFile but no
	// Lease; it matches the worker's --lease default.
	DefaultLease = 3 * time.Second
)

// Defaults applied to zero Spec log bounds: each stream keeps at most
// 5 files of 10 MiB, 50 MiB in all (Nomad's logs block keeps 10 of 10 MB
// by default; a worker runs many units, so fewer).
const (
	DefaultLogMaxFileSize = 10 << 20
	DefaultLogMaxFiles    = 5
)

// Spec is what the runner runs: the contents of SpecFile. Durations are
// time.Duration, so nanoseconds in JSON; zero means the default.
type Spec struct {
	// Argv is the program and its arguments, run as is (never through a
	// shell). A bare Argv[0] is looked up in the PATH of Env; a relative
	// one with a slash is taken relative to the attempt directory, which
	// is also the program's working directory.
	Argv []string `json:"argv"`
	// Env is the program's whole environment as KEY=VALUE entries,
	// DROVER_RUN (added by the runner: 1 for the first run, counting
	// restarts) and DROVER_DRIVER_ID, DROVER_ATTEMPT, DROVER_DRIVER_CORES,
	// DROVER_DRIVER_MEMORY_MB, DROVER_WORKER_ID and DROVER_MASTERS
	// included: the runner adds nothing.
	Env []string `json:"env"`
	// Supervise restarts the program within the attempt when it exits
	// non-zero (Spark's --supervise).
	Supervise bool `json:"supervise"`
	// KillTimeout is how long the program's process group has between
	// SIGTERM and SIGKILL (default DefaultKillTimeout).
	KillTimeout time.Duration `json:"kill_timeout"`
	// BackoffBase is the first pause before a supervised restart; it
	// doubles after each failed run up to BackoffMax.
	BackoffBase time.Duration `json:"backoff_base"`
	BackoffMax  time.Duration `json:"backoff_max"`
	// StableRun is how long a run must last for the back-off to fall back
	// to BackoffBase (Spark's successfulRunDuration).
	StableRun time.Duration `json:"stable_run"`
	// LeaseFile is the absolute path of the worker's lease file, which the
	// worker daemon renews (rewrites or touches) every Lease/4 while it
	// lives. Once the runner has seen no renewal for Lease it kills the
	// program with SIGKILL, with LeaseExpiredReason: no program outlives
	// its worker by more than the lease, yet a worker that restarts within
	// the lease after a detach (an upgrade) finds its attempts still
	// running and adopts them. This plays the part of the heartbeat
	// between Nomad's client and its executors. When the file names its
	// holder (LeaseContent), the runner also kills the program as soon as
	// that daemon has died without detaching, with DaemonGoneReason.
	// Empty means no lease: the program runs until it ends or the runner
	// is told to stop.
	LeaseFile string `json:"lease_file,omitempty"`
	// Lease is how long the runner lets its program run without a renewal
	// of LeaseFile (default DefaultLease).
	Lease time.Duration `json:"lease,omitempty"`
	// RelaunchAfterContact holds each supervised relaunch, once its
	// back-off is over, until LeaseFile's LeaderContact is no earlier
	// than the end of the back-off: a leader has answered a request the
	// worker sent since, and the worker has acted on that answer (its
	// kills are in the stop file the runner reads before every launch).
	// A worker cut off from the leader cannot tell whether the leader
	// has declared it lost and relaunched the driver as a new attempt
	// elsewhere; relaunching then would run an old attempt after the new
	// one began. The runner writes EventRelaunchDue when the hold begins,
	// so that its worker asks a leader at once. Needs LeaseFile.
	RelaunchAfterContact bool `json:"relaunch_after_contact,omitempty"`
	// LogMaxFileSize (bytes) and LogMaxFiles bound each of the program's
	// two streams: it is kept in files of at most LogMaxFileSize bytes,
	// at most LogMaxFiles of them, the oldest deleted first (Nomad's logs
	// block, max_file_size and max_files). Zero means
	// DefaultLogMaxFileSize and DefaultLogMaxFiles.
	LogMaxFileSize int64 `json:"log_max_file_size,omitempty"`
	LogMaxFiles    int   `json:"log_max_files,omitempty"`
	// Artifacts are staged into the attempt directory before the first
	// run (package artifact); Staging says how, and is required with them.
	// A failed staging fails the attempt with its one-line reason, or,
	// when the attempt is supervised, is retried after the back-off as a
	// failed run would be.
	Artifacts []model.Artifact `json:"artifacts,omitempty"`
	Staging   *Staging         `json:"staging,omitempty"`
	// MaxRestarts, RestartWindow and RescheduleAfter bound a supervised
	// attempt's restarts (model.CheckSupervision): once more than
	// MaxRestarts runs have failed within RestartWindow (0: ever),
	// counting Failures, the attempt ends FAILED and is not restarted;
	// once RescheduleAfter runs of this attempt have failed in a row, it
	// ends FAILED with Reschedule, so the leader moves the driver to
	// another worker. Zero is unbounded, Spark's --supervise.
	MaxRestarts     int           `json:"max_restarts,omitempty"`
	RestartWindow   time.Duration `json:"restart_window,omitempty"`
	RescheduleAfter int           `json:"reschedule_after,omitempty"`
	// Failures are the ends (Unix ms) of the failed runs of the driver's
	// earlier attempts that the bounds still count, oldest first.
	Failures []int64 `json:"failures,omitempty"`
	// Resources are the addresses of the worker's custom resources the
	// unit holds; the worker writes them into ResourcesFile and names
	// them in Env.
	Resources model.Resources `json:"resources,omitempty"`
	// Cgroup is the unit's cgroup, made by the worker (package
	// isolation): every run of the program starts in it, a kill ends
	// everything in it, and a run the kernel killed at its memory limit
	// fails with isolation.OOMReason. The runner itself stays outside.
	// Nil runs without isolation: a kill reaches the process group.
	Cgroup *isolation.Ref `json:"cgroup,omitempty"`
	// RunAs is the user the program runs as, and the owner of its
	// ProgramDir and of the files staged there; nil runs it as the
	// runner's own user (a worker not run as root runs programs as
	// itself). The runner itself, and every file it writes outside
	// ProgramDir, stay its own.
	RunAs *Identity `json:"run_as,omitempty"`
}

// Identity is a user a program runs as, as its worker resolved the name
// when it launched the unit (os/user): the program gets the user's ID, its
// primary group and its supplementary groups, set in the child between
// the fork and the exec (setgroups, setgid, setuid), as Nomad's exec
// driver and YARN's container executor start tasks as their user.
type Identity struct {
	// Name is the user's name, for the runner's log.
	Name string `json:"name"`
	// UID and GID are the user's ID and primary group ID.
	UID uint32 `json:"uid"`
	GID uint32 `json:"gid"`
	// Groups are the user's supplementary group IDs; empty gives the
	// program none.
	Groups []uint32 `json:"groups,omitempty"`
}

// name is id's name, "" for the runner's own user.
func (id *Identity) name() string {
	if id == nil {
		return ""
	}
	return id.Name
}

// credential is id as the child's credentials, nil for the runner's own.
func (id *Identity) credential() *syscall.Credential {
	if id == nil {
		return nil
	}
	return &syscall.Credential{Uid: id.UID, Gid: id.GID, Groups: id.Groups}
}

// Staging is what the runner needs to stage a Spec's artifacts. The
// worker's credential for the masters, when they use tokens, comes
// through an inherited descriptor (CredentialFD), never through this file
// or the runner's environment, which a process could read.
type Staging struct {
	// CacheDir is the absolute path of the worker's artifact cache
	// (artifact.Cache), shared with the worker's other runners.
	CacheDir string `json:"cache_dir"`
	// Limits bound each artifact; zero fields take artifact's defaults.
	artifact.Limits
	// Masters are the masters' HTTP host:port, for uploads.
	Masters []string `json:"masters,omitempty"`
	// BindIP is the address fetches leave from ("" lets the kernel
	// choose).
	BindIP string `json:"bind_ip,omitempty"`
	// TLSCA, TLSCert and TLSKey are the worker's TLS files (package pki),
	// with which uploads are read from masters that speak TLS.
	TLSCA   string `json:"tls_ca,omitempty"`
	TLSCert string `json:"tls_cert,omitempty"`
	TLSKey  string `json:"tls_key,omitempty"`
	// CredentialFD is the descriptor, inherited from the worker, of a
	// pipe holding the worker's token for the masters (at most
	// MaxCredential bytes); 0 for none. The runner reads and closes it
	// before anything else, so that no program inherits it.
	CredentialFD int `json:"credential_fd,omitempty"`
}

// MaxCredential bounds the credential read from Staging.CredentialFD, in
// bytes: tokens are tens of bytes, and a runner must not read without end.
const MaxCredential = 4 << 10

func (s *Spec) validate() error {
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		return errors.New("spec has no program to run")
	}
	for _, d := range []time.Duration{s.KillTimeout, s.BackoffBase, s.BackoffMax, s.StableRun, s.Lease} {
		if d < 0 {
			return fmt.Errorf("spec has a negative duration %s", d)
		}
	}
	if s.MaxRestarts < 0 || s.RescheduleAfter < 0 || s.RestartWindow < 0 {
		return fmt.Errorf("spec has a negative restart bound (%d restarts, %s, reschedule after %d)", s.MaxRestarts, s.RestartWindow, s.RescheduleAfter)
	}
	if s.LogMaxFileSize < 0 || s.LogMaxFiles < 0 {
		return fmt.Errorf("spec has a negative log bound (%d bytes, %d files)", s.LogMaxFileSize, s.LogMaxFiles)
	}
	// The runner's working directory is the attempt directory, not the
	// worker's, so a relative path would name another file.
	if s.LeaseFile != "" && !filepath.IsAbs(s.LeaseFile) {
		return fmt.Errorf("spec lease file %q is not an absolute path", s.LeaseFile)
	}
	if s.RelaunchAfterContact && s.LeaseFile == "" {
		return errors.New("spec relaunches after contact but names no lease file to read it from")
	}
	if s.Cgroup != nil {
		if err := s.Cgroup.Check(); err != nil {
			return fmt.Errorf("spec cgroup: %v", err)
		}
	}
	if s.RunAs != nil && s.RunAs.Name == "" {
		return errors.New("spec runs the program as a user without a name")
	}
	if s.Staging != nil && s.Staging.CredentialFD < 0 {
		return fmt.Errorf("spec credential descriptor %d is negative", s.Staging.CredentialFD)
	}
	if len(s.Artifacts) == 0 {
		return nil
	}
	if s.Staging == nil || !filepath.IsAbs(s.Staging.CacheDir) {
		return errors.New("spec has artifacts but no absolute cache directory to stage them through")
	}
	if err := model.ValidateArtifacts(s.Artifacts); err != nil {
		return fmt.Errorf("spec artifacts: %v", err)
	}
	return nil
}

func (s *Spec) applyDefaults() {
	if s.KillTimeout == 0 {
		s.KillTimeout = DefaultKillTimeout
	}
	if s.BackoffBase == 0 {
		s.BackoffBase = DefaultBackoffBase
	}
	if s.BackoffMax == 0 {
		s.BackoffMax = DefaultBackoffMax
	}
	if s.BackoffMax < s.BackoffBase {
		s.BackoffMax = s.BackoffBase
	}
	if s.StableRun == 0 {
		s.StableRun = DefaultStableRun
	}
	if s.Lease == 0 {
		s.Lease = DefaultLease
	}
	if s.LogMaxFileSize == 0 {
		s.LogMaxFileSize = DefaultLogMaxFileSize
	}
	if s.LogMaxFiles == 0 {
		s.LogMaxFiles = DefaultLogMaxFiles
	}
}

// pathEnv returns the PATH the program will see, or the runner's own when
// Env has none.
func (s *Spec) pathEnv() string {
	for i := len(s.Env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(s.Env[i], "PATH="); ok {
			return v
		}
	}
	return os.Getenv("PATH")
}

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

// WriteSpec writes spec into dir/SpecFile, readable by its owner only (the
// environment holds the driver's token).
func WriteSpec(dir string, spec Spec) error {
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return fmt.Errorf("encode spec: %w", err)
	}
	return writeFileAtomic(dir, SpecFile, b, private)
}

// WriteResources writes b, a resources file, into dir/ResourcesFile,
// whole or not at all, readable by everyone (0644): the program reads it,
// as whatever user it runs as, and it names addresses only.
func WriteResources(dir string, b []byte) error {
	return writeFileAtomic(dir, ResourcesFile, b, 0o644)
}

// ReadSpec returns the Spec in dir/SpecFile, checked but without defaults
// applied: what the worker wrote. A worker that adopts an attempt after a
// restart reads it to learn what it adopted (whether it is supervised).
func ReadSpec(dir string) (Spec, error) {
	var s Spec
	f, err := os.Open(filepath.Join(dir, SpecFile))
	if err != nil {
		return s, err
	}
	defer f.Close()
	if err := strictjson.Decode(f, &s); err != nil {
		return s, fmt.Errorf("%s: %v", SpecFile, err)
	}
	return s, s.validate()
}

// ReadStatus returns the Status a runner last wrote in dir. The error wraps
// fs.ErrNotExist when the runner never wrote one (it had not launched yet).
func ReadStatus(dir string) (Status, error) {
	var st Status
	f, err := os.Open(filepath.Join(dir, StatusFile))
	if err != nil {
		return st, err
	}
	defer f.Close()
	if err := strictjson.Decode(f, &st); err != nil {
		return st, fmt.Errorf("%s: %v", StatusFile, err)
	}
	return st, nil
}

// private is the mode of the attempt directory's files that only their
// owner reads: the spec, the status, the stop file and the logs.
const private fs.FileMode = 0o600

// writeFileAtomic replaces dir/name with b, of the given mode, so that a
// reader sees either the old or the new content, never a torn write, even
// across a crash.
func writeFileAtomic(dir, name string, b []byte, mode fs.FileMode) error {
	return atomicfile.Replace(filepath.Join(dir, name), b, mode, true)
}
