package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const day = 24 * time.Hour

// cluster is a CA written to a temporary directory, with helpers to issue
// certificates from it.
type cluster struct {
	t            *testing.T
	dir          string
	caPEM, caKey []byte
	caPath       string
}

func newCluster(t *testing.T, name string) *cluster {
	t.Helper()
	certPEM, keyPEM, err := NewCA(name, 30*day)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	caPath, _, err := WriteFiles(dir, "ca", certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{t: t, dir: dir, caPEM: certPEM, caKey: keyPEM, caPath: caPath}
}

// node issues a certificate of role, writes it and returns the files a node
// holding it would use.
func (c *cluster) node(name string, role Role, hosts ...string) Files {
	c.t.Helper()
	certPEM, keyPEM, err := Issue(c.caPEM, c.caKey, role, "", hosts, day)
	if err != nil {
		c.t.Fatal(err)
	}
	return c.write(name, certPEM, keyPEM)
}

func (c *cluster) write(name string, certPEM, keyPEM []byte) Files {
	c.t.Helper()
	cert, key, err := WriteFiles(c.dir, name, certPEM, keyPEM)
	if err != nil {
		c.t.Fatal(err)
	}
	return Files{CA: c.caPath, Cert: cert, Key: key}
}

// caOnly is what a node without a certificate of its own uses.
func (c *cluster) caOnly() Files { return Files{CA: c.caPath} }

// pair loads a certificate and key for a hand-built configuration, which
// the tests need to present certificates ServerConfig and ClientConfig
// would refuse to load.
func pair(t *testing.T, f Files) tls.Certificate {
	t.Helper()
	c, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustServer(t *testing.T, f Files, auth tls.ClientAuthType, allowed ...Role) *tls.Config {
	t.Helper()
	cfg, err := f.ServerConfig(auth, allowed...)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func mustClient(t *testing.T, f Files, server Role) *tls.Config {
	t.Helper()
	cfg, err := f.ClientConfig(server)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

type side struct {
	err  error
	role Role
	ok   bool
}

// handshake connects a TLS client to a TLS server over loopback TCP and
// has each send the other one byte, so that under TLS 1.3, where the
// client finishes its handshake before the server has judged the client's
// certificate, the server's verdict reaches the client too. It returns
// what each side saw: its error, and the role of the peer it verified.
func handshake(t *testing.T, srv, cli *tls.Config) (server, client side) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan side, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- side{err: err}
			return
		}
		defer c.Close()
		// A safety net against a hung test, not a synchronization.
		c.SetDeadline(time.Now().Add(20 * time.Second))
		tc := tls.Server(c, srv)
		err = tc.Handshake()
		if err == nil {
			_, err = tc.Write([]byte{'s'})
		}
		if err == nil {
			_, err = io.ReadFull(tc, make([]byte, 1))
		}
		cs := tc.ConnectionState()
		r, ok := PeerRole(&cs)
		done <- side{err: err, role: r, ok: ok}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(20 * time.Second))
	tc := tls.Client(c, cli)
	err = tc.Handshake()
	if err == nil {
		_, err = io.ReadFull(tc, make([]byte, 1))
	}
	if err == nil {
		_, err = tc.Write([]byte{'c'})
	}
	cs := tc.ConnectionState()
	r, ok := PeerRole(&cs)
	client = side{err: err, role: r, ok: ok}
	c.Close()
	return <-done, client
}

func isUnknownAuthority(err error) bool {
	var e x509.UnknownAuthorityError
	return errors.As(err, &e)
}

func isExpired(err error) bool {
	var e x509.CertificateInvalidError
	return errors.As(err, &e) && e.Reason == x509.Expired
}

func isHostname(err error) bool {
	var e x509.HostnameError
	return errors.As(err, &e)
}

func TestTLSHandshakes(t *testing.T) {
	ca := newCluster(t, "Drover CA")
	other := newCluster(t, "Other CA")
	master := ca.node("master", RoleMaster, "10.0.0.1")
	worker := ca.node("worker", RoleWorker)
	worker2 := ca.node("worker2", RoleWorker)
	clientCert := ca.node("client", RoleClient)
	otherMaster := other.node("other-master", RoleMaster)
	otherClient := other.node("other-client", RoleClient)

	old := time.Now().Add(-10 * day)
	expPEM, expKey, err := issue(ca.caPEM, ca.caKey, RoleWorker, "", nil, old, old.Add(day))
	if err != nil {
		t.Fatal(err)
	}
	expiredWorker := ca.write("expired-worker", expPEM, expKey)
	expPEM, expKey, err = issue(ca.caPEM, ca.caKey, RoleMaster, "", nil, old, old.Add(day))
	if err != nil {
		t.Fatal(err)
	}
	expiredMaster := ca.write("expired-master", expPEM, expKey)
	wildcard := signRaw(t, ca, "wildcard", []string{"*.drover"})

	// withCert is a client configuration that trusts the CA of trust and
	// presents a certificate ClientConfig would refuse to load. It
	// presents it whatever CAs the server asks for: Go's client would
	// keep quiet about a certificate from another CA, a hostile one
	// would not.
	withCert := func(trust Files, server Role, cert Files) *tls.Config {
		cfg := mustClient(t, trust, server)
		c := pair(t, cert)
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &c, nil }
		return cfg
	}
	// serving is a server configuration presenting a certificate
	// ServerConfig would refuse to load.
	serving := func(cert Files) *tls.Config {
		return &tls.Config{Certificates: []tls.Certificate{pair(t, cert)}, MinVersion: tls.VersionTLS12}
	}

	cases := []struct {
		name     string
		srv, cli func() *tls.Config
		check    func(t *testing.T, s, c side)
	}{
		{
			name: "worker dials a master",
			srv: func() *tls.Config {
				return mustServer(t, master, tls.RequireAndVerifyClientCert, RoleWorker, RoleClient)
			},
			cli: func() *tls.Config { return mustClient(t, worker, RoleMaster) },
			check: func(t *testing.T, s, c side) {
				if s.err != nil || c.err != nil {
					t.Fatalf("server: %v; client: %v", s.err, c.err)
				}
				if s.role != RoleWorker || !s.ok || c.role != RoleMaster || !c.ok {
					t.Fatalf("server saw %q %v, client saw %q %v", s.role, s.ok, c.role, c.ok)
				}
			},
		},
		{
			name: "master dials a worker",
			srv:  func() *tls.Config { return mustServer(t, worker, tls.RequireAndVerifyClientCert, RoleMaster) },
			cli:  func() *tls.Config { return mustClient(t, master, RoleWorker) },
			check: func(t *testing.T, s, c side) {
				if s.err != nil || c.err != nil {
					t.Fatalf("server: %v; client: %v", s.err, c.err)
				}
				if s.role != RoleMaster || c.role != RoleWorker {
					t.Fatalf("server saw %q, client saw %q", s.role, c.role)
				}
			},
		},
		{
			name: "client certificate accepted",
			srv:  func() *tls.Config { return mustServer(t, master, tls.RequireAndVerifyClientCert, RoleClient) },
			cli:  func() *tls.Config { return mustClient(t, clientCert, RoleMaster) },
			check: func(t *testing.T, s, c side) {
				if s.err != nil || c.err != nil || s.role != RoleClient {
					t.Fatalf("server: %v (%q); client: %v", s.err, s.role, c.err)
				}
			},
		},
		{
			name: "no client certificate where one is optional",
			srv:  func() *tls.Config { return mustServer(t, master, tls.VerifyClientCertIfGiven, RoleClient) },
			cli:  func() *tls.Config { return mustClient(t, ca.caOnly(), RoleMaster) },
			check: func(t *testing.T, s, c side) {
				if s.err != nil || c.err != nil {
					t.Fatalf("server: %v; client: %v", s.err, c.err)
				}
				if s.ok {
					t.Fatalf("server found role %q with no client certificate", s.role)
				}
			},
		},
		{
			name: "no client certificate where one is required",
			srv:  func() *tls.Config { return mustServer(t, master, tls.RequireAndVerifyClientCert) },
			cli:  func() *tls.Config { return mustClient(t, ca.caOnly(), RoleMaster) },
			check: func(t *testing.T, s, c side) {
				if s.err == nil || c.err == nil {
					t.Fatalf("server: %v; client: %v", s.err, c.err)
				}
			},
		},
		{
			name: "client certificate from another CA",
			srv:  func() *tls.Config { return mustServer(t, master, tls.RequireAndVerifyClientCert) },
			cli:  func() *tls.Config { return withCert(ca.caOnly(), RoleMaster, otherClient) },
			check: func(t *testing.T, s, c side) {
				if !isUnknownAuthority(s.err) || c.err == nil {
					t.Fatalf("server: %v; client: %v", s.err, c.err)
				}
			},
		},
		{
			name: "server certificate from another CA",
			srv:  func() *tls.Config { return mustServer(t, otherMaster, tls.VerifyClientCertIfGiven) },
			cli:  func() *tls.Config { return mustClient(t, worker, RoleMaster) },
			check: func(t *testing.T, s, c side) {
				if !isUnknownAuthority(c.err) || s.err == nil {
					t.Fatalf("server: %v; client: %v", s.err, c.err)
				}
			},
		},
		{
			name: "worker refused by a server that allows only masters",
			srv:  func() *tls.Config { return mustServer(t, worker, tls.RequireAndVerifyClientCert, RoleMaster) },
			cli:  func() *tls.Config { return mustClient(t, worker2, RoleWorker) },
			check: func(t *testing.T, s, c side) {
				if s.err == nil || !strings.Contains(s.err.Error(), "role worker") || !strings.Contains(s.err.Error(), "allowed: master") {
					t.Fatalf("server: %v", s.err)
				}
				if c.err == nil {
					t.Fatal("client saw no error")
				}
			},
		},
		{
			name: "client expecting a master refuses a worker",
			srv:  func() *tls.Config { return mustServer(t, worker, tls.VerifyClientCertIfGiven) },
			cli:  func() *tls.Config { return mustClient(t, ca.caOnly(), RoleMaster) },
			check: func(t *testing.T, s, c side) {
				if !isHostname(c.err) || s.err == nil {
					t.Fatalf("server: %v; client: %v", s.err, c.err)
				}
			},
		},
		{
			name: "client certificate cannot serve",
			srv:  func() *tls.Config { return serving(clientCert) },
			cli:  func() *tls.Config { return mustClient(t, ca.caOnly(), RoleClient) },
			check: func(t *testing.T, s, c side) {
				var e x509.CertificateInvalidError
				if !errors.As(c.err, &e) || e.Reason != x509.IncompatibleUsage {
					t.Fatalf("client: %v", c.err)
				}
			},
		},
		{
			name: "expired client certificate",
			srv:  func() *tls.Config { return mustServer(t, master, tls.RequireAndVerifyClientCert, RoleWorker) },
			cli:  func() *tls.Config { return withCert(ca.caOnly(), RoleMaster, expiredWorker) },
			check: func(t *testing.T, s, c side) {
				if !isExpired(s.err) || c.err == nil {
					t.Fatalf("server: %v; client: %v", s.err, c.err)
				}
			},
		},
		{
			name: "expired server certificate",
			srv:  func() *tls.Config { return serving(expiredMaster) },
			cli:  func() *tls.Config { return mustClient(t, worker, RoleMaster) },
			check: func(t *testing.T, s, c side) {
				if !isExpired(c.err) || s.err == nil {
					t.Fatalf("server: %v; client: %v", s.err, c.err)
				}
			},
		},
		{
			// Name matching alone lets "*.drover" pass for
			// "master.drover"; the role check must refuse it.
			name: "wildcard server certificate",
			srv:  func() *tls.Config { return serving(wildcard) },
			cli:  func() *tls.Config { return mustClient(t, ca.caOnly(), RoleMaster) },
			check: func(t *testing.T, s, c side) {
				if c.err == nil || isHostname(c.err) || !strings.Contains(c.err.Error(), "single role master") {
					t.Fatalf("client: %v", c.err)
				}
			},
		},
	}
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		for _, tc := range cases {
			t.Run(tls.VersionName(version)+"/"+tc.name, func(t *testing.T) {
				cli := tc.cli()
				cli.MaxVersion = version
				s, c := handshake(t, tc.srv(), cli)
				tc.check(t, s, c)
			})
		}
	}
}

