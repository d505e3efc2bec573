package transport

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/drover-project/drover/tests/nettest"
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

// A transfer that keeps reading outlives Idle's duration many times; one
// that stops is ended with ErrStalled as its cause.
func TestIdle(t *testing.T) {
	const d = 300 * time.Millisecond
	ctx, touch, cancel := Idle(context.Background(), d)
	defer cancel()
	r := Touching(strings.NewReader(strings.Repeat("x", 20)), touch)
	// Twenty reads 30 ms apart outlive d twice, each well within it.
	for range 20 {
		time.Sleep(d / 10)
		if _, err := r.Read(make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		if ctx.Err() != nil {
			t.Fatalf("ended after a read: %v", context.Cause(ctx))
		}
	}
	<-ctx.Done()
	if !errors.Is(context.Cause(ctx), ErrStalled) {
		t.Fatalf("cause %v, want ErrStalled", context.Cause(ctx))
	}

	ctx, _, cancel = Idle(context.Background(), time.Hour)
	cancel()
	if errors.Is(context.Cause(ctx), ErrStalled) || ctx.Err() == nil {
		t.Fatalf("cancelled: cause %v", context.Cause(ctx))
	}
}

// Refused tells a port nothing listens on (refused at once) from one with
// a listener, even one that never accepts, as a paused process's.
func TestRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if Refused("127.0.0.1", addr, time.Second) {
		t.Fatalf("%s refused while listening", addr)
	}
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	if !Refused("127.0.0.1", addr, time.Second) {
		t.Fatalf("%s not refused once closed", addr)
	}
}
