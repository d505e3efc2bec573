package raftnet

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/drover-project/drover/security/pki"
	"github.com/drover-project/drover/tests/nettest"
)

// tlsNodes holds the TLS configurations of a cluster CA's nodes, built the
// way masters build theirs.
type tlsNodes struct {
	// masterServer and masterClient are the Raft configs of two masters.
	masterServer, masterClient [2]*tls.Config
	workerServer, workerClient *tls.Config
	// strangerClient presents a master certificate of another CA while
	// trusting this cluster's CA, so only the server's check can stop it.
	strangerClient *tls.Config
}

func newTLSNodes(t *testing.T) tlsNodes {
	t.Helper()
	dir := t.TempDir()
	caPEM, caKey, err := pki.NewCA("raft test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caPath, _, err := pki.WriteFiles(dir, "ca", caPEM, caKey)
	if err != nil {
		t.Fatal(err)
	}
	files := func(name string, caPEM, caKey []byte, role pki.Role) pki.Files {
		certPEM, keyPEM, err := pki.Issue(caPEM, caKey, role, name, []string{"127.0.0.1"}, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		cert, key, err := pki.WriteFiles(dir, name, certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return pki.Files{CA: caPath, Cert: cert, Key: key}
	}
	// Same calls as master/security.go makes for Raft.
	configs := func(f pki.Files) (server, client *tls.Config) {
		server, err := f.ServerConfig(tls.RequireAndVerifyClientCert, pki.RoleMaster)
		if err != nil {
			t.Fatal(err)
		}
		client, err = f.ClientConfig(pki.RoleMaster)
		if err != nil {
			t.Fatal(err)
		}
		return server, client
	}

	var n tlsNodes
	for i, name := range []string{"master1", "master2"} {
		n.masterServer[i], n.masterClient[i] = configs(files(name, caPEM, caKey, pki.RoleMaster))
	}
	n.workerServer, n.workerClient = configs(files("worker", caPEM, caKey, pki.RoleWorker))

	otherPEM, otherKey, err := pki.NewCA("another CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	stranger := files("stranger", otherPEM, otherKey, pki.RoleMaster)
	pair, err := tls.LoadX509KeyPair(stranger.Cert, stranger.Key)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("CA PEM not added")
	}
	n.strangerClient = &tls.Config{
		MinVersion:   tls.VersionTLS12,
		RootCAs:      roots,
		ServerName:   pki.RoleMaster.ServerName(),
		Certificates: []tls.Certificate{pair},
	}
	return n
}

// noSelf is the Self of a layer no test asks.
func noSelf() Self { return Self{} }

func newLayer(t *testing.T, server, client *tls.Config) *StreamLayer {
	t.Helper()
	sl, _ := newWatchedLayer(t, "127.0.0.1:0", server, client)
	return sl
}

// newWatchedLayer is newLayer on bind, with the records the layer logs.
func newWatchedLayer(t *testing.T, bind string, server, client *tls.Config) (*StreamLayer, *records) {
	t.Helper()
	log := &records{}
	sl, err := NewStreamLayer(bind, server, client, noSelf, slog.New(log))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sl.Close() })
	return sl, log
}

// records is a slog.Handler that keeps every record's message and
// attributes as one line each.
type records struct {
	mu    sync.Mutex
	lines []string
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }

func (r *records) Handle(_ context.Context, rec slog.Record) error {
	line := rec.Message
	rec.Attrs(func(a slog.Attr) bool {
		line += " " + a.String()
		return true
	})
	r.mu.Lock()
	r.lines = append(r.lines, line)
	r.mu.Unlock()
	return nil
}

// all returns the lines logged so far.
func (r *records) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.lines)
}

type acceptResult struct {
	c   net.Conn
	err error
}

// acceptAll runs Accept on sl until it fails and reports every result,
// the error last; the channel is closed then.
func acceptAll(t *testing.T, sl *StreamLayer) <-chan acceptResult {
	ch := make(chan acceptResult, 16)
	go func() {
		defer close(ch)
		for {
			c, err := sl.Accept()
			ch <- acceptResult{c, err}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		sl.Close()
		for r := range ch {
			if r.c != nil {
				r.c.Close()
			}
		}
	})
	return ch
}

