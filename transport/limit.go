package transport

import (
	"net"
	"sync"
)

// LimitPerIP wraps ln so that each remote IP holds at most max accepted
// connections at once; a connection beyond that is closed as soon as it is
// accepted, before any byte is read, so one client that opens thousands of
// idle or slow connections (slowloris) cannot crowd out the others. max <= 0
// returns ln unchanged. This is Consul's http_max_conns_per_client; the
// standard library's netutil.LimitListener bounds the total instead, which
// would let one client starve every other.
func LimitPerIP(ln net.Listener, max int) net.Listener {
	if max <= 0 {
		return ln
	}
	return &perIPListener{Listener: ln, max: max, open: map[string]int{}}
}

type perIPListener struct {
	net.Listener
	max  int
	mu   sync.Mutex
	open map[string]int
}

// Accept returns the next connection within its IP's bound.
func (l *perIPListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := remoteIP(c)
		l.mu.Lock()
		ok := l.open[ip] < l.max
		if ok {
			l.open[ip]++
		}
		l.mu.Unlock()
		if !ok {
			_ = c.Close()
			continue
		}
		return &countedConn{Conn: c, release: func() { l.release(ip) }}, nil
	}
}

func (l *perIPListener) release(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[ip]--; l.open[ip] <= 0 {
		delete(l.open, ip)
	}
}

func remoteIP(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
	return host
}

// countedConn gives its slot back once, on the first Close.
type countedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
