package systest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/tests/testcluster"
)

// TestNamespacesThroughTheCLI runs the namespace and token commands of the
// drover binary against a follower of a cluster with tokens: a namespace
// with a quota of one core takes one driver of one core, and the next
// waits while the first runs; status shows the quota, the use, the queue
// and a fair share; the namespace cannot be deleted while its drivers
// live, and can once they are killed; a token made for it is listed
// without its secret and revoked.
func TestNamespacesThroughTheCLI(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Workers: 1, WorkerCores: 2, TokensOnly: true})
	l, err := c.Leader(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var follower *testcluster.Node
	for _, m := range c.Masters {
		if m != l {
			follower = m
		}
	}
	env := append(c.ClientEnv(), "DROVER_MASTERS="+follower.HTTP)
	drover := func(args ...string) (string, string, int) { return runDrover(t, env, args...) }
	must := func(args ...string) string {
		t.Helper()
		return mustDrover(t, env, args...)
	}

	must("operator", "namespace", "apply", "etl", "--cores", "1", "--max-queued-drivers", "5")
	var tok api.ACLTokenCreated
	if out := must("operator", "token", "create", "--namespace", "etl", "--policy", "submit", "--name", "etl", "--json"); json.Unmarshal([]byte(out), &tok) != nil ||
		tok.Accessor == "" || !strings.HasPrefix(tok.Secret, "dns.") {
		t.Fatalf("token create --json: %s", out)
	}

	out := must("client", "--namespace", "etl", "submit", "--name", "ns-runs", "--", "/bin/sleep", "300")
	running := lastLineOf(out)
	// Held back by its namespace's quota, it is said at once, long
	// before --timeout.
	start := time.Now()
	out, errOut, code := drover("client", "--namespace", "etl", "submit", "--name", "ns-waits", "--timeout", "30s", "--", "/bin/true")
	waiting := lastLineOf(out)
	if code != 4 || !strings.Contains(errOut, "was accepted and waits: namespace etl is at its cores quota (1 of 1)") || time.Since(start) > 10*time.Second {
		t.Fatalf("a second driver past etl's one core: exit %d after %s, stdout %q, stderr %q; want it queued (4) and why, at once", code, time.Since(start), out, errOut)
	}

	var st api.NamespaceStatus
	if out := must("operator", "namespace", "status", "etl", "--json"); json.Unmarshal([]byte(out), &st) != nil ||
		st.Quota.Cores != 1 || st.Use.Cores != 1 || st.Running != 1 || st.Queued != 1 || st.FairShare <= 0 {
		t.Fatalf("namespace status etl: %s; want 1 of 1 core held, 1 running, 1 queued and a fair share", out)
	}
	if out := must("operator", "namespace", "status", "etl"); !strings.Contains(out, "quota:         1 core\n") || !strings.Contains(out, "queued:        1 (at most 5)\n") {
		t.Fatalf("namespace status etl:\n%s", out)
	}
	if _, errOut, code := drover("operator", "namespace", "delete", "etl"); code != 1 || !strings.Contains(errOut, "namespace etl holds 2 drivers and 0 apps that have not ended") {
		t.Fatalf("namespace delete etl in use: exit %d, %q", code, errOut)
	}
	if out := must("operator", "token", "list"); !strings.Contains(out, tok.Accessor) || strings.Contains(out, tok.Secret) {
		t.Fatalf("token list:\n%s", out)
	}
	must("operator", "token", "revoke", tok.Accessor)
	must("client", "kill", running)
	must("client", "kill", waiting)
	if out := must("operator", "namespace", "delete", "etl"); out != "deleted namespace etl\n" {
		t.Fatalf("namespace delete etl: %q", out)
	}
	if out := must("operator", "namespace", "list", "--json"); strings.Contains(out, `"etl"`) {
		t.Fatalf("etl is still listed: %s", out)
	}
}

// lastLineOf is the last line of s, where submit prints the driver ID.
func lastLineOf(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
