// Package raftnet is the network layer of a master's Raft: a
// raft.StreamLayer over TCP or mutual TLS that listens on the master's bind
// address and dials from it. It is apart from package transport so that
// nothing but a master links hashicorp/raft.
package raftnet

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/drover-project/drover/transport"
)

// StreamLayer is a raft.StreamLayer over TCP, or over mutual TLS, that
// listens on one address and dials from the same IP.
type StreamLayer struct {
	net.Listener
	bindIP    string
	advertise net.Addr
	client    *tls.Config
}

// HandshakeTimeout bounds a TLS handshake on a Raft or HTTP connection, so
// a peer that connects and says nothing holds no goroutine for long.
const HandshakeTimeout = 5 * time.Second

// NewStreamLayer listens on bindAddr (host:port). The host is also the
// source address of every outbound Raft connection. With server and client
// TLS configs (package pki: both demand a master certificate), every
// connection in either direction is mutual TLS; nil for both is plain TCP.
func NewStreamLayer(bindAddr string, server, client *tls.Config) (*StreamLayer, error) {
	if (server == nil) != (client == nil) {
		return nil, errors.New("raft stream layer: TLS needs both a server and a client config")
	}
	host, _, err := net.SplitHostPort(bindAddr)
	if err != nil {
		return nil, fmt.Errorf("raft bind address %q: %w", bindAddr, err)
	}
	ln, err := net.Listen("tcp", bindAddr)
	if err != nil {
		return nil, fmt.Errorf("raft listen: %w", err)
	}
	advertise := ln.Addr()
	if server != nil {
		ln = &handshakeListener{Listener: ln, config: server}
	}
	return &StreamLayer{Listener: ln, bindIP: host, advertise: advertise, client: client}, nil
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

// handshakeListener wraps accepted connections in TLS and completes each
// handshake, under HandshakeTimeout, before handing the connection on:
// hashicorp/raft reads a connection without a deadline, so a silent client
// would otherwise hold it for ever. Each handshake runs in its own
// goroutine, so one slow client does not stall the others.
type handshakeListener struct {
	net.Listener
	config *tls.Config
	once   sync.Once
	conns  chan net.Conn
	done   chan struct{} // closed when the listener fails; err says why
	err    error
}

func (l *handshakeListener) start() {
	l.conns, l.done = make(chan net.Conn), make(chan struct{})
	go func() {
		for {
			c, err := l.Listener.Accept()
			if err != nil {
				l.err = err
				close(l.done)
				return
			}
			go l.handshake(c)
		}
	}()
}

func (l *handshakeListener) handshake(c net.Conn) {
	tc := tls.Server(c, l.config)
	_ = tc.SetDeadline(time.Now().Add(HandshakeTimeout))
	if err := tc.Handshake(); err != nil {
		_ = c.Close()
		return
	}
	_ = tc.SetDeadline(time.Time{})
	select {
	case l.conns <- tc:
	case <-l.done:
		_ = tc.Close()
	}
}

// Accept returns the next connection whose handshake succeeded.
func (l *handshakeListener) Accept() (net.Conn, error) {
	l.once.Do(l.start)
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, l.err
	}
}

// NewRaftTransport returns a raft.NetworkTransport over a StreamLayer on
// bindAddr, with TLS when server and client are set (see NewStreamLayer).
// timeout bounds each RPC's I/O; logs go to logOutput.
func NewRaftTransport(bindAddr string, timeout time.Duration, logOutput io.Writer, server, client *tls.Config) (*raft.NetworkTransport, error) {
	sl, err := NewStreamLayer(bindAddr, server, client)
	if err != nil {
		return nil, err
	}
	if logOutput == nil {
		return nil, errors.New("raft transport: nil log output")
	}
	return raft.NewNetworkTransport(sl, 3, timeout, logOutput), nil
}
