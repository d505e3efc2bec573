// Package pki makes a cluster CA and the certificates of masters, workers
// and clients, and the TLS configurations that check them. A certificate's
// role is a DNS SAN, as Nomad and Consul do it ("master.drover" instead of
// "server.global.nomad"): a client that verifies a master by the name
// "master.drover" refuses a worker's certificate even though the same CA
// signed both, and a server reads the role of a verified client from the
// same SAN. A master's or worker's certificate also names the node's ID, in
// a URI SAN "drover://worker/w1" (SPIFFE's way of naming a workload in a
// URI SAN), so that a worker's key lets its holder act as that one worker
// only.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/drover-project/drover/model/ids"
)

// Role is what a certificate lets its holder be in the cluster.
type Role string

// The roles. Masters and workers both serve and dial; clients only dial.
const (
	RoleMaster Role = "master"
	RoleWorker Role = "worker"
	RoleClient Role = "client"
)

// roles lists the valid roles, in the order error messages name them.
var roles = []Role{RoleMaster, RoleWorker, RoleClient}

// domain is the DNS suffix of the role names. It is not a real zone: the
// names only ever meet the verifier, never a resolver.
const domain = ".drover"

// ParseRole returns the role named s: "master", "worker" or "client". Any
// other string is an error naming the valid ones.
func ParseRole(s string) (Role, error) {
	r := Role(s)
	if !r.valid() {
		return "", fmt.Errorf("unknown role %q (want master, worker or client)", s)
	}
	return r, nil
}

func (r Role) valid() bool { return slices.Contains(roles, r) }

// ServerName is the DNS SAN every certificate of role r carries:
// "master.drover", "worker.drover" or "client.drover", and "" for a string
// that is not a role. Clients verify a server by this name (tls.Config's
// ServerName), so a worker certificate can never pass for a master.
func (r Role) ServerName() string {
	if !r.valid() {
		return ""
	}
	return string(r) + domain
}

// clockSkew is how far back a new certificate's NotBefore is set, so a peer
// whose clock runs a little behind the issuer's accepts it at once.
const clockSkew = time.Minute

// NewCA makes a self-signed ECDSA P-256 CA certificate named commonName,
// valid from now (less a minute for clock skew) for validity, that can sign
// leaf certificates only (MaxPathLen 0). It returns the PEM-encoded
// certificate ("CERTIFICATE") and PKCS#8 private key ("PRIVATE KEY"). An
// empty commonName or a validity <= 0 is an error.
func NewCA(commonName string, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	if strings.TrimSpace(commonName) == "" {
		return nil, nil, errors.New("CA common name is empty")
	}
	if validity <= 0 {
		return nil, nil, fmt.Errorf("CA validity %v is not positive", validity)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
	}
	return sign(tmpl, tmpl, key, key)
}

// Issue signs a new ECDSA P-256 certificate of role with the CA (its
// PEM-encoded certificate and PKCS#8 key, as NewCA writes them), valid from
// now (less a minute for clock skew) for validity. Its subject is CN
// role.ServerName(), OU role; its SANs are role.ServerName(), "localhost"
// for masters and workers, and hosts (IP addresses become IP SANs, other
// strings DNS SANs). A master or worker certificate given an id also holds
// the URI SAN NodeURI(role, id), which binds it to that node (IDOf); "" binds
// it to none, as certificates made before IDs were. Masters and workers get
// ExtKeyUsage ServerAuth and ClientAuth, clients ClientAuth only. It
// returns the PEM-encoded certificate and PKCS#8 key.
//
// It is an error when role is not a role, id is given for a client or is
// not a valid ID of its role (ids.CheckMaster, ids.CheckWorker), validity
// <= 0, the certificate would outlive the CA, the key does not belong to
// the CA certificate, or a host would let the certificate pass for another
// role (another role's name, or a wildcard such as "*.drover" that matches
// one).
func Issue(caCertPEM, caKeyPEM []byte, role Role, id string, hosts []string, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	if validity <= 0 {
		return nil, nil, fmt.Errorf("certificate validity %v is not positive", validity)
	}
	now := time.Now()
	return issue(caCertPEM, caKeyPEM, role, id, hosts, now.Add(-clockSkew), now.Add(validity))
}

