// Package metrics is a master's Prometheus registry: the counters and
// histograms the rules and the leader's duties update as things happen,
// and the gauges computed at each scrape from Raft, the tables (each
// namespace's quota, use and shares among them) and the gossip pool.
package metrics

import (
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/transport/gossip"
)

// Label values of the states in the tables, in the order Spark lists them;
// every one is exported, zero included, so that a rate or a sum over
// states never misses a series that has not appeared yet.
var (
	driverStates = []model.DriverState{model.DriverSubmitted, model.DriverRunning, model.DriverFinished,
		model.DriverRelaunching, model.DriverUnknown, model.DriverKilled, model.DriverFailed, model.DriverError}
	appStates = []model.ApplicationState{model.AppWaiting, model.AppRunning, model.AppFinished,
		model.AppFailed, model.AppKilled, model.AppUnknown}
	executorStates = []model.ExecutorState{model.ExecLaunching, model.ExecRunning, model.ExecKilled,
		model.ExecFailed, model.ExecLost, model.ExecExited}
	workerStates = []model.WorkerState{model.WorkerAlive, model.WorkerDead, model.WorkerDecommissioned, model.WorkerUnknown}
	raftStates   = []raft.RaftState{raft.Leader, raft.Follower, raft.Candidate, raft.Shutdown}
)

// Descriptions of the metrics a master computes when it is scraped, from
// Raft, the tables and the gossip pool, rather than keeping gauges up to
// date on every commit: a scrape every few seconds costs less than work on
// the hot paths, and cannot drift from what it describes.
var (
	descRaftState = prometheus.NewDesc("drover_raft_state",
		"Raft state of this master: 1 for the current one of leader, follower, candidate and shutdown, 0 for the others.",
		[]string{"state"}, nil)
	descRaftTerm = prometheus.NewDesc("drover_raft_term",
		"Current Raft term as this master knows it.", nil, nil)
	descRaftCommit = prometheus.NewDesc("drover_raft_commit_index",
		"Index of the last Raft entry this master knows to be committed.", nil, nil)
	descRaftApplied = prometheus.NewDesc("drover_raft_applied_index",
		"Index of the last Raft entry this master applied to its tables; the gap to the leader's commit index is how far its reads lag.", nil, nil)
	descRaftLastLog = prometheus.NewDesc("drover_raft_last_log_index",
		"Index of the last entry in this master's Raft log (or its last snapshot).", nil, nil)
	descRaftPeers = prometheus.NewDesc("drover_raft_peers",
		"Voters in the latest Raft configuration this master knows.", nil, nil)
	descLeaderReady = prometheus.NewDesc("drover_leader_ready",
		"1 while this master leads and has applied every entry of earlier terms: only then does it schedule, watch liveness and count placements.", nil, nil)

	descDrivers = prometheus.NewDesc("drover_drivers",
		"Drivers in this master's drivers table by state; finished ones only while retention keeps them.", []string{"state"}, nil)
	descApps = prometheus.NewDesc("drover_apps",
		"Applications in this master's apps table by state; finished ones only while retention keeps them.", []string{"state"}, nil)
	descExecutors = prometheus.NewDesc("drover_executors",
		"Executors in this master's executors table by state; finished ones only while retention keeps them.", []string{"state"}, nil)
	descWaiting = prometheus.NewDesc("drover_waiting_drivers",
		"Drivers waiting for a placement (waitingDrivers), relaunches included.", nil, nil)
	descWorkers = prometheus.NewDesc("drover_workers",
		"Workers in this master's workers table by state.", []string{"state"}, nil)
	descWorkerCores = prometheus.NewDesc("drover_worker_cores",
		"Cores each worker that is not DEAD offers (kind=total) and that drivers and executors placed on it hold (kind=used), from the tables.",
		[]string{"worker", "kind"}, nil)
	descWorkerMemory = prometheus.NewDesc("drover_worker_memory_bytes",
		"Memory each worker that is not DEAD offers (kind=total) and that drivers and executors placed on it hold (kind=used), from the tables.",
		[]string{"worker", "kind"}, nil)

	descGossipMembers = prometheus.NewDesc("drover_gossip_members",
		"Members of the gossip pool as this master sees them: alive (suspect ones included) and dead_or_left (declared dead or left on purpose within memberlist's gossip-to-the-dead time, and not back); memberlist exposes neither distinction safely.",
		[]string{"state"}, nil)
	descGossipSplit = prometheus.NewDesc("drover_gossip_split_members",
		"On the leader, voters (role=master) and workers (role=worker) it hears from, through Raft or heartbeats, but does not see in its gossip pool: a split pool; 0 on followers.",
		[]string{"role"}, nil)
	descGossipHealth = prometheus.NewDesc("drover_gossip_health_score",
		"memberlist's health score of this master (Lifeguard awareness): 0 is healthy; higher means its own probes go unanswered, so it is likely the slow or cut-off member.",
		nil, nil)

	descBlobFiles = prometheus.NewDesc("drover_blob_files",
		"Uploaded files in this master's store (DATA_DIR/blobs).", nil, nil)
	descBlobBytes = prometheus.NewDesc("drover_blob_bytes",
		"Bytes of the uploaded files in this master's store.", nil, nil)
)