// signRaw signs and writes a server certificate with exactly dnsNames as
// SANs, bypassing Issue's checks, as a careless issuer with the CA key
// could.
func signRaw(t *testing.T, c *cluster, name string, dnsNames []string) Files {
	t.Helper()
	ca, caKey, err := parseCA(c.caPEM, c.caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := newSerial()
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "raw"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(day),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     dnsNames,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return c.write(name, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM)
}

func parsePEM(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	certs, err := parseCerts(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	return certs[0]
}

func TestParseRole(t *testing.T) {
	for _, s := range []string{"master", "worker", "client"} {
		r, err := ParseRole(s)
		if err != nil || string(r) != s {
			t.Errorf("ParseRole(%q) = %q, %v", s, r, err)
		}
	}
	for _, s := range []string{"", "Master", "admin", " worker", "master.drover"} {
		_, err := ParseRole(s)
		if err == nil || !strings.Contains(err.Error(), "master, worker or client") {
			t.Errorf("ParseRole(%q): %v, want an error naming the valid roles", s, err)
		}
	}
}

func TestServerName(t *testing.T) {
	want := map[Role]string{RoleMaster: "master.drover", RoleWorker: "worker.drover", RoleClient: "client.drover", "admin": "", "": ""}
	for r, name := range want {
		if got := r.ServerName(); got != name {
			t.Errorf("%q.ServerName() = %q, want %q", r, got, name)
		}
	}
}

func TestNewCA(t *testing.T) {
	certPEM, keyPEM, err := NewCA("Drover CA", 10*day)
	if err != nil {
		t.Fatal(err)
	}
	c := parsePEM(t, certPEM)
	if !c.IsCA || !c.BasicConstraintsValid || c.MaxPathLen != 0 || !c.MaxPathLenZero {
		t.Errorf("CA constraints: IsCA %v, MaxPathLen %d, MaxPathLenZero %v", c.IsCA, c.MaxPathLen, c.MaxPathLenZero)
	}
	if c.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Error("no KeyUsageCertSign")
	}
	if c.Subject.CommonName != "Drover CA" {
		t.Errorf("CN = %q", c.Subject.CommonName)
	}
	if pub, ok := c.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() {
		t.Errorf("public key %T, want ECDSA P-256", c.PublicKey)
	}
	if c.SerialNumber.Sign() <= 0 || c.SerialNumber.BitLen() > 128 {
		t.Errorf("serial %v is not a positive 128-bit number", c.SerialNumber)
	}
	if err := c.CheckSignatureFrom(c); err != nil {
		t.Errorf("not self-signed: %v", err)
	}
	if d := time.Until(c.NotAfter) - 10*day; d < -time.Minute || d > time.Minute {
		t.Errorf("NotAfter %v is not 10 days from now", c.NotAfter)
	}
	if !c.NotBefore.Before(time.Now()) {
		t.Errorf("NotBefore %v is not in the past", c.NotBefore)
	}
	block, _ := pem.Decode(keyPEM)
	if block == nil || block.Type != "PRIVATE KEY" {
		t.Fatalf("key PEM: %+v", block)
	}
	if _, err := x509.ParsePKCS8PrivateKey(block.Bytes); err != nil {
		t.Fatal(err)
	}
	second, _, err := NewCA("Drover CA", 10*day)
	if err != nil {
		t.Fatal(err)
	}
	if parsePEM(t, second).SerialNumber.Cmp(c.SerialNumber) == 0 {
		t.Error("two CAs share a serial")
	}
	if _, _, err := NewCA("", day); err == nil {
		t.Error("empty common name accepted")
	}
	if _, _, err := NewCA("x", 0); err == nil {
		t.Error("zero validity accepted")
	}
}

func TestIssue(t *testing.T) {
	caPEM, caKey, err := NewCA("Drover CA", 30*day)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(parsePEM(t, caPEM))
	cases := []struct {
		role  Role
		hosts []string
		dns   []string
		ips   []string
		usage []x509.ExtKeyUsage
	}{
		{RoleMaster, []string{"10.0.0.1", "m1.example.com", " ", "10.0.0.1", "LOCALHOST", "::1"},
			[]string{"master.drover", "localhost", "m1.example.com"}, []string{"10.0.0.1", "::1"},
			[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}},
		{RoleWorker, nil, []string{"worker.drover", "localhost"}, nil,
			[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}},
		{RoleClient, []string{"laptop"}, []string{"client.drover", "laptop"}, nil,
			[]x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
	}
	for _, tc := range cases {
		t.Run(string(tc.role), func(t *testing.T) {
			certPEM, keyPEM, err := Issue(caPEM, caKey, tc.role, "", tc.hosts, day)
			if err != nil {
				t.Fatal(err)
			}
			c := parsePEM(t, certPEM)
			if !slices.Equal(c.DNSNames, tc.dns) {
				t.Errorf("DNS SANs %q, want %q", c.DNSNames, tc.dns)
			}
			var ips []string
			for _, ip := range c.IPAddresses {
				ips = append(ips, ip.String())
			}
			if !slices.Equal(ips, tc.ips) {
				t.Errorf("IP SANs %q, want %q", ips, tc.ips)
			}
			if !slices.Equal(c.ExtKeyUsage, tc.usage) {
				t.Errorf("ExtKeyUsage %v, want %v", c.ExtKeyUsage, tc.usage)
			}
			if c.Subject.CommonName != tc.role.ServerName() || !slices.Equal(c.Subject.OrganizationalUnit, []string{string(tc.role)}) {
				t.Errorf("subject %v", c.Subject)
			}
			if c.IsCA {
				t.Error("leaf is a CA")
			}
			if r, ok := RoleOf(c); !ok || r != tc.role {
				t.Errorf("RoleOf = %q %v", r, ok)
			}
			if _, err := c.Verify(x509.VerifyOptions{Roots: roots, DNSName: tc.role.ServerName(), KeyUsages: tc.usage}); err != nil {
				t.Errorf("does not verify against the CA: %v", err)
			}
			if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
				t.Errorf("certificate and key do not match: %v", err)
			}
		})
	}
}

func TestIssueRefuses(t *testing.T) {
	caPEM, caKey, err := NewCA("Drover CA", 30*day)
	if err != nil {
		t.Fatal(err)
	}
	_, otherKey, err := NewCA("Other CA", 30*day)
	if err != nil {
		t.Fatal(err)
	}
	leafPEM, leafKey, err := Issue(caPEM, caKey, RoleMaster, "", nil, day)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name         string
		caPEM, caKey []byte
		role         Role
		hosts        []string
		validity     time.Duration
		want         string
	}{
		{"unknown role", caPEM, caKey, "admin", nil, day, "unknown role"},
		{"empty role", caPEM, caKey, "", nil, day, "unknown role"},
		{"another role's name", caPEM, caKey, RoleWorker, []string{"master.drover"}, day, "pass for a master"},
		{"another role's name in capitals", caPEM, caKey, RoleClient, []string{"WORKER.Drover"}, day, "pass for a worker"},
		{"another role's name with a trailing dot", caPEM, caKey, RoleWorker, []string{"master.drover."}, day, "pass for a master"},
		{"a wildcard over the roles", caPEM, caKey, RoleWorker, []string{"*.drover"}, day, "pass for a master"},
		{"a host with a port", caPEM, caKey, RoleMaster, []string{"10.0.0.1:7102"}, day, "not a DNS name"},
		{"a URL", caPEM, caKey, RoleMaster, []string{"https://m1"}, day, "not a DNS name"},
		{"zero validity", caPEM, caKey, RoleMaster, nil, 0, "not positive"},
		{"outliving the CA", caPEM, caKey, RoleMaster, nil, 31 * day, "after the CA"},
		{"the key of another CA", caPEM, otherKey, RoleMaster, nil, day, "does not belong"},
		{"a leaf as the CA", leafPEM, leafKey, RoleMaster, nil, day, "not a CA"},
		{"a key as the CA certificate", caKey, caKey, RoleMaster, nil, day, "want CERTIFICATE"},
		{"a certificate as the CA key", caPEM, caPEM, RoleMaster, nil, day, "PKCS#8"},
		{"no CA", nil, nil, RoleMaster, nil, day, "no PEM"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Issue(tc.caPEM, tc.caKey, tc.role, "", tc.hosts, tc.validity)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestRoleOf(t *testing.T) {
	cases := []struct {
		name string
		dns  []string
		role Role
		ok   bool
	}{
		{"no SANs", nil, "", false},
		{"no role name", []string{"localhost", "m1.example.com"}, "", false},
		{"master", []string{"master.drover", "localhost"}, RoleMaster, true},
		{"letter case", []string{"Worker.DROVER"}, RoleWorker, true},
		{"trailing dot", []string{"client.drover."}, RoleClient, true},
		{"one role twice", []string{"master.drover", "MASTER.drover"}, RoleMaster, true},
		{"two roles", []string{"master.drover", "worker.drover"}, "", false},
		{"two roles, one with a trailing dot", []string{"worker.drover", "master.drover."}, "", false},
		{"wildcard", []string{"*.drover"}, "", false},
		{"a longer name", []string{"x.master.drover"}, "", false},
		{"the role alone", []string{"master"}, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, ok := RoleOf(&x509.Certificate{DNSNames: tc.dns})
			if r != tc.role || ok != tc.ok {
				t.Fatalf("RoleOf(%q) = %q %v, want %q %v", tc.dns, r, ok, tc.role, tc.ok)
			}
		})
	}
	// The common name does not count: only SANs are verified names.
	if r, ok := RoleOf(&x509.Certificate{Subject: pkix.Name{CommonName: "master.drover"}}); ok {
		t.Fatalf("role %q from the common name", r)
	}
	if r, ok := RoleOf(nil); ok {
		t.Fatalf("RoleOf(nil) = %q", r)
	}
}

func TestPeerRole(t *testing.T) {
	leaf := &x509.Certificate{DNSNames: []string{"master.drover"}}
	if _, ok := PeerRole(nil); ok {
		t.Error("role from a nil state")
	}
	// An unverified certificate (tls.RequestClientCert) proves nothing.
	if r, ok := PeerRole(&tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}}); ok {
		t.Errorf("role %q from an unverified certificate", r)
	}
	if r, ok := PeerRole(&tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}, VerifiedChains: [][]*x509.Certificate{{leaf}}}); !ok || r != RoleMaster {
		t.Errorf("verified master: %q %v", r, ok)
	}
}

