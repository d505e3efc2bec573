package transport

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
)

// remoteIPs accepts connections on 127.0.0.1 and reports each one's source
// IP.
func remoteIPs(t *testing.T) (addr string, seen <-chan string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ch := make(chan string, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			ch <- c.RemoteAddr().(*net.TCPAddr).IP.String()
			c.Close()
		}
	}()
	return ln.Addr().String(), ch
}

func expectFrom(t *testing.T, seen <-chan string, ip, what string) {
	t.Helper()
	select {
	case got := <-seen:
		if got != ip {
			t.Fatalf("%s dialed from %s, want %s", what, got, ip)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: no connection", what)
	}
}

// Every kind of outbound connection leaves from the node's bind address, so
// a firewall rule on that address cuts the node off entirely.
func TestOutboundConnectionsLeaveFromBindIP(t *testing.T) {
	const bind = "127.0.0.77"
	addr, seen := remoteIPs(t)

	sl, err := NewStreamLayer(bind+":0", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sl.Close()
	if c, err := sl.Dial(raft.ServerAddress(addr), time.Second); err == nil {
		c.Close()
	}
	expectFrom(t, seen, bind, "raft stream layer")

	hc := NewHTTPClient(bind, 2*time.Second, nil)
	if resp, err := hc.Get("http://" + addr + "/"); err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	hc.CloseIdleConnections()
	expectFrom(t, seen, bind, "http client")

	gt, err := NewGossipTransport(bind, 0, &memberlist.NetTransportConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer gt.Shutdown()
	if c, err := gt.DialAddressTimeout(memberlist.Address{Addr: addr}, time.Second); err == nil {
		c.Close()
	}
	expectFrom(t, seen, bind, "gossip transport")
}
