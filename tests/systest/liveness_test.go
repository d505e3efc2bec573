package systest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/testcluster"
)

// beats is a probe body that records "beat ATTEMPT WORKER UNIXTIME" every
// 100 ms for about the given time, then exits 0.
func beats(d time.Duration) string {
	return fmt.Sprintf(`i=0; while [ $i -lt %d ]; do echo "beat $DROVER_ATTEMPT $DROVER_WORKER_ID $(date +%%s.%%N)" >> "$f"; sleep 0.1; i=$((i+1)); done`,
		int(d/(100*time.Millisecond)))
}

// liveSpans returns, per attempt, the first and last time the driver's
// probe showed that attempt alive.
func (p *probe) liveSpans(id string) map[int][2]float64 {
	spans := map[int][2]float64{}
	for _, l := range p.lines(id) {
		var at int
		var ts float64
		switch {
		case l[0] == "start" && len(l) >= 5:
			at, _ = strconv.Atoi(l[1])
			ts, _ = strconv.ParseFloat(l[4], 64)
		case l[0] == "beat" && len(l) >= 4:
			at, _ = strconv.Atoi(l[1])
			ts, _ = strconv.ParseFloat(l[3], 64)
		default:
			continue
		}
		s, ok := spans[at]
		if !ok {
			s = [2]float64{ts, ts}
		}
		s[0], s[1] = min(s[0], ts), max(s[1], ts)
		spans[at] = s
	}
	return spans
}

// overlap is the longest time, in seconds, during which two attempts of the
// driver were both seen alive (0 when they never overlapped).
func (p *probe) overlap(id string) float64 {
	spans := p.liveSpans(id)
	worst := 0.0
	for a, sa := range spans {
		for b, sb := range spans {
			if a < b {
				worst = max(worst, min(sa[1], sb[1])-max(sa[0], sb[0]))
			}
		}
	}
	return worst
}

func runningAttempt(n int) func(*model.Driver) bool {
	return func(d *model.Driver) bool { return d.State == model.DriverRunning && d.Attempt == n }
}

// startedRunning submits a supervised beat driver and waits until its first
// attempt beats, returning the driver and its worker node.
func startedRunning(t *testing.T, c *testcluster.Cluster, p *probe, run time.Duration) (*model.Driver, *testcluster.Node) {
	t.Helper()
	id := submit(t, c, p.request(beats(run), true))
	d := c.WaitDriver(id, 20*time.Second, "RUNNING", runningAttempt(1))
	waitFor(t, 10*time.Second, "first beat", func() bool { return len(p.liveSpans(id)) == 1 })
	return d, c.Worker(d.WorkerID)
}

// TestWorkerDaemonKillOnly: SIGKILL of the worker daemon alone (its drivers'
// runners survive it) stops the program within the lease, before the leader
// relaunches it elsewhere: attempt 2 finishes and the attempts never overlap.
func TestWorkerDaemonKillOnly(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Workers: 2})
	p := newProbe(t)
	d, w := startedRunning(t, c, p, 20*time.Second)
	w.Kill()
	d = p.finishes(c, d.ID, 2)
	if o := p.overlap(d.ID); o > 0 {
		t.Fatalf("attempts overlapped for %.2fs", o)
	}
}

// TestWorkerGroupKillRelaunchesBeforeTheTimeout: SIGKILL of a worker's
// whole process group (daemon, not its runners) relaunches its supervised
// driver long before gossip and a 30 s worker timeout would, and the
// runner has ended attempt 1 before attempt 2 starts.
func TestWorkerGroupKillRelaunchesBeforeTheTimeout(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Workers: 2, WorkerTimeout: 30 * time.Second})
	p := newProbe(t)
	d, w := startedRunning(t, c, p, 20*time.Second)
	killed := time.Now()
	w.KillGroup()
	c.WaitDriver(d.ID, 20*time.Second, "relaunched RUNNING before the worker timeout", runningAttempt(2))
	t.Logf("relaunched RUNNING %s after the kill", time.Since(killed).Round(time.Millisecond))
	waitFor(t, 20*time.Second, "attempt 2 beating for a second", func() bool {
		s, ok := p.liveSpans(d.ID)[2]
		return ok && s[1]-s[0] >= 1
	})
	if o := p.overlap(d.ID); o > 0 {
		t.Fatalf("attempts overlapped for %.2fs: %v", o, p.liveSpans(d.ID))
	}
}

