package systest

// Throughput, latency and placement benchmarks of a real three-master
// cluster (separate drover processes, Raft log fsynced as in production).
// They report figures and fail only when the cluster does not work at all,
// never because the machine is slow. Sizes come from environment variables,
// with small defaults under -short:
//
//	DROVER_BENCH_DURATION  measuring time per iteration (SubmitThroughput,
//	                       SubmitLatencyAt2000): 10s, -short 2s
//	DROVER_BENCH_CLIENTS   concurrent submitting goroutines: each shape's
//	                       (SubmitThroughput), 64 (Placement)
//	DROVER_BENCH_RATE      open-loop submissions/s (SubmitLatencyAt2000):
//	                       2000, -short 200
//	DROVER_BENCH_WORKERS   simulated workers (Placement): 1000, -short 50
//	DROVER_BENCH_DRIVERS   drivers to place (Placement): 100000, -short 1000
//	DROVER_BENCH_GOSSIP    1: each simulated worker is also a memberlist
//	                       member (Placement); default 0
//	DROVER_BENCH_TIMEOUT   bound on placing every driver: 30m, -short 3m
//
// For example, on a quiet machine:
//
//	go test -run '^$' -bench 'SubmitThroughput|SubmitLatency|Placement' -benchtime 1x ./systest/

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/simworker"
	"github.com/drover-project/drover/tests/testcluster"
)

// tputRetainedDrivers is the masters' --retained-drivers in these
// benchmarks: far above any driver count they make, so that pruning never
// runs during a measurement.
const tputRetainedDrivers = "10000000"

// tputEnvInt reads an integer size from the environment: def, or short
// under -short, when unset.
func tputEnvInt(b *testing.B, name string, def, short int) int {
	v := os.Getenv(name)
	if v == "" {
		if testing.Short() {
			return short
		}
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// tputEnvDuration is tputEnvInt for durations.
func tputEnvDuration(b *testing.B, name string, def, short time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		if testing.Short() {
			return short
		}
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		b.Fatalf("%s=%q: want a positive duration", name, v)
	}
	return d
}

// tputCluster starts three masters (no workers) with retention out of the
// way, plus extra master flags, and returns the cluster and its leader.
// The goroutines of the one benchmark process stand for many clients, so
// the masters run without the bound on one client's submissions in flight
// (--max-submits-per-client), which would refuse what is over it.
func tputCluster(b *testing.B, opts testcluster.Options) (*testcluster.Cluster, *testcluster.Node) {
	opts.MasterArgs = append([]string{"--retained-drivers", tputRetainedDrivers, "--max-submits-per-client", "0"}, opts.MasterArgs...)
	c := testcluster.New(b, opts)
	leader, err := c.Leader(30 * time.Second)
	if err != nil {
		b.Fatal(err)
	}
	return c, leader
}

// tputClient returns the client all submitting goroutines share. One shared
// client is what one process submitting from many goroutines would use (it
// is safe for concurrent use, and gathers the submissions made while its
// earlier requests are out into batch requests), and its transport keeps
// as many idle connections per master as 256 goroutines need, so the
// number of goroutines, not the number of clients, sets the number of
// connections. Sticky (Options.Sticky: the leader, or the master that
// answered last, first, every master after HedgeAfter) is how a client
// submitting at a high rate should submit; without it, each request goes
// to every master, as the CLI sends it, which triples the masters' HTTP
// work.
func tputClient(b *testing.B, c *testcluster.Cluster, sticky bool) *client.Client {
	cl, err := client.New(strings.Split(c.MasterAddrs, ","), client.Options{RequestTimeout: 10 * time.Second, Sticky: sticky})
	if err != nil {
		b.Fatal(err)
	}
	return cl
}

// tputRequest is a small but realistic submission: one core, 512 MiB, a
// short argv and environment. The token is left to Submit (a fresh one).
func tputRequest(i int64) api.SubmitRequest {
	return api.SubmitRequest{
		Name: "bench-" + strconv.FormatInt(i, 10),
		DriverSpec: model.DriverSpec{
			Argv:     []string{"/opt/spark/bin/spark-class", "org.example.Bench", "--input", "/data/in", "--output", "/data/out"},
			Env:      map[string]string{"SPARK_CONF_DIR": "/etc/spark", "BENCH_RUN": "1"},
			Cores:    1,
			MemoryMB: 512,
		},
	}
}

// tputCPU returns the CPU time (user plus system) process pid has used.
func tputCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	// utime and stime are fields 14 and 15 of stat, in clock ticks of
	// USER_HZ, which is 100 on Linux.
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// tputMemory is a process's memory, KiB: its resident set size, the part
// of it that is anonymous memory (the Go heap, goroutine stacks and the
// runtime's own; the rest is mapped files: the binary and a master's
// raft.db, which bbolt maps), and its Go heap (allocated objects, from
// the go_memstats_heap_alloc_bytes metric).
type tputMemory struct{ rss, anon, heap int64 }

// tputSettledMemory returns the least of five samples over two seconds
// of each of node n's figures: a Go process's memory swings with its
// garbage collections, and the low point is the closest to its live
// memory.
func tputSettledMemory(b testing.TB, n *testcluster.Node) tputMemory {
	m := tputMemory{math.MaxInt64, math.MaxInt64, math.MaxInt64}
	for i := range 5 {
		if i > 0 {
			time.Sleep(500 * time.Millisecond)
		}
		m.rss = min(m.rss, tputStatusKiB(b, n.PID(), "VmRSS"))
		m.anon = min(m.anon, tputStatusKiB(b, n.PID(), "RssAnon"))
		m.heap = min(m.heap, int64(tputMetric(b, n, "go_memstats_heap_alloc_bytes"))/1024)
	}
	return m
}

// tputRSSKiB returns the resident set size of process pid, in KiB.
func tputRSSKiB(b *testing.B, pid int) int64 { return tputStatusKiB(b, pid, "VmRSS") }

// tputStatusKiB returns a figure in kB of /proc/PID/status, such as VmRSS
// or RssAnon, in KiB.
func tputStatusKiB(b testing.TB, pid int, field string) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				b.Fatalf("%s of %d: %q", field, pid, line)
			}
			return kib
		}
	}
	b.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// tputSubmitter counts the submissions of many goroutines.
