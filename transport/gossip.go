package transport

import (
	"net"
	"time"

	"github.com/hashicorp/memberlist"
)

// GossipTransport is memberlist's NetTransport with outbound TCP (push/pull
// and fallback probes) dialed from the bind address; UDP already leaves from
// the bound socket.
type GossipTransport struct {
	*memberlist.NetTransport
	bindIP string
}

// NewGossipTransport binds memberlist's TCP and UDP listeners on bindIP:port.
func NewGossipTransport(bindIP string, port int, cfg *memberlist.NetTransportConfig) (*GossipTransport, error) {
	c := *cfg
	c.BindAddrs = []string{bindIP}
	c.BindPort = port
	nt, err := memberlist.NewNetTransport(&c)
	if err != nil {
		return nil, err
	}
	return &GossipTransport{NetTransport: nt, bindIP: bindIP}, nil
}

// DialTimeout implements memberlist.Transport.
func (t *GossipTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return Dialer(t.bindIP, timeout).Dial("tcp", addr)
}

// DialAddressTimeout implements memberlist.NodeAwareTransport.
func (t *GossipTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	return t.DialTimeout(a.Addr, timeout)
}
