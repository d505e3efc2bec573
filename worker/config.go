package worker

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/model/ids"
	"github.com/drover-project/drover/security/pki"
	"github.com/drover-project/drover/transport"
	"github.com/drover-project/drover/worker/unitdir"
)

// Config is everything a worker needs. Sizes are MiB, durations wall-clock.
// Start from DefaultConfig and fill in the identity, masters and resources.
type Config struct {
	// ID names the worker in the cluster; it must stay the same across
	// restarts so that the worker re-registers as itself.
	ID string
	// Masters lists the HTTP host:port of every master.
	Masters []string
	// WorkDir holds one directory per driver, with one attempt-N directory
	// per attempt (spec, status, the program's stdout and stderr, the
	// runner's log, and the program's own directory, unitdir.ProgramDir),
	// one directory per application, with one directory per executor
	// named by its ID (the same files), the worker's record of its
	// attempts and executors (DBFile), its lease file (LeaseFile), the
	// artifact cache (CacheDir), a copy of the cluster CA for programs
	// (CAFile) and the directories its cleanup is deleting (.trash; see
	// CleanupTTL). It and the directories of units are 0711 where
	// programs run as another user (they pass through, but cannot list
	// or write), 0700 otherwise. One worker at a time: a second one on the
	// same work dir fails to start. A relative path is made absolute at
	// start.
	WorkDir string
	// Cores and MemoryMB are what the worker offers to drivers.
	Cores    int
	MemoryMB int64
	// Resources are the custom resources the worker offers, each name
	// with its addresses (Spark's spark.worker.resource.*; --resource and
	// --resources-file). Each unit that holds some finds them in
	// DROVER_RESOURCE_<NAME> and in its directory's unitdir.ResourcesFile.
	Resources model.Resources
	// BindIP is the address the HTTP server listens on and outbound
	// connections leave from. Masters reach the worker at BindIP, so it
	// must be a specific address, not 0.0.0.0.
	BindIP string
	// HTTPPort is the port of the log and health server; 0 picks a free
	// one (see Worker.HTTPAddr).
	HTTPPort int
	// RunnerCommand is the drover binary that supervises each attempt as
	// "RunnerCommand runner --dir ATTEMPT_DIR"; empty means this process's
	// own executable.
	RunnerCommand string
	// KillTimeout is how long a killed program has between SIGTERM and
	// SIGKILL (to its whole process group).
	KillTimeout time.Duration
	// HeartbeatInterval is the least time between two heartbeats, and the
	// pause after a failed call to the masters. A local change (an attempt
	// started or ended) sends a heartbeat at once; when nothing changes the
	// leader holds the heartbeat open for a while (long poll).
	HeartbeatInterval time.Duration
	// RequestTimeout bounds one call to the masters, retries among them
	// included; it must exceed the leader's long-poll hold (2s).
	RequestTimeout time.Duration
	// RestartBackoff and RestartBackoffMax set the pause before a
	// supervised program is relaunched within its attempt: RestartBackoff
	// first, doubling up to RestartBackoffMax (Spark's DriverRunner uses
	// 1s doubling; 0 means the runner's defaults, 1s and 60s).
	RestartBackoff    time.Duration
	RestartBackoffMax time.Duration
	// LogMaxFileSize (bytes) and LogMaxFiles bound the stdout and the
	// stderr of every attempt and executor: each is kept in files of at
	// most LogMaxFileSize bytes, at most LogMaxFiles of them, the oldest
	// deleted first (unitdir.Spec's bounds, Nomad's logs block). Zero
	// means the runner's defaults, 10 MiB and 5 files.
	LogMaxFileSize int64
	LogMaxFiles    int
	// Lease bounds how long an attempt runs on without its worker. The
	// worker renews WORK_DIR/worker.lease every Lease/4 and each runner
	// kills its program once it has seen no renewal for Lease (see
	// unitdir.Spec.LeaseFile): a worker detached for an upgrade, or frozen,
	// leaves its programs running for up to Lease, and a new worker
	// started on the same work dir within it adopts them. A worker daemon
	// that dies without detaching (a crash, a kill) takes its programs
	// with it at once. In strict fencing it is also how
	// long the worker runs supervised attempts and executors without
	// hearing from a leader. It should match the masters' --lease.
	Lease time.Duration
	// Fencing is FencingDefault (also when empty) or FencingStrict.
	Fencing FencingMode
	// TLS names the cluster CA and this worker's certificate and key
	// (package pki; the certificate must carry the worker role). Set, the
	// worker calls the masters over HTTPS presenting it, and its own HTTP
	// server admits master certificates only. Drivers and executors get
	// the CA's path as DROVER_CACERT.
	TLS pki.Files
	// NodeToken is the node token the worker shares with the masters when
	// they use tokens without TLS: it sends it to the masters, hands it to
	// the runners that read uploads through a pipe (unitdir.Staging's
	// CredentialFD), never their environment, and demands it of the
	// masters on its own HTTP server. With TLS the certificate does that,
	// and the node token is not used. A worker never holds the operator
	// token. At most unitdir.MaxCredential bytes.
	NodeToken string
	// Insecure lets a worker with neither TLS nor a token listen on an
	// address other than loopback.
	Insecure bool
	// AllowedHosts are the names, beside BindIP, localhost, 127.0.0.1
	// and ::1, that a worker with neither TLS nor a token answers to on
	// its HTTP server (transport.Gate); others are refused 421.
	AllowedHosts []string
	// RunAs is the user a worker run as root runs programs as when their
	// unit names none (DefaultRunAs, "nobody", when empty), as Nomad's
	// exec driver does. A worker run as another user runs every program
	// as itself, as Spark's worker does, and refuses a RunAs or
	// AllowedUsers naming anyone else.
	RunAs string
	// AllowedUsers are the users besides RunAs a unit may ask its program
	// to run as (a submission's user), as YARN's LinuxContainerExecutor
	// runs a container as its submitter. A unit asking for a user not
	// listed ends FAILED, saying so, and is not restarted.
	AllowedUsers []string
	// AllowRoot lets RunAs and AllowedUsers name root (any user of uid
	// 0, by the uid the name resolves to): a unit then runs as root only
	// under a name they list, so AllowRoot is no grant to every
	// submitter, and an alias of root (another name of uid 0) is refused
	// unless listed itself. Without it, a worker refuses to start naming
	// root, and a unit asking for root ends FAILED; with it, a worker
	// whose RunAs and AllowedUsers name no user of uid 0 refuses to start,
	// since it would allow nothing.
	AllowRoot bool
	// EnvAllow names the variables of the worker's own environment that
	// a program gets, each a name or a prefix ending in '*' ("*" alone
	// for all), as YARN's yarn.nodemanager.env-whitelist does; the
	// worker's DROVER_ variables never pass, whatever it says. Nil means
	// none. DefaultConfig sets DefaultEnvAllow.
	EnvAllow []string
	// MaxConnsPerClient bounds the HTTP connections one client IP may
	// hold open at once (0: no bound).
	MaxConnsPerClient int
	// CleanupTTL is how long the directory of a finished attempt or
	// executor is kept after its end, its logs with it: Spark's
	// spark.worker.cleanup.appDataTtl (7 days), here on by default. A
	// unit is finished once the leader has acknowledged its final
	// report; live and adoptable units are never removed. 0 keeps
	// directories until the disk runs low.
	CleanupTTL time.Duration
	// MinFreeDisk is the free space, in bytes, the cleanup keeps on the
	// work dir's file system: below it, it asks Cache for room, then
	// removes finished units' directories at once, oldest first, until
	// the free space is back. 0 never cleans for space.
	MinFreeDisk int64
	// FreeSpace returns the free bytes of the file system holding a
	// path; nil means DiskFree. Tests simulate a filling disk with it.
	FreeSpace func(path string) (int64, error)
	// Cache is asked for room when the disk runs low, before any unit's
	// directory is removed; nil means the worker's own artifact cache
	// (Worker.FreeCache), or nothing without Artifacts.
	Cache CacheSpace
	// CacheSizeMB bounds the artifact cache (WORK_DIR/CacheDir), which
	// the worker trims to it, least recently used first, after each
	// staging that added an entry and every cacheTrimInterval; entries a
	// live unit uses are never evicted, so the cache may exceed it while
	// they run.
	CacheSizeMB int64
	// ArtifactMaxSizeMB bounds one artifact as fetched (an archive before
	// unpacking; it may unpack to four times as much).
	ArtifactMaxSizeMB int64
	// ArtifactTimeout is the overall deadline of one artifact's fetch,
	// retries included; ArtifactStallTimeout ends a try that receives
	// nothing for so long (it is then retried).
	ArtifactTimeout      time.Duration
	ArtifactStallTimeout time.Duration
	// Isolation gives each attempt and executor a cgroup of its own
	// (package isolation, through package host): nil runs them without.
	Isolation Isolation
	// Artifacts opens the artifact cache in CacheDir for the worker to
	// keep to CacheSizeMB (package artifact, through package host): nil
	// leaves it untrimmed.
	Artifacts Artifacts
	// Logger receives the worker's logs; nil means slog.Default().
	Logger *slog.Logger
}

