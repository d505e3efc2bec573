package simworker_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/internal/freeport"
	"github.com/drover-project/drover/master"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/simworker"
	"github.com/drover-project/drover/tests/testcluster"
	"github.com/drover-project/drover/transport/gossip"
)

// testMaster is a real master running in the test's process.
type testMaster struct {
	*master.Master
	// net is the 127.a.b prefix of its address; gossip its gossip
	// host:port.
	net, gossip string
}

// oneMaster starts a real single-voter master in this process, on a random
// 127.a.b.10 address, with tune's changes to its configuration; it is
// closed when the test ends.
func oneMaster(t *testing.T, tune ...func(*master.Config)) testMaster {
	t.Helper()
	prefix := fmt.Sprintf("127.%d.%d", 1+rand.IntN(254), rand.IntN(255))
	ip := prefix + ".10"
	ports, err := freeport.Get(ip, 3)
	if err != nil {
		t.Fatal(err)
	}
	cfg := master.DefaultConfig()
	cfg.ID = "m1"
	cfg.DataDir = t.TempDir()
	cfg.BindIP = ip
	cfg.RaftPort, cfg.HTTPPort, cfg.GossipPort = ports[0], ports[1], ports[2]
	cfg.Peers = []master.Peer{{ID: "m1", RaftAddr: net.JoinHostPort(ip, strconv.Itoa(ports[0]))}}
	cfg.GossipProfile = "local"
	cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 200*time.Millisecond, 200*time.Millisecond, 100*time.Millisecond
	// Generous: under the race detector on a busy machine a heartbeat may
	// come late, and a lost worker would fail the test for the wrong reason.
	cfg.WorkerTimeout = 10 * time.Second
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, f := range tune {
		f(&cfg)
	}
	m, err := master.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return testMaster{Master: m, net: prefix, gossip: net.JoinHostPort(ip, strconv.Itoa(ports[2]))}
}

// TestDriversRunOnSimulatedWorkers submits drivers to a real master and
// waits until the leader's tables show each RUNNING on a simulated worker:
// it fails unless the workers register, take their assignments from
// heartbeats and report them RUNNING. It also checks that a killed driver's
// attempt is reported KILLED, and that each worker gossips as a worker.
func TestDriversRunOnSimulatedWorkers(t *testing.T) {
	m := oneMaster(t)

	var mu sync.Mutex
	acked := map[string]int{}
	fleet, err := simworker.Start(simworker.Options{
		Masters:  []string{m.HTTPAddr()},
		Count:    3,
		Cores:    2,
		MemoryMB: 2048,
		BindIP:   func(i int) string { return fmt.Sprintf("%s.%d", m.net, 100+i) },
		OnRunning: func(id string, attempt int) {
			mu.Lock()
			acked[id] = attempt
			mu.Unlock()
		},
		GossipJoin: []string{m.gossip},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fleet.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := fleet.WaitRegistered(ctx); err != nil {
		t.Fatal(err)
	}

	cl, err := client.New([]string{m.HTTPAddr()}, client.Options{RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := 0; i < 4; i++ {
		res, err := cl.Submit(ctx, api.SubmitRequest{DriverSpec: model.DriverSpec{Argv: []string{"/bin/true"}, Cores: 1, MemoryMB: 100}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.DriverID)
	}
	workers := map[string]bool{}
	for _, id := range fleet.IDs() {
		workers[id] = true
	}
	for _, id := range ids {
		d := testcluster.AwaitDriver(t, cl, id, 30*time.Second, "RUNNING", func(d *model.Driver) bool { return d.State == model.DriverRunning })
		if !workers[d.WorkerID] {
			t.Errorf("driver %s runs on %q, not on a simulated worker", id, d.WorkerID)
		}
		if len(d.Attempts) != 1 || d.Attempts[0].State != model.DriverRunning || d.Attempts[0].Runs != 1 {
			t.Errorf("driver %s: attempts %+v, want one RUNNING with one run", id, d.Attempts)
		}
	}
	// The leader's tables show RUNNING once the report commits; the
	// worker hears of the commit in the heartbeat's answer a moment later,
	// and only then calls OnRunning.
	for {
		mu.Lock()
		n := 0
		for _, id := range ids {
			if acked[id] == 1 {
				n++
			}
		}
		got := fmt.Sprint(acked)
		mu.Unlock()
		if n == len(ids) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("OnRunning not called for every driver's attempt 1 (got %s)", got)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if st := fleet.Stats(); st.Running != int64(len(ids)) || st.Registered != 3 {
		t.Errorf("stats %+v: want %d running and 3 registered", st, len(ids))
	}

	// A kill removes the attempt from the worker's desired set; the
	// worker "kills" it and reports it, which the leader records in the
	// attempt's history.
	if err := cl.Kill(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	testcluster.AwaitDriver(t, cl, ids[0], 30*time.Second, "KILLED with its attempt", func(d *model.Driver) bool {
		return d.State == model.DriverKilled && len(d.Attempts) == 1 && d.Attempts[0].State == model.DriverKilled
	})

	// Every worker is a memberlist member with a worker's metadata,
	// gossiping from the address it registers: an observer joined to the
	// master sees them all.
	obs, err := gossip.Start(gossip.Config{
		Meta: gossip.Meta{Role: "observer", ID: "o1"}, BindIP: m.net + ".99", Port: 0,
		Profile: "local", Join: []string{m.gossip},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Shutdown()
	for {
		seen := 0
		for _, m := range obs.Members() {
			if m.Role == gossip.RoleWorker && workers[m.ID] && m.From(m.HTTP) {
				seen++
			}
		}
		if seen == len(workers) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("observer saw %d of %d simulated workers in the gossip pool", seen, len(workers))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// A worker stopped alone sends nothing more and is declared lost after
// the worker timeout, while the others stay ALIVE.
func TestStopStopsOneWorker(t *testing.T) {
	m := oneMaster(t, func(cfg *master.Config) { cfg.RegisterWithoutGossip, cfg.WorkerTimeout = true, time.Second })
	fleet, err := simworker.Start(simworker.Options{
		Masters: []string{m.HTTPAddr()},
		Count:   2,
		BindIP:  func(i int) string { return fmt.Sprintf("%s.%d", m.net, 100+i) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fleet.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := fleet.WaitRegistered(ctx); err != nil {
		t.Fatal(err)
	}
	fleet.Stop(0)
	cl, err := client.New([]string{m.HTTPAddr()}, client.Options{RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ids := fleet.IDs()
	for {
		var st api.State
		if err := cl.Do(ctx, "GET", "/v1/state", nil, &st); err != nil {
			t.Fatal(err)
		}
		states := map[string]model.WorkerState{}
		for _, w := range st.Workers {
			states[w.ID] = w.State
		}
		if states[ids[0]] == model.WorkerDead {
			if states[ids[1]] != model.WorkerAlive {
				t.Fatalf("the worker left running is %s, want ALIVE", states[ids[1]])
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the stopped worker is still %s", states[ids[0]])
		case <-time.After(50 * time.Millisecond):
		}
	}
	if st := fleet.Stats(); st.Registered != 1 {
		t.Fatalf("%d workers registered after one stopped, want 1", st.Registered)
	}
}
