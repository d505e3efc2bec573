package systest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-project/drover/internal/freeport"
	"github.com/drover-project/drover/master/spark/restsubmit"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/cgrouptest"
	"github.com/drover-project/drover/tests/testcluster"
	"github.com/drover-project/drover/worker/unitdir"
)

// sparkRESTCluster starts a cluster whose masters serve Spark's REST
// protocol with the given launcher, each on a free port of its own
// address, and returns the REST addresses by master ID.
func sparkRESTCluster(t *testing.T, opts testcluster.Options, launcher string) (*testcluster.Cluster, map[string]string) {
	t.Helper()
	var mu sync.Mutex
	rest := map[string]string{}
	opts.MasterExtraArgs = func(n *testcluster.Node) []string {
		taken := map[string]bool{}
		for _, a := range []string{n.Raft, n.HTTP, n.Gossip} {
			_, p, _ := net.SplitHostPort(a)
			taken[p] = true
		}
		for {
			ports, err := freeport.Get(n.IP, 1)
			if err != nil {
				t.Fatal(err)
			}
			// The node's own ports were free a moment ago too.
			if p := strconv.Itoa(ports[0]); !taken[p] {
				mu.Lock()
				rest[n.ID] = net.JoinHostPort(n.IP, p)
				mu.Unlock()
				return []string{"--spark-rest-port", p, "--spark-launcher", launcher}
			}
		}
	}
	return testcluster.New(t, opts), rest
}

// sparkAnswer is one answer of a REST listener.
type sparkAnswer struct {
	status int
	header http.Header
	fields map[string]any
	raw    string
}

func (a sparkAnswer) str(k string) string { s, _ := a.fields[k].(string); return s }

