package master

import (
	"io"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/drover-project/drover/internal/freeport"
)

// testGossipKey is the gossip key (AES-128) of a test master that runs
// tokens, which refuses to start without one.
var testGossipKey = []byte("0123456789abcdef")

// singleConfig is the Config of a master that is the only voter, on
// 127.0.0.1 with free ports, fast Raft timeouts and no log output.
func singleConfig(tb testing.TB) Config {
	tb.Helper()
	ports, err := freeport.Get("127.0.0.1", 3)
	if err != nil {
		tb.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.ID = "m1"
	cfg.DataDir = tb.TempDir()
	cfg.BindIP = "127.0.0.1"
	cfg.RaftPort, cfg.HTTPPort, cfg.GossipPort = ports[0], ports[1], ports[2]
	cfg.Peers = []Peer{{ID: "m1", RaftAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))}}
	cfg.GossipProfile = "local"
	cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 100*time.Millisecond, 100*time.Millisecond, 50*time.Millisecond
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return cfg
}

// waitReady waits until m is the ready leader; a single voter elects itself
// within a few election timeouts.
func waitReady(tb testing.TB, m *Master) {
	tb.Helper()
	for deadline := time.Now().Add(20 * time.Second); !m.local.Ready(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			tb.Fatal("the master did not become the ready leader within 20s")
		}
	}
}
