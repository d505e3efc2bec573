package pki

import (
	"crypto/tls"
	"crypto/x509"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// TestIssueNamesTheNode: a master or worker certificate issued with an ID
// carries it as its one drover:// URI SAN, still verifies as its role, and
// IDOf reads the ID back; one issued without names no node.
func TestIssueNamesTheNode(t *testing.T) {
	caPEM, caKey, err := NewCA("Drover CA", 30*day)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(parsePEM(t, caPEM))
	for _, tc := range []struct {
		role Role
		id   string
		uris []string
	}{
		{RoleWorker, "w1", []string{"drover://worker/w1"}},
		{RoleWorker, "W1.rack-2_b", []string{"drover://worker/W1.rack-2_b"}},
		{RoleMaster, "m1", []string{"drover://master/m1"}},
		{RoleWorker, "", nil},
		{RoleClient, "", nil},
	} {
		t.Run(string(tc.role)+"/"+tc.id, func(t *testing.T) {
			certPEM, _, err := Issue(caPEM, caKey, tc.role, tc.id, []string{"10.0.0.1"}, day)
			if err != nil {
				t.Fatal(err)
			}
			c := parsePEM(t, certPEM)
			var uris []string
			for _, u := range c.URIs {
				uris = append(uris, u.String())
			}
			if !slices.Equal(uris, tc.uris) {
				t.Errorf("URI SANs %q, want %q", uris, tc.uris)
			}
			if id, err := IDOf(c); err != nil || id != tc.id {
				t.Errorf("IDOf = %q, %v; want %q", id, err, tc.id)
			}
			if _, err := c.Verify(x509.VerifyOptions{Roots: roots, DNSName: tc.role.ServerName(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
				t.Errorf("does not verify as a %s: %v", tc.role, err)
			}
		})
	}
}

func TestIssueRefusesBadIDs(t *testing.T) {
	caPEM, caKey, err := NewCA("Drover CA", 30*day)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		role Role
		id   string
		want string
	}{
		{RoleClient, "c1", "names no node ID"},
		{RoleWorker, "../w1", "worker ID"},
		{RoleWorker, "w1/x", "worker ID"},
		{RoleWorker, strings.Repeat("w", 65), "worker ID"},
		{RoleMaster, "m 1", "master ID"},
		{RoleMaster, "-m1", "master ID"},
	} {
		if _, _, err := Issue(caPEM, caKey, tc.role, tc.id, nil, day); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Issue(%s, %q): err = %v, want one containing %q", tc.role, tc.id, err, tc.want)
		}
	}
}

func TestParseNodeURI(t *testing.T) {
	for _, tc := range []struct {
		s    string
		role Role
		id   string
	}{
		{"drover://worker/w1", RoleWorker, "w1"},
		{"drover://master/m-1.a_b", RoleMaster, "m-1.a_b"},
		{"drover://worker", RoleWorker, ""},
		{"drover://client", RoleClient, ""},
	} {
		r, id, err := ParseNodeURI(tc.s)
		if err != nil || r != tc.role || id != tc.id {
			t.Errorf("ParseNodeURI(%q) = %q %q %v, want %q %q", tc.s, r, id, err, tc.role, tc.id)
		}
		if got := NodeURI(tc.role, tc.id); got != tc.s {
			t.Errorf("NodeURI(%q, %q) = %q, want %q", tc.role, tc.id, got, tc.s)
		}
	}
	for _, s := range []string{
		"", "w1", "worker/w1", "https://worker/w1", "drover:worker/w1",
		"drover://Worker/w1",     // the role is exact
		"drover://admin/w1",      // no such role
		"drover://worker/w%31",   // escapes would make two spellings of one ID
		"drover://worker/w1/x",   // not an ID
		"drover://worker/w1?x=1", // nothing beyond the ID
		"drover://worker/w1#x",   // nor a fragment
		"drover://u@worker/w1",   // nor a user
		"drover://worker:1/w1",   // nor a port
		"drover://worker/",       // an empty ID is written without the slash
		"drover://worker/..",     // not a worker ID
		"drover://client/c1",     // clients have no ID
		"drover://worker/" + strings.Repeat("w", 65),
	} {
		if r, id, err := ParseNodeURI(s); err == nil {
			t.Errorf("ParseNodeURI(%q) = %q %q, want an error", s, r, id)
		}
	}
}

// TestIDOf reads node IDs from certificates as a verifier holds them: only
// a single well-formed drover:// URI of the certificate's own role names a
// node; other schemes are ignored, and anything ambiguous is an error
// rather than a certificate bound to nothing (which masters may admit as
// any worker during an upgrade).
func TestIDOf(t *testing.T) {
	cert := func(dns string, uris ...string) *x509.Certificate {
		c := &x509.Certificate{DNSNames: []string{dns}}
		for _, s := range uris {
			u, err := url.Parse(s)
			if err != nil {
				t.Fatal(err)
			}
			c.URIs = append(c.URIs, u)
		}
		return c
	}
	for _, tc := range []struct {
		name string
		c    *x509.Certificate
		id   string
		err  string
	}{
		{"nil", nil, "", ""},
		{"unbound", cert("worker.drover"), "", ""},
		{"bound", cert("worker.drover", "drover://worker/w1"), "w1", ""},
		{"another scheme beside", cert("worker.drover", "spiffe://example.org/w2", "drover://worker/w1"), "w1", ""},
		{"another scheme only", cert("worker.drover", "spiffe://example.org/w2"), "", ""},
		{"a master", cert("master.drover", "drover://master/m1"), "m1", ""},
		{"another role's URI", cert("worker.drover", "drover://master/m1"), "", "carries the role"},
		{"a URI without a role name", cert("localhost", "drover://worker/w1"), "", "carries the role"},
		{"two IDs", cert("worker.drover", "drover://worker/w1", "drover://worker/w2"), "", "more than one"},
		{"one ID twice", cert("worker.drover", "drover://worker/w1", "drover://worker/w1"), "", "more than one"},
		{"a role without an ID", cert("worker.drover", "drover://worker"), "", "without a node ID"},
		{"an invalid ID", cert("worker.drover", "drover://worker/w1/x"), "", "worker ID"},
		{"a capital role", cert("worker.drover", "drover://WORKER/w1"), "", "unknown role"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := IDOf(tc.c)
			if tc.err == "" && (err != nil || id != tc.id) {
				t.Fatalf("IDOf = %q, %v; want %q", id, err, tc.id)
			}
			if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("IDOf = %q, %v; want an error containing %q", id, err, tc.err)
			}
		})
	}
}

