package auth_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/security/auth"
	"github.com/drover-project/drover/security/pki"
)

// TestCheckWorker: a worker certificate acts only as the worker it names;
// one naming none only while the masters allow it for an upgrade, with a
// notice; a master (certificate, or without TLS its credential) for any
// worker; without TLS the node token for any worker, and the operator
// token with a notice.
func TestCheckWorker(t *testing.T) {
	p := newPeers(t)
	tlsTokens := auth.Config{TLS: true, OperatorToken: opTok, SubmitToken: subTok}
	upgrading := tlsTokens
	upgrading.AllowUnboundWorkerCerts = true
	plain := auth.Config{OperatorToken: opTok, SubmitToken: subTok, NodeToken: nodeTok}
	keyed := plain
	keyed.MasterCredential = masterCred
	for _, tc := range []struct {
		name   string
		cfg    auth.Config
		cred   cred
		worker string
		// err is a part of the refusal, "" for none; notice says whether
		// the caller is to be noticed.
		err    string
		notice bool
	}{
		{"w1 as itself", tlsTokens, cred{tls: p.worker}, "w1", "", false},
		{"w1 as w2", tlsTokens, cred{tls: p.worker}, "w2", "worker certificate of w1 may not act as w2", false},
		{"w1 as W1", tlsTokens, cred{tls: p.worker}, "W1", "worker certificate of w1 may not act as W1", false},
		{"w1 with the operator token as w2", tlsTokens, cred{tls: p.worker, header: "Bearer " + opTok}, "w2", "worker certificate of w1 may not act as w2", false},
		{"unbound", tlsTokens, cred{tls: p.unbound}, "w2", "reissue it with drover tls cert --role worker --name w2", false},
		{"unbound while upgrading", upgrading, cred{tls: p.unbound}, "w2", "", true},
		{"w1 as w2 while upgrading", upgrading, cred{tls: p.worker}, "w2", "worker certificate of w1 may not act as w2", false},
		{"master", tlsTokens, cred{tls: p.master}, "w2", "", false},
		{"client certificate", auth.Config{TLS: true}, cred{tls: p.client}, "w2", "may not act as worker w2", false},
		{"node token", plain, cred{header: "Bearer " + nodeTok}, "w2", "", false},
		{"a master's credential", keyed, cred{master: masterCred}, "w2", "", false},
		{"operator token", plain, cred{header: "Bearer " + opTok}, "w2", "", true},
		{"submit token", plain, cred{header: "Bearer " + subTok}, "w2", "may not act as worker w2", false},
		{"open", auth.Config{}, cred{}, "w2", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGuard(t, tc.cfg)
			c, err := g.Caller(tc.cred.request())
			if err != nil {
				t.Fatal(err)
			}
			notice, err := g.CheckWorker(c.Identity, tc.worker)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.err != "" && (err == nil || !errors.Is(err, api.ErrForbidden) || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("err = %v, want a 403 containing %q", err, tc.err)
			case (notice != "") != tc.notice:
				t.Fatalf("notice %q, want one: %v", notice, tc.notice)
			}
			if err != nil && strings.Count(err.Error(), "\n") != 0 {
				t.Fatalf("refusal of more than one line: %q", err)
			}
			for _, tok := range []string{opTok, subTok, nodeTok} {
				if strings.Contains(notice, tok) || (err != nil && strings.Contains(err.Error(), tok)) {
					t.Fatalf("a token in %q / %v", notice, err)
				}
			}
		})
	}
}

