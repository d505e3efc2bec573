package systest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/testcluster"
)

// nsCall makes one request of master n's API with token and body (JSON,
// none when nil) and returns the status and the answer.
func nsCall(t *testing.T, n *testcluster.Node, method, path, token string, body any) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		j, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+n.HTTP+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s at %s: %v", method, path, n.ID, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestNamespaceTokensAcrossMasters runs three masters with tokens, a
// worker and Spark's REST protocol; namespaces etl and ml and a submit
// token of each are made with drover operator, as an operator makes
// them. Through every master, leader or follower, etl's token lists
// namespace etl alone and is refused ml's status and the token list; it
// cannot see, kill or read the logs of ml's running driver (403 naming
// ml), through the /v1 API and Spark's REST protocol alike; its /json
// and its event stream leave ml's driver out while they show its own.
// Revoked through DELETE /v1/acl/tokens/{accessor}, one log entry, its
// token is refused by every master within a second of the leader's
// answer: each master is polled until it refuses, and how long each took
// is logged.
func TestNamespaceTokensAcrossMasters(t *testing.T) {
	c, rest := sparkRESTCluster(t, testcluster.Options{Workers: 1, TokensOnly: true},
		"/usr/bin/env {{mainClass}} {{appArgs}}")
	opTok := readToken(t, c.Secrets.OperatorToken)
	must := func(args ...string) string {
		t.Helper()
		out, errOut, code := runDrover(t, c.ClientEnv(), args...)
		if code != 0 {
			t.Fatalf("drover %s: exit %d: %s%s", strings.Join(args, " "), code, out, errOut)
		}
		return out
	}
	tokens := map[string]api.ACLTokenCreated{}
	for _, ns := range []string{"etl", "ml"} {
		must("operator", "namespace", "apply", ns, "--driver-share", "1")
		var tok api.ACLTokenCreated
		if out := must("operator", "token", "create", "--namespace", ns, "--policy", "submit", "--json"); json.Unmarshal([]byte(out), &tok) != nil || tok.Secret == "" {
			t.Fatalf("token create --namespace %s --json: %s", ns, out)
		}
		tokens[ns] = tok
	}
	etlSecret, mlSecret := tokens["etl"].Secret, tokens["ml"].Secret
	for _, m := range c.Masters {
		waitFor(t, 10*time.Second, "master "+m.ID+" takes the namespace tokens", func() bool {
			code, _ := nsCall(t, m, http.MethodGet, api.PathDrivers, etlSecret, nil)
			code2, _ := nsCall(t, m, http.MethodGet, api.PathDrivers, mlSecret, nil)
			return code == http.StatusOK && code2 == http.StatusOK
		})
		code, out := nsCall(t, m, http.MethodGet, api.PathNamespaces, etlSecret, nil)
		var listed []api.NamespaceStatus
		if err := json.Unmarshal([]byte(out), &listed); code != http.StatusOK || err != nil || len(listed) != 1 || listed[0].Name != "etl" {
			t.Fatalf("namespaces at %s with etl's token: %d %s, want etl alone", m.ID, code, out)
		}
		code, out = nsCall(t, m, http.MethodGet, api.V1Namespace.Path("ml"), etlSecret, nil)
		if code != http.StatusForbidden || !strings.Contains(out, "namespace ml") {
			t.Fatalf("ml's status at %s with etl's token: %d %s, want 403 naming ml", m.ID, code, out)
		}
		if code, out = nsCall(t, m, http.MethodGet, api.PathACLTokens, etlSecret, nil); code != http.StatusForbidden {
			t.Fatalf("token list at %s with etl's token: %d %s, want 403", m.ID, code, out)
		}
	}

	leader, err := c.Leader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	submitIn := func(token, name, body string) string {
		req := api.SubmitRequest{Token: name + "-token", Name: name,
			DriverSpec: model.DriverSpec{Argv: []string{"/bin/sh", "-c", body}, Cores: 1, MemoryMB: 64}}
		code, out := nsCall(t, leader, http.MethodPost, api.PathDrivers, token, req)
		if code != http.StatusOK {
			t.Fatalf("submit %s: %d %s", name, code, out)
		}
		var res api.SubmitResponse
		_ = json.Unmarshal([]byte(out), &res)
		return res.DriverID
	}
	theirs := submitIn(mlSecret, "theirs", "echo hello-from-ml; exec sleep 600")
	c.WaitDriver(theirs, 30*time.Second, "ml's driver runs", isState(model.DriverRunning))
	waitFor(t, 20*time.Second, "ml's token reads its driver's log", func() bool {
		code, out := nsCall(t, leader, http.MethodGet, api.DriverPath(theirs, "/logs"), mlSecret, nil)
		return code == http.StatusOK && strings.Contains(out, "hello-from-ml")
	})

	// The event stream is opened before etl's driver is submitted and
	// killed, and read until that kill: ml's driver, in the tables since
	// before, never shows.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.Masters[1].HTTP+api.V1Events.Path("")+"?index=1", nil)
	req.Header.Set("Authorization", "Bearer "+etlSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("events with etl's token: %v %v", resp, err)
	}
	defer resp.Body.Close()
	mine := submitIn(etlSecret, "mine", "exec sleep 600")

	for _, m := range c.Masters {
		for _, tc := range []struct{ method, path string }{
			{http.MethodGet, api.V1Driver.Path(theirs)},
			{http.MethodGet, api.DriverPath(theirs, "/logs")},
			{http.MethodPost, api.V1KillDriver.Path(theirs)},
		} {
			code, out := nsCall(t, m, tc.method, tc.path, etlSecret, nil)
			if code != http.StatusForbidden || !strings.Contains(out, "namespace ml") || strings.Contains(out, "hello-from-ml") {
				t.Fatalf("%s %s at %s with etl's token: %d %s, want 403 naming ml", tc.method, tc.path, m.ID, code, out)
			}
		}
		// Spark's /json is the master's own tables, which a follower
		// brings up to mine's submission once it applies it.
		var out string
		waitFor(t, 10*time.Second, "/json at "+m.ID+" shows etl's driver", func() bool {
			var code int
			code, out = nsCall(t, m, http.MethodGet, "/json", etlSecret, nil)
			return code == http.StatusOK && strings.Contains(out, mine)
		})
		if strings.Contains(out, theirs) {
			t.Fatalf("/json at %s with etl's token shows ml's %s: %s", m.ID, theirs, out)
		}
		for _, path := range []string{"/v1/submissions/status/" + theirs, "/v1/submissions/kill/" + theirs} {
			method := http.MethodGet
			if strings.Contains(path, "kill") {
				method = http.MethodPost
			}
			a := sparkCall(t, http.DefaultClient, "http://"+rest[m.ID]+path, method, etlSecret, "")
			a.isSparkError(t, http.StatusForbidden)
			if !strings.Contains(a.str("message"), "namespace ml") {
				t.Fatalf("Spark REST %s at %s with etl's token: %s, want the message to name ml", path, m.ID, a.raw)
			}
		}
	}
	if d := c.WaitDriver(theirs, time.Second, "ml's driver", func(*model.Driver) bool { return true }); d.State != model.DriverRunning {
		t.Fatalf("ml's driver is %s after etl's refused kills", d.State)
	}
	// Through Spark's REST protocol, etl's token may not submit to ml.
	body := strings.Replace(createJSON("/bin/true"), `"spark.driver.cores" : "1"`, `"spark.driver.cores" : "1", "spark.drover.namespace" : "ml"`, 1)
	sparkCall(t, http.DefaultClient, "http://"+rest[leader.ID]+"/v1/submissions/create", http.MethodPost, etlSecret, body).isSparkError(t, http.StatusForbidden)

	if code, out := nsCall(t, leader, http.MethodPost, api.V1KillDriver.Path(mine), etlSecret, nil); code != http.StatusOK {
		t.Fatalf("etl's token kills its own driver: %d %s", code, out)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for killed := false; !killed; {
		if !sc.Scan() {
			t.Fatalf("the event stream ended before the kill of %s: %v", mine, sc.Err())
		}
		line := sc.Text()
		if strings.Contains(line, theirs) {
			t.Fatalf("etl's event stream carries ml's driver: %s", line)
		}
		killed = strings.Contains(line, mine) && strings.Contains(line, `"state":"KILLED"`)
	}

	// Revocation: one entry, committed when the leader answers; every
	// master refuses the token within a second of that.
	if code, out := nsCall(t, leader, http.MethodDelete, api.V1RevokeACLToken.Path(tokens["etl"].Accessor), opTok, nil); code != http.StatusOK {
		t.Fatalf("revoke etl's token: %d %s", code, out)
	}
	committed := time.Now()
	took := make([]time.Duration, len(c.Masters))
	var wg sync.WaitGroup
	for i, m := range c.Masters {
		wg.Go(func() {
			for {
				code, _ := nsCall(t, m, http.MethodGet, api.PathDrivers, etlSecret, nil)
				if took[i] = time.Since(committed); code == http.StatusForbidden || took[i] > time.Second {
					return
				}
			}
		})
	}
	wg.Wait()
	for i, m := range c.Masters {
		role := "follower"
		if m == leader {
			role = "leader"
		}
		t.Logf("master %s (%s) refused the revoked token %s after the leader's answer", m.ID, role, took[i])
		if took[i] > time.Second {
			t.Errorf("master %s still took the revoked token a second after the commit", m.ID)
		}
	}
	if code, _ := nsCall(t, leader, http.MethodGet, api.PathDrivers, mlSecret, nil); code != http.StatusOK {
		t.Fatalf("ml's token was refused after etl's was revoked: %d", code)
	}
}
