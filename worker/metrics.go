package worker

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/drover-project/drover/api"
)

// MetricsPath is where a worker's HTTP server serves Prometheus metrics,
// under the same access as its other paths (see newServer).
const MetricsPath = "/metrics"

// kindLabel is the label value of each unit kind in metrics.
var kindLabel = [...]string{kindAttempt: "driver", kindExecutor: "executor"}

// Descriptions of what a worker computes when it is scraped.
var (
	descCores = prometheus.NewDesc("drover_worker_cores",
		"Cores this worker offers (kind=total), and those the drivers and executors of the leader's last heartbeat answer take (kind=used).",
		[]string{"kind"}, nil)
	descMemory = prometheus.NewDesc("drover_worker_memory_bytes",
		"Memory this worker offers (kind=total), and what the drivers and executors of the leader's last heartbeat answer take (kind=used).",
		[]string{"kind"}, nil)
	descUnits = prometheus.NewDesc("drover_worker_units",
		"Driver attempts (kind=driver) and executors (kind=executor) whose runner is alive on this worker, adopted ones included.",
		[]string{"kind"}, nil)
	descPending = prometheus.NewDesc("drover_worker_pending_reports",
		"State changes of attempts and executors the leader has not acknowledged yet; they go out with every heartbeat until it does.",
		nil, nil)
	descContactAge = prometheus.NewDesc("drover_worker_leader_contact_age_seconds",
		"Time since this worker sent the last heartbeat or registration a leader answered (the clock strict fencing keeps); absent until one has been.",
		nil, nil)
	descWorkDirFree = prometheus.NewDesc("drover_worker_work_dir_free_bytes",
		"Free bytes of the work dir's file system, for unprivileged users (statfs); below --min-free-disk the cleanup removes finished units' directories. Absent when it cannot be read.",
		nil, nil)
)

// heartbeatBuckets: a heartbeat answered at once takes milliseconds; one
// the leader holds as a long poll up to its hold (2s) or the request
// timeout.
var heartbeatBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// workerMetrics is one worker's registry and the metrics it updates as
// things happen. The registry is the worker's own, not Prometheus's
// global one: tests run several workers in one process.
type workerMetrics struct {
	reg     *prometheus.Registry
	handler http.Handler

	heartbeats        *prometheus.CounterVec
	heartbeatDuration *prometheus.HistogramVec
	launches          *prometheus.CounterVec
	restarts          prometheus.Counter
	// cleanupRemoved, cleanupBytes and cacheFreed count what the
	// work-dir cleanup removed.
	cleanupRemoved *prometheus.CounterVec
	cleanupBytes   *prometheus.CounterVec
	cacheFreed     prometheus.Counter

	// usedCores and usedMemoryMB sum the leader's last heartbeat answer:
	// units remember no resources of their own, and the answer is what
	// the leader accounts for this worker.
	usedCores, usedMemoryMB atomic.Int64
}

