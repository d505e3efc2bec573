package raftnet

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/drover-project/drover/security/pki"
	"github.com/drover-project/drover/tests/nettest"
	"github.com/drover-project/drover/tests/rogueraft"
)

// refusalLines returns the lines of log about a refused peer.
func refusalLines(log *records) []string {
	var out []string
	for _, l := range log.all() {
		if strings.HasPrefix(l, "refused a Raft peer") {
			out = append(out, l)
		}
	}
	return out
}

// waitRefusals checks that log holds n lines about refused peers. The
// acceptor logs a refusal before it closes the connection, so once the
// refused peers saw their connections closed, every line is there.
func waitRefusals(t *testing.T, log *records, n int) {
	t.Helper()
	if got := refusalLines(log); len(got) != n {
		t.Fatalf("logged %d refusals, want %d: %q", len(got), n, got)
	}
}

// Two masters holding one raft key carry Raft's RPCs to each other, and
// answer each other's Self.
func TestStreamLayerRaftKeyCarriesRaft(t *testing.T) {
	t.Parallel()
	ms := keyMasters(t)
	want := Self{ID: "m1", HTTP: "127.0.0.1:7102", Gossip: "127.0.0.1:7103"}
	var layers [2]*StreamLayer
	var trans [2]*raft.NetworkTransport
	for i := range 2 {
		sl, err := NewStreamLayer("127.0.0.1:0", ms.server[i], ms.client[i], func() Self { return want }, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		layers[i] = sl
		if trans[i], err = NewRaftTransport(sl, nettest.WaitBound, io.Discard); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { trans[i].Close() })
	}
	for _, dir := range [][2]int{{0, 1}, {1, 0}} {
		from, to := dir[0], dir[1]
		answered := make(chan uint64, 1)
		go func() {
			rpc := <-trans[to].Consumer()
			req := rpc.Command.(*raft.AppendEntriesRequest)
			answered <- req.Term
			rpc.Respond(&raft.AppendEntriesResponse{Term: req.Term, Success: true}, nil)
		}()
		var resp raft.AppendEntriesResponse
		err := trans[from].AppendEntries("", raft.ServerAddress(layers[to].Addr().String()),
			&raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax}, Term: 7}, &resp)
		if err != nil || !resp.Success || resp.Term != 7 {
			t.Fatalf("AppendEntries from master %d to %d: %+v, %v", from, to, resp, err)
		}
		if term := <-answered; term != 7 {
			t.Fatalf("master %d read term %d, want 7", to, term)
		}
		if got, err := layers[from].Ask(layers[to].Addr().String(), nettest.WaitBound); err != nil || got != want {
			t.Fatalf("Ask = %+v, %v; want %+v", got, err, want)
		}
	}
}

// recorder keeps every byte a connection writes.
type recorder struct {
	net.Conn
	mu    sync.Mutex
	wrote []byte
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	r.wrote = append(r.wrote, p...)
	r.mu.Unlock()
	return r.Conn.Write(p)
}

// recordHandshake runs a master's handshake with addr, hands its
// connection to Raft with an RPC's first byte, and returns every byte the
// master sent.
func recordHandshake(t *testing.T, addr string, client *tls.Config) []byte {
	t.Helper()
	raw, err := net.DialTimeout("tcp", addr, nettest.WaitBound)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{Conn: raw}
	tc := tls.Client(rec, client)
	t.Cleanup(func() { tc.Close() })
	if err := tc.Handshake(); err != nil {
		t.Fatalf("handshake to record: %v", err)
	}
	if _, err := tc.Write([]byte{rpcByte}); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.wrote
}

