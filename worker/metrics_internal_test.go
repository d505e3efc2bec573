package worker

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestMetricsRegistry checks a worker's registry as Prometheus's own
// linter does, and what its collector computes from the units: ended ones
// do not count, the contact age is absent until a leader answered, and the
// work dir's free space is the file system's.
func TestMetricsRegistry(t *testing.T) {
	free := func(string) (int64, error) { return 5 << 30, nil }
	st := &workerState{units: map[unitKey]*unit{
		attemptKey("driver-20260101000000-1", 1):  {},
		attemptKey("driver-20260101000000-2", 1):  {ended: true},
		executorKey("app-20260101000000-0001", 0): {},
		executorKey("app-20260101000000-0001", 1): {},
	}, unacked: []report{{}}}
	metrics := newWorkerMetrics(Config{Cores: 4, MemoryMB: 1024}, st, func() (int64, error) { return free("") })
	problems, err := testutil.GatherAndLint(metrics.reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	const want = `
# HELP drover_worker_units Driver attempts (kind=driver) and executors (kind=executor) whose runner is alive on this worker, adopted ones included.
# TYPE drover_worker_units gauge
drover_worker_units{kind="driver"} 1
drover_worker_units{kind="executor"} 2
# HELP drover_worker_pending_reports State changes of attempts and executors the leader has not acknowledged yet; they go out with every heartbeat until it does.
# TYPE drover_worker_pending_reports gauge
drover_worker_pending_reports 1
# HELP drover_worker_cores Cores this worker offers (kind=total), and those the drivers and executors of the leader's last heartbeat answer take (kind=used).
# TYPE drover_worker_cores gauge
drover_worker_cores{kind="total"} 4
drover_worker_cores{kind="used"} 0
# HELP drover_worker_work_dir_free_bytes Free bytes of the work dir's file system, for unprivileged users (statfs); below --min-free-disk the cleanup removes finished units' directories. Absent when it cannot be read.
# TYPE drover_worker_work_dir_free_bytes gauge
drover_worker_work_dir_free_bytes 5.36870912e+09
`
	names := []string{"drover_worker_units", "drover_worker_pending_reports", "drover_worker_cores", "drover_worker_leader_contact_age_seconds",
		"drover_worker_work_dir_free_bytes"}
	if err := testutil.GatherAndCompare(metrics.reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	st.lastContact = time.Now()
	if n, err := testutil.GatherAndCount(metrics.reg, "drover_worker_leader_contact_age_seconds"); err != nil || n != 1 {
		t.Errorf("contact age samples after a contact: %d, %v; want 1", n, err)
	}
}
