// Package rogueraft is a Raft peer that is no master of the cluster it
// talks to, for tests that check a master's Raft port keeps it out: it
// sends the RPCs of hashicorp/raft's own NetworkTransport, over plain TCP
// or a TLS config of the test's choosing, from a loopback address of its
// own.
package rogueraft

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// Peer sends Raft RPCs as a peer would that a cluster never admitted.
type Peer struct {
	trans *raft.NetworkTransport
}

// New starts a peer listening on bindIP, which is also the source of its
// connections. With tlsConf nil it speaks plain TCP, as hashicorp/raft's
// TCPTransport does; otherwise it dials with tlsConf. timeout bounds each
// RPC's I/O, so an RPC a master neither answers nor refuses fails as a
// timeout.
func New(bindIP string, tlsConf *tls.Config, timeout time.Duration) (*Peer, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(bindIP, "0"))
	if err != nil {
		return nil, err
	}
	layer := &streams{Listener: ln, dialer: &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(bindIP)}}, tls: tlsConf}
	return &Peer{trans: raft.NewNetworkTransport(layer, 1, timeout, io.Discard)}, nil
}

// Close stops the peer.
func (p *Peer) Close() error { return p.trans.Close() }

// Target is the master to attack and what the attack claims: a term, and
// the index and term of the entry before the one it appends. Given a
// master's own last entry and a term above its own, a master that read
// the RPCs would take the entry, commit it and follow the peer.
type Target struct {
	Addr                string
	Term                uint64
	PrevIndex, PrevTerm uint64
	// Entry is the command the appended entry carries.
	Entry []byte
}

// Result is the outcome of one RPC: its name, and its error (nil when the
// master answered).
type Result struct {
	RPC string
	Err error
}

// Attack sends t's master an AppendEntries carrying t.Entry and committing
// it, a RequestVote and an InstallSnapshot, all at t.Term, and reports
// how each went.
func (p *Peer) Attack(t Target) []Result {
	addr := raft.ServerAddress(t.Addr)
	header := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("rogue"), Addr: []byte(p.trans.LocalAddr())}
	var out []Result
	var ae raft.AppendEntriesResponse
	out = append(out, Result{"AppendEntries", p.trans.AppendEntries("", addr, &raft.AppendEntriesRequest{
		RPCHeader: header, Term: t.Term, PrevLogEntry: t.PrevIndex, PrevLogTerm: t.PrevTerm,
		Entries:           []*raft.Log{{Index: t.PrevIndex + 1, Term: t.Term, Type: raft.LogCommand, Data: t.Entry}},
		LeaderCommitIndex: t.PrevIndex + 1,
	}, &ae)})
	var rv raft.RequestVoteResponse
	out = append(out, Result{"RequestVote", p.trans.RequestVote("", addr, &raft.RequestVoteRequest{
		RPCHeader: header, Term: t.Term, LastLogIndex: t.PrevIndex + 1, LastLogTerm: t.Term,
	}, &rv)})
	var is raft.InstallSnapshotResponse
	snapshot := []byte("not a snapshot a master could restore")
	out = append(out, Result{"InstallSnapshot", p.trans.InstallSnapshot("", addr, &raft.InstallSnapshotRequest{
		RPCHeader: header, SnapshotVersion: raft.SnapshotVersionMax, Term: t.Term,
		LastLogIndex: t.PrevIndex + 1, LastLogTerm: t.Term, Size: int64(len(snapshot)),
	}, &is, bytes.NewReader(snapshot))})
	return out
}

// streams is the peer's raft.StreamLayer.
type streams struct {
	net.Listener
	dialer *net.Dialer
	tls    *tls.Config
}

// Dial implements raft.StreamLayer.
func (s *streams) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := *s.dialer
	d.Timeout = timeout
	if s.tls == nil {
		return d.Dial("tcp", string(address))
	}
	c, err := (&tls.Dialer{NetDialer: &d, Config: s.tls}).Dial("tcp", string(address))
	if err != nil {
		return nil, fmt.Errorf("TLS handshake: %w", err)
	}
	return c, nil
}
