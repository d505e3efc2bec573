package fsm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/drover-project/drover/model"
)

func appID(seq int) string { return fmt.Sprintf("app-20261129120000-%04d", seq) }

// harness applies commands one at a time, as a Raft log would, each at the
// next index and (through tick) the next millisecond.
type harness struct {
	t   *testing.T
	f   *FSM
	idx uint64
	now int64
}

func newHarness(t *testing.T) *harness { return &harness{t: t, f: New()} }

func (h *harness) tick() int64 { h.now++; return h.now }

func (h *harness) encode(payload model.Command) []byte {
	h.t.Helper()
	data, err := Encode(payload)
	if err != nil {
		h.t.Fatalf("encode %s: %v", payload.CommandType(), err)
	}
	return data
}

func (h *harness) applyRaw(data []byte) any {
	h.idx++
	return h.f.ApplyCommand(h.idx, data)
}

func (h *harness) apply(payload model.Command) any {
	h.t.Helper()
	return h.applyRaw(h.encode(payload))
}

// ok applies a command that must be accepted.
func (h *harness) ok(payload model.Command) any {
	h.t.Helper()
	res := h.apply(payload)
	if err, isErr := res.(error); isErr {
		h.t.Fatalf("%s %+v: %v", payload.CommandType(), payload, err)
	}
	return res
}

// refused applies a command that must fail with want and change nothing.
func (h *harness) refused(payload model.Command, want error) {
	h.t.Helper()
	before := hashOf(h.t, h.f)
	res := h.apply(payload)
	if err, _ := res.(error); !errors.Is(err, want) {
		h.t.Fatalf("%s %+v: got %v, want %v", payload.CommandType(), payload, res, want)
	}
	if hashOf(h.t, h.f) != before {
		h.t.Fatalf("refused %s %+v changed the tables", payload.CommandType(), payload)
	}
}

// unchanged applies a command that is accepted but must change nothing (a
// skipped placement, an ignored report).
func (h *harness) unchanged(payload model.Command) any {
	h.t.Helper()
	before := hashOf(h.t, h.f)
	res := h.ok(payload)
	if hashOf(h.t, h.f) != before {
		h.t.Fatalf("%s %+v changed the tables", payload.CommandType(), payload)
	}
	return res
}

func (h *harness) worker(id string, cores int, memMB int64) {
	h.t.Helper()
	h.ok(&model.RegisterWorker{ID: id, HTTPAddr: id + ":1", Cores: cores, MemoryMB: memMB, Time: h.tick()})
}

// appSpec is a valid registration of app seq: one core and 512 MiB per
// executor, no core cap, no executor limit, 10 retries.
func appSpec(seq int) *model.RegisterApp {
	return &model.RegisterApp{
		ID: appID(seq), Token: fmt.Sprint("app-token-", seq), Name: fmt.Sprint("app", seq),
		Argv: []string{"executor", "--flag"}, CoresPerExecutor: 1, MemoryPerExecutorMB: 512,
		ExecutorLimit: -1, MaxExecutorRetries: 10,
	}
}

func (h *harness) register(c *model.RegisterApp) string {
	h.t.Helper()
	c.Time = h.tick()
	res, _ := h.ok(c).(RegisterAppResult)
	if res.AppID != c.ID || res.Existing {
		h.t.Fatalf("register %s: got %+v", c.ID, res)
	}
	return c.ID
}

func ep(app string, id int, worker string) model.ExecutorPlacement {
	return model.ExecutorPlacement{AppID: app, ExecutorID: id, WorkerID: worker}
}

func (h *harness) place(ps ...model.ExecutorPlacement) []model.ExecutorPlacement {
	h.t.Helper()
	res, ok := h.ok(&model.PlaceExecutors{Placements: ps, Time: h.tick()}).(PlaceExecutorsResult)
	if !ok {
		h.t.Fatal("PlaceExecutors did not return a PlaceExecutorsResult")
	}
	return res.Applied
}

// mustPlace places executors and fails unless every placement applied.
func (h *harness) mustPlace(ps ...model.ExecutorPlacement) {
	h.t.Helper()
	if got := h.place(ps...); !reflect.DeepEqual(got, ps) {
		h.t.Fatalf("placed %+v, want all of %+v", got, ps)
	}
}

// skipPlace places executors that must all be skipped, changing nothing.
func (h *harness) skipPlace(ps ...model.ExecutorPlacement) {
	h.t.Helper()
	before := hashOf(h.t, h.f)
	if got := h.place(ps...); len(got) != 0 {
		h.t.Fatalf("placed %+v, want none", got)
	}
	if hashOf(h.t, h.f) != before {
		h.t.Fatalf("skipped placements %+v changed the tables", ps)
	}
}

func er(app string, id int, state model.ExecutorState) model.ExecutorReport {
	r := model.ExecutorReport{AppID: app, ExecutorID: id, State: state}
	switch state {
	case model.ExecExited:
		r.ExitCode = intp(0)
	case model.ExecFailed:
		r.ExitCode = intp(1)
	}
	return r
}

func (h *harness) report(workerID string, rs ...model.ExecutorReport) {
	h.t.Helper()
	h.ok(&model.ReportAttempts{WorkerID: workerID, Executors: rs, Time: h.tick()})
}

// ignored sends executor reports that must change nothing.
func (h *harness) ignored(workerID string, rs ...model.ExecutorReport) {
	h.t.Helper()
	h.unchanged(&model.ReportAttempts{WorkerID: workerID, Executors: rs, Time: h.tick()})
}

func (h *harness) app(id string) (*model.App, []*model.Executor) {
	h.t.Helper()
	a, es, ok := h.f.State().App(id)
	if !ok {
		h.t.Fatalf("app %s is unknown", id)
	}
	return a, es
}

func (h *harness) exec(app string, id int) *model.Executor {
	h.t.Helper()
	_, es := h.app(app)
	for _, e := range es {
		if e.ID == id {
			return e
		}
	}
	h.t.Fatalf("app %s has no executor %d", app, id)
	return nil
}

func (h *harness) workerRow(id string) *model.Worker {
	h.t.Helper()
	w, ok := h.f.State().Worker(id)
	if !ok {
		h.t.Fatalf("worker %s is unknown", id)
	}
	return w
}

func (h *harness) wantUsed(workerID string, cores int, memMB int64) {
	h.t.Helper()
	if w := h.workerRow(workerID); w.CoresUsed != cores || w.MemoryUsedMB != memMB {
		h.t.Fatalf("worker %s uses %d cores %d MiB, want %d and %d", workerID, w.CoresUsed, w.MemoryUsedMB, cores, memMB)
	}
}

func (h *harness) wantExecState(app string, id int, want model.ExecutorState) {
	h.t.Helper()
	if e := h.exec(app, id); e.State != want {
		h.t.Fatalf("executor %s: %s, want %s", model.ExecutorKey(app, id), e.State, want)
	}
}

func (h *harness) wantAppState(app string, want model.ApplicationState) *model.App {
	h.t.Helper()
	a, _ := h.app(app)
	if a.State != want {
		h.t.Fatalf("app %s: %s (%q), want %s", app, a.State, a.Message, want)
	}
	return a
}

// submitDriver submits driver seq (one core, 256 MiB) and places attempt 1
// on workerID.
func (h *harness) submitDriver(seq int, supervise bool, workerID string) string {
	h.t.Helper()
	id := driverID(seq)
	h.ok(&model.SubmitDriver{ID: id, Token: fmt.Sprint("driver-token-", seq), DriverSpec: model.DriverSpec{Argv: []string{"driver"}, Cores: 1, MemoryMB: 256, Supervise: supervise},
		Time: h.tick()})
	if workerID != "" {
		h.placeDriver(id, 1, workerID)
	}
	return id
}

func (h *harness) placeDriver(id string, attempt int, workerID string) {
	h.t.Helper()
	res, _ := h.ok(&model.PlaceDrivers{Placements: []model.Placement{{DriverID: id, Attempt: attempt, WorkerID: workerID}}, Time: h.tick()}).(PlaceResult)
	if len(res.Applied) != 1 {
		h.t.Fatalf("placing %s attempt %d on %s did not apply", id, attempt, workerID)
	}
}

func (h *harness) driverReport(workerID, id string, attempt int, state model.DriverState) {
	h.t.Helper()
	r := model.AttemptReport{DriverID: id, Attempt: attempt, State: state, Runs: 1}
	switch state {
	case model.DriverFinished:
		r.ExitCode = intp(0)
	case model.DriverFailed:
		r.ExitCode = intp(1)
	}
	h.ok(&model.ReportAttempts{WorkerID: workerID, Reports: []model.AttemptReport{r}, Time: h.tick()})
}

func (h *harness) invariants() {
	h.t.Helper()
	checkInvariants(h.t, h.f)
	if a, b := hashOf(h.t, h.f), hashOf(h.t, snapshotRestore(h.t, h.f)); a != b {
		h.t.Fatal("snapshot/restore changed the tables")
	}
}

