package gossip

import (
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/drover-project/drover/tests/nettest"
)

// Gossip's outbound TCP leaves from the node's bind address.
func TestNetTransportLeavesFromBindIP(t *testing.T) {
	const bind = "127.0.0.77"
	addr, seen := nettest.SourceIPs(t)
	gt, err := newNetTransport(bind, 0, &memberlist.NetTransportConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer gt.Shutdown()
	if c, err := gt.DialAddressTimeout(memberlist.Address{Addr: addr}, time.Second); err == nil {
		c.Close()
	}
	nettest.ExpectFrom(t, seen, bind, "gossip transport")
}