// Histogram buckets. Raft commits on one machine or a LAN take a
// millisecond or a few, up to the apply timeout under trouble; a driver
// may wait for a worker from milliseconds to hours.
var (
	applyBuckets      = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
	schedulingBuckets = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}
)

// Metrics is one master's registry and the metrics it updates as things
// happen. The registry is the master's own, not Prometheus's global one:
// tests run several masters in one process, and each must report only
// itself.
type Metrics struct {
	reg *prometheus.Registry
	// Handler serves the registry in Prometheus's text format.
	Handler http.Handler

	applyDuration prometheus.Histogram
	applyErrors   prometheus.Counter
	placements    prometheus.Counter
	// ExecutorPlacements counts executors the scheduler placed.
	ExecutorPlacements prometheus.Counter
	relaunches         prometheus.Counter
	// WorkersLost counts WorkerLost entries the liveness watch committed.
	WorkersLost        prometheus.Counter
	schedulingDuration *prometheus.HistogramVec
	httpRequests       *prometheus.CounterVec
	blobUploads        *prometheus.CounterVec
	blobPulls          prometheus.Counter
	blobDeletions      prometheus.Counter

	// leaderObs hands raft's leader observations to leaderSeen, where
	// they are counted when scraped (see leaderChanges).
	leaderObs  *raft.Observer
	leaderSeen chan raft.Observation
	leaders    atomic.Uint64
}

// Source is what the scrape-time gauges describe.
type Source struct {
	Raft *raft.Raft
	// State is the tables the gauges count.
	State *fsm.State
	Pool  *gossip.Pool
	// Ready reports whether this master is the ready leader.
	Ready func() bool
	// Split returns, on the leader, the members missing from its gossip
	// pool that it hears from otherwise.
	Split func() []api.PoolMember
	// Blobs returns how many files this master's upload store holds, and
	// their bytes.
	Blobs func() (files int, bytes int64)
}

