package service

import (
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"golang.org/x/sync/singleflight"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/master/blobs"
	"github.com/drover-project/drover/master/blobsync"
	"github.com/drover-project/drover/master/leader"
	"github.com/drover-project/drover/master/metrics"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/security/auth"
	"github.com/drover-project/drover/transport/gossip"
)

// Config is what the rules depend on, from the master's configuration.
type Config struct {
	// ID, HTTPAddr and GossipAddr are this master's Raft ID, API address
	// and gossip address.
	ID, HTTPAddr, GossipAddr string
	// Scheme is the URL scheme of every node's HTTP listener, http or
	// https: a cluster is either all TLS or all plain.
	Scheme string
	// ApplyTimeout bounds how long a write waits to be enqueued to Raft.
	ApplyTimeout time.Duration
	// ElectionTimeout is Raft's; a leadership transfer waits up to twice
	// it for the new leader to speak.
	ElectionTimeout time.Duration
	// HeartbeatTimeout is Raft's: a follower stands for election once
	// its leader has been silent that long. Health stops counting a
	// leader live a little before (leaderSilence).
	HeartbeatTimeout time.Duration
	// HeartbeatWait is how long a worker's heartbeat (and an app's
	// watch) is held while nothing changes for it.
	HeartbeatWait time.Duration
	// LossDelay is how long a worker must be silent before the leader
	// may declare it lost: a second process may take over its ID only
	// after as long.
	LossDelay time.Duration
	// Strict is strict fencing: a heartbeat's answer must come from a
	// leader a quorum still follows.
	Strict bool
	// RegisterWithoutGossip lets a worker register before it is a member
	// of the gossip pool (simulated workers in benchmarks only).
	RegisterWithoutGossip bool
	// MaxExecutorRetries goes into each app's registration (Spark's
	// spark.deploy.maxExecutorRetries).
	MaxExecutorRetries int
	// MaxProgramSize bounds the program of a submission and the executor
	// program of an app registration (model.SubmitDriver.ProgramSize), in
	// bytes; a larger one is refused with api.ErrTooLarge. 0 for no
	// bound.
	MaxProgramSize int
	// MaxLiveDrivers bounds the drivers that have not ended, cluster-wide,
	// and MaxLiveDriversPerClient those submitted from one client
	// (auth.Caller.Client); MaxLiveApps bounds the apps that have not
	// ended. A submission or registration past one is refused with
	// api.ErrLimitReached before anything is committed. 0 for no bound.
	MaxLiveDrivers, MaxLiveDriversPerClient, MaxLiveApps int
	// MaxListLimit bounds the page a list of drivers or apps asks for
	// (api.ListQuery.Limit), in rows; a larger limit is refused with
	// api.ErrInvalidRequest. 0 for no bound.
	MaxListLimit int
	// MaxSchedules bounds the schedules of the cluster; a schedule past
	// it is refused with api.ErrLimitReached. 0 or more than
	// model.MaxSchedules for model.MaxSchedules, the tables' own bound.
	MaxSchedules int
	// MaxRunningDrivers is the leader's bound on drivers placed at once
	// (master.Config.MaxRunningDrivers), which a waiting driver's reason
	// names when it holds the driver back; 0 for none.
	MaxRunningDrivers int
	// WorkerToken is what this master presents to workers when it passes
	// a log request on without TLS ("" for none): the node token, or on
	// a master without one the operator token, which workers older than
	// the node token demand. A master that holds a node token never
	// sends its operator token to a worker, whatever registered there.
	WorkerToken string
	// AllowUnboundWorkerCerts lets a worker answer for its logs with a
	// certificate that names no worker (auth.Config's field of the same
	// name).
	AllowUnboundWorkerCerts bool
}

// Deps are the parts of a running master that Core works with.
type Deps struct {
	Raft  *raft.Raft
	FSM   *fsm.FSM
	Snaps raft.SnapshotStore
	Pool  *gossip.Pool
	// Guard makes the driver tokens heartbeat answers carry.
	Guard *auth.Guard
	// Workers calls workers (log requests), presenting this master's
	// certificate when TLS is on.
	Workers *http.Client
	Metrics *metrics.Metrics
	Log     *slog.Logger
	// KnownMasters returns the gossip addresses, by master ID, that this
	// master learned from its Raft peers.
	KnownMasters func() map[string]string
	// MasterHTTP returns the HTTP address (host:port) master id gave of
	// itself on its Raft port at raftAddr, where masters prove who they
	// are; "" before it did. It is the only source of another master's
	// HTTP address: requests sent there carry callers' credentials.
	MasterHTTP func(id, raftAddr string) string
	// Blobs is this master's store of uploaded files, and Replicas keeps
	// their copies on the other voters.
	Blobs    *blobs.Store
	Replicas *blobsync.Replicas
}

// Core is the rules of drivers and workers, this master's own views (state,
// health, events, uploads) and the one path to Raft, which Applications and
// Operator share by embedding it. A master that does not lead answers reads
// with Read.Stale from its own tables and refuses the rest with
// api.ErrUnavailable; the Forwarder in front of it sends those to the leader
// instead. New makes one inside a Local.
type Core struct {
	cfg Config
	Deps
	// term is the current term of leadership while this master is the
	// ready leader, nil otherwise. Everything a term owns (IDs, contact
	// with workers and apps) is read through it, so nothing of an old
	// term serves a new one.
	term atomic.Pointer[leader.Term]
	// submits collapses concurrent app registrations and worker
	// registrations with the same token or identity (a client sends
	// each to every master, and followers forward them here) into one
	// Raft entry.
	submits singleflight.Group
	// queue gathers concurrent submissions into shared entries, and
	// collapses the copies of one submission as submits does.
	queue submitQueue
	// registering is the app registrations committing, which the bound
	// on live apps counts beside the tables' (admitApp).
	registering registrations
	// reports gathers concurrent heartbeats' reports into few entries.
	reports reportBatcher
}

