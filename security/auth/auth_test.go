package auth_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/security/auth"
	"github.com/drover-project/drover/security/pki"
)

const (
	opTok   = "OperatorTok-0123456789abcdef"
	subTok  = "SubmitTok-abcdefghij0123456"
	nodeTok = "NodeTok-0123456789ABCDEFGHIJ"
	// masterCred stands for the credential masters derive from their
	// raft key.
	masterCred = "MasterCredential-0123456789abcdef"
	// driverID has the shape masters give drivers.
	driverID = "driver-20240101000000-7"
)

// accesses lists every Access in the order of a statuses row.
var accesses = [...]auth.Access{auth.Read, auth.AppRead, auth.App, auth.Submit, auth.Operator, auth.Node, auth.BlobRead}

// statuses is the HTTP status Wrap should answer for each of accesses.
type statuses [len(accesses)]int

const (
	pass   = http.StatusOK
	noCred = http.StatusUnauthorized
	denied = http.StatusForbidden
)

func all(s int) statuses { return statuses{s, s, s, s, s, s, s} }

// peers holds TLS connection states as crypto/tls leaves them after
// verifying a client certificate of each role against one CA: master m1,
// worker w1, a worker certificate made before certificates named workers
// (unbound), and a client.
type peers struct {
	client, master, worker, unbound *tls.ConnectionState
	// unverified carries a client certificate the handshake did not
	// verify, as with tls.RequestClientCert.
	unverified *tls.ConnectionState
}