func TestRegisterApp(t *testing.T) {
	h := newHarness(t)
	c := appSpec(5)
	c.MaxCores, c.CoresPerExecutor, c.MemoryPerExecutorMB, c.ExecutorLimit, c.MaxExecutorRetries = 4, 2, 1024, 3, 7
	c.Env = map[string]string{"SPARK_HOME": "/opt/spark", "DROVER_OTHER": "ok"}
	h.register(c)
	a, es := h.app(appID(5))
	want := &model.App{
		ID: appID(5), Name: "app5", Token: "app-token-5", ExecutorSpec: model.ExecutorSpec{
			MaxCores:            4,
			CoresPerExecutor:    2,
			MemoryPerExecutorMB: 1024,
			ExecutorLimit:       3,
			Argv:                []string{"executor", "--flag"},
			Env:                 c.Env,
			MaxExecutorRetries:  7,
		},
		State: model.AppWaiting, SubmittedAt: c.Time, UpdatedAt: c.Time, ModifyIndex: h.f.Index(),
	}
	if !reflect.DeepEqual(a, want) || len(es) != 0 {
		t.Fatalf("registered app:\n got %+v %v\nwant %+v", a, es, want)
	}
	if id, ok := h.f.State().AppByToken("app-token-5"); !ok || id != appID(5) {
		t.Fatalf("AppByToken = %q %v", id, ok)
	}
	if h.f.State().NextAppSeq() != 6 {
		t.Fatalf("NextAppSeq = %d, want 6", h.f.State().NextAppSeq())
	}
	// Readers get the row itself, which no later entry changes: a copy
	// of it shares nothing the copy's owner could change.
	if b, _ := h.app(appID(5)); b != a {
		t.Fatal("two reads of an unchanged app got two copies of its row")
	}
	cp := a.Clone()
	cp.Argv[0], cp.Env["SPARK_HOME"] = "changed", "changed"
	if b, _ := h.app(appID(5)); b.Argv[0] != "executor" || b.Env["SPARK_HOME"] != "/opt/spark" {
		t.Fatal("changing a copy of App's row changed the table")
	}

	// A retried registration (same token, a fresh ID from a new leader)
	// yields the first app and changes nothing.
	retry := appSpec(6)
	retry.Token, retry.Name, retry.Time = "app-token-5", "other", h.tick()
	before := hashOf(t, h.f)
	if res := h.apply(retry); res != (RegisterAppResult{AppID: appID(5), Existing: true}) {
		t.Fatalf("retried token: got %+v", res)
	}
	if hashOf(t, h.f) != before {
		t.Fatal("a retried token changed the tables")
	}
	if _, _, ok := h.f.State().App(appID(6)); ok {
		t.Fatal("a retried token made a second app")
	}

	// A lower sequence number does not lower NextAppSeq; apps without a
	// token are not indexed.
	c2 := appSpec(2)
	c2.Token = ""
	h.register(c2)
	c3 := appSpec(3)
	c3.Token = ""
	h.register(c3)
	if h.f.State().NextAppSeq() != 6 {
		t.Fatalf("NextAppSeq = %d after registering seq 2 and 3, want 6", h.f.State().NextAppSeq())
	}
	if _, ok := h.f.State().AppByToken(""); ok {
		t.Fatal("the empty token is indexed")
	}
	apps, _ := h.f.State().Apps()
	var ids []string
	for _, a := range apps {
		ids = append(ids, a.ID)
	}
	if want := []string{appID(2), appID(3), appID(5)}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("Apps() = %v, want %v", ids, want)
	}
	h.invariants()
}

func TestRegisterAppIDForm(t *testing.T) {
	h := newHarness(t)
	for i, id := range []string{
		"", "app", "app-1", "app-20261129120000", "driver-20261129120000-0001", "App-20261129120000-0001",
		"app-2026112912000-0001", "app-202611291200000-0001", "app-2026112912000x-0001",
		"app-20261129120000-", "app-20261129120000-x", "app-20261129120000--1", "app-20261129120000-1-2",
	} {
		c := appSpec(0)
		c.ID, c.Token = id, fmt.Sprint("bad-", i)
		h.refused(c, model.ErrInvalidCommand)
	}
	c := appSpec(0)
	c.ID = "app-20261129120000-7"
	h.register(c)
	if h.f.State().NextAppSeq() != 8 {
		t.Fatalf("NextAppSeq = %d, want 8", h.f.State().NextAppSeq())
	}
	dup := appSpec(7)
	dup.Token = "another"
	h.register(dup) // app-20261129120000-0007 is a different ID from ...-7
	dup2 := appSpec(7)
	dup2.Token = "yet another"
	h.refused(dup2, model.ErrDuplicateID)
}

func TestRegisterAppRefusesInvalidSpecs(t *testing.T) {
	h := newHarness(t)
	h.worker("w1", 8, 8192)
	running := h.submitDriver(0, false, "w1")
	h.driverReport("w1", running, 1, model.DriverRunning)
	finished := h.submitDriver(1, false, "w1")
	h.driverReport("w1", finished, 1, model.DriverFinished)
	relaunched := h.submitDriver(2, true, "w1")
	h.driverReport("w1", relaunched, 1, model.DriverKilled) // supervised: attempt 2 waits
	unplaced := h.submitDriver(3, false, "")
	h.register(appSpec(0))

	cases := []struct {
		name string
		edit func(c *model.RegisterApp)
		want error
	}{
		{"no argv", func(c *model.RegisterApp) { c.Argv = nil }, model.ErrInvalidCommand},
		{"empty program", func(c *model.RegisterApp) { c.Argv = []string{""} }, model.ErrInvalidCommand},
		{"NUL in argument", func(c *model.RegisterApp) { c.Argv = []string{"x", "a\x00b"} }, model.ErrInvalidCommand},
		{"zero cores", func(c *model.RegisterApp) { c.CoresPerExecutor = 0 }, model.ErrInvalidCommand},
		{"negative cores", func(c *model.RegisterApp) { c.CoresPerExecutor = -1 }, model.ErrInvalidCommand},
		{"zero memory", func(c *model.RegisterApp) { c.MemoryPerExecutorMB = 0 }, model.ErrInvalidCommand},
		{"negative memory", func(c *model.RegisterApp) { c.MemoryPerExecutorMB = -512 }, model.ErrInvalidCommand},
		{"negative max cores", func(c *model.RegisterApp) { c.MaxCores = -1 }, model.ErrInvalidCommand},
		{"max cores below one executor", func(c *model.RegisterApp) { c.CoresPerExecutor, c.MaxCores = 2, 1 }, model.ErrInvalidCommand},
		{"limit below -1", func(c *model.RegisterApp) { c.ExecutorLimit = -2 }, model.ErrInvalidCommand},
		{"retries below -1", func(c *model.RegisterApp) { c.MaxExecutorRetries = -2 }, model.ErrInvalidCommand},
		{"bad env name", func(c *model.RegisterApp) { c.Env = map[string]string{"1A": "x"} }, model.ErrInvalidCommand},
		{"NUL in env value", func(c *model.RegisterApp) { c.Env = map[string]string{"A": "x\x00"} }, model.ErrInvalidCommand},
		{"unknown driver", func(c *model.RegisterApp) { c.DriverID, c.DriverAttempt = driverID(99), 1 }, model.ErrUnknownDriver},
		{"finished driver", func(c *model.RegisterApp) { c.DriverID, c.DriverAttempt = finished, 1 }, model.ErrDriverEnded},
		{"superseded attempt", func(c *model.RegisterApp) { c.DriverID, c.DriverAttempt = relaunched, 1 }, model.ErrStaleAttempt},
		{"unplaced attempt", func(c *model.RegisterApp) { c.DriverID, c.DriverAttempt = relaunched, 2 }, model.ErrStaleAttempt},
		{"never placed driver", func(c *model.RegisterApp) { c.DriverID, c.DriverAttempt = unplaced, 1 }, model.ErrStaleAttempt},
		{"future attempt", func(c *model.RegisterApp) { c.DriverID, c.DriverAttempt = running, 2 }, model.ErrStaleAttempt},
		{"no attempt", func(c *model.RegisterApp) { c.DriverID, c.DriverAttempt = running, 0 }, model.ErrInvalidCommand},
		{"attempt without driver", func(c *model.RegisterApp) { c.DriverAttempt = 1 }, model.ErrInvalidCommand},
		{"negative run", func(c *model.RegisterApp) { c.DriverID, c.DriverAttempt, c.DriverRun = running, 1, -1 }, model.ErrInvalidCommand},
		{"duplicate ID", func(c *model.RegisterApp) { c.ID = appID(0) }, model.ErrDuplicateID},
	}
	for _, name := range []string{"DROVER_APP_ID", "DROVER_EXECUTOR_ID", "DROVER_EXECUTOR_CORES", "DROVER_EXECUTOR_MEMORY_MB",
		"DROVER_DRIVER_ID", "DROVER_ATTEMPT", "DROVER_WORKER_ID", "DROVER_MASTERS"} {
		cases = append(cases, struct {
			name string
			edit func(c *model.RegisterApp)
			want error
		}{"reserved " + name, func(c *model.RegisterApp) { c.Env = map[string]string{"OK": "1", name: "x"} }, model.ErrInvalidCommand})
	}
	for i, tc := range cases {
		c := appSpec(100 + i)
		c.Token = fmt.Sprint("refused-", i)
		tc.edit(c)
		t.Run(tc.name, func(t *testing.T) {
			h.t = t
			h.refused(c, tc.want)
			if _, ok := h.f.State().AppByToken(c.Token); ok {
				t.Fatal("a refused registration indexed its token")
			}
		})
	}
	h.t = t
	if h.f.State().NextAppSeq() != 1 {
		t.Fatalf("NextAppSeq = %d, want 1: refused registrations take no number", h.f.State().NextAppSeq())
	}

	// The boundaries just inside each rule are accepted, so the refusals
	// above are the rules and not something else.
	accepted := []func(c *model.RegisterApp){
		func(c *model.RegisterApp) { c.CoresPerExecutor, c.MaxCores = 2, 2 },
		func(c *model.RegisterApp) { c.MaxCores = 0 },
		func(c *model.RegisterApp) { c.ExecutorLimit = -1 },
		func(c *model.RegisterApp) { c.ExecutorLimit = 0 },
		func(c *model.RegisterApp) { c.MaxExecutorRetries = -1 },
		func(c *model.RegisterApp) { c.MaxExecutorRetries = 0 },
		func(c *model.RegisterApp) { c.DriverID, c.DriverAttempt = running, 1 },
		func(c *model.RegisterApp) { c.Env = map[string]string{"DROVER_OTHER": "x", "_a1": "y"} },
	}
	for i, edit := range accepted {
		c := appSpec(200 + i)
		edit(c)
		h.register(c)
	}
	h.placeDriver(relaunched, 2, "w1")
	c := appSpec(300)
	c.DriverID, c.DriverAttempt = relaunched, 2
	h.register(c)
	if a, _ := h.app(appID(300)); a.DriverID != relaunched || a.DriverAttempt != 2 {
		t.Fatalf("app tied to %s attempt %d, want %s attempt 2", a.DriverID, a.DriverAttempt, relaunched)
	}
	h.invariants()
}

