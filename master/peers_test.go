package master

import (
	"context"
	"log/slog"
	"maps"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/drover-project/drover/internal/freeport"
	"github.com/drover-project/drover/transport/raftnet"
)

// warnings counts, by voter, the warnings logged with a "voter" attribute.
type warnings struct {
	mu     sync.Mutex
	counts map[string]int
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler           { return w }
func (w *warnings) WithGroup(string) slog.Handler                { return w }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "voter" {
			w.mu.Lock()
			w.counts[a.Value.String()]++
			w.mu.Unlock()
		}
		return true
	})
	return nil
}

func (w *warnings) of(voter string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.counts[voter]
}

// fakeVoter listens as a master's Raft port does and answers who it is
// with what self holds now; Raft's own connections are closed.
func fakeVoter(t *testing.T, self *atomic.Pointer[raftnet.Self]) string {
	t.Helper()
	sl, err := raftnet.NewStreamLayer("127.0.0.1:0", nil, nil, func() raftnet.Self { return *self.Load() },
		slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sl.Close() })
	go func() {
		for {
			c, err := sl.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	return sl.Addr().String()
}

// The finder learns the addresses a voter's Raft port gives, and skips
// an answer that is no host:port or names another master, logging it once
// however many rounds ask again, and once more only when the answer
// changes; the other voters are still learned, and a voter whose answer
// becomes good is learned then.
func TestFinderSkipsBogusAnswers(t *testing.T) {
	answers := map[string]*atomic.Pointer[raftnet.Self]{}
	set := func(id string, s raftnet.Self) {
		if answers[id] == nil {
			answers[id] = &atomic.Pointer[raftnet.Self]{}
		}
		answers[id].Store(&s)
	}
	set("m2", raftnet.Self{ID: "m2", HTTP: "127.0.0.1:7202", Gossip: "127.0.0.1:7203"})
	set("m3", raftnet.Self{ID: "m3", HTTP: "127.0.0.1:7302", Gossip: "nonsense"})
	set("m4", raftnet.Self{ID: "m9", HTTP: "127.0.0.1:7402", Gossip: "127.0.0.1:7403"})

	ports, err := freeport.Get("127.0.0.1", 3)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.ID, cfg.DataDir, cfg.GossipProfile = "m1", t.TempDir(), "local"
	cfg.RaftPort, cfg.HTTPPort, cfg.GossipPort = ports[0], ports[1], ports[2]
	cfg.Peers = []Peer{{ID: "m1", RaftAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))}}
	for _, id := range []string{"m2", "m3", "m4"} {
		cfg.Peers = append(cfg.Peers, Peer{ID: id, RaftAddr: fakeVoter(t, answers[id])})
	}
	logged := &warnings{counts: map[string]int{}}
	cfg.Logger = slog.New(logged)
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })

	for range 3 {
		m.finder.find()
	}
	if got, want := m.finder.Known(), map[string]string{"m2": "127.0.0.1:7203"}; !maps.Equal(got, want) {
		t.Fatalf("known gossip addresses %v, want %v", got, want)
	}
	if addrs := m.finder.Addrs(); len(addrs) != 1 || addrs[0] != "127.0.0.1:7203" {
		t.Fatalf("addresses to join %v, want m2's alone", addrs)
	}
	if m.finder.HTTP("m2") != "127.0.0.1:7202" || m.finder.HTTP("m3") != "" || m.finder.HTTP("m4") != "" {
		t.Fatalf("HTTP addresses m2 %q, m3 %q, m4 %q; want m2's alone", m.finder.HTTP("m2"), m.finder.HTTP("m3"), m.finder.HTTP("m4"))
	}
	if logged.of("m3") != 1 || logged.of("m4") != 1 || logged.of("m2") != 0 {
		t.Fatalf("warnings for m2 %d, m3 %d, m4 %d after 3 rounds; want none, one, one", logged.of("m2"), logged.of("m3"), logged.of("m4"))
	}

	// Another bad answer is said again; a good one is learned. The
	// finder's own rounds go on meanwhile, and one that asked before the
	// change may report the old answer after it: what holds is that the
	// new answer is said, and then no more while it stays the same.
	set("m3", raftnet.Self{ID: "m3", HTTP: "no-port", Gossip: "127.0.0.1:7303"})
	set("m4", raftnet.Self{ID: "m4", HTTP: "127.0.0.1:7402", Gossip: "127.0.0.1:7403"})
	for range 2 {
		m.finder.find()
	}
	said := logged.of("m3")
	for range 3 {
		m.finder.find()
	}
	want := map[string]string{"m2": "127.0.0.1:7203", "m4": "127.0.0.1:7403"}
	if got := m.finder.Known(); !maps.Equal(got, want) || said < 2 || logged.of("m3") != said || logged.of("m4") != 1 {
		t.Fatalf("after the answers changed: known %v, want %v; warnings for m3 %d then %d, want 2 or more and no more; for m4 %d, want 1",
			got, want, said, logged.of("m3"), logged.of("m4"))
	}
}
