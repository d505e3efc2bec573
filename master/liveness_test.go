package master

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/master/leader"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/transport/gossip"
)

// fakeWorker is a worker as the leader sees it: a gossip member, a
// listener at its HTTP address, and a loop of long-poll heartbeats.
type fakeWorker struct {
	id   string
	pool *gossip.Pool
	ln   net.Listener
	cl   *client.Client
	stop context.CancelFunc
	done chan struct{}
}

// startFakeWorker registers worker id, tethered or not, with m and starts
// its heartbeats.
func startFakeWorker(t *testing.T, m *Master, id string, tethered bool) *fakeWorker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	pool := gossipMember(t, m, gossip.Meta{Role: gossip.RoleWorker, ID: id, HTTP: ln.Addr().String(), Tethered: tethered})
	cl, err := client.New([]string{m.HTTPAddr()}, client.Options{RequestTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), metricsFailSafe)
	defer cancel()
	if err := cl.Do(ctx, http.MethodPost, "/v1/workers/register", api.RegisterWorkerRequest{
		ID: id, Instance: "i-" + id, HTTPAddr: ln.Addr().String(), Cores: 1, MemoryMB: 64,
	}, nil); err != nil {
		t.Fatal(err)
	}
	w := &fakeWorker{id: id, pool: pool, ln: ln, cl: cl}
	w.beat(t)
	return w
}

// beat starts the heartbeat loop: each heartbeat is held by the leader
// until nothing changes for HeartbeatWait, and the next follows at once.
// It returns once the leader has answered the first.
func (w *fakeWorker) beat(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w.stop, w.done = cancel, make(chan struct{})
	first := make(chan error, 1)
	go func() {
		defer close(w.done)
		var index uint64
		for n := 0; ctx.Err() == nil; n++ {
			var resp api.HeartbeatResponse
			err := w.cl.Do(ctx, http.MethodPost, "/v1/workers/"+w.id+"/heartbeat",
				api.HeartbeatRequest{Instance: "i-" + w.id, Running: []api.AttemptRef{}, WaitIndex: index}, &resp)
			if n == 0 {
				first <- err
			}
			index = resp.Index
		}
	}()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.silence)
}

// silence ends the heartbeat loop; a held heartbeat's connection closes,
// as when the worker's daemon dies.
func (w *fakeWorker) silence() {
	w.stop()
	<-w.done
}

// A tethered worker whose held heartbeat's connection closes and whose
// address then refuses connections is declared lost well before the worker
// timeout, which gossip would wait for; one that is silent but still
// listening (paused), one that reconnects at once (and whose heartbeats
// then speak for it, whatever listens), and one that is not tethered (its
// programs outlive its daemon) are not.
func TestTetheredWorkerLostOnceItsDaemonIsGone(t *testing.T) {
	m := metricsMaster(t, time.Minute)
	waitReady(t, m)
	paused := startFakeWorker(t, m, "w2", true)
	untethered := startFakeWorker(t, m, "w3", false)
	back := startFakeWorker(t, m, "w4", true)
	dead := startFakeWorker(t, m, "w9", true)

	paused.silence()
	untethered.silence()
	_ = untethered.ln.Close()
	back.silence()
	back.beat(t)
	_ = back.ln.Close()
	// The dead worker goes last and sorts last, so that a wrong verdict
	// on any other comes no later than its own.
	dead.silence()
	_ = dead.ln.Close()
	died := time.Now()
	waitTables(t, m, "w9 lost", func() bool {
		w, _ := m.fsm.State().Worker("w9")
		return w.State == model.WorkerDead
	})
	took := time.Since(died)
	t.Logf("w9 lost %s after its daemon went", took.Round(time.Millisecond))
	if took >= m.cfg.WorkerTimeout {
		t.Fatalf("w9 lost after %s, not before the worker timeout %s", took, m.cfg.WorkerTimeout)
	}
	for _, id := range []string{"w2", "w3", "w4"} {
		if w, _ := m.fsm.State().Worker(id); w.State != model.WorkerAlive {
			t.Errorf("%s is %s (%s), want ALIVE", id, w.State, w.Message)
		}
	}
	if w, _ := m.fsm.State().Worker("w9"); !strings.Contains(w.Message, "daemon is gone") {
		t.Errorf("w9's loss says %q", w.Message)
	}
}

// goneWorker starts a master with a 1 s worker timeout and a fake worker
// w1 that registers, then goes silent, closes its HTTP listener and
// leaves the gossip pool: its name is free for the next member that
// claims it.
func goneWorker(t *testing.T) (*Master, *fakeWorker) {
	t.Helper()
	m := metricsMaster(t, time.Second)
	waitReady(t, m)
	w := startFakeWorker(t, m, "w1", false)
	w.silence()
	_ = w.ln.Close()
	if err := w.pool.Leave(time.Second); err != nil {
		t.Fatal(err)
	}
	return m, w
}