func TestPlaceExecutors(t *testing.T) {
	h := newHarness(t)
	h.worker("w1", 4, 4096)
	h.worker("w2", 4, 4096)
	a := h.register(appSpec(0))

	entry := h.encode(&model.PlaceExecutors{Placements: []model.ExecutorPlacement{ep(a, 0, "w1")}, Time: 50})
	if res := h.applyRaw(entry); !reflect.DeepEqual(res, PlaceExecutorsResult{Applied: []model.ExecutorPlacement{ep(a, 0, "w1")}}) {
		t.Fatalf("first placement: %+v", res)
	}
	want := &model.Executor{AppID: a, ID: 0, WorkerID: "w1", Cores: 1, MemoryMB: 512, State: model.ExecLaunching, LaunchedAt: 50, ModifyIndex: h.f.Index()}
	if e := h.exec(a, 0); !reflect.DeepEqual(e, want) {
		t.Fatalf("executor: got %+v, want %+v", e, want)
	}
	if row, _ := h.app(a); row.NextExecutorID != 1 || row.CoresGranted != 1 || row.UpdatedAt != 50 || row.State != model.AppWaiting {
		t.Fatalf("app after placement: %+v", row)
	}
	h.wantUsed("w1", 1, 512)

	// The same placement committed twice (a leader retrying) makes one
	// executor.
	before := hashOf(t, h.f)
	if res, _ := h.applyRaw(entry).(PlaceExecutorsResult); len(res.Applied) != 0 {
		t.Fatalf("second commit of the same placement applied: %+v", res)
	}
	if hashOf(t, h.f) != before {
		t.Fatal("second commit of the same placement changed the tables")
	}
	// An ID that is not NextExecutorID, behind or ahead, is skipped.
	h.skipPlace(ep(a, 0, "w2"), ep(a, 2, "w2"), ep(a, 5, "w1"), ep(a, -1, "w1"))

	// Several placements of one app in a batch take consecutive IDs; a
	// repeated one in the same batch is skipped.
	got := h.place(ep(a, 1, "w1"), ep(a, 2, "w2"), ep(a, 2, "w2"), ep(a, 4, "w2"), ep(a, 3, "w2"))
	if want := []model.ExecutorPlacement{ep(a, 1, "w1"), ep(a, 2, "w2"), ep(a, 3, "w2")}; !reflect.DeepEqual(got, want) {
		t.Fatalf("batch applied %+v, want %+v", got, want)
	}
	if row, es := h.app(a); row.NextExecutorID != 4 || row.CoresGranted != 4 || len(es) != 4 {
		t.Fatalf("after the batch: next %d, granted %d, %d executors", row.NextExecutorID, row.CoresGranted, len(es))
	}
	h.wantUsed("w1", 2, 1024)
	h.wantUsed("w2", 2, 1024)
	es, apps := h.f.State().ExecutorsOn("w2")
	if len(es) != 2 || es[0].ID != 2 || es[1].ID != 3 || apps[0].ID != a || apps[1].ID != a {
		t.Fatalf("ExecutorsOn(w2) = %+v", es)
	}
	h.invariants()
}

func TestPlaceExecutorsCapsCores(t *testing.T) {
	h := newHarness(t)
	h.worker("w1", 16, 16384)
	c := appSpec(0)
	c.MaxCores, c.CoresPerExecutor, c.MaxExecutorRetries = 5, 2, -1
	a := h.register(c)
	if got := h.place(ep(a, 0, "w1"), ep(a, 1, "w1"), ep(a, 2, "w1")); len(got) != 2 {
		t.Fatalf("applied %+v, want executors 0 and 1 only (5 cores, 2 each)", got)
	}
	row, _ := h.app(a)
	if row.CoresGranted != 4 || row.CoresLeft() != 1 || row.NextExecutorID != 2 {
		t.Fatalf("granted %d left %d next %d, want 4, 1, 2", row.CoresGranted, row.CoresLeft(), row.NextExecutorID)
	}
	h.skipPlace(ep(a, 2, "w1"))
	// An ended executor gives its cores back to the app.
	h.report("w1", er(a, 0, model.ExecFailed))
	h.mustPlace(ep(a, 2, "w1"))
	h.wantUsed("w1", 4, 1024)

	// MaxCores 0 is no cap.
	u := h.register(appSpec(1))
	h.mustPlace(ep(u, 0, "w1"), ep(u, 1, "w1"), ep(u, 2, "w1"), ep(u, 3, "w1"), ep(u, 4, "w1"), ep(u, 5, "w1"))
	if row, _ := h.app(u); row.CoresLeft() != -1 || row.CoresGranted != 6 {
		t.Fatalf("uncapped app: left %d granted %d", row.CoresLeft(), row.CoresGranted)
	}
	h.invariants()
}

func TestPlaceExecutorsRespectsLimit(t *testing.T) {
	h := newHarness(t)
	h.worker("w1", 16, 16384)
	c := appSpec(0)
	c.ExecutorLimit, c.MaxExecutorRetries = 0, -1
	a := h.register(c)
	h.skipPlace(ep(a, 0, "w1"))
	h.ok(&model.RequestExecutors{AppID: a, Total: 2, Time: h.tick()})
	if got := h.place(ep(a, 0, "w1"), ep(a, 1, "w1"), ep(a, 2, "w1")); len(got) != 2 {
		t.Fatalf("limit 2: applied %+v", got)
	}
	h.skipPlace(ep(a, 2, "w1"))
	// The limit counts live executors, not all ever placed.
	h.report("w1", er(a, 1, model.ExecFailed))
	h.mustPlace(ep(a, 2, "w1"))
	h.skipPlace(ep(a, 3, "w1"))
	h.invariants()
}

func TestPlaceExecutorsChecksWorkersAndApps(t *testing.T) {
	h := newHarness(t)
	h.worker("w1", 4, 4096)
	h.worker("w2", 4, 4096)
	h.worker("small", 1, 4096)
	h.worker("lowmem", 4, 256)
	h.worker("busy", 2, 4096)
	h.worker("dead", 4, 4096)
	h.worker("decom", 4, 4096)
	h.ok(&model.WorkerLost{WorkerID: "dead", Time: h.tick()})
	h.ok(&model.DecommissionWorker{WorkerID: "decom", Time: h.tick()})
	h.submitDriver(0, false, "busy") // one of its two cores
	spec := func(seq int) *model.RegisterApp {
		c := appSpec(seq)
		c.CoresPerExecutor = 2
		return c
	}
	a := h.register(spec(0))
	b := h.register(spec(1))
	ended := h.register(spec(2))
	h.ok(&model.EndApp{AppID: ended, State: model.AppKilled, Time: h.tick()})

	got := h.place(
		ep(a, 0, "ghost"), ep(a, 0, "dead"), ep(a, 0, "decom"), ep(a, 0, "small"), ep(a, 0, "lowmem"), ep(a, 0, "busy"),
		ep(appID(99), 0, "w1"), ep(ended, 0, "w1"),
		ep(a, 0, "w1"),
		ep(b, 0, "w2"), ep(b, 1, "w2"), ep(b, 2, "w2"), // the third does not fit beside the first two
	)
	if want := []model.ExecutorPlacement{ep(a, 0, "w1"), ep(b, 0, "w2"), ep(b, 1, "w2")}; !reflect.DeepEqual(got, want) {
		t.Fatalf("applied %+v, want %+v", got, want)
	}
	for _, w := range []string{"small", "lowmem", "dead", "decom"} {
		h.wantUsed(w, 0, 0)
	}
	h.wantUsed("busy", 1, 256)
	h.wantUsed("w1", 2, 512)
	h.wantUsed("w2", 4, 1024)
	if row, es := h.app(ended); row.NextExecutorID != 0 || len(es) != 0 {
		t.Fatalf("finished app got executors: %+v", es)
	}
	if _, _, ok := h.f.State().App(appID(99)); ok {
		t.Fatal("a placement made an unknown app")
	}
	h.invariants()
}