// FencingMode says what a worker does with its attempts while it cannot
// reach a leader.
type FencingMode string

const (
	// FencingDefault keeps every attempt running while the masters are
	// unreachable (they may be restarting), as Spark's Worker does. A
	// supervised driver may then run twice for a while: here and where the
	// leader relaunched it after declaring this worker lost.
	FencingDefault FencingMode = "default"
	// FencingStrict kills the supervised attempts and the executors (which
	// the leader replaces once it declares the worker lost) once no leader
	// has answered a heartbeat for the Lease (the time counts from when
	// that heartbeat was sent), and starts none until one answers again. A
	// leader in strict mode relaunches only after the lease plus a margin
	// since its own last contact with the worker, so at most one attempt
	// of a driver runs at any instant, assuming clocks advance at the same
	// rate. Unsupervised attempts keep running: the leader never relaunches
	// them. A strict worker polls instead of long-polling, so that a
	// leader's answer is never older than about two heartbeat intervals.
	FencingStrict FencingMode = "strict"
)

// DefaultConfig returns a Config with every timing set; ID, masters, work dir
// and resources must still be filled in.
func DefaultConfig() Config {
	return Config{
		BindIP:            "127.0.0.1",
		KillTimeout:       10 * time.Second,
		HeartbeatInterval: time.Second,
		RequestTimeout:    10 * time.Second,
		Lease:             3 * time.Second,
		Fencing:           FencingDefault,
		MaxConnsPerClient: 512,
		LogMaxFileSize:    unitdir.DefaultLogMaxFileSize,
		LogMaxFiles:       unitdir.DefaultLogMaxFiles,
		CleanupTTL:        7 * 24 * time.Hour,
		MinFreeDisk:       DefaultMinFreeDisk,
		// Ten of the largest artifacts.
		CacheSizeMB:          10 << 10,
		ArtifactMaxSizeMB:    unitdir.DefaultArtifactMaxSize >> 20,
		ArtifactTimeout:      unitdir.DefaultArtifactTimeout,
		ArtifactStallTimeout: unitdir.DefaultArtifactStallTimeout,
		EnvAllow:             DefaultEnvAllow(),
	}
}

