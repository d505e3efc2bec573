package master

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/security/auth"
	"github.com/drover-project/drover/security/pki"
)

const (
	scopeOperator = "ScopeOperator-0123456789abcdef"
	scopeSubmit   = "ScopeSubmit-0123456789abcdefgh"
	// Secrets of the ACL tokens the test commits: submit and read in
	// etl, submit in etl and ml, submit in default and etl.
	etlSubmit     = "EtlSubmitSecret-0123456789abc"
	etlRead       = "EtlReadSecret-0123456789abcde"
	etlAndML      = "EtlAndMLSecret-0123456789abcd"
	etlAndDefault = "EtlDefaultSecret-0123456789ab"
)

// scopeMaster is a single master with an operator and a submit token,
// namespaces etl and ml, and the ACL tokens above, committed through its
// service's Apply as the token endpoints would. configure, unless nil,
// changes its configuration first.
func scopeMaster(t *testing.T, configure func(*Config)) *Master {
	t.Helper()
	cfg := singleConfig(t)
	if configure != nil {
		configure(&cfg)
	}
	cfg.OperatorToken, cfg.SubmitToken = scopeOperator, scopeSubmit
	cfg.RaftKey, cfg.GossipKey = pki.NewRaftKey(), []byte("0123456789abcdef")
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	waitReady(t, m)
	for _, ns := range []string{"etl", "ml"} {
		mustApply(t, m, &model.ApplyNamespace{Namespace: model.Namespace{Name: ns, Weight: 1, DriverShare: 0.5, PriorityMax: 100}})
	}
	for _, tok := range []struct {
		secret string
		policy model.TokenPolicy
		ns     []string
	}{
		{etlSubmit, model.PolicySubmit, []string{"etl"}},
		{etlRead, model.PolicyRead, []string{"etl"}},
		{etlAndML, model.PolicySubmit, []string{"etl", "ml"}},
		{etlAndDefault, model.PolicySubmit, []string{"etl", model.DefaultNamespace}},
	} {
		mustApply(t, m, &model.CreateACLToken{Token: model.ACLToken{Accessor: "acc-" + tok.secret[:8], SecretHash: hashOf(tok.secret),
			Policy: tok.policy, Namespaces: tok.ns}, Time: 1})
	}
	return m
}

