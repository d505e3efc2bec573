package worker_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/metricstest"
	"github.com/drover-project/drover/worker"
)

// metricsLeader is a leader that refuses the first heartbeat (400, which
// the worker does not retry) and answers every later one with the same
// desired set, acknowledging every report. Each heartbeat it answers is
// handed to the test on beats.
type metricsLeader struct {
	srv   *httptest.Server
	beats chan api.HeartbeatRequest
}

func newMetricsLeader(t *testing.T, as []api.Assignment, es []api.ExecutorAssignment) *metricsLeader {
	ml := &metricsLeader{beats: make(chan api.HeartbeatRequest, 1024)}
	var n atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/workers/register", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusOK, api.RegisterWorkerResponse{WorkerID: "w1"})
	})
	mux.HandleFunc("POST /v1/workers/{id}/decommission", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusOK, api.RegisterWorkerResponse{WorkerID: "w1"})
	})
	mux.HandleFunc("POST /v1/workers/{id}/heartbeat", func(w http.ResponseWriter, r *http.Request) {
		var req api.HeartbeatRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("heartbeat body: %v", err)
		}
		seq := n.Add(1)
		if seq == 1 {
			reply(w, http.StatusBadRequest, api.Error{Error: "not this one"})
			return
		}
		select {
		case ml.beats <- req:
		default:
		}
		reply(w, http.StatusOK, api.HeartbeatResponse{
			Registered: true, Assignments: as, Executors: es,
			Acked: req.Reports, AckedExecutors: req.ExecutorReports, Index: uint64(seq),
		})
	})
	ml.srv = httptest.NewServer(mux)
	t.Cleanup(ml.srv.Close)
	return ml
}

// waitBeat waits for a heartbeat that cond accepts.
func (ml *metricsLeader) waitBeat(t *testing.T, what string, cond func(api.HeartbeatRequest) bool) {
	t.Helper()
	deadline := time.After(failSafe)
	for {
		select {
		case req := <-ml.beats:
			if cond(req) {
				return
			}
		case <-deadline:
			t.Fatalf("timed out waiting for a heartbeat with %s", what)
		}
	}
}

// TestMetricsFollowHeartbeatsAndLaunches runs a worker against a leader
// that refuses its first heartbeat and then assigns two drivers (one
// supervised that keeps failing) and an executor, and checks what the
// worker's /metrics says once they run: resources, units, launches, a
// restart, heartbeats by result, and the contact age; the exposition must
// pass promlint.
func TestMetricsFollowHeartbeatsAndLaunches(t *testing.T) {
	failing := api.Assignment{DriverID: driverB, Attempt: 1, Argv: []string{"/bin/sh", "-c", "exit 3"},
		Cores: 1, MemoryMB: 32, Supervise: true}
	executor := api.ExecutorAssignment{AppID: appA, ExecutorID: 0, Cores: 2, MemoryMB: 128,
		Argv: []string{"/bin/sh", "-c", "exec sleep 1000"}}
	ml := newMetricsLeader(t, []api.Assignment{sleeper(driverA, 1), failing}, []api.ExecutorAssignment{executor})

	w, _ := newWorkerAt(t, strings.TrimPrefix(ml.srv.URL, "http://"), nil)

	// The worker counts a unit's launch before it lists the unit as
	// running, an answered heartbeat before it acts on the answer, and a
	// restart before it reports the new run: a heartbeat showing all of
	// it comes after the counts.
	ml.waitBeat(t, "both drivers and the executor running, and a restart", func(req api.HeartbeatRequest) bool {
		restarted := slices.ContainsFunc(req.Reports, func(r model.AttemptReport) bool {
			return r.DriverID == driverB && r.State == model.DriverRunning && r.Runs >= 2
		})
		return restarted && slices.Contains(req.Running, api.AttemptRef{DriverID: driverA, Attempt: 1}) &&
			slices.Contains(req.RunningExecutors, api.ExecutorRef{AppID: appA, ExecutorID: 0})
	})
	s, err := metricstest.Get(http.DefaultClient, "http://"+w.HTTPAddr()+worker.MetricsPath, "")
	if err != nil {
		t.Fatal(err)
	}
	wantSample := func(v float64, name string, labels ...string) {
		t.Helper()
		if got, ok := s.Value(name, labels...); !ok || got != v {
			t.Errorf("%s%v = %v (present %v), want %v\n%s", name, labels, got, ok, v, s.Show(name))
		}
	}
	atLeast := func(v float64, name string, labels ...string) {
		t.Helper()
		if got, ok := s.Value(name, labels...); !ok || got < v {
			t.Errorf("%s%v = %v (present %v), want at least %v\n%s", name, labels, got, ok, v, s.Show(name))
		}
	}
	wantSample(4, "drover_worker_cores", "kind", "total")
	wantSample(1+1+2, "drover_worker_cores", "kind", "used")
	wantSample(1024<<20, "drover_worker_memory_bytes", "kind", "total")
	wantSample((64+32+128)<<20, "drover_worker_memory_bytes", "kind", "used")
	wantSample(1, "drover_worker_units", "kind", "executor")
	wantSample(1, "drover_worker_launches_total", "kind", "executor")
	// The failing driver's runner lives on between its runs.
	wantSample(2, "drover_worker_units", "kind", "driver")
	wantSample(2, "drover_worker_launches_total", "kind", "driver")
	atLeast(1, "drover_worker_restarts_total")
	wantSample(1, "drover_worker_heartbeats_total", "result", "error")
	atLeast(1, "drover_worker_heartbeats_total", "result", "ok")
	atLeast(1, "drover_worker_heartbeat_duration_seconds", "long_poll", "false")
	if age, ok := s.Value("drover_worker_leader_contact_age_seconds"); !ok || age < 0 || age > failSafe.Seconds() {
		t.Errorf("drover_worker_leader_contact_age_seconds = %v (present %v)", age, ok)
	}
	if _, ok := s.Value("drover_worker_pending_reports"); !ok {
		t.Error("no drover_worker_pending_reports")
	}
	if _, ok := s.Value("go_goroutines"); !ok {
		t.Error("no Go collector metrics")
	}
	problems, err := s.Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s", p)
	}
}
