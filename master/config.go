package master

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"strings"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/master/forward"
	"github.com/drover-project/drover/master/leader"
	"github.com/drover-project/drover/master/service"
	"github.com/drover-project/drover/master/spark/restsubmit"
	"github.com/drover-project/drover/master/ui"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/model/ids"
	"github.com/drover-project/drover/security/pki"
	"github.com/drover-project/drover/transport"
	"github.com/drover-project/drover/transport/gossip"
)

// Peer is one voter of the initial Raft configuration.
type Peer struct {
	ID       string
	RaftAddr string // host:port of its Raft listener
}

// ParsePeers parses --peers: comma-separated id=host:port pairs.
func ParsePeers(s string) ([]Peer, error) {
	var out []Peer
	seen := map[string]bool{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		id, addr, ok := strings.Cut(item, "=")
		if !ok || id == "" {
			return nil, fmt.Errorf("peer %q is not id=host:port", item)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("peer %s: %v", id, err)
		}
		if seen[id] {
			return nil, fmt.Errorf("peer %s given twice", id)
		}
		seen[id] = true
		out = append(out, Peer{ID: id, RaftAddr: addr})
	}
	return out, nil
}

// Config is everything a master needs. Durations are wall-clock; the Raft
// timings follow hashicorp/raft's Config fields of the same names.
type Config struct {
	// ID is this master's Raft server ID; it must appear in Peers.
	ID string
	// DataDir holds raft.db (log and stable store, bbolt) and snapshots/.
	// Created 0700; a restart with the same directory resumes.
	DataDir string
	// BindIP is the address every listener binds and every outbound
	// connection leaves from.
	BindIP                         string
	RaftPort, HTTPPort, GossipPort int
	// Peers is the initial voter set, used to bootstrap on first start
	// only (every master may be given the same list). Empty: this master
	// joins a running cluster, and waits until the leader adds it as a
	// voter (POST /v1/operator/raft/add-voter).
	Peers []Peer
	// Join lists gossip addresses (host:port) to join the memberlist pool.
	Join []string
	// GossipProfile is memberlist's timing profile: lan, local or wan.
	GossipProfile string

	// HeartbeatTimeout, ElectionTimeout and LeaderLeaseTimeout are
	// hashicorp/raft's knobs: how long a follower waits without contact
	// before standing for election, and how long a leader keeps leading
	// without hearing from a quorum. The lease may not exceed the
	// heartbeat timeout, nor that the election timeout (raft's
	// ValidateConfig). The defaults trade failover time against needless
	// elections as docs/deployment.md (Raft timeouts) measures.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	// SnapshotInterval and SnapshotThreshold: Raft checks every interval
	// whether more than threshold entries were appended since the last
	// snapshot, and takes one if so.
	SnapshotInterval  time.Duration
	SnapshotThreshold uint64
	// ApplyTimeout bounds how long a write waits to be enqueued to Raft.
	ApplyTimeout time.Duration
	// WorkerTimeout is how long a registered worker may be missing from
	// the gossip pool before the leader commits its loss. A new leader
	// gives every worker this long to be seen first.
	WorkerTimeout time.Duration
	// WorkerHeartbeatTimeout is how long, in default fencing, a
	// registered worker may go without a heartbeat reaching the leader
	// before the leader commits its loss, whatever the gossip pool says
	// of it: a gossip member is only what it claims, and a heartbeat is
	// the worker's own. At least leader.MinWorkerHeartbeatTimeout (6 s
	// with the 2 s long poll); a longer WorkerTimeout stands in for it.
	// Strict fencing loses a worker after Lease+FencingMargin without a
	// heartbeat already.
	WorkerHeartbeatTimeout time.Duration
	// Fencing is FencingDefault or FencingStrict. In strict mode a worker
	// stops its supervised attempts once it has not heard from a leader
	// for Lease, and the leader declares a worker lost only after
	// Lease+FencingMargin without a heartbeat from it, so at most one
	// attempt of a driver runs at any instant (given clocks that advance
	// at the same rate). Lease must equal the workers' --lease.
	Fencing       string
	Lease         time.Duration
	FencingMargin time.Duration

	// SpreadOutApps places each app's executors across as many workers as
	// possible; false consolidates them on as few as possible (Spark's
	// spark.deploy.spreadOutApps).
	SpreadOutApps bool
	// MaxRunningDrivers bounds the drivers placed at once, cluster-wide:
	// past it, waiting drivers wait, whatever room the workers have
	// (Spark 4's spark.deploy.maxDrivers); 0 for no bound.
	MaxRunningDrivers int
	// MaxExecutorRetries is how many executors of an app may fail in a
	// row, with none RUNNING, before the app is FAILED; -1 for never
	// (Spark's spark.deploy.maxExecutorRetries). An app keeps the value
	// the leader had when it registered.
	MaxExecutorRetries int
	// RetainedDrivers and RetainedApps are how many finished drivers and
	// apps the tables keep; the oldest beyond these are dropped (Spark's
	// spark.deploy.retainedDrivers and retainedApplications).
	RetainedDrivers int
	RetainedApps    int
	// AppTimeout is how long an app's client may go without watching its
	// app before the leader ends the app FAILED, so executors of a client
	// that died do not hold cores for ever (Spark ends the app when the
	// client's connection drops). A new leader gives every app this long.
	AppTimeout time.Duration
	// PreemptionGrace is how long a unit preempted for a namespace's fair
	// share runs between its notice, when its program gets SIGTERM, and
	// its end, when it is killed and its cores go to the namespace that
	// took them (YARN's max_wait_before_kill, 15 s; Kubernetes's
	// terminationGracePeriodSeconds, 30 s): MinPreemptionGrace to
	// MaxPreemptionGrace. PreemptionInterval is how often the leader's
	// preemption round runs (YARN's monitoring_interval, 3 s):
	// MinPreemptionInterval to MaxPreemptionInterval.
	PreemptionGrace    time.Duration
	PreemptionInterval time.Duration

	// TLS names the cluster CA and this master's certificate and key
	// (package pki; the certificate must carry the master role). Set, the
	// HTTP API serves HTTPS, Raft runs over mutual TLS with master
	// certificates only, and every call to another node presents the
	// certificate. Zero, HTTP is plain text, and Raft runs over the TLS
	// of RaftKey when tokens are set, plain TCP when the master is open.
	TLS pki.Files
	// OperatorToken and SubmitToken are the API's bearer tokens (package
	// auth); "" leaves one unset. OpenReads lets status reads through
	// without a token or certificate.
	OperatorToken, SubmitToken string
	OpenReads                  bool
	// RaftKey is the secret the masters of a cluster without TLS share
	// (--raft-key-file; pki.RaftKey): their Raft ports admit only a peer
	// that proves it holds the key, and over HTTP they recognise each
	// other by its credential, as they would by master certificates with
	// TLS. Masters with tokens and no TLS need one; with TLS, or with
	// neither TLS nor tokens, one is refused (validate says why).
	RaftKey *pki.RaftKey
	// NodeToken is the token masters and workers share without TLS
	// (--node-token-file): workers present it for their own traffic and
	// upload reads, and masters present it to workers' HTTP (logs). It
	// must differ from the API tokens, and without TLS it needs one of
	// them beside it (validate), or nobody could use the API. With TLS,
	// certificates do its job.
	NodeToken string
	// AllowUnboundWorkerCerts lets worker certificates that name no
	// worker (made before certificates named them) act as any worker,
	// with a warning logged once per worker, and serve any worker's logs:
	// for an upgrade, until every worker has a certificate naming it.
	AllowUnboundWorkerCerts bool
	// GossipKey encrypts and authenticates the gossip pool: 16, 24 or 32
	// bytes for AES-128, -192 or -256 (memberlist's keyring). nil: plain.
	GossipKey []byte
	// Insecure lets a master with neither TLS nor tokens listen on an
	// address other than loopback.
	Insecure bool
	// AllowedHosts are the names, beside BindIP, localhost, 127.0.0.1
	// and ::1, that a master answering without a credential (no TLS,
	// and no tokens or open reads; auth.Guard.AnswersAnyone) answers to
	// on its listeners (transport.Gate); others are refused 421.
	AllowedHosts []string
	// RegisterWithoutGossip lets a worker register before it is a member
	// of the gossip pool. By default the leader waits a moment for the
	// member to appear and refuses the registration otherwise, so that a
	// worker with the wrong gossip key, which the masters could never
	// watch, gets no work. Only simulated workers in benchmarks, which
	// do not gossip, need it.
	RegisterWithoutGossip bool
	// MaxConnsPerClient bounds the HTTP connections one client IP may hold
	// open at once; more are closed as they arrive (Consul's
	// http_max_conns_per_client). MaxSubmitsPerClient bounds one client
	// IP's submissions and app registrations in flight on this master;
	// more are answered 429. 0 means no bound.
	MaxConnsPerClient, MaxSubmitsPerClient int
	// MaxEventStreamsPerClient bounds one client IP's event streams open
	// on this master, MaxBlockingReadsPerClient its blocking reads
	// waiting for a change; more are answered 429. 0 means no bound.
	MaxEventStreamsPerClient, MaxBlockingReadsPerClient int
	// EventBufferBytes bounds the recent events a master holds for
	// streams and blocking reads that resume, in bytes of their
	// estimated size (events.Size), beside fsm.DefaultEventBuffer
	// events: the oldest go first, and a reader resuming from before
	// them starts again from the tables. A stream that falls this far
	// behind is closed, and resumes.
	EventBufferBytes int64
	// EventWriteTimeout is how long a write to an event stream may wait
	// for its reader; the deadline moves ahead at each write, so a
	// reader that stops reading is cut off within it, and its stream's
	// slot (MaxEventStreamsPerClient) is free again.
	EventWriteTimeout time.Duration

	// MaxProgramSize bounds the program of a submission (its name, user,
	// argv, environment, artifacts and resource names:
	// model.SubmitDriver's ProgramSize) and the executor program of an app registration, in
	// bytes (--max-program-size); a larger one is refused with 413 before
	// anything is committed.
	MaxProgramSize int
	// MaxLiveDrivers bounds the drivers that have not ended (SUBMITTED,
	// RUNNING, RELAUNCHING, UNKNOWN), cluster-wide (--max-live-drivers),
	// and MaxLiveDriversPerClient those submitted from one client IP, at
	// the master the submission reached first
	// (--max-live-drivers-per-client); MaxLiveApps bounds the apps that
	// have not ended (--max-live-apps). The leader refuses a submission
	// or registration past one with 429, before anything is committed.
	// 0 means no bound.
	MaxLiveDrivers, MaxLiveDriversPerClient, MaxLiveApps int
	// MaxListLimit bounds the page a list of drivers or apps asks for,
	// in rows (--max-list-page): a larger limit is refused with 400, so
	// that no one answer holds more than that many rows, whatever the
	// tables hold.
	MaxListLimit int
	// MaxSchedules bounds the schedules of the cluster
	// (--max-schedules), at most model.MaxSchedules, which the tables
	// hold to (0 for it): the leader refuses a schedule past it with 429, before
	// anything is committed.
	MaxSchedules int
	// RedactRegex is the pattern of the environment variable names
	// whose values the web UI hides (--redact-regex, Spark's
	// spark.redaction.regex); the JSON API keeps them whole for those
	// who may read it. A pattern that does not compile stops the master
	// from starting.
	RedactRegex string

	// MaxUpload bounds one uploaded file, in bytes (--max-upload); a
	// larger one is refused with 413, before its bytes are read when its
	// Content-Length says so.
	MaxUpload int64
	// MaxUploadStore bounds the bytes of this master's store of uploads,
	// the stored files and those being written together, in bytes
	// (--max-upload-store); an upload or a pull that would pass it is
	// refused with 507, before its bytes are read when its
	// Content-Length says so. At least MaxUpload.
	MaxUploadStore int64
	// MaxUploadsPerClient bounds one client IP's uploads in flight on
	// this master (--max-uploads-per-client): each holds a temp file and
	// a push to every voter. More are answered 429; 0 means no bound.
	MaxUploadsPerClient int
	// UploadGrace is how long an uploaded file no live driver or app
	// names is kept after it was stored or last uploaded again: it
	// covers the time between an upload's acknowledgement and the
	// submission that names it, and a client's retries.
	UploadGrace time.Duration
	// UploadSyncInterval is how often a master pulls the uploads live
	// drivers and apps name that its store lacks, and deletes those past
	// their grace that none names.
	UploadSyncInterval time.Duration

	// SparkRESTPort, when not 0, starts a listener on BindIP that speaks
	// Spark standalone's REST submission protocol (Spark's
	// StandaloneRestServer, port 6066 in Spark), so that spark-submit
	// --deploy-mode cluster --master spark://HOST:PORT can submit, query
	// and kill drivers (package restsubmit). It has the API's TLS, tokens and
	// bounds.
	SparkRESTPort int
	// SparkLauncher is the argv template a Spark submission becomes a
	// driver program through (restsubmit.Launcher: placeholders such as
	// {{mainClass}} and {{appArgs}}); nil for restsubmit.DefaultLauncher.
	SparkLauncher []string
	// SparkRESTLeaderWait is how long a Spark REST request that reaches
	// this master while no leader can answer waits for one
	// (forward.WithLeaderWait) before it answers success=false: Spark's
	// RestSubmissionClient tries each master once, so without the wait a
	// submission made in the second after a leader's loss fails. 0 does
	// not wait; at most forward.MaxLeaderWait.
	SparkRESTLeaderWait time.Duration

	Logger *slog.Logger
}