func (a sparkAnswer) keys() []string {
	var ks []string
	for k := range a.fields {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// sparkCall sends one request as Spark's RestSubmissionClient does (a JSON
// body with Content-Type application/json, no credentials unless token).
func sparkCall(t *testing.T, hc *http.Client, url, method, token, body string) sparkAnswer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := sparkAnswer{status: resp.StatusCode, header: resp.Header, raw: string(b)}
	if err := json.Unmarshal(b, &a.fields); err != nil {
		t.Fatalf("%s %s: %d, body not a JSON object: %s", method, url, resp.StatusCode, b)
	}
	return a
}

// isSparkError checks a Spark ErrorResponse with the given status.
func (a sparkAnswer) isSparkError(t *testing.T, status int) {
	t.Helper()
	want := []string{"action", "message", "serverSparkVersion"}
	if status == restsubmit.StatusUnknownProtocolVersion {
		want = []string{"action", "highestProtocolVersion", "message", "serverSparkVersion"}
	}
	if a.status != status || a.str("action") != restsubmit.ActionErrorResponse || !slices.Equal(a.keys(), want) || a.str("message") == "" {
		t.Fatalf("got %d %s; want a %d ErrorResponse with fields %v", a.status, a.raw, status, want)
	}
}

// createJSON is a CreateSubmissionRequest in the form Spark 3.5's
// RestSubmissionClient writes it (see restsubmit's tests).
func createJSON(mainClass string, appArgs ...string) string {
	args, _ := json.Marshal(appArgs)
	return fmt.Sprintf(`{
  "action" : "CreateSubmissionRequest",
  "appArgs" : %s,
  "appResource" : "hdfs://nn/jobs/probe.jar",
  "clientSparkVersion" : "3.5.1",
  "environmentVariables" : {
    "SPARK_USER" : "etl",
    "SPARK_HOME" : "/home/etl/spark",
    "SPARK_LOCAL_IP" : "10.9.9.9"
  },
  "mainClass" : %q,
  "sparkProperties" : {
    "spark.jars" : "hdfs://nn/jobs/probe.jar",
    "spark.driver.supervise" : "false",
    "spark.app.name" : "probe-%s",
    "spark.driver.memory" : "256m",
    "spark.submit.deployMode" : "cluster",
    "spark.master" : "spark://m1:6066,m2:6066,m3:6066",
    "spark.driver.cores" : "1"
  }
}`, args, mainClass, mainClass)
}

var sparkDriverID = regexp.MustCompile(`^driver-[0-9]{14}-[0-9]{4,}$`)

// pollSpark polls status until the driver is in state, and returns the
// last answer.
func pollSpark(t *testing.T, hc *http.Client, url, token string, state model.DriverState) sparkAnswer {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		a := sparkCall(t, hc, url, http.MethodGet, token, "")
		if a.status == http.StatusOK && a.str("driverState") == string(state) {
			return a
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not %s within 30s; last %d %s", url, state, a.status, a.raw)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestSparkRESTSubmitStatusKill drives a three-master cluster through
// Spark's REST protocol, as spark-submit --deploy-mode cluster --master
// spark://m1:6066,m2:6066,m3:6066 and its --status and --kill do: refusals
// first (Spark's shapes and status codes, tables unchanged), then a
// submission sent to a follower that runs through the launcher and
// finishes, and a running one killed from another follower. It also checks
// the listener's per-client connection bound.
func TestSparkRESTSubmitStatusKill(t *testing.T) {
	// The launcher runs mainClass as a program with appArgs, so that the
	// test sees exactly which arguments reached it.
	c, rest := sparkRESTCluster(t, testcluster.Options{Workers: 1, MasterArgs: []string{"--max-conns-per-client", "32"}},
		"/usr/bin/env SPARK_APP_RESOURCE={{appResource}} {{mainClass}} {{appArgs}}")
	leader, err := c.Leader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var followers []*testcluster.Node
	for _, m := range c.Masters {
		if m != leader {
			followers = append(followers, m)
		}
	}
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	at := func(n *testcluster.Node, path string) string { return "http://" + rest[n.ID] + path }

	// Refusals, in Spark's shapes and with Spark's status codes, leave the
	// tables as they were.
	before := stateHash(t, leader)
	good := createJSON("printf", "x")
	for _, r := range []struct {
		name, method, path, body string
		status                   int
	}{
		{"malformed JSON", http.MethodPost, "/v1/submissions/create", good[:len(good)/2], http.StatusBadRequest},
		{"unknown action", http.MethodPost, "/v1/submissions/create",
			strings.Replace(good, `"CreateSubmissionRequest"`, `"LaunchRocketRequest"`, 1), http.StatusBadRequest},
		{"missing appResource", http.MethodPost, "/v1/submissions/create",
			strings.Replace(good, `"appResource" : "hdfs://nn/jobs/probe.jar",`, ``, 1), http.StatusBadRequest},
		{"bad driver memory", http.MethodPost, "/v1/submissions/create",
			strings.Replace(good, `"256m"`, `"1.5g"`, 1), http.StatusBadRequest},
		{"no submission ID", http.MethodGet, "/v1/submissions/status/", "", http.StatusBadRequest},
		{"no action", http.MethodGet, "/v1/submissions", "", http.StatusBadRequest},
		{"unknown protocol version", http.MethodPost, "/v2/submissions/create", good, restsubmit.StatusUnknownProtocolVersion},
		{"killall with a body", http.MethodPost, "/v1/submissions/killall", `{"submissionId":"driver-20200101000000-0042"}`, http.StatusBadRequest},
		{"clear with a body", http.MethodPost, "/v1/submissions/clear", `{}`, http.StatusBadRequest},
	} {
		a := sparkCall(t, hc, at(followers[0], r.path), r.method, "", r.body)
		t.Run(r.name, func(t *testing.T) { a.isSparkError(t, r.status) })
	}
	for _, r := range []struct{ method, path, action string }{
		{http.MethodGet, "/v1/submissions/status/driver-20200101000000-0042", restsubmit.ActionSubmissionStatusResponse},
		{http.MethodPost, "/v1/submissions/kill/driver-20200101000000-0042", restsubmit.ActionKillSubmissionResponse},
		{http.MethodGet, "/v1/submissions/status/does-not-exist", restsubmit.ActionSubmissionStatusResponse},
	} {
		// An unknown submission ID is 200 with success=false, as in Spark.
		a := sparkCall(t, hc, at(followers[1], r.path), r.method, "", "")
		if a.status != http.StatusOK || a.str("action") != r.action || a.fields["success"] != false {
			t.Fatalf("%s %s: %d %s", r.method, r.path, a.status, a.raw)
		}
	}
	if after := stateHash(t, leader); after != before {
		t.Fatalf("refused requests changed the tables: %s -> %s", before, after)
	}

	// A submission sent to a follower, whose status is read from the
	// other: it is forwarded to the leader and runs through the launcher.
	a := sparkCall(t, hc, at(followers[0], "/v1/submissions/create"), http.MethodPost, "",
		createJSON("printf", "[%s]", "two slices", "a hint of cinnamon"))
	id := a.str("submissionId")
	if a.status != http.StatusOK || a.str("action") != restsubmit.ActionCreateSubmissionResponse || a.fields["success"] != true ||
		!sparkDriverID.MatchString(id) {
		t.Fatalf("create: %d %s", a.status, a.raw)
	}
	st := pollSpark(t, hc, at(followers[1], "/v1/submissions/status/"+id), "", model.DriverFinished)
	if st.fields["success"] != true || st.str("submissionId") != id || st.str("workerId") != "w1" ||
		st.str("workerHostPort") != c.Worker("w1").HTTP || st.str("message") != "" {
		t.Fatalf("status: %s", st.raw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := c.Client().Driver(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	wantArgv := []string{"/usr/bin/env", "SPARK_APP_RESOURCE=hdfs://nn/jobs/probe.jar", "printf", "[%s]", "two slices", "a hint of cinnamon"}
	if !slices.Equal(d.Argv, wantArgv) || d.Name != "probe-printf" || d.Cores != 1 || d.MemoryMB != 256+384 || d.Supervise ||
		len(d.Env) != 1 || d.Env["SPARK_USER"] != "etl" {
		t.Fatalf("driver row %+v; want argv %q, 1 core, 256 MiB and 384 of overhead, unsupervised, env SPARK_USER only", d, wantArgv)
	}
	out, _, err := c.Client().Logs(ctx, id, false, 0, 0)
	if err != nil || string(out) != "[two slices][a hint of cinnamon]" {
		t.Fatalf("stdout %q (%v), want each appArg as one argument", out, err)
	}

	// A running submission killed from the other follower.
	a = sparkCall(t, hc, at(followers[0], "/v1/submissions/create"), http.MethodPost, "", createJSON("sleep", "300"))
	id2 := a.str("submissionId")
	if a.fields["success"] != true || id2 == id {
		t.Fatalf("create: %s", a.raw)
	}
	pollSpark(t, hc, at(leader, "/v1/submissions/status/"+id2), "", model.DriverRunning)
	k := sparkCall(t, hc, at(followers[1], "/v1/submissions/kill/"+id2), http.MethodPost, "", "")
	if k.status != http.StatusOK || k.str("action") != restsubmit.ActionKillSubmissionResponse || k.fields["success"] != true ||
		k.str("submissionId") != id2 {
		t.Fatalf("kill: %d %s", k.status, k.raw)
	}
	pollSpark(t, hc, at(followers[0], "/v1/submissions/status/"+id2), "", model.DriverKilled)
	if k := sparkCall(t, hc, at(leader, "/v1/submissions/kill/"+id), http.MethodPost, "", ""); k.fields["success"] != false ||
		k.str("message") != "Driver "+id+" has already ended (FINISHED)." {
		t.Fatalf("kill of a finished driver: %s", k.raw)
	}

	// Spark 4's additions, each through a follower: every master with a
	// leader is ready; killall kills what runs, and clear drops what
	// ended, so that status knows neither.
	if r := sparkCall(t, hc, at(followers[1], "/v1/submissions/readyz"), http.MethodGet, "", ""); r.status != http.StatusOK ||
		r.str("action") != restsubmit.ActionReadyzResponse || r.fields["success"] != true {
		t.Fatalf("readyz on a follower: %d %s", r.status, r.raw)
	}
	a = sparkCall(t, hc, at(followers[0], "/v1/submissions/create"), http.MethodPost, "", createJSON("sleep", "300"))
	id3 := a.str("submissionId")
	pollSpark(t, hc, at(leader, "/v1/submissions/status/"+id3), "", model.DriverRunning)
	ka := sparkCall(t, hc, at(followers[1], "/v1/submissions/killall"), http.MethodPost, "", "")
	if ka.status != http.StatusOK || ka.str("action") != restsubmit.ActionKillAllSubmissionResponse || ka.fields["success"] != true ||
		ka.str("message") != "Killed 1 driver that had not ended." {
		t.Fatalf("killall: %d %s", ka.status, ka.raw)
	}
	pollSpark(t, hc, at(followers[0], "/v1/submissions/status/"+id3), "", model.DriverKilled)

	// Spark's master JSON on each master's HTTP listener: the leader is
	// ALIVE, the others STANDBY, each names its Spark REST listener, and
	// the leader lists the three ended drivers and the live worker.
	waitSameTables(t, c, c.Masters...)
	for _, m := range c.Masters {
		doc := sparkCall(t, hc, "http://"+m.HTTP+"/json", http.MethodGet, "", "")
		status := "STANDBY"
		if m == leader {
			status = "ALIVE"
		}
		if doc.status != http.StatusOK || doc.str("status") != status || doc.str("url") != "spark://"+rest[m.ID] ||
			doc.fields["aliveworkers"] != float64(1) || len(doc.fields["completeddrivers"].([]any)) != 3 ||
			len(doc.fields["activedrivers"].([]any)) != 0 {
			t.Fatalf("/json of %s: %d %s", m.ID, doc.status, doc.raw)
		}
	}
	if w := sparkCall(t, hc, "http://"+leader.HTTP+"/json/workers", http.MethodGet, "", ""); len(w.fields) != 1 ||
		w.fields["workers"].([]any)[0].(map[string]any)["webuiaddress"] != "http://"+c.Worker("w1").HTTP {
		t.Fatalf("/json/workers: %s", w.raw)
	}
	cl := sparkCall(t, hc, at(followers[0], "/v1/submissions/clear"), http.MethodPost, "", "")
	if cl.status != http.StatusOK || cl.str("action") != restsubmit.ActionClearResponse || cl.fields["success"] != true ||
		cl.str("message") != "Cleared 3 finished drivers and 0 finished applications." {
		t.Fatalf("clear: %d %s", cl.status, cl.raw)
	}
	if doc := sparkCall(t, hc, "http://"+leader.HTTP+"/json/completeddrivers", http.MethodGet, "", ""); doc.raw != `{"completeddrivers":[]}`+"\n" {
		t.Fatalf("/json/completeddrivers after clear: %s", doc.raw)
	}
	for _, gone := range []string{id, id2, id3} {
		if s := sparkCall(t, hc, at(followers[1], "/v1/submissions/status/"+gone), http.MethodGet, "", ""); s.fields["success"] != false {
			t.Fatalf("status of %s after clear: %s", gone, s.raw)
		}
	}
	waitSameTables(t, c, c.Masters...)

	// The listener holds each client IP to --max-conns-per-client: with
	// 32 idle connections open from one address, the next is closed at
	// once.
	ip := net.ParseIP(followers[0].IP).To4()
	local := &net.TCPAddr{IP: net.IPv4(ip[0], ip[1], ip[2], 250)}
	dialer := net.Dialer{LocalAddr: local, Timeout: 2 * time.Second}
	var held []net.Conn
	defer func() {
		for _, conn := range held {
			conn.Close()
		}
	}()
	for range 32 {
		conn, err := dialer.Dial("tcp", rest[followers[0].ID])
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, conn)
	}
	extra, err := dialer.Dial("tcp", rest[followers[0].ID])
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	_ = extra.SetReadDeadline(time.Now().Add(3 * time.Second))
	if n, err := extra.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("connection 33 from one address: read %d, %v; want it closed at once", n, err)
	}
}

// TestSparkRESTSecured: on a cluster with TLS and tokens the REST listener
// speaks only TLS, and takes the API's tokens: none is 401 with a
// challenge, a wrong one 403, both before anything changes, and a create
// without any is refused before its body is read; the submit token
// submits, reads and kills.
func TestSparkRESTSecured(t *testing.T) {
	c, rest := sparkRESTCluster(t, testcluster.Options{Masters: 1, Workers: 1, Secure: true}, "/bin/echo {{mainClass}} {{appArgs}}")
	m := c.Masters[0]
	submitToken := readToken(t, c.Secrets.SubmitToken)
	tlsCfg := c.ClientOptions().TLS.Clone()
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg, DisableKeepAlives: true}}
	base := "https://" + rest[m.ID]

	// Spark's own client speaks plain HTTP only; a TLS listener answers
	// it with no Spark message at all.
	resp, err := http.Post("http://"+rest[m.ID]+"/v1/submissions/create", "application/json", strings.NewReader(createJSON("hello")))
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK || bytes.Contains(b, []byte("submissionId")) {
			t.Fatalf("plain HTTP to a TLS listener: %d %s", resp.StatusCode, b)
		}
	}

	before := stateHash(t, m)
	for _, r := range []struct{ method, path, body string }{
		{http.MethodPost, "/v1/submissions/create", createJSON("hello")},
		{http.MethodGet, "/v1/submissions/status/driver-20200101000000-0000", ""},
		{http.MethodPost, "/v1/submissions/kill/driver-20200101000000-0000", ""},
	} {
		a := sparkCall(t, hc, base+r.path, r.method, "", r.body)
		a.isSparkError(t, http.StatusUnauthorized)
		if !strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Bearer") {
			t.Fatalf("%s: no Bearer challenge: %v", r.path, a.header)
		}
		sparkCall(t, hc, base+r.path, r.method, "WrongTokenWrongTokenWrongToken00", r.body).isSparkError(t, http.StatusForbidden)
	}
	// A create without any credential is refused before its body is
	// read: one that never ends is answered at once.
	endless := &countingReader{n: 1 << 50}
	start := time.Now()
	status, body, err := request(tlsCfg, http.MethodPost, base+"/v1/submissions/create", "", endless, nil)
	if took := time.Since(start); err != nil || status != http.StatusUnauthorized || took > 10*time.Second || endless.read.Load() > 16<<20 {
		t.Fatalf("a create without a token and a body that never ends: %d %s %v after %s, %d bytes sent; want 401 at once",
			status, body, err, took, endless.read.Load())
	}
	if after := stateHash(t, m); after != before {
		t.Fatalf("refused requests changed the tables: %s -> %s", before, after)
	}

	a := sparkCall(t, hc, base+"/v1/submissions/create", http.MethodPost, submitToken, createJSON("hello", "from", "spark"))
	id := a.str("submissionId")
	if a.status != http.StatusOK || a.fields["success"] != true || !sparkDriverID.MatchString(id) {
		t.Fatalf("create with the submit token: %d %s", a.status, a.raw)
	}
	pollSpark(t, hc, base+"/v1/submissions/status/"+id, submitToken, model.DriverFinished)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, _, err := c.Client().Logs(ctx, id, false, 0, 0)
	if err != nil || string(out) != "hello from spark\n" {
		t.Fatalf("stdout %q (%v)", out, err)
	}
	if k := sparkCall(t, hc, base+"/v1/submissions/kill/"+id, http.MethodPost, submitToken, ""); k.status != http.StatusOK || k.fields["success"] != false {
		t.Fatalf("kill of a finished driver with the submit token: %d %s", k.status, k.raw)
	}
	// Readiness needs no token; killall takes the submit token, as a
	// kill does; clear wants an operator's.
	if r := sparkCall(t, hc, base+"/v1/submissions/readyz", http.MethodGet, "", ""); r.status != http.StatusOK || r.fields["success"] != true {
		t.Fatalf("readyz without a token: %d %s", r.status, r.raw)
	}
	if ka := sparkCall(t, hc, base+"/v1/submissions/killall", http.MethodPost, submitToken, ""); ka.status != http.StatusOK || ka.fields["success"] != true {
		t.Fatalf("killall with the submit token: %d %s", ka.status, ka.raw)
	}
	sparkCall(t, hc, base+"/v1/submissions/clear", http.MethodPost, submitToken, "").isSparkError(t, http.StatusForbidden)
	if cl := sparkCall(t, hc, base+"/v1/submissions/clear", http.MethodPost, readToken(t, c.Secrets.OperatorToken), ""); cl.fields["success"] != true {
		t.Fatalf("clear with the operator token: %d %s", cl.status, cl.raw)
	}
}

