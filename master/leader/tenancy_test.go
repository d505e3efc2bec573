package leader

import (
	"fmt"
	"testing"

	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/master/fairshare"
	"github.com/drover-project/drover/model"
)

// nspace is a namespace of weight w and driver share 1 unless changed.
func nspace(name string, w float64, q model.Quota) *model.Namespace {
	return &model.Namespace{Name: name, Weight: w, DriverShare: 1, PriorityMax: model.MaxPriority, Quota: q}
}

// tenancyOf is a tenancy of the namespaces with the given uses and fair
// shares.
func tenancyOf(uses map[string]fsm.NamespaceUse, fair map[string]float64, nss ...*model.Namespace) *tenancy {
	t := &tenancy{settings: map[string]*model.Namespace{}, uses: uses}
	for _, n := range nss {
		t.settings[n.Name] = n
	}
	shares := map[string]fairshare.Share{}
	for k, f := range fair {
		shares[k] = fairshare.Share{Namespace: k, Fair: f}
	}
	t.fair = func() map[string]fairshare.Share { return shares }
	return t
}

func nsDemand(id, ns string, cores int, priority int) fsm.Demand {
	return fsm.Demand{DriverID: id, Attempt: 1, Cores: cores, MemoryMB: 128, Namespace: ns, Priority: priority}
}

// Two namespaces of weights 1 and 3 that both flood a cluster settle at
// 1:3 of its cores: the plan fills an empty cluster so, and as running
// drivers end (the oldest first, whatever their namespace), what frees
// goes back by the same order. Queue order alone interleaves the
// submissions and gives each half.
func TestPlanSettlesFloodingNamespacesByWeight(t *testing.T) {
	ws := []*model.Worker{worker("w1", 16, 1<<20, model.WorkerAlive), worker("w2", 16, 1<<20, model.WorkerAlive)}
	var queue []fsm.Demand
	for i := range 400 {
		ns := []string{"light", "heavy"}[i%2]
		queue = append(queue, nsDemand(fmt.Sprintf("%s-%03d", ns, i), ns, 1, 50))
	}
	type run struct{ id, ns, worker string }
	var running []run
	uses := map[string]fsm.NamespaceUse{}
	byID := map[string]*model.Worker{"w1": ws[0], "w2": ws[1]}
	for round := range 40 {
		ten := tenancyOf(uses, nil, nspace("light", 1, model.Quota{}), nspace("heavy", 3, model.Quota{}))
		placed := map[string]bool{}
		for _, p := range plan(queue, ws, ten) {
			placed[p.DriverID] = true
			ns := "light"
			if p.DriverID[0] == 'h' {
				ns = "heavy"
			}
			running = append(running, run{p.DriverID, ns, p.WorkerID})
			u := uses[ns]
			u.Cores++
			u.MemoryMB += 128
			u.DriverCores++
			u.DriverMemoryMB += 128
			u.RunningDrivers++
			uses[ns] = u
		}
		var left []fsm.Demand
		for _, d := range queue {
			if !placed[d.DriverID] {
				left = append(left, d)
			}
		}
		queue = left
		if uses["light"].Cores+uses["heavy"].Cores != 32 {
			t.Fatalf("round %d: %d cores held of 32 with work waiting", round, uses["light"].Cores+uses["heavy"].Cores)
		}
		if uses["light"].Cores != 8 || uses["heavy"].Cores != 24 {
			t.Fatalf("round %d: light holds %d cores, heavy %d; want 8 and 24 (1:3)", round, uses["light"].Cores, uses["heavy"].Cores)
		}
		// The four oldest running drivers end.
		for _, r := range running[:4] {
			byID[r.worker].CoresUsed--
			byID[r.worker].MemoryUsedMB -= 128
			u := uses[r.ns]
			u.Cores--
			u.MemoryMB -= 128
			u.DriverCores--
			u.DriverMemoryMB -= 128
			u.RunningDrivers--
			uses[r.ns] = u
		}
		running = running[4:]
	}
}