func TestServerConfig(t *testing.T) {
	ca := newCluster(t, "Drover CA")
	other := newCluster(t, "Other CA")
	master := ca.node("master", RoleMaster)
	client := ca.node("client", RoleClient)
	foreign := other.node("foreign", RoleMaster)
	old := time.Now().Add(-10 * day)
	expPEM, expKey, err := issue(ca.caPEM, ca.caKey, RoleMaster, "", nil, old, old.Add(day))
	if err != nil {
		t.Fatal(err)
	}
	expired := ca.write("expired", expPEM, expKey)
	missing := filepath.Join(t.TempDir(), "nothing.pem")

	cfg := mustServer(t, master, tls.RequireAndVerifyClientCert, RoleWorker)
	if cfg.MinVersion != tls.VersionTLS12 || cfg.ClientAuth != tls.RequireAndVerifyClientCert || cfg.ClientCAs == nil ||
		len(cfg.Certificates) != 1 || cfg.VerifyConnection == nil {
		t.Fatalf("config: %+v", cfg)
	}
	if cfg := mustServer(t, master, tls.NoClientCert); cfg.VerifyConnection != nil {
		t.Fatal("a role check with no roles to allow")
	}

	cases := []struct {
		name    string
		files   Files
		auth    tls.ClientAuthType
		allowed []Role
		want    string
	}{
		{"no CA", Files{Cert: master.Cert, Key: master.Key}, tls.NoClientCert, nil, "CA certificate file"},
		{"no certificate", Files{CA: master.CA, Key: master.Key}, tls.NoClientCert, nil, "certificate file"},
		{"no key", Files{CA: master.CA, Cert: master.Cert}, tls.NoClientCert, nil, "key file"},
		{"unreadable CA", Files{CA: missing, Cert: master.Cert, Key: master.Key}, tls.NoClientCert, nil, missing},
		{"unreadable certificate", Files{CA: master.CA, Cert: missing, Key: master.Key}, tls.NoClientCert, nil, missing},
		{"unreadable key", Files{CA: master.CA, Cert: master.Cert, Key: missing}, tls.NoClientCert, nil, missing},
		{"the node certificate as the CA", Files{CA: master.Cert, Cert: master.Cert, Key: master.Key}, tls.NoClientCert, nil, "not a CA"},
		{"a key that is not the certificate's", Files{CA: master.CA, Cert: master.Cert, Key: client.Key}, tls.NoClientCert, nil, client.Key},
		{"a certificate from another CA", Files{CA: master.CA, Cert: foreign.Cert, Key: foreign.Key}, tls.NoClientCert, nil, "does not verify"},
		{"an expired certificate", Files{CA: master.CA, Cert: expired.Cert, Key: expired.Key}, tls.NoClientCert, nil, "expired"},
		{"a client certificate", client, tls.NoClientCert, nil, "cannot serve"},
		{"an unknown allowed role", master, tls.RequireAndVerifyClientCert, []Role{"admin"}, "unknown role"},
		{"roles from unverified certificates", master, tls.RequireAnyClientCert, []Role{RoleWorker}, "verified client certificate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.files.ServerConfig(tc.auth, tc.allowed...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestClientConfig(t *testing.T) {
	ca := newCluster(t, "Drover CA")
	worker := ca.node("worker", RoleWorker)
	cfg := mustClient(t, worker, RoleMaster)
	if cfg.ServerName != "master.drover" || cfg.MinVersion != tls.VersionTLS12 || cfg.RootCAs == nil || len(cfg.Certificates) != 1 {
		t.Fatalf("config: %+v", cfg)
	}
	if cfg := mustClient(t, ca.caOnly(), RoleWorker); len(cfg.Certificates) != 0 || cfg.ServerName != "worker.drover" {
		t.Fatalf("config without a certificate: %+v", cfg)
	}
	cases := []struct {
		name   string
		files  Files
		server Role
		want   string
	}{
		{"no CA", Files{Cert: worker.Cert, Key: worker.Key}, RoleMaster, "CA certificate file"},
		{"a certificate without its key", Files{CA: worker.CA, Cert: worker.Cert}, RoleMaster, "without its key"},
		{"a key without its certificate", Files{CA: worker.CA, Key: worker.Key}, RoleMaster, "without its certificate"},
		{"an unknown server role", worker, "admin", "unknown server role"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.files.ClientConfig(tc.server)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestFilesEnabled(t *testing.T) {
	if (Files{}).Enabled() {
		t.Error("empty Files enabled")
	}
	for _, f := range []Files{{CA: "a"}, {Cert: "b"}, {Key: "c"}} {
		if !f.Enabled() {
			t.Errorf("%+v not enabled", f)
		}
	}
}

func TestWriteFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new", "tls")
	certPath, keyPath, err := WriteFiles(dir, "drover-master", []byte("CERT"), []byte("KEY"))
	if err != nil {
		t.Fatal(err)
	}
	if certPath != filepath.Join(dir, "drover-master.pem") || keyPath != filepath.Join(dir, "drover-master-key.pem") {
		t.Fatalf("paths %s %s", certPath, keyPath)
	}
	for path, want := range map[string]struct {
		data string
		mode fs.FileMode
	}{certPath: {"CERT", 0o644}, keyPath: {"KEY", 0o600}} {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want.mode {
			t.Errorf("%s: mode %v, want %v", path, st.Mode().Perm(), want.mode)
		}
		if b, _ := os.ReadFile(path); string(b) != want.data {
			t.Errorf("%s holds %q", path, b)
		}
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("created directory: %v %v", st.Mode(), err)
	}

	// Writing the same name again changes nothing.
	if _, _, err := WriteFiles(dir, "drover-master", []byte("NEW"), []byte("NEW")); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("overwrite: %v", err)
	}
	for _, p := range []string{certPath, keyPath} {
		if b, _ := os.ReadFile(p); string(b) == "NEW" {
			t.Fatalf("%s overwritten", p)
		}
	}

	// A lone key in the way: nothing is written, and no lone certificate
	// is left behind.
	lone := filepath.Join(dir, "w-key.pem")
	if err := os.WriteFile(lone, []byte("OLD"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := WriteFiles(dir, "w", []byte("NEW"), []byte("NEW")); !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), lone) {
		t.Fatalf("key in the way: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "w.pem")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("certificate left behind: %v", err)
	}
	if b, _ := os.ReadFile(lone); string(b) != "OLD" {
		t.Fatalf("key overwritten: %q", b)
	}

	for _, name := range []string{"", ".", "..", "../x", "a/b"} {
		if _, _, err := WriteFiles(dir, name, nil, nil); err == nil {
			t.Errorf("name %q accepted", name)
		}
	}
}