// TestSparkRESTDriverCgroupHoldsHeapAndOverhead: the cgroup of a driver
// submitted through Spark REST holds it to spark.driver.memory plus the
// overhead, Spark's default (384 MiB for a small heap) or
// spark.driver.memoryOverhead, and the driver is told that total and its
// cores.
func TestSparkRESTDriverCgroupHoldsHeapAndOverhead(t *testing.T) {
	needCgroups(t)
	c, rest := sparkRESTCluster(t, testcluster.Options{Workers: 1, WorkerArgs: []string{"--isolation", "cgroups"}},
		`/bin/sh -c {{appArgs}}`)
	w := c.Worker("w1")
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	// The driver says what it was told, then waits to be looked at.
	script := `echo "$DROVER_DRIVER_CORES $DROVER_DRIVER_MEMORY_MB"; exec sleep 1000`
	for _, tc := range []struct {
		name, overhead string
		want           int
	}{
		{"default overhead", "", 256 + 384},
		{"overhead given", `"spark.driver.memoryOverhead" : "100m",`, 256 + 100},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "-"), func(t *testing.T) {
			body := strings.Replace(createJSON("probe", script), `"spark.driver.memory" : "256m",`, `"spark.driver.memory" : "256m", `+tc.overhead, 1)
			a := sparkCall(t, hc, "http://"+rest[c.Masters[0].ID]+"/v1/submissions/create", http.MethodPost, "", body)
			id := a.str("submissionId")
			if a.fields["success"] != true {
				t.Fatalf("create: %d %s", a.status, a.raw)
			}
			c.WaitDriver(id, 30*time.Second, "RUNNING", isState(model.DriverRunning))
			cgrouptest.AssertMemoryLimit(t, attemptCgroup(t, w, id, 1).Ref(), tc.want)
			dir := filepath.Join(w.Dir, id, "attempt-1")
			want := fmt.Sprintf("1 %d\n", tc.want)
			waitFor(t, 10*time.Second, "the driver's output", func() bool {
				b, _ := os.ReadFile(filepath.Join(dir, unitdir.LogFileName(unitdir.StdoutFile, 0)))
				return string(b) == want
			})
		})
	}
}
