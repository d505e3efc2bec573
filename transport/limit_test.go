package transport

import (
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/drover-project/drover/tests/nettest"
)

// acceptLoop accepts on ln until it is closed and hands every connection
// over; the test closes whatever it received.
func acceptLoop(t *testing.T, ln net.Listener) <-chan net.Conn {
	ch := make(chan net.Conn, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			ch <- c
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		close(ch)
		for c := range ch {
			c.Close()
		}
	})
	return ch
}

// dialFrom connects to addr from the loopback address ip.
func dialFrom(t *testing.T, ip, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: nettest.WaitBound}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial from %s: %v", ip, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// nextAccepted returns the next connection the server accepted and checks
// it comes from ip.
func nextAccepted(t *testing.T, accepted <-chan net.Conn, ip string) net.Conn {
	t.Helper()
	select {
	case c := <-accepted:
		if got := c.RemoteAddr().(*net.TCPAddr).IP.String(); got != ip {
			t.Fatalf("accepted a connection from %s, want %s", got, ip)
		}
		t.Cleanup(func() { c.Close() })
		return c
	case <-time.After(nettest.WaitBound):
		t.Fatalf("connection from %s not accepted", ip)
	}
	return nil
}

func TestLimitConnsPerIP(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := LimitConns(inner, 3, 0)
	addr := ln.Addr().String()
	accepted := acceptLoop(t, ln)

	var held []net.Conn
	for range 3 {
		dialFrom(t, "127.0.0.2", addr)
		held = append(held, nextAccepted(t, accepted, "127.0.0.2"))
	}

	over := dialFrom(t, "127.0.0.2", addr)
	nettest.ClosedByPeer(t, over, "4th connection from 127.0.0.2")

	// The accept loop handles connections in order, so had the 4th been
	// handed over it would arrive here before this one.
	dialFrom(t, "127.0.0.3", addr)
	nextAccepted(t, accepted, "127.0.0.3")

	// Closing twice, and concurrently, must give the slot back once: a
	// double release would let a 4th connection in below.
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { held[0].Close() })
	}
	wg.Wait()

	dialFrom(t, "127.0.0.2", addr)
	nextAccepted(t, accepted, "127.0.0.2")
	over = dialFrom(t, "127.0.0.2", addr)
	nettest.ClosedByPeer(t, over, "connection from 127.0.0.2 beyond the limit after a double Close")
}

func TestLimitConnsOff(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, n := range []int{0, -1} {
		if got := LimitConns(ln, n, 0); got != ln {
			t.Errorf("LimitConns(ln, %d, 0) = %T, want ln itself", n, got)
		}
	}
}

// Beyond the overall bound every new connection is closed at once, from
// any address; a slot freed lets the next one in.
func TestLimitConnsTotal(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := LimitConns(ln, 0, 2)
	t.Cleanup(func() { l.Close() })
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func(ip string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	dial("127.0.0.2")
	dial("127.0.0.3")
	first := <-accepted
	<-accepted
	third := dial("127.0.0.4")
	_ = third.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := third.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("a third connection over the bound of 2 was kept: %v", err)
	}
	first.Close()
	dial("127.0.0.5")
	select {
	case <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("a connection after a slot was freed was not accepted")
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// One ConnLimit wrapping two listeners counts their connections together:
// the per-IP bound spans both.
func TestConnLimitSharedAcrossListeners(t *testing.T) {
	limit := NewConnLimit(1, 0)
	var lns []net.Listener
	accepted := make(chan net.Conn, 4)
	for range 2 {
		inner, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln := limit.Wrap(inner)
		t.Cleanup(func() { ln.Close() })
		lns = append(lns, ln)
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				accepted <- c
			}
		}()
	}
	dial := func(addr string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.6")}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	dial(lns[0].Addr().String())
	<-accepted
	second := dial(lns[1].Addr().String())
	_ = second.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := second.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("a second connection from one IP, to the other listener, was kept: %v", err)
	}
}
