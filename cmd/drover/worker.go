package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/security/auth"
	"github.com/drover-project/drover/transport/gossip"
	"github.com/drover-project/drover/worker"
	"github.com/drover-project/drover/worker/host"
	"github.com/drover-project/drover/worker/isolation"
	"github.com/drover-project/drover/worker/runner"
	"github.com/drover-project/drover/worker/spark/resourcesfile"
)

// runnerCommand is the hidden subcommand a worker starts for each attempt:
// the attempt's supervisor (Spark's DriverRunner) as its own process.
const runnerCommand = "runner"

func runRunner(args []string) int { return runner.Main(args) }

func runWorker(args []string) int {
	// Before it reads a secret: a dumpable process's memory, environment
	// and descriptors (/proc/PID/mem, environ, fd, ptrace) are open to
	// every process of its user, and a worker not run as root runs
	// programs as itself. Not dumpable, they are root's alone.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fail(fmt.Errorf("cannot make the worker non-dumpable: %w", err))
	}
	cfg := worker.DefaultConfig()
	fs := pflag.NewFlagSet("drover worker", pflag.ContinueOnError)
	// --help is asked for, so it goes to stdout, as drover master's.
	fs.SetOutput(os.Stdout)
	fs.StringVar(&cfg.ID, "id", "", "this worker's ID; keep it across restarts")
	masters := fs.String("masters", "", "comma-separated HTTP addresses host:port of every master")
	fs.StringVar(&cfg.WorkDir, "work-dir", "", "directory for drivers' attempt dirs and logs (0711 when programs run as another user, else 0700)")
	fs.IntVar(&cfg.Cores, "cores", runtime.NumCPU(), "cores offered to drivers")
	mem := sizeFlag{mb: defaultWorkerMemoryMB()}
	fs.Var(&mem, "memory", "memory offered to drivers (512m, 4g); default: total memory minus 1 GiB, as Spark's worker")
	fs.StringVar(&cfg.BindIP, "bind", cfg.BindIP, "IP address to listen on and dial from; masters reach the worker here")
	fs.IntVar(&cfg.HTTPPort, "http-port", 7402, "HTTP port (driver logs, health)")
	gossipPort := fs.Int("gossip-port", 7403, "gossip (memberlist) TCP and UDP port")
	join := fs.StringSlice("join", nil, "gossip addresses host:port of masters to join; optional: the worker also asks --masters for their gossip addresses")
	profile := fs.String("gossip-profile", "lan", "memberlist timing profile: lan, local or wan")
	fs.DurationVar(&cfg.KillTimeout, "kill-timeout", cfg.KillTimeout, "time between SIGTERM and SIGKILL when a driver is killed")
	fs.DurationVar(&cfg.HeartbeatInterval, "heartbeat-interval", cfg.HeartbeatInterval, "least time between heartbeats to the leader")
	fs.DurationVar(&cfg.RequestTimeout, "request-timeout", cfg.RequestTimeout, "bound on one call to the masters")
	fs.DurationVar(&cfg.RestartBackoff, "restart-backoff", time.Second, "first pause before a supervised driver is restarted, or its failed staging tried again, on this worker; doubles per failure")
	fs.DurationVar(&cfg.RestartBackoffMax, "restart-backoff-max", time.Minute, "cap of the restart back-off: a driver without --max-restarts whose staging keeps failing (a 404) tries again this often")
	fs.DurationVar(&cfg.Lease, "lease", cfg.Lease, "how long drivers run on after this worker stops renewing its lease (killed, or detached with SIGUSR1 for an upgrade); in strict fencing also how long supervised drivers run without a leader's answer; match the masters' --lease")
	fencing := fs.String("fencing", string(cfg.Fencing), "default: keep drivers running while no leader answers; strict: kill supervised drivers after --lease without a leader's answer, so that none ever runs twice at once")
	fs.IntVar(&cfg.MaxConnsPerClient, "max-conns-per-client", cfg.MaxConnsPerClient, "HTTP connections one client IP may hold open; 0 for no bound")
	logMaxSize := bytesFlag{b: cfg.LogMaxFileSize, min: 1 << 10}
	fs.Var(&logMaxSize, "log-max-size", "size of each file a driver's or executor's stdout and stderr are kept in (64k, 10m); a full file rotates")
	fs.IntVar(&cfg.LogMaxFiles, "log-max-files", cfg.LogMaxFiles, "files kept of each stdout and stderr; the oldest is deleted first")
	fs.DurationVar(&cfg.CleanupTTL, "cleanup-ttl", cfg.CleanupTTL, "how long the directory (and logs) of a finished driver attempt or executor is kept after it ended; 0 keeps it until the disk runs low")
	minFree := bytesFlag{b: cfg.MinFreeDisk}
	fs.Var(&minFree, "min-free-disk", "free space to keep on the work dir's file system (1g, 500m): below it, finished units' directories are removed at once, oldest first; 0 never")
	cacheSize := sizeFlag{mb: cfg.CacheSizeMB}
	fs.Var(&cacheSize, "cache-size", "bound of the artifact cache in WORK_DIR/cache, least recently used first; entries of live drivers and executors stay")
	artifactMax := sizeFlag{mb: cfg.ArtifactMaxSizeMB}
	fs.Var(&artifactMax, "artifact-max-size", "largest artifact fetched (an archive may unpack to four times as much)")
	fs.DurationVar(&cfg.ArtifactTimeout, "artifact-timeout", cfg.ArtifactTimeout, "deadline of one artifact's fetch, retries included; the attempt fails when it passes")
	fs.DurationVar(&cfg.ArtifactStallTimeout, "artifact-stall-timeout", cfg.ArtifactStallTimeout, "a download that receives nothing for this long is tried again")
	resources := fs.StringArray("resource", nil, "NAME=ADDR,ADDR,... a custom resource offered to drivers and executors with its addresses, e.g. gpu=0,1,2,3 (Spark's spark.worker.resource.*; repeatable)")
	resourcesFile := fs.String("resources-file", "", "file of custom resources offered, in Spark's resourcesFile format: [{\"id\":{\"componentName\":\"spark.worker\",\"resourceName\":\"gpu\"},\"addresses\":[\"0\",\"1\"]}]")
	iso := host.Isolation{PidsLimit: isolation.DefaultPidsLimit}
	isolationMode := fs.String("isolation", string(isolation.ModeAuto), "auto: run each driver and executor in a cgroup of its own (memory limit, CPU quota, pids limit, whole-tree kill) when the machine allows, else warn once and run without; cgroups: refuse to start without them; none: never")
	fs.Int64Var(&iso.PidsLimit, "pids-limit", iso.PidsLimit, "processes and threads each driver or executor may have at once under isolation")
	fs.StringVar(&cfg.RunAs, "run-as", worker.DefaultRunAs, "user a worker run as root runs drivers and executors as when their submission names none; a worker run as another user runs them as itself and takes no other name")
	fs.StringSliceVar(&cfg.AllowedUsers, "allowed-users", nil, "comma-separated users, besides --run-as, a submission may ask its programs to run as (--user); others end FAILED")
	fs.BoolVar(&cfg.AllowRoot, "allow-root", false, "let --run-as and --allowed-users name root (any user of uid 0); a submission runs as root only under a name they list, and the worker refuses to start when they name none")
	fs.StringSliceVar(&cfg.EnvAllow, "env-allow", cfg.EnvAllow, "comma-separated variables of the worker's environment that programs get, NAME or PREFIX*; the worker's DROVER_* variables never pass")
	security := addSecurityFlags(fs, false)
	logger := addLogFlags(fs)
	config := addConfigFlag(fs)
	if err := parseConfigured(fs, config, args); err != nil {
		return flagError(err)
	}
	log, err := logger()
	if err != nil {
		return fail(err)
	}
	cfg.Logger = log
	sec, err := security()
	if err != nil {
		return fail(err)
	}
	cfg.TLS, cfg.NodeToken, cfg.Insecure, cfg.AllowedHosts = sec.TLS, sec.NodeToken, sec.Insecure, sec.AllowedHosts
	if !fs.Changed("run-as") {
		// The default names nobody only for a worker run as root; one run
		// as another user runs programs as itself.
		cfg.RunAs = ""
	}
	cfg.MemoryMB = mem.mb
	cfg.LogMaxFileSize = logMaxSize.b
	cfg.MinFreeDisk = minFree.b
	if cfg.LogMaxFiles < 1 {
		return fail(fmt.Errorf("--log-max-files %d must be at least 1", cfg.LogMaxFiles))
	}
	cfg.CacheSizeMB, cfg.ArtifactMaxSizeMB = cacheSize.mb, artifactMax.mb
	if cfg.Resources, err = offeredResources(*resources, *resourcesFile); err != nil {
		return fail(err)
	}
	cfg.Fencing = worker.FencingMode(*fencing)
	if iso.Mode, err = isolation.ParseMode(*isolationMode); err != nil {
		return fail(err)
	}
	if err := iso.Check(); err != nil {
		return fail(err)
	}
	cfg.Isolation, cfg.Artifacts = iso, host.Artifacts{}
	for _, m := range strings.Split(*masters, ",") {
		if m = strings.TrimSpace(m); m != "" {
			cfg.Masters = append(cfg.Masters, m)
		}
	}
	if _, err := gossip.ProfileConfig(*profile); err != nil {
		return fail(err)
	}
	// The worker's gossip member is made here, so its key is checked
	// here, before anything starts.
	keyWarning, err := auth.CheckGossipKey(cfg.BindIP, cfg.TLS.Enabled(), cfg.NodeToken != "", sec.GossipKey != nil, cfg.Insecure)
	if err != nil {
		return fail(err)
	}
	if keyWarning != "" {
		log.Warn(keyWarning)
	}
	// Before the worker starts: a signal during its start (an adopting
	// worker's SIGUSR1 or SIGTERM, sent as soon as it logs the adoption)
	// waits for stopWorker instead of being lost.
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGUSR1)
	w, err := worker.New(cfg)
	if err != nil {
		return fail(err)
	}
	meta := gossip.Meta{Role: gossip.RoleWorker, ID: cfg.ID, HTTP: w.HTTPAddr(), Tethered: w.Tethered()}
	pool, err := gossip.Start(gossip.Config{
		Meta:      meta,
		BindIP:    cfg.BindIP,
		Port:      *gossipPort,
		Profile:   *profile,
		Join:      *join,
		Discover:  w.GossipAddrs,
		SecretKey: sec.GossipKey,
		Logger:    log,
	})
	if err != nil {
		_ = w.Close()
		return fail(err)
	}
	return stopWorker(log, w, pool, meta, sig)
}

