package auth_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/security/auth"
)

const (
	nsReadTok   = "NamespaceRead-0123456789abcdef"
	nsSubmitTok = "NamespaceSubmit-0123456789abcd"
	nsOldTok    = "NamespaceExpired-0123456789ab"
)

// aclTable stands for the replicated table of ACL tokens, by the hash of
// their secrets, as fsm.State.ACLTokenBySecretHash serves it; revoke
// drops a row as a RevokeACLToken entry does.
type aclTable struct {
	mu   sync.Mutex
	rows map[string]*model.ACLToken
}

func secretHash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

func newACLTable(now time.Time) *aclTable {
	tab := &aclTable{rows: map[string]*model.ACLToken{}}
	for _, tok := range []struct {
		secret, accessor string
		policy           model.TokenPolicy
		expires          int64
	}{
		{nsReadTok, "acc-read", model.PolicyRead, 0},
		{nsSubmitTok, "acc-submit", model.PolicySubmit, now.Add(time.Hour).UnixMilli()},
		{nsOldTok, "acc-old", model.PolicySubmit, now.UnixMilli()},
	} {
		tab.rows[secretHash(tok.secret)] = &model.ACLToken{Accessor: tok.accessor, Policy: tok.policy, Namespaces: []string{"etl", "ml"}, ExpiresAt: tok.expires}
	}
	return tab
}

func (tab *aclTable) lookup(hash string) (*model.ACLToken, bool) {
	tab.mu.Lock()
	defer tab.mu.Unlock()
	t, ok := tab.rows[hash]
	return t, ok
}

func (tab *aclTable) revoke(secret string) {
	tab.mu.Lock()
	defer tab.mu.Unlock()
	delete(tab.rows, secretHash(secret))
}

// nsGuard is a Guard of cfg that knows tab's tokens, with its clock at
// now.
func nsGuard(t *testing.T, cfg auth.Config, tab *aclTable, now time.Time) *auth.Guard {
	cfg.Now = func() time.Time { return now }
	g := newGuard(t, cfg)
	g.SetACLTokens(tab.lookup, nil)
	return g
}

// A namespace token's policy is a level: read reads (and its
// applications), submit goes up to Submit (applications, uploads and
// their reads), neither ever reaches Operator or Node. A cookie reads
// only. An expired token and a revoked one are refused as a wrong one
// is, the expired one saying so; no refusal repeats a secret. Each
// identity names its accessor, policy and namespaces.
func TestNamespaceTokens(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	tokens := auth.Config{OperatorToken: opTok, SubmitToken: subTok}
	secrets := []string{opTok, subTok, nsReadTok, nsSubmitTok, nsOldTok}
	reads := statuses{pass, pass, denied, denied, denied, denied, denied}
	// Rows are Read, AppRead, App, Submit, Operator, Node, BlobRead.
	cases := []struct {
		name string
		cred cred
		want statuses
	}{
		{"read", cred{header: "Bearer " + nsReadTok}, reads},
		{"submit", cred{header: "Bearer " + nsSubmitTok}, statuses{pass, pass, pass, pass, denied, denied, pass}},
		{"submit in a cookie", cred{cookie: nsSubmitTok}, reads},
		{"expired", cred{header: "Bearer " + nsOldTok}, all(denied)},
		{"unknown", cred{header: "Bearer NamespaceNever-0123456789ab"}, all(denied)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := nsGuard(t, tokens, newACLTable(now), now)
			for i, a := range accesses {
				t.Run(a.String(), func(t *testing.T) {
					ans := serve(g, a, tc.cred.request())
					checkAnswer(t, ans, tc.want[i], secrets...)
					if ans.status == pass && (ans.id.Token != auth.NamespaceToken || !slices.Equal(ans.id.Namespaces, []string{"etl", "ml"})) {
						t.Fatalf("identity %+v, want a namespace token of etl and ml", ans.id)
					}
				})
			}
		})
	}

	g := nsGuard(t, tokens, newACLTable(now), now)
	ans := serve(g, auth.Read, cred{header: "Bearer " + nsOldTok}.request())
	if !strings.Contains(ans.msg, "acc-old expired at 2027-01-15T08:00:00Z") || strings.Count(ans.msg, "\n") > 0 {
		t.Fatalf("expired token refused with %q, want one line naming its accessor and when it expired", ans.msg)
	}
	ans = serve(g, auth.Operator, cred{header: "Bearer " + nsSubmitTok}.request())
	if want := "operator access denied to submit token acc-submit of namespaces etl, ml"; ans.msg != want {
		t.Fatalf("operator refusal %q, want %q", ans.msg, want)
	}
	// An hour later, the submit token has expired too.
	g = nsGuard(t, tokens, newACLTable(now), now.Add(time.Hour))
	checkAnswer(t, serve(g, auth.Read, cred{header: "Bearer " + nsSubmitTok}.request()), denied, secrets...)
}

