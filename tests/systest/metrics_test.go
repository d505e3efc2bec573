package systest

import (
	"net/http"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/metricstest"
	"github.com/drover-project/drover/tests/testcluster"
)

// TestMetricsEndpoints runs a driver to its end on a real cluster, then
// scrapes every master and the worker as Prometheus would: the leader
// says it leads and counts the finished driver, the masters' scheduler
// counted the placement and Raft its commits, the worker counted the
// launch, and every exposition passes promlint.
func TestMetricsEndpoints(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Workers: 1})
	id := submit(t, c, api.SubmitRequest{DriverSpec: model.DriverSpec{Argv: []string{"/bin/true"}, Cores: 1, MemoryMB: 64}})
	c.WaitDriver(id, 30*time.Second, "FINISHED", isState(model.DriverFinished))
	leader, err := c.Leader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	scrape := func(n *testcluster.Node) *metricstest.Scrape {
		t.Helper()
		s, err := metricstest.Get(hc, "http://"+n.HTTP+"/metrics", "")
		if err != nil {
			t.Fatal(err)
		}
		problems, err := s.Lint()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("%s: lint: %s", n.ID, p)
		}
		return s
	}
	atLeast := func(s *metricstest.Scrape, n *testcluster.Node, v float64, name string, labels ...string) {
		t.Helper()
		if got, ok := s.Value(name, labels...); !ok || got < v {
			t.Errorf("%s: %s%v = %v (present %v), want at least %v\n%s", n.ID, name, labels, got, ok, v, s.Show(name))
		}
	}

	s := scrape(leader)
	if v, ok := s.Value("drover_raft_state", "state", "leader"); !ok || v != 1 {
		t.Errorf("%s: drover_raft_state{state=leader} = %v (present %v), want 1\n%s", leader.ID, v, ok, s.Show("drover_raft_state"))
	}
	atLeast(s, leader, 1, "drover_drivers", "state", "FINISHED")
	atLeast(s, leader, 4, "drover_worker_cores", "worker", "w1", "kind", "total")

	// The scheduler's counters and the commit times belong to the master
	// that led at the time; should leadership have moved since, another
	// master holds them.
	var placements, applies float64
	for _, n := range c.Masters {
		ms := s
		if n != leader {
			ms = scrape(n)
		}
		v, _ := ms.Value("drover_placements_total")
		placements += v
		v, _ = ms.Value("drover_raft_apply_duration_seconds")
		applies += v
	}
	if placements < 1 || applies < 1 {
		t.Errorf("masters counted %v placements and %v commits, want at least 1 of each", placements, applies)
	}

	w := c.Workers[0]
	ws := scrape(w)
	atLeast(ws, w, 1, "drover_worker_launches_total", "kind", "driver")
	atLeast(ws, w, 1, "drover_worker_heartbeats_total", "result", "ok")
	atLeast(ws, w, 4, "drover_worker_cores", "kind", "total")
}
