// Package master runs one Drover master: a hashicorp/raft voter over the fsm
// tables, a member of the gossip pool, and its listeners. It only wires the
// parts together; each part is a package of its own:
//
//	httpapi, webui, restsubmit   listeners: decode, call the service, encode
//	service                     the rules, and the only writer to Raft (Admit in front)
//	forward                     hands what only the leader may answer to the leader
//	leader                      what a master owns for one term of leadership
//	blobs, blobsync             the store of uploaded files, and its copies on the other voters
//	metrics                     the Prometheus registry
//
// docs/architecture.md draws the layers and how a request travels.
package master

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/fsm/events"
	"github.com/drover-project/drover/master/blobs"
	"github.com/drover-project/drover/master/blobsync"
	"github.com/drover-project/drover/master/forward"
	"github.com/drover-project/drover/master/httpapi"
	"github.com/drover-project/drover/master/leader"
	"github.com/drover-project/drover/master/metrics"
	"github.com/drover-project/drover/master/service"
	"github.com/drover-project/drover/master/spark/masterjson"
	"github.com/drover-project/drover/master/spark/restsubmit"
	"github.com/drover-project/drover/master/webui"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/security/auth"
	"github.com/drover-project/drover/transport"
	"github.com/drover-project/drover/transport/gossip"
	"github.com/drover-project/drover/transport/raftnet"
)

// Master is a running master. Close stops it.
type Master struct {
	cfg   Config
	log   *slog.Logger
	fsm   *fsm.FSM
	raft  *raft.Raft
	store *raftboltdb.BoltStore
	snaps raft.SnapshotStore
	trans *raft.NetworkTransport
	// streams is Raft's stream layer, which also answers and asks who a
	// master is (raftnet.Self).
	streams *raftnet.StreamLayer
	finder  *finder
	pool    *gossip.Pool
	// beats says which followers the leader's heartbeats fail to reach.
	beats *heartbeats
	tls   tlsConfigs

	// local answers what this master answers itself; chain is the way
	// every listener calls it: admission, the Forwarder, then local.
	local   *service.Local
	chain   *service.Chain
	metrics *metrics.Metrics
	// replicas pushes uploads to the other voters, pulls what this
	// master lacks and deletes what nothing names.
	replicas *blobsync.Replicas

	server *http.Server
	ln     net.Listener
	// sparkServer serves Spark's REST submission protocol; nil unless
	// cfg.SparkRESTPort is set.
	sparkServer *http.Server

	// gossipChanged is signalled on every pool change.
	gossipChanged *broadcast
	// halted is closed when the tables met a log entry they cannot apply;
	// err says why.
	halted chan struct{}
	err    error

	// loops are the leadership loop, the halt watch, the finder and the
	// uploads' passes; servers the listeners' goroutines.
	loops, servers sync.WaitGroup
	stop           chan struct{}
	stopped        sync.Once
}

