// Package master runs one Drover master: a hashicorp/raft voter over the fsm
// tables, an HTTP API under /v1/, and a member of the gossip pool. The leader
// alone schedules and watches worker liveness; followers forward requests to
// it.
package master

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
	"golang.org/x/sync/singleflight"

	"github.com/drover-project/drover/auth"
	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/gossip"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/transport"
	"github.com/drover-project/drover/transport/raftnet"
)

// Master is a running master. Close stops it.
type Master struct {
	cfg    Config
	log    *slog.Logger
	fsm    *fsm.FSM
	raft   *raft.Raft
	store  *raftboltdb.BoltStore
	snaps  raft.SnapshotStore
	trans  *raft.NetworkTransport
	pool   *gossip.Pool
	server *http.Server
	ln     net.Listener
	// sparkServer serves Spark's REST submission protocol (sparkrest.go);
	// nil unless cfg.SparkRESTPort is set.
	sparkServer *http.Server
	// conns bounds the connections of the API and Spark REST listeners
	// together, per client IP and in all.
	conns *transport.ConnLimit
	// fwd carries requests to other masters (forwarding to the leader),
	// toWorkers to workers (log proxying); both present this master's
	// certificate when TLS is on.
	fwd       *http.Client
	toWorkers *http.Client
	// guard decides who may call which path; tls holds the configs built
	// from cfg.TLS (all nil without TLS).
	guard *auth.Guard
	tls   tlsConfigs
	// submitting bounds each client IP's submissions in flight.
	submitting *inflight
	// metrics is this master's Prometheus registry (/metrics).
	metrics *masterMetrics

	// ready is true while this master is leader and has applied every
	// entry of earlier terms (Barrier done): only then does it answer
	// linearizable reads and run the scheduler.
	ready atomic.Bool
	// ids makes driver IDs while leader.
	ids *idMaker
	// submits collapses concurrent submissions, app registrations and
	// worker registrations with the same token or identity (a client sends
	// each to every master, and followers forward them here) into one
	// Raft entry.
	submits singleflight.Group
	// contact is when each worker's heartbeat was last answered here.
	contact contacts
	// appContact is when each app's client last watched it here.
	appContact contacts
	// leadingSince is when this master last became the ready leader, Unix
	// nanoseconds: a worker it has not heard from yet counts as heard then.
	leadingSince atomic.Int64
	// gossipChanged is signalled (non-blocking) on every pool change.
	gossipChanged chan struct{}

	wg      sync.WaitGroup
	stop    chan struct{}
	stopped sync.Once
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
		OperatorToken: cfg.OperatorToken, SubmitToken: cfg.SubmitToken,
		OpenReads: cfg.OpenReads, TLS: cfg.TLS.Enabled(),
	})
	if err != nil {
		return nil, err
	}
	warning, err := auth.CheckExposure(cfg.BindIP, cfg.TLS.Enabled(), guard.Tokens(), cfg.Insecure)
	if err != nil {
		return nil, err
	}
	tc, err := newTLSConfigs(cfg.TLS)
	if err != nil {
		return nil, err
	}
	m := &Master{
		cfg:           cfg,
		log:           cfg.Logger.With("master", cfg.ID),
		fsm:           fsm.New(),
		fwd:           transport.NewHTTPClient(cfg.BindIP, 0, tc.peer),
		toWorkers:     transport.NewHTTPClient(cfg.BindIP, 0, tc.worker),
		guard:         guard,
		tls:           tc,
		submitting:    newInflight(cfg.MaxSubmitsPerClient),
		conns:         transport.NewConnLimit(cfg.MaxConnsPerClient, transport.DefaultMaxConns()),
		ids:           newIDMaker(),
		gossipChanged: make(chan struct{}, 1),
		stop:          make(chan struct{}),
	}
	if warning != "" {
		m.log.Warn(warning)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	if err := m.startRaft(); err != nil {
		m.closeRaft()
		return nil, err
	}
	m.metrics = newMasterMetrics(m)
	pool, err := gossip.Start(gossip.Config{
		Meta:      gossip.Meta{Role: gossip.RoleMaster, ID: cfg.ID, HTTP: cfg.httpAddr()},
		BindIP:    cfg.BindIP,
		Port:      cfg.GossipPort,
		Profile:   cfg.GossipProfile,
		Join:      cfg.Join,
		OnChange:  m.onGossipChange,
		SecretKey: cfg.GossipKey,
		Logger:    m.log,
	})
	if err != nil {
		m.closeRaft()
		return nil, err
	}
	m.pool = pool
	if err := m.startHTTP(); err != nil {
		_ = m.pool.Shutdown()
		m.closeRaft()
		return nil, err
	}
	if err := m.startSparkREST(); err != nil {
		_ = m.server.Close()
		_ = m.pool.Shutdown()
		m.closeRaft()
		return nil, err
	}
	m.wg.Add(1)
	go m.leadershipLoop()
	return m, nil
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

	store, err := raftboltdb.New(raftboltdb.Options{
		Path:        filepath.Join(m.cfg.DataDir, "raft.db"),
		BoltOptions: &bbolt.Options{Timeout: time.Second},
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
	trans, err := raftnet.NewRaftTransport(m.cfg.raftAddr(), 5*time.Second,
		slog.NewLogLogger(m.log.With("component", "raft-net").Handler(), slog.LevelDebug).Writer(),
		m.tls.raftServer, m.tls.peer)
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
	r, err := raft.NewRaft(c, m.fsm, store, store, snaps, trans)
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

// Close stops the master: a leader first hands leadership to another voter
// (raft.LeadershipTransfer), so that writes pause for one round of votes
// instead of an election timeout; then it stops serving, leaves the gossip
// pool and shuts Raft down. It is safe to call more than once.
func (m *Master) Close() error {
	m.stopped.Do(func() {
		m.handOver()
		close(m.stop)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = m.server.Shutdown(ctx)
		if m.sparkServer != nil {
			_ = m.sparkServer.Shutdown(ctx)
		}
		m.wg.Wait()
		_ = m.pool.Leave(time.Second)
		m.closeRaft()
	})
	return nil
}

// handOver transfers leadership when this master leads and another voter
// could take it.
func (m *Master) handOver() {
	if m.raft.State() != raft.Leader {
		return
	}
	p, err := m.peers()
	if err != nil {
		return
	}
	voters := 0
	for _, s := range p.Peers {
		if s.Suffrage == raft.Voter.String() {
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
	m.log.Info("handed leadership over before stopping", "to", m.nextLeader(context.Background()), "took", time.Since(start).Round(time.Millisecond))
}

// HTTPAddr is the host:port the HTTP API listens on.
func (m *Master) HTTPAddr() string { return m.ln.Addr().String() }

func (m *Master) onGossipChange() {
	select {
	case m.gossipChanged <- struct{}{}:
	default:
	}
}

// leadershipLoop runs the leader's duties for as long as this master leads:
// it waits for Raft to say so, confirms with a Barrier that every earlier
// entry is applied, then runs the scheduler and the liveness watch until
// leadership is lost.
func (m *Master) leadershipLoop() {
	defer m.wg.Done()
	leaderCh := m.raft.LeaderCh()
	stopDuties := func() {}
	defer func() { stopDuties() }()
	for {
		select {
		case <-m.stop:
			return
		case isLeader := <-leaderCh:
			stopDuties()
			stopDuties = func() {}
			if !isLeader {
				m.log.Info("lost leadership")
				continue
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				m.lead(ctx)
			}()
			stopDuties = func() {
				cancel()
				<-done
				m.ready.Store(false)
			}
		}
	}
}

// lead is the body of one term of leadership.
func (m *Master) lead(ctx context.Context) {
	start := time.Now()
	for {
		err := m.raft.Barrier(m.cfg.ApplyTimeout).Error()
		if err == nil {
			break
		}
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) || ctx.Err() != nil {
			return
		}
		m.log.Warn("barrier failed, retrying", "err", err)
	}
	m.ids.reset(m.fsm.NextDriverSeq(), m.fsm.NextAppSeq())
	m.leadingSince.Store(time.Now().UnixNano())
	m.ready.Store(true)
	m.log.Info("leading", "term", m.raft.Stats()["term"], "barrier", time.Since(start).Round(time.Millisecond))
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); m.schedule(ctx) }()
	go func() { defer wg.Done(); m.watchWorkers(ctx) }()
	go func() { defer wg.Done(); m.watchApps(ctx) }()
	wg.Wait()
}

// apply commits one command through Raft and returns Apply's result. Errors
// from Raft (not leader, timeouts) come back as *unavailableError.
func (m *Master) apply(t model.CommandType, payload any) (any, error) {
	data, err := fsm.Encode(t, payload)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	f := m.raft.Apply(data, m.cfg.ApplyTimeout)
	err = f.Error()
	m.metrics.applied(start, err)
	if err != nil {
		return nil, &unavailableError{err: err}
	}
	if err, ok := f.Response().(error); ok {
		return nil, err
	}
	return f.Response(), nil
}

// unavailableError is a write that Raft could not commit here: this master is
// not (or no longer) the leader, or the quorum did not answer in time. The
// outcome may be unknown; clients retry with the same token.
type unavailableError struct{ err error }

func (e *unavailableError) Error() string { return "not committed: " + e.err.Error() }
func (e *unavailableError) Unwrap() error { return e.err }

// now is the leader's clock, in Unix milliseconds, for the times that travel
// inside commands.
func now() int64 { return time.Now().UnixMilli() }