func newPeers(t *testing.T) peers {
	t.Helper()
	caPEM, caKey, err := pki.NewCA("auth test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ca := parseCert(t, caPEM)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	state := func(role pki.Role, id string) *tls.ConnectionState {
		certPEM, _, err := pki.Issue(caPEM, caKey, role, id, nil, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		leaf := parseCert(t, certPEM)
		// Verify builds the chains exactly as crypto/tls records them in
		// VerifiedChains, so the state is one a real handshake yields.
		chains, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		if err != nil {
			t.Fatal(err)
		}
		return &tls.ConnectionState{
			Version:           tls.VersionTLS13,
			HandshakeComplete: true,
			PeerCertificates:  []*x509.Certificate{leaf},
			VerifiedChains:    chains,
		}
	}
	p := peers{client: state(pki.RoleClient, ""), master: state(pki.RoleMaster, "m1"), worker: state(pki.RoleWorker, "w1"),
		unbound: state(pki.RoleWorker, "")}
	u := *state(pki.RoleClient, "")
	u.VerifiedChains = nil
	p.unverified = &u
	return p
}

func parseCert(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(certPEM)
	if b == nil {
		t.Fatal("no PEM block")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newGuard(t *testing.T, cfg auth.Config) *auth.Guard {
	t.Helper()
	g, err := auth.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// cred is what a request presents: a TLS state, an Authorization header,
// a token in the auth.CookieName cookie and a master credential.
type cred struct {
	tls    *tls.ConnectionState
	header string
	cookie string
	master string
}

func (c cred) request() *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/v1/state", nil)
	r.TLS = c.tls
	if c.header != "" {
		r.Header.Set("Authorization", c.header)
	}
	if c.master != "" {
		r.Header.Set(api.HeaderMasterCredential, c.master)
	}
	if c.cookie != "" {
		r.AddCookie(&http.Cookie{Name: auth.CookieName, Value: c.cookie})
	}
	return r
}

// answer is what a listener does with one request: it establishes the
// Caller, asks Check, and on a refusal answers with the status of its code
// and the headers Challenge sets.
type answer struct {
	status int
	header http.Header
	msg    string
	id     auth.Identity
}

func serve(g *auth.Guard, a auth.Access, r *http.Request) answer {
	ans := answer{status: pass, header: http.Header{}}
	c, err := g.Caller(r)
	if err == nil {
		ans.id = c.Identity
		err = g.Check(c.Identity, a)
	}
	if err != nil {
		_, ans.status = api.CodeOf(err)
		ans.msg = err.Error()
		auth.Challenge(ans.header, err)
	}
	return ans
}

// checkAnswer checks the parts of an answer every status shares: a refusal
// has a message without any secret in it and closes the connection, and
// only a 401 carries a Bearer challenge.
func checkAnswer(t *testing.T, ans answer, want int, secrets ...string) {
	t.Helper()
	if ans.status != want {
		t.Fatalf("status %d, want %d (%q)", ans.status, want, ans.msg)
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(ans.msg, s) {
			t.Fatalf("message %q repeats a token", ans.msg)
		}
	}
	challenge := ans.header.Get("WWW-Authenticate")
	if want == noCred && !strings.HasPrefix(challenge, "Bearer") {
		t.Fatalf("401 with WWW-Authenticate %q, want a Bearer challenge", challenge)
	}
	if want != noCred && challenge != "" {
		t.Fatalf("status %d with WWW-Authenticate %q", want, challenge)
	}
	if want == pass {
		return
	}
	if ans.msg == "" || ans.header.Get("Connection") != "close" {
		t.Fatalf("refusal with message %q and Connection %q, want a message and close", ans.msg, ans.header.Get("Connection"))
	}
}

func TestGuardPolicies(t *testing.T) {
	p := newPeers(t)
	tokens := auth.Config{OperatorToken: opTok, SubmitToken: subTok}
	driverTok := newGuard(t, tokens).DriverToken(driverID, 2)
	if driverTok == "" {
		t.Fatal("no driver token with tokens configured")
	}
	bearer := func(tok string) string { return "Bearer " + tok }
	secrets := []string{opTok, subTok, nodeTok, driverTok, masterCred}

	var (
		open         = auth.Config{}
		tlsOnly      = auth.Config{TLS: true}
		tlsTokens    = auth.Config{TLS: true, OperatorToken: opTok, SubmitToken: subTok}
		openReads    = auth.Config{OperatorToken: opTok, SubmitToken: subTok, OpenReads: true}
		tlsOpenReads = auth.Config{TLS: true, OperatorToken: opTok, SubmitToken: subTok, OpenReads: true}
		keyed        = auth.Config{OperatorToken: opTok, SubmitToken: subTok, MasterCredential: masterCred}
		nodeTokens   = auth.Config{OperatorToken: opTok, SubmitToken: subTok, NodeToken: nodeTok}
		nodeOnly     = auth.Config{NodeToken: nodeTok}
		nodeKeyed    = auth.Config{NodeToken: nodeTok, MasterCredential: masterCred}
		nodeReads    = auth.Config{OperatorToken: opTok, SubmitToken: subTok, NodeToken: nodeTok, OpenReads: true}
		tlsNode      = auth.Config{TLS: true, OperatorToken: opTok, SubmitToken: subTok, NodeToken: nodeTok}
	)
	none := cred{}
	unknownTok := bearer("NotAnyConfiguredToken-0123")

	// Rows are Read, AppRead, App, Submit, Operator, Node, BlobRead.
	cases := []struct {
		name string
		cfg  auth.Config
		cred cred
		want statuses
	}{
		{"open/anonymous", open, none, all(pass)},
		{"open/worker cert", open, cred{tls: p.worker}, all(pass)},
		// A token on an open master is refused rather than ignored, so a
		// caller who believes it is authenticating hears otherwise.
		{"open/token", open, cred{header: bearer(opTok)}, all(denied)},

		{"tokens/anonymous", tokens, none, all(noCred)},
		{"tokens/operator", tokens, cred{header: bearer(opTok)}, all(pass)},
		{"tokens/submit", tokens, cred{header: bearer(subTok)}, statuses{pass, pass, pass, pass, denied, denied, pass}},
		{"tokens/driver", tokens, cred{header: bearer(driverTok)}, statuses{denied, pass, pass, denied, denied, denied, denied}},
		{"tokens/unknown token", tokens, cred{header: unknownTok}, all(denied)},
		// Without TLS in the policy a certificate is no credential, even
		// when the connection happens to carry one.
		{"tokens/master cert ignored", tokens, cred{tls: p.master}, all(noCred)},
		{"tokens/bearer scheme in lower case", tokens, cred{header: "bearer " + subTok}, statuses{pass, pass, pass, pass, denied, denied, pass}},

		{"tls/anonymous", tlsOnly, none, all(noCred)},
		{"tls/client cert", tlsOnly, cred{tls: p.client}, statuses{pass, pass, pass, pass, pass, denied, pass}},
		{"tls/master cert", tlsOnly, cred{tls: p.master}, all(pass)},
		{"tls/worker cert", tlsOnly, cred{tls: p.worker}, statuses{denied, denied, denied, denied, denied, pass, pass}},
		{"tls/unverified client cert", tlsOnly, cred{tls: p.unverified}, all(noCred)},
		{"tls/token without tokens configured", tlsOnly, cred{tls: p.client, header: bearer(opTok)}, all(denied)},

		{"tls+tokens/anonymous", tlsTokens, none, all(noCred)},
		{"tls+tokens/client cert", tlsTokens, cred{tls: p.client}, statuses{noCred, noCred, noCred, noCred, noCred, denied, noCred}},
		{"tls+tokens/master cert", tlsTokens, cred{tls: p.master}, statuses{noCred, noCred, noCred, noCred, noCred, pass, pass}},
		{"tls+tokens/worker cert", tlsTokens, cred{tls: p.worker}, statuses{noCred, noCred, noCred, noCred, noCred, pass, pass}},
		// Under TLS, Node is the certificate's to grant, not a token's.
		{"tls+tokens/operator", tlsTokens, cred{header: bearer(opTok)}, statuses{pass, pass, pass, pass, pass, denied, pass}},
		{"tls+tokens/client cert and submit", tlsTokens, cred{tls: p.client, header: bearer(subTok)}, statuses{pass, pass, pass, pass, denied, denied, pass}},
		{"tls+tokens/worker cert and submit", tlsTokens, cred{tls: p.worker, header: bearer(subTok)}, statuses{pass, pass, pass, pass, denied, pass, pass}},
		{"tls+tokens/master cert and unknown token", tlsTokens, cred{tls: p.master, header: unknownTok}, all(denied)},
		{"tls+tokens/driver", tlsTokens, cred{header: bearer(driverTok)}, statuses{denied, pass, pass, denied, denied, denied, denied}},

		{"open reads/anonymous", openReads, none, statuses{pass, pass, noCred, noCred, noCred, noCred, noCred}},
		{"open reads/submit", openReads, cred{header: bearer(subTok)}, statuses{pass, pass, pass, pass, denied, denied, pass}},
		// A wrong token is never downgraded to the anonymous reader.
		{"open reads/unknown token", openReads, cred{header: unknownTok}, all(denied)},
		{"tls+open reads/anonymous", tlsOpenReads, none, statuses{pass, pass, noCred, noCred, noCred, noCred, noCred}},
		{"tls+open reads/worker cert", tlsOpenReads, cred{tls: p.worker}, statuses{pass, pass, noCred, noCred, noCred, pass, pass}},

		// Without TLS the master credential grants what a master
		// certificate grants with it.
		{"tokens+key/master credential", keyed, cred{master: masterCred}, statuses{noCred, noCred, noCred, noCred, noCred, pass, pass}},
		{"tokens+key/master credential and submit", keyed, cred{master: masterCred, header: bearer(subTok)}, statuses{pass, pass, pass, pass, denied, pass, pass}},
		{"tokens+key/operator", keyed, cred{header: bearer(opTok)}, all(pass)},
		{"tokens+key/wrong master credential", keyed, cred{master: "NotTheMasterCredential-0123", header: bearer(opTok)}, all(denied)},
		{"tokens+key/truncated master credential", keyed, cred{master: masterCred[:len(masterCred)-1]}, all(denied)},
		{"tokens/master credential not configured", tokens, cred{master: masterCred}, all(noCred)},
		{"tls+tokens/master credential ignored", tlsTokens, cred{tls: p.worker, master: masterCred}, statuses{noCred, noCred, noCred, noCred, noCred, pass, pass}},
		// The node token is worker traffic and upload reads, nothing else;
		// the operator token keeps worker traffic for older workers.
		{"node token/node", nodeTokens, cred{header: bearer(nodeTok)}, statuses{denied, denied, denied, denied, denied, pass, pass}},
		{"node token/operator", nodeTokens, cred{header: bearer(opTok)}, all(pass)},
		{"node token/submit", nodeTokens, cred{header: bearer(subTok)}, statuses{pass, pass, pass, pass, denied, denied, pass}},
		{"node token/anonymous", nodeTokens, none, all(noCred)},
		{"node token alone/node", nodeOnly, cred{header: bearer(nodeTok)}, statuses{denied, denied, denied, denied, denied, pass, pass}},
		{"node token alone/anonymous", nodeOnly, none, statuses{noCred, noCred, noCred, noCred, noCred, noCred, noCred}},
		// Without TLS the master credential crosses the network on every
		// forwarded request: it proves a master, never an operator, even
		// where no API token is configured to prove one.
		{"node token+key/master credential", nodeKeyed, cred{master: masterCred}, statuses{noCred, noCred, noCred, noCred, noCred, pass, pass}},
		// With open reads it reads as anyone does, and no more.
		{"node token+open reads/node", nodeReads, cred{header: bearer(nodeTok)}, statuses{pass, pass, denied, denied, denied, pass, pass}},
		// Under TLS the worker certificate is the node credential.
		{"tls+node token/node", tlsNode, cred{header: bearer(nodeTok)}, all(denied)},
		{"tls+node token/worker cert", tlsNode, cred{tls: p.worker}, statuses{noCred, noCred, noCred, noCred, noCred, pass, pass}},
		// Which worker a certificate may act as is CheckWorker's to say.
		{"tls+tokens/unbound worker cert", tlsTokens, cred{tls: p.unbound}, statuses{noCred, noCred, noCred, noCred, noCred, pass, pass}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := newGuard(t, tc.cfg)
			for i, a := range accesses {
				want := tc.want[i]
				t.Run(a.String(), func(t *testing.T) {
					ans := serve(g, a, tc.cred.request())
					checkAnswer(t, ans, want, secrets...)

					id, err := g.Identify(tc.cred.request())
					if err != nil {
						if want != denied {
							t.Fatalf("Identify: %v, but the listener should answer %d", err, want)
						}
						return
					}
					if got := g.Allows(id, a); got != (want == pass) {
						t.Fatalf("Allows(%v, %v) = %v, want %v", id, a, got, want == pass)
					}
					if want == pass && ans.id.String() != id.String() {
						t.Fatalf("handler saw identity %+v, Identify gives %+v", ans.id, id)
					}
				})
			}
		})
	}
}

// A token in the drover_token cookie grants at most reads, whatever the
// token: a browser sends the cookie with requests other sites make it send,
// so a cookie must never submit, kill or drive anything. A certificate
// beside it still counts, a header beats it, and a master without tokens
// ignores it.
func TestCookieGrantsReadsOnly(t *testing.T) {
	p := newPeers(t)
	tokens := auth.Config{OperatorToken: opTok, SubmitToken: subTok}
	tlsTokens := auth.Config{TLS: true, OperatorToken: opTok, SubmitToken: subTok}
	driverTok := newGuard(t, tokens).DriverToken(driverID, 1)
	secrets := []string{opTok, subTok, driverTok}
	reads := statuses{pass, pass, denied, denied, denied, denied, denied}

	// Rows are Read, AppRead, App, Submit, Operator, Node, BlobRead.
	cases := []struct {
		name string
		cfg  auth.Config
		cred cred
		want statuses
	}{
		{"operator", tokens, cred{cookie: opTok}, reads},
		{"submit", tokens, cred{cookie: subTok}, reads},
		{"driver", tokens, cred{cookie: driverTok}, statuses{denied, pass, denied, denied, denied, denied, denied}},
		{"unknown token", tokens, cred{cookie: "NotAnyConfiguredToken-0123"}, all(denied)},
		{"header wins", tokens, cred{header: "Bearer " + subTok, cookie: opTok}, statuses{pass, pass, pass, pass, denied, denied, pass}},
		{"bad header beside a good cookie", tokens, cred{header: "Bearer NotAnyConfiguredToken-0123", cookie: opTok}, all(denied)},
		{"worker cert and operator cookie", tlsTokens, cred{tls: p.worker, cookie: opTok}, statuses{pass, pass, denied, denied, denied, pass, pass}},
		{"open master ignores it", auth.Config{}, cred{cookie: "NotAnyConfiguredToken-0123"}, all(pass)},
		{"no tokens ignores it", auth.Config{TLS: true}, cred{tls: p.client, cookie: opTok}, statuses{pass, pass, pass, pass, pass, denied, pass}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := newGuard(t, tc.cfg)
			for i, a := range accesses {
				t.Run(a.String(), func(t *testing.T) {
					ans := serve(g, a, tc.cred.request())
					checkAnswer(t, ans, tc.want[i], secrets...)
					if ans.status == pass && ans.id.Cookie != (tc.cred.cookie != "" && tc.cred.header == "" && g.Tokens()) {
						t.Fatalf("identity %+v: Cookie not set as the request says", ans.id)
					}
				})
			}
		})
	}

	// The refusal names the cookie, so a person sees why an operator
	// token does not submit from a browser.
	ans := serve(newGuard(t, tokens), auth.Submit, cred{cookie: opTok}.request())
	if !strings.Contains(ans.msg, auth.CookieName) {
		t.Fatalf("403 message %q does not mention the cookie", ans.msg)
	}
}

// A request counts as forwarded only from a master: with TLS, a master
// certificate; without, the master credential. From anyone else the
// header is ignored and the request is its caller's own, bounded as such;
// an open master honours it from anyone. The credential a forwarded
// request carries on is the caller's own, in the form it came.
func TestCallerForwarded(t *testing.T) {
	p := newPeers(t)
	tlsTokens := newGuard(t, auth.Config{TLS: true, OperatorToken: opTok, SubmitToken: subTok})
	keyed := newGuard(t, auth.Config{OperatorToken: opTok, SubmitToken: subTok, MasterCredential: masterCred})
	open := newGuard(t, auth.Config{})
	submit := "Bearer " + subTok
	for _, tc := range []struct {
		name      string
		g         *auth.Guard
		cred      cred
		forwarded bool
	}{
		{"TLS/master certificate", tlsTokens, cred{tls: p.master, header: submit}, true},
		{"TLS/worker certificate", tlsTokens, cred{tls: p.worker, header: submit}, false},
		{"TLS/client certificate", tlsTokens, cred{tls: p.client, header: submit}, false},
		{"TLS/no certificate", tlsTokens, cred{header: submit}, false},
		{"TLS/master credential without certificate", tlsTokens, cred{header: submit, master: masterCred}, false},
		{"tokens/master credential", keyed, cred{header: submit, master: masterCred}, true},
		{"tokens/master credential alone", keyed, cred{master: masterCred}, true},
		{"tokens/submit token", keyed, cred{header: submit}, false},
		{"tokens/operator token", keyed, cred{header: "Bearer " + opTok}, false},
		{"open/anyone", open, cred{}, true},
	} {
		// m1: the master certificate is m1's.
		r := tc.cred.request()
		r.Header.Set(api.HeaderForwarded, "m1")
		c, err := tc.g.Caller(r)
		if err != nil {
			t.Fatalf("%s: Caller: %v", tc.name, err)
		}
		if want := map[bool]string{true: "m1"}[tc.forwarded]; c.ForwardedBy != want {
			t.Fatalf("%s: ForwardedBy %q, want %q", tc.name, c.ForwardedBy, want)
		}
	}
	// A wrong master credential is refused, forwarded or not.
	r := cred{header: submit, master: "NotTheMasterCredential-0123"}.request()
	r.Header.Set(api.HeaderForwarded, "m2")
	if c, err := keyed.Caller(r); !errors.Is(err, api.ErrForbidden) || strings.Contains(err.Error(), masterCred) {
		t.Fatalf("wrong master credential: %+v, %v; want 403", c, err)
	}
	g := tlsTokens

	for _, tc := range []struct {
		name           string
		cred           cred
		header, cookie string
		cert           string
	}{
		{"header", cred{header: "Bearer " + subTok}, "Bearer " + subTok, "", ""},
		{"cookie", cred{cookie: opTok}, "", opTok, ""},
		{"none", cred{tls: p.client}, "", "", "drover://client"},
		{"worker", cred{tls: p.worker}, "", "", "drover://worker/w1"},
		{"unbound worker", cred{tls: p.unbound}, "", "", "drover://worker"},
	} {
		c, err := g.Caller(tc.cred.request())
		if err != nil {
			t.Fatal(err)
		}
		out := httptest.NewRequest(http.MethodGet, "/", nil)
		c.SetCredential(out.Header)
		got, _ := out.Cookie(auth.CookieName)
		if out.Header.Get("Authorization") != tc.header || (got == nil) != (tc.cookie == "") || (got != nil && got.Value != tc.cookie) {
			t.Fatalf("%s: forwarded Authorization %q, cookie %v", tc.name, out.Header.Get("Authorization"), got)
		}
		if cert := out.Header.Get(api.HeaderForwardedCert); cert != tc.cert {
			t.Fatalf("%s: forwarded %s %q, want %q", tc.name, api.HeaderForwardedCert, cert, tc.cert)
		}
		if strings.Contains(c.String(), subTok) || strings.Contains(c.String(), opTok) {
			t.Fatalf("%s: %s shows a token", tc.name, c)
		}
	}
}

// A caller's client is its own address, unless a master forwarded the
// request (m1, whose certificate the master's is): then it is the address
// the forwarding master names, none when it names none. A caller that is not a master cannot name one: its
// request is its own, from its own address.
func TestCallerClient(t *testing.T) {
	p := newPeers(t)
	g := newGuard(t, auth.Config{TLS: true, OperatorToken: opTok, SubmitToken: subTok})
	for _, tc := range []struct {
		name               string
		tls                *tls.ConnectionState
		forwarded, client  string
		want               string
		invalid, forbidden bool
	}{
		{name: "straight", tls: p.client, want: "192.0.2.1"},
		{name: "straight, naming another client", tls: p.client, client: "10.0.0.9", want: "192.0.2.1"},
		{name: "forwarded", tls: p.master, forwarded: "m1", client: "10.0.0.9", want: "10.0.0.9"},
		{name: "forwarded, IPv6", tls: p.master, forwarded: "m1", client: "2001:db8::1", want: "2001:db8::1"},
		{name: "forwarded by an older master", tls: p.master, forwarded: "m1", want: ""},
		{name: "forwarded, not an address", tls: p.master, forwarded: "m1", client: "10.0.0.9; drop", invalid: true},
		{name: "forwarded by a worker", tls: p.worker, forwarded: "m1", client: "10.0.0.9", want: "192.0.2.1"},
		{name: "forwarded by a client", tls: p.client, forwarded: "m1", client: "10.0.0.9", want: "192.0.2.1"},
	} {
		r := cred{tls: tc.tls, header: "Bearer " + subTok}.request()
		if tc.forwarded != "" {
			r.Header.Set(api.HeaderForwarded, tc.forwarded)
		}
		if tc.client != "" {
			r.Header.Set(api.HeaderClient, tc.client)
		}
		c, err := g.Caller(r)
		switch {
		case tc.invalid:
			if !errors.Is(err, api.ErrInvalidRequest) || !strings.Contains(err.Error(), api.HeaderClient) {
				t.Errorf("%s: %+v, %v; want invalid request naming %s", tc.name, c, err, api.HeaderClient)
			}
		case err != nil || c.Client != tc.want:
			t.Errorf("%s: client %q, %v; want %q", tc.name, c.Client, err, tc.want)
		}
	}
}

func TestOpen(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  auth.Config
		want bool
	}{
		{"nothing", auth.Config{}, true},
		{"open reads alone", auth.Config{OpenReads: true}, true},
		{"TLS", auth.Config{TLS: true}, false},
		{"operator token", auth.Config{OperatorToken: opTok}, false},
		{"submit token", auth.Config{SubmitToken: subTok}, false},
		{"node token", auth.Config{NodeToken: nodeTok}, false},
	} {
		if got := newGuard(t, tc.cfg).Open(); got != tc.want {
			t.Errorf("%s: Open() = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A caller without any credential is refused before its write is read
// where the masters require one, and only there; a token (even one only
// in a cookie, which Check then confines to reads) or a certificate is a
// credential.
func TestCheckCredential(t *testing.T) {
	secured, tls, open := newGuard(t, auth.Config{SubmitToken: subTok, OpenReads: true}), newGuard(t, auth.Config{TLS: true}), newGuard(t, auth.Config{})
	for _, tc := range []struct {
		name string
		g    *auth.Guard
		id   auth.Identity
		ok   bool
	}{
		{"nobody, tokens required", secured, auth.Identity{}, false},
		{"nobody, certificates required", tls, auth.Identity{}, false},
		{"nobody, open cluster", open, auth.Identity{}, true},
		{"submit token", secured, auth.Identity{Token: auth.SubmitToken}, true},
		{"token in a cookie", secured, auth.Identity{Token: auth.SubmitToken, Cookie: true}, true},
		{"worker certificate", tls, auth.Identity{Role: pki.RoleWorker}, true},
	} {
		err := tc.g.CheckCredential(tc.id)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, api.ErrUnauthenticated)) {
			t.Errorf("%s: %v, want allowed %v", tc.name, err, tc.ok)
		}
	}
}

// swapCase turns every letter of s into the other case.
func swapCase(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		}
		return r
	}, s)
}

