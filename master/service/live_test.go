package service

import (
	"errors"
	"testing"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/model"
)

// applied returns an FSM that has applied cmd, of type t, as its first
// entry.
func applied(t *testing.T, cmd model.Command) *fsm.FSM {
	t.Helper()
	f := fsm.New()
	data, err := fsm.Encode(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if err, ok := f.ApplyCommand(1, data).(error); ok {
		t.Fatal(err)
	}
	return f
}

// A submission whose entry has applied while the leader still holds it in
// flight is counted once, as a row: at one below a bound the next is
// taken, not refused as if the cluster held one more; and one in flight
// that has not applied counts.
func TestAdmitDriverCountsAnAppliedSubmissionOnce(t *testing.T) {
	cmd := &model.SubmitDriver{ID: "driver-20261129120000-0000", Token: "t0", DriverSpec: model.DriverSpec{Argv: []string{"a"}, Cores: 1, MemoryMB: 64}, Client: "10.0.0.1"}
	f := applied(t, cmd)
	for _, tc := range []struct {
		bound string
		cfg   Config
	}{{"--max-live-drivers", Config{MaxLiveDrivers: 2}}, {"--max-live-drivers-per-client", Config{MaxLiveDriversPerClient: 2}}} {
		s := &Core{cfg: tc.cfg, Deps: Deps{FSM: f}}
		s.queue.mu.Lock()
		s.queue.queued(&queuedSubmit{cmd: cmd})
		if err := s.admitDriver("10.0.0.1"); err != nil {
			t.Errorf("%s 2, one driver applied and still in flight: %v, want it counted once and room for one more", tc.bound, err)
		}
		s.queue.queued(&queuedSubmit{cmd: &model.SubmitDriver{Token: "t1", Client: "10.0.0.1"}})
		if err := s.admitDriver("10.0.0.1"); !errors.Is(err, api.ErrLimitReached) {
			t.Errorf("%s 2, one driver applied and one in flight: %v, want the bound reached", tc.bound, err)
		}
		s.queue.mu.Unlock()
	}
}

// So is an app registration.
func TestAdmitAppCountsAnAppliedRegistrationOnce(t *testing.T) {
	f := applied(t, &model.RegisterApp{ID: "app-20261129120000-0000", Token: "a0", Argv: []string{"e"},
		CoresPerExecutor: 1, MemoryPerExecutorMB: 64, ExecutorLimit: -1})
	s := &Core{cfg: Config{MaxLiveApps: 2}, Deps: Deps{FSM: f}}
	s.registering.tokens = map[string]struct{}{"a0": {}}
	done, err := s.admitApp("a1")
	if err != nil {
		t.Fatalf("--max-live-apps 2, one app applied and still in flight: %v, want it counted once and room for one more", err)
	}
	if _, err := s.admitApp("a2"); !errors.Is(err, api.ErrLimitReached) {
		t.Fatalf("--max-live-apps 2, one app applied and one in flight: %v, want the bound reached", err)
	}
	done()
	if _, err := s.admitApp("a2"); err != nil {
		t.Fatalf("once the registration in flight is done: %v", err)
	}
}