// rpcByte is the first byte a Raft connection carries, as hashicorp/raft
// writes it: an RPC type (rpcAppendEntries).
const rpcByte = 0

// dialRaft dials addr from l as Raft does, writing an RPC's first byte.
func dialRaft(t *testing.T, l *StreamLayer, addr string) (net.Conn, error) {
	t.Helper()
	d, err := l.Dial(raft.ServerAddress(addr), nettest.WaitBound)
	if err != nil {
		return nil, err
	}
	if _, err := d.Write([]byte{rpcByte}); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// nextConn returns the next connection sl handed over, and checks that
// Raft reads the first byte the dialer sent.
func nextConn(t *testing.T, results <-chan acceptResult) net.Conn {
	t.Helper()
	select {
	case r := <-results:
		if r.err != nil {
			t.Fatalf("Accept: %v", r.err)
		}
		t.Cleanup(func() { r.c.Close() })
		var first [1]byte
		if _, err := io.ReadFull(r.c, first[:]); err != nil || first[0] != rpcByte {
			t.Fatalf("first byte of the accepted connection: %v %v, want %d", first, err, rpcByte)
		}
		return r.c
	case <-time.After(nettest.WaitBound):
		t.Fatal("Accept returned no connection")
	}
	return nil
}

// sameConn checks that the accepted end a and the dialed end d are one
// connection, which proves Accept handed over d and nothing else.
func sameConn(t *testing.T, a, d net.Conn) {
	t.Helper()
	if a.RemoteAddr().String() != d.LocalAddr().String() {
		t.Fatalf("Accept returned the connection from %s, want the one from %s", a.RemoteAddr(), d.LocalAddr())
	}
}

// exchange sends a message each way between two ends of a connection.
func exchange(t *testing.T, a, b net.Conn) {
	t.Helper()
	for _, p := range [][2]net.Conn{{a, b}, {b, a}} {
		from, to := p[0], p[1]
		msg := []byte("append entries from " + from.LocalAddr().String())
		errc := make(chan error, 1)
		go func() {
			_, err := from.Write(msg)
			errc <- err
		}()
		if err := to.SetReadDeadline(time.Now().Add(nettest.WaitBound)); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(to, got); err != nil {
			t.Fatalf("read: %v", err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("write: %v", err)
		}
		if !bytes.Equal(got, msg) {
			t.Fatalf("read %q, want %q", got, msg)
		}
	}
}

func peerRole(t *testing.T, c net.Conn) pki.Role {
	t.Helper()
	if r, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = r.NetConn()
	}
	tc, ok := c.(*tls.Conn)
	if !ok {
		t.Fatalf("accepted a %T, want a *tls.Conn", c)
	}
	cs := tc.ConnectionState()
	r, _ := pki.PeerRole(&cs)
	return r
}

func TestStreamLayerNeedsBothTLSConfigs(t *testing.T) {
	n := newTLSNodes(t)
	for _, c := range [][2]*tls.Config{{n.masterServer[0], nil}, {nil, n.masterClient[0]}} {
		if sl, err := NewStreamLayer("127.0.0.1:0", c[0], c[1], noSelf, slog.New(slog.DiscardHandler)); err == nil {
			sl.Close()
			t.Errorf("NewStreamLayer with server %v, client %v: no error", c[0] != nil, c[1] != nil)
		}
	}
}

func TestStreamLayerTLSMasters(t *testing.T) {
	t.Parallel()
	n := newTLSNodes(t)
	layers := [2]*StreamLayer{
		newLayer(t, n.masterServer[0], n.masterClient[0]),
		newLayer(t, n.masterServer[1], n.masterClient[1]),
	}
	accepted := [2]<-chan acceptResult{acceptAll(t, layers[0]), acceptAll(t, layers[1])}
	for _, dir := range [][2]int{{0, 1}, {1, 0}} {
		from, to := dir[0], dir[1]
		d, err := dialRaft(t, layers[from], layers[to].Addr().String())
		if err != nil {
			t.Fatalf("master %d dialing master %d: %v", from, to, err)
		}
		t.Cleanup(func() { d.Close() })
		a := nextConn(t, accepted[to])
		sameConn(t, a, d)
		if r := peerRole(t, a); r != pki.RoleMaster {
			t.Fatalf("accepted peer role %q, want master", r)
		}
		exchange(t, d, a)
	}
}

// A peer without a master certificate of this CA is refused: it never
// comes out of Accept, and its connection is closed.
func TestStreamLayerTLSRefusesNonMasters(t *testing.T) {
	t.Parallel()
	n := newTLSNodes(t)
	sl := newLayer(t, n.masterServer[0], n.masterClient[0])
	accepted := acceptAll(t, sl)
	addr := sl.Addr().String()
	worker := newLayer(t, n.workerServer, n.workerClient)

	for _, tc := range []struct {
		name string
		dial func() (net.Conn, error)
	}{
		{"worker certificate", func() (net.Conn, error) {
			return worker.Dial(raft.ServerAddress(addr), nettest.WaitBound)
		}},
		{"certificate of another CA", func() (net.Conn, error) {
			d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: nettest.WaitBound}, Config: n.strangerClient}
			return d.Dial("tcp", addr)
		}},
	} {
		c, err := tc.dial()
		if err == nil {
			// With TLS 1.3 the client finishes its side first and
			// hears of the refusal on its first read.
			t.Cleanup(func() { c.Close() })
			nettest.ClosedByPeer(t, c, tc.name)
		}
		select {
		case r := <-accepted:
			t.Fatalf("%s: Accept returned %v, %v", tc.name, r.c, r.err)
		default:
		}
	}

	// The refused handshakes finished before the dials above returned,
	// so the next connection out of Accept is this one.
	m := newLayer(t, n.masterServer[1], n.masterClient[1])
	d, err := dialRaft(t, m, addr)
	if err != nil {
		t.Fatalf("master dial after refused peers: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	sameConn(t, nextConn(t, accepted), d)
}

// masters are the Raft TLS configs of two masters of one cluster.
type masters struct{ server, client [2]*tls.Config }

// caMasters are two masters with certificates of one CA.
func caMasters(t *testing.T) masters {
	n := newTLSNodes(t)
	return masters{n.masterServer, n.masterClient}
}

// keyMasters are two masters holding one raft key, each with the configs
// it makes of it.
func keyMasters(t *testing.T) masters {
	key := pki.NewRaftKey()
	var m masters
	for i := range 2 {
		var err error
		if m.server[i], m.client[i], err = key.TLSConfigs(); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// clusterKinds are the two ways masters prove themselves on the Raft port.
var clusterKinds = []struct {
	name    string
	masters func(*testing.T) masters
}{{"CA certificates", caMasters}, {"raft key", keyMasters}}

// layerWithSilentClient starts the stream layer of the first of ms,
// accepting everything, and a plain TCP client connected to it that never
// speaks; it returns the layer's log too.
func layerWithSilentClient(t *testing.T, ms masters) (*StreamLayer, *records, <-chan acceptResult, net.Conn) {
	t.Helper()
	sl, log := newWatchedLayer(t, "127.0.0.1:0", ms.server[0], ms.client[0])
	accepted := acceptAll(t, sl)
	silent, err := net.DialTimeout("tcp", sl.Addr().String(), nettest.WaitBound)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	return sl, log, accepted, silent
}

// A client that connects and never speaks is dropped after
// HandshakeTimeout, and meanwhile others still get through; the drop is
// logged.
func TestStreamLayerTLSSilentClient(t *testing.T) {
	t.Parallel()
	for _, kind := range clusterKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			silentClientDropped(t, kind.masters(t))
		})
	}
}

