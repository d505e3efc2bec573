// Package transport holds the network plumbing every Drover node shares:
// the dialer, the HTTP client and the listeners' connection bounds. Every
// dialer leaves from the node's own bind address (as do the Raft stream
// layer in transport/raftnet and the gossip transport in package gossip),
// so that a firewall rule on one 127.0.0.x address cuts that node off
// completely; on loopback an unbound socket would leave from 127.0.0.1 and
// slip past such rules. It links neither Raft nor memberlist.
package transport

import (
	"errors"
	"net"
	"syscall"
	"time"
)

// Dialer returns a TCP dialer whose connections leave from bindIP (any port).
// An empty or unspecified bindIP leaves the choice to the kernel.
func Dialer(bindIP string, timeout time.Duration) *net.Dialer {
	d := &net.Dialer{Timeout: timeout, KeepAlive: 15 * time.Second}
	if ip := net.ParseIP(bindIP); ip != nil && !ip.IsUnspecified() {
		d.LocalAddr = &net.TCPAddr{IP: ip}
	}
	return d
}

// Refused reports whether a TCP connection from bindIP to addr (host:port)
// is refused within timeout: the host answered that nothing listens there,
// so the process that listened is gone. A host that does not answer in
// time (paused, cut off, powered off), or any other failure, is no
// refusal: it proves nothing. A connection that opens is closed at once.
func Refused(bindIP, addr string, timeout time.Duration) bool {
	c, err := Dialer(bindIP, timeout).Dial("tcp", addr)
	if err != nil {
		return errors.Is(err, syscall.ECONNREFUSED)
	}
	_ = c.Close()
	return false
}
