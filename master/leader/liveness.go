package leader

import (
	"context"
	"sync"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/transport/gossip"
)

// livenessInterval is how often the leader compares the workers table with
// the gossip pool and the heartbeats even when nothing reports a change.
const livenessInterval = 250 * time.Millisecond

// tetheredSilence is how long a tethered worker (gossip.Meta's Tethered)
// may go without contact before the leader, in default fencing, asks its
// host whether anything still listens at its HTTP address. A live worker
// is almost never silent so long: it keeps a heartbeat held at the leader,
// and a held one that its daemon's death cuts short counts as its last
// contact. It is several of the runners' lease polls (100 ms), within
// which a tethered worker's runners have ended their programs after the
// daemon died.
const tetheredSilence = 500 * time.Millisecond

// watchWorkers commits WorkerLost for workers that are gone, while this
// master leads.
//
// Default mode: memberlist's dead or left verdict is a hint; a worker is
// declared lost once it has been missing from the pool for WorkerTimeout
// and has not sent a heartbeat for as long. A member counts as the worker
// only when it gossips from the address the worker registered from
// (gossip.Pool.LookupAt); a worker that restarts elsewhere registers
// again, and its new address with it. Gossip alone keeps no worker alive
// for longer than WorkerHeartbeatTimeout (or WorkerTimeout, if longer)
// without a heartbeat: memberlist
// takes a member's address on its word, so any holder of the gossip key
// can pass for a dead worker at its own address, and a heartbeat is what
// the worker proves with its credential and instance (Nomad's heartbeat
// TTL). A live worker's heartbeats never pause that long: each is held
// at most a long poll and the next follows at once, and across a leader
// change the new term counts from its start and the worker finds it
// within newTermGrace. A worker cut off from the leader but not from the
// pool is lost so too. A tethered worker is declared
// lost sooner, once it has been silent for tetheredSilence and its host
// refuses a connection to its HTTP address: its daemon is gone, and with
// it the programs of its runners. That is what a killed or crashed daemon
// leaves behind (its host's kernel closes its sockets), long before
// gossip's suspicion runs out; a paused, cut-off or powered-off host
// refuses nothing and waits for the gossip verdict. A new leader, which
// holds no connection from before, finds a worker that died with the old
// leader the same way, tetheredSilence after it took over.
//
// Strict mode: a worker is declared lost once the leader has not answered
// its heartbeat for Lease+FencingMargin. The worker stops its supervised
// attempts after Lease without an answer, so the relaunch cannot overlap
// them. Gossip plays no part, so a worker cut off from the leader alone is
// still replaced.
//
// Either way a worker's clock starts no earlier than the moment this master
// took over (or the worker registered), so a failover never triggers a mass
// relaunch; in default mode a worker the new term has neither seen in the
// pool nor heard from gets newTermGrace more (missingTooLong).
func (t *Term) watchWorkers(ctx context.Context) {
	lastSeen := map[string]time.Time{}
	tick := time.NewTicker(livenessInterval)
	defer tick.Stop()
	for {
		changed := t.d.GossipChanged()
		at := time.Now()
		var silent []silence
		for _, w := range t.d.FSM.State().Workers() {
			// A decommissioned worker still holding drivers is watched
			// too: should it die before reporting them, they move on.
			if w.State != model.WorkerAlive && (w.State != model.WorkerDecommissioned || w.CoresUsed == 0) {
				delete(lastSeen, w.ID)
				continue
			}
			since := t.Since
			if reg := time.UnixMilli(w.UpdatedAt); reg.After(since) {
				since = reg
			}
			heardAt := t.Workers.Get(w.ID)
			contact := since
			if heardAt.After(contact) {
				contact = heardAt
			}
			if t.cfg.Strict {
				wait := t.cfg.Lease + t.cfg.FencingMargin
				if earlyRelaunchBug {
					wait = t.cfg.WorkerTimeout
				}
				if at.Sub(contact) >= wait {
					t.lose(w.ID, "no heartbeat for longer than the lease plus margin", at.Sub(contact))
				}
				continue
			}
			if silent := at.Sub(contact); silent >= max(t.cfg.WorkerHeartbeatTimeout, t.cfg.WorkerTimeout) {
				t.lose(w.ID, "no heartbeat for longer than the worker heartbeat timeout, whatever gossip says", silent)
				continue
			}
			// Only a member that gossips from where the worker
			// registered is the worker: one that took its name
			// elsewhere keeps nothing alive.
			if meta, ok := t.d.Pool.LookupAt(gossip.RoleWorker, w.ID, w.HTTPAddr); ok {
				lastSeen[w.ID] = at
				if meta.Tethered && at.Sub(contact) >= tetheredSilence {
					silent = append(silent, silence{w, at.Sub(contact)})
				}
				continue
			}
			s, seen := lastSeen[w.ID]
			if seen {
				since = s
			}
			if !missingTooLong(at, t.Since, since, contact, seen || heardAt.After(t.Since), t.cfg.WorkerTimeout) {
				continue
			}
			t.lose(w.ID, "missing from the gossip pool", at.Sub(since))
		}
		for _, s := range t.daemonsGone(at, silent) {
			t.lose(s.w.ID, "its daemon is gone (silent, and nothing listens at "+s.w.HTTPAddr+")", s.d)
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-tick.C:
		}
	}
}