func TestExecutorReports(t *testing.T) {
	h := newHarness(t)
	h.worker("w1", 8, 8192)
	h.worker("w2", 8, 8192)
	a := h.register(appSpec(0))
	h.mustPlace(ep(a, 0, "w1"), ep(a, 1, "w1"), ep(a, 2, "w2"))

	// Reports from a worker the executor is not on, or about executors
	// that do not exist, are ignored.
	h.ignored("w2", er(a, 0, model.ExecRunning), er(a, 1, model.ExecFailed))
	h.ignored("w1", er(a, 9, model.ExecRunning), er(appID(9), 0, model.ExecRunning))

	h.report("w1", er(a, 0, model.ExecRunning))
	at := h.now
	if e := h.exec(a, 0); e.State != model.ExecRunning || e.StartedAt != at {
		t.Fatalf("executor 0 after RUNNING: %+v", e)
	}
	h.wantAppState(a, model.AppRunning)
	h.ignored("w1", er(a, 0, model.ExecRunning)) // a repeated RUNNING changes nothing

	h.report("w1", model.ExecutorReport{AppID: a, ExecutorID: 1, State: model.ExecFailed, ExitCode: intp(3), Reason: "boom"})
	if e := h.exec(a, 1); e.State != model.ExecFailed || e.ExitCode == nil || *e.ExitCode != 3 || e.Message != "boom" || e.EndedAt != h.now {
		t.Fatalf("executor 1 after FAILED: %+v", e)
	}
	if row, _ := h.app(a); row.RetryCount != 1 || row.CoresGranted != 2 {
		t.Fatalf("after one failure: retry %d granted %d, want 1 and 2", row.RetryCount, row.CoresGranted)
	}
	h.wantUsed("w1", 1, 512)
	h.report("w2", er(a, 2, model.ExecFailed))
	if row, _ := h.app(a); row.RetryCount != 2 {
		t.Fatalf("after two failures: retry %d", row.RetryCount)
	}
	// Reports about ended executors are ignored, whatever they say.
	for _, s := range []model.ExecutorState{model.ExecRunning, model.ExecExited, model.ExecFailed, model.ExecKilled} {
		h.ignored("w1", er(a, 1, s))
	}

	// EXITED releases and resets the retry count.
	h.mustPlace(ep(a, 3, "w2"))
	h.report("w2", er(a, 3, model.ExecExited))
	if row, _ := h.app(a); row.RetryCount != 0 {
		t.Fatalf("after EXITED: retry %d, want 0", row.RetryCount)
	}
	h.wantExecState(a, 3, model.ExecExited)

	// KILLED by the worker, unasked, counts no retry.
	h.mustPlace(ep(a, 4, "w2"), ep(a, 5, "w2"))
	h.report("w2", er(a, 4, model.ExecFailed))
	h.report("w2", model.ExecutorReport{AppID: a, ExecutorID: 5, State: model.ExecKilled, Reason: "worker shutting down"})
	if row, _ := h.app(a); row.RetryCount != 1 || row.State != model.AppRunning {
		t.Fatalf("after FAILED then KILLED: retry %d state %s, want 1 RUNNING", row.RetryCount, row.State)
	}
	h.wantExecState(a, 5, model.ExecKilled)
	h.wantUsed("w2", 0, 0)
	h.wantUsed("w1", 1, 512)
	h.invariants()
}

func TestAppFailsAfterMaxExecutorRetries(t *testing.T) {
	setup := func(t *testing.T, retries int) (*harness, string) {
		h := newHarness(t)
		h.worker("w1", 64, 65536)
		c := appSpec(0)
		c.MaxExecutorRetries = retries
		return h, h.register(c)
	}

	t.Run("more failures than the max, none running", func(t *testing.T) {
		h, a := setup(t, 2)
		h.mustPlace(ep(a, 0, "w1"), ep(a, 1, "w1"), ep(a, 2, "w1"), ep(a, 3, "w1"))
		h.report("w1", er(a, 0, model.ExecFailed), er(a, 1, model.ExecFailed))
		h.wantAppState(a, model.AppWaiting)
		h.report("w1", er(a, 2, model.ExecFailed))
		row := h.wantAppState(a, model.AppFailed)
		if row.RetryCount != 3 || row.EndedAt != h.now || !strings.Contains(row.Message, "3 executors failed") {
			t.Fatalf("failed app: %+v", row)
		}
		// A LAUNCHING executor is not RUNNING: it does not save the app,
		// and is killed with it.
		h.wantExecState(a, 3, model.ExecKilled)
		if row.CoresGranted != 0 {
			t.Fatalf("failed app still holds %d cores", row.CoresGranted)
		}
		h.wantUsed("w1", 0, 0)
		h.skipPlace(ep(a, 4, "w1"))
		h.ignored("w1", er(a, 3, model.ExecRunning))
		h.refused(&model.RequestExecutors{AppID: a, Total: 5}, model.ErrAppEnded)
		h.invariants()
	})

	t.Run("max 0 fails on the first failure", func(t *testing.T) {
		h, a := setup(t, 0)
		h.mustPlace(ep(a, 0, "w1"))
		h.report("w1", er(a, 0, model.ExecFailed))
		h.wantAppState(a, model.AppFailed)
		h.invariants()
	})

	t.Run("not while one runs", func(t *testing.T) {
		h, a := setup(t, 0)
		h.mustPlace(ep(a, 0, "w1"), ep(a, 1, "w1"), ep(a, 2, "w1"))
		h.report("w1", er(a, 0, model.ExecRunning))
		h.report("w1", er(a, 1, model.ExecFailed))
		h.report("w1", er(a, 2, model.ExecFailed))
		if row := h.wantAppState(a, model.AppRunning); row.RetryCount != 2 {
			t.Fatalf("retry %d, want 2", row.RetryCount)
		}
		// The running one failing leaves none running.
		h.report("w1", er(a, 0, model.ExecFailed))
		h.wantAppState(a, model.AppFailed)
		h.invariants()
	})

	t.Run("never with -1", func(t *testing.T) {
		h, a := setup(t, -1)
		for i := range 20 {
			h.mustPlace(ep(a, i, "w1"))
			h.report("w1", er(a, i, model.ExecFailed))
		}
		if row := h.wantAppState(a, model.AppWaiting); row.RetryCount != 20 {
			t.Fatalf("retry %d, want 20", row.RetryCount)
		}
		h.invariants()
	})

	t.Run("EXITED resets the count", func(t *testing.T) {
		h, a := setup(t, 1)
		h.mustPlace(ep(a, 0, "w1"), ep(a, 1, "w1"), ep(a, 2, "w1"), ep(a, 3, "w1"))
		h.report("w1", er(a, 0, model.ExecFailed))
		h.report("w1", er(a, 1, model.ExecExited))
		h.report("w1", er(a, 2, model.ExecFailed))
		if row := h.wantAppState(a, model.AppWaiting); row.RetryCount != 1 {
			t.Fatalf("retry %d, want 1", row.RetryCount)
		}
		h.report("w1", er(a, 3, model.ExecFailed))
		h.wantAppState(a, model.AppFailed)
	})

	t.Run("KILLED by the worker counts none", func(t *testing.T) {
		h, a := setup(t, 0)
		h.mustPlace(ep(a, 0, "w1"), ep(a, 1, "w1"))
		h.report("w1", er(a, 0, model.ExecKilled), er(a, 1, model.ExecKilled))
		if row := h.wantAppState(a, model.AppWaiting); row.RetryCount != 0 {
			t.Fatalf("retry %d, want 0", row.RetryCount)
		}
		h.invariants()
	})

	t.Run("failure ending the app in a batch", func(t *testing.T) {
		h, a := setup(t, 0)
		h.mustPlace(ep(a, 0, "w1"), ep(a, 1, "w1"))
		// Executor 1's report comes after the app failed and killed it.
		h.report("w1", er(a, 0, model.ExecFailed), er(a, 1, model.ExecRunning))
		h.wantAppState(a, model.AppFailed)
		h.wantExecState(a, 1, model.ExecKilled)
		h.invariants()
	})
}

