package systest

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/simworker"
	"github.com/drover-project/drover/tests/testcluster"
)

// BenchmarkHeartbeats measures what idle workers cost the leader: three
// masters, DROVER_BENCH_HB_WORKERS simulated workers (5,000; -short 200)
// heartbeating with nothing placed, each long-polling as a real worker
// does. It reports the leader's CPU time per wall-clock second over
// DROVER_BENCH_DURATION (10s, -short 2s) as leader_cores, read from
// /proc/PID/stat, then stops one worker as a crash would and reports how
// long after the stop the leader's tables show it DEAD (loss_s) and how
// much of that lies past the masters' --worker-timeout
// (loss_past_timeout_s): the cost of noticing, and of committing
// WorkerLost, among thousands of heartbeats.
//
// The simulated workers are not memberlist members, so the leader knows
// them alive from their heartbeats alone, and the worker timeout
// (DROVER_BENCH_WORKER_TIMEOUT, 10s) must outlast a heartbeat delayed by a
// busy machine.
func BenchmarkHeartbeats(b *testing.B) {
	nworkers := tputEnvInt(b, "DROVER_BENCH_HB_WORKERS", 5000, 200)
	dur := tputEnvDuration(b, "DROVER_BENCH_DURATION", 10*time.Second, 2*time.Second)
	workerTimeout := tputEnvDuration(b, "DROVER_BENCH_WORKER_TIMEOUT", 10*time.Second, 10*time.Second)
	for range b.N {
		cores, loss := hbRun(b, nworkers, dur, workerTimeout)
		b.ReportMetric(cores, "leader_cores")
		b.ReportMetric(loss.Seconds(), "loss_s")
		b.ReportMetric((loss - workerTimeout).Seconds(), "loss_past_timeout_s")
		b.ReportMetric(workerTimeout.Seconds(), "worker_timeout_s")
	}
	b.ReportMetric(0, "ns/op")
}

// hbRun runs one measurement on a fresh cluster, which it stops before
// returning: the leader's cores while the fleet heartbeats for dur, and
// the time from one worker's stop to its committed loss.
func hbRun(b *testing.B, nworkers int, dur, workerTimeout time.Duration) (float64, time.Duration) {
	c, leader := tputCluster(b, testcluster.Options{WorkerTimeout: workerTimeout, MasterArgs: []string{"--register-without-gossip"}})
	defer func() {
		for _, n := range c.Masters {
			n.Kill()
		}
	}()
	// Source addresses as BenchmarkPlacement's: the masters' /16,
	// outside their /24.
	ip := net.ParseIP(c.Masters[0].IP).To4()
	fleet, err := simworker.Start(simworker.Options{
		Masters: strings.Split(c.MasterAddrs, ","),
		Count:   nworkers,
		BindIP: func(i int) string {
			return fmt.Sprintf("127.%d.%d.%d", ip[1], (int(ip[2])+1+i/250)%256, 1+i%250)
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	defer fleet.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// A registration answered is a worker ALIVE in the leader's tables;
	// /v1/state, which lists every worker, is too large at 5,000
	// workers to poll on a loaded machine.
	if err := fleet.WaitRegistered(ctx); err != nil {
		b.Fatal(err)
	}
	// The registrations' burst over, every worker is in its long-poll
	// rhythm.
	time.Sleep(2 * time.Second)
	pid := leader.PID()
	start, cpu0 := time.Now(), tputCPU(pid)
	time.Sleep(dur)
	cores := float64(tputCPU(pid)-cpu0) / float64(time.Since(start))
	st := fleet.Stats()
	if now, err := c.Leader(time.Minute); err != nil || now != leader {
		b.Fatalf("the leader changed during the measurement")
	}

	victim := len(fleet.IDs()) - 1
	id := fleet.IDs()[victim]
	fleet.Stop(victim)
	stopped := time.Now()
	// The leader's own tables, polled: no endpoint reads one worker.
	for !hbDead(b, ctx, leader, id) {
		if time.Since(stopped) > workerTimeout+time.Minute {
			b.Fatalf("worker %s not DEAD %s after its stop", id, time.Since(stopped).Round(time.Millisecond))
		}
		time.Sleep(100 * time.Millisecond)
	}
	loss := time.Since(stopped)
	b.Logf("%d simulated workers: leader %.3f cores over %s (%d heartbeats so far, %d failed calls); %s lost %s after its stop (worker timeout %s)",
		nworkers, cores, dur, st.Heartbeats, st.Failures, id, loss.Round(time.Millisecond), workerTimeout)
	return cores, loss
}

// hbDead reports whether the node's tables hold worker id as DEAD.
func hbDead(b *testing.B, ctx context.Context, n *testcluster.Node, id string) bool {
	st, err := testcluster.State(ctx, n)
	if err != nil {
		b.Fatal(err)
	}
	for _, w := range st.Workers {
		if w.ID == id {
			return w.State == model.WorkerDead
		}
	}
	b.Fatalf("worker %s is not in the leader's tables", id)
	return false
}
