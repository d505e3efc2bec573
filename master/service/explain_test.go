package service

import (
	"fmt"
	"strings"
	"testing"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/model"
)

func waiting(id string, cores int, mem int64) *model.Driver {
	return &model.Driver{ID: id, DriverSpec: model.DriverSpec{Cores: cores, MemoryMB: mem}, State: model.DriverSubmitted, Attempt: 1}
}

func alive(id string, cores int, mem int64) *model.Worker {
	return &model.Worker{ID: id, Cores: cores, MemoryMB: mem, State: model.WorkerAlive}
}

func TestExplainWaiting(t *testing.T) {
	ws := []*model.Worker{alive("w1", 4, 4096), {ID: "w2", Cores: 64, MemoryMB: 1 << 20, State: model.WorkerDead}}
	ds := explainWaiting([]*model.Driver{waiting("huge", 100, 1024), waiting("ok", 1, 512)}, ws, nil)
	if !strings.Contains(ds[0].Message, api.ReasonUnplaceable) || !strings.Contains(ds[0].Message, "4 cores") {
		t.Errorf("huge: %q", ds[0].Message)
	}
	if strings.Contains(ds[1].Message, api.ReasonUnplaceable) {
		t.Errorf("ok: %q", ds[1].Message)
	}
	if ds := explainWaiting([]*model.Driver{waiting("x", 1, 1)}, nil, nil); ds[0].Message != "waiting: no ALIVE worker" {
		t.Errorf("no workers: %q", ds[0].Message)
	}
}

func TestExplainApp(t *testing.T) {
	ws := []*model.Worker{alive("w1", 4, 4096)}
	s := explainApp(api.AppStatus{App: &model.App{ID: "app-20261129120000-0000", ExecutorSpec: model.ExecutorSpec{CoresPerExecutor: 1, MemoryPerExecutorMB: 8192, ExecutorLimit: -1}, State: model.AppWaiting}}, ws, nil)
	if !strings.Contains(s.Message, api.ReasonUnplaceable) || !strings.Contains(s.Message, "8192 MiB per executor") {
		t.Errorf("message %q", s.Message)
	}
	running := api.AppStatus{App: &model.App{ID: "app-20261129120000-0000", ExecutorSpec: model.ExecutorSpec{CoresPerExecutor: 1, MemoryPerExecutorMB: 8192, ExecutorLimit: -1}, State: model.AppWaiting},
		Executors: []*model.Executor{{ID: 0, State: model.ExecRunning}}}
	if s := explainApp(running, ws, nil); s.Message != "" {
		t.Errorf("an app with a live executor got %q", s.Message)
	}
}

// A resource no ALIVE worker offers enough of makes a driver unplaceable,
// as too many cores do; one whose addresses are held waits for them.
func TestExplainWaitingForResources(t *testing.T) {
	w := alive("w1", 4, 4096)
	w.Resources = model.Resources{"gpu": {"0", "1"}}
	w.ResourcesUsed = model.Resources{"gpu": {"0", "1"}}
	ask := func(rs model.ResourceAmounts) *model.Driver { d := waiting("d", 1, 1); d.Resources = rs; return d }
	ds := explainWaiting([]*model.Driver{ask(model.ResourceAmounts{"gpu": 3}), ask(model.ResourceAmounts{"tpu": 1}), ask(model.ResourceAmounts{"gpu": 1})}, []*model.Worker{w}, nil)
	if m := ds[0].Message; !strings.Contains(m, api.ReasonUnplaceable) || !strings.Contains(m, "gpu=3") || !strings.Contains(m, "4 cores, 4096 MiB, gpu=2") {
		t.Errorf("gpu=3: %q", m)
	}
	if m := ds[1].Message; !strings.Contains(m, api.ReasonUnplaceable) || !strings.Contains(m, "tpu=0") {
		t.Errorf("tpu=1: %q", m)
	}
	if m := ds[2].Message; m != waitReasonFree {
		t.Errorf("gpu=1 with both held: %q, want %q", m, waitReasonFree)
	}
}

