package systest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/testcluster"
)

// fsWorkerCores are the cores of each worker of
// BenchmarkFairShareConvergence.
const fsWorkerCores = 8

// BenchmarkFairShareConvergence measures how long a starved namespace
// takes to reach 90 % of its fair share (as its namespace status gives
// it) on a cluster another namespace fills: three masters and
// DROVER_BENCH_FS_WORKERS real workers (4; 1 with -short) of 8 cores,
// two namespaces of weight 1 and a driver share of 1, every driver one
// core. The other namespace, hog, first runs a driver on every core;
// then starved submits as many drivers at once, and the time runs from
// before its first submission until 90 % of its fair share of them are
// RUNNING in the tables (polled every 20 ms). Each iteration is a fresh
// cluster.
//
//   - no-preemption: hog's running drivers end at a steady rate, one
//     every DROVER_BENCH_FS_RUN divided by the cores (8 s; 4 s with
//     -short), with as many more of hog's waiting behind them since
//     before starved came: only the fair-share order gives starved the
//     freed cores first. Reports to_90pct_s, past_freed_s (how long after
//     as many of hog's drivers had ended, the scheduler's own delay) and
//     run_s.
//   - preemption: hog's drivers run long, supervised and deaf to
//     SIGTERM, as programs that take their whole grace to stop; starved
//     may preempt (--preempt), and the masters run with
//     --preemption-grace DROVER_BENCH_FS_GRACE (2s) and
//     --preemption-interval DROVER_BENCH_FS_INTERVAL (200ms: each round
//     takes back at most a tenth of the cluster, so the default 3 s
//     would add seconds per tenth). Reports to_90pct_s, grace_s,
//     past_grace_s and interval_s.
func BenchmarkFairShareConvergence(b *testing.B) {
	workers := tputEnvInt(b, "DROVER_BENCH_FS_WORKERS", 4, 1)
	b.Run("no-preemption", func(b *testing.B) {
		run := tputEnvDuration(b, "DROVER_BENCH_FS_RUN", 8*time.Second, 4*time.Second)
		for range b.N {
			r := fsConverge(b, workers, fsTiming{run: run})
			b.ReportMetric(r.to90.Seconds(), "to_90pct_s")
			b.ReportMetric(r.pastFreed.Seconds(), "past_freed_s")
			b.ReportMetric(run.Seconds(), "run_s")
		}
		b.ReportMetric(0, "ns/op")
	})
	b.Run("preemption", func(b *testing.B) {
		grace := tputEnvDuration(b, "DROVER_BENCH_FS_GRACE", 2*time.Second, 2*time.Second)
		interval := tputEnvDuration(b, "DROVER_BENCH_FS_INTERVAL", 200*time.Millisecond, 200*time.Millisecond)
		for range b.N {
			r := fsConverge(b, workers, fsTiming{preempt: true, grace: grace, interval: interval})
			b.ReportMetric(r.to90.Seconds(), "to_90pct_s")
			b.ReportMetric(grace.Seconds(), "grace_s")
			b.ReportMetric((r.to90 - grace).Seconds(), "past_grace_s")
			b.ReportMetric(interval.Seconds(), "interval_s")
		}
		b.ReportMetric(0, "ns/op")
	})
}

// fsTiming is one case of BenchmarkFairShareConvergence: without
// preemption, hog's first drivers end over run; with it, the masters'
// grace and interval.
type fsTiming struct {
	preempt              bool
	run, grace, interval time.Duration
}

// fsOutcome is one measurement: from starved's first submission to 90 %
// of its fair share RUNNING (to90) and, without preemption, how much of
// that came after as many of hog's drivers had ended (pastFreed).
type fsOutcome struct {
	to90, pastFreed time.Duration
}

