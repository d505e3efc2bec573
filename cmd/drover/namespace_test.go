package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/master"
	"github.com/drover-project/drover/master/mastertest"
	"github.com/drover-project/drover/model"
)

// The operator's namespace and token commands and the client's
// --namespace and --priority, against a master: each bad flag is one line
// naming it, exit 1, before any request (the namespaces stay as they
// were); apply, list, status, token create, list and revoke print what the
// master holds; a submission goes into --namespace with its priority, and
// status shows both; a namespace with live work is not deleted.
func TestNamespaceAndTokenCommands(t *testing.T) {
	c := mastertest.Start(t, 1, nil)
	m := c.Nodes[0].HTTP()
	op := func(args ...string) (string, string, int) {
		return drover(append(append([]string{"operator"}, args...), "--masters", m)...)
	}
	cl := func(args ...string) (string, string, int) {
		return drover(append([]string{"client", "--masters", m}, args...)...)
	}
	for _, bad := range []struct {
		args []string
		say  string
	}{
		{[]string{"--cores", "0"}, "--cores 0 must be at least 1"},
		{[]string{"--max-running-drivers", "-1"}, "--max-running-drivers -1 must be at least 1"},
		{[]string{"--max-queued-drivers", "0"}, "--max-queued-drivers 0 must be at least 1"},
		{[]string{"--memory", "0"}, `size "0" is below 1 MiB`},
		{[]string{"--resource", "gpu=0"}, "--resource"},
		{[]string{"--weight", "0"}, "--weight 0 must be at least 0.001 and at most 1e+06"},
		{[]string{"--weight", "1000001"}, "--weight 1.000001e+06 must be at least 0.001 and at most 1e+06"},
		{[]string{"--weight", "0.0009"}, "--weight 0.0009 must be at least 0.001 and at most 1e+06"},
		{[]string{"--resource", "gpu=16777217"}, "--resource: resource gpu: amount 16777217 is not from 1 to 16777216"},
		{[]string{"--driver-share", "1.5"}, "--driver-share 1.5 must be above 0 and at most 1"},
		{[]string{"--priority-max", "101"}, "--priority-max 101 must be 0 to 100"},
		{[]string{"--priority-max", "-1"}, "--priority-max -1 must be 0 to 100"},
	} {
		stdout, stderr, code := op(append([]string{"namespace", "apply", "etl"}, bad.args...)...)
		if code != 1 || stdout != "" || !strings.Contains(stderr, bad.say) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("namespace apply etl %v: exit %d, stdout %q, stderr %q; want 1 and one line with %q", bad.args, code, stdout, stderr, bad.say)
		}
	}
	if _, stderr, code := op("namespace", "apply", "Etl"); code != 1 || !strings.Contains(stderr, "is not a DNS label") {
		t.Errorf("namespace apply Etl: exit %d, %q", code, stderr)
	}
	if stdout, _, _ := op("namespace", "list", "--json"); strings.Contains(stdout, `"etl"`) {
		t.Fatalf("a refused apply made etl: %s", stdout)
	}

	stdout, stderr, code := op("namespace", "apply", "etl", "--cores", "4", "--memory", "8g", "--resource", "gpu=2",
		"--max-queued-drivers", "1", "--priority-max", "60", "--weight", "2", "--driver-share", "1", "--preempt")
	if code != 0 || !strings.Contains(stdout, "quota:         4 cores, 8192 MiB, gpu=2\n") || !strings.Contains(stdout, "preempt:       true\n") {
		t.Fatalf("namespace apply: exit %d, %s%s", code, stdout, stderr)
	}
	stdout, _, code = op("namespace", "list")
	if code != 0 || !strings.Contains(stdout, "default") || !strings.Contains(stdout, "etl ") {
		t.Fatalf("namespace list: exit %d\n%s", code, stdout)
	}
	var st api.NamespaceStatus
	stdout, _, code = op("namespace", "status", "etl", "--json")
	if err := json.Unmarshal([]byte(stdout), &st); code != 0 || err != nil || st.Quota.Cores != 4 || st.Weight != 2 || st.DriverShare != 1 ||
		st.PriorityMax != 60 || st.MaxQueuedDrivers != 1 || !strings.Contains(stdout, `"fair_share": 0`) || !strings.Contains(stdout, `"preemptions": 0`) {
		t.Fatalf("namespace status --json: exit %d, %v\n%s", code, err, stdout)
	}
	if _, stderr, code := op("namespace", "status", "nosuch"); code != 1 || !strings.Contains(stderr, "unknown namespace: nosuch") {
		t.Errorf("namespace status nosuch: exit %d, %q", code, stderr)
	}

	for _, bad := range []struct {
		args []string
		say  string
	}{
		{[]string{"--policy", "read"}, "token create needs --namespace"},
		{[]string{"--namespace", "etl"}, `--policy: policy "" is not read or submit`},
		{[]string{"--namespace", "etl", "--policy", "admin"}, `policy "admin" is not read or submit`},
		{[]string{"--namespace", "etl", "--policy", "read", "--ttl", "999ms"}, "--ttl 999ms must be from 1s to 87600h0m0s"},
		{[]string{"--namespace", "etl", "--policy", "read", "--ttl", "87601h"}, "--ttl 87601h0m0s must be from 1s"},
		{[]string{"--namespace", "etl", "--namespace", "etl", "--policy", "read"}, "names namespace etl twice"},
		{[]string{"--namespace", "nosuch", "--policy", "read"}, "unknown namespace: nosuch"},
	} {
		stdout, stderr, code := op(append([]string{"token", "create"}, bad.args...)...)
		if code != 1 || stdout != "" || !strings.Contains(stderr, bad.say) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("token create %v: exit %d, stdout %q, stderr %q; want 1 and one line with %q", bad.args, code, stdout, stderr, bad.say)
		}
	}
	stdout, stderr, code = op("token", "create", "--namespace", "etl", "--policy", "submit", "--name", "etl team", "--ttl", "1s", "--json")
	var tok api.ACLTokenCreated
	if err := json.Unmarshal([]byte(stdout), &tok); code != 0 || err != nil || tok.Accessor == "" || !strings.HasPrefix(tok.Secret, "dns.") ||
		tok.ExpiresAt != tok.CreatedAt+1000 {
		t.Fatalf("token create --json: exit %d, %v\n%s%s", code, err, stdout, stderr)
	}
	stdout, _, code = op("token", "list")
	if code != 0 || !strings.Contains(stdout, tok.Accessor) || !strings.Contains(stdout, "etl team") || strings.Contains(stdout, tok.Secret) {
		t.Fatalf("token list: exit %d\n%s", code, stdout)
	}
	if stdout, _, code := op("token", "revoke", tok.Accessor); code != 0 || stdout != "revoked "+tok.Accessor+"\n" {
		t.Fatalf("token revoke: exit %d, %q", code, stdout)
	}
	if _, stderr, code := op("token", "revoke", tok.Accessor); code != 1 || !strings.Contains(stderr, "unknown token") {
		t.Fatalf("token revoke again: exit %d, %q", code, stderr)
	}

	if _, stderr, code := cl("--namespace", "etl", "submit", "--priority", "61", "--", "/bin/true"); code != 1 ||
		!strings.Contains(stderr, "priority 61 is above namespace etl's --priority-max of 60") {
		t.Fatalf("submit --priority 61 into etl: exit %d, %q", code, stderr)
	}
	if _, stderr, code := cl("submit", "--priority", "101", "--", "/bin/true"); code != 1 || !strings.Contains(stderr, "--priority: priority must be 0 to 100, got 101") {
		t.Fatalf("submit --priority 101: exit %d, %q", code, stderr)
	}
	// No worker: the driver stays queued, and submit says so after
	// --timeout.
	stdout, stderr, code = cl("--namespace", "etl", "submit", "--priority", "60", "--timeout", "1s", "--", "/bin/true")
	id := strings.TrimSpace(stdout)
	if code != exitNotRunning || !strings.HasPrefix(id, "driver-") {
		t.Fatalf("submit into etl: exit %d, %q %q", code, stdout, stderr)
	}
	if _, stderr, code := cl("--namespace", "etl", "submit", "--", "/bin/true"); code != 1 || !strings.Contains(stderr, "namespace etl has 1 driver waiting, its --max-queued-drivers (1)") {
		t.Fatalf("submit past etl's --max-queued-drivers: exit %d, %q", code, stderr)
	}
	stdout, _, code = cl("status", id)
	if code != 0 || !strings.Contains(stdout, "namespace:  etl\n") || !strings.Contains(stdout, "priority:   60\n") {
		t.Fatalf("status: exit %d\n%s", code, stdout)
	}
	var d model.Driver
	stdout, _, _ = cl("status", id, "--json")
	if err := json.Unmarshal([]byte(stdout), &d); err != nil || d.Namespace != "etl" || d.Priority == nil || *d.Priority != 60 {
		t.Fatalf("status --json: %v\n%s", err, stdout)
	}
	if stdout, _, _ := cl("list"); strings.Contains(stdout, id) {
		t.Errorf("list in the default namespace shows %s of etl:\n%s", id, stdout)
	}
	for _, args := range [][]string{{"--namespace", "etl", "list"}, {"list", "--all-namespaces"}} {
		if stdout, _, _ := cl(args...); !strings.Contains(stdout, id) {
			t.Errorf("%v does not show %s:\n%s", args, id, stdout)
		}
	}
	// Across namespaces each row names its own; within one, no column.
	if stdout, _, _ := cl("list", "--all-namespaces"); !strings.HasPrefix(stdout, "NAMESPACE") || !strings.Contains(stdout, "etl        "+id) {
		t.Errorf("list --all-namespaces does not name the namespace of %s:\n%s", id, stdout)
	}
	if stdout, _, _ := cl("--namespace", "etl", "list"); strings.Contains(stdout, "NAMESPACE") {
		t.Errorf("list of one namespace has a namespace column:\n%s", stdout)
	}
	if _, stderr, code := op("namespace", "delete", "etl"); code != 1 || !strings.Contains(stderr, "namespace etl holds 1 driver and 0 apps that have not ended") {
		t.Fatalf("namespace delete etl in use: exit %d, %q", code, stderr)
	}
	if _, _, code := cl("kill", id); code != 0 {
		t.Fatal("kill")
	}
	if stdout, stderr, code := op("namespace", "delete", "etl"); code != 0 || stdout != "deleted namespace etl\n" {
		t.Fatalf("namespace delete etl: exit %d, %q %q", code, stdout, stderr)
	}
}