type tputSubmitter struct {
	cl *client.Client
	// namespaces, when above 0, spreads the submissions over namespaces
	// tputNamespace(0) to tputNamespace(namespaces-1), in turn.
	namespaces int
	seq        atomic.Int64
	ok         atomic.Int64
	errs       atomic.Int64
	// lastErr is the last error seen, for the log.
	lastErr atomic.Value
}

// submit submits one driver, counts the outcome and says whether it was
// acknowledged.
func (s *tputSubmitter) submit(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	i := s.seq.Add(1)
	req := tputRequest(i)
	if s.namespaces > 0 {
		req.Namespace = tputNamespace(int(i % int64(s.namespaces)))
	}
	if _, err := s.cl.Submit(ctx, req); err != nil {
		s.errs.Add(1)
		s.lastErr.Store(err.Error())
		return false
	}
	s.ok.Add(1)
	return true
}

// closedLoop runs n goroutines that each submit one driver after the other
// until stop is closed or, when limit > 0, limit submissions were started
// in all; it returns when all have finished.
func (s *tputSubmitter) closedLoop(n int, limit int64, stop <-chan struct{}) {
	var started atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if limit > 0 && started.Add(1) > limit {
					return
				}
				s.submit(context.Background())
			}
		})
	}
	wg.Wait()
}

// tputShapes are the shapes of BenchmarkSubmitThroughput, one
// sub-benchmark each: submissions in flight, whether the shared client is
// sticky or sends each request to every master as the CLI does, and
// whether it gathers concurrent submissions into batch requests, as the
// Go client does by default, or sends each in a request of its own, as
// separate CLI processes do.
var tputShapes = []struct {
	name      string
	clients   int
	sticky    bool
	unbatched bool
}{
	{"sticky-64", 64, true, false},
	{"sticky-256", 256, true, false},
	{"fanout-64", 64, false, false},
	{"unbatched-sticky-64", 64, true, true},
	{"unbatched-fanout-64", 64, false, true},
}