// issue is Issue with explicit validity bounds, so tests can make expired
// certificates.
func issue(caCertPEM, caKeyPEM []byte, role Role, id string, hosts []string, notBefore, notAfter time.Time) (certPEM, keyPEM []byte, err error) {
	if !role.valid() {
		return nil, nil, fmt.Errorf("unknown role %q (want master, worker or client)", role)
	}
	var uris []*url.URL
	if id != "" {
		if err := checkID(role, id); err != nil {
			return nil, nil, err
		}
		uris = []*url.URL{nodeURL(role, id)}
	}
	dnsNames, ips, err := sans(role, hosts)
	if err != nil {
		return nil, nil, err
	}
	ca, caKey, err := parseCA(caCertPEM, caKeyPEM)
	if err != nil {
		return nil, nil, err
	}
	if notAfter.After(ca.NotAfter) {
		// x509 verification checks every certificate of the chain, so
		// such a certificate would silently stop working when the CA
		// expires.
		return nil, nil, fmt.Errorf("certificate would expire %s, after the CA (%s): use a shorter validity or a new CA",
			notAfter.UTC().Format(time.RFC3339), ca.NotAfter.UTC().Format(time.RFC3339))
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	usage := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	if role == RoleClient {
		usage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			CommonName:         role.ServerName(),
			OrganizationalUnit: []string{string(role)},
		},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           usage,
		BasicConstraintsValid: true,
		DNSNames:              dnsNames,
		IPAddresses:           ips,
		URIs:                  uris,
	}
	return sign(tmpl, ca, key, caKey)
}

// sign makes the certificate tmpl for key, signed by parent's signer, and
// returns it and key PEM-encoded.
func sign(tmpl, parent *x509.Certificate, key *ecdsa.PrivateKey, signer crypto.Signer) (certPEM, keyPEM []byte, err error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signer)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

// sans returns the DNS and IP SANs of a certificate of role with extra
// hosts, without duplicates, refusing hosts that would let it pass for
// another role.
func sans(role Role, hosts []string) ([]string, []net.IP, error) {
	dnsNames := []string{role.ServerName()}
	if role != RoleClient {
		dnsNames = append(dnsNames, "localhost")
	}
	var ips []net.IP
	for _, h := range hosts {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		if ip := net.ParseIP(h); ip != nil {
			if !slices.ContainsFunc(ips, ip.Equal) {
				ips = append(ips, ip)
			}
			continue
		}
		if strings.ContainsAny(h, " :/@") {
			return nil, nil, fmt.Errorf("host %q is not a DNS name or an IP address (no ports or URLs)", h)
		}
		// Ask the verifier itself whether the name matches another
		// role's, so wildcards and letter case are judged exactly as a
		// Go client judges them; a trailing dot is refused too, since
		// RoleOf and other verifiers ignore it.
		probe := &x509.Certificate{DNSNames: []string{h}}
		for _, other := range roles {
			if other == role {
				continue
			}
			if probe.VerifyHostname(other.ServerName()) == nil || strings.EqualFold(strings.TrimSuffix(h, "."), other.ServerName()) {
				return nil, nil, fmt.Errorf("host %q would let a %s certificate pass for a %s", h, role, other)
			}
		}
		if !slices.ContainsFunc(dnsNames, func(n string) bool { return strings.EqualFold(n, h) }) {
			dnsNames = append(dnsNames, h)
		}
	}
	return dnsNames, ips, nil
}

// newSerial returns a random positive 128-bit serial number: RFC 5280
// caps serials at 20 bytes and wants them unique per CA, which chance
// guarantees at this size without the CA keeping a counter.
func newSerial() (*big.Int, error) {
	limit := new(big.Int).Lsh(big.NewInt(1), 128)
	for {
		n, err := rand.Int(rand.Reader, limit)
		if err != nil {
			return nil, err
		}
		if n.Sign() > 0 {
			return n, nil
		}
	}
}

