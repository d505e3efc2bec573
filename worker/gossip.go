package worker

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/drover-project/drover/api"
)

// gossipRefresh is how often a worker asks the masters for their gossip
// addresses again, besides at start and when the leader says it does not
// see this worker in its pool.
const gossipRefresh = 30 * time.Second

// peers keeps the masters' gossip addresses as the masters tell them
// (GET /v1/gossip), so that a worker given only --masters joins their pool.
type peers struct {
	mu    sync.Mutex
	addrs []string
	ids   []string
	// now asks the refresh loop (non-blocking send, buffer 1) to ask at
	// once.
	now chan struct{}
}

// GossipAddrs returns the masters' gossip addresses learned from them: the
// gossip pool's Discover (gossip.Config), so --join may stay empty.
func (w *Worker) GossipAddrs() []string {
	w.peers.mu.Lock()
	defer w.peers.mu.Unlock()
	return slices.Clone(w.peers.addrs)
}

// refreshPeers asks the masters for their gossip addresses at start, every
// gossipRefresh, and at once when asked, until ctx ends.
func (w *Worker) refreshPeers(ctx context.Context) {
	for {
		cctx, cancel := context.WithTimeout(ctx, w.cfg.RequestTimeout)
		var gp api.GossipPeers
		err := w.masters.Do(cctx, http.MethodGet, "/v1/gossip", nil, &gp)
		cancel()
		next := gossipRefresh
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			w.log.Debug("cannot ask the masters for their gossip addresses", "err", err)
			next = w.cfg.HeartbeatInterval
		} else {
			var addrs, ids []string
			for _, m := range gp.Masters {
				addrs, ids = append(addrs, m.Gossip), append(ids, m.ID)
			}
			w.peers.mu.Lock()
			w.peers.addrs, w.peers.ids = addrs, ids
			w.peers.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-w.peers.now:
		case <-time.After(next):
		}
	}
}

// askPeersNow makes refreshPeers ask the masters at once.
func (w *Worker) askPeersNow() {
	select {
	case w.peers.now <- struct{}{}:
	default:
	}
}