// New starts a master: opens or creates the data dir, starts Raft
// (bootstrapping from cfg.Peers on first start), joins the gossip pool and
// serves HTTP. It returns once every listener is up.
func New(cfg Config) (*Master, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	guard, err := auth.New(auth.Config{
		OperatorToken: cfg.OperatorToken, SubmitToken: cfg.SubmitToken, NodeToken: cfg.NodeToken,
		OpenReads: cfg.OpenReads, TLS: cfg.TLS.Enabled(), MasterCredential: cfg.masterCredential(),
		AllowUnboundWorkerCerts: cfg.AllowUnboundWorkerCerts,
	})
	if err != nil {
		return nil, err
	}
	warning, err := auth.CheckExposure(cfg.BindIP, cfg.TLS.Enabled(), guard.Tokens() || cfg.NodeToken != "", cfg.Insecure)
	if err != nil {
		return nil, err
	}
	keyWarning, err := auth.CheckGossipKey(cfg.BindIP, cfg.TLS.Enabled(), guard.Tokens() || cfg.NodeToken != "", cfg.GossipKey != nil, cfg.Insecure)
	if err != nil {
		return nil, err
	}
	gate, err := transport.NewGate(transport.GateConfig{CheckHost: guard.AnswersAnyone(), BindIP: cfg.BindIP, AllowedHosts: cfg.AllowedHosts})
	if err != nil {
		return nil, err
	}
	tc, certWarning, err := newTLSConfigs(cfg.TLS, cfg.RaftKey, cfg.ID)
	if err != nil {
		return nil, err
	}
	m := &Master{
		cfg:           cfg,
		log:           cfg.Logger.With("master", cfg.ID),
		fsm:           fsm.NewBuffered(events.Bounds{Events: fsm.DefaultEventBuffer, Bytes: cfg.EventBufferBytes}),
		tls:           tc,
		gossipChanged: newBroadcast(),
		halted:        make(chan struct{}),
		stop:          make(chan struct{}),
	}
	// Namespace tokens are checked against this master's own applied
	// table, so a revocation counts here as soon as it is applied; until
	// this master has caught up with the log (current), a token it does
	// not hold may be one it has yet to apply, and is answered 503.
	guard.SetACLTokens(func(hash string) (*model.ACLToken, bool) { return m.fsm.State().ACLTokenBySecretHash(hash) }, m.current)
	for _, w := range []string{warning, certWarning, keyWarning} {
		if w != "" {
			m.log.Warn(w)
		}
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	store, err := blobs.Open(filepath.Join(cfg.DataDir, "blobs"), cfg.MaxUpload, cfg.MaxUploadStore)
	if err != nil {
		return nil, err
	}
	if err := m.startRaft(); err != nil {
		m.closeRaft()
		return nil, err
	}
	m.metrics = metrics.New(m.raft)
	m.beats = watchHeartbeats(m.raft, m.stop, &m.loops)
	m.finder = newFinder(m)
	pool, err := gossip.Start(gossip.Config{
		Meta:      gossip.Meta{Role: gossip.RoleMaster, ID: cfg.ID, HTTP: cfg.httpAddr(), LogFormat: fsm.FormatPack},
		BindIP:    cfg.BindIP,
		Port:      cfg.GossipPort,
		Profile:   cfg.GossipProfile,
		Join:      cfg.Join,
		Discover:  m.finder.Addrs,
		OnChange:  m.gossipChanged.Signal,
		SecretKey: cfg.GossipKey,
		Logger:    m.log,
	})
	if err != nil {
		m.closeRaft()
		return nil, err
	}
	m.pool = pool
	peerHTTP := peerClient(cfg.BindIP, tc, cfg.RaftKey)
	m.replicas = blobsync.New(blobsync.Config{
		Self: cfg.ID, Scheme: m.scheme(), Voters: m.blobVoters, Live: m.fsm.State().LiveUploads, Current: m.current,
		Grace: cfg.UploadGrace, Interval: cfg.UploadSyncInterval,
	}, blobsync.Deps{Store: store, HTTP: peerHTTP, Metrics: m.metrics, Log: m.log})
	m.local = service.New(service.Config{
		ID: cfg.ID, HTTPAddr: cfg.httpAddr(), GossipAddr: cfg.gossipAddr(), Scheme: m.scheme(),
		ApplyTimeout: cfg.ApplyTimeout, ElectionTimeout: cfg.ElectionTimeout, HeartbeatTimeout: cfg.HeartbeatTimeout,
		HeartbeatWait: cfg.heartbeatWait(), LossDelay: cfg.lossDelay(), Strict: cfg.strict(),
		RegisterWithoutGossip: cfg.RegisterWithoutGossip, MaxExecutorRetries: cfg.MaxExecutorRetries,
		MaxProgramSize: cfg.MaxProgramSize,
		MaxLiveDrivers: cfg.MaxLiveDrivers, MaxLiveDriversPerClient: cfg.MaxLiveDriversPerClient, MaxLiveApps: cfg.MaxLiveApps,
		MaxListLimit: cfg.MaxListLimit, MaxSchedules: cfg.MaxSchedules, MaxRunningDrivers: cfg.MaxRunningDrivers,
		WorkerToken: cmp.Or(cfg.NodeToken, cfg.OperatorToken), AllowUnboundWorkerCerts: cfg.AllowUnboundWorkerCerts,
	}, service.Deps{
		Raft: m.raft, FSM: m.fsm, Snaps: m.snaps, Pool: pool, Guard: guard,
		Workers: transport.NewHTTPClient(cfg.BindIP, 0, tc.worker),
		Metrics: m.metrics, Log: m.log, KnownMasters: m.finder.Known, MasterHTTP: m.finder.HTTP,
		Blobs: store, Replicas: m.replicas,
	})
	m.metrics.Watch(metrics.Source{Raft: m.raft, State: m.fsm.State(), Pool: pool, Ready: m.local.Ready, Split: m.local.Split, Blobs: store.Usage})
	fwd := forward.New(m.local.Leadership, peerHTTP, m.scheme())
	bounds := service.Bounds{Submits: cfg.MaxSubmitsPerClient, Uploads: cfg.MaxUploadsPerClient,
		EventStreams: cfg.MaxEventStreamsPerClient, BlockingReads: cfg.MaxBlockingReadsPerClient}
	m.chain = service.NewChain(m.local, fwd, guard, m.log, bounds, func(token string) bool {
		_, ok := m.fsm.State().DriverByToken(token)
		return ok
	})
	conns := transport.NewConnLimit(cfg.MaxConnsPerClient, transport.DefaultMaxConns())
	if err := m.startHTTP(guard, gate, conns); err != nil {
		_ = m.pool.Shutdown()
		m.closeRaft()
		return nil, err
	}
	if err := m.startSparkREST(guard, gate, conns); err != nil {
		_ = m.server.Close()
		_ = m.pool.Shutdown()
		m.closeRaft()
		return nil, err
	}
	m.loops.Add(4)
	go m.leadershipLoop()
	go m.watchHalt()
	go func() {
		defer m.loops.Done()
		m.finder.run(m.stop)
	}()
	go func() {
		defer m.loops.Done()
		m.replicas.Run(m.stop)
	}()
	return m, nil
}

// logCacheEntries is how many of the latest Raft log entries a master
// keeps in memory (cachedLogs).
const logCacheEntries = 16

// cachedLogs puts a cache of the latest entries (raft.LogCache) in front
// of the log store. A leader reads every entry back twice per follower
// (the entries it sends, and the one before them for its term), and a
// follower each entry it applies; from bbolt each read decoded a copy of
// the entry, a sixth of all a leader allocated while placing 100,000
// drivers. The cache answers for the latest entries, which are the ones
// read unless a follower lags; it holds at most logCacheEntries entries
// of up to fsm.MaxCommandSize, most far smaller.
func cachedLogs(store raft.LogStore) (raft.LogStore, error) {
	return raft.NewLogCache(logCacheEntries, store)
}

func (m *Master) startRaft() error {
	c := raft.DefaultConfig()
	c.LocalID = raft.ServerID(m.cfg.ID)
	c.HeartbeatTimeout = m.cfg.HeartbeatTimeout
	c.ElectionTimeout = m.cfg.ElectionTimeout
	c.LeaderLeaseTimeout = m.cfg.LeaderLeaseTimeout
	c.SnapshotInterval = m.cfg.SnapshotInterval
	c.SnapshotThreshold = m.cfg.SnapshotThreshold
	c.Logger = hclog.New(&hclog.LoggerOptions{
		Level:       hclog.Info,
		Output:      levelWriter{m.log.With("component", "raft")},
		DisableTime: true,
	})

	// The log's file keeps the pages of entries a snapshot compacted away
	// as free pages, thousands of them. bbolt writes that list at every
	// commit unless NoFreelistSync, and rebuilds it when it opens the file
	// instead (16 ms for a 128 MB log here); the hash map finds free runs
	// without scanning a sorted array. One 10 KB entry took 170 to 190 us
	// of CPU to commit so, 220 to 310 us with the defaults. Consul and
	// Nomad offer the same setting for their logs.
	store, err := raftboltdb.New(raftboltdb.Options{
		Path: filepath.Join(m.cfg.DataDir, "raft.db"),
		BoltOptions: &bbolt.Options{Timeout: time.Second, NoFreelistSync: true,
			FreelistType: bbolt.FreelistMapType},
	})
	if err != nil {
		return fmt.Errorf("open %s (is another master using this data dir?): %w",
			filepath.Join(m.cfg.DataDir, "raft.db"), err)
	}
	m.store = store
	snaps, err := raft.NewFileSnapshotStoreWithLogger(m.cfg.DataDir, 2, c.Logger)
	if err != nil {
		return fmt.Errorf("snapshot store: %w", err)
	}
	m.snaps = snaps
	self := raftnet.Self{ID: m.cfg.ID, HTTP: m.cfg.httpAddr(), Gossip: m.cfg.gossipAddr()}
	m.streams, err = raftnet.NewStreamLayer(m.cfg.raftAddr(), m.tls.raftServer, m.tls.raftClient, func() raftnet.Self { return self },
		m.log.With("component", "raft-net"))
	if err != nil {
		return err
	}
	trans, err := raftnet.NewRaftTransport(m.streams, 5*time.Second,
		slog.NewLogLogger(m.log.With("component", "raft-net").Handler(), slog.LevelDebug).Writer())
	if err != nil {
		return err
	}
	m.trans = trans
	existing, err := raft.HasExistingState(store, store, snaps)
	if err != nil {
		return fmt.Errorf("read raft state: %w", err)
	}
	switch {
	case existing:
	case len(m.cfg.Peers) == 0:
		m.log.Info("no Raft state and no --peers: waiting to be added as a voter (drover operator raft add-voter)")
	default:
		var servers []raft.Server
		for _, p := range m.cfg.Peers {
			servers = append(servers, raft.Server{
				Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddr),
			})
		}
		if err := raft.BootstrapCluster(c, store, store, snaps, trans, raft.Configuration{Servers: servers}); err != nil {
			return fmt.Errorf("bootstrap: %w", err)
		}
		m.log.Info("bootstrapped new cluster", "peers", len(servers))
	}
	logs, err := cachedLogs(store)
	if err != nil {
		return err
	}
	r, err := raft.NewRaft(c, m.fsm, logs, store, snaps, trans)
	if err != nil {
		return fmt.Errorf("start raft: %w", err)
	}
	m.raft = r
	return nil
}