// A plan never proposes a placement past a namespace's quota, of cores,
// memory, a resource or running drivers, counting what it books itself;
// a driver too large for what is left waits and a smaller one behind it
// is placed; Apply takes every placement the plan proposes.
func TestPlanKeepsWithinQuotas(t *testing.T) {
	f := fsm.New()
	i := uint64(0)
	apply := func(c model.Command) any {
		t.Helper()
		i++
		data, err := fsm.Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		return f.ApplyCommand(i, data)
	}
	for _, w := range []string{"w1", "w2"} {
		apply(&model.RegisterWorker{ID: w, HTTPAddr: w + ":1", Cores: 16, MemoryMB: 16384, Time: 1})
	}
	q := nspace("etl", 1, model.Quota{Cores: 5, MemoryMB: 3000, RunningDrivers: 3})
	apply(&model.ApplyNamespace{Namespace: *q, Time: 2})
	apply(&model.ApplyNamespace{Namespace: *nspace("ml", 1, model.Quota{RunningDrivers: 2}), Time: 2})
	submit := func(id, ns string, cores int, mem int64) {
		if err, ok := apply(&model.SubmitDriver{ID: id, DriverSpec: model.DriverSpec{Argv: []string{"x"}, Cores: cores, MemoryMB: mem, Namespace: ns}, Time: 3}).(error); ok {
			t.Fatal(err)
		}
	}
	submit("driver-20261129120000-0000", "etl", 1, 1000)
	submit("driver-20261129120000-0001", "etl", 1, 1000)
	submit("driver-20261129120000-0002", "etl", 4, 100)  // 6 cores: past 5
	submit("driver-20261129120000-0003", "etl", 1, 1500) // 3500 MiB: past 3000
	submit("driver-20261129120000-0004", "etl", 1, 500)  // the third driver: at the bound
	submit("driver-20261129120000-0005", "etl", 1, 1)    // a fourth: past it
	for n := range 4 {
		submit(fmt.Sprintf("driver-20261129120000-01%02d", n), "ml", 1, 1)
	}
	st := f.State()
	ps := plan(st.WaitingDemands(), st.Workers(), readTenancy(st, 0))
	got := map[string]bool{}
	for _, p := range ps {
		got[p.DriverID] = true
	}
	want := []string{"driver-20261129120000-0000", "driver-20261129120000-0001", "driver-20261129120000-0004",
		"driver-20261129120000-0100", "driver-20261129120000-0101"}
	if len(ps) != len(want) {
		t.Fatalf("placements %+v, want %v", ps, want)
	}
	for _, id := range want {
		if !got[id] {
			t.Fatalf("placements %+v, want %v", ps, want)
		}
	}
	res, ok := apply(&model.PlaceDrivers{Placements: ps, Time: 4}).(fsm.PlaceResult)
	if !ok || len(res.Applied) != len(ps) {
		t.Fatalf("Apply took %+v of %d placements: the plan proposed one past a quota", res, len(ps))
	}
	if u := st.NamespaceUse("etl"); u.Cores != 3 || u.MemoryMB != 2500 || u.RunningDrivers != 3 {
		t.Fatalf("etl holds %+v", u)
	}
	if ps := plan(st.WaitingDemands(), st.Workers(), readTenancy(st, 0)); len(ps) != 0 {
		t.Fatalf("placements %+v with both namespaces at their quotas", ps)
	}
}

// Inside a namespace the highest priority goes first, then queue order;
// another namespace's priorities do not count.
func TestPlanPlacesByPriorityWithinANamespace(t *testing.T) {
	ws := []*model.Worker{worker("w1", 3, 4096, model.WorkerAlive)}
	ps := plan([]fsm.Demand{nsDemand("low", "a", 1, 10), nsDemand("mid-1", "a", 1, 50), nsDemand("high", "a", 1, 80), nsDemand("mid-2", "a", 1, 50)},
		ws, tenancyOf(nil, nil, nspace("a", 1, model.Quota{})))
	var got []string
	for _, p := range ps {
		got = append(got, p.DriverID)
	}
	if fmt.Sprint(got) != "[high mid-1 mid-2]" {
		t.Fatalf("placed %v, want high, then mid-1 and mid-2 in queue order, low waiting", got)
	}
}

