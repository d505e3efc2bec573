// Package transport holds the network plumbing every Drover node shares: the
// Raft stream layer, the HTTP client, and the memberlist transport. Each one
// dials from the node's own bind address, so that a firewall rule on one
// 127.0.0.x address cuts that node off completely; on loopback an unbound
// socket would leave from 127.0.0.1 and slip past such rules.
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
