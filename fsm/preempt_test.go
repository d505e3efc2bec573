package fsm

import (
	"testing"

	"github.com/drover-project/drover/model"
)

// preemptHarness is a harness with namespaces etl (preempting) and ml,
// worker w1 of 8 cores, and ml's driver seq placed there and running.
func preemptHarness(t *testing.T, seq int, supervise bool, maxRestarts int) (*harness, string) {
	h := newHarness(t)
	h.worker("w1", 8, 8192)
	for _, n := range []model.Namespace{
		{Name: "etl", Weight: 1, DriverShare: 1, PriorityMax: 100, Preempt: true},
		{Name: "ml", Weight: 1, DriverShare: 1, PriorityMax: 100},
	} {
		h.ok(&model.ApplyNamespace{Namespace: n, Time: h.tick()})
	}
	id := driverID(seq)
	h.ok(&model.SubmitDriver{ID: id, Token: "pt", DriverSpec: model.DriverSpec{Argv: []string{"d"}, Cores: 2, MemoryMB: 256,
		Supervise: supervise, MaxRestarts: maxRestarts, Namespace: "ml"}, Time: h.tick()})
	h.placeDriver(id, 1, "w1")
	h.driverReport("w1", id, 1, model.DriverRunning)
	return h, id
}

func (h *harness) driverRow(id string) *model.Driver {
	h.t.Helper()
	d, ok := h.f.State().Driver(id)
	if !ok {
		h.t.Fatalf("driver %s is unknown", id)
	}
	return d
}

// notice gives notice to attempt 1 of id for etl, deadline 1000.
func (h *harness) notice(items ...model.Preemption) {
	h.t.Helper()
	h.ok(&model.PreemptAttempts{Items: items, Deadline: 1000, Time: h.tick()})
}

// A notice marks the attempt, keeps its cores held and its state, tells
// its worker (Notices), counts for both namespaces, and wakes a heartbeat
// held for the worker; a second notice of the same attempt, one for the
// attempt's own namespace and one of a superseded attempt change nothing.
func TestPreemptNotice(t *testing.T) {
	h, id := preemptHarness(t, 1, true, 0)
	changed := h.f.State().WorkerChanged("w1")
	if h.f.State().Preempted() {
		t.Fatal("Preempted before any notice")
	}
	h.notice(model.Preemption{DriverID: id, Attempt: 1, By: "etl"})
	if !h.f.State().Preempted() {
		t.Fatal("not Preempted after a notice")
	}
	select {
	case <-changed:
	default:
		t.Fatal("a notice did not wake the worker's held heartbeat")
	}
	d := h.driverRow(id)
	if rec := d.CurrentAttempt(); d.State != model.DriverRunning || rec.PreemptedBy != "etl" || rec.PreemptDeadline != 1000 {
		t.Fatalf("after the notice: %s, attempt %+v", d.State, rec)
	}
	h.wantUsed("w1", 2, 256)
	if got := h.f.State().Notices("w1"); len(got) != 1 || got[0].DriverID != id || got[0].By != "etl" || got[0].Deadline != 1000 {
		t.Fatalf("notices %+v", got)
	}
	if p, q := h.f.State().Preemptions("ml"), h.f.State().Preemptions("etl"); p != (Preemptions{Suffered: 1}) || q != (Preemptions{Caused: 1}) {
		t.Fatalf("counts ml %+v etl %+v", p, q)
	}
	h.unchanged(&model.PreemptAttempts{Items: []model.Preemption{{DriverID: id, Attempt: 1, By: "default"}}, Deadline: 2000, Time: h.tick()})
	h.unchanged(&model.PreemptAttempts{Items: []model.Preemption{{DriverID: id, Attempt: 2, By: "etl"}}, Deadline: 2000, Time: h.tick()})
	h2, id2 := preemptHarness(t, 2, false, 0)
	h2.unchanged(&model.PreemptAttempts{Items: []model.Preemption{{DriverID: id2, Attempt: 1, By: "ml"}}, Deadline: 2000, Time: h2.tick()})
	h.invariants()
}

// A malformed PreemptAttempts is refused whole and changes nothing.
func TestPreemptRefused(t *testing.T) {
	h, id := preemptHarness(t, 1, true, 0)
	for _, c := range []*model.PreemptAttempts{
		{Deadline: 1000, Time: 5},
		{Items: []model.Preemption{{By: "etl"}}, Deadline: 1000, Time: 5},
		{Items: []model.Preemption{{DriverID: id, Attempt: 1, AppID: "app-x", By: "etl"}}, Deadline: 1000, Time: 5},
		{Items: []model.Preemption{{DriverID: id, Attempt: 1}}, Deadline: 1000, Time: 5},
		{Items: []model.Preemption{{DriverID: id, Attempt: 1, By: "etl"}}, Deadline: 4, Time: 5},
	} {
		h.refused(c, model.ErrInvalidCommand)
	}
}

