package systest

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/testcluster"
)

// TestBadInputChangesNothing sends each kind of bad request to the leader
// and to a follower (which forwards it) and expects a 4xx with a one-line
// reason and identical tables afterwards.
func TestBadInputChangesNothing(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Workers: 1})
	p := newProbe(t)
	finished := submit(t, c, p.request("true", false))
	c.WaitDriver(finished, 20*time.Second, "FINISHED", isState(model.DriverFinished))
	leader, err := c.Leader(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	follower := c.Follower(leader)
	valid := `{"token":"t","argv":["true"],"cores":1,"memory_mb":64}`
	cases := []struct {
		name, method, path, body string
		status                   int
	}{
		{"malformed JSON", "POST", "/v1/drivers", `{"token":`, 400},
		{"trailing data", "POST", "/v1/drivers", valid + `{}`, 400},
		{"unknown field", "POST", "/v1/drivers", `{"token":"t","argv":["true"],"cores":1,"memory_mb":64,"gpus":1}`, 400},
		{"zero cores", "POST", "/v1/drivers", `{"token":"t","argv":["true"],"cores":0,"memory_mb":64}`, 400},
		{"negative cores", "POST", "/v1/drivers", `{"token":"t","argv":["true"],"cores":-2,"memory_mb":64}`, 400},
		{"zero memory", "POST", "/v1/drivers", `{"token":"t","argv":["true"],"cores":1,"memory_mb":0}`, 400},
		{"negative memory", "POST", "/v1/drivers", `{"token":"t","argv":["true"],"cores":1,"memory_mb":-64}`, 400},
		{"empty program", "POST", "/v1/drivers", `{"token":"t","argv":[],"cores":1,"memory_mb":64}`, 400},
		{"empty program name", "POST", "/v1/drivers", `{"token":"t","argv":[""],"cores":1,"memory_mb":64}`, 400},
		{"bad env name", "POST", "/v1/drivers", `{"token":"t","argv":["true"],"env":{"A B":"1"},"cores":1,"memory_mb":64}`, 400},
		{"no token", "POST", "/v1/drivers", `{"argv":["true"],"cores":1,"memory_mb":64}`, 400},
		{"wrong type", "POST", "/v1/drivers", `{"token":"t","argv":"true","cores":1,"memory_mb":64}`, 400},
		{"oversized body", "POST", "/v1/drivers", `{"token":"` + strings.Repeat("x", 2<<20) + `"}`, 413},
		{"unknown driver status", "GET", "/v1/drivers/driver-20200101000000-9999", "", 404},
		{"malformed driver ID", "GET", "/v1/drivers/driver-..-1", "", 400},
		{"unknown driver kill", "POST", "/v1/drivers/driver-20200101000000-9999/kill", "", 404},
		{"kill of a finished driver", "POST", "/v1/drivers/" + finished + "/kill", "", 409},
		{"logs of unknown driver", "GET", "/v1/drivers/driver-20200101000000-9999/logs", "", 404},
		{"bad worker registration", "POST", "/v1/workers/register", `{"id":"../x","http_addr":"127.0.0.1:1","cores":1,"memory_mb":1}`, 400},
		{"worker with no cores", "POST", "/v1/workers/register", `{"id":"w9","http_addr":"127.0.0.1:1","cores":0,"memory_mb":1}`, 400},
		{"unknown endpoint", "GET", "/v1/nothing", "", 404},
	}
	before := stateHash(t, leader)
	hc := &http.Client{Timeout: 10 * time.Second}
	for _, target := range []*testcluster.Node{leader, follower} {
		for _, tc := range cases {
			req, _ := http.NewRequest(tc.method, "http://"+target.HTTP+tc.path, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatalf("%s via %s: %v", tc.name, target.ID, err)
			}
			var e api.Error
			decErr := json.NewDecoder(resp.Body).Decode(&e)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Errorf("%s via %s: status %d (%q), want %d", tc.name, target.ID, resp.StatusCode, e.Error, tc.status)
			}
			if decErr != nil || e.Error == "" || strings.Contains(e.Error, "\n") {
				t.Errorf("%s via %s: want a one-line JSON error, got %q (%v)", tc.name, target.ID, e.Error, decErr)
			}
		}
	}
	if after := stateHash(t, leader); after != before {
		t.Fatal("bad requests changed the tables")
	}

	// The CLI exits non-zero with the master's one line.
	for _, args := range [][]string{
		{"submit", "--driver-cores", "0", "--", "true"},
		{"submit", "--driver-memory", "-1g", "--", "true"},
		{"submit"},
		{"status", "driver-20200101000000-9999"},
		{"kill", finished},
		{"list", "extra"},
		{"submit", "--env", "DROVER_ATTEMPT=9", "--", "true"},
	} {
		_, stderr, code := runDrover(t, nil, append([]string{"client", "--masters", c.MasterAddrs, "--timeout", "10s"}, args...)...)
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if code != 1 || len(lines) != 1 || lines[0] == "" {
			t.Errorf("drover client %v: exit %d, stderr %q; want exit 1 and one line", args, code, stderr)
		}
	}
	if after := stateHash(t, leader); after != before {
		t.Fatal("bad CLI calls changed the tables")
	}

	// A driver larger than any worker is queued, explained, and submit
	// exits 3 instead of waiting for ever.
	cmd := exec.Command(testcluster.Binary(t), "client", "--masters", c.MasterAddrs, "submit", "--driver-cores", "100", "--", "true")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	go func() { done <- cmd.Run() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("submit of an unplaceable driver did not return")
	}
	if code := cmd.ProcessState.ExitCode(); code != 3 || !strings.Contains(stderr.String(), api.ReasonUnplaceable) {
		t.Fatalf("unplaceable submit: exit %d, stderr %q; want 3 and the reason", code, stderr.String())
	}
	if id := strings.TrimSpace(stdout.String()); !strings.HasPrefix(id, "driver-") {
		t.Fatalf("unplaceable submit printed %q, want its driver ID", id)
	}
}