// A head that cannot be placed (fits no worker, or its namespace is at
// its quota) blocks neither the work behind it nor another namespace.
func TestPlanHeadOfLineBlocksNothing(t *testing.T) {
	ws := []*model.Worker{worker("w1", 8, 8192, model.WorkerAlive)}
	uses := map[string]fsm.NamespaceUse{"full": {Cores: 2, MemoryMB: 256, RunningDrivers: 2, DriverCores: 2, DriverMemoryMB: 256}}
	ten := tenancyOf(uses, nil, nspace("a", 1, model.Quota{}), nspace("full", 1, model.Quota{Cores: 2}), nspace("b", 1, model.Quota{}))
	ps := plan([]fsm.Demand{
		nsDemand("huge", "a", 64, 90), nsDemand("capped", "full", 1, 90), nsDemand("a-small", "a", 1, 10), nsDemand("b-small", "b", 1, 10),
	}, ws, ten)
	got := map[string]bool{}
	for _, p := range ps {
		got[p.DriverID] = true
	}
	if len(ps) != 2 || !got["a-small"] || !got["b-small"] {
		t.Fatalf("placements %+v: want a-small behind huge and b-small beside the capped namespace", ps)
	}
}

// A namespace whose driver share is below 1 keeps its drivers within that
// part of its quota, or of its fair share without one, leaving the rest
// to executors; its first driver is placed whatever the share.
func TestPlanHoldsDriversToTheirShare(t *testing.T) {
	ws := func() []*model.Worker { return []*model.Worker{worker("w1", 16, 16384, model.WorkerAlive)} }
	var ds []fsm.Demand
	for i := range 10 {
		ds = append(ds, nsDemand(fmt.Sprintf("d%d", i), "etl", 1, 50))
	}
	q := nspace("etl", 1, model.Quota{Cores: 8})
	q.DriverShare = 0.5
	held := fsm.NamespaceUse{Cores: 3, MemoryMB: 384, DriverCores: 3, DriverMemoryMB: 384, RunningDrivers: 3}
	if ps := plan(ds, ws(), tenancyOf(map[string]fsm.NamespaceUse{"etl": held}, nil, q)); len(ps) != 1 {
		t.Fatalf("%d placements: half of an 8-core quota holds 4 drivers of 1 core, 3 run", len(ps))
	}
	held.Cores, held.DriverCores, held.RunningDrivers = 4, 4, 4
	ten := tenancyOf(map[string]fsm.NamespaceUse{"etl": held}, nil, q)
	if ps := plan(ds, ws(), ten); len(ps) != 0 {
		t.Fatalf("placements %+v with the drivers at their share", ps)
	}
	// Its executors still get the rest of the quota.
	a := app("app-20261129120000-0000", 0, 1, 128, -1)
	a.Namespace = "etl"
	if ps := planExecutors([]*model.App{a}, [][]*model.Executor{nil}, ws(), true, 0, ten); len(ps) != 4 {
		t.Fatalf("%d executors placed, want the 4 cores of the quota the drivers leave", len(ps))
	}
	// Without a quota, the share is of the fair share: half of 0.5 of
	// 16 cores.
	noQuota := nspace("etl", 1, model.Quota{})
	noQuota.DriverShare = 0.5
	held.Cores, held.DriverCores, held.RunningDrivers = 2, 2, 2
	if ps := plan(ds, ws(), tenancyOf(map[string]fsm.NamespaceUse{"etl": held}, map[string]float64{"etl": 0.5}, noQuota)); len(ps) != 2 {
		t.Fatalf("%d placements, want 2: the drivers' share is 4 cores, 2 held", len(ps))
	}
	// A share smaller than one driver still lets the first run.
	noQuota.DriverShare = 0.01
	if ps := plan(ds, ws(), tenancyOf(nil, map[string]float64{"etl": 0.5}, noQuota)); len(ps) != 1 {
		t.Fatalf("%d placements, want the namespace's first driver only", len(ps))
	}
}