// rawFrom dials addr over plain TCP from the loopback address ip.
func rawFrom(t *testing.T, ip, addr string) *net.TCPConn {
	t.Helper()
	d := net.Dialer{Timeout: nettest.WaitBound, LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

// refusedAtOnce checks that the master closed c well before the handshake
// timeout, which would close a connection that merely said too little.
// What the master sent before it closed (its side of a handshake) is read
// and dropped.
func refusedAtOnce(t *testing.T, c net.Conn, what string) {
	t.Helper()
	start := time.Now()
	if err := c.SetReadDeadline(start.Add(nettest.WaitBound)); err != nil {
		t.Fatal(err)
	}
	_, err := io.Copy(io.Discard, c)
	if el := time.Since(start); errors.Is(err, os.ErrDeadlineExceeded) || el > HandshakeTimeout/2 {
		t.Fatalf("%s: closed after %v (%v), by the handshake timeout or not at all rather than at once", what, el, err)
	}
}

// rpcsRefused checks that every RPC of a rogue peer failed, and not by
// running out of time: the master cut the peer off.
func rpcsRefused(t *testing.T, what string, results []rogueraft.Result) {
	t.Helper()
	for _, r := range results {
		var ne net.Error
		switch {
		case r.Err == nil:
			t.Errorf("%s: %s was answered", what, r.RPC)
		case errors.Is(r.Err, os.ErrDeadlineExceeded) || errors.As(r.Err, &ne) && ne.Timeout():
			t.Errorf("%s: %s timed out (%v), want the connection closed", what, r.RPC, r.Err)
		}
	}
}

// A Raft port keyed by a raft key refuses every peer that does not prove
// it holds the key, before Raft reads a byte of it: none comes out of
// Accept, each is closed at once, and each address is logged once. A
// master holding the key still gets through afterwards.
func TestStreamLayerRaftKeyRefuses(t *testing.T) {
	t.Parallel()
	ms := keyMasters(t)
	sl, log := newWatchedLayer(t, "127.0.0.1:0", ms.server[0], ms.client[0])
	accepted := acceptAll(t, sl)
	addr := sl.Addr().String()

	recorded := recordHandshake(t, addr, ms.client[1])
	nextConn(t, accepted)
	hello := recorded[:5+(int(recorded[3])<<8|int(recorded[4]))] // the first record: ClientHello

	_, wrongClient, err := pki.NewRaftKey().TLSConfigs()
	if err != nil {
		t.Fatal(err)
	}
	// A peer with the wrong key that does not check whom it talks to,
	// so that its proof reaches the master rather than stopping at its
	// own check of the master's.
	careless := wrongClient.Clone()
	careless.InsecureSkipVerify = true
	// A master of a CA, as careless.
	caMaster := caMasters(t).client[1].Clone()
	caMaster.InsecureSkipVerify, caMaster.VerifyConnection = true, nil

	attacks := []struct {
		name string
		do   func(t *testing.T, ip string)
	}{
		{"Raft RPCs without a handshake", func(t *testing.T, ip string) {
			p, err := rogueraft.New(ip, nil, nettest.WaitBound)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			rpcsRefused(t, "plain TCP", p.Attack(rogueraft.Target{Addr: addr, Term: 1000, Entry: []byte("x")}))
		}},
		{"Raft RPCs with the wrong key", func(t *testing.T, ip string) {
			p, err := rogueraft.New(ip, careless, nettest.WaitBound)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			rpcsRefused(t, "wrong key", p.Attack(rogueraft.Target{Addr: addr, Term: 1000, Entry: []byte("x")}))
		}},
		{"the wrong key, checking the master", func(t *testing.T, ip string) {
			raw := rawFrom(t, ip, addr)
			if err := tls.Client(raw, wrongClient).Handshake(); err == nil {
				t.Fatal("a peer with the wrong key took the master for one of its own")
			}
			// The peer gave up first; the master closes its end.
			refusedAtOnce(t, raw, "wrong key, checking the master")
		}},
		{"a master certificate of a CA", func(t *testing.T, ip string) {
			raw := rawFrom(t, ip, addr)
			// With TLS 1.3 the peer finishes its side first, and the
			// master's refusal follows.
			_ = tls.Client(raw, caMaster).Handshake()
			refusedAtOnce(t, raw, "CA certificate")
		}},
		{"truncated handshake", func(t *testing.T, ip string) {
			c := rawFrom(t, ip, addr)
			if _, err := c.Write(hello[:len(hello)/2]); err != nil {
				t.Fatal(err)
			}
			_ = c.CloseWrite()
			refusedAtOnce(t, c, "truncated handshake")
		}},
		{"replayed handshake", func(t *testing.T, ip string) {
			c := rawFrom(t, ip, addr)
			if _, err := c.Write(recorded); err != nil {
				t.Fatal(err)
			}
			// The master answers the replayed hello with a handshake of
			// its own; the recorded proof, made for another, fails.
			refusedAtOnce(t, c, "replayed handshake")
		}},
		{"self query without a handshake", func(t *testing.T, ip string) {
			c := rawFrom(t, ip, addr)
			if _, err := c.Write([]byte{selfQuery}); err != nil {
				t.Fatal(err)
			}
			_ = c.CloseWrite()
			refusedAtOnce(t, c, "self query")
		}},
	}
	for i, at := range attacks {
		ip := fmt.Sprintf("127.0.0.%d", 2+i)
		at.do(t, ip)
		select {
		case r := <-accepted:
			t.Fatalf("%s: Accept returned %v, %v", at.name, r.c, r.err)
		default:
		}
		lines := refusalLines(log)
		if len(lines) != i+1 || !strings.Contains(lines[i], "remote="+ip+" ") {
			t.Fatalf("%s: refusals logged %q, want a line for %s", at.name, lines, ip)
		}
	}

	m := newLayer(t, ms.server[1], ms.client[1])
	d, err := dialRaft(t, m, addr)
	if err != nil {
		t.Fatalf("master dial after refused peers: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	sameConn(t, nextConn(t, accepted), d)
}

// The acceptor logs a refused peer once per address, again once the
// address got through, and stops naming new ones at maxRefusalsLogged,
// saying so once.
func TestRefusalsLoggedOncePerAddress(t *testing.T) {
	log := &records{}
	r := newRefusals(slog.New(log))
	addr := func(i int) net.Addr {
		return &net.TCPAddr{IP: net.IPv4(10, byte(i>>16), byte(i>>8), byte(i)), Port: 40000 + i%1000}
	}
	why := errors.New("tls: bad certificate")
	for range 3 {
		r.add(addr(0), why)
	}
	waitRefusals(t, log, 1)
	r.forget(addr(0))
	r.add(addr(0), why)
	waitRefusals(t, log, 2)

	for i := 1; i < maxRefusalsLogged; i++ {
		r.add(addr(i), why)
		r.add(addr(i), why)
	}
	waitRefusals(t, log, maxRefusalsLogged+1)
	overflow := func() int {
		n := 0
		for _, l := range log.all() {
			if strings.HasPrefix(l, "refused Raft peers from more addresses") {
				n++
			}
		}
		return n
	}
	if n := overflow(); n != 0 {
		t.Fatalf("at the bound: %d overflow lines, want none", n)
	}
	r.add(addr(maxRefusalsLogged), why)
	r.add(addr(maxRefusalsLogged+1), why)
	waitRefusals(t, log, maxRefusalsLogged+1)
	if n := overflow(); n != 1 {
		t.Fatalf("past the bound: %d overflow lines, want 1", n)
	}
	r.forget(addr(1))
	r.add(addr(maxRefusalsLogged+2), why)
	waitRefusals(t, log, maxRefusalsLogged+2)
}