// TestNoLeaderAnswers503AndCLIExits2: a master whose peers never start has
// no leader; it answers 503 with one line, and the CLI gives up after its
// timeout with exit code 2 and one line.
func TestNoLeaderAnswers503AndCLIExits2(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Masters: 1,
		ExtraPeers: []string{"m2=127.0.0.1:1", "m3=127.0.0.1:2"}})
	m := c.Masters[0]
	hc := &http.Client{Timeout: 5 * time.Second}
	var resp *http.Response
	waitFor(t, 10*time.Second, "master answering", func() bool {
		r, err := hc.Post("http://"+m.HTTP+"/v1/drivers", "application/json",
			strings.NewReader(`{"token":"t","argv":["true"],"cores":1,"memory_mb":64}`))
		if err != nil {
			return false
		}
		resp = r
		return true
	})
	var e api.Error
	_ = json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || e.Error == "" {
		t.Fatalf("submit without a leader: %d %q, want 503 with a reason", resp.StatusCode, e.Error)
	}
	start := time.Now()
	stdout, stderr, code := runDrover(t, nil, "client", "--masters", c.MasterAddrs, "--timeout", "2s", "submit", "--", "true")
	took := time.Since(start)
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if code != 2 || len(lines) != 1 || !strings.Contains(lines[0], "no master answered with a leader") {
		t.Fatalf("CLI without a leader: exit %d, stderr %q; want exit 2 and one line", code, stderr)
	}
	if took > 10*time.Second {
		t.Fatalf("CLI took %s to give up with a 2s timeout", took)
	}
	if stdout != "" {
		t.Fatalf("CLI printed %q on stdout without a driver", stdout)
	}
	if st, err := testcluster.State(context.Background(), m); err != nil || len(st.Drivers) != 0 {
		t.Fatalf("tables changed without a leader: %v %v", st, err)
	}
}