// Fencing modes.
const (
	// FencingDefault keeps drivers running while their worker cannot
	// reach a leader; a partitioned worker's attempt may then overlap its
	// relaunch elsewhere until the partition heals.
	FencingDefault = "default"
	// FencingStrict trades availability for at most one live attempt.
	FencingStrict = "strict"
)

// DefaultConfig returns a Config with every timing set for a LAN; ID, data
// dir, addresses and peers must still be filled in.
//
// The Raft timeouts are 400 ms each. A follower stands between one and
// three heartbeat timeouts after its leader's death (raft's timer fires at
// random in [timeout, 2*timeout) and only then checks the last contact),
// so 400 ms bounds a failover near 1.2 s plus the vote and the Barrier,
// where 1 s took up to 2.9 s. The lease as long as the heartbeat timeout
// lets a leader ride out a stall of 200 ms; with half of it, a 400 ms
// stall made the leader step down every time.
func DefaultConfig() Config {
	return Config{
		BindIP:              "127.0.0.1",
		GossipProfile:       "lan",
		HeartbeatTimeout:    400 * time.Millisecond,
		ElectionTimeout:     400 * time.Millisecond,
		LeaderLeaseTimeout:  400 * time.Millisecond,
		SnapshotInterval:    30 * time.Second,
		SnapshotThreshold:   8192,
		ApplyTimeout:        5 * time.Second,
		WorkerTimeout:       2 * time.Second,
		Fencing:             FencingDefault,
		Lease:               3 * time.Second,
		FencingMargin:       time.Second,
		SpreadOutApps:       true,
		MaxExecutorRetries:  10,
		RetainedDrivers:     200,
		RetainedApps:        200,
		AppTimeout:          30 * time.Second,
		PreemptionGrace:     30 * time.Second,
		PreemptionInterval:  3 * time.Second,
		MaxConnsPerClient:   512,
		MaxSubmitsPerClient: 128,
		EventBufferBytes:    fsm.DefaultEventBufferBytes,
		MaxProgramSize:      model.DefaultMaxProgramSize,
		// One client's streams and blocking reads each hold a goroutine,
		// a connection and a subscription: 80 of them some 5 MiB.
		MaxEventStreamsPerClient:  service.DefaultMaxEventStreamsPerClient,
		MaxBlockingReadsPerClient: service.DefaultMaxBlockingReadsPerClient,
		EventWriteTimeout:         30 * time.Second,
		// Well above a live worker's longest silence (6 s), as Nomad's
		// heartbeat grace is above its TTL.
		WorkerHeartbeatTimeout: 15 * time.Second,
		// The load the placement benchmark holds on 1,000 workers (some
		// 380 MiB on the leader, docs/deployment.md), and as many from one
		// client: a client's key is its IP, which behind a gateway or NAT
		// is every submitter's, so a smaller default would cap such a
		// cluster below the bound its operator set (YARN's
		// user-limit-factor 1 lets one user take a whole queue the same
		// way). Set it lower where submitters have addresses of their own.
		MaxLiveDrivers:          100_000,
		MaxLiveDriversPerClient: 100_000,
		// Each live app's client holds a watch open at the leader: at the
		// 60 KiB a held request and its connection take, 10,000 cost it
		// some 600 MiB, more than the drivers' bound does.
		MaxLiveApps: 10_000,
		// Spark's client gives up on an answer after 10 s (its
		// RestSubmissionClient.readResponse) and posts to the next
		// master, which would submit again: the wait ends early enough
		// for the leader found at its end to commit and answer first.
		SparkRESTLeaderWait: DefaultSparkRESTLeaderWait,
		MaxListLimit:        api.DefaultMaxListLimit,
		MaxSchedules:        model.MaxSchedules,
		RedactRegex:         ui.DefaultRedactRegex,
		MaxUpload:           DefaultMaxUpload,
		MaxUploadStore:      DefaultMaxUploadStore,
		// Each upload in flight holds a temp file of up to --max-upload
		// and a push to every voter: four are 1 GiB at the default bound,
		// and a client uploads one file at a time (drover client submit
		// --upload, client.Upload).
		MaxUploadsPerClient: 4,
		UploadGrace:         time.Hour,
		UploadSyncInterval:  10 * time.Second,
	}
}