func (m *Master) closeRaft() {
	if m.raft != nil {
		if err := m.raft.Shutdown().Error(); err != nil {
			m.log.Warn("raft shutdown", "err", err)
		}
	}
	if m.trans != nil {
		_ = m.trans.Close()
	}
	if m.store != nil {
		_ = m.store.Close()
	}
}

// startHTTP serves the /v1 API, the web UI and /metrics on one listener,
// behind gate.
func (m *Master) startHTTP(guard *auth.Guard, gate *transport.Gate, conns *transport.ConnLimit) error {
	mux := http.NewServeMux()
	api := httpapi.Config{Chain: m.chain, Guard: guard, Leadership: m.local.Leadership, Metrics: m.metrics, Log: m.log,
		Spark: masterjson.Site{URL: m.sparkURL(), Scheme: m.scheme()}, Gate: gate, EventWriteTimeout: m.cfg.EventWriteTimeout}
	httpapi.Register(mux, api)
	webui.Register(mux, webui.Config{Chain: m.chain, Guard: guard, Leadership: m.local.Leadership, Scheme: m.scheme(), Log: m.log,
		Redact: regexp.MustCompile(m.cfg.RedactRegex)})
	ln, err := m.listen(m.cfg.HTTPPort, conns)
	if err != nil {
		return fmt.Errorf("http listen: %w", err)
	}
	m.ln = ln
	m.server = m.serve(ln, httpapi.Wrap(mux, api), "http")
	return nil
}