func silentClientDropped(t *testing.T, ms masters) {
	sl, log, accepted, silent := layerWithSilentClient(t, ms)
	addr := sl.Addr().String()
	start := time.Now()

	m := newLayer(t, ms.server[1], ms.client[1])
	d, err := dialRaft(t, m, addr)
	if err != nil {
		t.Fatalf("master dial beside a silent client: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	a := nextConn(t, accepted)
	sameConn(t, a, d)
	exchange(t, d, a)

	// Had Accept waited out the silent handshake first, the server would
	// have closed the silent connection by now; a short read shows it is
	// still open, so the master got through while it was pending.
	if err := silent.SetReadDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := silent.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("silent client: read %v, want it still open while the master got through", err)
	}

	if err := silent.SetReadDeadline(start.Add(HandshakeTimeout + 2*time.Second)); err != nil {
		t.Fatal(err)
	}
	_, err = silent.Read(make([]byte, 1))
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("silent client: read %v after %v, want the server to have closed it", err, time.Since(start))
	}
	if el := time.Since(start); el < HandshakeTimeout-time.Second {
		t.Fatalf("silent client closed after %v, before the handshake timeout %v", el, HandshakeTimeout)
	}
	waitRefusals(t, log, 1)
}

// stalledConn lets a TLS client send its hello and read the server's
// answer, then holds its next writes until release is closed, so a test
// can act while the server is mid-handshake.
type stalledConn struct {
	net.Conn
	answered chan struct{} // closed once the server has sent something
	release  chan struct{}
	once     sync.Once
	mu       sync.Mutex
	writes   int
}

