package master

import (
	"crypto/tls"
	"net"
	"net/http"
	"sync"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/pki"
)

// tlsConfigs are the TLS configs one master needs, all built from its
// pki.Files; every field is nil when TLS is off.
type tlsConfigs struct {
	// http serves the API: a client certificate is checked when given
	// (workers and masters present theirs) but not demanded, since
	// operators and drivers may come with a token alone.
	http *tls.Config
	// raftServer admits master certificates only.
	raftServer *tls.Config
	// peer dials other masters (Raft, forwarding) and worker dials
	// workers; both present this master's certificate and verify the
	// other side's role.
	peer, worker *tls.Config
}

func newTLSConfigs(f pki.Files) (tlsConfigs, error) {
	if !f.Enabled() {
		return tlsConfigs{}, nil
	}
	var c tlsConfigs
	if err := f.CheckRole(pki.RoleMaster); err != nil {
		return c, err
	}
	var err error
	if c.http, err = f.ServerConfig(tls.VerifyClientCertIfGiven); err != nil {
		return c, err
	}
	if c.raftServer, err = f.ServerConfig(tls.RequireAndVerifyClientCert, pki.RoleMaster); err != nil {
		return c, err
	}
	if c.peer, err = f.ClientConfig(pki.RoleMaster); err != nil {
		return c, err
	}
	c.worker, err = f.ClientConfig(pki.RoleWorker)
	return c, err
}

// scheme is the URL scheme of every node's HTTP listener: a cluster is
// either all TLS or all plain.
func (m *Master) scheme() string {
	if m.tls.http != nil {
		return "https"
	}
	return "http"
}

// forwardedByPeer reports whether r may carry api.HeaderForwarded: with
// TLS only a master certificate may set it, since it exempts a request
// from the per-client bounds that the forwarding master already applied.
func (m *Master) forwardedByPeer(r *http.Request) bool {
	if r.Header.Get(api.HeaderForwarded) == "" {
		return false
	}
	if m.tls.http == nil {
		return true
	}
	role, _ := pki.PeerRole(r.TLS)
	return role == pki.RoleMaster
}

// limitSubmits answers 429 when the caller's IP already has
// cfg.MaxSubmitsPerClient submissions in flight on this master. Requests
// forwarded by another master were counted there.
func (m *Master) limitSubmits(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(api.HeaderForwarded) != "" {
			h(w, r)
			return
		}
		ip, _, _ := net.SplitHostPort(r.RemoteAddr)
		if !m.submitting.acquire(ip) {
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusTooManyRequests, "too many submissions in flight from this client; retry shortly")
			return
		}
		defer m.submitting.release(ip)
		h(w, r)
	}
}

// inflight counts requests in flight per key, up to max each.
type inflight struct {
	max int
	mu  sync.Mutex
	n   map[string]int
}

func newInflight(max int) *inflight { return &inflight{max: max, n: map[string]int{}} }

func (l *inflight) acquire(key string) bool {
	if l.max <= 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[key] >= l.max {
		return false
	}
	l.n[key]++
	return true
}

func (l *inflight) release(key string) {
	if l.max <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[key]--; l.n[key] <= 0 {
		delete(l.n, key)
	}
}
