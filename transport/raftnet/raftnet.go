// Package raftnet is the network layer of a master's Raft: a
// raft.StreamLayer over TCP or mutual TLS that listens on the master's bind
// address and dials from it. It is apart from package transport so that
// nothing but a master links hashicorp/raft.
package raftnet

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/drover-project/drover/internal/warnonce"
	"github.com/drover-project/drover/transport"
)

// StreamLayer is a raft.StreamLayer over TCP, or over mutual TLS, that
// listens on one address and dials from the same IP. Its TLS is either the
// cluster CA's, with master certificates (package pki's Files), or that of
// a raft key (pki.RaftKey.TLSConfigs) for masters without TLS elsewhere;
// either way a peer that cannot prove it is a master is refused before
// hashicorp/raft reads a byte of it. The same port also
// answers a question Raft does not ask: who is this master (Self). A
// connection whose first byte is selfQuery gets the master's Self as JSON;
// every other connection is Raft's (its RPC types count from 0), so a
// master that knows a peer only by its Raft address, as the Raft
// configuration names it, can learn the peer's HTTP and gossip addresses
// (rqlite serves its cluster service on the Raft port the same way).
type StreamLayer struct {
	net.Listener
	bindIP    string
	advertise net.Addr
	client    *tls.Config
}

// Self is what a master says about itself on its Raft port.
type Self struct {
	ID     string `json:"id"`
	HTTP   string `json:"http"`
	Gossip string `json:"gossip"`
}

// selfQuery starts a question for Self; hashicorp/raft's RPC types are 0
// to 4.
const selfQuery byte = 'S'

// maxSelf bounds the answer to a selfQuery.
const maxSelf = 4 << 10

// HandshakeTimeout bounds a TLS handshake on a Raft or HTTP connection, and
// the wait for a Raft connection's first byte, so a peer that connects and
// says nothing holds no goroutine for long.
const HandshakeTimeout = 5 * time.Second

// NewStreamLayer listens on bindAddr (host:port). The host is also the
// source address of every outbound Raft connection. With server and client
// TLS configs (package pki: both demand a master certificate, or both the
// raft key's), every connection in either direction is mutual TLS; nil for
// both is plain TCP. self says what to answer a selfQuery. A peer whose
// TLS handshake fails is logged to log, once per address (see refusals).
func NewStreamLayer(bindAddr string, server, client *tls.Config, self func() Self, log *slog.Logger) (*StreamLayer, error) {
	if (server == nil) != (client == nil) {
		return nil, errors.New("raft stream layer: TLS needs both a server and a client config")
	}
	if log == nil {
		return nil, errors.New("raft stream layer: nil logger")
	}
	host, _, err := net.SplitHostPort(bindAddr)
	if err != nil {
		return nil, fmt.Errorf("raft bind address %q: %w", bindAddr, err)
	}
	ln, err := net.Listen("tcp", bindAddr)
	if err != nil {
		return nil, fmt.Errorf("raft listen: %w", err)
	}
	a := &acceptor{Listener: ln, config: server, self: self, refused: newRefusals(log)}
	return &StreamLayer{Listener: a, bindIP: host, advertise: ln.Addr(), client: client}, nil
}

// Dial implements raft.StreamLayer. Over TLS the handshake completes within
// timeout, so a peer that is not a master is refused here, not mid-RPC.
func (s *StreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := transport.Dialer(s.bindIP, timeout)
	if s.client == nil {
		return d.Dial("tcp", string(address))
	}
	return (&tls.Dialer{NetDialer: d, Config: s.client}).Dial("tcp", string(address))
}

// Addr implements net.Listener; it is the address peers use to reach us.
func (s *StreamLayer) Addr() net.Addr { return s.advertise }

// Ask asks the master at Raft address addr what it says about itself,
// within timeout, with this layer's TLS.
func (s *StreamLayer) Ask(addr string, timeout time.Duration) (Self, error) {
	c, err := s.Dial(raft.ServerAddress(addr), timeout)
	if err != nil {
		return Self{}, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte{selfQuery}); err != nil {
		return Self{}, err
	}
	var out Self
	if err := json.NewDecoder(io.LimitReader(c, maxSelf)).Decode(&out); err != nil {
		return Self{}, fmt.Errorf("answer of %s: %w", addr, err)
	}
	return out, nil
}

