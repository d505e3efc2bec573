package worker_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/worker"
	"github.com/drover-project/drover/worker/unitdir"
)

// A preemption notice sends the program SIGTERM at once, and its kill
// comes at the notice's deadline, not after the worker's kill timeout: a
// program that ignores SIGTERM hears it, runs on through the grace,
// holding its place in the desired set, and is killed at the deadline;
// the attempt reports KILLED, preempted by the namespace, and the
// heartbeats name the unit as noticed, so that a long poll holds.
func TestPreemptionNoticeTermsThenKillsAtDeadline(t *testing.T) {
	fm := newFakeMaster(t)
	fm.set(func() { fm.hold = true })
	_, cfg := newWorker(t, fm, func(c *worker.Config) { c.KillTimeout = time.Minute })
	a := api.Assignment{DriverID: driverA, Attempt: 1, Cores: 1, MemoryMB: 64, Supervise: true,
		Argv: []string{"/bin/sh", "-c", `echo $$; trap 'echo term' TERM; while :; do sleep 0.05; done`}}
	fm.assign(a)
	fm.waitReport(t, driverA, 1, model.DriverRunning)
	pid := programPID(t, cfg, driverA, 1)
	// Long enough that SIGTERM "at once" (within half of it) cannot be
	// confused with SIGTERM at the deadline even on a loaded machine.
	const grace = 4 * time.Second
	noticed := time.Now()
	fm.preempt(api.PreemptNotice{Preemption: model.Preemption{DriverID: driverA, Attempt: 1, By: "etl"}, Deadline: noticed.Add(grace).UnixMilli()})
	dir := cfg.WorkDir + "/" + driverA + "/attempt-1"
	deadline := time.Now().Add(failSafe)
	for !strings.Contains(readStream(t, dir, unitdir.StdoutFile), "term") {
		if time.Now().After(deadline) {
			t.Fatal("the program never got SIGTERM")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if took := time.Since(noticed); took > grace/2 {
		t.Fatalf("SIGTERM came %s after the notice, want at once", took)
	}
	fm.waitFor(t, "a heartbeat naming the noticed attempt", func() bool {
		return slices.ContainsFunc(fm.polls, func(h api.HeartbeatRequest) bool {
			return slices.Contains(h.Preempting, model.Preemption{DriverID: driverA, Attempt: 1, By: "etl"})
		})
	})
	killed, _ := fm.waitReport(t, driverA, 1, model.DriverKilled)
	took := time.Since(noticed)
	if killed.Reason != "preempted by namespace etl" {
		t.Fatalf("killed report %+v, want the preemption's reason", killed)
	}
	if took < grace-200*time.Millisecond || took > grace+5*time.Second {
		t.Fatalf("killed %s after the notice, want at the %s grace (the kill timeout is a minute)", took, grace)
	}
	assertGone(t, pid)
}