// sparkURL is this master's address as Spark tools take one: its Spark
// REST listener's, where spark-submit --master points, or its API's when
// it serves no Spark REST.
func (m *Master) sparkURL() string {
	if m.cfg.SparkRESTPort == 0 {
		return m.scheme() + "://" + m.cfg.httpAddr()
	}
	return "spark://" + net.JoinHostPort(m.cfg.BindIP, strconv.Itoa(m.cfg.SparkRESTPort))
}

// startSparkREST starts the Spark REST submission listener when
// cfg.SparkRESTPort is set. It is secured as the API is, because it is the
// same door: it binds the same address, holds each client IP to the same
// connection bound, serves TLS with the API's config, and calls the same
// service, so tokens, certificate roles, validation, the per-client
// submission bound and forwarding to the leader are the API's; and it
// stands behind the API's gate.
func (m *Master) startSparkREST(guard *auth.Guard, gate *transport.Gate, conns *transport.ConnLimit) error {
	if m.cfg.SparkRESTPort == 0 {
		return nil
	}
	launcher, err := restsubmit.NewLauncher(m.cfg.SparkLauncher)
	if err != nil {
		return fmt.Errorf("--spark-launcher: %w", err)
	}
	ln, err := m.listen(m.cfg.SparkRESTPort, conns)
	if err != nil {
		return fmt.Errorf("spark REST listen: %w", err)
	}
	h := restsubmit.NewHandler(restsubmit.Chained(m.chain), guard, launcher)
	// Spark's client tries each master once: its requests wait for a
	// leader where the API's, whose client retries, do not.
	wait := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(forward.WithLeaderWait(r.Context(), m.cfg.SparkRESTLeaderWait)))
	})
	m.sparkServer = m.serve(ln, m.metrics.Instrument(gate.Wrap(wait, restsubmit.WriteError)), "spark REST")
	m.log.Info("serving Spark REST submissions", "addr", ln.Addr().String(), "tls", m.tls.http != nil,
		"launcher", launcher.Argv())
	return nil
}