func TestWorkerLostLosesExecutors(t *testing.T) {
	h := newHarness(t)
	h.worker("w1", 8, 8192)
	h.worker("w2", 8, 8192)
	c := appSpec(0)
	c.MaxExecutorRetries = 0 // a counted retry would fail the app
	a := h.register(c)
	h.mustPlace(ep(a, 0, "w1"), ep(a, 1, "w1"), ep(a, 2, "w2"))
	h.report("w1", er(a, 0, model.ExecRunning))
	other := h.register(appSpec(1))
	h.mustPlace(ep(other, 0, "w1"))

	h.ok(&model.WorkerLost{WorkerID: "w1", Reason: "no heartbeat", Time: h.tick()})
	for _, k := range []struct {
		app string
		id  int
	}{{a, 0}, {a, 1}, {other, 0}} {
		e := h.exec(k.app, k.id)
		if e.State != model.ExecLost || e.Message != "no heartbeat" || e.EndedAt != h.now || e.ExitCode != nil {
			t.Fatalf("executor %s on the lost worker: %+v", model.ExecutorKey(k.app, k.id), e)
		}
	}
	h.wantExecState(a, 2, model.ExecLaunching)
	if row := h.wantAppState(a, model.AppRunning); row.RetryCount != 0 || row.CoresGranted != 1 {
		t.Fatalf("app after worker loss: retry %d granted %d, want 0 and 1", row.RetryCount, row.CoresGranted)
	}
	if row := h.wantAppState(other, model.AppWaiting); row.CoresGranted != 0 {
		t.Fatalf("app with all executors lost holds %d cores", row.CoresGranted)
	}
	h.wantUsed("w1", 0, 0)
	h.wantUsed("w2", 1, 512)
	if es, _ := h.f.State().ExecutorsOn("w1"); len(es) != 0 {
		t.Fatalf("ExecutorsOn(lost worker) = %+v", es)
	}
	// Late reports from the lost worker are ignored; the scheduler
	// replaces the lost executors under new IDs.
	h.ignored("w1", er(a, 0, model.ExecFailed), er(a, 1, model.ExecRunning))
	h.skipPlace(ep(a, 3, "w1"))
	h.mustPlace(ep(a, 3, "w2"), ep(other, 1, "w2"))
	h.invariants()
}

func TestDriverEndEndsItsApps(t *testing.T) {
	cases := []struct {
		name      string
		supervise bool
		end       func(h *harness, d string)
		want      model.ApplicationState
	}{
		{"finished", false, func(h *harness, d string) { h.driverReport("w1", d, 1, model.DriverFinished) }, model.AppFinished},
		{"failed", false, func(h *harness, d string) { h.driverReport("w1", d, 1, model.DriverFailed) }, model.AppFailed},
		{"error", false, func(h *harness, d string) { h.driverReport("w1", d, 1, model.DriverError) }, model.AppFailed},
		{"killed by its worker", false, func(h *harness, d string) { h.driverReport("w1", d, 1, model.DriverKilled) }, model.AppKilled},
		{"killed on request", false, func(h *harness, d string) { h.ok(&model.KillDriver{DriverID: d, Time: h.tick()}) }, model.AppKilled},
		{"worker lost", false, func(h *harness, d string) {
			h.ok(&model.WorkerLost{WorkerID: "w1", Time: h.tick()})
		}, model.AppFailed},
		{"supervised finished", true, func(h *harness, d string) { h.driverReport("w1", d, 1, model.DriverFinished) }, model.AppFinished},
		{"supervised killed on request", true, func(h *harness, d string) { h.ok(&model.KillDriver{DriverID: d, Time: h.tick()}) }, model.AppKilled},
		{"supervised relaunched after worker loss", true, func(h *harness, d string) {
			h.ok(&model.WorkerLost{WorkerID: "w1", Time: h.tick()})
		}, model.AppFailed},
		{"supervised relaunched after a kill by its worker", true, func(h *harness, d string) { h.driverReport("w1", d, 1, model.DriverKilled) }, model.AppFailed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.worker("w1", 4, 4096) // the driver's worker
			h.worker("w2", 8, 8192) // the executors'
			d := h.submitDriver(0, tc.supervise, "w1")
			h.driverReport("w1", d, 1, model.DriverRunning)
			d1 := h.submitDriver(1, false, "w2")
			h.driverReport("w2", d1, 1, model.DriverRunning)
			spec := func(seq int, driver string) *model.RegisterApp {
				c := appSpec(seq)
				if driver != "" {
					c.DriverID, c.DriverAttempt = driver, 1
				}
				return c
			}
			x := h.register(spec(0, d))
			y := h.register(spec(1, d1))
			z := h.register(spec(2, ""))
			h.mustPlace(ep(x, 0, "w2"), ep(x, 1, "w2"), ep(y, 0, "w2"), ep(z, 0, "w2"))
			h.report("w2", er(x, 0, model.ExecRunning), er(y, 0, model.ExecRunning))
			ya, yes, _ := h.f.State().App(y)
			za, zes, _ := h.f.State().App(z)

			tc.end(h, d)
			row := h.wantAppState(x, tc.want)
			if row.EndedAt != h.now || !strings.Contains(row.Message, d) || row.CoresGranted != 0 {
				t.Fatalf("ended app: %+v", row)
			}
			h.wantExecState(x, 0, model.ExecKilled)
			h.wantExecState(x, 1, model.ExecKilled)
			// w2 keeps driver 1 and the executors of y and z.
			h.wantUsed("w2", 3, 256+2*512)
			for _, o := range []struct {
				app  *model.App
				exec []*model.Executor
			}{{ya, yes}, {za, zes}} {
				a, es, _ := h.f.State().App(o.app.ID)
				if !reflect.DeepEqual(a, o.app) || !reflect.DeepEqual(es, o.exec) {
					t.Fatalf("app %s of another driver changed: %+v", a.ID, a)
				}
			}
			h.invariants()
		})
	}
}

// TestRelaunchedDriverRegistersAgain: after a supervised driver is
// relaunched, the app of attempt 1 has FAILED and stays so; attempt 2
// registers a new app, which ends with attempt 2.
func TestRelaunchedDriverRegistersAgain(t *testing.T) {
	h := newHarness(t)
	h.worker("w1", 4, 4096)
	h.worker("w2", 4, 4096)
	d := h.submitDriver(0, true, "w1")
	c := appSpec(0)
	c.DriverID, c.DriverAttempt = d, 1
	first := h.register(c)
	h.mustPlace(ep(first, 0, "w2"))
	h.ok(&model.WorkerLost{WorkerID: "w1", Time: h.tick()})
	failedAt := h.wantAppState(first, model.AppFailed).EndedAt
	h.wantExecState(first, 0, model.ExecKilled)

	h.placeDriver(d, 2, "w2")
	stale := appSpec(1)
	stale.DriverID, stale.DriverAttempt = d, 1
	h.refused(stale, model.ErrStaleAttempt)
	c2 := appSpec(2)
	c2.DriverID, c2.DriverAttempt = d, 2
	second := h.register(c2)
	h.mustPlace(ep(second, 0, "w2"))
	h.driverReport("w2", d, 2, model.DriverFinished)
	h.wantAppState(second, model.AppFinished)
	if row := h.wantAppState(first, model.AppFailed); row.EndedAt != failedAt {
		t.Fatal("the app of the superseded attempt was ended again")
	}
	h.wantUsed("w2", 0, 0)
	h.invariants()
}

func TestRequestExecutors(t *testing.T) {
	h := newHarness(t)
	h.worker("w1", 8, 8192)
	a := h.register(appSpec(0))
	h.mustPlace(ep(a, 0, "w1"), ep(a, 1, "w1"), ep(a, 2, "w1"))

	h.refused(&model.RequestExecutors{AppID: a, Total: -1}, model.ErrInvalidCommand)
	h.refused(&model.RequestExecutors{AppID: appID(9), Total: 1}, model.ErrUnknownApp)

	// Lowering the limit kills nothing, but nothing more is placed.
	h.ok(&model.RequestExecutors{AppID: a, Total: 1, Time: h.tick()})
	if row, _ := h.app(a); row.ExecutorLimit != 1 || row.UpdatedAt != h.now {
		t.Fatalf("limit %d updated %d", row.ExecutorLimit, row.UpdatedAt)
	}
	for i := range 3 {
		h.wantExecState(a, i, model.ExecLaunching)
	}
	h.skipPlace(ep(a, 3, "w1"))
	h.ok(&model.RequestExecutors{AppID: a, Total: 4, Time: h.tick()})
	if got := h.place(ep(a, 3, "w1"), ep(a, 4, "w1")); len(got) != 1 {
		t.Fatalf("limit 4 with 3 live: applied %+v, want one", got)
	}
	h.ok(&model.RequestExecutors{AppID: a, Total: 0, Time: h.tick()})

	h.ok(&model.EndApp{AppID: a, State: model.AppFinished, Time: h.tick()})
	h.refused(&model.RequestExecutors{AppID: a, Total: 3}, model.ErrAppEnded)
	h.invariants()
}

