package transport

import (
	"io"
	"testing"
	"time"

	"github.com/drover-project/drover/internal/nettest"
)

// The HTTP client's connections leave from the node's bind address, so a
// firewall rule on that address cuts the node off entirely (raftnet and
// gossip check their own dialers the same way).
func TestHTTPClientLeavesFromBindIP(t *testing.T) {
	const bind = "127.0.0.77"
	addr, seen := nettest.SourceIPs(t)
	hc := NewHTTPClient(bind, 2*time.Second, nil)
	if resp, err := hc.Get("http://" + addr + "/"); err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	hc.CloseIdleConnections()
	nettest.ExpectFrom(t, seen, bind, "http client")
}