// BenchmarkSubmitThroughput measures acknowledged submissions per second
// (each one committed by a Raft quorum, fsynced) from goroutines sharing
// one client, against three masters and no workers: every driver stays
// waiting, so the waiting queue grows all along. Each shape of tputShapes
// is a sub-benchmark on a cluster of its own, whose iterations submit for
// DROVER_BENCH_DURATION; DROVER_BENCH_CLIENTS sets the goroutines of every
// shape. Besides "submits/s" it reports the leader's
// CPU time per submission over the first and the last second of the run,
// which shows whether the leader's work per submission grows with the
// waiting queue.
func BenchmarkSubmitThroughput(b *testing.B) {
	for _, shape := range tputShapes {
		b.Run(shape.name, func(b *testing.B) {
			clients := shape.clients
			if os.Getenv("DROVER_BENCH_CLIENTS") != "" {
				clients = tputEnvInt(b, "DROVER_BENCH_CLIENTS", 0, 0)
			}
			tputThroughput(b, clients, shape.sticky, shape.unbatched)
		})
	}
}

// tputThroughput is one shape of BenchmarkSubmitThroughput.
func tputThroughput(b *testing.B, clients int, sticky, unbatched bool) {
	dur := tputEnvDuration(b, "DROVER_BENCH_DURATION", 10*time.Second, 2*time.Second)
	c, leader := tputCluster(b, testcluster.Options{})
	cl, err := client.New(strings.Split(c.MasterAddrs, ","), client.Options{RequestTimeout: 10 * time.Second, Sticky: sticky, NoBatching: unbatched})
	if err != nil {
		b.Fatal(err)
	}
	s := &tputSubmitter{cl: cl}
	pid := leader.PID()

	type sample struct {
		at  time.Time
		cpu time.Duration
		ok  int64
	}
	var samples []sample
	take := func() { samples = append(samples, sample{time.Now(), tputCPU(pid), s.ok.Load()}) }
	var elapsed time.Duration
	b.ResetTimer()
	for range b.N {
		stop := make(chan struct{})
		done := make(chan struct{})
		start := time.Now()
		go func() {
			defer close(done)
			s.closedLoop(clients, 0, stop)
		}()
		take()
		tick := time.NewTicker(time.Second)
		for time.Since(start) < dur {
			<-tick.C
			take()
		}
		tick.Stop()
		close(stop)
		<-done
		elapsed += time.Since(start)
	}
	b.StopTimer()
	if s.ok.Load() == 0 {
		b.Fatalf("no submission acknowledged; last error: %v", s.lastErr.Load())
	}
	if now, err := c.Leader(10 * time.Second); err != nil || now != leader {
		b.Logf("warning: the leader changed during the run; CPU figures are partial")
	}
	// CPU per submission in each one-second window, first and last.
	perSubmit := func(a, z sample) float64 {
		if z.ok == a.ok {
			return 0
		}
		return float64(z.cpu-a.cpu) / float64(time.Microsecond) / float64(z.ok-a.ok)
	}
	var series []string
	for i := 1; i < len(samples); i++ {
		if samples[i].ok < samples[i-1].ok {
			continue // a new iteration's first sample
		}
		series = append(series, fmt.Sprintf("%d:%.0fus", samples[i].ok, perSubmit(samples[i-1], samples[i])))
	}
	b.Logf("%d submissions acknowledged in %s by %d goroutines, %d errors (last: %v); leader CPU per submission by queue size: %s",
		s.ok.Load(), elapsed.Round(time.Millisecond), clients, s.errs.Load(), s.lastErr.Load(), strings.Join(series, " "))
	b.ReportMetric(float64(s.ok.Load())/elapsed.Seconds(), "submits/s")
	b.ReportMetric(float64(s.errs.Load()), "errors")
	if len(samples) >= 3 {
		n := len(samples)
		b.ReportMetric(perSubmit(samples[0], samples[1]), "leader_cpu_us/submit_first")
		b.ReportMetric(perSubmit(samples[n-2], samples[n-1]), "leader_cpu_us/submit_last")
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkSubmitLatencyAt2000 offers submissions open-loop at
// DROVER_BENCH_RATE per second (2,000 by default) for DROVER_BENCH_DURATION
// against three masters and no workers, and reports latency percentiles.
// Each submission has a scheduled send time and its latency counts from
// then, not from when a goroutine got round to sending it, so queueing in
// the generator or the cluster shows in the figures instead of silently
// lowering the offered rate (coordinated omission). "achieved/s" is the
// acknowledged submissions over the time from the first scheduled send to
// the last answer.
func BenchmarkSubmitLatencyAt2000(b *testing.B) {
	dur := tputEnvDuration(b, "DROVER_BENCH_DURATION", 10*time.Second, 2*time.Second)
	rate := tputEnvInt(b, "DROVER_BENCH_RATE", 2000, 200)
	c, _ := tputCluster(b, testcluster.Options{})
	s := &tputSubmitter{cl: tputClient(b, c, true)}
	// Bounds the submissions in flight only to keep a stalled cluster
	// from piling up goroutines; a send held back by it still counts its
	// wait as latency.
	inflight := make(chan struct{}, 50000)
	var lat []time.Duration
	var mu sync.Mutex
	var span time.Duration
	b.ResetTimer()
	for range b.N {
		total := int(float64(rate) * dur.Seconds())
		interval := time.Duration(float64(time.Second) / float64(rate))
		var wg sync.WaitGroup
		var lastDone atomic.Int64
		start := time.Now().Add(50 * time.Millisecond)
		for i := range total {
			at := start.Add(time.Duration(i) * interval)
			if d := time.Until(at); d > 0 {
				time.Sleep(d)
			}
			inflight <- struct{}{}
			wg.Go(func() {
				defer func() { <-inflight }()
				ok := s.submit(context.Background())
				done := time.Now()
				if !ok {
					return // counted in errors, not in latency
				}
				mu.Lock()
				lat = append(lat, done.Sub(at))
				mu.Unlock()
				for {
					last := lastDone.Load()
					if done.UnixNano() <= last || lastDone.CompareAndSwap(last, done.UnixNano()) {
						break
					}
				}
			})
		}
		wg.Wait()
		span += time.Unix(0, lastDone.Load()).Sub(start)
	}
	b.StopTimer()
	if len(lat) == 0 {
		b.Fatalf("no submission acknowledged; last error: %v", s.lastErr.Load())
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(math.Ceil(p*float64(len(lat))))-1)] }
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.Logf("%d submissions offered at %d/s, %d acknowledged, %d errors (last: %v); p50 %s p90 %s p99 %s p99.9 %s max %s",
		int(float64(rate)*dur.Seconds())*b.N, rate, len(lat), s.errs.Load(), s.lastErr.Load(),
		pct(0.50), pct(0.90), pct(0.99), pct(0.999), lat[len(lat)-1])
	b.ReportMetric(ms(pct(0.50)), "p50_ms")
	b.ReportMetric(ms(pct(0.99)), "p99_ms")
	b.ReportMetric(ms(lat[len(lat)-1]), "max_ms")
	b.ReportMetric(float64(len(lat))/span.Seconds(), "achieved/s")
	b.ReportMetric(float64(s.errs.Load()), "errors")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkPlacement measures how fast the leader places drivers on a
// thousand workers: three masters, DROVER_BENCH_DRIVERS drivers submitted
// by 64 goroutines while no worker is registered (they wait in the
// leader's queue, as a backlog does when workers join or free up), then
// DROVER_BENCH_WORKERS simulated workers started (package simworker: the
// real protocol over HTTP, nothing launched). The placement time runs
// from the fleet's start until every driver is RUNNING in the leader's
// tables: placed by the leader, reported by its worker, and that report
// committed (the workers count the RUNNING reports the leader
// acknowledged; a linearizable read of every driver confirms it after).
// It includes the workers' registration, so it is the rate a fleet
// arriving at a backlog sees. Timing submission and placement apart
// keeps the submission rate, which BenchmarkSubmitThroughput measures,
// out of the placement figure; it is reported beside it (submits/s).
//
// It also reports the leader's CPU time per placement and the Raft
// entries applied per driver while placing, which a loaded machine skews
// far less than the rate, and the leader's resident memory as an empty
// master (before any worker or driver) and with every driver running
// (each the low point over two seconds; the per-driver figure means
// little below some 10,000 drivers, where garbage collection swings are
// as large), the anonymous part of that memory (rss_anon_kib_per_driver:
// without the pages of raft.db that bbolt maps, which the RSS counts once
// touched and the kernel may reclaim), and its Go heap at both points
// (allocated objects, from go_memstats_heap_alloc_bytes, the low point
// too), which the collector's headroom and the mapped Raft log inflate
// far less than the RSS.
//
// Without DROVER_BENCH_GOSSIP=1 the simulated workers are not memberlist
// members and the masters know them alive from their heartbeats alone, so
// the masters get --worker-timeout 30s: a heartbeat delayed by a busy
// machine must not get a worker declared lost mid-measurement.
func BenchmarkPlacement(b *testing.B) { tputPlacementBench(b, 0) }

// tputPlacementBench runs BenchmarkPlacement with the drivers spread over
// that many namespaces (none for 0).
func tputPlacementBench(b *testing.B, namespaces int) {
	nworkers := tputEnvInt(b, "DROVER_BENCH_WORKERS", 1000, 50)
	ndrivers := tputEnvInt(b, "DROVER_BENCH_DRIVERS", 100000, 1000)
	clients := tputEnvInt(b, "DROVER_BENCH_CLIENTS", 64, 64)
	timeout := tputEnvDuration(b, "DROVER_BENCH_TIMEOUT", 30*time.Minute, 3*time.Minute)
	withGossip := os.Getenv("DROVER_BENCH_GOSSIP") == "1"
	// Room for twice an even share on every worker: placement is never
	// short of cores, whatever the spread.
	cores := max(16, 2*((ndrivers+nworkers-1)/nworkers))
	for range b.N {
		r := tputPlace(b, nworkers, ndrivers, clients, cores, namespaces, withGossip, timeout)
		b.ReportMetric(float64(r.placed)/r.elapsed.Seconds(), "placements/s")
		b.ReportMetric(float64(ndrivers)/r.submit.Seconds(), "submits/s")
		b.ReportMetric(float64(r.rssEmpty)/1024, "rss_empty_mib")
		b.ReportMetric(float64(r.rssFull)/1024, "rss_full_mib")
		b.ReportMetric(float64(r.rssFull-r.rssEmpty)/float64(ndrivers), "rss_kib_per_driver")
		b.ReportMetric(float64(r.anonFull-r.anonEmpty)/float64(ndrivers), "rss_anon_kib_per_driver")
		b.ReportMetric(float64(r.heapFull-r.heapEmpty)/float64(ndrivers), "heap_kib_per_driver")
		b.ReportMetric(float64(ndrivers-r.placed), "unplaced")
		b.ReportMetric(float64(r.leaderCPU.Milliseconds())/float64(max(r.placed, 1)), "leader_cpu_ms/placement")
		b.ReportMetric(float64(r.entries)/float64(ndrivers), "entries/driver")
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkPlacementNamespaces is BenchmarkPlacement with the drivers
// spread, in turn, over DROVER_BENCH_NAMESPACES namespaces (1,000; 10
// with -short) of weights 1 to 4 and a driver share of 1 (the drivers are
// all the work there is: the default driver share, 0.5, would keep half of
// them waiting for executors that never come), applied before the first
// submission: the leader's plan then orders its placements by weighted
// dominant-resource fairness over that many namespaces, checking each
// one's quota. Its figures are BenchmarkPlacement's.
func BenchmarkPlacementNamespaces(b *testing.B) {
	tputPlacementBench(b, tputEnvInt(b, "DROVER_BENCH_NAMESPACES", 1000, 10))
}

// tputNamespace is the name of the benchmark's namespace i.
func tputNamespace(i int) string { return fmt.Sprintf("bench-%04d", i) }

// tputApplyNamespaces applies namespaces tputNamespace(0) to
// tputNamespace(n-1), of weights 1 to 4 and a driver share of 1, through
// the client's ApplyNamespace, 16 at a time.
func tputApplyNamespaces(b *testing.B, cl *client.Client, n int) {
	var wg sync.WaitGroup
	var failed atomic.Value
	next := atomic.Int64{}
	for range 16 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				weight, one := float64(1+i%4), 1.0
				if _, err := cl.ApplyNamespace(ctx, tputNamespace(i), api.NamespaceRequest{Weight: &weight, DriverShare: &one}); err != nil {
					failed.Store(err.Error())
				}
				cancel()
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		b.Fatalf("applying %d namespaces: %v", n, err)
	}
}

// tputPlacement is the outcome of one placement run.
type tputPlacement struct {
	placed            int
	submit, elapsed   time.Duration
	rssEmpty, rssFull int64
	// anonEmpty and anonFull are the anonymous part of the RSS (without
	// the mapped binary and raft.db), and heapEmpty and heapFull the
	// leader's Go heap, at the same points, KiB.
	anonEmpty, anonFull int64
	heapEmpty, heapFull int64
	// leaderCPU is the leader's CPU time from the fleet's start until
	// every driver ran; entries the Raft entries applied meanwhile, of
	// every kind (registrations, placements, reports).
	leaderCPU time.Duration
	entries   uint64
}

// tputPlace runs one placement measurement on a fresh cluster, which it
// stops before returning.
func tputPlace(b *testing.B, nworkers, ndrivers, clients, cores, namespaces int, withGossip bool, timeout time.Duration) tputPlacement {
	var args []string
	if !withGossip {
		args = []string{"--register-without-gossip"}
	}
	c, leader := tputCluster(b, testcluster.Options{WorkerTimeout: 30 * time.Second, MasterArgs: args})
	// The masters must not outlive this run (b.N > 1 runs several); the
	// cluster's cleanup still removes its directory at the end.
	defer func() {
		for _, n := range c.Masters {
			n.Kill()
		}
	}()

	// Each worker dials from its own address, in the /16 of the masters'
	// 127.a.b.0/24 but outside it: 127.a.(b+1+k).x. Only bound as source
	// addresses (gossip listens on kernel-chosen ports), so a clash with
	// another test's addresses is harmless.
	ip := net.ParseIP(c.Masters[0].IP).To4()
	bindIP := func(i int) string {
		return fmt.Sprintf("127.%d.%d.%d", ip[1], (int(ip[2])+1+i/250)%256, 1+i%250)
	}
	var mu sync.Mutex
	running := make(map[string]bool, ndrivers)
	var lastRunning time.Time
	allRunning := make(chan struct{})
	opts := simworker.Options{
		Masters:  strings.Split(c.MasterAddrs, ","),
		Count:    nworkers,
		Cores:    cores,
		MemoryMB: int64(cores) * 1024,
		BindIP:   bindIP,
		OnRunning: func(id string, attempt int) {
			mu.Lock()
			defer mu.Unlock()
			if running[id] {
				return
			}
			running[id] = true
			lastRunning = time.Now()
			if len(running) == ndrivers {
				close(allRunning)
			}
		},
	}
	if withGossip {
		for _, m := range c.Masters {
			opts.GossipJoin = append(opts.GossipJoin, m.Gossip)
		}
	}
	pid := leader.PID()
	var r tputPlacement
	empty := tputSettledMemory(b, leader)
	r.rssEmpty, r.anonEmpty, r.heapEmpty = empty.rss, empty.anon, empty.heap
	// Leader changes the leader learned of: c.Leader, which reads
	// /v1/state, is too slow at 100,000 drivers to tell.
	elected := tputMetric(b, leader, "drover_raft_leader_changes_total")

	s := &tputSubmitter{cl: tputClient(b, c, true), namespaces: namespaces}
	tputApplyNamespaces(b, s.cl, namespaces)
	start := time.Now()
	s.closedLoop(clients, int64(ndrivers), nil)
	r.submit = time.Since(start)
	if s.errs.Load() > 0 {
		// A failed submission may still have been committed; the count
		// to wait for is unknown, so the run cannot be measured.
		b.Fatalf("%d submissions failed (last: %v)", s.errs.Load(), s.lastErr.Load())
	}
	b.Logf("%d drivers submitted in %s by %d goroutines, no worker registered", ndrivers, r.submit.Round(time.Millisecond), clients)

	index0 := tputAppliedIndex(b, leader)
	start, cpu0 := time.Now(), tputCPU(pid)
	fleet, err := simworker.Start(opts)
	if err != nil {
		b.Fatal(err)
	}
	defer fleet.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := fleet.WaitRegistered(ctx); err != nil {
		b.Fatal(err)
	}
	b.Logf("%d simulated workers registered %s after their start; this process: RSS %d MiB, %d goroutines",
		nworkers, time.Since(start).Round(time.Millisecond), tputRSSKiB(b, os.Getpid())/1024, runtime.NumGoroutine())

	select {
	case <-allRunning:
	case <-ctx.Done():
	}
	mu.Lock()
	r.placed, r.elapsed = len(running), lastRunning.Sub(start)
	mu.Unlock()
	r.leaderCPU = tputCPU(pid) - cpu0
	r.entries = tputAppliedIndex(b, leader) - index0
	if r.placed == 0 {
		b.Fatalf("no driver reported RUNNING within %s; fleet %+v", timeout, fleet.Stats())
	}
	if r.placed < ndrivers {
		b.Logf("warning: only %d of %d drivers RUNNING after %s; figures are for those", r.placed, ndrivers, timeout)
	}
	// Memory before the read below, which builds every driver's reply.
	full := tputSettledMemory(b, leader)
	r.rssFull, r.anonFull, r.heapFull = full.rss, full.anon, full.heap
	if r.placed == ndrivers {
		if end, reads, ok := tputConfirmRunning(b, c, ndrivers, start.Add(timeout)); ok && reads > 1 {
			// Reports the workers saw acknowledged can have been
			// undone (a worker declared lost relaunches its
			// drivers); then the leader's tables have the last word,
			// at the precision of the polling.
			r.elapsed = end.Sub(start)
			b.Logf("warning: not every acknowledged driver was still RUNNING at the end; timed until the leader showed all RUNNING")
		}
	}
	if tputMetric(b, leader, "drover_raft_leader_changes_total") != elected {
		b.Logf("warning: the leader learned of an election during the run; the placement and memory figures may span two leaders")
	}
	st := fleet.Stats()
	b.Logf("%d workers (%d cores each, gossip %v): %d drivers RUNNING %s after the fleet's start; %d heartbeats, %d failed calls; leader RSS %d MiB empty, %d MiB full (anonymous %d and %d, the rest mapped files), heap %d MiB empty, %d MiB full; leader CPU %s, %d Raft entries",
		nworkers, cores, withGossip, r.placed, r.elapsed.Round(time.Millisecond), st.Heartbeats, st.Failures, r.rssEmpty/1024, r.rssFull/1024,
		r.anonEmpty/1024, r.anonFull/1024, r.heapEmpty/1024, r.heapFull/1024, r.leaderCPU, r.entries)
	return r
}

// tputAppliedIndex is the Raft index the node has applied, from its
// drover_raft_applied_index metric: /v1/state, which also holds it, lists
// every driver and is too slow to answer at 100,000 of them.
func tputAppliedIndex(b *testing.B, n *testcluster.Node) uint64 {
	return uint64(tputMetric(b, n, "drover_raft_applied_index"))
}

// tputMetric reads the value of an unlabelled metric from node n's
// /metrics.
func tputMetric(b testing.TB, n *testcluster.Node, name string) float64 {
	hc := &http.Client{Timeout: time.Minute}
	resp, err := hc.Get("http://" + n.HTTP + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				b.Fatalf("%s of %s: %q", name, n.ID, line)
			}
			return f
		}
	}
	b.Fatalf("no %s in the metrics of %s", name, n.ID)
	return 0
}

