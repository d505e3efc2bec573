package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/model"
)

// namespaceTables is a fixture of two namespaces on one worker of 8
// cores, 8 GiB and two GPUs: etl (weight 3, a quota of 4 cores, 2 GiB,
// 1 GPU and 2 running drivers) holds a driver of 2 cores, 1 GiB and a
// GPU and an executor of 1 core and 256 MiB, and has a driver of 1 core
// queued; the implicit default holds a driver of 1 core and 1 GiB and
// has one of 4 cores queued, and its driver is under notice of
// preemption for etl.
func namespaceTables(t *testing.T) *fsm.State {
	t.Helper()
	f := fsm.New()
	i := uint64(0)
	apply := func(c model.Command) {
		t.Helper()
		i++
		data, err := fsm.Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		if err, ok := f.ApplyCommand(i, data).(error); ok {
			t.Fatalf("%T: %v", c, err)
		}
	}
	id := func(n string) string { return "driver-20261207120000-000" + n }
	submit := func(n, ns string, cores int, memoryMB int64, res model.ResourceAmounts) {
		apply(&model.SubmitDriver{ID: id(n), Token: "t" + n, Time: 3,
			DriverSpec: model.DriverSpec{Argv: []string{"p"}, Cores: cores, MemoryMB: memoryMB, Resources: res, Namespace: ns}})
	}
	apply(&model.RegisterWorker{ID: "w1", HTTPAddr: "127.0.0.1:1", Cores: 8, MemoryMB: 8192,
		Resources: model.Resources{"gpu": {"0", "1"}}, Time: 1})
	apply(&model.ApplyNamespace{Namespace: model.Namespace{Name: "etl", Weight: 3, DriverShare: 0.5, PriorityMax: 100,
		Quota: model.Quota{Cores: 4, MemoryMB: 2048, Resources: model.ResourceAmounts{"gpu": 1}, RunningDrivers: 2}}, Time: 2})
	submit("0", "etl", 2, 1024, model.ResourceAmounts{"gpu": 1})
	submit("1", "etl", 1, 512, nil)
	submit("2", "", 1, 1024, nil)
	submit("3", "", 4, 512, nil)
	apply(&model.PlaceDrivers{Time: 4, Placements: []model.Placement{
		{DriverID: id("0"), Attempt: 1, WorkerID: "w1", Resources: model.Resources{"gpu": {"0"}}},
		{DriverID: id("2"), Attempt: 1, WorkerID: "w1"},
	}})
	apply(&model.RegisterApp{ID: "app-20261207120000-0000", DriverID: id("0"), DriverAttempt: 1, CoresPerExecutor: 1,
		MemoryPerExecutorMB: 256, MaxCores: 1, ExecutorLimit: -1, Argv: []string{"e"}, Time: 5})
	apply(&model.PlaceExecutors{Time: 6, Placements: []model.ExecutorPlacement{
		{AppID: "app-20261207120000-0000", ExecutorID: 0, WorkerID: "w1"}}})
	apply(&model.PreemptAttempts{Items: []model.Preemption{{DriverID: id("2"), Attempt: 1, By: "etl"}}, Deadline: 30_007, Time: 7})
	return f.State()
}

