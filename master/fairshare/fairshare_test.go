package fairshare

import (
	"fmt"
	"math"
	"testing"

	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/model"
)

func ns(name string, weight float64, q model.Quota) *model.Namespace {
	return &model.Namespace{Name: name, Weight: weight, DriverShare: 0.5, PriorityMax: 100, Quota: q}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// The dominant share is the largest fraction of any resource, a custom
// one included, and a resource the cluster lacks counts whole.
func TestDominant(t *testing.T) {
	c := Vector{Cores: 100, MemoryMB: 1000, Resources: model.ResourceAmounts{"gpu": 4}}
	for _, tc := range []struct {
		v    Vector
		want float64
		res  string
	}{
		{Vector{}, 0, ""},
		{Vector{Cores: 10, MemoryMB: 50}, 0.1, "cores"},
		{Vector{Cores: 10, MemoryMB: 500}, 0.5, "memory"},
		{Vector{Cores: 1, Resources: model.ResourceAmounts{"gpu": 3}}, 0.75, "gpu"},
		{Vector{Resources: model.ResourceAmounts{"fpga": 1}}, 1, "fpga"},
	} {
		got, res := Dominant(tc.v, c)
		if !near(got, tc.want) || res != tc.res {
			t.Errorf("Dominant(%+v) = %g %q, want %g %q", tc.v, got, res, tc.want, tc.res)
		}
	}
}

// Weighted max-min: two namespaces that both want everything split the
// cluster 1:3 by weight; one that wants little keeps what it wants and
// leaves the rest to the other; an idle one gets nothing; a quota caps
// the demand.
func TestComputeWeightedMaxMin(t *testing.T) {
	c := Vector{Cores: 100, MemoryMB: 100000}
	all := Vector{Cores: 1000, MemoryMB: 1000}
	got := Compute(c, []Namespace{
		{Settings: ns("a", 1, model.Quota{}), Waiting: all},
		{Settings: ns("b", 3, model.Quota{}), Waiting: all},
		{Settings: ns("idle", 5, model.Quota{})},
	})
	if !near(got["a"].Fair, 0.25) || !near(got["b"].Fair, 0.75) || got["idle"].Fair != 0 {
		t.Fatalf("fair shares %+v, want a 0.25, b 0.75, idle 0", got)
	}
	got = Compute(c, []Namespace{
		{Settings: ns("small", 1, model.Quota{}), Held: Vector{Cores: 5}, Waiting: Vector{Cores: 5}},
		{Settings: ns("big", 1, model.Quota{}), Waiting: all},
		{Settings: ns("capped", 1, model.Quota{Cores: 20}), Waiting: all},
	})
	if !near(got["small"].Fair, 0.1) || !near(got["capped"].Fair, 0.2) || !near(got["big"].Fair, 0.7) {
		t.Fatalf("fair shares %+v, want small 0.1, capped 0.2 (its quota), big the rest, 0.7", got)
	}
	if !near(got["small"].Dominant, 0.05) || !got["small"].Below() || got["big"].Dominant != 0 {
		t.Fatalf("dominant shares %+v", got)
	}
}

// Inputs reads the tables: namespaces, their use, the waiting drivers
// and the executors live apps still want.
func TestInputsFromTables(t *testing.T) {
	f := fsm.New()
	apply := applier(t, f)
	apply(&model.RegisterWorker{ID: "w1", HTTPAddr: "h:1", Cores: 8, MemoryMB: 8192, Time: 1})
	apply(&model.ApplyNamespace{Namespace: *ns("etl", 2, model.Quota{}), Time: 2})
	apply(&model.SubmitDriver{ID: "driver-20261129120000-0000", DriverSpec: model.DriverSpec{Argv: []string{"a"}, Cores: 2, MemoryMB: 512, Namespace: "etl"}, Time: 3})
	apply(&model.SubmitDriver{ID: "driver-20261129120000-0001", DriverSpec: model.DriverSpec{Argv: []string{"b"}, Cores: 1, MemoryMB: 512}, Time: 4})
	apply(&model.PlaceDrivers{Placements: []model.Placement{{DriverID: "driver-20261129120000-0001", Attempt: 1, WorkerID: "w1"}}, Time: 5})
	apply(&model.RegisterApp{ID: "app-20261129120000-0000", DriverID: "driver-20261129120000-0001", DriverAttempt: 1, CoresPerExecutor: 1,
		MemoryPerExecutorMB: 256, MaxCores: 3, ExecutorLimit: -1, Argv: []string{"e"}, Time: 6})
	c, nss := Inputs(f.State())
	if c.Cores != 8 || c.MemoryMB != 8192 {
		t.Fatalf("capacity %+v", c)
	}
	by := map[string]Namespace{}
	for _, n := range nss {
		by[n.Settings.Name] = n
	}
	if d := by["default"]; d.Held.Cores != 1 || d.Waiting.Cores != 3 || d.Waiting.MemoryMB != 768 {
		t.Fatalf("default: %+v, want 1 core held and 3 executors of 1 core waiting", d)
	}
	if e := by["etl"]; e.Held.Cores != 0 || e.Waiting.Cores != 2 || e.Settings.Weight != 2 {
		t.Fatalf("etl: %+v, want 2 cores waiting at weight 2", e)
	}
}

// The cores drivers say their apps will ask for count as waiting work:
// a waiting driver's, and a placed driver's beyond what its registered
// app already wants, so its fair share has room for them.
func TestInputsCountTheAppsAsks(t *testing.T) {
	f := fsm.New()
	apply := applier(t, f)
	apply(&model.RegisterWorker{ID: "w1", HTTPAddr: "h:1", Cores: 16, MemoryMB: 8192, Time: 1})
	for n := range 3 {
		apply(&model.SubmitDriver{ID: fmt.Sprintf("driver-20261129120000-%04d", n), DriverSpec: model.DriverSpec{Argv: []string{"a"}, Cores: 1, MemoryMB: 128, AppCores: 4}, Time: 3})
	}
	apply(&model.PlaceDrivers{Placements: []model.Placement{{DriverID: "driver-20261129120000-0000", Attempt: 1, WorkerID: "w1"},
		{DriverID: "driver-20261129120000-0001", Attempt: 1, WorkerID: "w1"}}, Time: 5})
	// The first driver's app wants 2 executors of 1 core so far.
	apply(&model.RegisterApp{ID: "app-20261129120000-0000", DriverID: "driver-20261129120000-0000", DriverAttempt: 1, CoresPerExecutor: 1,
		MemoryPerExecutorMB: 128, MaxCores: 4, ExecutorLimit: 2, Argv: []string{"e"}, Time: 6})
	_, nss := Inputs(f.State())
	// 1 + 4 of the waiting driver, and the placed drivers' 8 asked
	// cores, of which the app's 2 wanted ones count once.
	if d := nss[0]; d.Held.Cores != 2 || d.Waiting.Cores != 5+8 {
		t.Fatalf("default: %+v, want 2 cores held and 13 waiting", d)
	}
}

// A quota bounds the demand through the resource it bounds: the waiting
// work counts only as far as the tightest bound lets it be placed, for
// every resource. Namespace q (2 cores, 2 drivers of 1 core and 1 GiB
// running, 4 waiting) asks for no more than it holds, 0.25 of 8 cores,
// though its waiting memory is unbounded; hog and ml, unbounded, share
// the rest. A running-drivers quota bounds the waiting drivers alike, and
// a quota half used lets half of what waits count.
func TestDemandWithinTheTightestBound(t *testing.T) {
	c := Vector{Cores: 8, MemoryMB: 16384}
	lots := Vector{Cores: 64, MemoryMB: 65536}
	q := ns("q", 1, model.Quota{Cores: 2})
	q.DriverShare = 1
	waiting := Vector{Cores: 4, MemoryMB: 4096}
	got := Compute(c, []Namespace{
		{Settings: q, Held: Vector{Cores: 2, MemoryMB: 2048}, Waiting: waiting, RunningDrivers: 2, WaitingDrivers: 4},
		{Settings: ns("hog", 1, model.Quota{}), Waiting: lots},
		{Settings: ns("ml", 1, model.Quota{}), Waiting: lots},
	})
	if !near(got["q"].Demand, 0.25) || !near(got["q"].Fair, 0.25) || !near(got["hog"].Fair, 0.375) || !near(got["ml"].Fair, 0.375) {
		t.Fatalf("shares %+v, want q 0.25 (its quota), hog and ml 0.375", got)
	}
	for _, tc := range []struct {
		name  string
		quota model.Quota
		want  float64
	}{
		{"running drivers at quota", model.Quota{RunningDrivers: 2}, 0.25},
		{"running drivers 1 short", model.Quota{RunningDrivers: 3}, 3.0 / 8},
		{"cores half free", model.Quota{Cores: 4}, 4.0 / 8},
		{"memory tighter than cores", model.Quota{Cores: 6, MemoryMB: 3072}, 3.0 / 8},
		{"gpu bound of 0 with gpus waiting", model.Quota{Resources: model.ResourceAmounts{"gpu": 0}}, 0.25},
		{"held past a lowered quota", model.Quota{Cores: 1}, 0.25},
		{"unbounded", model.Quota{}, 6.0 / 8},
	} {
		w := waiting
		if tc.quota.Resources != nil {
			w.Resources = model.ResourceAmounts{"gpu": 1}
			c.Resources = model.ResourceAmounts{"gpu": 8}
		}
		got := Compute(c, []Namespace{{Settings: ns("q", 1, tc.quota), Held: Vector{Cores: 2, MemoryMB: 2048}, Waiting: w, RunningDrivers: 2, WaitingDrivers: 4}})
		if !near(got["q"].Demand, tc.want) {
			t.Errorf("%s: demand %g, want %g", tc.name, got["q"].Demand, tc.want)
		}
	}
}

// applier returns a function that encodes a command and applies it to f
// at the next index, failing t on a refusal.
func applier(t *testing.T, f *fsm.FSM) func(model.Command) {
	var i uint64
	return func(c model.Command) {
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
}
