package worker_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/worker"
	"github.com/drover-project/drover/worker/unitdir"
)

// failsOnceOnCue is a supervised assignment whose first run exits 1 once
// the test creates "release" in the attempt directory, and whose later
// runs sleep.
func failsOnceOnCue(driver string, attempt int) api.Assignment {
	script := `n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count
if [ $n -eq 1 ]; then while [ ! -e release ]; do sleep 0.01; done; exit 1; fi
exec sleep 1000`
	return api.Assignment{DriverID: driver, Attempt: attempt, Argv: []string{"/bin/sh", "-c", script}, Supervise: true, Cores: 1, MemoryMB: 64}
}

// failWhileCutOff runs failsOnceOnCue, cuts the worker off (every
// heartbeat refused, as without a leader), ends the first run, and returns
// once the runner holds the relaunch and three more heartbeats were refused.
func failWhileCutOff(t *testing.T, fm *fakeMaster, cfg worker.Config) {
	t.Helper()
	fm.assign(failsOnceOnCue(driverA, 1))
	fm.waitReport(t, driverA, 1, model.DriverRunning)
	fm.set(func() { fm.down = true })
	dir := filepath.Dir(attemptPath(cfg, driverA, 1, unitdir.StatusFile))
	if err := os.WriteFile(filepath.Join(dir, unitdir.ProgramDir, "release"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the relaunch to be held", func() bool {
		st, err := unitdir.ReadStatus(dir)
		return err == nil && strings.Contains(st.Reason, "waits for a leader")
	})
	var refused int
	fm.set(func() { refused = fm.refused })
	fm.waitFor(t, "three refused heartbeats", func() bool { return fm.refused >= refused+3 })
	if st := readStatus(t, cfg, driverA, 1); st.Runs != 1 || st.PID != 0 {
		t.Fatalf("status while no leader answers = %+v, want 1 run and none live", st)
	}
}

// TestRelaunchWaitsForTheLeader: a supervised program that fails while no
// leader answers its worker is relaunched only once one does, and then
// without waiting for a long poll: the held heartbeat would otherwise keep
// the answer for the whole request timeout.
func TestRelaunchWaitsForTheLeader(t *testing.T) {
	fm := newFakeMaster(t)
	fm.set(func() { fm.hold = true })
	_, cfg := newWorker(t, fm, func(c *worker.Config) { c.RequestTimeout = 2 * failSafe })
	failWhileCutOff(t, fm, cfg)
	fm.set(func() { fm.down = false })
	waitFirst(t, fm, "run 2 RUNNING", fm.reports, func(r model.AttemptReport) bool {
		return r.DriverID == driverA && r.Attempt == 1 && r.State == model.DriverRunning && r.Runs == 2
	})
}

// TestRelaunchFollowsTheLeadersAnswer: the leader's first answer after
// the worker was cut off no longer assigns the attempt (it relaunched the
// driver elsewhere meanwhile): the held relaunch never happens, and the
// attempt ends KILLED after its one run.
func TestRelaunchFollowsTheLeadersAnswer(t *testing.T) {
	fm := newFakeMaster(t)
	_, cfg := newWorker(t, fm, nil)
	failWhileCutOff(t, fm, cfg)
	fm.set(func() {
		fm.assignments = nil
		fm.down = false
	})
	r, _ := fm.waitReport(t, driverA, 1, model.DriverKilled)
	if r.Runs != 1 || !strings.Contains(r.Reason, "no longer assigned") {
		t.Fatalf("final report = %+v, want KILLED as no longer assigned after 1 run", r)
	}
}
