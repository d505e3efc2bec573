package fsm

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/drover-project/drover/model"
)

// gpuWorker registers a worker of 8 cores offering gpus.
func (h *harness) gpuWorker(id string, gpus ...string) {
	h.t.Helper()
	h.ok(&model.RegisterWorker{ID: id, HTTPAddr: id + ":1", Cores: 8, MemoryMB: 8192,
		Resources: model.Resources{"gpu": gpus}, Time: h.tick()})
}

// gpuDriver submits driver seq asking for n gpus.
func (h *harness) gpuDriver(seq, n int, supervise bool) string {
	h.t.Helper()
	id := driverID(seq)
	h.ok(&model.SubmitDriver{ID: id, Token: fmt.Sprint("gpu-", seq), DriverSpec: model.DriverSpec{Argv: []string{"d"}, Cores: 1, MemoryMB: 256, Supervise: supervise, Resources: model.ResourceAmounts{"gpu": n}},
		Time: h.tick()})
	return id
}

// placeHolding places attempt of id on worker holding gpus, and reports
// whether it applied.
func (h *harness) placeHolding(id string, attempt int, worker string, gpus ...string) bool {
	h.t.Helper()
	p := model.Placement{DriverID: id, Attempt: attempt, WorkerID: worker}
	if gpus != nil {
		p.Resources = model.Resources{"gpu": gpus}
	}
	res := h.ok(&model.PlaceDrivers{Placements: []model.Placement{p}, Time: h.tick()}).(PlaceResult)
	return len(res.Applied) == 1
}

func (h *harness) wantHeld(worker, want string) {
	h.t.Helper()
	if got := h.workerRow(worker).ResourcesUsed.String(); got != want {
		h.t.Fatalf("worker %s holds %q, want %q", worker, got, want)
	}
	h.invariants()
}

// TestAddressesNeverHeldTwice: a placement must hold exactly the amounts
// asked, of addresses the worker offers and nothing holds; addresses come
// free when the attempt ends, is killed, or its worker is lost.
func TestAddressesNeverHeldTwice(t *testing.T) {
	h := newHarness(t)
	h.gpuWorker("w1", "0", "1")
	a, b, c := h.gpuDriver(0, 1, false), h.gpuDriver(1, 1, true), h.gpuDriver(2, 1, false)
	if !h.placeHolding(a, 1, "w1", "0") {
		t.Fatal("first placement refused")
	}
	for _, bad := range [][]string{nil, {"0"}, {"7"}, {"1", "1"}, {"1", "0"}} {
		before := hashOf(t, h.f)
		if h.placeHolding(b, 1, "w1", bad...) || hashOf(t, h.f) != before {
			t.Fatalf("placement holding %v applied or changed the tables", bad)
		}
	}
	// An address named twice in one batch goes to the first placement.
	res := h.ok(&model.PlaceDrivers{Time: h.tick(), Placements: []model.Placement{
		{DriverID: b, Attempt: 1, WorkerID: "w1", Resources: model.Resources{"gpu": {"1"}}},
		{DriverID: c, Attempt: 1, WorkerID: "w1", Resources: model.Resources{"gpu": {"1"}}},
	}}).(PlaceResult)
	if len(res.Applied) != 1 || res.Applied[0].DriverID != b {
		t.Fatalf("applied %+v, want only %s", res.Applied, b)
	}
	h.wantHeld("w1", "gpu=0,1")
	if d, _ := h.f.State().Driver(b); d.CurrentAttempt().Resources.String() != "gpu=1" {
		t.Fatalf("attempt record holds %v", d.CurrentAttempt().Resources)
	}

	h.driverReport("w1", a, 1, model.DriverFinished)
	h.wantHeld("w1", "gpu=1")
	if !h.placeHolding(c, 1, "w1", "0") {
		t.Fatal("the freed address was not placed again")
	}
	h.ok(&model.KillDriver{DriverID: c, Time: h.tick()})
	h.wantHeld("w1", "gpu=1")
	// The supervised driver relaunches when its worker is lost; its
	// address is free, and stays held by nothing while w1 is DEAD.
	h.ok(&model.WorkerLost{WorkerID: "w1", Time: h.tick()})
	h.wantHeld("w1", "")
	h.gpuWorker("w1", "0")
	if !h.placeHolding(b, 2, "w1", "0") {
		t.Fatal("relaunch not placed on the re-registered worker")
	}
	h.wantHeld("w1", "gpu=0")
}