func encodeKey(key crypto.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// parseCA decodes a CA certificate and its PKCS#8 key and checks that they
// belong together, since a mismatched pair would sign certificates nobody
// can verify.
func parseCA(certPEM, keyPEM []byte) (*x509.Certificate, crypto.Signer, error) {
	certs, err := parseCerts(certPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("CA certificate: %w", err)
	}
	ca := certs[0]
	if !ca.IsCA {
		return nil, nil, errors.New("CA certificate is not a CA (is it a node's certificate?)")
	}
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return nil, nil, errors.New("CA key: no PEM data")
	}
	if block.Type != "PRIVATE KEY" {
		return nil, nil, fmt.Errorf("CA key: PEM block is %q, want a PKCS#8 \"PRIVATE KEY\"", block.Type)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("CA key: %w", err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, nil, fmt.Errorf("CA key: a %T cannot sign", k)
	}
	pub, ok := signer.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(ca.PublicKey) {
		return nil, nil, errors.New("CA key does not belong to the CA certificate")
	}
	return ca, signer, nil
}

// parseCerts decodes every CERTIFICATE block of a PEM file; other blocks
// are an error, since a key pasted into a certificate file is a mistake
// worth hearing about.
func parseCerts(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("PEM block is %q, want CERTIFICATE", block.Type)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return certs, nil
}

// RoleOf returns the role c carries in its DNS SANs (compared as DNS
// compares names: letter case and a trailing dot do not matter). ok is
// false for a nil certificate, or one with no role name or the names of
// more than one role. It trusts c: call it on verified certificates only.
func RoleOf(c *x509.Certificate) (Role, bool) {
	if c == nil {
		return "", false
	}
	var found Role
	for _, n := range c.DNSNames {
		n = strings.TrimSuffix(n, ".")
		for _, r := range roles {
			if !strings.EqualFold(n, r.ServerName()) {
				continue
			}
			if found != "" && found != r {
				return "", false
			}
			found = r
		}
	}
	return found, found != ""
}

// PeerRole is RoleOf of the peer's leaf certificate in a completed TLS
// connection, as long as the handshake verified it against the CA: false
// for a nil state, no certificate, or one that was not verified (as with
// tls.RequestClientCert).
func PeerRole(cs *tls.ConnectionState) (Role, bool) {
	return RoleOf(verifiedLeaf(cs))
}

// verifiedLeaf is the peer's leaf certificate when the handshake verified
// it, else nil.
func verifiedLeaf(cs *tls.ConnectionState) *x509.Certificate {
	if cs == nil || len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return nil
	}
	return cs.VerifiedChains[0][0]
}

// uriScheme is the scheme of the URI SANs that name nodes.
const uriScheme = "drover"

// NodeURI is the name of node id of role, as a certificate's URI SAN and
// a forwarded request's api.HeaderForwardedCert carry it:
// "drover://worker/w1"; with id "" it names the role alone,
// "drover://worker". IDs keep their letter case: w1 and W1 are two nodes.
func NodeURI(role Role, id string) string { return nodeURL(role, id).String() }

func nodeURL(role Role, id string) *url.URL {
	u := &url.URL{Scheme: uriScheme, Host: string(role)}
	if id != "" {
		u.Path = "/" + id
	}
	return u
}

// ParseNodeURI returns the role and ID (or "") of s, which must be exactly
// as NodeURI writes it: a valid role, in lower case, and an ID its role's
// check in package ids accepts, without escapes, queries or anything else.
// Any other string is an error saying what is wrong.
func ParseNodeURI(s string) (Role, string, error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != uriScheme {
		return "", "", fmt.Errorf("%q is not a node name of the form %s://ROLE/ID", s, uriScheme)
	}
	role, id := Role(u.Host), strings.TrimPrefix(u.Path, "/")
	if !role.valid() {
		return "", "", fmt.Errorf("node name %q has unknown role %q (want master, worker or client)", s, u.Host)
	}
	if NodeURI(role, id) != s {
		return "", "", fmt.Errorf("node name %q is not of the form %s://ROLE/ID", s, uriScheme)
	}
	if id != "" {
		if err := checkID(role, id); err != nil {
			return "", "", fmt.Errorf("node name %q: %w", s, err)
		}
	}
	return role, id, nil
}