// New makes the metrics of a master whose Raft r is running: it registers
// the observer that counts leader changes at once, so that the first
// election is not missed. The gauges of the master's state join once the
// rest of it runs (Watch).
func New(r *raft.Raft) *Metrics {
	mm := &Metrics{
		reg: prometheus.NewRegistry(),
		applyDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "drover_raft_apply_duration_seconds",
			Help:    "Time from handing a command to Raft on this master to its commit and application here, for commands that committed.",
			Buckets: applyBuckets,
		}),
		applyErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "drover_raft_apply_errors_total",
			Help: "Commands this master handed to Raft that did not commit: it was not or no longer the leader, or the quorum did not answer within the apply timeout.",
		}),
		placements: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "drover_placements_total",
			Help: "Driver attempts placed on a worker by this master's scheduler while it led (committed and applied), relaunches included.",
		}),
		ExecutorPlacements: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "drover_executor_placements_total",
			Help: "Executors placed on a worker by this master's scheduler while it led (committed and applied).",
		}),
		relaunches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "drover_relaunches_total",
			Help: "Supervised drivers placed again under a new attempt by this master's scheduler, after their worker was lost or killed their attempt; counted at the placement, the one moment the leader sees every relaunch once.",
		}),
		WorkersLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "drover_workers_lost_total",
			Help: "Workers this master declared lost (WorkerLost committed) while it led.",
		}),
		schedulingDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "drover_scheduling_duration_seconds",
			Help:    "Time a driver attempt waited for its placement, observed when this master's scheduler commits it: from the submission (attempt=first) or from the end of the attempt before it (attempt=relaunch), on the leaders' clocks at millisecond resolution.",
			Buckets: schedulingBuckets,
		}, []string{"attempt"}),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "drover_http_requests_total",
			Help: "HTTP requests this master answered, by status code and method; forwarded requests count on both masters.",
		}, []string{"code", "method"}),
		blobUploads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "drover_blob_uploads_total",
			Help: "Uploaded files this master stored that it did not hold, by where the bytes came from: from=client for an upload it received, from=master for one another master pushed to it.",
		}, []string{"from"}),
		blobPulls: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "drover_blob_pulls_total",
			Help: "Uploaded files this master pulled from another master because a live driver or app names them and its store lacked them (anti-entropy).",
		}),
		blobDeletions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "drover_blob_deletions_total",
			Help: "Uploaded files this master deleted because no live driver or app named them for the grace period (--upload-grace).",
		}),
		leaderSeen: make(chan raft.Observation, 16),
	}
	// Non-blocking: raft drops, and counts, what the channel cannot hold,
	// so nothing needs to read it between scrapes.
	mm.leaderObs = raft.NewObserver(mm.leaderSeen, false, func(o *raft.Observation) bool {
		lo, ok := o.Data.(raft.LeaderObservation)
		return ok && lo.LeaderID != ""
	})
	r.RegisterObserver(mm.leaderObs)
	leaderChanges := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "drover_raft_leader_changes_total",
		Help: "Times this master learned of a newly elected leader (itself included) since it started.",
	}, mm.leaderChanges)
	for _, a := range []string{"first", "relaunch"} {
		mm.schedulingDuration.WithLabelValues(a)
	}
	for _, from := range []string{"client", "master"} {
		mm.blobUploads.WithLabelValues(from)
	}
	mm.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		mm.applyDuration, mm.applyErrors, mm.placements, mm.ExecutorPlacements, mm.relaunches,
		mm.WorkersLost, mm.schedulingDuration, mm.httpRequests, leaderChanges,
		mm.blobUploads, mm.blobPulls, mm.blobDeletions,
	)
	mm.Handler = promhttp.HandlerFor(mm.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	return mm
}

// Watch adds the gauges computed at each scrape from src, the namespaces'
// among them. It is called once, before anything scrapes.
func (mm *Metrics) Watch(src Source) {
	mm.reg.MustRegister(collector{src}, namespaceCollector{src.State})
}

// leaderChanges counts the leader observations received so far. They are
// taken from the channel when scraped rather than by a goroutine of their
// own; the ones the channel could not hold meanwhile raft dropped and
// counted, and the filter let through only changes to a known leader, so
// the sum is exact.
func (mm *Metrics) leaderChanges() float64 {
	for {
		select {
		case <-mm.leaderSeen:
			mm.leaders.Add(1)
		default:
			return float64(mm.leaders.Load() + mm.leaderObs.GetNumDropped())
		}
	}
}

// Instrument counts the requests h answers.
func (mm *Metrics) Instrument(h http.Handler) http.Handler {
	return promhttp.InstrumentHandlerCounter(mm.httpRequests, h)
}

// Applied records one command handed to Raft at start: its time to commit,
// or a failure.
func (mm *Metrics) Applied(start time.Time, err error) {
	if err != nil {
		mm.applyErrors.Inc()
		return
	}
	mm.applyDuration.Observe(time.Since(start).Seconds())
}

// Placed records the driver placements of a PlaceDrivers entry committed
// with time at (Unix ms): how many, how many were relaunches, and how long
// each attempt waited.
func (mm *Metrics) Placed(s *fsm.State, applied []model.Placement, at int64) {
	mm.placements.Add(float64(len(applied)))
	for _, p := range applied {
		kind := "first"
		if p.Attempt > 1 {
			kind = "relaunch"
			mm.relaunches.Inc()
		}
		if queued, ok := s.QueuedAt(p.DriverID, p.Attempt); ok {
			// Clamped: a relaunch stamped by a previous leader may
			// carry a clock a little ahead of this one.
			mm.schedulingDuration.WithLabelValues(kind).Observe(float64(max(at-queued, 0)) / 1000)
		}
	}
}

