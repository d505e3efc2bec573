package systest

// Benchmarks that price the Raft timeouts: how many elections a setting
// starts on its own under load, and how long a pause of the leader it
// rides out. Short timeouts make failover fast (failover_bench_test.go);
// these show what they cost. Sizes come from environment variables:
//
//	DROVER_BENCH_ELECTION_WATCH  how long each setting runs under load
//	                             (FalseElections): 2m, -short 20s
//
// For example, on a quiet machine:
//
//	go test -run '^$' -bench 'FalseElections|LeaderPause' -benchtime 1x ./systest/

import (
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/drover-project/drover/master"
	"github.com/drover-project/drover/tests/testcluster"
)

// raftTiming is one setting of the masters' Raft timeouts
// (--raft-heartbeat-timeout, --raft-election-timeout, --raft-leader-lease).
type raftTiming struct {
	name                       string
	heartbeat, election, lease time.Duration
}

// String is t's three timeouts, heartbeat/election/lease.
func (t raftTiming) String() string {
	return fmt.Sprintf("%s/%s/%s", t.heartbeat, t.election, t.lease)
}

// args are the masters' flags for t.
func (t raftTiming) args() []string {
	return []string{"--raft-heartbeat-timeout", t.heartbeat.String(),
		"--raft-election-timeout", t.election.String(), "--raft-leader-lease", t.lease.String()}
}

// defaultTiming is the masters' default setting (master.DefaultConfig), so
// that the failover figure of the defaults follows a change of them.
func defaultTiming() raftTiming {
	c := master.DefaultConfig()
	return raftTiming{name: "default", heartbeat: c.HeartbeatTimeout, election: c.ElectionTimeout, lease: c.LeaderLeaseTimeout}
}

// candidateTimings are the settings the defaults were chosen among: the
// old 1 s default, drover dev's 500 ms with its 250 ms lease, and shorter
// heartbeat timeouts with the lease as long as the heartbeat timeout, so
// that a pause of the leader shorter than the lease does not make it step
// down.
var candidateTimings = []raftTiming{
	{"raft-1s", time.Second, time.Second, 500 * time.Millisecond},
	{"raft-500ms-lease-250ms", 500 * time.Millisecond, 500 * time.Millisecond, 250 * time.Millisecond},
	{"raft-500ms", 500 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond},
	{"raft-400ms", 400 * time.Millisecond, 400 * time.Millisecond, 400 * time.Millisecond},
}

// timings are the default setting, then every candidate that differs
// from it.
func timings() []raftTiming {
	d := defaultTiming()
	out := []raftTiming{d}
	for _, t := range candidateTimings {
		if t.heartbeat != d.heartbeat || t.election != d.election || t.lease != d.lease {
			out = append(out, t)
		}
	}
	return out
}

// maxTerm is the highest Raft term any running master reports: every
// election, won or not, raises it by one (pre-vote rounds that fail do
// not). A master too starved by the load to answer in time is asked
// again, for up to 30 s.
func maxTerm(b *testing.B, c *testcluster.Cluster) uint64 {
	var term uint64
	for _, n := range c.Masters {
		if !n.Running() {
			continue
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			st, err := testcluster.State(ctx, n)
			cancel()
			if err == nil {
				term = max(term, st.Term)
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("state of %s: %v", n.ID, err)
			}
			b.Logf("state of %s: %v; asking again", n.ID, err)
			time.Sleep(100 * time.Millisecond)
		}
	}
	return term
}

// waitSettled waits until every master follows the same leader in the same
// term, so that a trial starts from a cluster no election is under way in.
func waitSettled(b *testing.B, c *testcluster.Cluster) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		leader, term, same := "", uint64(0), true
		for i, n := range c.Masters {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			st, err := testcluster.State(ctx, n)
			cancel()
			if err != nil || st.Leader == "" || (i > 0 && (st.Leader != leader || st.Term != term)) {
				same = false
				break
			}
			leader, term = st.Leader, st.Term
		}
		if same {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.Fatal("the masters did not settle on one leader")
}