// withMAC returns a driver token for id and attempt carrying mac, as a
// forger who copied another token's MAC would build it.
func withMAC(id, attempt, mac string) string { return "drv." + id + "." + attempt + "." + mac }

func TestRejectedCredentials(t *testing.T) {
	cfg := auth.Config{OperatorToken: opTok, SubmitToken: subTok}
	g := newGuard(t, cfg)
	good := g.DriverToken(driverID, 2)
	mac := good[strings.LastIndexByte(good, '.')+1:]
	// Flip one MAC character to another of the base64url alphabet.
	flipped := []byte(mac)
	if flipped[0] == 'A' {
		flipped[0] = 'B'
	} else {
		flipped[0] = 'A'
	}
	other := newGuard(t, auth.Config{OperatorToken: opTok, SubmitToken: "AnotherSubmitToken-987654"})

	// Without this, every forgery below could pass for the wrong reason.
	if ans := serve(g, auth.App, cred{header: "Bearer " + good}.request()); ans.status != pass {
		t.Fatalf("genuine driver token: status %d (%s)", ans.status, ans.msg)
	}
	if ans := serve(g, auth.Submit, cred{header: "Bearer " + subTok}.request()); ans.status != pass {
		t.Fatalf("genuine submit token: status %d (%s)", ans.status, ans.msg)
	}

	for _, tc := range []struct{ name, header string }{
		{"wrong token", "Bearer WrongTokenWrongToken-42"},
		{"truncated submit token", "Bearer " + subTok[:len(subTok)-1]},
		{"submit token in other case", "Bearer " + swapCase(subTok)},
		{"submit token with a suffix", "Bearer " + subTok + "x"},
		{"basic scheme", "Basic " + subTok},
		{"basic credentials", "Basic dXNlcjpTdWJtaXRUb2stYWJjZGVmZ2hpajAxMjM0NTY="},
		{"scheme without token", "Bearer"},
		{"empty bearer token", "Bearer "},
		{"token without scheme", subTok},
		{"driver MAC char changed", "Bearer " + withMAC(driverID, "2", string(flipped))},
		{"driver other attempt", "Bearer " + withMAC(driverID, "3", mac)},
		{"driver other driver", "Bearer " + withMAC("driver-20240101000000-8", "2", mac)},
		{"driver attempt with leading zero", "Bearer " + withMAC(driverID, "02", mac)},
		{"driver attempt with plus sign", "Bearer " + withMAC(driverID, "+2", mac)},
		{"driver token truncated", "Bearer " + good[:len(good)-1]},
		{"driver token without MAC", "Bearer drv." + driverID + ".2"},
		{"driver token in other case", "Bearer " + swapCase(good)},
		{"driver token of another key", "Bearer " + other.DriverToken(driverID, 2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.header
			presented := h
			if _, tok, found := strings.Cut(h, " "); found {
				presented = tok
			}
			if len(presented) < auth.MinTokenLen {
				// Too short to tell a leak from a word of the message.
				presented = ""
			}
			for _, a := range []auth.Access{auth.Read, auth.AppRead, auth.App, auth.Submit} {
				ans := serve(g, a, cred{header: h}.request())
				checkAnswer(t, ans, denied, opTok, subTok, good, mac, string(flipped), presented)
			}
			_, err := g.Identify(cred{header: h}.request())
			if !errors.Is(err, auth.ErrBadToken) {
				t.Fatalf("Identify: %v, want ErrBadToken", err)
			}
			// A header of another form says what form it needs, not
			// that its token is unknown.
			want := "forbidden: unknown or revoked token"
			if !strings.HasPrefix(h, "Bearer ") || len(h) == len("Bearer ") {
				want = `forbidden: the Authorization header must be "Bearer <token>"`
			}
			if err.Error() != want {
				t.Fatalf("Identify: %q, want %q", err, want)
			}
		})
	}
}

