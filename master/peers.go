package master

import (
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/drover-project/drover/transport/gossip"
	"github.com/drover-project/drover/transport/raftnet"
)

// askTimeout bounds one question to a peer's Raft port.
const askTimeout = 2 * time.Second

// findInterval is how often the finder looks for voters missing from the
// pool.
const findInterval = 2 * time.Second

// askGap is the shortest time between two rounds of the finder when an
// HTTP address is asked for before it is known: a new leader's, or one
// that changed, is learned within about a round trip of the first request
// that needs it, and requests that keep asking cost a round every askGap.
const askGap = 200 * time.Millisecond

// finder learns what each voter says of itself (raftnet.Self) on the Raft
// address the Raft configuration names (raftnet.StreamLayer.Ask), where a
// master proves it is one (mutual TLS, or the raft key's TLS) before it
// answers. Its gossip address lets a master started with --peers alone,
// or restarted from its data dir, join its peers' pool (the join loop
// joins what Addrs returns). Its HTTP address is the only one this
// master sends requests for a master to (forwarding, which carries the
// caller's credentials and the master credential; uploads; the leader
// address it tells clients and workers): a gossip member's metadata is
// what any holder of the gossip key says it is, and memberlist takes even
// its address on its word.
//
// A voter is asked again while it is missing from the pool or the pool
// does not show it at the HTTP address it proved (gossip.Pool.LookupAt):
// a master restarted with another HTTP port gossips the new one, and is
// asked within a round. A peer that answers with an address that is not
// host:port, or another master's ID, is logged once and skipped.
type finder struct {
	m *Master
	// kick asks for a round before the next tick (HTTP found nothing).
	kick chan struct{}

	mu     sync.Mutex
	selves map[string]proof  // master ID -> what it said of itself
	bad    map[string]string // master ID -> the bad answer logged
}

// proof is what a voter said of itself on its Raft port at raft.
type proof struct {
	raft string
	raftnet.Self
}

func newFinder(m *Master) *finder {
	return &finder{m: m, kick: make(chan struct{}, 1), selves: map[string]proof{}, bad: map[string]string{}}
}

// HTTP returns the HTTP address voter id last gave on its Raft port at
// raftAddr, "" before it did there; a miss asks the finder for a round.
func (f *finder) HTTP(id, raftAddr string) string {
	http := f.learned(id, raftAddr)
	if http == "" {
		select {
		case f.kick <- struct{}{}:
		default:
		}
	}
	return http
}

// Known returns a copy of the gossip addresses learned, by master ID.
func (f *finder) Known() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]string, len(f.selves))
	for id, p := range f.selves {
		out[id] = p.Gossip
	}
	return out
}

// Addrs returns the addresses to join; the join loop skips those of
// members it sees already.
func (f *finder) Addrs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, 0, len(f.selves))
	for _, p := range f.selves {
		out = append(out, p.Gossip)
	}
	return out
}

// run asks, every findInterval until stop, and at most every askGap when
// an HTTP address was missed, each voter not yet learned or not in the
// pool as it said.
func (f *finder) run(stop <-chan struct{}) {
	tick := time.NewTicker(findInterval)
	defer tick.Stop()
	for {
		f.find()
		gap := time.After(askGap)
		select {
		case <-stop:
			return
		case <-tick.C:
		case <-f.kick:
			select {
			case <-stop:
				return
			case <-gap:
			}
		}
	}
}

func (f *finder) find() {
	cf := f.m.raft.GetConfiguration()
	if cf.Error() != nil {
		return
	}
	var wg sync.WaitGroup
	for _, srv := range cf.Configuration().Servers {
		id := string(srv.ID)
		if id == f.m.cfg.ID {
			continue
		}
		if http := f.learned(id, string(srv.Address)); http != "" {
			if _, ok := f.m.pool.LookupAt(gossip.RoleMaster, id, http); ok {
				continue
			}
		}
		wg.Go(func() { f.ask(id, srv.Address) })
	}
	wg.Wait()
}

// learned is HTTP without the kick: the finder's own look.
func (f *finder) learned(id, raftAddr string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, ok := f.selves[id]; ok && p.raft == raftAddr {
		return p.HTTP
	}
	return ""
}

func (f *finder) ask(id string, addr raft.ServerAddress) {
	self, err := f.m.streams.Ask(string(addr), askTimeout)
	if err != nil {
		// Down, or not yet up: the next round asks again, and the Raft
		// logs say more about a peer that stays unreachable.
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	_, _, gerr := net.SplitHostPort(self.Gossip)
	_, _, herr := net.SplitHostPort(self.HTTP)
	if gerr != nil || herr != nil || self.ID != id {
		answer := self.Gossip + "/" + self.HTTP + "/" + self.ID
		if f.bad[id] != answer {
			f.m.log.Warn("a voter's Raft port names a gossip or HTTP address that is no host:port, or another master", "voter", id, "raft", addr, "answered_id", self.ID, "gossip", self.Gossip, "http", self.HTTP)
			f.bad[id] = answer
		}
		return
	}
	delete(f.bad, id)
	if old := f.selves[id]; old.HTTP != "" && old.HTTP != self.HTTP {
		f.m.log.Info("a voter's HTTP address changed", "voter", id, "raft", addr, "was", old.HTTP, "now", self.HTTP)
	}
	f.selves[id] = proof{raft: string(addr), Self: self}
}

// broadcast wakes everyone waiting for the next change of something.
type broadcast struct {
	mu sync.Mutex
	ch chan struct{}
}

func newBroadcast() *broadcast { return &broadcast{ch: make(chan struct{})} }

// Wait returns a channel that is closed at the next Signal.
func (b *broadcast) Wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ch
}

// Signal closes the channel Wait returned, and makes a new one.
func (b *broadcast) Signal() {
	b.mu.Lock()
	defer b.mu.Unlock()
	close(b.ch)
	b.ch = make(chan struct{})
}