// At the deadline the end relaunches a supervised driver with the
// preemption's reason, frees its cores, and counts no failed run: a
// driver allowed no restart at all is relaunched all the same. The
// snapshot keeps the notice and the counts.
func TestPreemptEndSupervised(t *testing.T) {
	h, id := preemptHarness(t, 1, true, 1)
	h.notice(model.Preemption{DriverID: id, Attempt: 1, By: "etl"})
	restored := snapshotRestore(t, h.f)
	if got := restored.State().Notices("w1"); len(got) != 1 || restored.State().Preemptions("etl").Caused != 1 {
		t.Fatalf("restored notices %+v, counts %+v", got, restored.State().Preemptions("etl"))
	}
	h.ok(&model.PreemptAttempts{Items: []model.Preemption{{DriverID: id, Attempt: 1}}, End: true, Time: 1000})
	d := h.driverRow(id)
	rec := d.AttemptRecord(1)
	if d.State != model.DriverRelaunching || d.Attempt != 2 || d.Message != "preempted by namespace etl" ||
		rec.State != model.DriverKilled || rec.Reason != "preempted by namespace etl" || rec.EndedAt != 1000 {
		t.Fatalf("after the end: %s attempt %d %q, record %+v", d.State, d.Attempt, d.Message, rec)
	}
	if fs := d.FailuresBefore(d.Attempt + 1); len(fs) != 0 {
		t.Fatalf("the preempted run counts as failed: %v", fs)
	}
	h.wantUsed("w1", 0, 0)
	if got := h.f.State().Notices("w1"); len(got) != 0 {
		t.Fatalf("notices after the end: %+v", got)
	}
	// A second end, and a late report of the ended attempt, change nothing.
	h.unchanged(&model.PreemptAttempts{Items: []model.Preemption{{DriverID: id, Attempt: 1}}, End: true, Time: 1001})
	h.placeDriver(id, 2, "w1")
	h.invariants()
}

// An unsupervised driver ends KILLED with the reason; an end of an
// attempt under no notice changes nothing.
func TestPreemptEndUnsupervised(t *testing.T) {
	h, id := preemptHarness(t, 1, false, 0)
	h.unchanged(&model.PreemptAttempts{Items: []model.Preemption{{DriverID: id, Attempt: 1}}, End: true, Time: h.tick()})
	h.notice(model.Preemption{DriverID: id, Attempt: 1, By: "etl"})
	h.ok(&model.PreemptAttempts{Items: []model.Preemption{{DriverID: id, Attempt: 1}}, End: true, Time: 1000})
	if d := h.driverRow(id); d.State != model.DriverKilled || d.Message != "preempted by namespace etl" || d.CurrentAttempt().State != model.DriverKilled {
		t.Fatalf("after the end: %s %q %+v", d.State, d.Message, d.CurrentAttempt())
	}
	h.wantUsed("w1", 0, 0)
	h.invariants()
}

// The program's exit after the notice, reported FAILED or KILLED, ends
// the attempt preempted, not FAILED; one that finished its work during
// the grace ends FINISHED.
func TestPreemptExitDuringGrace(t *testing.T) {
	for _, tc := range []struct {
		state     model.DriverState
		supervise bool
		want      model.DriverState
	}{
		{model.DriverFailed, false, model.DriverKilled},
		{model.DriverKilled, false, model.DriverKilled},
		{model.DriverFailed, true, model.DriverRelaunching},
		{model.DriverFinished, true, model.DriverFinished},
	} {
		h, id := preemptHarness(t, 1, tc.supervise, 0)
		h.notice(model.Preemption{DriverID: id, Attempt: 1, By: "etl"})
		h.driverReport("w1", id, 1, tc.state)
		d := h.driverRow(id)
		if d.State != tc.want {
			t.Fatalf("supervised %v, reported %s: driver %s (%q), want %s", tc.supervise, tc.state, d.State, d.Message, tc.want)
		}
		if rec := d.AttemptRecord(1); tc.want != model.DriverFinished && (rec.State != model.DriverKilled || rec.Reason != "preempted by namespace etl") {
			t.Fatalf("reported %s: record %+v", tc.state, rec)
		}
		h.wantUsed("w1", 0, 0)
		h.invariants()
	}
}

// A preempted executor ends KILLED with the reason, whether at its
// deadline or by its own exit after the notice, and its app counts no
// retry: an app allowed no executor failure lives on.
func TestPreemptExecutor(t *testing.T) {
	h := newHarness(t)
	h.worker("w1", 8, 8192)
	h.ok(&model.ApplyNamespace{Namespace: model.Namespace{Name: "etl", Weight: 1, DriverShare: 1, PriorityMax: 100, Preempt: true}, Time: h.tick()})
	spec := appSpec(1)
	spec.MaxExecutorRetries = 0
	app := h.register(spec)
	h.mustPlace(ep(app, 0, "w1"), ep(app, 1, "w1"))
	h.report("w1", er(app, 0, model.ExecRunning), er(app, 1, model.ExecRunning))
	h.notice(model.Preemption{AppID: app, ExecutorID: 0, By: "etl"}, model.Preemption{AppID: app, ExecutorID: 1, By: "etl"})
	if e := h.exec(app, 0); e.State != model.ExecRunning || e.PreemptedBy != "etl" {
		t.Fatalf("after the notice: %+v", e)
	}
	h.report("w1", er(app, 0, model.ExecFailed))
	h.ok(&model.PreemptAttempts{Items: []model.Preemption{{AppID: app, ExecutorID: 1}}, End: true, Time: 1000})
	for _, id := range []int{0, 1} {
		if e := h.exec(app, id); e.State != model.ExecKilled || e.Message != "preempted by namespace etl" {
			t.Fatalf("executor %d: %s %q", id, e.State, e.Message)
		}
	}
	if a := h.wantAppState(app, model.AppRunning); a.RetryCount != 0 {
		t.Fatalf("retries counted: %d", a.RetryCount)
	}
	if p := h.f.State().Preemptions("default"); p.Suffered != 2 {
		t.Fatalf("default's counts %+v", p)
	}
	h.wantUsed("w1", 0, 0)
	h.invariants()
}