// checkID checks that id is a valid ID of a node of role: masters and
// workers have one, clients none.
func checkID(role Role, id string) error {
	switch role {
	case RoleMaster:
		return ids.CheckMaster(id)
	case RoleWorker:
		return ids.CheckWorker(id)
	}
	return fmt.Errorf("a %s certificate names no node ID (only master and worker ones do)", role)
}

// IDOf returns the ID of the node c is bound to: the ID in its drover://
// URI SAN (NodeURI), which must be of c's role (RoleOf). "" with a nil
// error means that c names no node, as certificates made before IDs do.
// It is an error for c to carry a drover:// URI that ParseNodeURI refuses,
// one without an ID, one of another role than c's, or more than one; URIs
// of other schemes are not Drover's and do not count. It trusts c: call
// it on verified certificates only.
func IDOf(c *x509.Certificate) (string, error) {
	if c == nil {
		return "", nil
	}
	role, _ := RoleOf(c)
	var found string
	for _, u := range c.URIs {
		if u.Scheme != uriScheme {
			continue
		}
		r, id, err := ParseNodeURI(u.String())
		switch {
		case err != nil:
			return "", fmt.Errorf("certificate: %w", err)
		case r != role:
			return "", fmt.Errorf("certificate names %s but carries the role %q", u, role)
		case id == "":
			return "", fmt.Errorf("certificate names %s, a role without a node ID", u)
		case found != "":
			return "", fmt.Errorf("certificate names more than one node (%s and %s)", NodeURI(role, found), u)
		}
		found = id
	}
	return found, nil
}

// PeerID is IDOf of the peer's leaf certificate in a completed TLS
// connection, when the handshake verified it; "" and a nil error without
// a verified certificate.
func PeerID(cs *tls.ConnectionState) (string, error) {
	return IDOf(verifiedLeaf(cs))
}

// Files names the PEM files a node uses: the cluster CA certificate, and
// this node's certificate and PKCS#8 (or any crypto/tls-readable) key.
type Files struct{ CA, Cert, Key string }

// Enabled reports whether any of the three is set: a node given some of
// them means to use TLS, and a missing one is then an error rather than a
// reason to fall back to plain text.
func (f Files) Enabled() bool { return f.CA != "" || f.Cert != "" || f.Key != "" }

// ServerConfig loads the files (CA, Cert and Key all required) and returns
// a TLS server configuration: TLS 1.2 or later, serving Cert, verifying
// client certificates against the CA as clientAuth says. When allowed is
// non-empty, a client certificate that was presented must carry one of the
// allowed roles, and the handshake fails otherwise with an error naming
// the role found and the roles allowed; whether a certificate is needed at
// all is still clientAuth's call.
//
// Errors: a missing or unreadable file (named), a certificate that does not
// match its key, does not verify against the CA (including an expired
// one), carries no role or is a client certificate; an invalid role in
// allowed, or allowed roles with a clientAuth that does not verify client
// certificates (tls.VerifyClientCertIfGiven or RequireAndVerifyClientCert
// are needed, or the role would come from an unchecked certificate).
func (f Files) ServerConfig(clientAuth tls.ClientAuthType, allowed ...Role) (*tls.Config, error) {
	for _, r := range allowed {
		if !r.valid() {
			return nil, fmt.Errorf("unknown role %q in allowed roles (want master, worker or client)", r)
		}
	}
	if len(allowed) > 0 && clientAuth != tls.VerifyClientCertIfGiven && clientAuth != tls.RequireAndVerifyClientCert {
		return nil, fmt.Errorf("allowed client roles need a verified client certificate, but client auth is %v", clientAuth)
	}
	if f.Cert == "" {
		return nil, errors.New("TLS server needs its certificate file: none given")
	}
	if f.Key == "" {
		return nil, errors.New("TLS server needs its key file: none given")
	}
	pool, cert, role, err := f.load()
	if err != nil {
		return nil, err
	}
	if role == RoleClient {
		return nil, fmt.Errorf("TLS certificate %s is a client certificate and cannot serve", f.Cert)
	}
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{*cert},
		ClientCAs:    pool,
		ClientAuth:   clientAuth,
	}
	if len(allowed) > 0 {
		allowed = slices.Clone(allowed)
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return nil
			}
			if len(cs.VerifiedChains) == 0 {
				return errors.New("client certificate was not verified")
			}
			r, ok := PeerRole(&cs)
			if !ok {
				return fmt.Errorf("client certificate carries no single drover role; allowed: %s", roleList(allowed))
			}
			if !slices.Contains(allowed, r) {
				return fmt.Errorf("client certificate has role %s; allowed: %s", r, roleList(allowed))
			}
			return nil
		}
	}
	return cfg, nil
}

