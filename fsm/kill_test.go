package fsm

import (
	"bytes"
	"testing"

	"github.com/drover-project/drover/model"
)

// A kill's reason is the master's: with AttemptReason the driver and its
// attempt say who killed it, and the worker's final KILLED report ends
// the attempt (state, exit code, end) without replacing the reason. An
// entry from before the field, which JSON without it decodes to, leaves
// the attempt's reason to the report, as it always did.
func TestKillReasonOutlivesTheWorkersReport(t *testing.T) {
	const workerReason = "no longer assigned to worker w1"
	for _, tc := range []struct {
		name       string
		entry      []byte
		message    string
		attemptWas string
	}{
		{"kill with AttemptReason", nil, "killed by a client request", "killed by a client request"},
		{"entry from before AttemptReason", []byte(`{"driver_id":"DRIVER","reason":"killed by a client request","time":5}`),
			"killed by a client request", workerReason},
		{"entry from before AttemptReason, no reason", []byte(`{"driver_id":"DRIVER","time":5}`), "killed on request", workerReason},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.worker("w1", 4, 4096)
			id := h.submitDriver(0, true, "w1")
			h.driverReport("w1", id, 1, model.DriverRunning)
			if tc.entry == nil {
				h.ok(&model.KillDriver{DriverID: id, Reason: "killed by a client request", AttemptReason: true, Time: h.tick()})
			} else {
				entry := append([]byte{FormatJSON, byte(model.CmdKillDriver)}, bytes.ReplaceAll(tc.entry, []byte("DRIVER"), []byte(id))...)
				if res := h.applyRaw(entry); res != nil {
					t.Fatalf("the entry %s: %v", entry, res)
				}
			}
			d, _ := h.f.State().Driver(id)
			if d.State != model.DriverKilled || d.Message != tc.message {
				t.Fatalf("after the kill: %s %q, want KILLED %q", d.State, d.Message, tc.message)
			}
			code := 143
			h.ok(&model.ReportAttempts{WorkerID: "w1", Time: h.tick(), Reports: []model.AttemptReport{
				{DriverID: id, Attempt: 1, State: model.DriverKilled, Runs: 1, ExitCode: &code, Reason: workerReason},
			}})
			d, _ = h.f.State().Driver(id)
			rec := d.CurrentAttempt()
			if d.State != model.DriverKilled || d.Message != tc.message || d.Attempt != 1 {
				t.Errorf("after the worker's report: %s %q attempt %d, want KILLED %q attempt 1", d.State, d.Message, d.Attempt, tc.message)
			}
			if rec.State != model.DriverKilled || rec.Reason != tc.attemptWas || rec.ExitCode == nil || *rec.ExitCode != code || rec.EndedAt == 0 {
				t.Errorf("attempt after the worker's report: %+v, want KILLED with reason %q, exit %d and its end", *rec, tc.attemptWas, code)
			}
			h.invariants()
		})
	}
}