// TestExecutorsHoldAddresses: an executor holds its app's per-executor
// amount while it lives.
func TestExecutorsHoldAddresses(t *testing.T) {
	h := newHarness(t)
	h.gpuWorker("w1", "a", "b", "c")
	spec := appSpec(0)
	spec.ResourcesPerExecutor = model.ResourceAmounts{"gpu": 2}
	app := h.register(spec)
	held := func(addrs ...string) model.ExecutorPlacement {
		p := ep(app, 0, "w1")
		p.Resources = model.Resources{"gpu": addrs}
		return p
	}
	h.skipPlace(ep(app, 0, "w1"))
	h.skipPlace(held("a"))
	h.mustPlace(held("c", "a"))
	h.wantHeld("w1", "gpu=a,c")
	p := held("b", "c")
	p.ExecutorID = 1
	h.skipPlace(p)
	h.report("w1", er(app, 0, model.ExecFailed))
	h.wantHeld("w1", "")
	if got := h.exec(app, 0).Resources.String(); got != "gpu=c,a" {
		t.Fatalf("the ended executor's row says it held %q", got)
	}
}

// TestRegisterWorkerRefusesBadOffers: a malformed offer changes nothing;
// a smaller offer keeps what is held.
func TestRegisterWorkerRefusesBadOffers(t *testing.T) {
	h := newHarness(t)
	for _, r := range []model.Resources{{"gpu": {}}, {"gpu": {"0", "0"}}, {"GPU": {"0"}}, {"gpu": {"a,b"}}} {
		h.refused(&model.RegisterWorker{ID: "w1", HTTPAddr: "w1:1", Cores: 1, MemoryMB: 1, Resources: r, Time: h.tick()}, model.ErrInvalidCommand)
	}
	h.gpuWorker("w1", "0", "1")
	id := h.gpuDriver(0, 1, false)
	h.placeHolding(id, 1, "w1", "1")
	h.gpuWorker("w1", "0")
	w := h.workerRow("w1")
	if w.Resources.String() != "gpu=0" || w.ResourcesUsed.String() != "gpu=1" || w.ResourcesFree().String() != "gpu=0" {
		t.Fatalf("after a smaller offer: offers %v holds %v free %v", w.Resources, w.ResourcesUsed, w.ResourcesFree())
	}
	h.invariants()
}

// TestSubmitDriverRefusesBadBounds: resources and restart bounds are
// checked in the log too, and a refusal takes no sequence number.
func TestSubmitDriverRefusesBadBounds(t *testing.T) {
	h := newHarness(t)
	for i, c := range []model.SubmitDriver{
		{DriverSpec: model.DriverSpec{Resources: model.ResourceAmounts{"gpu": 0}, Supervise: true}},
		{DriverSpec: model.DriverSpec{Resources: model.ResourceAmounts{"Gpu": 1}}},
		{DriverSpec: model.DriverSpec{MaxRestarts: 2}},
		{DriverSpec: model.DriverSpec{Supervise: true, MaxRestarts: -1}},
		{DriverSpec: model.DriverSpec{Supervise: true, MaxRestarts: 1, RestartWindowMS: 500}},
		{DriverSpec: model.DriverSpec{Supervise: true, RestartWindowMS: 5000}},
		{DriverSpec: model.DriverSpec{RescheduleAfter: 2}},
	} {
		c.ID, c.Token, c.Argv, c.Cores, c.MemoryMB, c.Time = driverID(i), fmt.Sprint("bad-", i), []string{"x"}, 1, 1, h.tick()
		h.refused(&c, model.ErrInvalidCommand)
	}
	if h.f.State().NextDriverSeq() != 0 {
		t.Fatalf("refused submissions took sequence numbers: next %d", h.f.State().NextDriverSeq())
	}
}

