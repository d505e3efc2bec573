// Package transport holds the network plumbing every Drover node shares:
// the dialer, the HTTP client and the listeners' connection bounds. Every
// dialer leaves from the node's own bind address (as do the Raft stream
// layer in transport/raftnet and the gossip transport in package gossip),
// so that a firewall rule on one 127.0.0.x address cuts that node off
// completely; on loopback an unbound socket would leave from 127.0.0.1 and
// slip past such rules. It links neither Raft nor memberlist.
package transport

import (
	"net"
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