// BlobUploaded counts a file stored from an upload this master did not
// hold: pushed by another master, or else received from a client.
func (mm *Metrics) BlobUploaded(pushed bool) {
	from := "client"
	if pushed {
		from = "master"
	}
	mm.blobUploads.WithLabelValues(from).Inc()
}

// BlobPulled counts a file pulled from another master.
func (mm *Metrics) BlobPulled() { mm.blobPulls.Inc() }

// BlobDeleted counts a file deleted by garbage collection.
func (mm *Metrics) BlobDeleted() { mm.blobDeletions.Inc() }

// collector computes, on each scrape, what describes the master's current
// state.
type collector struct{ src Source }

// Describe implements prometheus.Collector.
func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRaftState, descRaftTerm, descRaftCommit, descRaftApplied,
		descRaftLastLog, descRaftPeers, descLeaderReady, descDrivers, descApps, descExecutors, descWaiting,
		descWorkers, descWorkerCores, descWorkerMemory, descGossipMembers, descGossipSplit, descGossipHealth,
		descBlobFiles, descBlobBytes} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c collector) Collect(ch chan<- prometheus.Metric) {
	src := c.src
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	state := src.Raft.State()
	for _, s := range raftStates {
		gauge(descRaftState, boolValue(s == state), strings.ToLower(s.String()))
	}
	gauge(descRaftTerm, float64(src.Raft.CurrentTerm()))
	gauge(descRaftCommit, float64(src.Raft.CommitIndex()))
	gauge(descRaftApplied, float64(src.Raft.AppliedIndex()))
	gauge(descRaftLastLog, float64(src.Raft.LastIndex()))
	// GetConfiguration answers from a copy raft keeps, without a round
	// trip through its main loop.
	if cf := src.Raft.GetConfiguration(); cf.Error() == nil {
		voters := 0
		for _, s := range cf.Configuration().Servers {
			if s.Suffrage == raft.Voter {
				voters++
			}
		}
		gauge(descRaftPeers, float64(voters))
	}
	gauge(descLeaderReady, boolValue(src.Ready()))

	census := src.State.Census()
	for _, s := range driverStates {
		gauge(descDrivers, float64(census.Drivers[s]), string(s))
	}
	for _, s := range appStates {
		gauge(descApps, float64(census.Apps[s]), string(s))
	}
	for _, s := range executorStates {
		gauge(descExecutors, float64(census.Executors[s]), string(s))
	}
	gauge(descWaiting, float64(census.Waiting))
	for _, s := range workerStates {
		gauge(descWorkers, float64(census.Workers[s]), string(s))
	}
	// A DEAD worker offers nothing: left out, so that a sum over workers
	// is the capacity the scheduler can use.
	for _, w := range src.State.Workers() {
		if w.State == model.WorkerDead {
			continue
		}
		gauge(descWorkerCores, float64(w.Cores), w.ID, "total")
		gauge(descWorkerCores, float64(w.CoresUsed), w.ID, "used")
		gauge(descWorkerMemory, float64(w.MemoryMB<<20), w.ID, "total")
		gauge(descWorkerMemory, float64(w.MemoryUsedMB<<20), w.ID, "used")
	}

	alive, gone := src.Pool.MemberCounts()
	gauge(descGossipMembers, float64(alive), "alive")
	gauge(descGossipMembers, float64(gone), "dead_or_left")
	gauge(descGossipHealth, float64(src.Pool.HealthScore()))
	split := map[string]int{}
	for _, m := range src.Split() {
		split[m.Role]++
	}
	for _, role := range []string{gossip.RoleMaster, gossip.RoleWorker} {
		gauge(descGossipSplit, float64(split[role]), role)
	}
	files, bytes := src.Blobs()
	gauge(descBlobFiles, float64(files))
	gauge(descBlobBytes, float64(bytes))
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