func TestKillExecutors(t *testing.T) {
	h := newHarness(t)
	h.worker("w1", 8, 8192)
	a := h.register(appSpec(0))
	h.mustPlace(ep(a, 0, "w1"), ep(a, 1, "w1"), ep(a, 2, "w1"))
	h.report("w1", er(a, 0, model.ExecRunning))

	// Unknown or repeated IDs refuse the whole command.
	h.refused(&model.KillExecutors{AppID: a, ExecutorIDs: []int{1, 3}}, model.ErrUnknownExecutor)
	h.refused(&model.KillExecutors{AppID: a, ExecutorIDs: []int{-1}}, model.ErrUnknownExecutor)
	h.refused(&model.KillExecutors{AppID: a, ExecutorIDs: []int{1, 1}}, model.ErrUnknownExecutor)
	h.refused(&model.KillExecutors{AppID: appID(9), ExecutorIDs: []int{0}}, model.ErrUnknownApp)

	// No limit: the limit becomes the live count less the killed.
	h.ok(&model.KillExecutors{AppID: a, ExecutorIDs: []int{0}, Time: h.tick()})
	e := h.exec(a, 0)
	if e.State != model.ExecKilled || e.EndedAt != h.now || e.Message == "" {
		t.Fatalf("killed executor: %+v", e)
	}
	row, _ := h.app(a)
	if row.ExecutorLimit != 2 || row.CoresGranted != 2 || row.RetryCount != 0 || row.State != model.AppRunning {
		t.Fatalf("after killing 1 of 3: %+v", row)
	}
	h.wantUsed("w1", 2, 1024)
	// So the killed one is not replaced.
	h.skipPlace(ep(a, 3, "w1"))

	// An explicit limit is lowered by the number killed; naming an
	// executor that already ended kills and lowers nothing for it.
	h.ok(&model.RequestExecutors{AppID: a, Total: 5, Time: h.tick()})
	h.ok(&model.KillExecutors{AppID: a, ExecutorIDs: []int{0, 1}, Time: h.tick()})
	if row, _ := h.app(a); row.ExecutorLimit != 4 {
		t.Fatalf("limit 5, killed one live (and one dead): limit %d, want 4", row.ExecutorLimit)
	}
	h.wantExecState(a, 1, model.ExecKilled)
	h.wantExecState(a, 2, model.ExecLaunching)

	// The limit does not go below 0.
	h.ok(&model.RequestExecutors{AppID: a, Total: 0, Time: h.tick()})
	h.ok(&model.KillExecutors{AppID: a, ExecutorIDs: []int{2}, Time: h.tick()})
	if row, _ := h.app(a); row.ExecutorLimit != 0 || row.CoresGranted != 0 || row.State != model.AppRunning {
		t.Fatalf("after killing all: %+v", row)
	}
	h.wantUsed("w1", 0, 0)

	h.ok(&model.EndApp{AppID: a, State: model.AppKilled, Time: h.tick()})
	h.refused(&model.KillExecutors{AppID: a, ExecutorIDs: []int{0}}, model.ErrAppEnded)

	// With no limit, naming only executors that already ended sets none.
	b := h.register(appSpec(1))
	h.mustPlace(ep(b, 0, "w1"))
	h.report("w1", er(b, 0, model.ExecExited))
	h.ok(&model.KillExecutors{AppID: b, ExecutorIDs: []int{0}, Time: h.tick()})
	if row, _ := h.app(b); row.ExecutorLimit != -1 {
		t.Fatalf("killing only an ended executor set the limit to %d, want -1 (none)", row.ExecutorLimit)
	}
	h.invariants()
}

func TestEndApp(t *testing.T) {
	h := newHarness(t)
	h.worker("w1", 8, 8192)
	a := h.register(appSpec(0))
	h.mustPlace(ep(a, 0, "w1"), ep(a, 1, "w1"))
	h.report("w1", er(a, 0, model.ExecRunning), er(a, 1, model.ExecFailed))

	for _, s := range []model.ApplicationState{model.AppWaiting, model.AppRunning, model.AppUnknown, ""} {
		h.refused(&model.EndApp{AppID: a, State: s}, model.ErrInvalidCommand)
	}
	h.refused(&model.EndApp{AppID: appID(9), State: model.AppFinished}, model.ErrUnknownApp)

	h.ok(&model.EndApp{AppID: a, State: model.AppFinished, Time: h.tick()})
	row := h.wantAppState(a, model.AppFinished)
	if row.EndedAt != h.now || row.Message != "unregistered" || row.CoresGranted != 0 {
		t.Fatalf("ended app: %+v", row)
	}
	h.wantExecState(a, 0, model.ExecKilled)
	h.wantExecState(a, 1, model.ExecFailed) // an ended executor keeps its end
	h.wantUsed("w1", 0, 0)

	// The same end again (a retried request) is accepted and changes
	// nothing; a different one is refused.
	h.unchanged(&model.EndApp{AppID: a, State: model.AppFinished, Reason: "again", Time: h.tick()})
	h.refused(&model.EndApp{AppID: a, State: model.AppKilled, Time: h.tick()}, model.ErrAppEnded)
	h.refused(&model.EndApp{AppID: a, State: model.AppFailed, Time: h.tick()}, model.ErrAppEnded)

	for i, s := range []model.ApplicationState{model.AppFailed, model.AppKilled} {
		b := h.register(appSpec(1 + i))
		h.ok(&model.EndApp{AppID: b, State: s, Reason: "client went away", Time: h.tick()})
		if row := h.wantAppState(b, s); row.Message != "client went away" {
			t.Fatalf("reason %q", row.Message)
		}
	}
	h.invariants()
}

func TestPruneCompleted(t *testing.T) {
	h := newHarness(t)
	h.worker("w1", 8, 8192)
	done := h.submitDriver(0, false, "w1")
	h.driverReport("w1", done, 1, model.DriverFinished)
	live := h.submitDriver(1, false, "w1")
	waiting := h.submitDriver(2, false, "")
	finished := h.register(appSpec(0))
	running := h.register(appSpec(1))
	killed := h.register(appSpec(2))
	h.mustPlace(ep(finished, 0, "w1"), ep(finished, 1, "w1"), ep(running, 0, "w1"), ep(killed, 0, "w1"))
	h.report("w1", er(finished, 1, model.ExecFailed))
	h.ok(&model.EndApp{AppID: finished, State: model.AppFinished, Time: h.tick()})
	h.ok(&model.EndApp{AppID: killed, State: model.AppKilled, Time: h.tick()})

	h.ok(&model.PruneCompleted{
		DriverIDs: []string{done, live, waiting, driverID(99)},
		AppIDs:    []string{finished, running, appID(99), killed},
	})
	if _, ok := h.f.State().Driver(done); ok {
		t.Fatal("finished driver not pruned")
	}
	if _, ok := h.f.State().DriverByToken("driver-token-0"); ok {
		t.Fatal("pruned driver's token kept")
	}
	for _, id := range []string{live, waiting} {
		if _, ok := h.f.State().Driver(id); !ok {
			t.Fatalf("unfinished driver %s pruned", id)
		}
	}
	if w := h.f.State().WaitingDrivers(); len(w) != 1 || w[0].ID != waiting {
		t.Fatalf("waiting = %+v", w)
	}
	for _, id := range []string{finished, killed} {
		if _, _, ok := h.f.State().App(id); ok {
			t.Fatalf("finished app %s not pruned", id)
		}
		if _, ok := h.f.State().AppByToken("app-token-" + id[len(id)-1:]); ok {
			t.Fatalf("pruned app %s's token kept", id)
		}
	}
	h.f.mu.RLock()
	for k := range h.f.t.Executors {
		if !strings.HasPrefix(k, running+"/") {
			t.Errorf("executor row %s of a pruned app kept", k)
		}
	}
	h.f.mu.RUnlock()
	if _, es := h.app(running); len(es) != 1 || es[0].State != model.ExecLaunching {
		t.Fatalf("live app's executors: %+v", es)
	}
	if id, ok := h.f.State().AppByToken("app-token-1"); !ok || id != running {
		t.Fatal("live app's token pruned")
	}
	if d, a := h.f.State().Completed(); len(d) != 0 || len(a) != 0 {
		t.Fatalf("Completed after pruning: %v %v", d, a)
	}
	// A pruned token is free again.
	if res := h.ok(withToken(appSpec(5), "app-token-0")).(RegisterAppResult); res.Existing {
		t.Fatal("a pruned app's token still names it")
	}
	// Pruning again, or pruning nothing, changes nothing.
	h.unchanged(&model.PruneCompleted{DriverIDs: []string{done}, AppIDs: []string{finished}})
	h.unchanged(&model.PruneCompleted{})
	h.invariants()
}

func withToken(c *model.RegisterApp, tok string) *model.RegisterApp { c.Token = tok; return c }