// fsConverge runs one measurement on a fresh cluster, which it stops
// before returning.
func fsConverge(b *testing.B, workers int, tm fsTiming) fsOutcome {
	var args []string
	if tm.preempt {
		args = []string{"--preemption-grace", tm.grace.String(), "--preemption-interval", tm.interval.String()}
	}
	// A worker timeout a busy machine's late heartbeat does not reach:
	// a worker declared lost would relaunch drivers mid-measurement.
	c, _ := tputCluster(b, testcluster.Options{Workers: workers, WorkerCores: fsWorkerCores, WorkerTimeout: 10 * time.Second, MasterArgs: args})
	// The drivers must not outlive this iteration (b.N > 1 runs several);
	// the cluster's cleanup still removes its directory at the end.
	defer func() {
		for _, n := range slices.Concat(c.Workers, c.Masters) {
			n.KillGroup()
		}
		testcluster.KillUnder(c.Dir)
	}()
	cl := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	one := 1.0
	for _, ns := range []string{"hog", "starved"} {
		// A driver share of 1: the drivers are the work here.
		req := api.NamespaceRequest{DriverShare: &one, Preempt: tm.preempt && ns == "starved"}
		if _, err := cl.ApplyNamespace(ctx, ns, req); err != nil {
			b.Fatalf("apply namespace %s: %v", ns, err)
		}
	}
	cores := workers * fsWorkerCores
	driver := func(ns string, argv ...string) api.SubmitRequest {
		return api.SubmitRequest{DriverSpec: model.DriverSpec{Argv: argv, Cores: 1, MemoryMB: 32, Namespace: ns, Supervise: tm.preempt && ns == "hog"}}
	}
	var first, backlog, starved []api.SubmitRequest
	for i := range cores {
		starved = append(starved, driver("starved", "/bin/sleep", "300"))
		switch {
		case tm.preempt:
			first = append(first, driver("hog", "/bin/sh", "-c", "trap '' TERM; exec /bin/sleep 300"))
		default:
			secs := (tm.run * time.Duration(i+1) / time.Duration(cores)).Seconds()
			first = append(first, driver("hog", "/bin/sleep", strconv.FormatFloat(secs, 'f', 3, 64)))
			backlog = append(backlog, driver("hog", "/bin/sleep", "300"))
		}
	}
	fsSubmit(b, cl, first)
	fsSubmit(b, cl, backlog)
	// count returns hog's running and finished drivers and starved's
	// running ones.
	count := func() (hogRunning, hogEnded, starvedRunning int) {
		for _, d := range listDrivers(b, ctx, cl) {
			switch {
			case d.Namespace == "starved" && d.State == model.DriverRunning:
				starvedRunning++
			case d.Namespace == "hog" && d.State == model.DriverRunning:
				hogRunning++
			case d.Namespace == "hog" && d.State.Terminal():
				hogEnded++
			}
		}
		return hogRunning, hogEnded, starvedRunning
	}
	waitFor(b, 2*time.Minute, fmt.Sprintf("hog running a driver on each of the %d cores", cores), func() bool {
		r, _, _ := count()
		return r == cores
	})
	_, ended0, _ := count()

	start := time.Now()
	fsSubmit(b, cl, starved)
	st, err := cl.Namespace(ctx, "starved")
	if err != nil || st.FairShare <= 0 {
		b.Fatalf("namespace status of starved: fair share %v, err %v", st.FairShare, err)
	}
	// The share times the cores, less a rounding error: 0.9 of 0.5 of
	// 20 cores is 9 drivers, not 10.
	want := int(math.Ceil(0.9*st.FairShare*float64(cores) - 1e-9))
	var freed time.Time
	waitFor(b, tm.run+tm.grace+2*time.Minute, fmt.Sprintf("starved running %d drivers (90 %% of its fair share %.2f)", want, st.FairShare), func() bool {
		_, ended, running := count()
		if freed.IsZero() && ended-ended0 >= want {
			freed = time.Now()
		}
		return running >= want
	})
	var r fsOutcome
	r.to90 = time.Since(start)
	if !tm.preempt && !freed.IsZero() {
		r.pastFreed = time.Since(freed)
	}
	how := fmt.Sprintf("%s after as many of hog's drivers, ending over %s, had ended", r.pastFreed.Round(time.Millisecond), tm.run)
	if tm.preempt {
		how = fmt.Sprintf("preempting with a grace of %s every %s", tm.grace, tm.interval)
	}
	b.Logf("%d cores: starved ran %d drivers (90 %% of its fair share %.2f) %s after its first submission, %s",
		cores, want, st.FairShare, r.to90.Round(time.Millisecond), how)
	return r
}

// fsSubmit submits every request at once, one goroutine each, through the
// shared client, which gathers them into batch requests, and fails b
// unless each is acknowledged.
func fsSubmit(b *testing.B, cl *client.Client, reqs []api.SubmitRequest) {
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	for i, req := range reqs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, errs[i] = cl.Submit(ctx, req)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.Fatalf("submit: %v", err)
	}
}