// A request with several Authorization headers is refused 400 in one
// line, whatever they hold, before any token is looked at: which one
// counts would be the master's guess, and a proxy may guess otherwise.
// The operator token first and a wrong one after are refused as two
// wrong ones are, and no refusal repeats a token.
func TestSeveralAuthorizationHeaders(t *testing.T) {
	g := newGuard(t, auth.Config{OperatorToken: opTok, SubmitToken: subTok})
	for _, hs := range [][]string{
		{"Bearer " + opTok, "Bearer WrongTokenWrongToken-42"},
		{"Bearer " + subTok, "Bearer " + subTok},
		{"Bearer WrongTokenWrongToken-42", "Bearer " + opTok, ""},
	} {
		r := cred{}.request()
		for _, h := range hs {
			r.Header.Add("Authorization", h)
		}
		ans := serve(g, auth.Read, r)
		checkAnswer(t, ans, http.StatusBadRequest, opTok, subTok)
		if want := fmt.Sprintf("%d Authorization headers, want one", len(hs)); ans.msg != want {
			t.Errorf("%d headers: %q, want %q", len(hs), ans.msg, want)
		}
	}
	r := cred{header: "Bearer " + opTok}.request()
	checkAnswer(t, serve(g, auth.Operator, r), pass)
}

func TestDriverToken(t *testing.T) {
	cfg := auth.Config{OperatorToken: opTok, SubmitToken: subTok}
	g := newGuard(t, cfg)
	tok := g.DriverToken(driverID, 2)
	if !strings.HasPrefix(tok, "drv."+driverID+".2.") {
		t.Fatalf("driver token %q lacks the drv.<id>.<attempt>. prefix", tok)
	}
	if err := auth.CheckToken(tok); err != nil {
		t.Fatalf("driver token fails CheckToken: %v", err)
	}
	if tok == g.DriverToken(driverID, 3) || tok == g.DriverToken("driver-20240101000000-8", 2) {
		t.Fatal("driver tokens of different attempts coincide")
	}

	// Another master with the same tokens must accept it, or a driver
	// would lose its access when the leader changes.
	id, err := newGuard(t, cfg).Identify(cred{header: "Bearer " + tok}.request())
	if err != nil {
		t.Fatalf("another master refuses the token: %v", err)
	}
	if id.Token != auth.DriverToken || id.DriverID != driverID || id.Attempt != 2 {
		t.Fatalf("identity %+v, want the driver token of %s attempt 2", id, driverID)
	}
	if strings.Contains(id.String(), tok) {
		t.Fatalf("Identity.String() %q repeats the token", id.String())
	}

	for _, tc := range []struct {
		driver  string
		attempt int
		want    bool
	}{
		{driverID, 2, true},
		{driverID, 1, false},
		{driverID, 3, false},
		{"driver-20240101000000-8", 2, false},
		{"", 2, false},
	} {
		if got := id.OwnsDriver(tc.driver, tc.attempt); got != tc.want {
			t.Errorf("OwnsDriver(%q, %d) = %v, want %v", tc.driver, tc.attempt, got, tc.want)
		}
	}
	for _, other := range []auth.Identity{{}, {Token: auth.OperatorToken}, {Token: auth.SubmitToken}, {Role: pki.RoleClient}} {
		if !other.OwnsDriver(driverID, 1) {
			t.Errorf("%v may not act for a driver", other)
		}
	}

	if tok := newGuard(t, auth.Config{TLS: true}).DriverToken(driverID, 1); tok != "" {
		t.Fatalf("driver token %q without any token configured", tok)
	}
	opOnly := newGuard(t, auth.Config{OperatorToken: opTok})
	if _, err := opOnly.Identify(cred{header: "Bearer " + opOnly.DriverToken(driverID, 1)}.request()); err != nil {
		t.Fatalf("driver token with only an operator token configured: %v", err)
	}
}