// ClientConfig loads the files (CA required; Cert and Key optional, but
// both or neither) and returns a TLS client configuration: TLS 1.2 or
// later, trusting only the CA, presenting Cert when given, and verifying
// the server by server.ServerName(), so the server must hold a certificate
// of that role. It also checks that the server's certificate carries
// exactly that role, which closes the gap a wildcard SAN ("*.drover") or a
// certificate with several role names would leave in name matching.
//
// Errors: an invalid server role, a missing or unreadable file (named), a
// certificate without its key or the reverse, and for a given certificate
// the same checks as ServerConfig (matching key, verifies against the CA,
// carries a role).
func (f Files) ClientConfig(server Role) (*tls.Config, error) {
	if !server.valid() {
		return nil, fmt.Errorf("unknown server role %q (want master, worker or client)", server)
	}
	if f.Cert != "" && f.Key == "" {
		return nil, fmt.Errorf("TLS certificate %s given without its key file", f.Cert)
	}
	if f.Key != "" && f.Cert == "" {
		return nil, fmt.Errorf("TLS key %s given without its certificate file", f.Key)
	}
	pool, cert, _, err := f.load()
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		RootCAs:    pool,
		ServerName: server.ServerName(),
		VerifyConnection: func(cs tls.ConnectionState) error {
			if r, ok := PeerRole(&cs); !ok || r != server {
				return fmt.Errorf("server certificate does not carry the single role %s", server)
			}
			return nil
		},
	}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return cfg, nil
}

// load reads the CA and, when set, the certificate and key, and checks the
// certificate against the CA now, so a misconfigured node fails at start
// with a message naming the file instead of at every handshake.
func (f Files) load() (*x509.CertPool, *tls.Certificate, Role, error) {
	if f.CA == "" {
		return nil, nil, "", errors.New("TLS needs the cluster CA certificate file: none given")
	}
	caPEM, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, nil, "", fmt.Errorf("TLS CA: %w", err)
	}
	cas, err := parseCerts(caPEM)
	if err != nil {
		return nil, nil, "", fmt.Errorf("TLS CA %s: %w", f.CA, err)
	}
	pool := x509.NewCertPool()
	for _, c := range cas {
		if !c.IsCA {
			return nil, nil, "", fmt.Errorf("TLS CA %s holds a certificate that is not a CA (is it a node's certificate?)", f.CA)
		}
		pool.AddCert(c)
	}
	if f.Cert == "" {
		return pool, nil, "", nil
	}
	certPEM, err := os.ReadFile(f.Cert)
	if err != nil {
		return nil, nil, "", fmt.Errorf("TLS certificate: %w", err)
	}
	if err := CheckPrivate(f.Key); err != nil {
		return nil, nil, "", fmt.Errorf("TLS key: %w", err)
	}
	keyPEM, err := os.ReadFile(f.Key)
	if err != nil {
		return nil, nil, "", fmt.Errorf("TLS key: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, nil, "", fmt.Errorf("TLS certificate %s with key %s: %w", f.Cert, f.Key, err)
	}
	inter := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, nil, "", fmt.Errorf("TLS certificate %s: %w", f.Cert, err)
		}
		inter.AddCert(c)
	}
	if _, err := cert.Leaf.Verify(x509.VerifyOptions{
		Roots:         pool,
		Intermediates: inter,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
	}); err != nil {
		return nil, nil, "", fmt.Errorf("TLS certificate %s does not verify against CA %s: %w", f.Cert, f.CA, err)
	}
	role, ok := RoleOf(cert.Leaf)
	if !ok {
		return nil, nil, "", fmt.Errorf("TLS certificate %s carries no single drover role (a SAN master.drover, worker.drover or client.drover)", f.Cert)
	}
	if _, err := IDOf(cert.Leaf); err != nil {
		return nil, nil, "", fmt.Errorf("TLS certificate %s: %w", f.Cert, err)
	}
	return pool, &cert, role, nil
}