func TestCompletedOldestFirst(t *testing.T) {
	h := newHarness(t)
	for seq := range 4 {
		h.submitDriver(seq, false, "")
		h.register(appSpec(seq))
	}
	// Ended at 30, 10, 10, and one never.
	for _, k := range []struct {
		seq int
		at  int64
	}{{0, 30}, {2, 10}, {1, 10}} {
		h.ok(&model.KillDriver{DriverID: driverID(k.seq), Time: k.at})
		h.ok(&model.EndApp{AppID: appID(k.seq), State: model.AppFinished, Time: k.at})
	}
	d, a := h.f.State().Completed()
	if want := []string{driverID(1), driverID(2), driverID(0)}; !reflect.DeepEqual(d, want) {
		t.Fatalf("drivers %v, want %v", d, want)
	}
	if want := []string{appID(1), appID(2), appID(0)}; !reflect.DeepEqual(a, want) {
		t.Fatalf("apps %v, want %v", a, want)
	}
}

// appState builds tables with every kind of app and executor row, for the
// snapshot tests: app 0 live with a live and an ended executor on w1, app
// 1 finished with a killed executor, a driver on w1.
func appState(t *testing.T) *harness {
	h := newHarness(t)
	h.worker("w1", 8, 8192)
	h.worker("w2", 8, 8192)
	h.submitDriver(0, false, "w1")
	c := appSpec(0)
	c.MaxCores, c.CoresPerExecutor = 6, 2
	a := h.register(c)
	h.mustPlace(ep(a, 0, "w1"), ep(a, 1, "w1"), ep(a, 2, "w2"))
	h.report("w1", er(a, 0, model.ExecRunning), er(a, 1, model.ExecFailed))
	b := h.register(appSpec(1))
	h.mustPlace(ep(b, 0, "w2"))
	h.ok(&model.EndApp{AppID: b, State: model.AppKilled, Time: h.tick()})
	return h
}