func TestCheckToken(t *testing.T) {
	valid := strings.Repeat("a", auth.MinTokenLen)
	for _, tc := range []struct {
		name, tok string
		ok        bool
	}{
		{"empty", "", false},
		{"one short", valid[1:], false},
		{"shortest", valid, true},
		{"longest", strings.Repeat("Z", api.MaxTokenLen), true},
		{"one too long", strings.Repeat("Z", api.MaxTokenLen+1), false},
		{"alphabet", "ABCXYZabcxyz0189-._~+/==", true},
		{"space", "abcdefgh ijklmnopq", false},
		{"colon", "abcdefgh:ijklmnopq", false},
		{"newline", "abcdefghijklmnopq\n", false},
		{"NUL", "abcdefgh\x00ijklmnopq", false},
		{"non-ASCII", "abcdefghijklmnopé", false},
		{"quote", `abcdefgh"ijklmnopq`, false},
	} {
		err := auth.CheckToken(tc.tok)
		if (err == nil) != tc.ok {
			t.Errorf("%s: CheckToken = %v, want ok=%v", tc.name, err, tc.ok)
			continue
		}
		if err != nil && len(tc.tok) > 0 && strings.Contains(err.Error(), tc.tok) {
			t.Errorf("%s: error %q repeats the token", tc.name, err)
		}
	}
}

