package transport

import (
	"net"
	"sync"
	"syscall"
)

// LimitPerIP wraps ln so that each remote IP holds at most max accepted
// connections at once; a connection beyond that is closed as soon as it is
// accepted, before any byte is read, so one client that opens thousands of
// idle or slow connections (slowloris) cannot crowd out the others. max <= 0
// returns ln unchanged. This is Consul's http_max_conns_per_client; the
// standard library's netutil.LimitListener bounds the total instead, which
// would let one client starve every other.
func LimitPerIP(ln net.Listener, max int) net.Listener { return LimitConns(ln, max, 0) }

// LimitConns is LimitPerIP with a bound on all connections as well: beyond
// total, every new connection is closed as it is accepted, so that clients
// spread over many addresses cannot use up the process's file descriptors,
// which Raft and gossip need too. total <= 0 means no overall bound.
func LimitConns(ln net.Listener, perIP, total int) net.Listener {
	if perIP <= 0 && total <= 0 {
		return ln
	}
	return &perIPListener{Listener: ln, max: perIP, total: total, open: map[string]int{}}
}

// DefaultMaxConns is the overall bound for an HTTP listener: half the
// process's open-file limit (Go raises the soft limit to the hard one at
// start), leaving the rest to Raft, gossip, the stores and the runners.
func DefaultMaxConns() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur > 1<<30 {
		return 1 << 16
	}
	return max(int(lim.Cur/2), 512)
}

type perIPListener struct {
	net.Listener
	max, total int
	mu         sync.Mutex
	open       map[string]int
	all        int
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
		ok := (l.max <= 0 || l.open[ip] < l.max) && (l.total <= 0 || l.all < l.total)
		if ok {
			l.open[ip]++
			l.all++
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
	l.all--
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