// --max-running-drivers holds placed drivers at its bound, cluster-wide:
// below it the plan places up to it, at and past it nothing.
func TestPlanStopsAtMaxRunningDrivers(t *testing.T) {
	ws := func() []*model.Worker { return []*model.Worker{worker("w1", 64, 1<<20, model.WorkerAlive)} }
	var ds []fsm.Demand
	for i := range 10 {
		ds = append(ds, nsDemand(fmt.Sprintf("d%d", i), []string{"a", "b"}[i%2], 1, 50))
	}
	for _, tc := range []struct{ running, want int }{{0, 5}, {4, 1}, {5, 0}, {6, 0}} {
		ten := tenancyOf(map[string]fsm.NamespaceUse{"a": {RunningDrivers: tc.running}}, nil, nspace("a", 1, model.Quota{}), nspace("b", 1, model.Quota{}))
		ten.maxDrivers = 5
		if ps := plan(ds, ws(), ten); len(ps) != tc.want {
			t.Errorf("%d running of at most 5: %d placed, want %d", tc.running, len(ps), tc.want)
		}
	}
}

// Executors are served across namespaces by weighted DRF, FIFO within
// one, and stop at their namespace's quota.
func TestPlanExecutorsSharesByWeightAndQuota(t *testing.T) {
	ws := func() []*model.Worker {
		return []*model.Worker{worker("w1", 8, 1<<20, model.WorkerAlive), worker("w2", 8, 1<<20, model.WorkerAlive)}
	}
	mk := func(id, ns string) *model.App {
		a := app(id, 0, 1, 128, -1)
		a.Namespace = ns
		return a
	}
	apps := []*model.App{mk("app-20261129120000-0000", "light"), mk("app-20261129120000-0001", "heavy"), mk("app-20261129120000-0002", "heavy")}
	ten := tenancyOf(nil, nil, nspace("light", 1, model.Quota{}), nspace("heavy", 3, model.Quota{}))
	ps := planExecutors(apps, make([][]*model.Executor, 3), ws(), true, 0, ten)
	per := map[string]int{}
	for _, p := range ps {
		per[p.AppID]++
	}
	if per[apps[0].ID] != 4 || per[apps[1].ID] != 12 || per[apps[2].ID] != 0 {
		t.Fatalf("executors per app %v: want light's app 4 cores, heavy's first app 12, its second none (FIFO)", per)
	}
	ten = tenancyOf(map[string]fsm.NamespaceUse{"light": {Cores: 1}}, nil, nspace("light", 1, model.Quota{Cores: 3}), nspace("heavy", 3, model.Quota{}))
	ps = planExecutors(apps[:1], [][]*model.Executor{nil}, ws(), true, 0, ten)
	if len(ps) != 2 {
		t.Fatalf("%d executors placed, want 2: the 3-core quota holds 1 core already", len(ps))
	}
}

