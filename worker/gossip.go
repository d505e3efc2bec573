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
func (s *session) gossipAddrs() []string {
	s.peers.mu.Lock()
	defer s.peers.mu.Unlock()
	return slices.Clone(s.peers.addrs)
}

// refreshPeers asks the masters for their gossip addresses at start, every
// gossipRefresh, and at once when asked, until ctx ends.
func (s *session) refreshPeers(ctx context.Context) {
	for {
		cctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
		var gp api.GossipPeers
		err := s.masters.Do(cctx, http.MethodGet, "/v1/gossip", nil, &gp)
		cancel()
		next := gossipRefresh
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.log.Debug("cannot ask the masters for their gossip addresses", "err", err)
			next = s.cfg.HeartbeatInterval
		} else {
			var addrs, ids []string
			for _, m := range gp.Masters {
				addrs, ids = append(addrs, m.Gossip), append(ids, m.ID)
			}
			s.peers.mu.Lock()
			s.peers.addrs, s.peers.ids = addrs, ids
			s.peers.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-s.peers.now:
		case <-time.After(next):
		}
	}
}

// askPeersNow makes refreshPeers ask the masters at once.
func (s *session) askPeersNow() {
	select {
	case s.peers.now <- struct{}{}:
	default:
	}
}