func hashOf(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

func mustApply(t *testing.T, m *Master, c model.Command) {
	t.Helper()
	if _, err := m.local.Apply(c); err != nil {
		t.Fatalf("%T: %v", c, err)
	}
}

// call makes one request of m's API with token (in the web UI's cookie
// for "cookie:" and the token) and JSON body in (nil for none) and
// returns the status and the body.
func call(t *testing.T, m *Master, method, path, token string, in any) (int, string) {
	t.Helper()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://"+m.HTTPAddr()+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if cookie, ok := strings.CutPrefix(token, "cookie:"); ok {
		req.AddCookie(&http.Cookie{Name: auth.CookieName, Value: cookie})
	} else {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// submitAs submits a driver named name to namespace ns ("" for none)
// with token and returns its ID.
func submitAs(t *testing.T, m *Master, token, name, ns string) string {
	t.Helper()
	req := api.SubmitRequest{Token: name + "-token", Name: name,
		DriverSpec: model.DriverSpec{Argv: []string{"/bin/true"}, Cores: 1, MemoryMB: 64, Namespace: ns}}
	code, body := call(t, m, http.MethodPost, api.PathDrivers, token, req)
	if code != http.StatusOK {
		t.Fatalf("submit %s: %d %s", name, code, body)
	}
	var out api.SubmitResponse
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatal(err)
	}
	return out.DriverID
}

// wantForbidden checks a 403 whose one line names namespace ns.
func wantForbidden(t *testing.T, what string, code int, body, ns string) {
	t.Helper()
	if code != http.StatusForbidden || !strings.Contains(body, "namespace "+ns) || strings.Contains(body, "Secret-") {
		t.Fatalf("%s: %d %s, want 403 naming namespace %s", what, code, body, ns)
	}
}

// A namespace token reads and acts on its namespaces' drivers and apps
// only: one of another namespace is 403 naming it (status, blocking
// read, logs, kill; an app's status, watch, executor logs and kill),
// lists, the state and Spark's /json leave them out, and kill-all kills
// its own only. The static tokens stay global.
func TestNamespaceTokenScope(t *testing.T) {
	m := scopeMaster(t, nil)
	mine := submitAs(t, m, etlSubmit, "mine", "")
	theirs := submitAs(t, m, scopeSubmit, "theirs", "ml")
	if d, _ := m.fsm.State().Driver(mine); d.Namespace != "etl" {
		t.Fatalf("a submission naming no namespace with a token of etl alone went to %q", d.Namespace)
	}

	for _, tok := range []string{etlSubmit, etlRead} {
		code, body := call(t, m, http.MethodGet, api.V1Driver.Path(theirs), tok, nil)
		wantForbidden(t, "status", code, body, "ml")
		code, body = call(t, m, http.MethodGet, api.V1Driver.Path(theirs)+"?index=1&wait=5m", tok, nil)
		wantForbidden(t, "blocking read", code, body, "ml")
		code, body = call(t, m, http.MethodGet, api.V1DriverLogs.Path(theirs), tok, nil)
		wantForbidden(t, "logs", code, body, "ml")
		if code, body := call(t, m, http.MethodGet, api.V1Driver.Path(mine), tok, nil); code != http.StatusOK {
			t.Fatalf("own driver: %d %s", code, body)
		}
	}
	code, body := call(t, m, http.MethodPost, api.V1KillDriver.Path(theirs), etlSubmit, nil)
	wantForbidden(t, "kill", code, body, "ml")
	if d, _ := m.fsm.State().Driver(theirs); d.State.Terminal() {
		t.Fatalf("a refused kill ended %s: %s", theirs, d.State)
	}

	// Lists, the state and /json: the token's rows only; the submit
	// token's: both.
	for _, tc := range []struct {
		token      string
		wantTheirs bool
	}{{etlRead, false}, {scopeSubmit, true}, {scopeOperator, true}} {
		for _, path := range []string{api.PathDrivers, "/v1/state", "/json"} {
			code, body := call(t, m, http.MethodGet, path, tc.token, nil)
			if code != http.StatusOK || !strings.Contains(body, mine) || strings.Contains(body, theirs) != tc.wantTheirs {
				t.Fatalf("%s with token %.8s: %d, shows %s: %v, want %v\n%s", path, tc.token, code, theirs, strings.Contains(body, theirs), tc.wantTheirs, body)
			}
		}
	}

	// /metrics names every namespace: a namespace token may not read it,
	// the submit token may.
	for _, tok := range []string{etlRead, etlSubmit} {
		code, body := call(t, m, http.MethodGet, "/metrics", tok, nil)
		if code != http.StatusForbidden || !strings.Contains(body, "cluster read access denied") {
			t.Fatalf("/metrics with a token of etl: %d %s, want 403 cluster read access denied", code, body)
		}
	}
	if code, body := call(t, m, http.MethodGet, "/metrics", scopeSubmit, nil); code != http.StatusOK {
		t.Fatalf("/metrics with the submit token: %d %.200s", code, body)
	}

	// The web UI, with the token in its cookie: the overview and the
	// drivers' page show the token's rows, a driver of ml is refused.
	for _, path := range []string{"/", "/ui/drivers"} {
		code, body := call(t, m, http.MethodGet, path, "cookie:"+etlSubmit, nil)
		if code != http.StatusOK || !strings.Contains(body, mine) || strings.Contains(body, theirs) {
			t.Fatalf("web UI %s with a token of etl: %d, shows %s: %v", path, code, theirs, strings.Contains(body, theirs))
		}
	}
	code, body = call(t, m, http.MethodGet, "/ui/drivers/"+theirs, "cookie:"+etlSubmit, nil)
	wantForbidden(t, "web UI driver page", code, body, "ml")

	// Apps: one without a driver goes to the token's namespace; one of
	// ml is out of sight and reach.
	reg := func(token, name, ns string) string {
		req := api.RegisterAppRequest{Token: name + "-app", Name: name, Namespace: ns, CoresPerExecutor: 1, MemoryPerExecutorMB: 64, Argv: []string{"/bin/true"}}
		code, body := call(t, m, http.MethodPost, api.PathApps, token, req)
		if code != http.StatusOK {
			t.Fatalf("register %s: %d %s", name, code, body)
		}
		var out api.RegisterAppResponse
		_ = json.Unmarshal([]byte(body), &out)
		return out.AppID
	}
	myApp, theirApp := reg(etlSubmit, "my-app", ""), reg(scopeSubmit, "their-app", "ml")
	if a, _, _ := m.fsm.State().App(myApp); a.Namespace != "etl" {
		t.Fatalf("app registered with a token of etl alone is in %q", a.Namespace)
	}
	for _, tc := range []struct{ method, path string }{
		{http.MethodGet, api.V1App.Path(theirApp)},
		{http.MethodGet, api.ExecutorLogsPath(theirApp, 1)},
		{http.MethodPost, api.V1KillApp.Path(theirApp)},
		{http.MethodGet, api.V1WatchApp.Path(theirApp)},
	} {
		code, body := call(t, m, tc.method, tc.path, etlSubmit, nil)
		wantForbidden(t, tc.path, code, body, "ml")
	}
	code, body = call(t, m, http.MethodGet, api.PathApps, etlRead, nil)
	if code != http.StatusOK || !strings.Contains(body, myApp) || strings.Contains(body, theirApp) {
		t.Fatalf("apps with a token of etl: %d %s", code, body)
	}

	// Kill-all kills the token's namespaces' drivers, and only them.
	code, body = call(t, m, http.MethodPost, api.PathKillAllDrivers, etlSubmit, nil)
	var killed api.KillAllResponse
	_ = json.Unmarshal([]byte(body), &killed)
	if code != http.StatusOK || len(killed.DriverIDs) != 1 || killed.DriverIDs[0] != mine {
		t.Fatalf("kill-all with a token of etl: %d %s, want %s killed alone", code, body, mine)
	}
	if d, _ := m.fsm.State().Driver(theirs); d.State.Terminal() {
		t.Fatalf("kill-all with a token of etl ended %s of ml", theirs)
	}
	// A read token kills nothing.
	code, body = call(t, m, http.MethodPost, api.V1KillDriver.Path(mine), etlRead, nil)
	if code != http.StatusForbidden || !strings.Contains(body, "submit access denied to read token") {
		t.Fatalf("kill with a read token: %d %s", code, body)
	}
}

// A submission with a namespace token names a namespace it grants, or
// none: then the token's only namespace, else default if it grants it,
// else a 403 saying which to name. Nothing is committed by a refusal.
func TestNamespaceTokenSubmissions(t *testing.T) {
	m := scopeMaster(t, nil)
	before := len(m.fsm.State().Drivers())
	req := func(name, ns string) api.SubmitRequest {
		return api.SubmitRequest{Token: name, Name: name, DriverSpec: model.DriverSpec{Argv: []string{"/bin/true"}, Cores: 1, MemoryMB: 64, Namespace: ns}}
	}
	code, body := call(t, m, http.MethodPost, api.PathDrivers, etlSubmit, req("elsewhere", "ml"))
	wantForbidden(t, "submission to ml", code, body, "ml")
	code, body = call(t, m, http.MethodPost, api.PathDrivers, etlAndML, req("unnamed", ""))
	if code != http.StatusForbidden || !strings.Contains(body, "name one of etl, ml") {
		t.Fatalf("submission naming none with a token of etl and ml: %d %s", code, body)
	}
	code, body = call(t, m, http.MethodPost, api.PathDrivers, etlRead, req("reader", "etl"))
	if code != http.StatusForbidden || !strings.Contains(body, "submit access denied") {
		t.Fatalf("submission with a read token: %d %s", code, body)
	}
	if n := len(m.fsm.State().Drivers()); n != before {
		t.Fatalf("refused submissions committed %d drivers", n-before)
	}
	d1 := submitAs(t, m, etlAndDefault, "to-default", "")
	d2 := submitAs(t, m, etlAndML, "to-ml", "ml")
	for id, want := range map[string]string{d1: "", d2: "ml"} {
		if d, _ := m.fsm.State().Driver(id); d.Namespace != want {
			t.Fatalf("%s in namespace %q, want %q", id, d.Namespace, want)
		}
	}
	// A retry key is its namespace's: ml's token reusing the key of
	// etl's driver learns nothing of it and makes nothing; etl's own
	// retry yields its driver.
	d3 := submitAs(t, m, etlSubmit, "etl-key", "etl")
	n := len(m.fsm.State().Drivers())
	code, body = call(t, m, http.MethodPost, api.PathDrivers, etlAndML, req("etl-key-token", "ml"))
	if code != http.StatusConflict || !strings.Contains(body, string(api.CodeTokenInUse)) || strings.Contains(body, d3) {
		t.Fatalf("ml reusing etl's key: %d %s, want 409 token_in_use without the driver", code, body)
	}
	if got := len(m.fsm.State().Drivers()); got != n {
		t.Fatalf("the refused retry made %d drivers", got-n)
	}
	if again := submitAs(t, m, etlSubmit, "etl-key", "etl"); again != d3 {
		t.Fatalf("etl's retry yields %s, want %s", again, d3)
	}
}

// A namespace token's event stream ends once its token is revoked: the
// next change is not sent, an error event is.
func TestRevokedNamespaceTokenEndsItsStream(t *testing.T) {
	m := scopeMaster(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+m.HTTPAddr()+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+etlRead)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("events: %v %v", resp, err)
	}
	defer resp.Body.Close()
	mustApply(t, m, &model.RevokeACLToken{Accessor: "acc-" + etlRead[:8], Time: 2})
	after := submitAs(t, m, etlSubmit, "after", "")
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, after) {
			t.Fatalf("the stream of a revoked token carries %s: %s", after, line)
		}
		if strings.HasPrefix(line, "data:") && strings.Contains(line, "unknown or revoked token") {
			return
		}
	}
	t.Fatalf("the stream of a revoked token ended without saying why: %v", sc.Err())
}