// BenchmarkPlan plans 100,000 waiting drivers of one core on 1,000
// workers of 16 cores (16,000 placements, a full batch's worth), the
// drivers in one namespace that bounds nothing as before namespaces, or
// spread over 1,000 namespaces of weight 1 to 4 with a driver share of
// 0.5 and no quota (so the fair shares are computed too); ns/op is one
// plan, and placements/s the rate inside it.
func BenchmarkPlan(b *testing.B) {
	for _, nss := range []int{1, 1000} {
		b.Run(fmt.Sprintf("namespaces=%d", nss), func(b *testing.B) {
			ds := make([]fsm.Demand, 100_000)
			for i := range ds {
				ds[i] = fsm.Demand{DriverID: fmt.Sprintf("driver-20261129120000-%05d", i), Attempt: 1, Cores: 1, MemoryMB: 512,
					Namespace: fmt.Sprintf("ns-%04d", i%nss), Priority: 50}
			}
			var settings []*model.Namespace
			fair := map[string]float64{}
			for i := range nss {
				n := nspace(fmt.Sprintf("ns-%04d", i), float64(1+i%4), model.Quota{})
				n.DriverShare = 0.5
				settings = append(settings, n)
				fair[n.Name] = 1 / float64(nss)
			}
			var placed int
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				ws := make([]*model.Worker, 1000)
				for i := range ws {
					ws[i] = worker(fmt.Sprintf("w%04d", i), 16, 1<<20, model.WorkerAlive)
				}
				var ten *tenancy
				if nss > 1 {
					ten = tenancyOf(map[string]fsm.NamespaceUse{}, fair, settings...)
				}
				b.StartTimer()
				placed += len(plan(ds, ws, ten))
			}
			b.ReportMetric(float64(placed)/b.Elapsed().Seconds(), "placements/s")
		})
	}
}

// A driver that says what its app will ask for (AppCores) is placed only
// while its namespace has room, within its quota, for it and its app
// beside what its work holds and its placed drivers' apps still ask: of a
// 10-core quota at driver share 0.5, drivers of 1 core whose apps ask 4
// run two at a time, the third waits though the drivers hold only 2 of
// their 5 cores, and the two apps' executors get the other 8 cores.
func TestPlanKeepsRoomForTheAppsDriversAskFor(t *testing.T) {
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
			t.Fatal(err)
		}
	}
	apply(&model.RegisterWorker{ID: "w1", HTTPAddr: "w1:1", Cores: 16, MemoryMB: 16384, Time: 1})
	q := nspace("etl", 1, model.Quota{Cores: 10})
	q.DriverShare = 0.5
	apply(&model.ApplyNamespace{Namespace: *q, Time: 2})
	for n := range 3 {
		apply(&model.SubmitDriver{ID: fmt.Sprintf("driver-20261129120000-%04d", n),
			DriverSpec: model.DriverSpec{Argv: []string{"x"}, Cores: 1, MemoryMB: 128, Namespace: "etl", AppCores: 4}, Time: 3})
	}
	st := f.State()
	ps := plan(st.WaitingDemands(), st.Workers(), readTenancy(st, 0))
	if len(ps) != 2 || ps[0].DriverID != "driver-20261129120000-0000" || ps[1].DriverID != "driver-20261129120000-0001" {
		t.Fatalf("placements %+v, want the first two drivers: each with its app holds 5 of the 10 cores", ps)
	}
	apply(&model.PlaceDrivers{Placements: ps, Time: 4})
	if u := st.NamespaceUse("etl"); u.Cores != 2 || u.AppCoresAsked != 8 {
		t.Fatalf("use %+v, want 2 cores held and 8 asked", u)
	}
	if ps := plan(st.WaitingDemands(), st.Workers(), readTenancy(st, 0)); len(ps) != 0 {
		t.Fatalf("placements %+v: the third driver's app would find no room", ps)
	}
	for n, p := range ps {
		apply(&model.RegisterApp{ID: fmt.Sprintf("app-20261129120000-%04d", n), Token: fmt.Sprint(n), DriverID: p.DriverID, DriverAttempt: 1,
			MaxCores: 4, CoresPerExecutor: 1, MemoryPerExecutorMB: 128, ExecutorLimit: -1, Argv: []string{"x"}, Time: 5})
	}
	apps, execs := st.LiveApps()
	es := planExecutors(apps, execs, st.Workers(), true, 6, readTenancy(st, 0))
	if len(es) != 8 {
		t.Fatalf("%d executors placed, want the 8 cores the apps asked for", len(es))
	}
	apply(&model.PlaceExecutors{Placements: es, Time: 6})
	if u := st.NamespaceUse("etl"); u.Cores != 10 || u.AppCoresAsked != 0 {
		t.Fatalf("use %+v, want the quota's 10 cores held and nothing asked", u)
	}
	if ps := plan(st.WaitingDemands(), st.Workers(), readTenancy(st, 0)); len(ps) != 0 {
		t.Fatalf("placements %+v past the quota", ps)
	}
}

