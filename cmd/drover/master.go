package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/drover-project/drover/master"
	"github.com/drover-project/drover/master/spark/restsubmit"
	"github.com/drover-project/drover/model"
)

func runMaster(args []string) int {
	cfg := master.DefaultConfig()
	fs := pflag.NewFlagSet("drover master", pflag.ContinueOnError)
	// --help is asked for, so it goes to stdout; refusals go to stderr
	// through fail.
	fs.SetOutput(os.Stdout)
	fs.StringVar(&cfg.ID, "id", "", "this master's ID; must appear in --peers when --peers is given")
	fs.StringVar(&cfg.DataDir, "data-dir", "", "directory for the Raft log, stable store and snapshots (created 0700)")
	fs.StringVar(&cfg.BindIP, "bind", cfg.BindIP, "IP address to listen on and dial from")
	fs.IntVar(&cfg.RaftPort, "raft-port", 7101, "Raft TCP port")
	fs.IntVar(&cfg.HTTPPort, "http-port", 7102, "HTTP API port")
	fs.IntVar(&cfg.GossipPort, "gossip-port", 7103, "gossip (memberlist) TCP and UDP port")
	peers := fs.String("peers", "", "initial voters as id=host:raft-port,... (used on first start only); empty to join a running cluster and wait for drover operator raft add-voter")
	join := fs.StringSlice("join", nil, "gossip addresses host:port of other members to join")
	fs.StringVar(&cfg.GossipProfile, "gossip-profile", cfg.GossipProfile, "memberlist timing profile: lan, local or wan")
	fs.DurationVar(&cfg.HeartbeatTimeout, "raft-heartbeat-timeout", cfg.HeartbeatTimeout, "Raft follower timeout before it stands for election")
	fs.DurationVar(&cfg.ElectionTimeout, "raft-election-timeout", cfg.ElectionTimeout, "Raft candidate timeout before a new election")
	fs.DurationVar(&cfg.LeaderLeaseTimeout, "raft-leader-lease", cfg.LeaderLeaseTimeout, "how long a leader keeps leading without hearing from a quorum")
	fs.Uint64Var(&cfg.SnapshotThreshold, "snapshot-threshold", cfg.SnapshotThreshold, "Raft log entries between snapshots")
	fs.DurationVar(&cfg.SnapshotInterval, "snapshot-interval", cfg.SnapshotInterval, "how often Raft checks whether to snapshot")
	fs.DurationVar(&cfg.WorkerTimeout, "worker-timeout", cfg.WorkerTimeout, "how long a worker may be missing from the gossip pool before it is declared lost")
	fs.DurationVar(&cfg.WorkerHeartbeatTimeout, "worker-heartbeat-timeout", cfg.WorkerHeartbeatTimeout, "default fencing: how long a worker may go without a heartbeat reaching the leader before it is declared lost, whatever gossip says; at least 6s, and never shorter than --worker-timeout")
	fs.StringVar(&cfg.Fencing, "fencing", cfg.Fencing, "default (drivers keep running while their worker is cut off) or strict (at most one live attempt; must match the workers)")
	fs.DurationVar(&cfg.Lease, "lease", cfg.Lease, "strict fencing: how long a worker runs supervised drivers without a leader; must equal the workers' --lease")
	fs.DurationVar(&cfg.FencingMargin, "fencing-margin", cfg.FencingMargin, "strict fencing: extra wait after the lease before a worker's drivers are relaunched")
	fs.BoolVar(&cfg.SpreadOutApps, "spread-out-apps", cfg.SpreadOutApps, "place each app's executors on as many workers as possible; false packs them on as few as possible (Spark's spark.deploy.spreadOutApps)")
	fs.IntVar(&cfg.MaxRunningDrivers, "max-running-drivers", cfg.MaxRunningDrivers, "drivers placed at once, cluster-wide; more wait in the queue (Spark's spark.deploy.maxDrivers); 0, the default, for no bound")
	fs.IntVar(&cfg.MaxExecutorRetries, "max-executor-retries", cfg.MaxExecutorRetries, "executor failures in a row, with none RUNNING, after which an app FAILS; -1 never (Spark's spark.deploy.maxExecutorRetries)")
	fs.IntVar(&cfg.RetainedDrivers, "retained-drivers", cfg.RetainedDrivers, "finished drivers to keep; older ones are dropped")
	fs.IntVar(&cfg.RetainedApps, "retained-apps", cfg.RetainedApps, "finished apps to keep; older ones are dropped")
	fs.DurationVar(&cfg.AppTimeout, "app-timeout", cfg.AppTimeout, "how long an app's client may go silent before its app is ended FAILED")
	fs.DurationVar(&cfg.PreemptionGrace, "preemption-grace", cfg.PreemptionGrace, "how long a driver attempt or executor preempted for a --preempt namespace's fair share has between SIGTERM and its kill, holding its cores meanwhile; 1s to 1h")
	fs.DurationVar(&cfg.PreemptionInterval, "preemption-interval", cfg.PreemptionInterval, "how often the leader looks for fair share to take back for --preempt namespaces (at most a tenth of the cluster each time); 100ms to 1m")
	fs.BoolVar(&cfg.RegisterWithoutGossip, "register-without-gossip", false, "let workers register before they join the gossip pool (simulated workers in benchmarks only: a worker the masters cannot watch would get work)")
	fs.BoolVar(&cfg.OpenReads, "open-reads", false, "let status reads (drivers, apps, logs, state, the page) through without a token")
	fs.BoolVar(&cfg.AllowUnboundWorkerCerts, "allow-unbound-worker-certs", false, "deprecated, for an upgrade only: let worker certificates that name no worker (made before drover tls cert --name put the ID in them) act as any worker, warning once per worker; reissue them and drop this")
	fs.IntVar(&cfg.MaxConnsPerClient, "max-conns-per-client", cfg.MaxConnsPerClient, "HTTP connections one client IP may hold open; 0 for no bound")
	fs.IntVar(&cfg.MaxSubmitsPerClient, "max-submits-per-client", cfg.MaxSubmitsPerClient, "submissions and app registrations one client IP may have in flight here (429 beyond); 0 for no bound")
	maxProgram := bytesFlag{b: int64(cfg.MaxProgramSize), min: 1 << 10}
	fs.Var(&maxProgram, "max-program-size", "bound on a submission's program (name, user, argv, environment, artifacts, resource names) and an app's executor program, as 64k or 1m (a bare number is MiB; at most 1m, a request body's bound); larger ones are refused with 413")
	fs.IntVar(&cfg.MaxLiveDrivers, "max-live-drivers", cfg.MaxLiveDrivers, "drivers not ended (SUBMITTED, RUNNING, RELAUNCHING, UNKNOWN) the cluster holds; more submissions are refused with 429; 0 for no bound")
	fs.IntVar(&cfg.MaxLiveDriversPerClient, "max-live-drivers-per-client", cfg.MaxLiveDriversPerClient, "drivers not ended submitted from one client IP (at the master it reached first); more are refused with 429; 0 for no bound")
	fs.IntVar(&cfg.MaxLiveApps, "max-live-apps", cfg.MaxLiveApps, "apps not ended (WAITING, RUNNING, UNKNOWN) the cluster holds; more registrations are refused with 429; 0 for no bound")
	fs.IntVar(&cfg.MaxSchedules, "max-schedules", cfg.MaxSchedules, fmt.Sprintf("most schedules the cluster holds, 1 to %d (0 for %d); one more is refused with 429", model.MaxSchedules, model.MaxSchedules))
	fs.IntVar(&cfg.MaxListLimit, "max-list-page", cfg.MaxListLimit, "most rows one page of a driver or app list may ask for (GET /v1/drivers?limit=N); a larger limit is refused with 400")
	fs.StringVar(&cfg.RedactRegex, "redact-regex", cfg.RedactRegex, "environment variable names whose values the web UI hides (Spark's spark.redaction.regex; Go regexp syntax); a pattern that does not compile stops the master")
	fs.IntVar(&cfg.MaxEventStreamsPerClient, "max-event-streams-per-client", cfg.MaxEventStreamsPerClient, "event streams (GET /v1/events) one client IP may hold open here (429 beyond); 0 for no bound")
	fs.IntVar(&cfg.MaxBlockingReadsPerClient, "max-blocking-reads-per-client", cfg.MaxBlockingReadsPerClient, "blocking reads (?index=) one client IP may have waiting here (429 beyond); 0 for no bound")
	eventBuffer := bytesFlag{b: cfg.EventBufferBytes, min: master.MinEventBufferBytes}
	fs.Var(&eventBuffer, "event-buffer-size", "bound on the recent events a master holds for streams that resume, by their estimated size, as 64m or 1g (a bare number is MiB; at least 1m); the oldest go first")
	fs.DurationVar(&cfg.EventWriteTimeout, "event-write-timeout", cfg.EventWriteTimeout, "how long a write to an event stream may wait for its reader before the stream is closed")
	maxUpload := sizeFlag{mb: cfg.MaxUpload >> 20}
	fs.Var(&maxUpload, "max-upload", "bound on one uploaded file (drover client submit --upload), as 256m or 1g; larger ones are refused with 413")
	maxUploadStore := sizeFlag{mb: cfg.MaxUploadStore >> 20}
	fs.Var(&maxUploadStore, "max-upload-store", "bound on this master's store of uploads (DATA_DIR/blobs), stored files and those being written together, as 10g; an upload or pull that would pass it is refused with 507")
	fs.IntVar(&cfg.MaxUploadsPerClient, "max-uploads-per-client", cfg.MaxUploadsPerClient, "uploads one client IP may have in flight here (429 beyond); 0 for no bound")
	fs.DurationVar(&cfg.UploadGrace, "upload-grace", cfg.UploadGrace, "how long an uploaded file that no live driver or app names is kept after it was stored or uploaded again")
	fs.DurationVar(&cfg.UploadSyncInterval, "upload-sync-interval", cfg.UploadSyncInterval, "how often a master pulls the uploads live drivers and apps name that it lacks, and deletes those past --upload-grace that none names")
	fs.IntVar(&cfg.SparkRESTPort, "spark-rest-port", 0, "port of a listener speaking Spark's REST submission protocol, for spark-submit --deploy-mode cluster --master spark://HOST:PORT (Spark uses 6066); same TLS and tokens as the API; 0 for none")
	launcher := fs.String("spark-launcher", strings.Join(restsubmit.DefaultLauncher, " "), "argv template of the driver a Spark REST submission runs: words, or a JSON array of strings; never a shell line. Placeholders {{appResource}} {{mainClass}} {{appName}} {{driverCores}} {{driverMemory}}, and as whole words {{appArgs}} {{sparkConf}} (docs/spark-rest.md)")
	fs.DurationVar(&cfg.SparkRESTLeaderWait, "spark-rest-leader-wait", cfg.SparkRESTLeaderWait, "how long a Spark REST request (create, status, kill, killall, clear) that finds no leader (none elected, or the one known just died) waits for one before it answers success=false; at most 1m, 0 does not wait; keep it below the 10s spark-submit waits for an answer")
	security := addSecurityFlags(fs, true)
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
	cfg.MaxUpload = maxUpload.mb << 20
	cfg.MaxUploadStore = maxUploadStore.mb << 20
	cfg.MaxProgramSize = int(maxProgram.b)
	cfg.EventBufferBytes = eventBuffer.b
	sec, err := security()
	if err != nil {
		return fail(err)
	}
	cfg.TLS, cfg.OperatorToken, cfg.SubmitToken, cfg.NodeToken = sec.TLS, sec.OperatorToken, sec.SubmitToken, sec.NodeToken
	cfg.GossipKey, cfg.Insecure, cfg.RaftKey = sec.GossipKey, sec.Insecure, sec.RaftKey
	cfg.AllowedHosts = sec.AllowedHosts
	if cfg.Peers, err = master.ParsePeers(*peers); err != nil {
		return fail(fmt.Errorf("--peers: %w", err))
	}
	cfg.Join = *join
	if cfg.SparkLauncher, err = restsubmit.SplitLauncher(*launcher); err != nil {
		return fail(fmt.Errorf("--spark-launcher: %w", err))
	}
	m, err := master.New(cfg)
	if err != nil {
		return fail(err)
	}
	log.Info("master started", "id", cfg.ID, "http", m.HTTPAddr(), "raft_port", cfg.RaftPort, "gossip_port", cfg.GossipPort)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case s := <-sig:
		log.Info("stopping", "signal", s.String())
		_ = m.Close()
		return 0
	case <-m.Halted():
		_ = m.Close()
		return fail(m.Err())
	}
}

// flagError reports a flag parsing error with exit code 1 (2 is kept for
// "no master reachable" in the client); --help is not an error.
func flagError(err error) int { return flagErrorTo(os.Stderr, err) }

// fail prints one line for err on stderr and returns exit code 1.
func fail(err error) int { return failTo(os.Stderr, err) }
