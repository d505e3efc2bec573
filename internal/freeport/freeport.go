// Package freeport finds ports that are free for both TCP and UDP on one IP,
// for the development cluster and process-level tests.
//
// The ports come from below the kernel's ephemeral range, as Consul's
// sdk/freeport takes them: a port the kernel picked for a listener (port 0)
// lies in the range it also picks from for outgoing connections, so the
// nodes that start first, dialing their peers, could take the port of a
// node that starts later ("bind: address already in use"). Consul's package
// binds 127.0.0.1 only and hands ports to tests; this one takes any IP.
package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// maxTries is how many ports in a row Get tries that turn out taken, for
// TCP or UDP, before it gives up on one port.
const maxTries = 100

// lowPort is the lowest port Get hands out: below it lie the well-known
// ports of services that may be started later (Consul's sdk/freeport
// starts at 10000 too).
const lowPort = 10000

// ephemeralRange is the file of the kernel's ephemeral range, "LOW HIGH";
// it governs IPv4 and IPv6 alike.
const ephemeralRange = "/proc/sys/net/ipv4/ip_local_port_range"

// Get returns n distinct ports on ip that could be bound for TCP and UDP a
// moment ago, from lowPort up to below the kernel's ephemeral range (or
// above it, when the range starts too low to leave n ports under it).
// Another process may still take one before the caller does; callers start
// on them at once. It fails naming ip when ip cannot be bound, or when
// maxTries ports in a row are taken.
func Get(ip string, n int) ([]int, error) {
	lo, hi := lowPort, 32767
	if b, err := os.ReadFile(ephemeralRange); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			elo, err1 := strconv.Atoi(f[0])
			ehi, err2 := strconv.Atoi(f[1])
			switch {
			case err1 != nil || err2 != nil:
				// Not the kernel's format: the default range stands.
			case elo-1-lowPort >= n+maxTries:
				hi = elo - 1
			default:
				lo, hi = ehi+1, 65535
			}
		}
	}
	return get(ip, n, lo, hi)
}

// get is Get over the ports lo to hi: it walks them from a random one,
// wrapping round, so that two callers at once seldom meet.
func get(ip string, n, lo, hi int) ([]int, error) {
	var ports []int
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	size := hi - lo + 1
	next := rand.IntN(size)
	walked, taken := 0, 0
	var last error
	for len(ports) < n {
		if taken == maxTries || walked == size {
			return nil, fmt.Errorf("no port of %s from %d to %d free for TCP and UDP in %d tries: %w", ip, lo, hi, walked, last)
		}
		port := lo + next
		next, walked = (next+1)%size, walked+1
		addr := net.JoinHostPort(ip, strconv.Itoa(port))
		l, err := net.Listen("tcp", addr)
		if err == nil {
			var u net.PacketConn
			if u, err = net.ListenPacket("udp", addr); err == nil {
				u.Close()
				held = append(held, l)
				ports = append(ports, port)
				taken = 0
				continue
			}
			l.Close()
		}
		// Only a port in use is worth another try: a bad address or
		// one this machine does not have fails the same on every port.
		if !errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("free port on %s: %w", ip, err)
		}
		taken++
		last = err
	}
	return ports, nil
}