// tputConfirmRunning reads every driver from the leader (a linearizable
// read, with a response limit fit for 100,000 drivers) until all n are
// RUNNING, and returns when it saw that and after how many reads; false if
// not by deadline.
func tputConfirmRunning(b *testing.B, c *testcluster.Cluster, n int, deadline time.Time) (time.Time, int, bool) {
	cl, err := client.New(strings.Split(c.MasterAddrs, ","), client.Options{
		RequestTimeout: time.Minute, MaxResponseBytes: 1 << 30,
	})
	if err != nil {
		b.Fatal(err)
	}
	for reads := 1; ; reads++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		// Only the fields checked here are decoded.
		var ds []struct {
			State model.DriverState `json:"state"`
		}
		err := cl.Do(ctx, "GET", "/v1/drivers", nil, &ds)
		cancel()
		seen := time.Now()
		running := 0
		for _, d := range ds {
			if d.State == model.DriverRunning {
				running++
			}
		}
		if err == nil && running == n && len(ds) == n {
			return seen, reads, true
		}
		if seen.After(deadline) {
			b.Logf("warning: the leader shows %d of %d drivers RUNNING (%d drivers, err %v)", running, n, len(ds), err)
			return seen, reads, false
		}
		time.Sleep(2 * time.Second)
	}
}