func TestPeerID(t *testing.T) {
	u, _ := url.Parse("drover://worker/w1")
	leaf := &x509.Certificate{DNSNames: []string{"worker.drover"}, URIs: []*url.URL{u}}
	if id, err := PeerID(nil); id != "" || err != nil {
		t.Errorf("PeerID(nil) = %q, %v", id, err)
	}
	// An unverified certificate (tls.RequestClientCert) names nobody.
	if id, err := PeerID(&tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}}); id != "" || err != nil {
		t.Errorf("ID %q, %v from an unverified certificate", id, err)
	}
	if id, err := PeerID(&tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}, VerifiedChains: [][]*x509.Certificate{{leaf}}}); id != "w1" || err != nil {
		t.Errorf("verified w1: %q, %v", id, err)
	}
}

// TestCheckNode: a node starts with a certificate of its role that names
// its own ID, or names none (reported unbound); another node's certificate
// or another role's stops it with a line saying how to issue the right one.
func TestCheckNode(t *testing.T) {
	ca := newCluster(t, "Drover CA")
	issueFiles := func(name string, role Role, id string) Files {
		certPEM, keyPEM, err := Issue(ca.caPEM, ca.caKey, role, id, nil, day)
		if err != nil {
			t.Fatal(err)
		}
		return ca.write(name, certPEM, keyPEM)
	}
	w1 := issueFiles("w1", RoleWorker, "w1")
	unbound := issueFiles("old-worker", RoleWorker, "")
	m1 := issueFiles("m1", RoleMaster, "m1")
	if bound, err := w1.CheckNode(RoleWorker, "w1"); !bound || err != nil {
		t.Errorf("w1's own certificate: bound %v, %v", bound, err)
	}
	if bound, err := unbound.CheckNode(RoleWorker, "w1"); bound || err != nil {
		t.Errorf("an unbound certificate: bound %v, %v", bound, err)
	}
	if bound, err := m1.CheckNode(RoleMaster, "m1"); !bound || err != nil {
		t.Errorf("m1's own certificate: bound %v, %v", bound, err)
	}
	for _, tc := range []struct {
		name string
		f    Files
		role Role
		id   string
		want string
	}{
		{"another worker's", w1, RoleWorker, "w2", "worker w1's; this worker is w2 (drover tls cert --role worker --name w2)"},
		{"another master's", m1, RoleMaster, "m2", "master m1's; this master is m2"},
		{"another role's", w1, RoleMaster, "w1", "is a worker certificate; this node needs a master one"},
		{"no certificate", ca.caOnly(), RoleWorker, "w1", "as well as the CA"},
	} {
		if _, err := tc.f.CheckNode(tc.role, tc.id); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}
