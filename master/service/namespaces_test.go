package service

import (
	"errors"
	"strings"
	"testing"

	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/model"
)

// appliedAll returns an FSM that has applied cmds, in order, from index 1.
func appliedAll(t *testing.T, cmds ...model.Command) *fsm.FSM {
	t.Helper()
	f := fsm.New()
	for i, cmd := range cmds {
		data, err := fsm.Encode(cmd)
		if err != nil {
			t.Fatal(err)
		}
		if err, ok := f.ApplyCommand(uint64(i+1), data).(error); ok {
			t.Fatal(err)
		}
	}
	return f
}

// A namespace's bound on waiting drivers counts the submissions in flight
// to it, once each: one whose entry has applied counts as its row, one
// still in flight counts, and one to another namespace does not.
func TestAdmitQueuedCountsInFlightOnce(t *testing.T) {
	etl := model.Namespace{Name: "etl", Weight: 1, DriverShare: 0.5, PriorityMax: 100, MaxQueuedDrivers: 2}
	sub := &model.SubmitDriver{ID: "driver-20261129120000-0000", Token: "t0",
		DriverSpec: model.DriverSpec{Argv: []string{"a"}, Cores: 1, MemoryMB: 64, Namespace: "etl"}}
	f := appliedAll(t, &model.ApplyNamespace{Namespace: etl}, sub)
	s := &Core{Deps: Deps{FSM: f}}
	s.queue.mu.Lock()
	defer s.queue.mu.Unlock()
	s.queue.queued(&queuedSubmit{cmd: sub})
	s.queue.queued(&queuedSubmit{cmd: &model.SubmitDriver{Token: "t-default"}})
	if err := s.queue.admitQueued(s.FSM.State(), "etl"); err != nil {
		t.Fatalf("--max-queued-drivers 2, one waiting and still in flight, one in flight elsewhere: %v; want room for one more", err)
	}
	s.queue.queued(&queuedSubmit{cmd: &model.SubmitDriver{Token: "t1", DriverSpec: model.DriverSpec{Namespace: "etl"}}})
	err := s.queue.admitQueued(s.FSM.State(), "etl")
	if !errors.Is(err, model.ErrQueueFull) || !strings.Contains(err.Error(), "namespace etl has 2 drivers waiting, its --max-queued-drivers (2)") {
		t.Fatalf("one waiting and one in flight: %v; want the bound reached, named", err)
	}
	if err := s.queue.admitQueued(s.FSM.State(), ""); err != nil {
		t.Fatalf("the default namespace, unbounded: %v", err)
	}
}