// DefaultEnvAllow is the default of Config.EnvAllow: what a program
// needs of its worker's environment to find programs, name its home and
// speak the machine's locale and time zone, and nothing that may carry a
// credential.
func DefaultEnvAllow() []string { return []string{"PATH", "HOME", "LANG", "LC_*", "TZ", "TMPDIR"} }

// DefaultMinFreeDisk is MinFreeDisk's default, 1 GiB: room for ten units'
// logs at the default bound (2 streams of 5 files of 10 MiB) to grow in
// while a cleanup pass comes, yet little enough of any disk that finished
// units' logs are not deleted while it is mostly empty, as a share of it
// (Kubernetes evicts at 10%) would on a large one.
const DefaultMinFreeDisk = 1 << 30

// mastersToken is the token the worker and its runners present to the
// masters: the node token without TLS, none with it (the certificate is
// the credential, and masters without a node token would refuse one).
func (c *Config) mastersToken() string {
	if c.TLS.Enabled() {
		return ""
	}
	return c.NodeToken
}

func (c *Config) validate() error {
	var errs []error
	if err := ids.CheckWorker(c.ID); err != nil {
		errs = append(errs, fmt.Errorf("--id: %w", err))
	}
	if len(c.Masters) == 0 {
		errs = append(errs, errors.New("--masters is required"))
	}
	if c.WorkDir == "" {
		errs = append(errs, errors.New("--work-dir is required"))
	}
	if c.Cores <= 0 {
		errs = append(errs, fmt.Errorf("--cores %d must be positive", c.Cores))
	}
	if c.MemoryMB <= 0 {
		errs = append(errs, fmt.Errorf("--memory %dMiB must be positive", c.MemoryMB))
	}
	if err := model.CheckResourceOffer(c.Resources); err != nil {
		errs = append(errs, fmt.Errorf("--resource: %w", err))
	}
	if ip := net.ParseIP(c.BindIP); ip == nil || ip.IsUnspecified() {
		errs = append(errs, fmt.Errorf("--bind %q must be a specific IP address: masters reach the worker there", c.BindIP))
	}
	for _, p := range c.EnvAllow {
		if !envPattern.MatchString(p) {
			errs = append(errs, fmt.Errorf("--env-allow %q: want a variable name, or a prefix of one ending in *", p))
		}
	}
	if len(c.NodeToken) > unitdir.MaxCredential {
		errs = append(errs, fmt.Errorf("the node token is %d bytes, more than the %d a runner takes", len(c.NodeToken), unitdir.MaxCredential))
	}
	if c.TLS.Enabled() && (c.TLS.CA == "" || c.TLS.Cert == "" || c.TLS.Key == "") {
		errs = append(errs, errors.New("TLS needs all of --tls-ca, --tls-cert and --tls-key"))
	}
	if c.HTTPPort < 0 || c.HTTPPort > 65535 {
		errs = append(errs, fmt.Errorf("--http-port %d is not a port", c.HTTPPort))
	}
	if err := transport.CheckAllowedHosts(c.AllowedHosts); err != nil {
		errs = append(errs, err)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"kill timeout", c.KillTimeout}, {"heartbeat interval", c.HeartbeatInterval}, {"request timeout", c.RequestTimeout}, {"lease", c.Lease},
		{"--artifact-timeout", c.ArtifactTimeout}, {"--artifact-stall-timeout", c.ArtifactStallTimeout}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s %s must be positive", d.name, d.v))
		}
	}
	if c.CacheSizeMB <= 0 || c.ArtifactMaxSizeMB <= 0 {
		errs = append(errs, fmt.Errorf("--cache-size %dMiB and --artifact-max-size %dMiB must be positive", c.CacheSizeMB, c.ArtifactMaxSizeMB))
	}
	if c.RestartBackoff < 0 || c.RestartBackoffMax < 0 {
		errs = append(errs, errors.New("restart back-off must not be negative"))
	}
	if c.LogMaxFileSize < 0 {
		errs = append(errs, fmt.Errorf("--log-max-size %d must not be negative", c.LogMaxFileSize))
	}
	if c.CleanupTTL < 0 {
		errs = append(errs, fmt.Errorf("--cleanup-ttl %s must not be negative", c.CleanupTTL))
	}
	if c.MinFreeDisk < 0 {
		errs = append(errs, fmt.Errorf("--min-free-disk %d must not be negative", c.MinFreeDisk))
	}
	if c.LogMaxFiles < 0 {
		errs = append(errs, fmt.Errorf("--log-max-files %d must not be negative", c.LogMaxFiles))
	}
	switch c.Fencing {
	case "", FencingDefault:
	case FencingStrict:
		// Between two answers a strict worker waits up to an interval
		// plus two round trips; a shorter lease would fence it while the
		// leader is fine.
		if c.Lease <= 2*c.HeartbeatInterval {
			errs = append(errs, fmt.Errorf("with strict fencing the lease %s must exceed twice the heartbeat interval %s", c.Lease, c.HeartbeatInterval))
		}
	default:
		errs = append(errs, fmt.Errorf("--fencing %q must be %s or %s", c.Fencing, FencingDefault, FencingStrict))
	}
	return errors.Join(errs...)
}