// untetherWait bounds how long a detach waits for the pool to hear that
// this worker's programs now outlive it.
const untetherWait = 2 * time.Second

// stopWorker waits for the first signal on sig and stops the worker the way
// it asks:
//
//   - SIGTERM or SIGINT: a graceful decommission (Worker.Close: decommission
//     with the leader, kill every driver, report them), then a graceful
//     leave of the gossip pool. A second SIGTERM or SIGINT meanwhile exits
//     at once, exit code 1, without the leave; the runners then end their
//     programs when the lease runs out.
//   - SIGUSR1: a detach for an upgrade (Worker.Detach): the drivers keep
//     running for up to --lease, and the member stops gossiping without
//     announcing a leave, so that the masters do not take it for a
//     decommission. It first tells the pool that it is no longer tethered
//     (meta is its metadata), so that no leader takes its silence for a
//     death that ended its drivers. A new "drover worker" with the same
//     --id and --work-dir started within the lease adopts the drivers.
//     Exit code 0.
func stopWorker(log *slog.Logger, w *worker.Worker, pool *gossip.Pool, meta gossip.Meta, sig <-chan os.Signal) int {
	s := <-sig
	if s == syscall.SIGUSR1 {
		log.Info("detaching: drivers keep running until a new worker adopts them or the lease ends", "signal", s.String())
		if meta.Tethered {
			meta.Tethered = false
			if err := pool.UpdateMeta(meta, untetherWait); err != nil {
				log.Warn("the gossip pool may not know yet that the drivers outlive this worker", "err", err)
			}
		}
		// The pool goes first, so that the lease's last renewal, in
		// Detach, is as close to the exit as it can be.
		_ = pool.Shutdown()
		_ = w.Detach()
		return 0
	}
	log.Info("shutting down: killing drivers and decommissioning this worker", "signal", s.String())
	closed := make(chan struct{})
	go func() {
		_ = w.Close()
		close(closed)
	}()
	for {
		select {
		case <-closed:
			_ = pool.Leave(time.Second)
			return 0
		case s := <-sig:
			if s == syscall.SIGUSR1 {
				log.Warn("already shutting down; ignoring", "signal", s.String())
				continue
			}
			log.Warn("second signal: exiting without finishing the shutdown", "signal", s.String())
			_ = pool.Shutdown()
			return 1
		}
	}
}

// offeredResources is what --resource and --resources-file offer
// together; a name both give, or either gives twice, is an error.
func offeredResources(flags []string, file string) (model.Resources, error) {
	out := model.Resources{}
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("--resources-file: %w", err)
		}
		if out, err = resourcesfile.Parse(b, resourcesfile.Worker); err != nil {
			return nil, fmt.Errorf("--resources-file %s: %w", file, err)
		}
	}
	for _, f := range flags {
		if err := model.ParseResourceOffer(out, f); err != nil {
			return nil, fmt.Errorf("--resource: %w", err)
		}
	}
	if err := model.CheckResourceOffer(out); err != nil {
		return nil, fmt.Errorf("--resource: %w", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// defaultWorkerMemoryMB is the machine's memory minus 1 GiB (Spark's
// default for SPARK_WORKER_MEMORY), and at least 1 GiB.
func defaultWorkerMemoryMB() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 1024
	}
	var kb int64
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "MemTotal:") {
			fmt.Sscan(strings.TrimPrefix(line, "MemTotal:"), &kb)
		}
	}
	return max(kb/1024-1024, 1024)
}