// namespace apply --help shows each flag's default.
func TestNamespaceApplyHelpShowsDefaults(t *testing.T) {
	stdout, _, code := drover("operator", "namespace", "apply", "--help")
	for _, want := range []string{"--weight float", "(default 1)", "--driver-share float", "(default 0.5)", "--priority-max int", "(default 100)",
		"(default no quota)", "(default no bound)"} {
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("namespace apply --help lacks %q:\n%s", want, stdout)
		}
	}
	stdout, _, _ = drover("client", "submit", "--help")
	if !strings.Contains(stdout, "--priority int") || !strings.Contains(stdout, "(default 50)") || !strings.Contains(stdout, `--namespace string`) || !strings.Contains(stdout, `(default "default")`) {
		t.Errorf("submit --help does not show --priority and --namespace with their defaults:\n%s", stdout)
	}
}

// drover client apps lists --namespace's applications, default's
// without it, and every namespace's with --all-namespaces, as list does
// with drivers.
func TestAppsListsItsNamespace(t *testing.T) {
	c := mastertest.Start(t, 1, nil)
	m := c.Nodes[0].HTTP()
	if _, stderr, code := drover("operator", "namespace", "apply", "etl", "--masters", m); code != 0 {
		t.Fatalf("namespace apply etl: exit %d, %q", code, stderr)
	}
	register := func(name, ns string) string {
		b, _ := json.Marshal(api.RegisterAppRequest{Token: name, Name: name, Namespace: ns, CoresPerExecutor: 1, MemoryPerExecutorMB: 64, Argv: []string{"/bin/true"}})
		resp, err := http.Post("http://"+m+api.PathApps, "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out api.RegisterAppResponse
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("register %s: %d %v", name, resp.StatusCode, err)
		}
		return out.AppID
	}
	inDefault, inETL := register("in-default", ""), register("in-etl", "etl")
	for _, tc := range []struct {
		args      []string
		dflt, etl bool
	}{
		{[]string{"apps"}, true, false},
		{[]string{"--namespace", "etl", "apps"}, false, true},
		{[]string{"apps", "--namespace", "etl", "--json"}, false, true},
		{[]string{"apps", "--all-namespaces"}, true, true},
		{[]string{"apps", "--all-namespaces", "--json"}, true, true},
	} {
		stdout, stderr, code := drover(append([]string{"client", "--masters", m}, tc.args...)...)
		if code != 0 || strings.Contains(stdout, inDefault) != tc.dflt || strings.Contains(stdout, inETL) != tc.etl {
			t.Errorf("%v: exit %d (%s), shows %s: %v, %s: %v; want %v, %v\n%s", tc.args, code, stderr,
				inDefault, strings.Contains(stdout, inDefault), inETL, strings.Contains(stdout, inETL), tc.dflt, tc.etl, stdout)
		}
	}
	if stdout, _, code := drover("client", "--masters", m, "--namespace", "ml", "apps", "--json"); code != 0 || strings.TrimSpace(stdout) != "[]" {
		t.Errorf("apps --json in a namespace without apps: exit %d, %q; want []", code, stdout)
	}
}