// Bounds of the preemption flags: a grace long enough for a program to
// hear its SIGTERM and short enough that a starved namespace gets its
// share within the hour; a round often enough to follow the queue and
// rare enough to cost the leader nothing.
const (
	MinPreemptionGrace    = time.Second
	MaxPreemptionGrace    = time.Hour
	MinPreemptionInterval = 100 * time.Millisecond
	MaxPreemptionInterval = time.Minute
)

// DefaultSparkRESTLeaderWait is the default of Config.SparkRESTLeaderWait:
// 8 s, two seconds short of the 10 s Spark's client waits for an answer.
const DefaultSparkRESTLeaderWait = 8 * time.Second

// DefaultMaxUpload is the default bound on one uploaded file: 256 MiB.
const DefaultMaxUpload = 256 << 20

// DefaultMaxUploadStore is the default bound on the bytes of a master's
// store of uploads: 10 GiB, forty files at the default bound on one, as
// the workers' artifact cache is bounded by default (--cache-size).
const DefaultMaxUploadStore = 10 << 30

// MinEventBufferBytes is the least EventBufferBytes, 1 MiB: the events of
// one entry of a large program (a request holds at most
// api.MaxBodyBytes) may take about that much.
const MinEventBufferBytes = 1 << 20

func (c *Config) validate() error {
	var errs []error
	if err := ids.CheckMaster(c.ID); err != nil {
		errs = append(errs, fmt.Errorf("--id: %w (it names the master in Raft, logs and operator commands)", err))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("--data-dir is required"))
	}
	if net.ParseIP(c.BindIP) == nil {
		errs = append(errs, fmt.Errorf("--bind %q is not an IP address", c.BindIP))
	}
	for _, p := range []struct {
		name string
		v    int
	}{{"--raft-port", c.RaftPort}, {"--http-port", c.HTTPPort}, {"--gossip-port", c.GossipPort}} {
		if p.v <= 0 || p.v > 65535 {
			errs = append(errs, fmt.Errorf("%s %d is not a port", p.name, p.v))
		}
	}
	found := false
	for _, p := range c.Peers {
		if p.ID == c.ID {
			found = true
		}
	}
	if !found && len(c.Peers) > 0 {
		errs = append(errs, fmt.Errorf("--peers must include this master (%s)", c.ID))
	}
	if _, err := gossip.ProfileConfig(c.GossipProfile); err != nil {
		errs = append(errs, err)
	}
	if err := transport.CheckAllowedHosts(c.AllowedHosts); err != nil {
		errs = append(errs, err)
	}
	if c.Fencing != FencingDefault && c.Fencing != FencingStrict {
		errs = append(errs, fmt.Errorf("--fencing %q: want default or strict", c.Fencing))
	}
	if c.Lease <= 0 || c.FencingMargin < 0 {
		errs = append(errs, errors.New("--lease must be positive and --fencing-margin not negative"))
	}
	if c.MaxExecutorRetries < -1 {
		errs = append(errs, fmt.Errorf("--max-executor-retries %d: want -1 (never fail) or more", c.MaxExecutorRetries))
	}
	if c.MaxRunningDrivers < 0 {
		errs = append(errs, fmt.Errorf("--max-running-drivers %d: want 0 (no bound) or more", c.MaxRunningDrivers))
	}
	if c.RetainedDrivers < 0 || c.RetainedApps < 0 {
		errs = append(errs, errors.New("--retained-drivers and --retained-apps must not be negative"))
	}
	if c.AppTimeout <= 0 {
		errs = append(errs, errors.New("--app-timeout must be positive"))
	}
	if c.PreemptionGrace < MinPreemptionGrace || c.PreemptionGrace > MaxPreemptionGrace {
		errs = append(errs, fmt.Errorf("--preemption-grace %s is outside %s to %s", c.PreemptionGrace, MinPreemptionGrace, MaxPreemptionGrace))
	}
	if c.PreemptionInterval < MinPreemptionInterval || c.PreemptionInterval > MaxPreemptionInterval {
		errs = append(errs, fmt.Errorf("--preemption-interval %s is outside %s to %s", c.PreemptionInterval, MinPreemptionInterval, MaxPreemptionInterval))
	}
	if c.TLS.Enabled() && (c.TLS.CA == "" || c.TLS.Cert == "" || c.TLS.Key == "") {
		errs = append(errs, errors.New("TLS needs all of --tls-ca, --tls-cert and --tls-key"))
	}
	if err := c.checkNodeTokenAlone(); err != nil {
		errs = append(errs, err)
	} else if err := c.checkRaftKey(); err != nil {
		errs = append(errs, err)
	}
	if c.MaxConnsPerClient < 0 || c.MaxSubmitsPerClient < 0 || c.MaxEventStreamsPerClient < 0 || c.MaxBlockingReadsPerClient < 0 {
		errs = append(errs, errors.New("--max-conns-per-client, --max-submits-per-client, --max-event-streams-per-client and --max-blocking-reads-per-client must not be negative"))
	}
	if c.MaxLiveDrivers < 0 || c.MaxLiveDriversPerClient < 0 || c.MaxLiveApps < 0 {
		errs = append(errs, errors.New("--max-live-drivers, --max-live-drivers-per-client and --max-live-apps must not be negative"))
	}
	if c.MaxSchedules < 0 || c.MaxSchedules > model.MaxSchedules {
		errs = append(errs, fmt.Errorf("--max-schedules %d must be 1 to %d (0 for %d)", c.MaxSchedules, model.MaxSchedules, model.MaxSchedules))
	}
	if c.MaxListLimit < 1 {
		errs = append(errs, fmt.Errorf("--max-list-page %d must be at least 1", c.MaxListLimit))
	}
	if _, err := regexp.Compile(c.RedactRegex); err != nil {
		errs = append(errs, fmt.Errorf("--redact-regex %q does not compile: %v", c.RedactRegex, err))
	}
	if c.EventBufferBytes < MinEventBufferBytes {
		errs = append(errs, fmt.Errorf("--event-buffer-size %d bytes is below 1m", c.EventBufferBytes))
	}
	if c.EventWriteTimeout <= 0 {
		errs = append(errs, errors.New("--event-write-timeout must be positive"))
	}
	if c.SparkRESTPort < 0 || c.SparkRESTPort > 65535 {
		errs = append(errs, fmt.Errorf("--spark-rest-port %d is not a port (0 for none)", c.SparkRESTPort))
	}
	if _, err := restsubmit.NewLauncher(c.SparkLauncher); err != nil {
		errs = append(errs, fmt.Errorf("--spark-launcher: %w", err))
	}
	if c.SparkRESTLeaderWait < 0 || c.SparkRESTLeaderWait > forward.MaxLeaderWait {
		errs = append(errs, fmt.Errorf("--spark-rest-leader-wait %s is outside 0 to %s (0 does not wait)", c.SparkRESTLeaderWait, forward.MaxLeaderWait))
	}
	switch {
	case c.MaxProgramSize <= 0:
		errs = append(errs, fmt.Errorf("--max-program-size %d must be positive", c.MaxProgramSize))
	case c.MaxProgramSize > api.MaxBodyBytes:
		// A program travels in a request body: a larger bound would
		// never be reached, and would look like a bound that is.
		errs = append(errs, fmt.Errorf("--max-program-size (%d bytes) is above the bound on a request's body (%d bytes), which it could never reach; a bare number is MiB, write 64k for 64 KiB", c.MaxProgramSize, api.MaxBodyBytes))
	}
	if c.MaxUpload <= 0 || c.UploadGrace <= 0 || c.UploadSyncInterval <= 0 {
		errs = append(errs, errors.New("--max-upload, --upload-grace and --upload-sync-interval must be positive"))
	}
	if c.MaxUploadStore < c.MaxUpload {
		errs = append(errs, fmt.Errorf("--max-upload-store (%d bytes) must be at least --max-upload (%d bytes), or no file of that size could be stored", c.MaxUploadStore, c.MaxUpload))
	}
	if c.MaxUploadsPerClient < 0 {
		errs = append(errs, errors.New("--max-uploads-per-client must not be negative"))
	}
	if c.HeartbeatTimeout <= 0 || c.ElectionTimeout <= 0 || c.LeaderLeaseTimeout <= 0 || c.WorkerTimeout < 0 {
		errs = append(errs, errors.New("timeouts must be positive"))
	}
	if least := leader.MinWorkerHeartbeatTimeout(c.heartbeatWait()); c.WorkerHeartbeatTimeout < least {
		errs = append(errs, fmt.Errorf("--worker-heartbeat-timeout %s is below %s: a live worker's heartbeats may pause that long when the leader changes", c.WorkerHeartbeatTimeout, least))
	}
	return errors.Join(errs...)
}

