// Package freeport finds ports that are free for both TCP and UDP on one IP,
// for the development cluster and process-level tests.
package freeport

import (
	"fmt"
	"net"
)

// Get returns n distinct ports on ip that could be bound for TCP and UDP a
// moment ago. Another process may still take one before the caller does;
// callers start on them at once.
func Get(ip string, n int) ([]int, error) {
	var ports []int
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for len(ports) < n {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			return nil, fmt.Errorf("free port on %s: %w", ip, err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", fmt.Sprintf("%s:%d", ip, port))
		if err != nil {
			l.Close()
			continue
		}
		u.Close()
		held = append(held, l)
		ports = append(ports, port)
	}
	return ports, nil
}
