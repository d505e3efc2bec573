package systest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/internal/freeport"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/testcluster"
)

// docScrapeConfig returns the Prometheus configuration docs/metrics.md
// shows, with its placeholders replaced by ca, tokenFile and targets and
// its interval by 1s. A placeholder missing from the doc fails the test,
// so that the doc cannot drift from what this test runs.
func docScrapeConfig(t *testing.T, ca, tokenFile string, targets []string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "```yaml\nglobal:")
	if i < 0 {
		t.Fatal("docs/metrics.md: no ```yaml block starting with global:")
	}
	block := doc[i+len("```yaml\n"):]
	block = block[:strings.Index(block, "```")]
	for _, r := range [][2]string{
		{"scrape_interval: 15s", "scrape_interval: 1s"},
		{"/etc/drover/ca.pem", ca},
		{"/etc/drover/submit.token", tokenFile},
		{"[10.0.0.1:7102, 10.0.0.2:7102, 10.0.0.3:7102]", "[" + strings.Join(targets, ", ") + "]"},
	} {
		if !strings.Contains(block, r[0]) {
			t.Fatalf("docs/metrics.md's scrape config has no %q:\n%s", r[0], block)
		}
		block = strings.ReplaceAll(block, r[0], r[1])
	}
	return block
}

// promSample is one element of an instant vector from Prometheus's query
// API.
type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

func (s promSample) value() float64 {
	str, _ := s.Value[1].(string)
	v, _ := strconv.ParseFloat(str, 64)
	return v
}

// promQuery evaluates query now through Prometheus's HTTP API at addr.
func promQuery(addr, query string) ([]promSample, error) {
	resp, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(query))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string       `json:"resultType"`
			Result     []promSample `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, fmt.Errorf("%s: %w", resp.Status, err)
	}
	if r.Status != "success" || r.Data.ResultType != "vector" {
		return nil, fmt.Errorf("%s: status %q, result %q: %s", resp.Status, r.Status, r.Data.ResultType, r.Error)
	}
	return r.Data.Result, nil
}

// promTargets describes Prometheus's scrape targets, for failure messages:
// each one's health and last error.
func promTargets(addr string) string {
	resp, err := http.Get("http://" + addr + "/api/v1/targets")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			ActiveTargets []struct {
				ScrapeURL string `json:"scrapeUrl"`
				Health    string `json:"health"`
				LastError string `json:"lastError"`
			} `json:"activeTargets"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return err.Error()
	}
	var out []string
	for _, tg := range r.Data.ActiveTargets {
		out = append(out, fmt.Sprintf("%s %s %s", tg.ScrapeURL, tg.Health, tg.LastError))
	}
	return strings.Join(out, "; ")
}

// TestPrometheusScrapesSecuredMasters runs Debian's prometheus with the
// scrape config of docs/metrics.md against a secured three-master cluster
// (TLS with the cluster CA, bearer token from a file) and reads the
// masters' metrics back through Prometheus's query API: exactly one master
// reports drover_raft_state{state="leader"} 1, the one that leads, and
// drover_drivers counts the drivers the test submitted, by state, on the
// leader (selected as the doc says) and on every master.
func TestPrometheusScrapesSecuredMasters(t *testing.T) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus is not installed (Debian's prometheus package, which .ci/run installs)")
	}
	c := testcluster.New(t, testcluster.Options{Secure: true, Workers: 1})
	cl := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	want := map[model.DriverState]float64{model.DriverFinished: 2, model.DriverRunning: 1}
	for _, argv := range [][]string{{"/bin/true"}, {"/bin/true"}, {"/bin/sleep", "600"}} {
		res, err := cl.Submit(ctx, api.SubmitRequest{DriverSpec: model.DriverSpec{Argv: argv, Cores: 1, MemoryMB: 64}})
		if err != nil {
			t.Fatal(err)
		}
		end := model.DriverFinished
		if argv[0] == "/bin/sleep" {
			end = model.DriverRunning
		}
		c.WaitDriver(res.DriverID, 30*time.Second, string(end), isState(end))
	}

	dir := t.TempDir()
	var targets []string
	for _, m := range c.Masters {
		targets = append(targets, m.HTTP)
	}
	config := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(config, []byte(docScrapeConfig(t, c.Secrets.CA, c.Secrets.SubmitToken, targets)), 0o600); err != nil {
		t.Fatal(err)
	}
	ports, err := freeport.Get("127.0.0.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	prom := exec.Command(bin, "--config.file="+config, "--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	prom.Stdout, prom.Stderr = logf, logf
	prom.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := prom.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = prom.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = prom.Process.Kill()
		<-exited
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("prometheus log:\n%s", b)
		}
	})

	leader, err := c.Leader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// poll evaluates query until ok accepts the samples, failing the test
	// after 30s with the last answer and the targets' health.
	poll := func(what, query string, ok func([]promSample) bool) []promSample {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			select {
			case <-exited:
				t.Fatalf("prometheus exited: %s", prom.ProcessState)
			default:
			}
			got, err := promQuery(addr, query)
			if err == nil && ok(got) {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s gave %+v (%v) for 30s; targets: %s", what, query, got, err, promTargets(addr))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	states := poll("every master reports its Raft state", `drover_raft_state{job="drover-masters",state="leader"}`,
		func(s []promSample) bool { return len(s) == len(c.Masters) })
	var leaders []string
	for _, s := range states {
		switch s.value() {
		case 1:
			leaders = append(leaders, s.Metric["instance"])
		case 0:
		default:
			t.Errorf("%s: drover_raft_state{state=leader} = %v", s.Metric["instance"], s.value())
		}
	}
	if len(leaders) != 1 || leaders[0] != leader.HTTP {
		t.Errorf("masters reporting drover_raft_state{state=leader} 1: %v; want exactly the leader, %s", leaders, leader.HTTP)
	}

	// matches: n masters report every driver state, at the counts of the
	// drivers submitted (0 for the states none is in). Followers apply
	// the finished drivers a moment after the leader.
	matches := func(s []promSample, n int) bool {
		seen := map[string]int{}
		for _, x := range s {
			if x.value() != want[model.DriverState(x.Metric["state"])] {
				return false
			}
			if _, ok := want[model.DriverState(x.Metric["state"])]; ok {
				seen[x.Metric["instance"]]++
			}
		}
		for _, k := range seen {
			if k != len(want) {
				return false
			}
		}
		return len(seen) == n
	}
	got := poll("the leader's drover_drivers", `drover_drivers and on (instance) (drover_leader_ready == 1)`,
		func(s []promSample) bool { return matches(s, 1) })
	if got[0].Metric["instance"] != leader.HTTP {
		t.Errorf("drover_leader_ready selected %s, want the leader %s", got[0].Metric["instance"], leader.HTTP)
	}
	poll("every master's drover_drivers", `drover_drivers{job="drover-masters"}`,
		func(s []promSample) bool { return matches(s, len(c.Masters)) })
}