// checkNodeTokenAlone refuses a master with a node token but neither TLS
// nor an API token. The node token and the masters' credential (the raft
// key's) grant workers' traffic and upload reads alone, and the credential
// crosses the network in plain text with every forwarded request, so it
// must never stand for an operator: such a master's API would serve
// nobody but its workers.
func (c *Config) checkNodeTokenAlone() error {
	if c.NodeToken == "" || c.TLS.Enabled() || c.OperatorToken != "" || c.SubmitToken != "" {
		return nil
	}
	return errors.New("a node token without TLS needs --operator-token-file or --submit-token-file beside it: the node token and the raft key grant workers' traffic alone, so nobody could submit to this master or operate it; give it the operator token (drover keygen > operator.token), or use TLS")
}

// checkRaftKey asks for the raft key exactly where it is the masters'
// proof to each other: with tokens and no TLS. With TLS, master
// certificates prove a master on the Raft port and over HTTP, and a key
// beside them would be a second secret on the same disk that stops nobody
// the certificate does not; with neither TLS nor tokens, anyone may do
// over the API what the key would guard on the Raft port.
func (c *Config) checkRaftKey() error {
	// The node token closes the API as the others do, so a master with
	// it alone needs the key as much.
	tokens := c.OperatorToken != "" || c.SubmitToken != "" || c.NodeToken != ""
	switch {
	case c.RaftKey == nil && tokens && !c.TLS.Enabled():
		return errors.New("tokens without TLS need --raft-key-file, the masters' proof to each other: without it anyone who reaches the Raft port could append entries, install a snapshot or raise the term; make one with drover keygen > raft.key (chmod 600) and give every master the same")
	case c.RaftKey != nil && c.TLS.Enabled():
		return errors.New("--raft-key-file is for masters without TLS: with TLS, master certificates already prove a master on the Raft port and over HTTP; drop the key")
	case c.RaftKey != nil && !tokens:
		return errors.New("--raft-key-file is for masters with tokens and no TLS: a master with neither lets anyone do over its API what the key guards; give tokens, or drop the key")
	}
	return nil
}

