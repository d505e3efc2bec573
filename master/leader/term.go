// Package leader holds what a master owns only while it leads, as one value
// per term of leadership (Nomad's establishLeadership and
// revokeLeadership): the scheduler (Spark's Master.schedule), the worker
// liveness watch (Spark's timeOutDeadWorkers), the app client watch,
// retention of finished rows, the report of a split gossip pool, the record
// of contact with workers and app clients, the maker of driver and app
// IDs, fair-share preemption (YARN's preemption monitor) and the firing
// of schedules' slots. A Term is made after the
// new leader's Barrier and stopped when leadership is lost, so nothing of
// an old term (a contact time, an ID sequence, a goroutine) survives into
// a new one.
package leader

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/master/metrics"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/model/ids"
	"github.com/drover-project/drover/transport/gossip"
)

// Config is what a term's duties depend on, from the master's
// configuration; see master.Config for each field's meaning.
type Config struct {
	WorkerTimeout time.Duration
	// WorkerHeartbeatTimeout is, in default fencing, how long a worker
	// may go without a heartbeat before it is lost, whatever gossip says
	// (watchWorkers), or WorkerTimeout if that is longer; at least
	// MinWorkerHeartbeatTimeout.
	WorkerHeartbeatTimeout time.Duration
	// Strict is strict fencing: a worker is lost after Lease+FencingMargin
	// without a heartbeat, whatever gossip says.
	Strict               bool
	Lease, FencingMargin time.Duration
	SpreadOutApps        bool
	RetainedDrivers      int
	RetainedApps         int
	AppTimeout           time.Duration
	// PreemptionGrace is how long a preempted unit has between its
	// notice (SIGTERM) and its end; PreemptionInterval how often the
	// preemption round runs, 0 for never (a term made by a test of
	// other duties).
	PreemptionGrace, PreemptionInterval time.Duration
	// MaxRunningDrivers bounds the drivers placed cluster-wide (Spark
	// 4's spark.deploy.maxDrivers); 0 for no bound.
	MaxRunningDrivers int
}

// Deps are the parts of the master a term works with; they outlive terms.
type Deps struct {
	FSM *fsm.FSM
	// Apply commits one command through Raft and returns Apply's result
	// (service.Core.Apply); the commands with a result hand it back typed
	// through their fsm.Returns.
	Apply func(model.Command) (any, error)
	Pool  *gossip.Pool
	// GossipChanged returns a channel that is closed at the next change of
	// the gossip pool.
	GossipChanged func() <-chan struct{}
	// Voters returns the IDs of the other voters of the Raft
	// configuration that this leader's Raft heartbeats reach.
	Voters func() []string
	// Configuration returns the IDs of every voter of the latest Raft
	// configuration, this master's included; nil when Raft cannot say.
	Configuration func() []string
	// Refused reports whether the host of a worker's HTTP address
	// (host:port) refuses a connection to it, promptly: nothing listens
	// there any more (transport.Refused).
	Refused func(addr string) bool
	// VerifyLeader confirms with a quorum that this master still leads
	// (raft.VerifyLeader), or says why not; nil confirms nothing and
	// always passes (tests that commit straight into an FSM).
	VerifyLeader func() error
	Metrics      *metrics.Metrics
	Log          *slog.Logger
}

// Term is one term of leadership. Its exported fields are fixed when it is
// made; the contacts are safe for concurrent use.
type Term struct {
	// Number is Raft's term.
	Number uint64
	// Since is when this master became the ready leader: a worker or app
	// not heard from yet counts as heard then, so a failover never
	// declares everyone lost at once.
	Since time.Time
	// IDs makes driver and app IDs, continuing from the tables' sequence
	// numbers.
	IDs *ids.Maker
	// Workers records contact with each worker (heartbeats and
	// registrations), Apps with each app's client (watches).
	Workers, Apps *Contacts
	// Outsiders records workers refused registration because this leader
	// does not see them in its gossip pool (a wrong gossip key, a blocked
	// gossip port): the split report names them while they keep asking,
	// since they never become rows a heartbeat could show.
	Outsiders *Contacts

	split splitState
	// format is Format's fsm format byte.
	format atomic.Uint32

	cfg    Config
	d      Deps
	cancel context.CancelFunc
	done   chan struct{}
	wg     sync.WaitGroup
}

// Start begins term number of leadership, once every entry of earlier
// terms is applied: it makes the term's state and starts its duties.
func Start(cfg Config, d Deps, number uint64) *Term {
	ctx, cancel := context.WithCancel(context.Background())
	t := &Term{
		Number:    number,
		Since:     time.Now(),
		IDs:       ids.NewMaker(d.FSM.State().NextDriverSeq(), d.FSM.State().NextAppSeq()),
		Workers:   &Contacts{},
		Apps:      &Contacts{},
		Outsiders: &Contacts{},
		cfg:       cfg,
		d:         d,
		cancel:    cancel,
		done:      make(chan struct{}),
	}
	t.format.Store(uint32(fsm.FormatJSON))
	duties := []func(context.Context){t.schedule, t.watchWorkers, t.watchApps, t.watchPool, t.watchFormat, t.fireSchedules}
	if cfg.PreemptionInterval > 0 {
		duties = append(duties, t.preempt)
	}
	for _, duty := range duties {
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			duty(ctx)
		}()
	}
	return t
}

// Done is closed when the term is stopped: requests held for the term (a
// worker's heartbeat, an app's watch) answer then.
func (t *Term) Done() <-chan struct{} { return t.done }

// Stop ends the term and returns once its duties have stopped. It is safe
// to call once.
func (t *Term) Stop() {
	close(t.done)
	t.cancel()
	t.wg.Wait()
}

// Contacts records when this master, as leader, last heard from each
// worker (or app client): a heartbeat, registration or watch received or
// answered, and any it is holding in a long poll right now.
type Contacts struct {
	mu   sync.Mutex
	last map[string]time.Time
	held map[string]int
}

// Hold marks a request of key in progress until the returned function is
// called: a held request is contact throughout.
func (c *Contacts) Hold(key string) (release func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held == nil {
		c.held = map[string]int{}
	}
	c.held[key]++
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.held[key]--
		if c.held[key] == 0 {
			delete(c.held, key)
		}
	}
}

// Seen records contact from key at t.
func (c *Contacts) Seen(key string, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		c.last = map[string]time.Time{}
	}
	c.last[key] = t
}

// Get returns when key was last heard from: now while a request of it is
// held, the zero time when never.
func (c *Contacts) Get(key string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held[key] > 0 {
		return time.Now()
	}
	return c.last[key]
}

// Recent returns the keys last heard from at or after from, sorted, and
// forgets those heard from before it, so a caller that asks with a moving
// bound keeps the record small.
func (c *Contacts) Recent(from time.Time) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for k, at := range c.last {
		if at.Before(from) && c.held[k] == 0 {
			delete(c.last, k)
			continue
		}
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// now is the leader's clock, in Unix milliseconds, for the times that
// travel inside commands.
func now() int64 { return time.Now().UnixMilli() }