// The reasons are the answer's, never the tables': the rows a read is
// given are the tables' own (fsm.State.Drivers, App), so a waiting driver
// or app gets a copy with its message, which shares the program, and the
// row it came from keeps its own message.
func TestExplainLeavesTheRowsAlone(t *testing.T) {
	d := waiting("d", 100, 1)
	d.Env = map[string]string{"K": "v"}
	ds := explainWaiting([]*model.Driver{d}, []*model.Worker{alive("w1", 4, 4096)}, nil)
	if d.Message != "" || ds[0] == d || ds[0].Message == "" || ds[0].Env["K"] != "v" {
		t.Fatalf("explaining a waiting driver: row message %q, answer %+v", d.Message, ds[0])
	}
	a := &model.App{ID: "app-20261129120000-0000", ExecutorSpec: model.ExecutorSpec{CoresPerExecutor: 100, MemoryPerExecutorMB: 1, ExecutorLimit: -1}, State: model.AppWaiting}
	s := explainApp(api.AppStatus{App: a}, []*model.Worker{alive("w1", 4, 4096)}, nil)
	if a.Message != "" || s.App == a || s.Message == "" {
		t.Fatalf("explaining a waiting app: row message %q, answer %+v", a.Message, s.App)
	}
}

func driverID(n int) string { return fmt.Sprintf("driver-20261129120000-%04d", n) }

func submitTo(n int, ns string, cores int, priority *int) *model.SubmitDriver {
	return &model.SubmitDriver{ID: driverID(n), DriverSpec: model.DriverSpec{Argv: []string{"x"}, Cores: cores, MemoryMB: 128, Namespace: ns, Priority: priority}, Time: 2}
}

func placeOn(w string, ns ...int) *model.PlaceDrivers {
	c := &model.PlaceDrivers{Time: 3}
	for _, n := range ns {
		c.Placements = append(c.Placements, model.Placement{DriverID: driverID(n), Attempt: 1, WorkerID: w})
	}
	return c
}

func namespaceOf(name string, weight, driverShare float64, q model.Quota) *model.ApplyNamespace {
	return &model.ApplyNamespace{Namespace: model.Namespace{Name: name, Weight: weight, DriverShare: driverShare, PriorityMax: 100, Quota: q}, Time: 1}
}

// reasonOf is the message a read gives waiting driver n of f's tables.
func reasonOf(t *testing.T, f *fsm.FSM, maxDrivers, n int) string {
	t.Helper()
	d, ok := f.State().Driver(driverID(n))
	if !ok {
		t.Fatalf("no driver %d", n)
	}
	ws := f.State().Workers()
	return explainWaiting([]*model.Driver{d}, ws, &tenants{st: f.State(), ws: ws, maxDrivers: maxDrivers})[0].Message
}

// heldByNamespace fails the test unless submit takes reason for its
// namespace's holding a driver back (api.HeldByNamespace).
func heldByNamespace(t *testing.T, reason string) {
	t.Helper()
	if !api.HeldByNamespace(&model.Driver{State: model.DriverSubmitted, Message: reason}) {
		t.Fatalf("submit does not know %q for its namespace's", reason)
	}
}