// A token whose only namespace was deleted grants nothing, and token
// list says so in its NAMESPACES column rather than leave it blank.
func TestTokenListShowsATokenLeftWithoutNamespaces(t *testing.T) {
	c := mastertest.Start(t, 1, nil)
	op := func(args ...string) string {
		t.Helper()
		stdout, stderr, code := drover(append(append([]string{"operator"}, args...), "--masters", c.Nodes[0].HTTP())...)
		if code != 0 {
			t.Fatalf("operator %v: exit %d, %q", args, code, stderr)
		}
		return stdout
	}
	op("namespace", "apply", "etl")
	var tok api.ACLTokenCreated
	if err := json.Unmarshal([]byte(op("token", "create", "--namespace", "etl", "--policy", "read", "--json")), &tok); err != nil {
		t.Fatal(err)
	}
	op("namespace", "delete", "etl")
	out := op("token", "list")
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == tok.Accessor {
			if len(f) < 3 || f[1] != "read" || f[2] != "(none)" {
				t.Fatalf("token list row of a token left without namespaces: %q, want read and (none)", line)
			}
			return
		}
	}
	t.Fatalf("token list lacks %s:\n%s", tok.Accessor, out)
}

// submit --app-cores records what the driver's app will ask for: at
// model.MaxAppCores it is submitted with it, and --help shows the flag
// with its default; -1 and one past the bound are one line naming the
// flag, exit 1, before any request.
func TestSubmitAppCores(t *testing.T) {
	c := mastertest.Start(t, 1, nil)
	cl := func(args ...string) (string, string, int) {
		return drover(append([]string{"client", "--masters", c.Nodes[0].HTTP()}, args...)...)
	}
	if stdout, _, code := drover("client", "submit", "--help"); code != 0 || !strings.Contains(stdout, "--app-cores") || !strings.Contains(stdout, "(default 0: unknown)") {
		t.Errorf("client submit --help: exit %d, no --app-cores with its default:\n%s", code, stdout)
	}
	for _, bad := range []string{"-1", strconv.Itoa(model.MaxAppCores + 1)} {
		stdout, stderr, code := cl("submit", "--app-cores", bad, "--", "/bin/true")
		if want := "--app-cores " + bad + " must be from 0 to 1048576"; code != 1 || stdout != "" || !strings.Contains(stderr, want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("submit --app-cores %s: exit %d, stdout %q, stderr %q; want 1 and one line with %q", bad, code, stdout, stderr, want)
		}
	}
	if stdout, _, _ := cl("list", "--json"); strings.Contains(stdout, "driver-") {
		t.Fatalf("a refused submit made a driver: %s", stdout)
	}
	stdout, stderr, code := cl("submit", "--app-cores", strconv.Itoa(model.MaxAppCores), "--timeout", "1s", "--", "/bin/true")
	id := strings.TrimSpace(stdout)
	if code != exitNotRunning || !strings.HasPrefix(id, "driver-") {
		t.Fatalf("submit --app-cores at the bound: exit %d, %q %q", code, stdout, stderr)
	}
	var d model.Driver
	stdout, _, _ = cl("status", id, "--json")
	if err := json.Unmarshal([]byte(stdout), &d); err != nil || d.AppCores != model.MaxAppCores {
		t.Fatalf("status --json: %v\n%s", err, stdout)
	}
}