// TestRescheduleRelaunchesAwayFromWorker: a FAILED report that asks for a
// reschedule relaunches a supervised driver, keeps the failed runs and
// tells the scheduler to avoid the worker; the same report of an
// unsupervised driver ends it FAILED, as a FAILED report always did.
func TestRescheduleRelaunchesAwayFromWorker(t *testing.T) {
	h := newHarness(t)
	h.worker("w1", 4, 4096)
	h.worker("w2", 4, 4096)
	id := driverID(0)
	h.ok(&model.SubmitDriver{ID: id, Token: "s", DriverSpec: model.DriverSpec{Argv: []string{"d"}, Cores: 1, MemoryMB: 256, Supervise: true, MaxRestarts: 1, RescheduleAfter: 2},
		Time: h.tick()})
	h.placeDriver(id, 1, "w1")
	report := func(r model.AttemptReport) {
		h.ok(&model.ReportAttempts{WorkerID: "w1", Reports: []model.AttemptReport{r}, Time: h.tick()})
	}
	report(model.AttemptReport{DriverID: id, Attempt: 1, State: model.DriverRunning, Runs: 2, Failures: []int64{10}})
	// A late report with fewer failures does not shrink the record; one
	// with more than the bound keeps the newest.
	report(model.AttemptReport{DriverID: id, Attempt: 1, State: model.DriverRunning, Runs: 1})
	report(model.AttemptReport{DriverID: id, Attempt: 1, State: model.DriverFailed, ExitCode: intp(1), Runs: 3,
		Failures: []int64{10, 20, 30}, Reschedule: true, Reason: "2 runs failed in a row"})
	d, _ := h.f.State().Driver(id)
	if d.State != model.DriverRelaunching || d.Attempt != 2 || !d.Attempts[0].Rescheduled || !strings.Contains(d.Message, "rescheduled away from worker w1") {
		t.Fatalf("after a reschedule: %s attempt %d %q %+v", d.State, d.Attempt, d.Message, d.Attempts)
	}
	if !reflect.DeepEqual(d.Attempts[0].Failures, []int64{20, 30}) {
		t.Fatalf("failures %v, want the newest 2 (max restarts 1 + 1)", d.Attempts[0].Failures)
	}
	if ds := h.f.State().WaitingDemands(); len(ds) != 1 || ds[0].Avoid != "w1" {
		t.Fatalf("demands %+v, want the relaunch avoiding w1", ds)
	}
	h.invariants()

	plain := h.submitDriver(1, false, "w1")
	h.ok(&model.ReportAttempts{WorkerID: "w1", Time: h.tick(), Reports: []model.AttemptReport{
		{DriverID: plain, Attempt: 1, State: model.DriverFailed, ExitCode: intp(1), Runs: 1, Reschedule: true}}})
	if d, _ := h.f.State().Driver(plain); d.State != model.DriverFailed {
		t.Fatalf("unsupervised driver with a reschedule report: %s, want FAILED", d.State)
	}
}

// TestRestoreRefusesAddressHeldTwice: a snapshot that gives one address
// to two live attempts is refused, and the tables stay.
func TestRestoreRefusesAddressHeldTwice(t *testing.T) {
	h := newHarness(t)
	h.gpuWorker("w1", "0", "1")
	a, b := h.gpuDriver(0, 1, false), h.gpuDriver(1, 1, false)
	h.placeHolding(a, 1, "w1", "0")
	h.placeHolding(b, 1, "w1", "1")
	snap := snapshotOf(t, h.f)
	snap.Tables.Drivers[b].Attempts[0].Resources = model.Resources{"gpu": {"0"}}
	g := New()
	if err := restoreJSON(g, snap); err == nil || !strings.Contains(err.Error(), "held twice") {
		t.Fatalf("restore: %v, want a refusal naming the address held twice", err)
	}
	if r := snapshotRestore(t, h.f); hashOf(t, r) != hashOf(t, h.f) {
		t.Fatal("a restored FSM differs")
	}
}

// A relaunch because the worker was lost is no failed run: the failures
// reported before stay counted, none is added, and no worker is avoided.
func TestWorkerLossIsNoFailedRun(t *testing.T) {
	h := newHarness(t)
	h.worker("w1", 4, 4096)
	id := driverID(0)
	h.ok(&model.SubmitDriver{ID: id, Token: "s", DriverSpec: model.DriverSpec{Argv: []string{"d"}, Cores: 1, MemoryMB: 256, Supervise: true, MaxRestarts: 2, RescheduleAfter: 2},
		Time: h.tick()})
	h.placeDriver(id, 1, "w1")
	h.ok(&model.ReportAttempts{WorkerID: "w1", Time: h.tick(), Reports: []model.AttemptReport{
		{DriverID: id, Attempt: 1, State: model.DriverRunning, Runs: 2, Failures: []int64{10}}}})
	h.ok(&model.WorkerLost{WorkerID: "w1", Time: h.tick()})
	d, _ := h.f.State().Driver(id)
	if d.State != model.DriverRelaunching || !reflect.DeepEqual(d.FailuresBefore(d.Attempt), []int64{10}) || d.Attempts[0].Rescheduled {
		t.Fatalf("after the loss: %s, failures %v, attempts %+v; want RELAUNCHING with the one failure reported", d.State, d.FailuresBefore(d.Attempt), d.Attempts)
	}
	if ds := h.f.State().WaitingDemands(); len(ds) != 1 || ds[0].Avoid != "" {
		t.Fatalf("demands %+v, want no worker avoided", ds)
	}
}