// A member that gossips under a worker's name from elsewhere than the
// worker registered from is not the worker: once w1's own member has left
// the pool (memberlist then hands the name to the next that claims it,
// from anywhere) and w1 has gone silent, a member named worker/w1 on
// another address, claiming w1's HTTP address, keeps nothing alive: w1 is
// lost after the worker timeout, as if nobody held its name.
func TestWorkerAliveOnlyFromWhereItRegistered(t *testing.T) {
	m, w := goneWorker(t)
	imp := gossipMemberAt(t, m, "127.0.0.2", gossip.Meta{Role: gossip.RoleWorker, ID: "w1", HTTP: w.ln.Addr().String()})
	left := time.Now()
	waitTables(t, m, "w1 lost", func() bool {
		wk, _ := m.fsm.State().Worker("w1")
		return wk.State == model.WorkerDead
	})
	t.Logf("w1 lost %s after it left, with %s holding its name", time.Since(left).Round(time.Millisecond), imp.Addr())
	if meta, ok := m.pool.Lookup(gossip.RoleWorker, "w1"); !ok || meta.HTTP != w.ln.Addr().String() {
		t.Fatalf("the impostor was not in the master's pool under w1's name (%+v, %v): the test proves nothing", meta, ok)
	}
}

// A worker that comes back on another address registers from there, and
// the leader watches it there: once it has registered anew, its member at
// the new address keeps it ALIVE through several worker timeouts without
// a heartbeat, as any member at its registered address does.
func TestLivenessFollowsAWorkerThatMoved(t *testing.T) {
	m, w := goneWorker(t)
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	moved := ln.Addr().String()
	gossipMemberAt(t, m, "127.0.0.2", gossip.Meta{Role: gossip.RoleWorker, ID: "w1", HTTP: moved})
	ctx, cancel := context.WithTimeout(context.Background(), metricsFailSafe)
	defer cancel()
	if err := w.cl.Do(ctx, http.MethodPost, "/v1/workers/register", api.RegisterWorkerRequest{
		ID: "w1", Instance: "i-w1", HTTPAddr: moved, Cores: 1, MemoryMB: 64,
	}, nil); err != nil {
		t.Fatal(err)
	}
	registered := time.Now()
	timer := time.NewTimer(3 * m.cfg.WorkerTimeout)
	defer timer.Stop()
	for {
		changed := m.fsm.Changed()
		if wk, _ := m.fsm.State().Worker("w1"); wk.State != model.WorkerAlive || wk.HTTPAddr != moved {
			t.Fatalf("%s after it registered at %s, w1 is %s at %s (%s)", time.Since(registered).Round(time.Millisecond), moved, wk.State, wk.HTTPAddr, wk.Message)
		}
		select {
		case <-changed:
		case <-timer.C:
			return
		}
	}
}

// A worker that stops heartbeating is lost after the worker heartbeat
// timeout, though a member at its registered address, with its HTTP
// address, stays alive in the pool: what any holder of the gossip key can
// run in its place, advertising its address. A worker whose heartbeats
// go on stays ALIVE meanwhile, beyond the timeout.
func TestGossipAloneKeepsNoSilentWorkerAlive(t *testing.T) {
	cfg := singleConfig(t)
	cfg.WorkerTimeout = time.Second // gossip's own verdict would come soon after the member left
	cfg.WorkerHeartbeatTimeout = leader.MinWorkerHeartbeatTimeout(cfg.heartbeatWait())
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	waitReady(t, m)
	live := startFakeWorker(t, m, "w1", true)
	silent := startFakeWorker(t, m, "w2", true)
	silent.silence()
	silenced := time.Now()
	waitTables(t, m, "w2 lost", func() bool {
		w, _ := m.fsm.State().Worker("w2")
		return w.State == model.WorkerDead
	})
	took := time.Since(silenced)
	t.Logf("w2 lost %s after its heartbeats stopped", took.Round(time.Millisecond))
	if took < cfg.WorkerHeartbeatTimeout-time.Second {
		t.Fatalf("w2 lost %s after its heartbeats stopped, before the timeout %s", took, cfg.WorkerHeartbeatTimeout)
	}
	if w, _ := m.fsm.State().Worker("w2"); !strings.Contains(w.Message, "no heartbeat") {
		t.Errorf("w2's loss says %q", w.Message)
	}
	if _, ok := m.pool.LookupAt(gossip.RoleWorker, "w2", silent.ln.Addr().String()); !ok {
		t.Fatal("w2's member left the pool: the test proves nothing")
	}
	if w, _ := m.fsm.State().Worker(live.id); w.State != model.WorkerAlive {
		t.Fatalf("%s, heartbeating all along, is %s (%s)", live.id, w.State, w.Message)
	}
}