// A scrape over the tables reports each namespace's quota (absent where
// it bounds nothing), use, queue, shares and preemptions: etl holds half the GPUs,
// its dominant share, and the fair share gives each namespace half
// (etl asks for no more than that, default for 5 of 8 cores).
func TestNamespaceMetricsFromTables(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(namespaceCollector{namespaceTables(t)})
	want := `
# HELP drover_namespace_weight Weight of the namespace in the weighted dominant-resource fair share (--weight).
# TYPE drover_namespace_weight gauge
drover_namespace_weight{namespace="default"} 1
drover_namespace_weight{namespace="etl"} 3
# HELP drover_namespace_quota_cores Cores the namespace's placed drivers and live executors may hold together (--cores); absent when unbounded.
# TYPE drover_namespace_quota_cores gauge
drover_namespace_quota_cores{namespace="etl"} 4
# HELP drover_namespace_quota_memory_bytes Memory the namespace's placed drivers and live executors may hold together (--memory), in bytes; absent when unbounded.
# TYPE drover_namespace_quota_memory_bytes gauge
drover_namespace_quota_memory_bytes{namespace="etl"} 2.147483648e+09
# HELP drover_namespace_quota_resources Units of each custom resource the namespace's work may hold (--resource NAME=N); absent for a resource it does not bound.
# TYPE drover_namespace_quota_resources gauge
drover_namespace_quota_resources{namespace="etl",resource="gpu"} 1
# HELP drover_namespace_quota_running_drivers Drivers of the namespace that may be placed at once (--max-running-drivers); absent when unbounded.
# TYPE drover_namespace_quota_running_drivers gauge
drover_namespace_quota_running_drivers{namespace="etl"} 2
# HELP drover_namespace_used_cores Cores the namespace's placed drivers and live executors hold.
# TYPE drover_namespace_used_cores gauge
drover_namespace_used_cores{namespace="default"} 1
drover_namespace_used_cores{namespace="etl"} 3
# HELP drover_namespace_used_memory_bytes Memory the namespace's placed drivers and live executors hold, in bytes.
# TYPE drover_namespace_used_memory_bytes gauge
drover_namespace_used_memory_bytes{namespace="default"} 1.073741824e+09
drover_namespace_used_memory_bytes{namespace="etl"} 1.34217728e+09
# HELP drover_namespace_used_resources Units of each custom resource the namespace's placed drivers and live executors hold; a resource held by none is absent.
# TYPE drover_namespace_used_resources gauge
drover_namespace_used_resources{namespace="etl",resource="gpu"} 1
# HELP drover_namespace_driver_used_cores Cores the namespace's placed drivers alone hold: what its driver share (--driver-share) bounds.
# TYPE drover_namespace_driver_used_cores gauge
drover_namespace_driver_used_cores{namespace="default"} 1
drover_namespace_driver_used_cores{namespace="etl"} 2
# HELP drover_namespace_driver_used_memory_bytes Memory the namespace's placed drivers alone hold, in bytes.
# TYPE drover_namespace_driver_used_memory_bytes gauge
drover_namespace_driver_used_memory_bytes{namespace="default"} 1.073741824e+09
drover_namespace_driver_used_memory_bytes{namespace="etl"} 1.073741824e+09
# HELP drover_namespace_running_drivers Drivers of the namespace placed on a worker (staging or running).
# TYPE drover_namespace_running_drivers gauge
drover_namespace_running_drivers{namespace="default"} 1
drover_namespace_running_drivers{namespace="etl"} 1
# HELP drover_namespace_queued_drivers Drivers of the namespace waiting for a placement (waitingDrivers), relaunches included.
# TYPE drover_namespace_queued_drivers gauge
drover_namespace_queued_drivers{namespace="default"} 1
drover_namespace_queued_drivers{namespace="etl"} 1
# HELP drover_namespace_executors Live executors of the namespace's applications.
# TYPE drover_namespace_executors gauge
drover_namespace_executors{namespace="default"} 0
drover_namespace_executors{namespace="etl"} 1
# HELP drover_namespace_dominant_share_ratio The namespace's dominant share: the largest fraction of any one resource of the ALIVE workers (cores, memory, a custom resource) its work holds; above 1 when it holds more than the cluster now offers.
# TYPE drover_namespace_dominant_share_ratio gauge
drover_namespace_dominant_share_ratio{namespace="default"} 0.125
drover_namespace_dominant_share_ratio{namespace="etl"} 0.5
# HELP drover_namespace_fair_share_ratio The namespace's fair share of the cluster, 0 to 1: weighted max-min over what each namespace holds and waits for, within its quota; 0 for a namespace with nothing held or waiting.
# TYPE drover_namespace_fair_share_ratio gauge
drover_namespace_fair_share_ratio{namespace="default"} 0.5
drover_namespace_fair_share_ratio{namespace="etl"} 0.5
# HELP drover_namespace_preemptions_total Driver attempts and executors preempted since the log began: the namespace's own, taken back for others (side=suffered), and others', taken back for it (side=caused); counted in the tables, so every master reports the same and a change of leader loses none.
# TYPE drover_namespace_preemptions_total counter
drover_namespace_preemptions_total{namespace="default",side="caused"} 0
drover_namespace_preemptions_total{namespace="default",side="suffered"} 1
drover_namespace_preemptions_total{namespace="etl",side="caused"} 1
drover_namespace_preemptions_total{namespace="etl",side="suffered"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(namespaceCollector{fsm.New().State()}); n != 12 {
		t.Fatalf("empty tables: %d series, want the 12 of the implicit default namespace, which bounds nothing", n)
	}
}
