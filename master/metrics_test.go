package master

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/internal/freeport"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/security/pki"
	"github.com/drover-project/drover/tests/metricstest"
	"github.com/drover-project/drover/transport/gossip"
)

// metricsFailSafe bounds every wait of the metrics tests, so that a broken
// master fails them instead of hanging; no test relies on it for ordering.
const metricsFailSafe = 30 * time.Second

// metricsMaster starts a real single-voter master on 127.0.0.1 that
// declares a worker lost after workerTimeout out of the gossip pool.
func metricsMaster(t *testing.T, workerTimeout time.Duration) *Master {
	t.Helper()
	cfg := singleConfig(t)
	cfg.WorkerTimeout = workerTimeout
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// waitTables waits, on each change of m's tables, until cond holds.
func waitTables(t *testing.T, m *Master, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(metricsFailSafe)
	for {
		changed := m.fsm.Changed()
		if cond() {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// gossipWorker puts a member with the worker role and ID id into m's
// gossip pool, as a worker's command does, and returns once it knows m:
// the master learns of it in the same exchange. It is shut down when the
// test ends.
func gossipWorker(t *testing.T, m *Master, id string) *gossip.Pool {
	t.Helper()
	return gossipMember(t, m, gossip.Meta{Role: gossip.RoleWorker, ID: id, HTTP: "127.0.0.1:1"})
}

// gossipMember is gossipWorker with the member's metadata given whole.
func gossipMember(t *testing.T, m *Master, meta gossip.Meta) *gossip.Pool {
	t.Helper()
	return gossipMemberAt(t, m, "127.0.0.1", meta)
}

// gossipMemberAt is gossipMember gossiping from ip.
func gossipMemberAt(t *testing.T, m *Master, ip string, meta gossip.Meta) *gossip.Pool {
	t.Helper()
	ports, err := freeport.Get(ip, 1)
	if err != nil {
		t.Fatal(err)
	}
	joined := make(chan struct{}, 1)
	var p *gossip.Pool
	p, err = gossip.Start(gossip.Config{
		Meta:      meta,
		BindIP:    ip,
		SecretKey: m.cfg.GossipKey,
		Port:      ports[0],
		Profile:   "local",
		Join:      []string{net.JoinHostPort("127.0.0.1", strconv.Itoa(m.cfg.GossipPort))},
		OnChange: func() {
			select {
			case joined <- struct{}{}:
			default:
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Leave panics on a member shut down already: the test may have made
	// it leave.
	t.Cleanup(func() { _ = p.Shutdown() })
	deadline := time.After(metricsFailSafe)
	for {
		if _, ok := p.Lookup(gossip.RoleMaster, "m1"); ok {
			break
		}
		select {
		case <-joined:
		case <-deadline:
			t.Fatalf("gossip member %s never saw the master", meta.ID)
		}
	}
	return p
}

// scrapeMaster reads m's /metrics over HTTP, as Prometheus does.
func scrapeMaster(t *testing.T, m *Master) *metricstest.Scrape {
	t.Helper()
	s, err := metricstest.Get(http.DefaultClient, "http://"+m.HTTPAddr()+"/metrics", "")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// scrapeWhen scrapes m until cond accepts the scrape, and returns it. The
// scheduler and the liveness watch count a commit when Raft hands back
// its result, a moment after the tables show it, and nothing signals that
// moment: so this looks again at every change of the tables and every few
// milliseconds.
func scrapeWhen(t *testing.T, m *Master, what string, cond func(*metricstest.Scrape) bool) *metricstest.Scrape {
	t.Helper()
	deadline := time.After(metricsFailSafe)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		changed := m.fsm.Changed()
		s := scrapeMaster(t, m)
		if cond(s) {
			return s
		}
		select {
		case <-changed:
		case <-tick.C:
		case <-deadline:
			t.Fatalf("timed out waiting for %s; last scrape:\n%s", what, s.Text)
		}
	}
}

// counted returns a scrapeWhen condition: every counter or histogram named
// (name, then label pairs, in each []string) has at least n samples.
func counted(n float64, series ...[]string) func(*metricstest.Scrape) bool {
	return func(s *metricstest.Scrape) bool {
		for _, x := range series {
			if v, _ := s.Value(x[0], x[1:]...); v < n {
				return false
			}
		}
		return true
	}
}

// wantSample fails unless family name's sample with labels has value v.
func wantSample(t *testing.T, s *metricstest.Scrape, v float64, name string, labels ...string) {
	t.Helper()
	got, ok := s.Value(name, labels...)
	if !ok || got != v {
		t.Errorf("%s%v = %v (present %v), want %v\n%s", name, labels, got, ok, v, s.Show(name))
	}
}

// TestMetricsFollowSchedulingAndLiveness runs one supervised driver
// through a placement, the loss of its worker, a relaunch on another worker
// and its end on a real master, driving the workers' side through the HTTP
// API and the gossip pool, and checks after each step what /metrics says:
// the Raft state, the tables, the scheduler's and the liveness watch's
// counters, the gossip pool and the HTTP requests. The registry must pass
// promlint.
func TestMetricsFollowSchedulingAndLiveness(t *testing.T) {
	m := metricsMaster(t, 500*time.Millisecond)
	cl, err := client.New([]string{m.HTTPAddr()}, client.Options{RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), metricsFailSafe)
	defer cancel()

	// Submitted before any worker registers, so it waits: the first
	// registration places it there and then.
	sub, err := cl.Submit(ctx, api.SubmitRequest{Token: client.NewToken(), DriverSpec: model.DriverSpec{Argv: []string{"/bin/true"}, Cores: 1, MemoryMB: 256, Supervise: true}})
	if err != nil {
		t.Fatal(err)
	}
	id := sub.DriverID
	driver := func() *model.Driver {
		d, ok := m.fsm.State().Driver(id)
		if !ok {
			t.Fatalf("driver %s is gone", id)
		}
		return d
	}
	s := scrapeMaster(t, m)
	wantSample(t, s, 1, "drover_raft_state", "state", "leader")
	wantSample(t, s, 0, "drover_raft_state", "state", "follower")
	wantSample(t, s, 1, "drover_leader_ready")
	wantSample(t, s, 1, "drover_raft_peers")
	wantSample(t, s, 1, "drover_drivers", "state", "SUBMITTED")
	wantSample(t, s, 0, "drover_drivers", "state", "FINISHED")
	wantSample(t, s, 1, "drover_waiting_drivers")
	wantSample(t, s, 1, "drover_namespace_queued_drivers", "namespace", "default")
	wantSample(t, s, 0, "drover_placements_total")
	if v, _ := s.Value("drover_raft_leader_changes_total"); v < 1 {
		t.Errorf("drover_raft_leader_changes_total = %v, want at least the election of this master", v)
	}
	if v, _ := s.Value("drover_raft_apply_duration_seconds"); v < 1 {
		t.Errorf("drover_raft_apply_duration_seconds has %v observations, want the submission's", v)
	}
	for _, name := range []string{"drover_raft_term", "drover_raft_commit_index", "drover_raft_applied_index", "drover_raft_last_log_index"} {
		if v, ok := s.Value(name); !ok || v < 1 {
			t.Errorf("%s = %v (present %v), want at least 1", name, v, ok)
		}
	}

	register := func(worker, instance string) {
		t.Helper()
		err := cl.Do(ctx, http.MethodPost, "/v1/workers/register", api.RegisterWorkerRequest{
			ID: worker, Instance: instance, HTTPAddr: "127.0.0.1:1", Cores: 4, MemoryMB: 1024,
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
	}
	// w1 stays in the pool until the driver is seen on it, so it cannot
	// be lost before.
	p1 := gossipWorker(t, m, "w1")
	register("w1", "i1")
	waitTables(t, m, "the driver placed on w1", func() bool { return driver().WorkerID == "w1" })
	s = scrapeWhen(t, m, "the placement counted", counted(1,
		[]string{"drover_placements_total"}, []string{"drover_scheduling_duration_seconds", "attempt", "first"}))
	wantSample(t, s, 1, "drover_placements_total")
	wantSample(t, s, 0, "drover_relaunches_total")
	wantSample(t, s, 1, "drover_scheduling_duration_seconds", "attempt", "first")
	wantSample(t, s, 0, "drover_waiting_drivers")
	wantSample(t, s, 0, "drover_namespace_queued_drivers", "namespace", "default")
	wantSample(t, s, 1, "drover_namespace_running_drivers", "namespace", "default")
	wantSample(t, s, 1, "drover_namespace_used_cores", "namespace", "default")
	wantSample(t, s, 1, "drover_workers", "state", "ALIVE")
	wantSample(t, s, 4, "drover_worker_cores", "worker", "w1", "kind", "total")
	wantSample(t, s, 1, "drover_worker_cores", "worker", "w1", "kind", "used")
	wantSample(t, s, 1024<<20, "drover_worker_memory_bytes", "worker", "w1", "kind", "total")
	wantSample(t, s, 256<<20, "drover_worker_memory_bytes", "worker", "w1", "kind", "used")
	wantSample(t, s, 2, "drover_gossip_members", "state", "alive")

	// w1 leaves the pool and never heartbeats: the leader declares it
	// lost and the supervised driver waits for its second attempt.
	if err := p1.Leave(time.Second); err != nil {
		t.Fatal(err)
	}
	waitTables(t, m, "w1 lost", func() bool {
		w, _ := m.fsm.State().Worker("w1")
		return w.State == model.WorkerDead && driver().State == model.DriverRelaunching
	})
	s = scrapeWhen(t, m, "the loss counted", counted(1, []string{"drover_workers_lost_total"}))
	wantSample(t, s, 1, "drover_workers_lost_total")
	wantSample(t, s, 1, "drover_workers", "state", "DEAD")
	wantSample(t, s, 1, "drover_drivers", "state", "RELAUNCHING")
	wantSample(t, s, 1, "drover_waiting_drivers")
	wantSample(t, s, 1, "drover_gossip_members", "state", "dead_or_left")
	wantSample(t, s, 1, "drover_gossip_members", "state", "alive")
	if _, ok := s.Value("drover_worker_cores", "worker", "w1"); ok {
		t.Errorf("a DEAD worker's cores are still exported:\n%s", s.Show("drover_worker_cores"))
	}

	gossipWorker(t, m, "w2")
	register("w2", "i2")
	waitTables(t, m, "the driver's second attempt placed on w2", func() bool {
		d := driver()
		return d.WorkerID == "w2" && d.Attempt == 2
	})
	s = scrapeWhen(t, m, "the relaunch counted", counted(1,
		[]string{"drover_relaunches_total"}, []string{"drover_scheduling_duration_seconds", "attempt", "relaunch"}))
	wantSample(t, s, 2, "drover_placements_total")
	wantSample(t, s, 1, "drover_relaunches_total")
	wantSample(t, s, 1, "drover_scheduling_duration_seconds", "attempt", "relaunch")
	wantSample(t, s, 1, "drover_worker_cores", "worker", "w2", "kind", "used")

	zero := 0
	var hb api.HeartbeatResponse
	if err := cl.Do(ctx, http.MethodPost, "/v1/workers/w2/heartbeat", api.HeartbeatRequest{
		Instance: "i2", Running: []api.AttemptRef{},
		Reports: []model.AttemptReport{{DriverID: id, Attempt: 2, State: model.DriverFinished, ExitCode: &zero, Runs: 1}},
	}, &hb); err != nil {
		t.Fatal(err)
	}
	waitTables(t, m, "the driver FINISHED", func() bool { return driver().State == model.DriverFinished })
	s = scrapeMaster(t, m)
	wantSample(t, s, 1, "drover_drivers", "state", "FINISHED")
	wantSample(t, s, 0, "drover_drivers", "state", "RELAUNCHING")
	wantSample(t, s, 0, "drover_worker_cores", "worker", "w2", "kind", "used")
	wantSample(t, s, 0, "drover_raft_apply_errors_total")
	if v, _ := s.Value("drover_http_requests_total", "code", "200", "method", "post"); v < 4 {
		t.Errorf("drover_http_requests_total{code=200,method=post} = %v, want at least the submission, two registrations and a heartbeat", v)
	}

	problems, err := promlint.New(bytes.NewReader(s.Text)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// TestMetricsNeedReadAccess: with tokens, a scrape without one is refused
// like any other status read, and the submit token is enough.
func TestMetricsNeedReadAccess(t *testing.T) {
	cfg := singleConfig(t)
	cfg.OperatorToken, cfg.SubmitToken, cfg.GossipKey = "operator-token-0123456789", "submit-token-0123456789", testGossipKey
	cfg.RaftKey = pki.NewRaftKey()
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	url := "http://" + m.HTTPAddr() + "/metrics"
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("scrape without a token: %s, want 401", resp.Status)
	}
	s, err := metricstest.Get(http.DefaultClient, url, cfg.SubmitToken)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Value("drover_raft_state", "state", "leader"); !ok {
		t.Fatalf("no drover_raft_state in a scrape with the submit token:\n%s", s.Text)
	}
}