// A namespace token's event stream carries its namespaces' rows and the
// workers', never another namespace's: the ml driver submitted before
// the etl one is killed never shows, and the etl one does.
func TestNamespaceTokenEvents(t *testing.T) {
	m := scopeMaster(t, nil)
	theirs := submitAs(t, m, scopeSubmit, "theirs", "ml")
	mine := submitAs(t, m, etlSubmit, "mine", "")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+m.HTTPAddr()+"/v1/events?index=0", nil)
	req.Header.Set("Authorization", "Bearer "+etlRead)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("events: %d %s", resp.StatusCode, b)
	}
	if code, body := call(t, m, http.MethodPost, api.V1KillDriver.Path(mine), etlSubmit, nil); code != http.StatusOK {
		t.Fatalf("kill: %d %s", code, body)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, theirs) {
			t.Fatalf("the stream of a token of etl carries %s of ml: %s", theirs, line)
		}
		if strings.Contains(line, mine) && strings.Contains(line, `"state":"KILLED"`) {
			return
		}
	}
	t.Fatalf("the stream ended before the kill of %s: %v", mine, sc.Err())
}

// A namespace token lists the namespaces it grants and no other, reads
// their status, and is refused another's, existing or not, with a 403
// naming it; the token list stays the operator's. The static tokens see
// every namespace.
func TestNamespaceTokenSeesItsNamespaces(t *testing.T) {
	m := scopeMaster(t, nil)
	names := func(token string) []string {
		t.Helper()
		code, body := call(t, m, http.MethodGet, api.PathNamespaces, token, nil)
		var ns []api.NamespaceStatus
		if err := json.Unmarshal([]byte(body), &ns); code != http.StatusOK || err != nil {
			t.Fatalf("namespaces with token %.8s: %d %s", token, code, body)
		}
		out := make([]string, len(ns))
		for i, n := range ns {
			out[i] = n.Name
		}
		return out
	}
	for _, tc := range []struct {
		token string
		want  string
	}{
		{etlRead, "etl"},
		{etlAndML, "etl ml"},
		{etlAndDefault, "default etl"},
		{scopeSubmit, "default etl ml"},
		{scopeOperator, "default etl ml"},
	} {
		if got := strings.Join(names(tc.token), " "); got != tc.want {
			t.Errorf("namespaces with token %.8s: %s, want %s", tc.token, got, tc.want)
		}
	}
	if code, body := call(t, m, http.MethodGet, api.V1Namespace.Path("etl"), etlRead, nil); code != http.StatusOK || !strings.Contains(body, `"name":"etl"`) {
		t.Fatalf("status of its own namespace: %d %s", code, body)
	}
	for _, ns := range []string{"ml", model.DefaultNamespace, "nosuch"} {
		code, body := call(t, m, http.MethodGet, api.V1Namespace.Path(ns), etlRead, nil)
		wantForbidden(t, "status of namespace "+ns, code, body, ns)
	}
	code, body := call(t, m, http.MethodGet, api.PathACLTokens, etlSubmit, nil)
	if code != http.StatusForbidden || !strings.Contains(body, "operator access denied") || strings.Contains(body, "acc-"+etlRead[:8]) {
		t.Fatalf("token list with a namespace token: %d %s, want 403", code, body)
	}
}