// A waiting driver's one reason, with figures, in order: its namespace's
// quota, its driver share, --max-running-drivers, no worker large enough,
// drivers of higher priority ahead, others' fair share; and the reasons
// of before for a cluster without namespaces.
func TestExplainNamespaceReasons(t *testing.T) {
	worker := &model.RegisterWorker{ID: "w1", HTTPAddr: "h:1", Cores: 8, MemoryMB: 8192, Time: 1}
	p80 := 80
	t.Run("quota", func(t *testing.T) {
		f := appliedAll(t, worker, namespaceOf("etl", 1, 1, model.Quota{Cores: 4}),
			submitTo(0, "etl", 4, nil), submitTo(1, "etl", 1, nil), placeOn("w1", 0))
		if got, want := reasonOf(t, f, 0, 1), "namespace etl is at its cores quota (4 of 4)"; got != want {
			t.Fatalf("%q, want %q", got, want)
		}
		heldByNamespace(t, reasonOf(t, f, 0, 1))
	})
	t.Run("running drivers quota", func(t *testing.T) {
		f := appliedAll(t, worker, namespaceOf("etl", 1, 1, model.Quota{RunningDrivers: 1}),
			submitTo(0, "etl", 1, nil), submitTo(1, "etl", 1, nil), placeOn("w1", 0))
		if got, want := reasonOf(t, f, 0, 1), "namespace etl is at its running drivers quota (1 of 1)"; got != want {
			t.Fatalf("%q, want %q", got, want)
		}
		heldByNamespace(t, reasonOf(t, f, 0, 1))
	})
	t.Run("driver share", func(t *testing.T) {
		f := appliedAll(t, worker, namespaceOf("etl", 1, 0.5, model.Quota{Cores: 8}),
			submitTo(0, "etl", 2, nil), submitTo(1, "etl", 2, nil), submitTo(2, "etl", 1, nil), placeOn("w1", 0, 1))
		if got, want := reasonOf(t, f, 0, 2), "driver share of etl reached (4 of 4 cores)"; got != want {
			t.Fatalf("%q, want %q", got, want)
		}
		heldByNamespace(t, reasonOf(t, f, 0, 2))
	})
	t.Run("driver share with the apps' asks", func(t *testing.T) {
		var ds []model.Command
		for n := range 3 {
			d := submitTo(n, "etl", 1, nil)
			d.AppCores = 4
			ds = append(ds, d)
		}
		f := appliedAll(t, append([]model.Command{&model.RegisterWorker{ID: "w1", HTTPAddr: "h:1", Cores: 16, MemoryMB: 8192, Time: 1},
			namespaceOf("etl", 1, 0.5, model.Quota{Cores: 10})}, append(ds, placeOn("w1", 0, 1))...)...)
		if got, want := reasonOf(t, f, 0, 2), "driver share of etl reached: its work and its drivers' apps hold or ask 10 of 10 cores"; got != want {
			t.Fatalf("%q, want %q", got, want)
		}
		heldByNamespace(t, reasonOf(t, f, 0, 2))
	})
	t.Run("driver share of the fair share", func(t *testing.T) {
		f := appliedAll(t, worker, namespaceOf("default", 1, 0.5, model.Quota{}),
			submitTo(0, "", 2, nil), submitTo(1, "", 2, nil), submitTo(2, "", 1, nil), submitTo(3, "", 4, nil), placeOn("w1", 0, 1))
		if got, want := reasonOf(t, f, 0, 2), "driver share of default reached (4 of 4 cores)"; got != want {
			t.Fatalf("%q, want %q: half of its fair share, the whole cluster", got, want)
		}
	})
	t.Run("max running drivers", func(t *testing.T) {
		f := appliedAll(t, worker, submitTo(0, "", 1, nil), submitTo(1, "", 1, nil), submitTo(2, "", 1, nil), placeOn("w1", 0, 1))
		if got, want := reasonOf(t, f, 2, 2), "drivers are at --max-running-drivers (2)"; got != want {
			t.Fatalf("at the bound: %q, want %q", got, want)
		}
		if got := reasonOf(t, f, 3, 2); got != waitReasonQueued {
			t.Fatalf("below the bound: %q, want %q", got, waitReasonQueued)
		}
	})
	t.Run("unplaceable", func(t *testing.T) {
		f := appliedAll(t, worker, namespaceOf("etl", 1, 1, model.Quota{}), submitTo(0, "etl", 64, nil))
		if got := reasonOf(t, f, 0, 0); !strings.Contains(got, api.ReasonUnplaceable) {
			t.Fatalf("%q", got)
		}
	})
	t.Run("priority", func(t *testing.T) {
		f := appliedAll(t, worker, submitTo(0, "", 8, nil), submitTo(1, "", 1, nil), submitTo(2, "", 1, &p80), submitTo(3, "", 1, &p80),
			submitTo(4, "", 1, &p80), placeOn("w1", 0))
		if got, want := reasonOf(t, f, 0, 1), "priority: 3 drivers of priority 80 are ahead"; got != want {
			t.Fatalf("%q, want %q", got, want)
		}
		if got := reasonOf(t, f, 0, 2); got != waitReasonFree {
			t.Fatalf("a driver of the highest priority: %q, want %q", got, waitReasonFree)
		}
		f = appliedAll(t, worker, submitTo(0, "", 8, nil), submitTo(1, "", 1, nil), submitTo(2, "", 1, &p80), placeOn("w1", 0))
		if got, want := reasonOf(t, f, 0, 1), "priority: 1 driver of priority 80 is ahead"; got != want {
			t.Fatalf("one ahead: %q, want %q", got, want)
		}
	})
	t.Run("fair share", func(t *testing.T) {
		f := appliedAll(t, worker, namespaceOf("etl", 1, 1, model.Quota{}), namespaceOf("ml", 1, 1, model.Quota{}),
			submitTo(0, "etl", 6, nil), submitTo(1, "ml", 2, nil), submitTo(2, "etl", 4, nil), submitTo(3, "ml", 4, nil), placeOn("w1", 0, 1))
		if got, want := reasonOf(t, f, 0, 2), "fair share: etl holds 0.75 of the cluster, ml 0.25"; got != want {
			t.Fatalf("%q, want %q", got, want)
		}
		if got := reasonOf(t, f, 0, 3); got != waitReasonFree {
			t.Fatalf("the namespace below its share: %q, want %q", got, waitReasonFree)
		}
	})
	t.Run("no namespaces", func(t *testing.T) {
		f := appliedAll(t, worker, submitTo(0, "", 8, nil), submitTo(1, "", 1, nil), submitTo(2, "", 64, nil), placeOn("w1", 0))
		ws := f.State().Workers()
		for _, n := range []int{1, 2} {
			d, _ := f.State().Driver(driverID(n))
			if got, want := reasonOf(t, f, 0, n), explainWaiting([]*model.Driver{d}, ws, nil)[0].Message; got != want {
				t.Fatalf("driver %d: %q, want the reason of before, %q", n, got, want)
			}
		}
	})
}

