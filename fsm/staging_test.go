package fsm

import (
	"testing"

	"github.com/drover-project/drover/model"
)

func (h *harness) attemptReport(workerID string, r model.AttemptReport) {
	h.t.Helper()
	h.ok(&model.ReportAttempts{WorkerID: workerID, Reports: []model.AttemptReport{r}, Time: h.tick()})
}

func (h *harness) wantDriver(id string, state model.DriverState, message string, staging bool) *model.Driver {
	h.t.Helper()
	d, ok := h.f.State().Driver(id)
	if !ok || d.State != state || d.Message != message || d.Staging != staging {
		h.t.Fatalf("driver %s: %+v, want %s, message %q, staging %t", id, d, state, message, staging)
	}
	return d
}

// A staging report makes its line the message of a driver whose current
// attempt has not started, once per change: the same line again changes
// nothing (no event, no UpdatedAt), nor does a line of another attempt
// or worker, or one after the start. The start clears the line; an end
// or a relaunch puts its own reason in its place.
func TestStagingReportsSetTheMessageOncePerChange(t *testing.T) {
	h := newHarness(t)
	h.worker("w1", 4, 4096)
	h.worker("w2", 4, 4096)
	id := h.submitDriver(1, false, "w1")
	line := func(s string) model.AttemptReport {
		return model.AttemptReport{DriverID: id, Attempt: 1, State: model.DriverSubmitted, Reason: s, Staging: true}
	}
	try1, try2 := "fetching http://h/app.jar: connection refused, try 1, next in 1s", "fetching http://h/app.jar: connection refused, try 2, next in 2s"
	h.attemptReport("w1", line(try1))
	d := h.wantDriver(id, model.DriverSubmitted, try1, true)
	if d.UpdatedAt != h.now || d.ModifyIndex != h.idx {
		t.Fatalf("driver %+v not updated at %d (index %d)", d, h.now, h.idx)
	}
	h.unchanged(&model.ReportAttempts{WorkerID: "w1", Reports: []model.AttemptReport{line(try1)}, Time: h.tick()})
	h.unchanged(&model.ReportAttempts{WorkerID: "w2", Reports: []model.AttemptReport{line(try2)}, Time: h.tick()})
	stale := line(try2)
	stale.Attempt = 2
	h.unchanged(&model.ReportAttempts{WorkerID: "w1", Reports: []model.AttemptReport{stale}, Time: h.tick()})
	h.attemptReport("w1", line(try2))
	h.wantDriver(id, model.DriverSubmitted, try2, true)
	h.invariants()

	h.driverReport("w1", id, 1, model.DriverRunning)
	h.wantDriver(id, model.DriverRunning, "", false)
	h.unchanged(&model.ReportAttempts{WorkerID: "w1", Reports: []model.AttemptReport{line(try1)}, Time: h.tick()})
	if rec := h.f.t.Drivers[id].CurrentAttempt(); rec.Reason != "" {
		t.Fatalf("the attempt's history keeps the staging line %q", rec.Reason)
	}

	// A permanent failure ends an unsupervised driver with its reason.
	failed := h.submitDriver(2, false, "w1")
	h.attemptReport("w1", model.AttemptReport{DriverID: failed, Attempt: 1, State: model.DriverSubmitted, Reason: try1, Staging: true})
	h.attemptReport("w1", model.AttemptReport{DriverID: failed, Attempt: 1, State: model.DriverFailed, Reason: "fetch http://h/app.jar: 404 Not Found"})
	h.wantDriver(failed, model.DriverFailed, "fetch http://h/app.jar: 404 Not Found", false)

	// A supervised driver whose worker is lost while it stages is
	// relaunched, saying why.
	sup := h.submitDriver(3, true, "w2")
	h.attemptReport("w2", model.AttemptReport{DriverID: sup, Attempt: 1, State: model.DriverSubmitted, Reason: try1, Staging: true})
	h.ok(&model.WorkerLost{WorkerID: "w2", Reason: "worker w2 lost", Time: h.tick()})
	h.wantDriver(sup, model.DriverRelaunching, "worker w2 lost", false)

	// A SUBMITTED report without Staging, which no worker sent before,
	// keeps its old meaning: the message stays.
	h.submitDriver(4, false, "w1")
	h.attemptReport("w1", model.AttemptReport{DriverID: driverID(4), Attempt: 1, State: model.DriverSubmitted, Reason: "no staging"})
	h.wantDriver(driverID(4), model.DriverSubmitted, "", false)
	h.invariants()
}

// An executor's staging report makes its line the LAUNCHING executor's
// message, once per change, until it runs.
func TestExecutorStagingReportsSetTheMessage(t *testing.T) {
	h := newHarness(t)
	h.worker("w1", 4, 4096)
	app := h.register(appSpec(1))
	h.mustPlace(ep(app, 0, "w1"))
	line := model.ExecutorReport{AppID: app, ExecutorID: 0, State: model.ExecLaunching, Reason: "fetching http://h/x.jar: 503 Service Unavailable, try 1, next in 1s", Staging: true}
	h.report("w1", line)
	if e := h.exec(app, 0); e.State != model.ExecLaunching || e.Message != line.Reason || !e.Staging {
		t.Fatalf("executor %+v, want LAUNCHING with the staging line", e)
	}
	h.ignored("w1", line)
	h.report("w1", model.ExecutorReport{AppID: app, ExecutorID: 0, State: model.ExecRunning})
	if e := h.exec(app, 0); e.State != model.ExecRunning || e.Message != "" || e.Staging {
		t.Fatalf("executor %+v, want RUNNING without a message", e)
	}
	h.ignored("w1", line)
	h.invariants()
}
