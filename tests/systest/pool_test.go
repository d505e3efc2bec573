package systest

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/testcluster"
)

// Masters started with --peers alone and workers with --masters alone form
// one gossip pool, whichever master leads: drivers are placed and run
// across three leader SIGKILLs and restarts.
func TestClusterFormsWithoutJoin(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Masters: 3, Workers: 2, NoJoin: true})
	if err := c.WaitReady(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	p := newProbe(t)
	for round := range 3 {
		leader, err := c.Leader(30 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		id := submit(t, c, p.request("exit 0", false))
		p.finishes(c, id, 1)
		leader.Kill()
		next, err := c.Leader(30 * time.Second)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		id = submit(t, c, p.request("exit 0", false))
		d := p.finishes(c, id, 1)
		if d.State != model.DriverFinished {
			t.Fatalf("round %d, led by %s: %s is %s", round, next.ID, id, d.State)
		}
		if err := leader.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 60*time.Second, "the restarted master back in the leader's pool", func() bool {
			return poolWhole(t, c)
		})
	}
}

// poolWhole reports whether the leader sees every master and worker in its
// pool and says so in /v1/health.
func poolWhole(t *testing.T, c *testcluster.Cluster) bool {
	l, err := c.Leader(10 * time.Second)
	if err != nil {
		return false
	}
	st, err := testcluster.State(context.Background(), l)
	if err != nil || len(st.PoolSplit) != 0 {
		return false
	}
	h := health(t, c, l)
	return h.Status == "ok"
}

// health reads a master's /v1/health, which needs no credential.
func health(t *testing.T, c *testcluster.Cluster, n *testcluster.Node) api.Health {
	t.Helper()
	resp, err := http.Get(c.Scheme() + "://" + n.HTTP + "/v1/health")
	if err != nil {
		return api.Health{}
	}
	defer resp.Body.Close()
	var h api.Health
	if json.NewDecoder(resp.Body).Decode(&h) != nil {
		return api.Health{}
	}
	if (resp.StatusCode == http.StatusOK) != (h.Status == "ok") {
		t.Fatalf("/v1/health of %s: %d with status %q", n.ID, resp.StatusCode, h.Status)
	}
	return h
}

// The command lines of design.md as written: masters with --peers and no
// --join, workers that --join the first master's gossip port only. Once
// that master is SIGKILLed another one leads, one the workers never
// joined, and drivers are still placed and finish.
func TestDesignCommandLines(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Masters: 3, NoJoin: true})
	m1 := c.Masters[0]
	for _, id := range []string{"w1", "w2"} {
		c.AddWorker(id, "--join", m1.Gossip)
	}
	if err := c.WaitReady(90 * time.Second); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "one pool of three masters and two workers", func() bool { return poolWhole(t, c) })
	m1.Kill()
	next, err := c.Leader(60 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	p := newProbe(t)
	for range 2 {
		id := submit(t, c, p.request("exit 0", false))
		if d := p.finishes(c, id, 1); d.State != model.DriverFinished {
			t.Fatalf("led by %s with m1 killed: %s is %s", next.ID, id, d.State)
		}
	}
	waitFor(t, 60*time.Second, "the new leader seeing both workers in its pool", func() bool { return poolWhole(t, c) })
}
