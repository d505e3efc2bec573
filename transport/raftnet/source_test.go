package raftnet

import (
	"log/slog"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/drover-project/drover/tests/nettest"
)

// Raft's outbound connections leave from the master's bind address.
func TestStreamLayerLeavesFromBindIP(t *testing.T) {
	const bind = "127.0.0.77"
	addr, seen := nettest.SourceIPs(t)
	sl, err := NewStreamLayer(bind+":0", nil, nil, noSelf, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer sl.Close()
	if c, err := sl.Dial(raft.ServerAddress(addr), time.Second); err == nil {
		c.Close()
	}
	nettest.ExpectFrom(t, seen, bind, "raft stream layer")
}
