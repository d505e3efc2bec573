package freeport

import (
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// getWithin runs Get and fails the test if it has not returned within 10
// s: a Get that loops must fail the test, not hang it.
func getWithin(t *testing.T, ip string, n int) ([]int, error) {
	t.Helper()
	type result struct {
		ports []int
		err   error
	}
	done := make(chan result, 1)
	go func() { p, err := Get(ip, n); done <- result{p, err} }()
	select {
	case r := <-done:
		return r.ports, r.err
	case <-time.After(10 * time.Second):
		t.Fatalf("Get(%q, %d) still running after 10s", ip, n)
		return nil, nil
	}
}

// Ports of the IPv6 loopback address are found, and each binds for TCP
// and UDP at once.
func TestGetIPv6(t *testing.T) {
	if l, err := net.Listen("tcp", "[::1]:0"); err != nil {
		t.Skipf("this machine has no IPv6 loopback address ::1: %v", err)
	} else {
		l.Close()
	}
	ports, err := getWithin(t, "::1", 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(ports) != 3 || ports[0] == ports[1] || ports[1] == ports[2] || ports[0] == ports[2] {
		t.Fatalf("Get(::1, 3) = %v, want 3 distinct ports", ports)
	}
	for _, p := range ports {
		addr := net.JoinHostPort("::1", strconv.Itoa(p))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		l.Close()
		u, err := net.ListenPacket("udp", addr)
		if err != nil {
			t.Fatal(err)
		}
		u.Close()
	}
}

// Ports come from below the kernel's ephemeral range, which outgoing
// connections take theirs from.
func TestGetAvoidsEphemeralRange(t *testing.T) {
	ports, err := getWithin(t, "127.0.0.1", 20)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ports {
		if p < lowPort || p >= 32768 {
			t.Errorf("port %d: want %d to 32767, below the ephemeral range", p, lowPort)
		}
	}
}

// An address this machine does not have is an error naming it, at once.
func TestGetAddressNotHere(t *testing.T) {
	_, err := getWithin(t, "10.255.255.1", 1)
	if err == nil || !strings.Contains(err.Error(), "10.255.255.1") {
		t.Fatalf("Get(10.255.255.1) = %v, want an error naming the address", err)
	}
}

// holdUDP binds UDP on ports p to p+n-1 of ip, all or none.
func holdUDP(ip string, p, n int) ([]net.PacketConn, bool) {
	var held []net.PacketConn
	for q := p; q < p+n; q++ {
		u, err := net.ListenPacket("udp", net.JoinHostPort(ip, strconv.Itoa(q)))
		if err != nil {
			for _, h := range held {
				h.Close()
			}
			return nil, false
		}
		held = append(held, u)
	}
	return held, true
}

// Ports taken for UDP (TCP binds them) are skipped: in a range of
// maxTries-1 of them and a free one, get finds the free one wherever its
// walk starts; with maxTries+1 and no free one, it gives up after
// maxTries, naming the address, the range and the port in use. (A range
// of maxTries taken ports and a free one is found only when the walk does
// not start at the first of them.)
func TestGetBoundsTakenPorts(t *testing.T) {
	const ip = "127.0.0.1"
	var held []net.PacketConn
	base := 0
	for range 20 {
		base = lowPort + rand.IntN(32767-lowPort-maxTries-2)
		var ok bool
		if held, ok = holdUDP(ip, base, maxTries+1); ok {
			break
		}
	}
	if held == nil {
		t.Skipf("found no %d consecutive free UDP ports on %s", maxTries+1, ip)
	}
	defer func() {
		for _, u := range held {
			u.Close()
		}
	}()
	free := base + maxTries + 1
	if l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(free))); err != nil {
		t.Skipf("port %d, after the held ones, is not free: %v", free, err)
	} else {
		l.Close()
	}
	for range 20 {
		ports, err := get(ip, 1, base+2, free)
		if err != nil || !slices.Equal(ports, []int{free}) {
			t.Fatalf("get(%s, 1, %d, %d) with all but %d taken for UDP = %v, %v; want [%d]", ip, base+2, free, free, ports, err, free)
		}
	}
	_, err := get(ip, 1, base, base+maxTries)
	want := "no port of 127.0.0.1 from " + strconv.Itoa(base) + " to " + strconv.Itoa(base+maxTries) + " free for TCP and UDP in 100 tries"
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("get over %d taken ports = %v, want %q and the port in use", maxTries+1, err, want)
	}
}
