package gossip

import (
	"net"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/drover-project/drover/transport"
)

// netTransport is memberlist's NetTransport with outbound TCP (push/pull
// and fallback probes) dialed from the bind address; UDP already leaves from
// the bound socket.
type netTransport struct {
	*memberlist.NetTransport
	bindIP string
}

// newNetTransport binds memberlist's TCP and UDP listeners on bindIP:port.
func newNetTransport(bindIP string, port int, cfg *memberlist.NetTransportConfig) (*netTransport, error) {
	c := *cfg
	c.BindAddrs = []string{bindIP}
	c.BindPort = port
	nt, err := memberlist.NewNetTransport(&c)
	if err != nil {
		return nil, err
	}
	return &netTransport{NetTransport: nt, bindIP: bindIP}, nil
}

// DialTimeout implements memberlist.Transport.
func (t *netTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return transport.Dialer(t.bindIP, timeout).Dial("tcp", addr)
}

// DialAddressTimeout implements memberlist.NodeAwareTransport.
func (t *netTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	return t.DialTimeout(a.Addr, timeout)
}