// TestForwardedCert: the leader takes the certificate a forwarding master
// names as the caller's, so a worker is held to its own ID through a
// follower; only a master's forwarding is believed, a master certificate
// forwards only under its own ID, and a malformed name is refused.
func TestForwardedCert(t *testing.T) {
	p := newPeers(t)
	g := newGuard(t, auth.Config{TLS: true, OperatorToken: opTok, SubmitToken: subTok})
	forwarded := func(tls *tls.ConnectionState, by, cert string) (auth.Caller, error) {
		r := cred{tls: tls}.request()
		r.Header.Set(api.HeaderForwarded, by)
		if cert != "" {
			r.Header.Set(api.HeaderForwardedCert, cert)
		}
		return g.Caller(r)
	}

	c, err := forwarded(p.master, "m1", "drover://worker/w1")
	if err != nil || c.Role != pki.RoleWorker || c.NodeID != "w1" || c.Master || c.ForwardedBy != "m1" {
		t.Fatalf("forwarded for w1: %+v, %v", c, err)
	}
	if _, err := g.CheckWorker(c.Identity, "w2"); err == nil {
		t.Fatal("w1's forwarded heartbeat may act as w2")
	}
	if _, err := g.CheckWorker(c.Identity, "w1"); err != nil {
		t.Fatalf("w1's forwarded heartbeat refused: %v", err)
	}
	c, err = forwarded(p.master, "m1", "drover://worker")
	if err != nil || c.Role != pki.RoleWorker || c.NodeID != "" {
		t.Fatalf("forwarded for an unbound worker certificate: %+v, %v", c, err)
	}
	if _, err := g.CheckWorker(c.Identity, "w2"); err == nil {
		t.Fatal("an unbound certificate's forwarded heartbeat may act as w2")
	}
	// A master older than the header forwards without it: the request is
	// the master's own.
	if c, err := forwarded(p.master, "m1", ""); err != nil || c.Role != pki.RoleMaster || c.NodeID != "m1" || !c.Master {
		t.Fatalf("forwarded without a certificate: %+v, %v", c, err)
	}

	// From anyone but a master, both headers are ignored: the caller is
	// who its own certificate says.
	if c, err := forwarded(p.worker, "m1", "drover://master/m1"); err != nil || c.ForwardedBy != "" || c.Role != pki.RoleWorker || c.NodeID != "w1" || c.Master {
		t.Fatalf("a worker naming itself a master: %+v, %v", c, err)
	}
	for _, tc := range []struct {
		name, by, cert string
		tls            *tls.ConnectionState
		want           string
	}{
		{"m1 forwarding as m2", "m2", "drover://worker/w1", p.master, "master certificate of m1 may not forward as m2"},
		{"a malformed name", "m1", "drover://worker/w1/x", p.master, api.HeaderForwardedCert},
		{"another scheme", "m1", "spiffe://worker/w1", p.master, api.HeaderForwardedCert},
	} {
		if c, err := forwarded(tc.tls, tc.by, tc.cert); err == nil || !errors.Is(err, api.ErrForbidden) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %+v, %v; want a 403 containing %q", tc.name, c, err, tc.want)
		}
	}

	// Without TLS no certificate counts, however it is named: a master
	// (its credential) forwards the caller's token alone.
	r := cred{header: "Bearer " + nodeTok, master: masterCred}.request()
	r.Header.Set(api.HeaderForwarded, "m1")
	r.Header.Set(api.HeaderForwardedCert, "drover://worker/w1")
	c, err = newGuard(t, auth.Config{OperatorToken: opTok, NodeToken: nodeTok, MasterCredential: masterCred}).Caller(r)
	if err != nil || c.Role != "" || c.NodeID != "" || !c.Master || c.ForwardedBy != "m1" || c.Token != auth.NodeToken {
		t.Fatalf("plain: %+v, %v", c, err)
	}
}

// TestIdentifyMalformedNodeName: a verified certificate whose node name is
// malformed is refused, never taken for one that names no node.
func TestIdentifyMalformedNodeName(t *testing.T) {
	u, err := url.Parse("drover://worker/w1/x")
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{DNSNames: []string{"worker.drover"}, URIs: []*url.URL{u}}
	cs := &tls.ConnectionState{HandshakeComplete: true, PeerCertificates: []*x509.Certificate{leaf}, VerifiedChains: [][]*x509.Certificate{{leaf}}}
	g := newGuard(t, auth.Config{TLS: true, AllowUnboundWorkerCerts: true})
	for _, a := range []auth.Access{auth.Node, auth.Read} {
		if ans := serve(g, a, cred{tls: cs}.request()); ans.status != denied || !strings.Contains(ans.msg, "worker ID") {
			t.Errorf("%s: status %d (%s), want 403 naming the bad ID", a, ans.status, ans.msg)
		}
	}
}
