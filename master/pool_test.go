package master_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/internal/freeport"
	"github.com/drover-project/drover/master"
	"github.com/drover-project/drover/master/mastertest"
	"github.com/drover-project/drover/transport/gossip"
)

// gossipAddr is the gossip address a node's master listens on.
func gossipAddr(n *mastertest.Node) string {
	return net.JoinHostPort(n.Config.BindIP, strconv.Itoa(n.Config.GossipPort))
}

// gossipPeers reads one master's GET /v1/gossip.
func gossipPeers(t *testing.T, addr string) ([]api.PoolMember, error) {
	t.Helper()
	code, body := get(t, addr, "/v1/gossip")
	var g api.GossipPeers
	if err := json.Unmarshal(body, &g); code != http.StatusOK || err != nil {
		return nil, fmt.Errorf("GET /v1/gossip: %d %s", code, body)
	}
	return g.Masters, nil
}

// poolMembers names masters as GET /v1/gossip does: role, ID and gossip
// address.
func poolMembers(nodes ...*mastertest.Node) []api.PoolMember {
	var out []api.PoolMember
	for _, n := range nodes {
		out = append(out, api.PoolMember{Role: gossip.RoleMaster, ID: n.ID, Gossip: gossipAddr(n)})
	}
	return out
}

// aliveMembers matches the metric of the live members of a master's pool.
var aliveMembers = regexp.MustCompile(`(?m)^drover_gossip_members\{state="alive"\} (\d+)$`)

// Masters started with --peers alone, with no --join and no worker to
// bridge them, find each other's gossip addresses through the Raft
// configuration (each asks the voters on their Raft ports) and form one
// pool: each master's GET /v1/gossip names itself and then the other two
// at their gossip ports, each sees the three in its pool, and each is
// healthy, a follower's pool check included (it sees the leader).
func TestMastersFindEachOtherThroughRaft(t *testing.T) {
	c := mastertest.Start(t, 3, func(cfg *master.Config) { cfg.Join = nil })
	deadline := time.Now().Add(time.Minute)
	for _, n := range c.Nodes {
		want := poolMembers(n)
		for _, o := range c.Nodes {
			if o != n {
				want = append(want, poolMembers(o)...)
			}
		}
		for {
			got, err := gossipPeers(t, n.HTTP())
			_, metrics := get(t, n.HTTP(), "/metrics")
			alive := aliveMembers.FindStringSubmatch(string(metrics))
			code, health := get(t, n.HTTP(), "/v1/health")
			if err == nil && slices.Equal(got, want) && alive != nil && alive[1] == "3" && code == http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s within a minute: gossip peers %+v (%v), want %+v; live members %q; health %d %s",
					n.ID, got, err, want, alive, code, health)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// GET /v1/gossip answers with the master's own gossip address first, then
// every other master it knows of, by ID: those the Raft configuration
// names, learned on their Raft ports even when they are not in this
// master's pool, and those in its pool that Raft does not name yet.
func TestGossipPeersAnswer(t *testing.T) {
	key := []byte("0123456789abcdef")
	c := mastertest.Start(t, 3, func(cfg *master.Config) {
		cfg.GossipKey = key
		if cfg.ID == "m3" {
			// m3's pool is its own: the others know it from Raft alone.
			cfg.GossipKey = []byte("fedcba9876543210")
		}
	})
	// m4 is a master waiting to be added as a voter: in m1's pool, not in
	// the Raft configuration.
	ports, err := freeport.Get("127.0.0.1", 3)
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.Nodes[0].Config
	cfg.ID, cfg.DataDir, cfg.Peers = "m4", t.TempDir(), nil
	cfg.RaftPort, cfg.HTTPPort, cfg.GossipPort = ports[0], ports[1], ports[2]
	cfg.Join = []string{gossipAddr(c.Nodes[0])}
	cfg.Logger = slog.New(slog.DiscardHandler)
	m4, err := master.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m4.Close() })
	m4Node := &mastertest.Node{ID: "m4", Config: cfg}

	m1, m2, m3 := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	for _, tc := range []struct {
		n    *mastertest.Node
		want []api.PoolMember
	}{
		{m1, poolMembers(m1, m2, m3, m4Node)},
		{m3, poolMembers(m3, m1, m2)},
	} {
		deadline := time.Now().Add(time.Minute)
		for {
			got, err := gossipPeers(t, tc.n.HTTP())
			if err == nil && slices.Equal(got, tc.want) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s's gossip peers within a minute: %+v (%v), want %+v", tc.n.ID, got, err, tc.want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// health reads one master's /v1/health.
func health(t *testing.T, n *mastertest.Node) (int, api.Health) {
	t.Helper()
	code, body := get(t, n.HTTP(), "/v1/health")
	var h api.Health
	if err := json.Unmarshal(body, &h); err != nil {
		t.Fatalf("%s's health: %d %s", n.ID, code, body)
	}
	return code, h
}

// check returns the check of that name, and whether there is one.
func check(h api.Health, name string) (api.Check, bool) {
	i := slices.IndexFunc(h.Checks, func(c api.Check) bool { return c.Name == name })
	if i < 0 {
		return api.Check{}, false
	}
	return h.Checks[i], true
}

// healthNamesMissingLeader reports whether a follower's health fails
// its pool check, and only that one, for not seeing the leader it names
// in its pool.
func healthNamesMissingLeader(code int, h api.Health) bool {
	pool, _ := check(h, api.CheckPool)
	lead, _ := check(h, api.CheckLeader)
	name, _ := strings.CutPrefix(lead.Message, "leader ")
	return code == http.StatusServiceUnavailable && h.Status == "degraded" && lead.OK && !pool.OK &&
		(name == "m1" || name == "m2") && pool.Message == "the leader, "+name+", is missing from this master's gossip pool"
}

// A master's /v1/health fails each check a load balancer or systemd
// relies on when what it checks is missing: a follower that does not see
// the leader in its gossip pool fails "pool", naming the leader; a master
// whose peers are gone fails "quorum", and "leader" once none is left.
func TestHealthSaysWhatIsMissing(t *testing.T) {
	c := mastertest.Start(t, 3, func(cfg *master.Config) {
		cfg.GossipKey = []byte("0123456789abcdef")
		if cfg.ID == "m3" {
			cfg.GossipKey = []byte("fedcba9876543210")
		}
	})
	m3 := c.Nodes[2]
	deadline := time.Now().Add(time.Minute)
	for {
		// m3 must follow: as leader it would report the others as a
		// split.
		if c.Leader() == m3 {
			c.Stop(m3)
			c.Restart(m3)
		} else if code, h := health(t, m3); healthNamesMissingLeader(code, h) {
			break
		}
		if time.Now().After(deadline) {
			code, h := health(t, m3)
			t.Fatalf("m3, whose gossip key is not the leader's: health %d %+v, want 503 with the pool check naming the leader", code, h)
		}
		time.Sleep(100 * time.Millisecond)
	}

	for _, n := range c.Nodes[:2] {
		c.Stop(n)
	}
	deadline = time.Now().Add(time.Minute)
	for {
		code, h := health(t, m3)
		quorum, _ := check(h, api.CheckQuorum)
		lead, _ := check(h, api.CheckLeader)
		if code == http.StatusServiceUnavailable && h.Status == "degraded" && !quorum.OK &&
			strings.HasPrefix(quorum.Message, "the leader last spoke ") && !lead.OK && lead.Message == "no leader known" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("m3 alone: health %d %+v, want 503 with the quorum and leader checks failing", code, h)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