// TestWorkerPauseLongerThanTimeout: a worker SIGSTOPped past its timeout is
// declared lost and its driver relaunched; on SIGCONT it kills the zombie
// attempt at once, and exactly one attempt finishes.
func TestWorkerPauseLongerThanTimeout(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Workers: 2})
	p := newProbe(t)
	d, w := startedRunning(t, c, p, 15*time.Second)
	if err := w.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	c.WaitDriver(d.ID, 30*time.Second, "relaunched RUNNING", runningAttempt(2))
	resumed := time.Now()
	if err := w.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "zombie attempt 1 stopped", func() bool {
		s := p.liveSpans(d.ID)[1]
		return time.Since(time.Unix(0, int64(s[1]*1e9))) > time.Second
	})
	zombieEnd := time.Unix(0, int64(p.liveSpans(d.ID)[1][1]*1e9))
	t.Logf("zombie's last beat %s after SIGCONT", zombieEnd.Sub(resumed).Round(time.Millisecond))
	if zombieEnd.Sub(resumed) > 5*time.Second {
		t.Fatalf("zombie ran %s after its worker resumed", zombieEnd.Sub(resumed))
	}
	// Attempt 2 runs its whole 15 s of beats, each a fork of date(1): on
	// a loaded 2-core machine that takes up to twice as long.
	d = p.finishes(c, d.ID, 2)
	if d.Attempts[0].State == model.DriverFinished {
		t.Fatal("the zombie attempt was recorded FINISHED")
	}
	c.WaitReady(20 * time.Second) // the resumed worker registers again
}

// TestWorkerPauseShorterThanTimeout: a short SIGSTOP changes nothing.
func TestWorkerPauseShorterThanTimeout(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Workers: 2, WorkerTimeout: 5 * time.Second})
	p := newProbe(t)
	d, w := startedRunning(t, c, p, 6*time.Second)
	if err := w.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // the fault itself: a pause of a set length
	if err := w.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	p.finishes(c, d.ID, 1)
}

// TestWorkerRestartAdoptsDriver: a worker daemon detached (SIGUSR1, as for
// an upgrade) and started again on the same work dir adopts the running
// attempt: it is not restarted and finishes as attempt 1. Each new daemon
// starts as soon as the old one has exited, three times over, so it
// rewrites the lease file before the runner's next look at the old one's
// last renewal, most times.
func TestWorkerRestartAdoptsDriver(t *testing.T) {
	// The lease must outlast the restart: a new worker process takes more
	// than the default 3 s to start on a loaded machine.
	c := testcluster.New(t, testcluster.Options{Workers: 2, WorkerArgs: []string{"--lease", "15s"}})
	p := newProbe(t)
	d, w := startedRunning(t, c, p, 12*time.Second)
	for i := 1; i <= 3; i++ {
		if err := w.Signal(syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
		<-w.Exited()
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, "the restarted worker to adopt the attempt", func() bool {
			return strings.Count(w.Log(), "adopted attempt") == i
		})
	}
	p.finishes(c, d.ID, 1)
}

// TestLeaderAndWorkerKilledTogether: the driver is relaunched exactly once.
func TestLeaderAndWorkerKilledTogether(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Workers: 2})
	p := newProbe(t)
	d, w := startedRunning(t, c, p, 20*time.Second)
	leader, err := c.Leader(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	leader.Kill()
	w.KillGroup()
	c.WaitDriver(d.ID, 40*time.Second, "relaunched", runningAttempt(2))
	if err := leader.Start(); err != nil {
		t.Fatal(err)
	}
	p.finishes(c, d.ID, 2)
}