// A core freed while a namespace below its fair share waits for
// executors goes to that namespace's app, not to a waiting driver of a
// namespace above its share: the drivers of a wait one pass, and b's
// executor is placed. Once b waits for nothing, a's drivers are placed
// again.
func TestPlanFreedCoreGoesToTheStarvedNamespacesExecutor(t *testing.T) {
	f := fsm.New()
	var idx uint64
	term := preemptTerm(f, &idx)
	must := mustApply(t, term)
	must(&model.RegisterWorker{ID: "w1", HTTPAddr: "w1:1", Cores: 4, MemoryMB: 4096, Time: 1})
	must(&model.RegisterWorker{ID: "w2", HTTPAddr: "w2:1", Cores: 1, MemoryMB: 4096, Time: 1})
	must(&model.ApplyNamespace{Namespace: *nspace("a", 1, model.Quota{}), Time: 2})
	must(&model.ApplyNamespace{Namespace: *nspace("b", 1, model.Quota{}), Time: 2})
	for i := range 7 {
		id := fmt.Sprintf("driver-20261129120000-%04d", i)
		must(&model.SubmitDriver{ID: id, Token: id, DriverSpec: model.DriverSpec{Argv: []string{"x"}, Cores: 1, MemoryMB: 1, Namespace: "a"}, Time: int64(3 + i)})
		if i < 4 {
			must(&model.PlaceDrivers{Placements: []model.Placement{{DriverID: id, Attempt: 1, WorkerID: "w1"}}, Time: int64(20 + i)})
		}
	}
	// b's app (its driver runs elsewhere) wants two executors; w2's
	// core is its first one's.
	must(&model.RegisterApp{ID: "app-20261129120000-0000", Token: "t", CoresPerExecutor: 1, MemoryPerExecutorMB: 1, ExecutorLimit: 2,
		Argv: []string{"e"}, Namespace: "b", Time: 30})
	must(&model.PlaceExecutors{Placements: []model.ExecutorPlacement{{AppID: "app-20261129120000-0000", ExecutorID: 0, WorkerID: "w2"}}, Time: 31})
	zero := 0
	// One of a's drivers ends (as at a preemption's deadline): one core
	// of w1 is free, a holds 3 of 5 cores and b 1, each with a fair
	// share of a half.
	must(&model.ReportAttempts{WorkerID: "w1", Time: 40, Reports: []model.AttemptReport{{DriverID: "driver-20261129120000-0003", Attempt: 1, State: model.DriverFinished, ExitCode: &zero}}})
	st := f.State()
	cfg := Config{SpreadOutApps: true}
	if ps := planDrivers(st, cfg, 50); len(ps) != 0 {
		t.Fatalf("a's drivers were placed %+v on the core freed while b, below its share, waits for executors", ps)
	}
	apps, execs := st.LiveApps()
	eps := planExecutors(apps, execs, st.Workers(), cfg.SpreadOutApps, 50, readTenancy(st, 0))
	if len(eps) != 1 || eps[0].WorkerID != "w1" {
		t.Fatalf("executor placements %+v, want b's one on w1", eps)
	}
	must(&model.PlaceExecutors{Placements: eps, Time: 51})
	// b's app wants no more: a core of a new worker goes to a's driver.
	must(&model.RegisterWorker{ID: "w3", HTTPAddr: "w3:1", Cores: 1, MemoryMB: 4096, Time: 52})
	if ps := planDrivers(st, cfg, 53); len(ps) != 1 || ps[0].DriverID != "driver-20261129120000-0004" {
		t.Fatalf("placements %+v, want a's next driver once b waits for nothing", ps)
	}
}