// cpuHog starts one busy shell loop per core, at normal priority, so that
// the masters compete for the CPU as on a machine that runs other work;
// the returned func kills them, by PID.
func cpuHog(b *testing.B) (stop func()) {
	var cmds []*exec.Cmd
	stop = func() {
		for _, cmd := range cmds {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		cmds = nil
	}
	b.Cleanup(stop)
	for range runtime.NumCPU() {
		cmd := exec.Command("/bin/sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	return stop
}

// submitAt submits drivers at rate per second, at most 64 in flight, until
// stop is closed, and returns how many were acknowledged once all have
// finished. Failures are not the measurement: an election shows in the
// terms.
func submitAt(s *tputSubmitter, rate int, stop <-chan struct{}) int64 {
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	slots := make(chan struct{}, 64)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-stop:
			wg.Wait()
			return s.ok.Load()
		case <-tick.C:
		}
		select {
		case slots <- struct{}{}:
			wg.Go(func() {
				defer func() { <-slots }()
				s.submit(context.Background())
			})
		default:
		}
	}
}

// BenchmarkFalseElections counts, per Raft timing, the elections a
// three-master cluster holds on its own while nothing fails: for
// DROVER_BENCH_ELECTION_WATCH it takes 200 submissions/s (each fsynced by a
// quorum, the waiting queue growing, snapshots taken) while one busy loop
// per core takes the CPU. Each is an election a loaded machine would
// start needlessly, and a pause of writes while it lasts. Run with
// -benchtime 1x.
func BenchmarkFalseElections(b *testing.B) {
	watch := tputEnvDuration(b, "DROVER_BENCH_ELECTION_WATCH", 2*time.Minute, 20*time.Second)
	for _, timing := range timings() {
		b.Run(timing.name, func(b *testing.B) {
			c, _ := tputCluster(b, testcluster.Options{MasterArgs: timing.args()})
			s := &tputSubmitter{cl: tputClient(b, c, true)}
			var elections, acked int64
			for range b.N {
				waitSettled(b, c)
				from := maxTerm(b, c)
				stop := make(chan struct{})
				done := make(chan int64)
				before := s.ok.Load()
				go func() { done <- submitAt(s, 200, stop) }()
				stopHog := cpuHog(b)
				time.Sleep(watch) // the length of the watch, not a wait for an event
				stopHog()
				close(stop)
				acked += <-done - before
				elections += int64(maxTerm(b, c) - from)
			}
			minutes := watch.Minutes() * float64(b.N)
			b.Logf("%s (%s): %d elections in %.1f min under load, %d submissions acknowledged, %d failed (last: %v)",
				timing.name, timing, elections, minutes, acked, s.errs.Load(), s.lastErr.Load())
			b.ReportMetric(float64(elections), "elections")
			b.ReportMetric(float64(elections)/minutes, "elections/min")
			b.ReportMetric(minutes, "watch-min")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// leaderPauses are the lengths of SIGSTOP BenchmarkLeaderPause holds the
// leader for: a long GC or a scheduling stall, a longer one, and one no
// setting here should ride out.
var leaderPauses = []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond}

// BenchmarkLeaderPause reports, per Raft timing and pause length, the
// share of trials in which a SIGSTOP of the leader for that long, then
// SIGCONT, was followed by an election (a higher term on any master
// within three heartbeat timeouts and an election timeout of the
// SIGCONT). A follower stands after a heartbeat timeout without contact,
// and a leader steps down when a quorum has not answered within its lease
// (hashicorp/raft's checkLeaderLease), so a pause near either starts one.
// Run with -benchtime Nx: N trials per timing and pause.
func BenchmarkLeaderPause(b *testing.B) {
	for _, timing := range timings() {
		b.Run(timing.name, func(b *testing.B) {
			c := testcluster.New(b, testcluster.Options{MasterArgs: timing.args()})
			for _, pause := range leaderPauses {
				b.Run(fmt.Sprintf("pause-%s", pause), func(b *testing.B) {
					elected := 0
					for i := range b.N {
						waitSettled(b, c)
						leader, err := c.Leader(20 * time.Second)
						if err != nil {
							b.Fatal(err)
						}
						from := maxTerm(b, c)
						if err := leader.Signal(syscall.SIGSTOP); err != nil {
							b.Fatal(err)
						}
						time.Sleep(pause) // the fault itself, not a wait for an event
						if err := leader.Signal(syscall.SIGCONT); err != nil {
							b.Fatal(err)
						}
						// An election the pause caused starts within a
						// heartbeat timeout (a follower's) or a lease (the
						// leader's) of the SIGCONT, and a split vote
						// retries after an election timeout.
						deadline := time.Now().Add(3*timing.heartbeat + timing.election)
						for time.Now().Before(deadline) && maxTerm(b, c) == from {
							time.Sleep(20 * time.Millisecond)
						}
						if maxTerm(b, c) > from {
							elected++
							b.Logf("trial %d: the %s pause of %s was followed by an election", i, pause, leader.ID)
						}
					}
					b.ReportMetric(float64(elected)/float64(b.N), "elections/trial")
					b.ReportMetric(0, "ns/op")
				})
			}
		})
	}
}