func TestLoadToken(t *testing.T) {
	const env = "DROVER_AUTH_TEST_TOKEN"
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}

	t.Run("file trimmed", func(t *testing.T) {
		t.Setenv(env, "EnvTokenMustNotWin-12345")
		got, err := auth.LoadToken(write("tok", "\n\t "+subTok+" \r\n"), env)
		if err != nil || got != subTok {
			t.Fatalf("LoadToken = %q, %v; want the file's token", got, err)
		}
	})
	t.Run("env trimmed", func(t *testing.T) {
		t.Setenv(env, "  "+opTok+"\n")
		got, err := auth.LoadToken("", env)
		if err != nil || got != opTok {
			t.Fatalf("LoadToken = %q, %v; want the variable's token", got, err)
		}
	})
	t.Run("nothing given", func(t *testing.T) {
		t.Setenv(env, "")
		if got, err := auth.LoadToken("", env); got != "" || err != nil {
			t.Fatalf("LoadToken = %q, %v; want none", got, err)
		}
	})
	t.Run("empty file", func(t *testing.T) {
		path := write("empty", " \n\t\n")
		if got, err := auth.LoadToken(path, env); err == nil || got != "" {
			t.Fatalf("LoadToken = %q, %v; want an error", got, err)
		} else if !strings.Contains(err.Error(), path) {
			t.Fatalf("error %q does not name the file", err)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		got, err := auth.LoadToken(filepath.Join(dir, "absent"), env)
		if !errors.Is(err, fs.ErrNotExist) || got != "" {
			t.Fatalf("LoadToken = %q, %v; want fs.ErrNotExist", got, err)
		}
	})
	// Invalid tokens are refused without echoing them: logs and terminals
	// are read by more people than the token file.
	for _, bad := range []string{"SecretButShort", "Secret!Value-With-Bang", strings.Repeat("SecretLong", 20)} {
		t.Run("invalid file token "+bad[:8], func(t *testing.T) {
			got, err := auth.LoadToken(write("bad", bad+"\n"), env)
			if err == nil || got != "" {
				t.Fatalf("LoadToken = %q, %v; want an error", got, err)
			}
			if strings.Contains(err.Error(), bad) {
				t.Fatalf("error %q repeats the token", err)
			}
		})
		t.Run("invalid env token "+bad[:8], func(t *testing.T) {
			t.Setenv(env, bad)
			got, err := auth.LoadToken("", env)
			if err == nil || got != "" {
				t.Fatalf("LoadToken = %q, %v; want an error", got, err)
			}
			if strings.Contains(err.Error(), bad) {
				t.Fatalf("error %q repeats the token", err)
			}
			if !strings.Contains(err.Error(), "$"+env) {
				t.Fatalf("error %q does not name the variable", err)
			}
		})
	}
}

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  auth.Config
		ok   bool
	}{
		{"no tokens", auth.Config{}, true},
		{"both tokens", auth.Config{OperatorToken: opTok, SubmitToken: subTok}, true},
		{"same token twice", auth.Config{OperatorToken: subTok, SubmitToken: subTok}, false},
		{"all three tokens", auth.Config{OperatorToken: opTok, SubmitToken: subTok, NodeToken: nodeTok}, true},
		{"node token as the operator's", auth.Config{OperatorToken: opTok, SubmitToken: subTok, NodeToken: opTok}, false},
		{"node token as the submit token", auth.Config{OperatorToken: opTok, SubmitToken: subTok, NodeToken: subTok}, false},
		{"short node token", auth.Config{NodeToken: "ShortNode"}, false},
		{"short operator token", auth.Config{OperatorToken: "ShortOperator", SubmitToken: subTok}, false},
		{"short submit token", auth.Config{OperatorToken: opTok, SubmitToken: "ShortSubmit"}, false},
		{"bad character", auth.Config{SubmitToken: "Submit Token With Spaces"}, false},
	} {
		g, err := auth.New(tc.cfg)
		if (err == nil) != tc.ok {
			t.Errorf("%s: New = %v, want ok=%v", tc.name, err, tc.ok)
			continue
		}
		if err == nil {
			if g == nil {
				t.Errorf("%s: nil Guard without an error", tc.name)
			}
			continue
		}
		for _, tok := range []string{tc.cfg.OperatorToken, tc.cfg.SubmitToken, tc.cfg.NodeToken} {
			if tok != "" && strings.Contains(err.Error(), tok) {
				t.Errorf("%s: error %q repeats a token", tc.name, err)
			}
		}
	}
}

