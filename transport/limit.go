package transport

import (
	"net"
	"sync"
	"syscall"
)

// ConnLimit bounds the connections of the listeners it wraps, together:
// each remote IP may hold at most perIP at once, and all of them at most
// total. A connection beyond either bound is closed as soon as it is
// accepted, before any byte is read. The per-IP bound is Consul's
// http_max_conns_per_client: one client that opens thousands of idle or
// slow connections (slowloris) cannot crowd out the others, which the
// standard library's netutil.LimitListener, bounding the total alone,
// would let it do. The total keeps clients spread over many addresses from
// using up the process's file descriptors, which Raft and gossip need too.
// A bound <= 0 is no bound.
type ConnLimit struct {
	perIP, total int
	mu           sync.Mutex
	open         map[string]int
	all          int
}

// NewConnLimit returns a ConnLimit with the given bounds.
func NewConnLimit(perIP, total int) *ConnLimit {
	return &ConnLimit{perIP: perIP, total: total, open: map[string]int{}}
}

// LimitConns wraps ln alone in a new ConnLimit.
func LimitConns(ln net.Listener, perIP, total int) net.Listener {
	return NewConnLimit(perIP, total).Wrap(ln)
}

// Wrap returns ln with its connections counted against c; with no bound at
// all, ln itself.
func (c *ConnLimit) Wrap(ln net.Listener) net.Listener {
	if c.perIP <= 0 && c.total <= 0 {
		return ln
	}
	return &limitedListener{Listener: ln, limit: c}
}

// DefaultMaxConns is the overall bound for a node's HTTP listeners: half
// the process's open-file limit (Go raises the soft limit to the hard one
// at start), leaving the rest to Raft, gossip, the stores and the runners.
func DefaultMaxConns() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur > 1<<30 {
		return 1 << 16
	}
	return max(int(lim.Cur/2), 512)
}

type limitedListener struct {
	net.Listener
	limit *ConnLimit
}

// Accept returns the next connection within the bounds.
func (l *limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := remoteIP(c)
		if !l.limit.acquire(ip) {
			_ = c.Close()
			continue
		}
		return &countedConn{Conn: c, release: func() { l.limit.release(ip) }}, nil
	}
}

func (c *ConnLimit) acquire(ip string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if (c.perIP > 0 && c.open[ip] >= c.perIP) || (c.total > 0 && c.all >= c.total) {
		return false
	}
	c.open[ip]++
	c.all++
	return true
}

func (c *ConnLimit) release(ip string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.all--
	if c.open[ip]--; c.open[ip] <= 0 {
		delete(c.open, ip)
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