// A waiting app's executors are held to its namespace's quota, which its
// reason names.
func TestExplainAppQuota(t *testing.T) {
	f := appliedAll(t, &model.RegisterWorker{ID: "w1", HTTPAddr: "h:1", Cores: 8, MemoryMB: 8192, Time: 1},
		namespaceOf("etl", 1, 1, model.Quota{MemoryMB: 512}), submitTo(0, "etl", 1, nil), placeOn("w1", 0),
		&model.RegisterApp{ID: "app-20261129120000-0000", DriverID: driverID(0), DriverAttempt: 1, Namespace: "etl", CoresPerExecutor: 1,
			MemoryPerExecutorMB: 512, ExecutorLimit: -1, Argv: []string{"e"}, Time: 4})
	a, es, _ := f.State().App("app-20261129120000-0000")
	ws := f.State().Workers()
	s := explainApp(api.AppStatus{App: a, Executors: es}, ws, &tenants{st: f.State(), ws: ws})
	if want := "namespace etl is at its memory quota (128 of 512 MiB)"; s.Message != want {
		t.Fatalf("%q, want %q", s.Message, want)
	}
}

// A waiting driver is explained against the tables of one index. Read
// unplaced, then placed by an entry before the namespaces' use is read,
// it would say that it waits for its own core; read again, it is placed
// and says nothing. Every try applying an entry, the reads stop at
// readTries.
func TestExplanationIsOfOneIndex(t *testing.T) {
	f := appliedAll(t, &model.RegisterWorker{ID: "w1", HTTPAddr: "h:1", Cores: 4, MemoryMB: 8192, Time: 1},
		namespaceOf("etl", 1, 1, model.Quota{Cores: 1}), submitTo(0, "etl", 1, nil))
	index := f.Index()
	placeBetweenReads := func(try int) func() (*model.Driver, error) {
		return func() (*model.Driver, error) {
			d, _ := f.State().Driver(driverID(0))
			if try == 1 {
				index++
				data, err := fsm.Encode(placeOn("w1", 0))
				if err != nil {
					t.Fatal(err)
				}
				if err, ok := f.ApplyCommand(index, data).(error); ok {
					t.Fatal(err)
				}
			}
			try++
			ws := f.State().Workers()
			return explainWaiting([]*model.Driver{d}, ws, newTenants(f.State(), ws, 0))[0], nil
		}
	}
	// One read alone, the entry applied in its midst.
	torn, _ := placeBetweenReads(1)()
	if !strings.Contains(torn.Message, "namespace etl is at its cores quota (1 of 1)") || torn.WorkerID != "" {
		t.Fatalf("the torn read: %q on %q; the test no longer tears it", torn.Message, torn.WorkerID)
	}

	f = appliedAll(t, &model.RegisterWorker{ID: "w1", HTTPAddr: "h:1", Cores: 4, MemoryMB: 8192, Time: 1},
		namespaceOf("etl", 1, 1, model.Quota{Cores: 1}), submitTo(0, "etl", 1, nil))
	index = f.Index()
	d, err := atOneIndex(f, placeBetweenReads(1))
	if err != nil || d.WorkerID != "w1" || d.Message != "" {
		t.Fatalf("read at one index: %+v, %v; want it placed on w1, no wait reason", d, err)
	}

	tries := 0
	_, _ = atOneIndex(f, func() (int, error) {
		tries++
		index++
		data, _ := fsm.Encode(namespaceOf("etl", 1, 1, model.Quota{Cores: 1 + tries}))
		f.ApplyCommand(index, data)
		return tries, nil
	})
	if tries != readTries {
		t.Fatalf("%d tries while every one applied an entry, want %d", tries, readTries)
	}
}
