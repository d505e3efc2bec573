package transport

import (
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// StreamLayer is a raft.StreamLayer over plain TCP that listens on one
// address and dials from the same IP.
type StreamLayer struct {
	net.Listener
	bindIP    string
	advertise net.Addr
}

// NewStreamLayer listens on bindAddr (host:port). The host is also the
// source address of every outbound Raft connection.
func NewStreamLayer(bindAddr string) (*StreamLayer, error) {
	host, _, err := net.SplitHostPort(bindAddr)
	if err != nil {
		return nil, fmt.Errorf("raft bind address %q: %w", bindAddr, err)
	}
	ln, err := net.Listen("tcp", bindAddr)
	if err != nil {
		return nil, fmt.Errorf("raft listen: %w", err)
	}
	return &StreamLayer{Listener: ln, bindIP: host, advertise: ln.Addr()}, nil
}

// Dial implements raft.StreamLayer.
func (s *StreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return Dialer(s.bindIP, timeout).Dial("tcp", string(address))
}

// Addr implements net.Listener; it is the address peers use to reach us.
func (s *StreamLayer) Addr() net.Addr { return s.advertise }

// NewRaftTransport returns a raft.NetworkTransport over a StreamLayer on
// bindAddr. timeout bounds each RPC's I/O; logs go to logOutput.
func NewRaftTransport(bindAddr string, timeout time.Duration, logOutput io.Writer) (*raft.NetworkTransport, error) {
	sl, err := NewStreamLayer(bindAddr)
	if err != nil {
		return nil, err
	}
	if logOutput == nil {
		return nil, errors.New("raft transport: nil log output")
	}
	return raft.NewNetworkTransport(sl, 3, timeout, logOutput), nil
}