// listen opens a listener of the master's on port, counted against conns;
// the returned listener speaks TLS when the cluster does, and its Addr is
// the TCP address.
func (m *Master) listen(port int, conns *transport.ConnLimit) (net.Listener, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(m.cfg.BindIP, strconv.Itoa(port)))
	if err != nil {
		return nil, err
	}
	ln = conns.Wrap(ln)
	if m.tls.http != nil {
		ln = tls.NewListener(ln, m.tls.http)
	}
	return ln, nil
}

// serve runs an HTTP server with the timeouts and limits of every
// listener of a master on ln until Close.
func (m *Master) serve(ln net.Listener, h http.Handler, what string) *http.Server {
	s := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    api.MaxHeaderBytes,
		// Handshake failures and the like are what any client can cause,
		// as often as it likes: debug, not info.
		ErrorLog: slog.NewLogLogger(m.log.With("component", what).Handler(), slog.LevelDebug),
	}
	m.servers.Add(1)
	go func() {
		defer m.servers.Done()
		if err := s.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.log.Error(what+" server", "err", err)
		}
	}()
	return s
}

// Close stops the master: a leader first hands leadership to another voter
// (raft.LeadershipTransfer), so that writes pause for one round of votes
// instead of an election timeout; then it stops serving, leaves the gossip
// pool and shuts Raft down. It is safe to call more than once.
func (m *Master) Close() error {
	m.stopped.Do(func() {
		m.handOver()
		close(m.stop)
		// The term ends before the listeners, so that the requests it
		// holds (heartbeats, watches) answer now rather than hold up
		// the shutdown.
		m.loops.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = m.server.Shutdown(ctx)
		if m.sparkServer != nil {
			_ = m.sparkServer.Shutdown(ctx)
		}
		m.servers.Wait()
		m.replicas.Close()
		_ = m.pool.Leave(time.Second)
		m.closeRaft()
	})
	return nil
}

// Halted is closed when this master met a committed log entry it cannot
// apply (an entry of a newer version, or a corrupt one). It then stops, as
// Close does, because going on would skip the entry and leave its tables
// unlike its peers'; its log and data dir stay as they are, for a newer
// version to go on from. Err says why.
func (m *Master) Halted() <-chan struct{} { return m.halted }

// Err is why the master halted, nil before.
func (m *Master) Err() error {
	select {
	case <-m.halted:
		return m.err
	default:
		return nil
	}
}

// watchHalt stops the master when its tables halt.
func (m *Master) watchHalt() {
	defer m.loops.Done()
	select {
	case <-m.stop:
	case <-m.fsm.Halted():
		m.err = m.fsm.Err()
		m.log.Error("stopping: a committed log entry cannot be applied; upgrade this master to the version that wrote it", "err", m.err)
		close(m.halted)
		// Close waits for this loop, so it runs on its own.
		go m.Close()
	}
}

// handOver transfers leadership when this master leads and another voter
// could take it.
func (m *Master) handOver() {
	if m.raft.State() != raft.Leader {
		return
	}
	cf := m.raft.GetConfiguration()
	if cf.Error() != nil {
		return
	}
	voters := 0
	for _, s := range cf.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			voters++
		}
	}
	if voters < 2 {
		return
	}
	start := time.Now()
	if err := m.raft.LeadershipTransfer().Error(); err != nil {
		m.log.Warn("could not hand leadership over before stopping", "err", err)
		return
	}
	m.log.Info("handed leadership over before stopping", "to", m.local.NextLeader(context.Background()), "took", time.Since(start).Round(time.Millisecond))
}

// HTTPAddr is the host:port the HTTP API listens on.
func (m *Master) HTTPAddr() string { return m.ln.Addr().String() }

// leadershipLoop runs a term of leadership for as long as this master
// leads: it waits for Raft to say so, confirms with a Barrier that every
// earlier entry is applied, then starts the term's duties, and stops them
// when leadership is lost.
func (m *Master) leadershipLoop() {
	defer m.loops.Done()
	leaderCh := m.raft.LeaderCh()
	end := func() {}
	defer func() { end() }()
	for {
		select {
		case <-m.stop:
			return
		case isLeader := <-leaderCh:
			end()
			end = func() {}
			if !isLeader {
				m.log.Info("lost leadership")
				continue
			}
			m.beats.reset()
			ctx, cancel := context.WithCancel(context.Background())
			started := make(chan *leader.Term, 1)
			go func() { started <- m.establish(ctx) }()
			end = func() {
				cancel()
				if t := <-started; t != nil {
					m.local.Lead(nil)
					t.Stop()
				}
			}
		}
	}
}