// acceptor completes each accepted connection's TLS handshake (when TLS is
// on) and reads its first byte, under HandshakeTimeout, before handing it
// on: hashicorp/raft reads a connection without a deadline, so a silent
// client would otherwise hold it for ever. Each connection is handled in
// its own goroutine, so one slow client does not stall the others. A
// selfQuery is answered here and never reaches Raft.
type acceptor struct {
	net.Listener
	config  *tls.Config
	self    func() Self
	refused refusals
	once    sync.Once
	conns   chan net.Conn
	done    chan struct{} // closed when the listener fails; err says why
	err     error
}

func (l *acceptor) start() {
	l.conns, l.done = make(chan net.Conn), make(chan struct{})
	go func() {
		for {
			c, err := l.Listener.Accept()
			if err != nil {
				l.err = err
				close(l.done)
				return
			}
			go l.handle(c)
		}
	}()
}

func (l *acceptor) handle(raw net.Conn) {
	c := raw
	_ = c.SetDeadline(time.Now().Add(HandshakeTimeout))
	if l.config != nil {
		tc := tls.Server(raw, l.config)
		if err := tc.Handshake(); err != nil {
			// Logged before the close, so a peer that sees its
			// connection closed finds the line written.
			l.refused.add(raw.RemoteAddr(), err)
			_ = raw.Close()
			return
		}
		l.refused.forget(raw.RemoteAddr())
		c = tc
	}
	var first [1]byte
	if _, err := io.ReadFull(c, first[:]); err != nil {
		_ = c.Close()
		return
	}
	if first[0] == selfQuery {
		_ = json.NewEncoder(c).Encode(l.self())
		_ = c.Close()
		return
	}
	_ = c.SetDeadline(time.Time{})
	select {
	case l.conns <- &replayConn{Conn: c, first: first[0], pending: true}:
	case <-l.done:
		_ = c.Close()
	}
}

// Accept returns the next Raft connection whose handshake succeeded.
func (l *acceptor) Accept() (net.Conn, error) {
	l.once.Do(l.start)
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, l.err
	}
}

// refusals logs the peers whose handshake failed, once per remote IP
// rather than once per connection, so that a scanner or a misconfigured
// master that retries for ever writes one line, not one a connection. An
// address is forgotten once a handshake from it succeeds, so that it is
// logged again should it fail later. At most maxRefusalsLogged addresses
// are kept; past them one line says that further ones go unlogged, so a
// scanner with many addresses can neither flood the log nor grow the set.
type refusals struct{ set *warnonce.Set }

// maxRefusalsLogged bounds the addresses refusals remembers.
const maxRefusalsLogged = 1024

func newRefusals(log *slog.Logger) refusals {
	return refusals{warnonce.New(log, maxRefusalsLogged, "refused Raft peers from more addresses than are logged; further ones are not logged")}
}

// add logs a refused peer at addr, unless it was logged already.
func (r refusals) add(addr net.Addr, why error) {
	ip := hostOf(addr)
	r.set.Warn(ip, "refused a Raft peer that did not prove it is a master of this cluster; later refusals from this address are not logged",
		"remote", ip, "err", why)
}

// forget drops addr, whose handshake succeeded.
func (r refusals) forget(addr net.Addr) { r.set.Forget(hostOf(addr)) }

// hostOf is the IP of a TCP address, the whole address otherwise.
func hostOf(addr net.Addr) string {
	if host, _, err := net.SplitHostPort(addr.String()); err == nil {
		return host
	}
	return addr.String()
}

// replayConn gives back the first byte the acceptor read before the rest.
type replayConn struct {
	net.Conn
	first   byte
	pending bool
}

// NetConn returns the connection underneath (for TLS, the *tls.Conn), as
// tls.Conn.NetConn does.
func (c *replayConn) NetConn() net.Conn { return c.Conn }

func (c *replayConn) Read(p []byte) (int, error) {
	if c.pending && len(p) > 0 {
		p[0], c.pending = c.first, false
		return 1, nil
	}
	return c.Conn.Read(p)
}

// NewRaftTransport returns a raft.NetworkTransport over sl. timeout bounds
// each RPC's I/O; logs go to logOutput.
func NewRaftTransport(sl *StreamLayer, timeout time.Duration, logOutput io.Writer) (*raft.NetworkTransport, error) {
	if logOutput == nil {
		return nil, errors.New("raft transport: nil log output")
	}
	return raft.NewNetworkTransport(sl, 3, timeout, logOutput), nil
}