// masterCredential is what the masters present to each other over HTTP
// without TLS, "" with TLS (certificates do) or when open.
func (c *Config) masterCredential() string {
	if c.RaftKey == nil {
		return ""
	}
	return c.RaftKey.Credential()
}

func (c *Config) strict() bool { return c.Fencing == FencingStrict }

// heartbeatWait is how long the leader holds a worker's heartbeat when
// nothing changed for it (a long poll): at most 2s, and short enough in
// strict mode that a worker hears from the leader several times per lease.
func (c *Config) heartbeatWait() time.Duration {
	if c.strict() {
		return min(2*time.Second, c.Lease/3)
	}
	return 2 * time.Second
}

// lossDelay is how long a worker must be silent before the leader may
// declare it lost.
func (c *Config) lossDelay() time.Duration {
	if c.strict() {
		return c.Lease + c.FencingMargin
	}
	return c.WorkerTimeout
}

func (c *Config) raftAddr() string { return net.JoinHostPort(c.BindIP, fmt.Sprint(c.RaftPort)) }
func (c *Config) httpAddr() string { return net.JoinHostPort(c.BindIP, fmt.Sprint(c.HTTPPort)) }
func (c *Config) gossipAddr() string {
	return net.JoinHostPort(c.BindIP, fmt.Sprint(c.GossipPort))
}
