package master

import (
	"crypto/tls"
	"fmt"
	"net/http"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/security/pki"
	"github.com/drover-project/drover/transport"
)

// tlsConfigs are the TLS configs one master needs, all built from its
// pki.Files, or from its raft key when it runs without TLS; every field is
// nil when it has neither.
type tlsConfigs struct {
	// http serves the API: a client certificate is checked when given
	// (workers and masters present theirs) but not demanded, since
	// operators and drivers may come with a token alone.
	http *tls.Config
	// raftServer and raftClient admit master certificates only, or only
	// the raft key's.
	raftServer, raftClient *tls.Config
	// peer dials other masters (forwarding, uploads) and worker dials
	// workers; both present this master's certificate and verify the
	// other side's role (a worker's ID is checked per request, against
	// the worker meant: service's workerLog).
	peer, worker *tls.Config
}

// newTLSConfigs builds the configs of master id from f, or, with a raft
// key, the Raft port's from the key alone. The certificate must be a
// master's, and when it names a master, id's; one that names none (made
// before certificates named nodes) is used with warning, one line to log
// saying how to reissue it.
func newTLSConfigs(f pki.Files, key *pki.RaftKey, id string) (c tlsConfigs, warning string, err error) {
	if key != nil {
		c.raftServer, c.raftClient, err = key.TLSConfigs()
		return c, "", err
	}
	if !f.Enabled() {
		return c, "", nil
	}
	bound, err := f.CheckNode(pki.RoleMaster, id)
	if err != nil {
		return c, "", err
	}
	if !bound {
		warning = fmt.Sprintf("TLS certificate %s names no master; reissue it with drover tls cert --role master --name %s", f.Cert, id)
	}
	if c.http, err = f.ServerConfig(tls.VerifyClientCertIfGiven); err != nil {
		return c, "", err
	}
	if c.raftServer, err = f.ServerConfig(tls.RequireAndVerifyClientCert, pki.RoleMaster); err != nil {
		return c, "", err
	}
	if c.peer, err = f.ClientConfig(pki.RoleMaster); err != nil {
		return c, "", err
	}
	c.raftClient = c.peer
	c.worker, err = f.ClientConfig(pki.RoleWorker)
	return c, warning, err
}

// peerClient is the HTTP client this master calls other masters with
// (forwarding, uploads' pushes and pulls). It proves this master to them
// as auth.Guard recognises one: with TLS its certificate does, presented
// in every handshake; without, key's credential, set on every request.
func peerClient(bindIP string, tc tlsConfigs, key *pki.RaftKey) *http.Client {
	hc := transport.NewHTTPClient(bindIP, 0, tc.peer)
	if key != nil {
		hc.Transport = presenting{next: hc.Transport, credential: key.Credential()}
	}
	return hc
}

// presenting sets api.HeaderMasterCredential on every request it carries.
type presenting struct {
	next       http.RoundTripper
	credential string
}

// RoundTrip implements http.RoundTripper on a copy of r, which a
// RoundTripper may not change.
func (p presenting) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(api.HeaderMasterCredential, p.credential)
	return p.next.RoundTrip(r)
}

// scheme is the URL scheme of every node's HTTP listener: a cluster is
// either all TLS or all plain.
func (m *Master) scheme() string {
	if m.tls.http != nil {
		return "https"
	}
	return "http"
}
