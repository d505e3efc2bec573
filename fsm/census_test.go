package fsm

import (
	"testing"

	"github.com/drover-project/drover/model"
)

// TestCensusMatchesTheTables counts the scenario's tables, which hold
// every state the commands reach, the slow way and compares.
func TestCensusMatchesTheTables(t *testing.T) {
	f := replay(t, scenario(t))
	c := f.State().Census()
	drivers := map[model.DriverState]int{}
	for _, d := range f.State().Drivers() {
		drivers[d.State]++
	}
	apps := map[model.ApplicationState]int{}
	executors := map[model.ExecutorState]int{}
	as, es := f.State().Apps()
	for i, a := range as {
		apps[a.State]++
		for _, e := range es[i] {
			executors[e.State]++
		}
	}
	workers := map[model.WorkerState]int{}
	for _, w := range f.State().Workers() {
		workers[w.State]++
	}
	same := func(what string, got, want map[string]int) {
		t.Helper()
		if len(got) != len(want) {
			t.Errorf("%s: census %v, tables %v", what, got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: census %v, tables %v", what, got, want)
			}
		}
	}
	same("drivers", byName(c.Drivers), byName(drivers))
	same("apps", byName(c.Apps), byName(apps))
	same("executors", byName(c.Executors), byName(executors))
	same("workers", byName(c.Workers), byName(workers))
	if c.Waiting != len(f.State().WaitingDrivers()) || len(drivers) < 2 || len(workers) < 2 {
		t.Errorf("waiting %d, want %d; the scenario should reach several states: %v %v", c.Waiting, len(f.State().WaitingDrivers()), drivers, workers)
	}
}

// byName keys m by the names of its states.
func byName[K ~string](m map[K]int) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		out[string(k)] = v
	}
	return out
}

// TestQueuedAt: a first attempt waits from its submission, a relaunch
// from the loss that ended the attempt before it, whatever the driver's
// current attempt is.
func TestQueuedAt(t *testing.T) {
	b := &logBuilder{t: t}
	id := driverID(1)
	b.add(&model.SubmitDriver{ID: id, DriverSpec: model.DriverSpec{Argv: []string{"x"}, Cores: 1, MemoryMB: 1, Supervise: true}, Time: 1000})
	b.add(&model.RegisterWorker{ID: "w1", HTTPAddr: "h:1", Cores: 1, MemoryMB: 1, Time: 1500})
	b.add(&model.PlaceDrivers{Placements: []model.Placement{{DriverID: id, Attempt: 1, WorkerID: "w1"}}, Time: 2000})
	b.add(&model.WorkerLost{WorkerID: "w1", Time: 5000})
	f := replay(t, b.entries)
	if d, _ := f.State().Driver(id); d.Attempt != 2 || d.State != model.DriverRelaunching {
		t.Fatalf("driver %+v: want attempt 2 RELAUNCHING", d)
	}
	for _, c := range []struct {
		id      string
		attempt int
		at      int64
		ok      bool
	}{
		{id, 1, 1000, true},
		{id, 2, 5000, true},
		{id, 3, 0, false},
		{id, 0, 0, false},
		{driverID(2), 1, 0, false},
	} {
		if at, ok := f.State().QueuedAt(c.id, c.attempt); at != c.at || ok != c.ok {
			t.Errorf("QueuedAt(%s, %d) = %d, %v; want %d, %v", c.id, c.attempt, at, ok, c.at, c.ok)
		}
	}
}