func snapshotOf(t *testing.T, f *FSM) snapshotFile {
	t.Helper()
	var s snapshotFile
	if err := json.Unmarshal(marshalled(t, f), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func restoreJSON(f *FSM, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return f.Restore(io.NopCloser(bytes.NewReader(b)))
}

func TestRestoreRecomputesAppUsage(t *testing.T) {
	h := appState(t)
	want := hashOf(t, h.f)
	s := snapshotOf(t, h.f)
	for _, a := range s.Tables.Apps {
		a.CoresGranted = 99
	}
	for _, w := range s.Tables.Workers {
		w.CoresUsed, w.MemoryUsedMB = 77, 1
	}
	g := New()
	if err := restoreJSON(g, s); err != nil {
		t.Fatal(err)
	}
	if hashOf(t, g) != want {
		t.Fatal("restored tables differ: derived columns were trusted, not recomputed")
	}
	if a, _, _ := g.State().App(appID(0)); a.CoresGranted != 4 {
		t.Fatalf("CoresGranted %d, want 4", a.CoresGranted)
	}
	if w, _ := g.State().Worker("w1"); w.CoresUsed != 3 || w.MemoryUsedMB != 256+512 {
		t.Fatalf("w1 uses %d cores %d MiB, want 3 and 768", w.CoresUsed, w.MemoryUsedMB)
	}
	checkInvariants(t, g)
}

func TestRestoreRefusesCorruptAppRows(t *testing.T) {
	h := appState(t)
	a0, b0 := model.ExecutorKey(appID(0), 0), model.ExecutorKey(appID(1), 0)
	cases := map[string]func(tb *tables){
		"executor under another key": func(tb *tables) {
			tb.Executors[model.ExecutorKey(appID(0), 1)] = tb.Executors[a0]
		},
		"executor under a malformed key": func(tb *tables) { tb.Executors["x"] = tb.Executors[a0] },
		"nil executor":                   func(tb *tables) { tb.Executors[model.ExecutorKey(appID(0), 1)] = nil },
		"executor of an unknown app": func(tb *tables) {
			e := tb.Executors[a0]
			e.AppID = appID(9)
			tb.Executors[model.ExecutorKey(appID(9), 0)] = e
			delete(tb.Executors, a0)
		},
		"ended executor of an unknown app": func(tb *tables) {
			e := tb.Executors[b0]
			e.AppID = appID(9)
			tb.Executors[model.ExecutorKey(appID(9), 0)] = e
			delete(tb.Executors, b0)
		},
		"executor ID the app never gave": func(tb *tables) { tb.Apps[appID(0)].NextExecutorID = 2 },
		"negative executor ID": func(tb *tables) {
			e := *tb.Executors[a0]
			e.ID = -1
			tb.Executors[model.ExecutorKey(appID(0), -1)] = &e
		},
		"live executor on an unknown worker": func(tb *tables) { tb.Executors[a0].WorkerID = "ghost" },
		"live executor of a finished app":    func(tb *tables) { tb.Executors[b0].State = model.ExecRunning },
		"app under another key":              func(tb *tables) { tb.Apps[appID(5)] = tb.Apps[appID(1)] },
		"nil app":                            func(tb *tables) { tb.Apps[appID(5)] = nil },
		"token of an unknown app":            func(tb *tables) { tb.AppTokens["t"] = appID(9) },
		"token its app does not name":        func(tb *tables) { tb.AppTokens["other"] = appID(0) },
	}
	before := hashOf(t, h.f)
	for name, corrupt := range cases {
		s := snapshotOf(t, h.f)
		corrupt(&s.Tables)
		if err := restoreJSON(h.f, s); err == nil {
			t.Errorf("%s: snapshot accepted", name)
		}
		if hashOf(t, h.f) != before {
			t.Fatalf("%s: refused snapshot changed the tables", name)
		}
	}
	// The unchanged snapshot restores, so the refusals are the corruption.
	if err := restoreJSON(h.f, snapshotOf(t, h.f)); err != nil {
		t.Fatal(err)
	}
}

func TestRestoreSnapshotFromBeforeApps(t *testing.T) {
	// Tables as a master without apps would have written them.
	old := replay(t, scenario(t)[:driverScenarioLen])
	s := snapshotOf(t, old)
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	tablesJSON := m["tables"].(map[string]any)
	for _, k := range []string{"apps", "executors", "app_tokens", "next_app_seq"} {
		if _, ok := tablesJSON[k]; !ok {
			t.Fatalf("snapshot has no %q key; the test no longer removes it", k)
		}
		delete(tablesJSON, k)
	}
	g := New()
	if err := restoreJSON(g, m); err != nil {
		t.Fatalf("pre-app snapshot refused: %v", err)
	}
	if hashOf(t, g) != hashOf(t, old) {
		t.Fatal("pre-app snapshot restored different tables")
	}
	// A hand-written one, with a placed driver whose usage is rebuilt.
	literal := `{"version":1,"tables":{"workers":{"w1":{"id":"w1","http_addr":"h:1","cores":4,"memory_mb":4096,"state":"ALIVE","cores_used":0,"memory_used_mb":0,"registered_at":1,"updated_at":1}},` +
		`"drivers":{"` + driverID(0) + `":{"id":"` + driverID(0) + `","token":"t","argv":["x"],"cores":2,"memory_mb":256,"supervise":false,"state":"RUNNING","worker_id":"w1","attempt":1,"exit_code":null,"submitted_at":1,"updated_at":1,"attempts":[{"attempt":1,"worker_id":"w1","state":"RUNNING","placed_at":1,"exit_code":null}]}},` +
		`"waiting_drivers":[],"tokens":{"t":"` + driverID(0) + `"},"next_driver_seq":1}}`
	g = New()
	if err := g.Restore(io.NopCloser(strings.NewReader(literal))); err != nil {
		t.Fatalf("pre-app snapshot refused: %v", err)
	}
	if w, _ := g.State().Worker("w1"); w.CoresUsed != 2 || w.MemoryUsedMB != 256 {
		t.Fatalf("w1 uses %d cores %d MiB", w.CoresUsed, w.MemoryUsedMB)
	}
	// The restored FSM takes apps: its app tables exist.
	h := &harness{t: t, f: g, idx: 100, now: 100}
	a := h.register(appSpec(0))
	h.mustPlace(ep(a, 0, "w1"))
	h.wantUsed("w1", 3, 768)
	h.invariants()
}

func TestAppCommandsRoundTrip(t *testing.T) {
	payloads := map[model.CommandType]model.Command{
		model.CmdRegisterApp: &model.RegisterApp{ID: appID(1), Token: "t", Name: "n", DriverID: driverID(1), DriverAttempt: 2, MaxCores: 4,
			CoresPerExecutor: 2, MemoryPerExecutorMB: 512, ExecutorLimit: -1, Argv: []string{"a", "b"}, Env: map[string]string{"K": "v"},
			MaxExecutorRetries: 3, Time: 9},
		model.CmdPlaceExecutors:   &model.PlaceExecutors{Placements: []model.ExecutorPlacement{ep(appID(1), 0, "w1")}, Time: 9},
		model.CmdRequestExecutors: &model.RequestExecutors{AppID: appID(1), Total: 3, Time: 9},
		model.CmdKillExecutors:    &model.KillExecutors{AppID: appID(1), ExecutorIDs: []int{0, 2}, Time: 9},
		model.CmdEndApp:           &model.EndApp{AppID: appID(1), State: model.AppKilled, Reason: "r", Time: 9},
		model.CmdPruneCompleted:   &model.PruneCompleted{DriverIDs: []string{driverID(1)}, AppIDs: []string{appID(1)}},
		model.CmdReportAttempts: &model.ReportAttempts{WorkerID: "w1", Reports: []model.AttemptReport{}, Time: 9,
			Executors: []model.ExecutorReport{{AppID: appID(1), ExecutorID: 0, State: model.ExecFailed, ExitCode: intp(2), Reason: "r"}}},
		model.CmdReportBatch: &model.ReportBatch{Reports: []model.ReportAttempts{{WorkerID: "w1", Time: 9,
			Reports: []model.AttemptReport{{DriverID: driverID(1), Attempt: 1, State: model.DriverRunning, Runs: 1}}}}},
	}
	names := map[model.CommandType]string{model.CmdRegisterApp: "RegisterApp", model.CmdPlaceExecutors: "PlaceExecutors", model.CmdRequestExecutors: "RequestExecutors",
		model.CmdKillExecutors: "KillExecutors", model.CmdEndApp: "EndApp", model.CmdPruneCompleted: "PruneCompleted", model.CmdReportAttempts: "ReportAttempts",
		model.CmdReportBatch: "ReportBatch"}
	for ct, p := range payloads {
		data, err := Encode(p)
		if err != nil {
			t.Fatal(err)
		}
		gt, got, err := Decode(data)
		if err != nil || gt != ct || !reflect.DeepEqual(got, p) {
			t.Fatalf("%s: decoded %v %+v %v", ct, gt, got, err)
		}
		if ct.String() != names[ct] {
			t.Fatalf("CommandType(%d).String() = %s", uint8(ct), ct)
		}
		// Unknown fields, as a later version adds, are ignored; data
		// after the payload is refused.
		later := append(append([]byte{}, data[:len(data)-1]...), []byte(`,"added_later":1}`)...)
		if _, got, err := Decode(later); err != nil || !reflect.DeepEqual(got, p) {
			t.Fatalf("%s with an unknown field: %+v %v", ct, got, err)
		}
		if _, _, err := Decode(append(data, '1')); !errors.Is(err, ErrMalformed) {
			t.Fatalf("%s with trailing data: %v", ct, err)
		}
	}
	// A ReportAttempts entry written before executors existed decodes.
	old := []byte(`{"worker_id":"w1","reports":[],"time":1}`)
	if _, p, err := Decode(append([]byte{FormatJSON, byte(model.CmdReportAttempts)}, old...)); err != nil || p.(*model.ReportAttempts).Executors != nil {
		t.Fatalf("old ReportAttempts: %+v %v", p, err)
	}
}

func TestExecutorKey(t *testing.T) {
	k := model.ExecutorKey(appID(3), 12)
	if k != appID(3)+"/12" {
		t.Fatalf("ExecutorKey = %s", k)
	}
	if app, id, ok := model.ParseExecutorKey(k); !ok || app != appID(3) || id != 12 {
		t.Fatalf("model.ParseExecutorKey(%s) = %s %d %v", k, app, id, ok)
	}
	for _, s := range []string{"", "/1", "app", "app/", "app/x", "app/-1"} {
		if _, _, ok := model.ParseExecutorKey(s); ok {
			t.Errorf("model.ParseExecutorKey(%q) accepted", s)
		}
	}
}

// TestDriverRestartedInPlaceEndsEarlierRunsApps: a supervised driver
// restarted on its worker (same attempt, a later run) is a new client, so
// the app its earlier run registered ends and frees its executors; the new
// run's app lives on, and a registration naming an earlier run is refused.
func TestDriverRestartedInPlaceEndsEarlierRunsApps(t *testing.T) {
	h := newHarness(t)
	h.worker("w1", 8, 8192)
	d := h.submitDriver(0, true, "w1")
	h.driverReport("w1", d, 1, model.DriverRunning)
	first := appSpec(0)
	first.DriverID, first.DriverAttempt, first.DriverRun = d, 1, 1
	a := h.register(first)
	h.mustPlace(ep(a, 0, "w1"))

	h.ok(&model.ReportAttempts{WorkerID: "w1", Time: h.tick(),
		Reports: []model.AttemptReport{{DriverID: d, Attempt: 1, State: model.DriverRunning, Runs: 2}}})
	if row, _ := h.app(a); row.State != model.AppFailed || !strings.Contains(row.Message, "restarted as run 2") {
		t.Fatalf("app of run 1 after the restart: %s %q, want FAILED", row.State, row.Message)
	}
	h.wantExecState(a, 0, model.ExecKilled)
	h.wantUsed("w1", 1, 256) // the driver alone

	stale := appSpec(1)
	stale.DriverID, stale.DriverAttempt, stale.DriverRun = d, 1, 1
	h.refused(stale, model.ErrStaleAttempt)
	second := appSpec(2)
	second.DriverID, second.DriverAttempt, second.DriverRun = d, 1, 2
	b := h.register(second)
	h.ok(&model.ReportAttempts{WorkerID: "w1", Time: h.tick(),
		Reports: []model.AttemptReport{{DriverID: d, Attempt: 1, State: model.DriverRunning, Runs: 2}}})
	if row, _ := h.app(b); row.State != model.AppWaiting {
		t.Fatalf("app of run 2: %s, want WAITING", row.State)
	}
	h.invariants()
}

// TestFinishedExecutorsAreRetainedUpToALimit: an app whose executors keep
// ending keeps only the newest RetainedExecutors finished rows; a live
// executor with a low ID stays.
func TestFinishedExecutorsAreRetainedUpToALimit(t *testing.T) {
	h := newHarness(t)
	h.worker("w1", 2, 8192)
	a := h.register(appSpec(0))
	h.mustPlace(ep(a, 0, "w1"))
	h.report("w1", er(a, 0, model.ExecRunning))
	n := model.RetainedExecutors + 30
	for id := 1; id <= n; id++ {
		h.mustPlace(ep(a, id, "w1"))
		h.report("w1", er(a, id, model.ExecExited))
	}
	_, es, _ := h.f.State().App(a)
	if len(es) != model.RetainedExecutors+1 || es[0].ID != 0 || es[1].ID != n-model.RetainedExecutors+1 || es[len(es)-1].ID != n {
		t.Fatalf("kept %d executors from %d, then %d..%d; want the live 0 and the newest %d finished",
			len(es), es[0].ID, es[1].ID, es[len(es)-1].ID, model.RetainedExecutors)
	}
	h.report("w1", er(a, 0, model.ExecExited))
	row, es, _ := h.f.State().App(a)
	if len(es) != model.RetainedExecutors || row.FirstExecutorID != es[0].ID {
		t.Fatalf("after executor 0 ended: %d rows, first ID %d, FirstExecutorID %d", len(es), es[0].ID, row.FirstExecutorID)
	}
	h.invariants()
	if g := snapshotRestore(t, h.f); hashOf(t, g) != hashOf(t, h.f) {
		t.Fatal("snapshot of pruned executors differs")
	}
}

// TestWorkerChangedWakesOnlyThatWorker: a placement on one worker closes
// that worker's channel and no other's; a restore closes them all.
func TestWorkerChangedWakesOnlyThatWorker(t *testing.T) {
	h := newHarness(t)
	h.worker("w1", 4, 4096)
	h.worker("w2", 4, 4096)
	w1, w2 := h.f.State().WorkerChanged("w1"), h.f.State().WorkerChanged("w2")
	h.submitDriver(0, false, "w1")
	closed := func(c <-chan struct{}) bool {
		select {
		case <-c:
			return true
		default:
			return false
		}
	}
	if !closed(w1) || closed(w2) {
		t.Fatalf("after a placement on w1: w1 woken %t, w2 woken %t; want true, false", closed(w1), closed(w2))
	}
	w2 = h.f.State().WorkerChanged("w2")
	snap := snapshotRestore(t, h.f)
	var buf memSink
	s, _ := snap.Snapshot()
	if err := s.Persist(&buf); err != nil {
		t.Fatal(err)
	}
	if err := h.f.Restore(io.NopCloser(bytes.NewReader(buf.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if !closed(w2) {
		t.Fatal("a restore did not wake w2")
	}
}

func TestExecutorStateOf(t *testing.T) {
	for in, want := range map[model.DriverState]model.ExecutorState{
		model.DriverRunning: model.ExecRunning, model.DriverFinished: model.ExecExited, model.DriverKilled: model.ExecKilled,
		model.DriverFailed: model.ExecFailed, model.DriverError: model.ExecFailed,
	} {
		if got := model.ExecutorStateOf(in); got != want {
			t.Errorf("model.ExecutorStateOf(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestLiveAppsLeavesOutFinished(t *testing.T) {
	h := newHarness(t)
	a := h.register(appSpec(0))
	b := h.register(appSpec(1))
	h.ok(&model.EndApp{AppID: a, State: model.AppFinished, Time: h.tick()})
	all, _ := h.f.State().Apps()
	live, execs := h.f.State().LiveApps()
	if len(all) != 2 || len(live) != 1 || live[0].ID != b || len(execs) != 1 {
		t.Fatalf("Apps %d, LiveApps %v: want 2 and only %s", len(all), live, b)
	}
}