// workerProbeTimeout bounds the leader's check that nothing listens at a
// silent, tethered worker's HTTP address (leader.Deps.Refused): a host
// that refuses answers within a round trip, and one that does not answer
// in time is taken for alive.
const workerProbeTimeout = 200 * time.Millisecond

// establish begins a term once every entry of earlier terms is applied,
// and returns it (nil when leadership was lost first).
func (m *Master) establish(ctx context.Context) *leader.Term {
	start := time.Now()
	for {
		err := m.raft.Barrier(m.cfg.ApplyTimeout).Error()
		if err == nil {
			break
		}
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) || ctx.Err() != nil {
			return nil
		}
		m.log.Warn("barrier failed, retrying", "err", err)
	}
	number, _ := strconv.ParseUint(m.raft.Stats()["term"], 10, 64)
	t := leader.Start(leader.Config{
		WorkerTimeout: m.cfg.WorkerTimeout, WorkerHeartbeatTimeout: m.cfg.WorkerHeartbeatTimeout, Strict: m.cfg.strict(), Lease: m.cfg.Lease, FencingMargin: m.cfg.FencingMargin,
		SpreadOutApps: m.cfg.SpreadOutApps, RetainedDrivers: m.cfg.RetainedDrivers, RetainedApps: m.cfg.RetainedApps,
		AppTimeout: m.cfg.AppTimeout, PreemptionGrace: m.cfg.PreemptionGrace, PreemptionInterval: m.cfg.PreemptionInterval,
		MaxRunningDrivers: m.cfg.MaxRunningDrivers,
	}, leader.Deps{
		FSM: m.fsm, Apply: m.local.Apply, Pool: m.pool, GossipChanged: m.gossipChanged.Wait, Voters: m.voters, Configuration: m.allVoters,
		Refused:      func(addr string) bool { return transport.Refused(m.cfg.BindIP, addr, workerProbeTimeout) },
		VerifyLeader: func() error { return m.raft.VerifyLeader().Error() },
		Metrics:      m.metrics, Log: m.log,
	}, number)
	m.local.Lead(t)
	m.log.Info("leading", "term", number, "barrier", time.Since(start).Round(time.Millisecond))
	return t
}

// blobVoters returns the voters of the latest Raft configuration with
// their HTTP addresses, this master included when it is one: as each gave
// it on its Raft port (finder), "" for one that has not yet.
func (m *Master) blobVoters() []blobsync.Peer {
	cf := m.raft.GetConfiguration()
	if cf.Error() != nil {
		return nil
	}
	var out []blobsync.Peer
	for _, s := range cf.Configuration().Servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		p := blobsync.Peer{ID: string(s.ID)}
		if p.ID == m.cfg.ID {
			p.HTTP = m.cfg.httpAddr()
		} else {
			p.HTTP = m.finder.HTTP(p.ID, string(s.Address))
		}
		out = append(out, p)
	}
	return out
}

// current reports whether this master's tables are as current as it can
// tell: it knows a leader and every entry it knows committed is applied.
// Garbage collection of uploads waits for it. The FSM's index counts
// too: Raft records an entry applied only after FSM.Apply returns, and
// what Apply published (an event stream's wake-up) may ask in between;
// Raft's own counts the entries the FSM never sees (a new leader's
// no-op, a configuration change).
func (m *Master) current() bool {
	_, leader := m.raft.LeaderWithID()
	commit := m.raft.CommitIndex()
	return leader != "" && commit > 0 && max(m.fsm.Index(), m.raft.AppliedIndex()) >= commit
}

// allVoters returns the IDs of every voter of the latest Raft
// configuration, this master's included; nil when Raft cannot say.
func (m *Master) allVoters() []string {
	cf := m.raft.GetConfiguration()
	if cf.Error() != nil {
		return nil
	}
	var out []string
	for _, s := range cf.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			out = append(out, string(s.ID))
		}
	}
	return out
}

// voters returns the IDs of the other voters of the latest Raft
// configuration that this leader's heartbeats reach.
func (m *Master) voters() []string {
	var out []string
	for _, id := range m.allVoters() {
		if id != m.cfg.ID && m.beats.reaches(id) {
			out = append(out, id)
		}
	}
	return out
}