// A revoked namespace token is refused in one line that says it may be
// revoked, not merely invalid: the masters keep nothing of it to tell it
// from a token never made.
func TestRevokedTokenIsOneLine(t *testing.T) {
	const operatorToken = "OperatorTok-0123456789abcdef"
	c := mastertest.Start(t, 1, func(cfg *master.Config) { cfg.OperatorToken = operatorToken })
	dir := t.TempDir()
	opFile, nsFile := filepath.Join(dir, "operator.token"), filepath.Join(dir, "etl.token")
	if err := os.WriteFile(opFile, []byte(operatorToken), 0o600); err != nil {
		t.Fatal(err)
	}
	op := func(args ...string) string {
		t.Helper()
		stdout, stderr, code := drover(append(append([]string{"operator"}, args...), "--masters", c.Nodes[0].HTTP(), "--token-file", opFile)...)
		if code != 0 {
			t.Fatalf("operator %v: exit %d, %q", args, code, stderr)
		}
		return stdout
	}
	op("namespace", "apply", "etl")
	var tok api.ACLTokenCreated
	if err := json.Unmarshal([]byte(op("token", "create", "--namespace", "etl", "--policy", "read", "--json")), &tok); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(nsFile, []byte(tok.Secret), 0o600); err != nil {
		t.Fatal(err)
	}
	list := func() (string, string, int) {
		return drover("client", "--masters", c.Nodes[0].HTTP(), "--token-file", nsFile, "--namespace", "etl", "list")
	}
	if _, stderr, code := list(); code != 0 {
		t.Fatalf("list with the token: exit %d, %q", code, stderr)
	}
	op("token", "revoke", tok.Accessor)
	if stdout, stderr, code := list(); code != 1 || stdout != "" || stderr != "drover: forbidden: unknown or revoked token\n" {
		t.Fatalf("list with the revoked token: exit %d, stdout %q, stderr %q; want 1 and one line saying it is unknown or revoked", code, stdout, stderr)
	}
}