func newWorkerMetrics(cfg Config, st *workerState, freeSpace func() (int64, error)) *workerMetrics {
	wm := &workerMetrics{
		reg: prometheus.NewRegistry(),
		heartbeats: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "drover_worker_heartbeats_total",
			Help: "Heartbeats this worker sent, by result: ok (a leader answered) or error (no leader answered within the request timeout, or one refused it). Long polls the worker cut short itself are not counted.",
		}, []string{"result"}),
		heartbeatDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "drover_worker_heartbeat_duration_seconds",
			Help:    "Time from sending a heartbeat to a leader's answer, for answered ones; long_poll=true ones include the time the leader held them while nothing changed.",
			Buckets: heartbeatBuckets,
		}, []string{"long_poll"}),
		launches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "drover_worker_launches_total",
			Help: "Runners this worker started, one per driver attempt (kind=driver) or executor (kind=executor); adoptions are not launches.",
		}, []string{"kind"}),
		restarts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "drover_worker_restarts_total",
			Help: "Supervised driver programs a runner this worker started ran again within their attempt after exiting (Spark's DriverRunner retry).",
		}),
		cleanupRemoved: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "drover_worker_cleanup_removed_total",
			Help: "Directories of finished driver attempts (kind=driver) and executors (kind=executor) the work-dir cleanup removed, by reason: ttl (ended more than --cleanup-ttl ago) or low_disk (free space below --min-free-disk).",
		}, []string{"kind", "reason"}),
		cleanupBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "drover_worker_cleanup_removed_bytes_total",
			Help: "Disk space the work-dir cleanup freed by removing finished units' directories, by reason (ttl, low_disk).",
		}, []string{"reason"}),
		cacheFreed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "drover_worker_cleanup_cache_freed_bytes_total",
			Help: "Disk space the artifact cache freed when the work-dir cleanup asked it for room (free space below --min-free-disk).",
		}),
	}
	for _, r := range []string{"ok", "error"} {
		wm.heartbeats.WithLabelValues(r)
	}
	for _, l := range []bool{false, true} {
		wm.heartbeatDuration.WithLabelValues(strconv.FormatBool(l))
	}
	for _, k := range kindLabel {
		wm.launches.WithLabelValues(k)
		for _, r := range []cleanupReason{reasonTTL, reasonLowDisk} {
			wm.cleanupRemoved.WithLabelValues(k, string(r))
			wm.cleanupBytes.WithLabelValues(string(r))
		}
	}
	wm.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		wm.heartbeats, wm.heartbeatDuration, wm.launches, wm.restarts,
		wm.cleanupRemoved, wm.cleanupBytes, wm.cacheFreed,
		workerCollector{cfg: cfg, st: st, metrics: wm, freeSpace: freeSpace},
	)
	wm.handler = promhttp.HandlerFor(wm.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	return wm
}

// heartbeatFailed counts a heartbeat no leader answered.
func (wm *workerMetrics) heartbeatFailed() {
	wm.heartbeats.WithLabelValues("error").Inc()
}

// heartbeatAnswered counts a heartbeat sent at sent and answered, and
// takes the resources of the answer's desired set as those in use.
func (wm *workerMetrics) heartbeatAnswered(req api.HeartbeatRequest, sent time.Time, desired []order) {
	wm.heartbeats.WithLabelValues("ok").Inc()
	wm.heartbeatDuration.WithLabelValues(strconv.FormatBool(req.WaitIndex != 0)).Observe(time.Since(sent).Seconds())
	var cores, mem int64
	for _, o := range desired {
		cores += int64(o.cores)
		mem += o.memoryMB
	}
	wm.usedCores.Store(cores)
	wm.usedMemoryMB.Store(mem)
}

// workerCollector computes, on each scrape, what describes the worker's
// current state.
type workerCollector struct {
	cfg       Config
	st        *workerState
	metrics   *workerMetrics
	freeSpace func() (int64, error)
}

// Describe implements prometheus.Collector.
func (c workerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCores, descMemory, descUnits, descPending, descContactAge, descWorkDirFree} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c workerCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(descCores, float64(c.cfg.Cores), "total")
	gauge(descCores, float64(c.metrics.usedCores.Load()), "used")
	gauge(descMemory, float64(c.cfg.MemoryMB<<20), "total")
	gauge(descMemory, float64(c.metrics.usedMemoryMB.Load()<<20), "used")

	c.st.mu.Lock()
	var units [len(kindLabel)]int
	for k, u := range c.st.units {
		if !u.ended {
			units[k.kind]++
		}
	}
	pending := len(c.st.unacked)
	contact := c.st.lastContact
	c.st.mu.Unlock()

	for k, n := range units {
		gauge(descUnits, float64(n), kindLabel[k])
	}
	gauge(descPending, float64(pending))
	if !contact.IsZero() {
		gauge(descContactAge, time.Since(contact).Seconds())
	}
	if free, err := c.freeSpace(); err == nil {
		gauge(descWorkDirFree, float64(free))
	}
}
