package master

import (
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/drover-project/drover/gossip"
)

// askTimeout bounds one question to a peer's Raft port.
const askTimeout = 2 * time.Second

// findInterval is how often the finder looks for voters missing from the
// pool.
const findInterval = 2 * time.Second

// finder learns the gossip and HTTP addresses of the voters by asking each
// on the Raft address the Raft configuration names
// (raftnet.StreamLayer.Ask): those this master does not see in its gossip
// pool, so that a master started with --peers alone, or restarted from its
// data dir, joins its peers' pool (the join loop joins what Addrs
// returns); and those whose HTTP address it has not learned, which uploads
// are pushed to. A peer that answers with an address that is not host:port
// is logged once and skipped.
type finder struct {
	m *Master

	mu    sync.Mutex
	addrs map[string]string // master ID -> gossip address
	https map[string]string // master ID -> HTTP address
	bad   map[string]string // master ID -> the bad answer logged
}

func newFinder(m *Master) *finder {
	return &finder{m: m, addrs: map[string]string{}, https: map[string]string{}, bad: map[string]string{}}
}

// HTTP returns the HTTP address a voter last gave, "" before one did.
func (f *finder) HTTP(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.https[id]
}

// Known returns a copy of the gossip addresses learned, by master ID.
func (f *finder) Known() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]string, len(f.addrs))
	for id, a := range f.addrs {
		out[id] = a
	}
	return out
}

// Addrs returns the addresses to join; the join loop skips those of
// members it sees already.
func (f *finder) Addrs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, 0, len(f.addrs))
	for _, a := range f.addrs {
		out = append(out, a)
	}
	return out
}

// run asks, every findInterval until stop, each voter missing from the pool
// or whose HTTP address is not known for its addresses.
func (f *finder) run(stop <-chan struct{}) {
	tick := time.NewTicker(findInterval)
	defer tick.Stop()
	for {
		f.find()
		select {
		case <-stop:
			return
		case <-tick.C:
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
		if _, ok := f.m.pool.LookupAt(gossip.RoleMaster, id, string(srv.Address)); ok && f.HTTP(id) != "" {
			continue
		}
		wg.Go(func() { f.ask(id, srv.Address) })
	}
	wg.Wait()
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
	f.addrs[id] = self.Gossip
	f.https[id] = self.HTTP
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
