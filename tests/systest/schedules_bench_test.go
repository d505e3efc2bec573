package systest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/testcluster"
)

// The accuracy of schedules (docs/schedules.md, "Firing"): how soon after
// its slot a fire's driver is committed, and what firing ten thousand
// schedules costs the leader. Both run on three masters without workers:
// a fire's driver is committed with the entry that accounts its slot,
// and what a worker later does with it is the placement figures'
// business, not the firing's.

// schedCreators is how many schedules the benchmarks create at once.
const schedCreators = 64

// BenchmarkScheduleAccuracy measures how late a slot's driver is
// committed: DROVER_BENCH_SCHEDULES schedules (20; -short 10) of
// "@every 1s", allow, fire for DROVER_BENCH_DURATION (30s; -short 10s),
// and for every slot of that window the delay runs from the slot to its
// driver's event reaching a stream on the leader, which sends an event
// once the entry is committed and applied: an upper bound on the commit,
// by the stream's own delivery (BenchmarkEventDelivery: 1 to 2 ms). It
// reports p50_ms, p99_ms and max_ms of those delays, submit_p50_ms and
// submit_p99_ms of the leader's own lateness (the driver's submitted_at,
// the leader's clock when it fired, minus the slot), slots, and unfired:
// slots of the window with no driver, which a leader too late for a slot
// counts missed instead of firing.
func BenchmarkScheduleAccuracy(b *testing.B) {
	n := tputEnvInt(b, "DROVER_BENCH_SCHEDULES", 20, 10)
	dur := tputEnvDuration(b, "DROVER_BENCH_DURATION", 30*time.Second, 10*time.Second)
	for range b.N {
		r := schedAccuracy(b, n, dur)
		commit, submit := r.commit, r.submit
		b.ReportMetric(ms(commit[len(commit)/2]), "p50_ms")
		b.ReportMetric(ms(commit[len(commit)*99/100]), "p99_ms")
		b.ReportMetric(ms(commit[len(commit)-1]), "max_ms")
		b.ReportMetric(ms(submit[len(submit)/2]), "submit_p50_ms")
		b.ReportMetric(ms(submit[len(submit)*99/100]), "submit_p99_ms")
		b.ReportMetric(float64(len(commit)), "slots")
		b.ReportMetric(float64(r.unfired), "unfired")
	}
	b.ReportMetric(0, "ns/op")
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// schedDelays are one accuracy measurement's delays after the slots,
// sorted: to the driver's event on the leader's stream (commit) and to
// its submitted_at (submit); unfired counts the slots of the window
// without a driver.
type schedDelays struct {
	commit, submit []time.Duration
	unfired        int
}

// schedAccuracy runs one accuracy measurement on a fresh cluster, which
// it stops before returning.
func schedAccuracy(b *testing.B, n int, dur time.Duration) schedDelays {
	c, leader := tputCluster(b, testcluster.Options{})
	defer killMasters(c)
	ctx, cancel := context.WithTimeout(context.Background(), dur+5*time.Minute)
	defer cancel()
	st, err := testcluster.State(ctx, leader)
	if err != nil {
		b.Fatal(err)
	}
	watch, err := client.New([]string{leader.HTTP}, c.ClientOptions())
	if err != nil {
		b.Fatal(err)
	}
	stream := watch.Events(ctx, client.EventQuery{After: st.AppliedIndex, Kinds: []api.EventKind{api.EventDriver}})
	schedCreate(b, ctx, tputClient(b, c, true), n, func(i int) api.ScheduleRequest {
		return everyRequest(fmt.Sprintf("accuracy-%03d", i), time.Second, "", 0, "/bin/true")
	})
	// The window's slots are the whole seconds after every schedule
	// exists, up to dur later: each schedule has one at each.
	first := time.Now().Truncate(time.Second).Add(time.Second).UnixMilli()
	last := first + dur.Milliseconds() - 1000
	want := n * int(dur/time.Second)
	var r schedDelays
	seen := map[string]bool{}
	giveUp := time.After(time.Until(time.UnixMilli(last)) + 30*time.Second)
window:
	for len(r.commit) < want {
		select {
		case e, ok := <-stream.C():
			if !ok {
				b.Fatalf("the leader's event stream ended: %v", stream.Err())
			}
			at, d := time.Now(), e.Driver
			if d == nil || d.Schedule == "" || seen[d.ID] || d.Slot < first || d.Slot > last {
				continue
			}
			seen[d.ID] = true
			r.commit = append(r.commit, at.Sub(time.UnixMilli(d.Slot)))
			r.submit = append(r.submit, time.Duration(d.SubmittedAt-d.Slot)*time.Millisecond)
		case <-giveUp:
			r.unfired = want - len(r.commit)
			b.Logf("%d of %d slots had no driver 30 s after the window", r.unfired, want)
			break window
		}
	}
	if len(r.commit) == 0 {
		b.Fatalf("no slot of %d schedules fired in %s", n, dur)
	}
	if now, err := c.Leader(time.Minute); err != nil || now != leader {
		b.Fatalf("the leader changed during the measurement")
	}
	slices.Sort(r.commit)
	slices.Sort(r.submit)
	b.Logf("%d schedules of @every 1s, %d slots over %s: committed p50 %s, p99 %s, worst %s after the slot; submitted p50 %s, p99 %s",
		n, len(r.commit), dur, r.commit[len(r.commit)/2], r.commit[len(r.commit)*99/100], r.commit[len(r.commit)-1],
		r.submit[len(r.submit)/2], r.submit[len(r.submit)*99/100])
	return r
}

// BenchmarkScheduleLeaderCPU measures what firing costs the leader:
// DROVER_BENCH_CPU_SCHEDULES schedules (10,000; -short 1,000) of
// "@every 10s", allow, so that every slot commits a driver (1,000 a
// second at full size; with nowhere to run they wait, 10,000 more every
// ten seconds). It reports the leader's CPU time per wall-clock second
// (/proc/PID/stat) over DROVER_BENCH_DURATION (30s; -short 10s), from
// ten seconds after the last schedule was created, when each has fired
// once (leader_cores), the first leader's over 5 s before any schedule
// existed (idle_cores), the entries the leader applied per second in
// the window (entries/s: a fire is one entry) and its RSS at the end
// (leader_rss_mib). A window in which the leader changed (an election
// on a busy machine) says nothing of one leader's cost: it is measured
// again, three times at most.
func BenchmarkScheduleLeaderCPU(b *testing.B) {
	n := tputEnvInt(b, "DROVER_BENCH_CPU_SCHEDULES", 10_000, 1_000)
	dur := tputEnvDuration(b, "DROVER_BENCH_DURATION", 30*time.Second, 10*time.Second)
	for range b.N {
		r := schedLeaderCPU(b, n, dur)
		b.Logf("%d schedules of @every 10s: leader %.3f cores over %s (%.3f idle), %.0f entries/s, RSS %.0f MiB",
			n, r.cores, dur, r.idle, r.entries, r.rssMiB)
		b.ReportMetric(r.cores, "leader_cores")
		b.ReportMetric(r.idle, "idle_cores")
		b.ReportMetric(r.entries, "entries/s")
		b.ReportMetric(r.rssMiB, "leader_rss_mib")
	}
	b.ReportMetric(0, "ns/op")
}

// schedCost is one measurement of BenchmarkScheduleLeaderCPU.
type schedCost struct{ cores, idle, entries, rssMiB float64 }

// schedLeaderCPU runs one measurement on a fresh cluster, which it stops
// before returning.
func schedLeaderCPU(b *testing.B, n int, dur time.Duration) schedCost {
	c, leader := tputCluster(b, testcluster.Options{})
	defer killMasters(c)
	// Out of the election's and the start's way, as in
	// BenchmarkHeartbeats.
	time.Sleep(2 * time.Second)
	r := schedCost{idle: schedCores(leader.PID(), 5*time.Second)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	created := time.Now()
	schedCreate(b, ctx, tputClient(b, c, true), n, func(i int) api.ScheduleRequest {
		return everyRequest(fmt.Sprintf("cpu-%05d", i), 10*time.Second, "", 0, "/bin/true")
	})
	b.Logf("%d schedules created in %s", n, time.Since(created).Round(time.Millisecond))
	time.Sleep(11 * time.Second)
	for try := 1; ; try++ {
		leader, err := c.Leader(time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		pid, index, start := leader.PID(), tputAppliedIndex(b, leader), time.Now()
		r.cores = schedCores(pid, dur)
		r.entries = float64(tputAppliedIndex(b, leader)-index) / time.Since(start).Seconds()
		r.rssMiB = float64(tputRSSKiB(b, pid)) / 1024
		if now, err := c.Leader(time.Minute); err == nil && now == leader {
			return r
		}
		if try == 3 {
			b.Fatalf("the leader changed during each of %d measurements", try)
		}
		b.Logf("the leader changed during measurement %d: measuring again", try)
	}
}

// schedCores is process pid's CPU time per wall-clock second over the
// next dur.
func schedCores(pid int, dur time.Duration) float64 {
	start, cpu := time.Now(), tputCPU(pid)
	time.Sleep(dur)
	return float64(tputCPU(pid)-cpu) / float64(time.Since(start))
}

// schedCreate creates the n schedules req(0) to req(n-1),
// schedCreators at a time. A create the masters could not confirm (no
// leader, or one lost while committing: an election on a busy machine)
// is sent again until it is created, or found taken, which is how a
// retry learns that an unconfirmed create did commit.
func schedCreate(b *testing.B, ctx context.Context, cl *client.Client, n int, req func(i int) api.ScheduleRequest) {
	sem := make(chan struct{}, schedCreators)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			for try := 0; ; try++ {
				_, err := cl.CreateSchedule(ctx, req(i))
				var refused *client.APIError
				switch {
				case err == nil, try > 0 && errors.Is(err, model.ErrScheduleExists):
					return
				case ctx.Err() != nil, errors.As(err, &refused) && !errors.Is(err, model.ErrUnavailable):
					b.Errorf("create schedule %d: %v", i, err)
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
}

// killMasters kills c's masters: a benchmark's iterations each start a
// cluster of their own, which must not outlive it.
func killMasters(c *testcluster.Cluster) {
	for _, m := range c.Masters {
		m.Kill()
	}
}