func TestCheckExposure(t *testing.T) {
	for _, ip := range []string{"127.0.0.1", "127.0.0.42", "::1"} {
		warn, err := auth.CheckExposure(ip, false, false, false)
		if err != nil || warn == "" {
			t.Errorf("loopback %s: warning %q, error %v; want a warning and no error", ip, warn, err)
		}
	}
	for _, ip := range []string{"10.0.0.1", "0.0.0.0", "::", "192.168.1.20", ""} {
		warn, err := auth.CheckExposure(ip, false, false, false)
		if err == nil {
			t.Errorf("%q without credentials: no error (warning %q)", ip, warn)
		} else if !strings.Contains(err.Error(), "--insecure") {
			t.Errorf("%q: error %q does not mention --insecure", ip, err)
		}
		warn, err = auth.CheckExposure(ip, false, false, true)
		if err != nil || warn == "" {
			t.Errorf("%q with --insecure: warning %q, error %v; want a warning and no error", ip, warn, err)
		}
		for _, c := range []struct{ tls, tokens bool }{{true, false}, {false, true}, {true, true}} {
			warn, err := auth.CheckExposure(ip, c.tls, c.tokens, false)
			if err != nil || warn != "" {
				t.Errorf("%q with tls=%v tokens=%v: warning %q, error %v; want neither", ip, c.tls, c.tokens, warn, err)
			}
		}
	}
}

