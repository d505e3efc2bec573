package unitdir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/drover-project/drover/model"
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
	// Absent runs without isolation: a kill reaches the process group.
	// It is isolation.Ref's JSON, kept as it was written: only package
	// isolation reads it (the runner to open it, the worker's Cgroups to
	// remove it), so neither this package nor the worker links it.
	Cgroup json.RawMessage `json:"cgroup,omitempty"`
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

// Staging is what the runner needs to stage a Spec's artifacts. The
// worker's credential for the masters, when they use tokens, comes
// through an inherited descriptor (CredentialFD), never through this file
// or the runner's environment, which a process could read.
type Staging struct {
	// CacheDir is the absolute path of the worker's artifact cache
	// (artifact.Cache), shared with the worker's other runners.
	CacheDir string `json:"cache_dir"`
	// ArtifactLimits bound each artifact; zero fields take the defaults.
	// Embedded, so their fields sit beside CacheDir in the JSON.
	ArtifactLimits
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

// Defaults of ArtifactLimits' zero fields.
const (
	// DefaultArtifactMaxSize bounds an artifact as fetched: 1 GiB, a large
	// assembly jar or a runtime's tarball.
	DefaultArtifactMaxSize = 1 << 30
	// unpackedPerFetched sets the default bound on an archive's unpacked
	// bytes: four times MaxSize, room for text and jars compressed well
	// but not for a decompression bomb.
	unpackedPerFetched = 4
	// DefaultArtifactMaxFiles bounds the entries of one archive: a Python or
	// Node environment has tens of thousands.
	DefaultArtifactMaxFiles = 100_000
	// DefaultArtifactTimeout is the overall deadline of one artifact, retries
	// included: Nomad's artifact read timeout.
	DefaultArtifactTimeout = 30 * time.Minute
	// DefaultArtifactStallTimeout is how long a download may receive nothing.
	DefaultArtifactStallTimeout = 30 * time.Second
)

// ArtifactLimits bound the fetching and unpacking of each artifact
// (package artifact, which names them artifact.Limits). Sizes are
// bytes; zero fields take the defaults.
type ArtifactLimits struct {
	// MaxSize bounds the bytes fetched (an archive before unpacking):
	// checked against Content-Length before reading and while reading
	// (default DefaultArtifactMaxSize).
	MaxSize int64 `json:"max_size,omitempty"`
	// MaxUnpackedSize bounds the bytes of an archive's files together
	// (default four times MaxSize).
	MaxUnpackedSize int64 `json:"max_unpacked_size,omitempty"`
	// MaxFiles bounds the entries of an archive (default DefaultArtifactMaxFiles).
	MaxFiles int `json:"max_files,omitempty"`
	// Timeout is the overall deadline of one artifact: the wait for
	// another process's download of it, every try and every pause
	// between tries (default DefaultArtifactTimeout).
	Timeout time.Duration `json:"timeout,omitempty"`
	// StallTimeout ends a try that receives no byte for so long (default
	// DefaultArtifactStallTimeout); the try is then retried.
	StallTimeout time.Duration `json:"stall_timeout,omitempty"`
}

// WithDefaults returns l with its zero fields set to the defaults.
func (l ArtifactLimits) WithDefaults() ArtifactLimits {
	if l.MaxSize <= 0 {
		l.MaxSize = DefaultArtifactMaxSize
	}
	if l.MaxUnpackedSize <= 0 {
		l.MaxUnpackedSize = unpackedPerFetched * l.MaxSize
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultArtifactMaxFiles
	}
	if l.Timeout <= 0 {
		l.Timeout = DefaultArtifactTimeout
	}
	if l.StallTimeout <= 0 {
		l.StallTimeout = DefaultArtifactStallTimeout
	}
	return l
}

// MaxCredential bounds the credential read from Staging.CredentialFD, in
// bytes: tokens are tens of bytes, and a runner must not read without end.
const MaxCredential = 4 << 10

// Validate checks what a Spec must hold before a runner acts on it: a
// program, no negative duration or bound, absolute paths for the lease
// file and the artifact cache. The cgroup is isolation's to check.
func (s *Spec) Validate() error {
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
	if s.Cgroup != nil && !json.Valid(s.Cgroup) {
		return errors.New("spec cgroup is not JSON")
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

// ApplyDefaults sets the zero durations and log bounds to their
// defaults (DefaultKillTimeout and the others above), and raises
// BackoffMax to BackoffBase.
func (s *Spec) ApplyDefaults() {
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
	s, err := readFile[Spec](dir, SpecFile)
	if err != nil {
		return s, err
	}
	if s.Cgroup != nil {
		// Compact, as written: the file holds it indented.
		var b bytes.Buffer
		if err := json.Compact(&b, s.Cgroup); err != nil {
			return s, fmt.Errorf("%s: cgroup: %v", SpecFile, err)
		}
		s.Cgroup = b.Bytes()
	}
	return s, s.Validate()
}