func (c *stalledConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.once.Do(func() { close(c.answered) })
	}
	return n, err
}

func (c *stalledConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.writes++
	first := c.writes == 1
	c.mu.Unlock()
	if !first {
		<-c.release
	}
	return c.Conn.Write(p)
}

func TestStreamLayerTLSCloseWithHandshakesInFlight(t *testing.T) {
	t.Parallel()
	// A handshake that is only stuck in its first step.
	ms := caMasters(t)
	sl, _, accepted, _ := layerWithSilentClient(t, ms)
	addr := sl.Addr().String()

	// A legitimate master's handshake that the server has started
	// but that only completes after Close.
	raw, err := net.DialTimeout("tcp", addr, nettest.WaitBound)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	stalled := &stalledConn{Conn: raw, answered: make(chan struct{}), release: make(chan struct{})}
	client := tls.Client(stalled, ms.client[1])
	handshake := make(chan error, 1)
	go func() { handshake <- client.Handshake() }()
	select {
	case <-stalled.answered:
	case err := <-handshake:
		t.Fatalf("handshake ended before the server answered: %v", err)
	case <-time.After(nettest.WaitBound):
		t.Fatal("server never answered the client hello")
	}

	if err := sl.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case r := <-accepted:
		if r.err == nil {
			t.Fatalf("Accept returned a connection from %s after Close", r.c.RemoteAddr())
		}
	case <-time.After(nettest.WaitBound):
		t.Fatal("Accept still blocked after Close")
	}
	if c, err := sl.Accept(); err == nil {
		t.Fatalf("Accept after Close returned a connection from %s", c.RemoteAddr())
	}

	// The server finishes this handshake with nobody left to take the
	// connection, so it must close it rather than block for ever.
	close(stalled.release)
	if err := <-handshake; err != nil {
		// The server dropped the connection mid-handshake, which frees
		// it just as well.
		return
	}
	t.Cleanup(func() { client.Close() })
	if _, err := client.Write([]byte{rpcByte}); err != nil {
		return
	}
	nettest.ClosedByPeer(t, client, "connection whose handshake completed after Close")
}

// The Raft port answers who the master is, over TLS to masters only, and
// the connection that asked never reaches Raft.
func TestStreamLayerAnswersSelf(t *testing.T) {
	t.Parallel()
	n := newTLSNodes(t)
	want := Self{ID: "m1", HTTP: "127.0.0.1:7102", Gossip: "127.0.0.1:7103"}
	sl, err := NewStreamLayer("127.0.0.1:0", n.masterServer[0], n.masterClient[0], func() Self { return want }, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	accepted := acceptAll(t, sl)
	m := newLayer(t, n.masterServer[1], n.masterClient[1])
	got, err := m.Ask(sl.Addr().String(), nettest.WaitBound)
	if err != nil || got != want {
		t.Fatalf("Ask = %+v, %v; want %+v", got, err, want)
	}
	worker := newLayer(t, n.workerServer, n.workerClient)
	if got, err := worker.Ask(sl.Addr().String(), nettest.WaitBound); err == nil {
		t.Fatalf("a worker certificate was answered: %+v", got)
	}
	d, err := dialRaft(t, m, sl.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	sameConn(t, nextConn(t, accepted), d)
}