// list and apps refuse --all-namespaces beside a --namespace given on the
// command line, before the command or after it, in one line naming both,
// exit 1, before any request: one of the two would be ignored. A
// namespace from $DROVER_NAMESPACE gives way to --all-namespaces.
func TestAllNamespacesRefusesNamespace(t *testing.T) {
	f := newFakeMaster(t)
	t.Setenv(client.EnvNamespace, "")
	for _, args := range [][]string{
		{"--namespace", "etl", "list", "--all-namespaces"},
		{"list", "--all-namespaces", "--namespace", "etl"},
		{"list", "--namespace", "default", "--all-namespaces"},
		{"--namespace", "etl", "apps", "--all-namespaces"},
		{"apps", "--all-namespaces", "--namespace", "etl", "--json"},
	} {
		stdout, stderr, code := drover(append([]string{"client", "--masters", f.addr()}, args...)...)
		if code != 1 || stdout != "" || stderr != "drover: --all-namespaces and --namespace exclude each other: give one\n" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 1 and one line naming both flags", args, code, stdout, stderr)
		}
	}
	f.mu.Lock()
	asked := len(f.lists)
	f.mu.Unlock()
	if asked != 0 {
		t.Fatalf("refused commands made %d list requests", asked)
	}
	t.Setenv(client.EnvNamespace, "etl")
	if _, stderr, code := drover("client", "--masters", f.addr(), "list", "--all-namespaces"); code != 0 {
		t.Fatalf("$%s=etl with --all-namespaces: exit %d, %q", client.EnvNamespace, code, stderr)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.lists) != 1 || f.lists[0].Has(api.QueryNamespace) {
		t.Fatalf("list --all-namespaces under $%s asked %v, want every namespace", client.EnvNamespace, f.lists)
	}
}

// status shows the priority the scheduler gives a driver that asked for
// none: its namespace's default, 50 lowered to the namespace's
// --priority-max, marked as such; a driver that named one shows it alone.
func TestStatusShowsTheResolvedPriority(t *testing.T) {
	c := mastertest.Start(t, 1, nil)
	m := c.Nodes[0].HTTP()
	if _, stderr, code := drover("operator", "namespace", "apply", "low", "--priority-max", "30", "--masters", m); code != 0 {
		t.Fatalf("namespace apply low: exit %d, %q", code, stderr)
	}
	cl := c.Client()
	p20 := 20
	for _, tc := range []struct {
		ns       string
		priority *int
		want     string
	}{
		{"", nil, "priority:   50 (the namespace's default)\n"},
		{"low", nil, "priority:   30 (the namespace's default)\n"},
		{"low", &p20, "priority:   20\n"},
	} {
		res, err := cl.Submit(c.Context(), api.SubmitRequest{DriverSpec: model.DriverSpec{Namespace: tc.ns, Priority: tc.priority,
			Argv: []string{"/bin/true"}, Cores: 1, MemoryMB: 64}})
		if err != nil {
			t.Fatal(err)
		}
		stdout, stderr, code := drover("client", "--masters", m, "status", res.DriverID)
		if code != 0 || !strings.Contains(stdout, tc.want) {
			t.Errorf("status of a driver of namespace %q, priority %v: exit %d (%s), want %q in\n%s", tc.ns, tc.priority, code, stderr, tc.want, stdout)
		}
	}
}