// CheckNode loads the files and checks that the certificate carries role
// want and, when it names a node (IDOf), that it names id, so that a
// master started with a worker's certificate, or a worker with another
// worker's, fails at start instead of at its peers' every handshake or
// request. bound reports whether the certificate names id; false means it
// names no node, as certificates made before IDs do.
func (f Files) CheckNode(want Role, id string) (bound bool, err error) {
	_, cert, got, err := f.load()
	if err != nil {
		return false, err
	}
	if f.Cert == "" {
		return false, fmt.Errorf("TLS needs this node's certificate and key as well as the CA")
	}
	if got != want {
		return false, fmt.Errorf("TLS certificate %s is a %s certificate; this node needs a %s one (drover tls cert --role %s --name %s)", f.Cert, got, want, want, id)
	}
	named, _ := IDOf(cert.Leaf) // load refused a malformed one
	if named != "" && named != id {
		return false, fmt.Errorf("TLS certificate %s is %s %s's; this %s is %s (drover tls cert --role %s --name %s)", f.Cert, want, named, want, id, want, id)
	}
	return named != "", nil
}

// CheckPrivate refuses a secret file (a key or a token) that users other
// than its owner may read or write, as ssh does for private keys: on a
// shared machine it is no secret.
func CheckPrivate(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("%s is open to other users (mode %04o); chmod 600 it", path, perm)
	}
	return nil
}

func roleList(rs []Role) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}

// WriteFiles writes certPEM to dir/name.pem (mode 0644) and keyPEM to
// dir/name-key.pem (mode 0600, whatever the umask), creating dir (0700)
// if needed, and returns the two paths. It never overwrites: if either
// file exists it writes nothing and returns an error wrapping
// fs.ErrExist, because replacing a CA key would orphan every certificate
// it signed. name must be a plain file name, not a path.
func WriteFiles(dir, name string, certPEM, keyPEM []byte) (certPath, keyPath string, err error) {
	if name == "" || name == "." || name == ".." || filepath.Base(name) != name {
		return "", "", fmt.Errorf("file name %q must be a plain name, not a path", name)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", err
	}
	certPath = filepath.Join(dir, name+".pem")
	keyPath = filepath.Join(dir, name+"-key.pem")
	// Create both before writing either, so a clash on the second leaves
	// no half pair behind.
	cf, err := createNew(certPath, 0o644)
	if err != nil {
		return "", "", err
	}
	kf, err := createNew(keyPath, 0o600)
	if err != nil {
		cf.Close()
		os.Remove(certPath)
		return "", "", err
	}
	err = errors.Join(writeFile(kf, keyPEM, 0o600), writeFile(cf, certPEM, 0o644))
	if err != nil {
		os.Remove(certPath)
		os.Remove(keyPath)
		return "", "", err
	}
	return certPath, keyPath, nil
}

// createNew creates path for writing, failing if it exists.
func createNew(path string, mode os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("%s: refusing to overwrite: %w", path, fs.ErrExist)
	}
	return f, err
}

// writeFile writes data to f with exactly mode, syncs and closes it. The
// mode is set again because the umask applied at creation would otherwise
// decide it: a umask of 077 hides a certificate from services running as
// other users.
func writeFile(f *os.File, data []byte, mode os.FileMode) error {
	err := f.Chmod(mode)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