// A revocation counts at the next request: the Guard asks the table each
// time, and keeps nothing of an earlier answer. An identity proved before
// is refused by Recheck from then on; the static tokens' never are.
func TestNamespaceTokenRevoked(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	tab := newACLTable(now)
	g := nsGuard(t, auth.Config{SubmitToken: subTok}, tab, now)
	r := cred{header: "Bearer " + nsReadTok}
	ans := serve(g, auth.Read, r.request())
	checkAnswer(t, ans, pass)
	before := ans.id
	submitter := serve(g, auth.Submit, cred{header: "Bearer " + subTok}.request()).id
	if err := g.Recheck(before); err != nil {
		t.Fatalf("recheck before the revocation: %v", err)
	}
	tab.revoke(nsReadTok)
	if err := g.Recheck(before); !errors.Is(err, auth.ErrBadToken) {
		t.Fatalf("recheck after the revocation: %v, want %v", err, auth.ErrBadToken)
	}
	if err := g.Recheck(submitter); err != nil {
		t.Fatalf("recheck of the submit token: %v", err)
	}
	ans = serve(g, auth.Read, r.request())
	checkAnswer(t, ans, denied, nsReadTok)
	if want := "forbidden: unknown or revoked token"; ans.msg != want {
		t.Fatalf("revoked token refused with %q, want %q: the table keeps nothing of it to tell it from one never made", ans.msg, want)
	}
	checkAnswer(t, serve(g, auth.Read, cred{cookie: nsReadTok}.request()), denied, nsReadTok)
}

// Namespace tokens count only where API tokens are configured. On a
// master with TLS but no tokens (client certificates are the credential)
// one is refused, saying why; on an open master it is refused too, as any
// bearer token that matches none is. A Guard not yet given a table knows
// no namespace token.
func TestNamespaceTokenNeedsTokenMode(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	p := newPeers(t)
	for _, cfg := range []auth.Config{{TLS: true}, {}} {
		g := nsGuard(t, cfg, newACLTable(now), now)
		c := cred{tls: p.client, header: "Bearer " + nsSubmitTok}
		ans := serve(g, auth.Read, c.request())
		checkAnswer(t, ans, denied, nsSubmitTok)
		if !strings.Contains(ans.msg, "namespace token acc-submit counts only on masters run with an operator or submit token") {
			t.Fatalf("TLS %v: refusal %q does not say namespace tokens need token mode", cfg.TLS, ans.msg)
		}
	}
	g := newGuard(t, auth.Config{SubmitToken: subTok})
	checkAnswer(t, serve(g, auth.Read, cred{header: "Bearer " + nsReadTok}.request()), denied, nsReadTok)
}

// InNamespace confines a namespace token to its namespaces, "" being
// default, and no other identity.
func TestInNamespace(t *testing.T) {
	ns := auth.Identity{Token: auth.NamespaceToken, Namespaces: []string{"etl", model.DefaultNamespace}}
	for _, tc := range []struct {
		id   auth.Identity
		ns   string
		want bool
	}{
		{ns, "etl", true}, {ns, "", true}, {ns, model.DefaultNamespace, true}, {ns, "ml", false},
		{auth.Identity{Token: auth.NamespaceToken, Namespaces: []string{"etl"}}, "", false},
		{auth.Identity{Token: auth.SubmitToken}, "ml", true},
		{auth.Identity{Token: auth.OperatorToken}, "ml", true},
		{auth.Identity{}, "ml", true},
	} {
		if got := tc.id.InNamespace(tc.ns); got != tc.want {
			t.Errorf("%v in %q: %v, want %v", tc.id, tc.ns, got, tc.want)
		}
	}
}

// ClusterRead (/metrics, whose series name every namespace) is Read for
// every caller but a namespace token, of either policy, which reads its
// own namespaces only.
func TestClusterReadRefusesNamespaceTokens(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	g := nsGuard(t, auth.Config{OperatorToken: opTok, SubmitToken: subTok}, newACLTable(now), now)
	for _, tc := range []struct {
		secret string
		want   int
	}{{opTok, pass}, {subTok, pass}, {nsReadTok, denied}, {nsSubmitTok, denied}} {
		ans := serve(g, auth.ClusterRead, cred{header: "Bearer " + tc.secret}.request())
		checkAnswer(t, ans, tc.want, opTok, subTok, nsReadTok, nsSubmitTok)
	}
	if got := auth.ClusterRead.String(); got != "cluster read" {
		t.Fatalf("ClusterRead reads %q", got)
	}
}

// A master that has not caught up with the log cannot tell a token it
// has yet to apply from one never made: it answers a token its table
// lacks 503 (unavailable, so a client tries another master), never
// accepts it, and keeps accepting the tokens it holds and the static
// ones. Once caught up, the unknown token is refused 403 again.
func TestNamespaceTokenWhileCatchingUp(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	var caughtUp atomic.Bool
	g := newGuard(t, auth.Config{OperatorToken: opTok, SubmitToken: subTok, Now: func() time.Time { return now }})
	g.SetACLTokens(newACLTable(now).lookup, caughtUp.Load)
	unknown := "NamespaceNever-0123456789ab"
	for _, tc := range []struct {
		name     string
		caughtUp bool
		cred     cred
		want     int
		msg      string
	}{
		{"unknown while catching up", false, cred{header: "Bearer " + unknown}, http.StatusServiceUnavailable, "unavailable: this master is catching up with the log; try another master or retry"},
		{"unknown cookie while catching up", false, cred{cookie: unknown}, http.StatusServiceUnavailable, "unavailable: this master is catching up with the log; try another master or retry"},
		{"unknown once caught up", true, cred{header: "Bearer " + unknown}, denied, "forbidden: unknown or revoked token"},
		{"known while catching up", false, cred{header: "Bearer " + nsReadTok}, pass, ""},
		{"submit token while catching up", false, cred{header: "Bearer " + subTok}, pass, ""},
		{"operator token while catching up", false, cred{header: "Bearer " + opTok}, pass, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			caughtUp.Store(tc.caughtUp)
			ans := serve(g, auth.Read, tc.cred.request())
			checkAnswer(t, ans, tc.want, unknown, nsReadTok, subTok, opTok)
			if ans.msg != tc.msg {
				t.Fatalf("answer %q, want %q", ans.msg, tc.msg)
			}
		})
	}
}
