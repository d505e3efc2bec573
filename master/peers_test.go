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
	"time"

	"github.com/drover-project/drover/internal/freeport"
	"github.com/drover-project/drover/transport/gossip"
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
// with what self returns then; Raft's own connections are closed.
func fakeVoter(t *testing.T, self func() raftnet.Self) string {
	t.Helper()
	sl, err := raftnet.NewStreamLayer("127.0.0.1:0", nil, nil, self, slog.New(slog.DiscardHandler))
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
		cfg.Peers = append(cfg.Peers, Peer{ID: id, RaftAddr: fakeVoter(t, func() raftnet.Self { return *answers[id].Load() })})
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
	raftOf := map[string]string{}
	for _, p := range cfg.Peers {
		raftOf[p.ID] = p.RaftAddr
	}
	http := func(id string) string { return m.finder.HTTP(id, raftOf[id]) }
	if http("m2") != "127.0.0.1:7202" || http("m3") != "" || http("m4") != "" {
		t.Fatalf("HTTP addresses m2 %q, m3 %q, m4 %q; want m2's alone", http("m2"), http("m3"), http("m4"))
	}
	if got := m.finder.HTTP("m2", raftOf["m4"]); got != "" {
		t.Fatalf("m2's HTTP address at m4's Raft address is %q, want none: it was not asked there", got)
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

// The finder takes a voter's HTTP address from its Raft port alone, and
// asks again whenever the pool does not show the voter there: a gossip
// member of the voter's name that says its HTTP address is elsewhere
// (what any holder of the gossip key can say) makes the finder ask, and
// the answer keeps the proved address; a voter restarted with another
// HTTP port, which it gossips and gives on its Raft port, is learned at
// the next round. While the pool shows the voter where it said, nothing
// is asked.
func TestFinderTakesHTTPAddressesFromRaftPortsOnly(t *testing.T) {
	ports, err := freeport.Get("127.0.0.1", 5)
	if err != nil {
		t.Fatal(err)
	}
	hp := func(i int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[i])) }
	said := &atomic.Pointer[raftnet.Self]{}
	first := raftnet.Self{ID: "m2", HTTP: "127.0.0.1:7202", Gossip: hp(3)}
	said.Store(&first)
	var asked atomic.Int32
	voter := fakeVoter(t, func() raftnet.Self {
		asked.Add(1)
		return *said.Load()
	})

	cfg := DefaultConfig()
	cfg.ID, cfg.DataDir, cfg.GossipProfile = "m1", t.TempDir(), "local"
	cfg.RaftPort, cfg.HTTPPort, cfg.GossipPort = ports[0], ports[1], ports[2]
	cfg.Peers = []Peer{{ID: "m1", RaftAddr: hp(0)}, {ID: "m2", RaftAddr: voter}}
	cfg.Logger = slog.New(slog.DiscardHandler)
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	m2, err := gossip.Start(gossip.Config{
		Meta: gossip.Meta{Role: gossip.RoleMaster, ID: "m2", HTTP: first.HTTP}, BindIP: "127.0.0.1", Port: ports[3],
		Profile: "local", Join: []string{hp(2)}, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m2.Shutdown() })

	// says sets what m2 gossips, and waits until m1's pool has it.
	says := func(http string) {
		t.Helper()
		if err := m2.UpdateMeta(gossip.Meta{Role: gossip.RoleMaster, ID: "m2", HTTP: http}, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for meta, ok := m.pool.Lookup(gossip.RoleMaster, "m2"); !ok || meta.HTTP != http; meta, ok = m.pool.Lookup(gossip.RoleMaster, "m2") {
			if time.Now().After(deadline) {
				t.Fatalf("m1's pool never heard m2 say %s", http)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	says(first.HTTP)
	// Rounds until the finder has asked at least once and then finds m2
	// in the pool where it said: the finder's own loop runs meanwhile.
	for range 3 {
		m.finder.find()
	}
	if got := m.finder.HTTP("m2", voter); got != first.HTTP {
		t.Fatalf("m2's HTTP address is %q, want %s", got, first.HTTP)
	}
	n := asked.Load()
	m.finder.find()
	if asked.Load() != n {
		t.Fatalf("the finder asked m2 again though the pool shows it at the address it gave")
	}

	says("127.0.0.1:9")
	m.finder.find()
	if asked.Load() == n {
		t.Fatalf("the finder did not ask m2 once its gossip named another HTTP address")
	}
	if got := m.finder.HTTP("m2", voter); got != first.HTTP {
		t.Fatalf("m2's HTTP address is %q once its gossip says 127.0.0.1:9, want %s, what its Raft port says", got, first.HTTP)
	}

	restarted := raftnet.Self{ID: "m2", HTTP: "127.0.0.1:7212", Gossip: first.Gossip}
	said.Store(&restarted)
	says(restarted.HTTP)
	m.finder.find()
	if got := m.finder.HTTP("m2", voter); got != restarted.HTTP {
		t.Fatalf("m2's HTTP address is %q after it restarted on %s", got, restarted.HTTP)
	}
}
