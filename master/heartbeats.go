package master

import (
	"sync"

	"github.com/hashicorp/raft"
)

// heartbeats tracks which followers this master's Raft heartbeats fail to
// reach while it leads, from hashicorp/raft's FailedHeartbeatObservation
// and ResumedHeartbeatObservation. A voter the leader cannot reach is
// down or cut off, not in a split gossip pool: the leader hears from it
// no more than gossip does, so the split report leaves it out.
type heartbeats struct {
	mu      sync.Mutex
	failing map[string]bool
	seen    chan raft.Observation
	obs     *raft.Observer
}

// watchHeartbeats registers the observer on r; the observations are read
// until stop is closed.
func watchHeartbeats(r *raft.Raft, stop <-chan struct{}, wg *sync.WaitGroup) *heartbeats {
	h := &heartbeats{failing: map[string]bool{}, seen: make(chan raft.Observation, 64)}
	// Not blocking: Raft's heartbeats must never wait for this. A dropped
	// failure is observed again at the next failed heartbeat; a dropped
	// resumption is cleared at the next term (reset).
	h.obs = raft.NewObserver(h.seen, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.FailedHeartbeatObservation, raft.ResumedHeartbeatObservation:
			return true
		}
		return false
	})
	r.RegisterObserver(h.obs)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer r.DeregisterObserver(h.obs)
		for {
			select {
			case <-stop:
				return
			case o := <-h.seen:
				h.mu.Lock()
				switch d := o.Data.(type) {
				case raft.FailedHeartbeatObservation:
					h.failing[string(d.PeerID)] = true
				case raft.ResumedHeartbeatObservation:
					delete(h.failing, string(d.PeerID))
				}
				h.mu.Unlock()
			}
		}
	}()
	return h
}

// reset forgets every failure, at the start of a term: Raft's heartbeat
// loops start anew with it and report a resumption only after a failure
// of their own.
func (h *heartbeats) reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	clear(h.failing)
}

// reaches reports whether the leader's last heartbeat to voter id
// succeeded (true until one fails).
func (h *heartbeats) reaches(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.failing[id]
}