// Ready reports whether this master is the ready leader: it leads, and has
// applied every entry of earlier terms.
func (s *Core) Ready() bool { return s.term.Load() != nil }

// Split is, on the ready leader, the members it hears from but does not
// see in its gossip pool (leader.Term.Split); nil elsewhere.
func (s *Core) Split() []api.PoolMember {
	if t := s.term.Load(); t != nil {
		return t.Split()
	}
	return nil
}

// Lead makes t the current term (leader.Term, after the term's Barrier),
// or with nil, says this master no longer leads.
func (s *Core) Lead(t *leader.Term) { s.term.Store(t) }

// Apply commits one command through Raft and returns Apply's result: what
// leader.Term's duties and the rules here write with. An error from Raft
// (not the leader, a timeout: the outcome may be unknown, and clients retry
// with the same token) wraps api.ErrUnavailable; a refusal by the tables is
// Apply's own error. The types with a result give it back typed through
// their fsm.Returns (fsm.PlaceDrivers.Commit(s.Apply, c)).
func (s *Core) Apply(c model.Command) (any, error) {
	p := s.enqueue(c)
	return p.wait(s)
}

// applyAll commits each command of cs. Every command is handed to Raft
// before the first is waited for, so that Raft writes them in a few
// batches rather than one disk write each; the errors come in the order
// of the commands, each as Apply would return it.
func (s *Core) applyAll(cs []model.Command) []error {
	ps := make([]pending, len(cs))
	for i, c := range cs {
		ps[i] = s.enqueue(c)
	}
	errs := make([]error, len(ps))
	for i, p := range ps {
		_, errs[i] = p.wait(s)
	}
	return errs
}

// pending is a command handed to Raft: its future, when it was handed
// over, or why it could not be.
type pending struct {
	f     raft.ApplyFuture
	start time.Time
	err   error
}

// enqueue encodes a command and hands it to Raft without waiting.
func (s *Core) enqueue(c model.Command) pending {
	data, err := s.encode(c)
	if err != nil {
		return pending{err: err}
	}
	return pending{f: s.Raft.Apply(data, s.cfg.ApplyTimeout), start: time.Now()}
}

// encode encodes a command in the format the current term writes
// (leader.Term.Format), or in fsm.FormatJSON, which every master reads,
// when there is none.
func (s *Core) encode(c model.Command) ([]byte, error) {
	format := fsm.FormatJSON
	if term := s.term.Load(); term != nil {
		format = term.Format()
	}
	return fsm.EncodeAs(format, c)
}

// wait waits for a pending command and returns Apply's result.
func (p pending) wait(s *Core) (any, error) {
	if p.err != nil {
		return nil, p.err
	}
	err := p.f.Error()
	s.Metrics.Applied(p.start, err)
	if err != nil {
		return nil, unavailable(err)
	}
	if err, ok := p.f.Response().(error); ok {
		return nil, err
	}
	return p.f.Response(), nil
}

// unavailable wraps an error of Raft's in api.ErrUnavailable. What was handed
// to Raft may still be committed (a leader that lost its term after
// appending the entry), so the message says the outcome is unknown.
func unavailable(err error) error {
	return fmt.Errorf("%w: commit not confirmed, it may or may not have happened: %v", api.ErrUnavailable, err)
}

// leading returns the current term, or an error wrapping
// api.ErrNoLeader when this master is not the ready leader.
func (s *Core) leading() (*leader.Term, error) {
	if t := s.term.Load(); t != nil {
		return t, nil
	}
	if s.Raft.State() == raft.Leader {
		return nil, api.Errorf(api.ErrNoLeader, "master %s was just elected and is catching up", s.cfg.ID)
	}
	return nil, api.Errorf(api.ErrNoLeader, "master %s is not the leader", s.cfg.ID)
}

// readable reports whether this master may answer a read with r: any
// master for a stale read, else the ready leader once a quorum confirms it
// still leads (raft.VerifyLeader). Every entry it acknowledged is applied
// by then, so the answer is linearizable.
func (s *Core) readable(r Read) error {
	if r.Stale {
		return nil
	}
	if _, err := s.leading(); err != nil {
		return err
	}
	if err := s.Raft.VerifyLeader().Error(); err != nil {
		return fmt.Errorf("%w: leadership not confirmed: %v", api.ErrUnavailable, err)
	}
	return nil
}

// Leadership is what this master knows of the leader now.
func (s *Core) Leadership() Leadership {
	l := Leadership{Self: s.cfg.ID, HTTP: s.cfg.HTTPAddr, Role: s.Raft.State().String(), Ready: s.Ready()}
	addr, id := s.Raft.LeaderWithID()
	l.LeaderID = string(id)
	switch {
	case l.LeaderID == "":
	case l.LeaderID == s.cfg.ID:
		l.LeaderHTTP = s.cfg.HTTPAddr
	default:
		// What the leader said on its Raft port, never what a gossip
		// member of its name says.
		l.LeaderHTTP = s.MasterHTTP(l.LeaderID, string(addr))
	}
	return l
}

// now is the leader's clock, in Unix milliseconds, for the times that travel
// inside commands.
func now() int64 { return time.Now().UnixMilli() }
