// Package nettest helps tests check where a node's connections come from.
package nettest

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// SourceIPs accepts connections on 127.0.0.1 and reports each one's source
// IP.
func SourceIPs(t *testing.T) (addr string, seen <-chan string) {
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

// ExpectFrom waits for the next connection SourceIPs saw and checks that
// it came from ip; what names the dialer in the failure.
func ExpectFrom(t *testing.T, seen <-chan string, ip, what string) {
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

// WaitBound is how long a test waits for an event that should come at
// once; reaching it is a failure, never the expected path.
const WaitBound = 5 * time.Second

// ClosedByPeer checks that the other end closed c: a read fails at once
// instead of running into the deadline.
func ClosedByPeer(t *testing.T, c net.Conn, what string) {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(WaitBound)); err != nil {
		t.Fatal(err)
	}
	n, err := c.Read(make([]byte, 1))
	switch {
	case err == nil:
		t.Fatalf("%s: read %d bytes, want the connection closed", what, n)
	case errors.Is(err, os.ErrDeadlineExceeded):
		t.Fatalf("%s: still open after %v", what, WaitBound)
	}
}