// newTermGrace is how long, beyond the worker timeout, a new leader waits
// for a worker it has neither seen in its gossip pool nor heard from in
// its term. Such a worker may be alive with its heartbeat held at the
// previous leader, frozen rather than dead: its sticky client sends to the
// other masters only after api.DefaultHedgeAfter, then retries them up
// to api.DefaultMaxRetryInterval apart until one leads. A restarted
// master's pool may lack live workers for a while (memberlist tells a new
// member of the others only when one of them pushes its state to it), so
// absence from the pool is no evidence until then.
const newTermGrace = api.DefaultHedgeAfter + api.DefaultMaxRetryInterval

// MinWorkerHeartbeatTimeout is the shortest WorkerHeartbeatTimeout that
// never loses a live worker whose heartbeats reach the leader, for a
// leader that holds a heartbeat up to heartbeatWait: newTermGrace, within
// which a worker finds a new leader after the previous one froze, and
// one held heartbeat more.
func MinWorkerHeartbeatTimeout(heartbeatWait time.Duration) time.Duration {
	return newTermGrace + heartbeatWait
}

// missingTooLong is default fencing's verdict on a worker missing from the
// gossip pool at time at: missing since since and last heard from at
// contact, both for the worker timeout, and, unless the term (begun at
// termStart) has seen it in the pool or heard from it (known), for
// newTermGrace more since the term began.
func missingTooLong(at, termStart, since, contact time.Time, known bool, timeout time.Duration) bool {
	// A heartbeat inside the timeout also proves the worker alive,
	// whatever the pool says (it may be rejoining).
	if at.Sub(since) < timeout || at.Sub(contact) < timeout {
		return false
	}
	return known || at.Sub(termStart) >= timeout+newTermGrace
}

// silence is a worker not heard from for d.
type silence struct {
	w *model.Worker
	d time.Duration
}

// daemonsGone returns the workers of ws whose hosts refuse a connection to
// their HTTP addresses (Deps.Refused), asked all at once, and that have not
// been heard from since at.
func (t *Term) daemonsGone(at time.Time, ws []silence) []silence {
	refused := make([]bool, len(ws))
	var wg sync.WaitGroup
	for i, s := range ws {
		wg.Go(func() { refused[i] = t.d.Refused(s.w.HTTPAddr) })
	}
	wg.Wait()
	var out []silence
	for i, s := range ws {
		// A heartbeat during the probe (a daemon restarted on the same
		// work dir) speaks for itself.
		if refused[i] && !t.Workers.Get(s.w.ID).After(at) {
			out = append(out, s)
		}
	}
	return out
}

// lose commits WorkerLost for worker id, for reason, after it was missing
// for the given time.
func (t *Term) lose(id, reason string, missing time.Duration) {
	t.d.Log.Warn("worker lost", "worker", id, "reason", reason, "missing_for", missing.Round(time.Millisecond))
	if _, err := t.d.Apply(&model.WorkerLost{
		WorkerID: id, Reason: "worker " + id + " lost: " + reason, Time: now(),
	}); err != nil {
		t.d.Log.Warn("worker loss not committed", "worker", id, "err", err)
	} else {
		t.d.Metrics.WorkersLost.Inc()
	}
}