// A policy answers anyone, and its listeners check Host, when a caller
// without a credential may do more than ask for health: no TLS, and no
// tokens or open reads. TLS (a browser checks the certificate's names)
// and tokens without open reads close that door.
func TestAnswersAnyone(t *testing.T) {
	const tok = "OperatorTok-0123456789abcdef"
	for _, c := range []struct {
		cfg  auth.Config
		want bool
	}{
		{auth.Config{}, true},
		{auth.Config{OperatorToken: tok, OpenReads: true}, true},
		{auth.Config{OperatorToken: tok}, false},
		{auth.Config{TLS: true}, false},
		{auth.Config{TLS: true, OperatorToken: tok, OpenReads: true}, false},
	} {
		g, err := auth.New(c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := g.AnswersAnyone(); got != c.want {
			t.Errorf("tls=%v tokens=%v open reads=%v: AnswersAnyone %v, want %v",
				c.cfg.TLS, c.cfg.OperatorToken != "", c.cfg.OpenReads, got, c.want)
		}
	}
}

// With TLS or tokens, a node without a gossip key is refused in one line
// that says how to make one; --insecure waives it on loopback only, with
// a warning. Without TLS and tokens, or with a key, there is nothing to
// say.
func TestCheckGossipKey(t *testing.T) {
	for _, c := range []struct{ tls, tokens bool }{{true, false}, {false, true}, {true, true}} {
		for _, ip := range []string{"127.0.0.1", "127.3.4.5", "::1", "10.0.0.1", "0.0.0.0", ""} {
			loopback := strings.HasPrefix(ip, "127.") || ip == "::1"
			for _, insecure := range []bool{false, true} {
				warn, err := auth.CheckGossipKey(ip, c.tls, c.tokens, false, insecure)
				switch {
				case loopback && insecure:
					if err != nil || !strings.Contains(warn, "no gossip key") {
						t.Errorf("%s tls=%v tokens=%v --insecure: warning %q, error %v; want a warning", ip, c.tls, c.tokens, warn, err)
					}
				case err == nil || warn != "" || !strings.Contains(err.Error(), "drover keygen > gossip.key") ||
					!strings.Contains(err.Error(), "--gossip-key-file") || strings.Contains(err.Error(), "--insecure") != loopback:
					t.Errorf("%s tls=%v tokens=%v insecure=%v: warning %q, error %v; want a refusal offering --insecure only on loopback",
						ip, c.tls, c.tokens, insecure, warn, err)
				}
			}
			if warn, err := auth.CheckGossipKey(ip, c.tls, c.tokens, true, false); warn != "" || err != nil {
				t.Errorf("%s with a key: warning %q, error %v", ip, warn, err)
			}
		}
	}
	if warn, err := auth.CheckGossipKey("10.0.0.1", false, false, false, true); warn != "" || err != nil {
		t.Errorf("an open node: warning %q, error %v", warn, err)
	}
}