// TestStaleFailedReportChangesNothing replays, from the first worker, a
// FAILED report for attempt 1 after attempt 2 started elsewhere: the tables
// do not change and nothing is relaunched.
func TestStaleFailedReportChangesNothing(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Workers: 2})
	p := newProbe(t)
	d, w := startedRunning(t, c, p, 30*time.Second)
	w.KillGroup()
	c.WaitDriver(d.ID, 40*time.Second, "relaunched", runningAttempt(2))
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReady(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	leader, err := c.Leader(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	before := stateHash(t, leader)
	one := 1
	instance, err := os.ReadFile(filepath.Join(w.Dir, "worker.instance"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(api.HeartbeatRequest{Instance: strings.TrimSpace(string(instance)), Reports: []model.AttemptReport{
		{DriverID: d.ID, Attempt: 1, State: model.DriverFailed, ExitCode: &one, Reason: "stale"},
	}})
	resp, err := http.Post("http://"+leader.HTTP+"/v1/workers/"+w.ID+"/heartbeat", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("heartbeat: %s", resp.Status)
	}
	got := c.WaitDriver(d.ID, 5*time.Second, "read", func(*model.Driver) bool { return true })
	if got.State != model.DriverRunning || got.Attempt != 2 || got.Attempts[0].State == model.DriverFailed {
		t.Fatalf("after a stale report: %s attempt %d, attempt 1 record %s", got.State, got.Attempt, got.Attempts[0].State)
	}
	if after := stateHash(t, leader); after != before {
		t.Fatal("a stale report changed the tables")
	}
}

// TestWorkerShutdownDecommissions: SIGTERM to a worker kills its attempts,
// marks it DECOMMISSIONED, relaunches the supervised driver elsewhere and
// ends the unsupervised one KILLED with a reason.
func TestWorkerShutdownDecommissions(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Workers: 2, WorkerCores: 2})
	p := newProbe(t)
	sup := submit(t, c, p.request(beats(20*time.Second), true))
	uns := submit(t, c, p.request(beats(20*time.Second), false))
	ds := c.WaitDriver(sup, 20*time.Second, "RUNNING", runningAttempt(1))
	du := c.WaitDriver(uns, 20*time.Second, "RUNNING", runningAttempt(1))
	if ds.WorkerID != du.WorkerID {
		// Spread placement put them apart; shut down the supervised one's
		// worker and check the unsupervised case on the other below.
		t.Logf("drivers on %s and %s", ds.WorkerID, du.WorkerID)
	}
	w := c.Worker(ds.WorkerID)
	w.Stop(30 * time.Second)
	d := c.WaitDriver(sup, 40*time.Second, "relaunched", runningAttempt(2))
	if d.WorkerID == w.ID || d.Attempts[0].State != model.DriverKilled {
		t.Fatalf("supervised driver: attempt 2 on %s, attempt 1 %s; want another worker and KILLED", d.WorkerID, d.Attempts[0].State)
	}
	st, err := testcluster.State(context.Background(), c.Masters[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, wk := range st.Workers {
		if wk.ID == w.ID && wk.State != model.WorkerDecommissioned {
			t.Fatalf("worker %s is %s, want DECOMMISSIONED", wk.ID, wk.State)
		}
	}
	if du.WorkerID == w.ID {
		du = c.WaitDriver(uns, 20*time.Second, "KILLED", isState(model.DriverKilled))
		if !strings.Contains(du.Message, "shut down") && !strings.Contains(du.Message, "killed") {
			t.Fatalf("unsupervised driver killed with message %q", du.Message)
		}
	}
	if o := p.overlap(sup); o > 0 {
		t.Fatalf("attempts overlapped for %.2fs", o)
	}
}

// isolate cuts n off from every other node of the cluster.
func isolate(t *testing.T, c *testcluster.Cluster, n *testcluster.Node) []func() {
	var heals []func()
	for _, o := range append(append([]*testcluster.Node{}, c.Masters...), c.Workers...) {
		if o != n {
			heals = append(heals, testcluster.Partition(t, n, o))
		}
	}
	return heals
}

// TestStrictFencingIsolatedWorker cuts a worker off from every other node with
// iptables in a private network namespace: in strict mode its supervised
// attempt stops within the lease, the leader relaunches after lease plus
// margin, and the attempts never overlap.
func TestStrictFencingIsolatedWorker(t *testing.T) {
	if !testcluster.InOwnNetns(t) {
		return
	}
	strict := []string{"--fencing", "strict", "--lease", "3s"}
	c := testcluster.New(t, testcluster.Options{Workers: 2,
		MasterArgs: append([]string{"--fencing-margin", "1s"}, strict...), WorkerArgs: strict})
	p := newProbe(t)
	d, w := startedRunning(t, c, p, 25*time.Second)
	heals := isolate(t, c, w)
	c.WaitDriver(d.ID, 40*time.Second, "relaunched", runningAttempt(2))
	for _, h := range heals {
		h()
	}
	d = p.finishes(c, d.ID, 2)
	spans := p.liveSpans(d.ID)
	if o := p.overlap(d.ID); o > 0 {
		t.Fatalf("attempts overlapped for %.2fs in strict mode: %v", o, spans)
	}
	t.Logf("gap between attempt 1's last beat and attempt 2's first: %.2fs", spans[2][0]-spans[1][1])
}

// TestDefaultFencingIsolatedWorker: the same isolation in default mode
// relaunches the driver elsewhere while the cut-off attempt keeps running;
// once healed, the old attempt is killed at once.
func TestDefaultFencingIsolatedWorker(t *testing.T) {
	if !testcluster.InOwnNetns(t) {
		return
	}
	c := testcluster.New(t, testcluster.Options{Workers: 2})
	p := newProbe(t)
	d, w := startedRunning(t, c, p, 25*time.Second)
	heals := isolate(t, c, w)
	c.WaitDriver(d.ID, 40*time.Second, "relaunched", runningAttempt(2))
	healed := time.Now()
	for _, h := range heals {
		h()
	}
	waitFor(t, 20*time.Second, "cut-off attempt stopped after heal", func() bool {
		s := p.liveSpans(d.ID)[1]
		return time.Since(time.Unix(0, int64(s[1]*1e9))) > time.Second
	})
	end := time.Unix(0, int64(p.liveSpans(d.ID)[1][1]*1e9))
	t.Logf("overlap %.2fs; old attempt stopped %s after heal", p.overlap(d.ID), end.Sub(healed).Round(time.Millisecond))
	if end.Sub(healed) > 8*time.Second {
		t.Fatalf("old attempt ran %s after the partition healed", end.Sub(healed))
	}
	d = p.finishes(c, d.ID, 2)
}

// TestDuplicateWorkerIDRefused: a second worker process claiming a live
// worker's ID from another work dir is refused and runs nothing; the
// driver runs once, on the real worker.
func TestDuplicateWorkerIDRefused(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Workers: 2})
	p := newProbe(t)
	d, w := startedRunning(t, c, p, 6*time.Second)
	imp := c.StartImpostor(w)
	waitFor(t, 20*time.Second, "impostor refused", func() bool {
		b, _ := os.ReadFile(filepath.Join(c.Dir, w.ID+"-impostor.log"))
		return strings.Contains(string(b), "in use by another worker process")
	})
	p.finishes(c, d.ID, 1)
	st, err := testcluster.State(context.Background(), c.Masters[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, wk := range st.Workers {
		if wk.ID == w.ID && wk.HTTPAddr != w.HTTP {
			t.Fatalf("worker %s now registered at %s, want %s", wk.ID, wk.HTTPAddr, w.HTTP)
		}
	}
	imp.Stop(10 * time.Second)
}
