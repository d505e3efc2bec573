package fsm

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/fsm/events"
	"github.com/drover-project/drover/model"
)

// Every event keeps its row as it was at the event's index, whatever later
// entries do to the row: an entry changes a copy of a driver or app row
// that an earlier entry made (ownDriver, ownApp), never the row an event
// holds, and a worker's or executor's event holds a copy of its row. The
// scenario changes the same drivers, apps and workers again and again
// (placements, reports, relaunches, kills, executors placed, failed and
// killed, a worker's loss, custom resources held and freed). Under -race a
// reader encoding the events while the entries apply also shows that
// Apply writes nothing an event holds.
func TestEventsKeepTheirRows(t *testing.T) {
	entries := scenario(t)
	for _, concurrent := range []bool{false, true} {
		f := New()
		sub, _ := f.Subscribe(0, events.Filter{}, 1<<30)
		type seen struct {
			e    api.Event
			text string
		}
		var all []seen
		take := func() {
			batches, err := sub.Take()
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range batches {
				for _, e := range b.Events {
					text, _ := json.Marshal(e)
					all = append(all, seen{e, string(text)})
				}
			}
		}
		if concurrent {
			// The events so far, encoded as a stream reader does,
			// while the entries apply.
			var wg sync.WaitGroup
			wg.Go(func() {
				for i, e := range entries {
					f.ApplyCommand(uint64(i+1), e)
				}
			})
			for range 50 {
				take()
			}
			wg.Wait()
		} else {
			// Each entry's events as it is applied.
			for i, e := range entries {
				f.ApplyCommand(uint64(i+1), e)
				take()
			}
		}
		take()
		sub.Close()
		drivers, apps := 0, 0
		for _, s := range all {
			if text, _ := json.Marshal(s.e); string(text) != s.text {
				t.Fatalf("the event of %s at index %d changed after it was published:\nthen %s\nnow  %s", s.e.ID, s.e.Index, s.text, text)
			}
			if s.e.Driver != nil {
				drivers++
			}
			if s.e.App != nil {
				apps++
			}
		}
		if drivers < 20 || apps < 10 {
			t.Fatalf("only %d driver and %d app events: the scenario should change drivers and apps often", drivers, apps)
		}
	}
}

// appLog registers an app with an environment on a worker, runs, kills
// and replaces its executors, changes its target and ends it: every change
// an app row goes through, each in its own entry.
func appLog(t *testing.T) [][]byte {
	b := &logBuilder{t: t}
	b.add(&model.RegisterWorker{ID: "w1", HTTPAddr: "h:1", Cores: 8, MemoryMB: 8192, Time: 1})
	b.add(&model.RegisterApp{ID: appID(1), Token: "app", Argv: []string{"executor"},
		Env:              map[string]string{"SPARK_HOME": "/opt/spark", "DATA": strings.Repeat("x", 1000)},
		CoresPerExecutor: 1, MemoryPerExecutorMB: 64, ExecutorLimit: -1, MaxExecutorRetries: 5, Time: 2})
	b.add(&model.PlaceExecutors{Placements: []model.ExecutorPlacement{ep(appID(1), 0, "w1"), ep(appID(1), 1, "w1")}, Time: 3})
	b.add(&model.ReportAttempts{WorkerID: "w1", Executors: []model.ExecutorReport{er(appID(1), 0, model.ExecRunning)}, Time: 4})
	b.add(&model.ReportAttempts{WorkerID: "w1", Executors: []model.ExecutorReport{er(appID(1), 1, model.ExecFailed)}, Time: 5})
	b.add(&model.RequestExecutors{AppID: appID(1), Total: 3, Time: 6})
	b.add(&model.KillExecutors{AppID: appID(1), ExecutorIDs: []int{0}, Time: 7})
	b.add(&model.PlaceExecutors{Placements: []model.ExecutorPlacement{ep(appID(1), 2, "w1")}, Time: 8})
	b.add(&model.EndApp{AppID: appID(1), State: model.AppFinished, Time: 9})
	return b.entries
}

// A driver or app row costs its memory once, however many events and
// snapshots hold it: the latest event of each row and a snapshot taken
// after hold the row of the table itself, not copies of it, and every
// event of a row, of a version a later entry replaced too, holds the
// row's own environment.
func TestEventsAndSnapshotsShareRows(t *testing.T) {
	t.Run("drivers", func(t *testing.T) {
		checkRowsShared(t, sharingLog(t), api.EventDriver, func(t *tables) map[string]*model.Driver { return t.Drivers },
			func(e api.Event) *model.Driver { return e.Driver }, func(d *model.Driver) map[string]string { return d.Env })
	})
	t.Run("apps", func(t *testing.T) {
		checkRowsShared(t, appLog(t), api.EventApp, func(t *tables) map[string]*model.App { return t.Apps },
			func(e api.Event) *model.App { return e.App }, func(a *model.App) map[string]string { return a.Env })
	})
}

// checkRowsShared applies entries and checks that the events of kind and
// a snapshot share the rows of table, found in an event by row, and their
// environments, found by env.
func checkRowsShared[R any](t *testing.T, entries [][]byte, kind api.EventKind, table func(*tables) map[string]*R,
	row func(api.Event) *R, env func(*R) map[string]string) {
	f := New()
	sub, _ := f.Subscribe(0, events.Filter{Kinds: map[api.EventKind]bool{kind: true}}, 1<<30)
	defer sub.Close()
	for i, e := range entries {
		f.ApplyCommand(uint64(i+1), e)
	}
	batches, err := sub.Take()
	if err != nil {
		t.Fatal(err)
	}
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	rows := table(f.t)
	latest := map[string]*R{}
	for _, b := range batches {
		for _, e := range b.Events {
			latest[e.ID] = row(e)
			if r, ok := rows[e.ID]; ok && !sameMap(env(row(e)), env(r)) {
				t.Errorf("the event of %s at %d holds a copy of its environment", e.ID, e.Index)
			}
		}
	}
	if len(latest) != len(rows) || len(latest) == 0 || len(batches) <= len(rows) {
		t.Fatalf("%d events of %d rows, %d in the table", len(batches), len(latest), len(rows))
	}
	for id, r := range rows {
		if latest[id] != r {
			t.Errorf("the latest event of %s holds a copy of its row", id)
		}
		if table(&snap.(*snapshot).t)[id] != r {
			t.Errorf("the snapshot holds a copy of the row of %s", id)
		}
	}
}

// Reads hand out the rows of the drivers and apps tables themselves: a
// read costs the slice that lists them, not a copy of each program.
func TestReadsShareRows(t *testing.T) {
	b := &logBuilder{t: t}
	b.entries = append(sharingLog(t), appLog(t)[1:]...)
	b.add(&model.SubmitDriver{ID: driverID(9), Token: "waits", DriverSpec: model.DriverSpec{Argv: []string{"x"}, Cores: 1, MemoryMB: 1}, Time: 20})
	b.add(&model.RegisterApp{ID: appID(2), Token: "live", Argv: []string{"executor"},
		CoresPerExecutor: 1, MemoryPerExecutorMB: 64, ExecutorLimit: -1, Time: 21})
	b.add(&model.PlaceExecutors{Placements: []model.ExecutorPlacement{ep(appID(2), 0, "w1")}, Time: 22})
	f := replay(t, b.entries)
	drivers := f.State().Drivers()
	apps, _ := f.State().Apps()
	live, _ := f.State().LiveApps()
	waiting := f.State().WaitingDrivers()
	_, onW1 := f.State().ExecutorsOn("w1")
	one, _ := f.State().Driver(driverID(1))
	app, _, _ := f.State().App(appID(1))
	f.mu.RLock()
	defer f.mu.RUnlock()
	if len(drivers) != len(f.t.Drivers) || len(apps) != len(f.t.Apps) || len(live) != 1 || len(waiting) != 1 || len(onW1) != 1 {
		t.Fatalf("%d drivers, %d apps (%d live), %d waiting, %d executors on w1", len(drivers), len(apps), len(live), len(waiting), len(onW1))
	}
	for _, d := range append(append(drivers, waiting...), one) {
		if f.t.Drivers[d.ID] != d {
			t.Errorf("a read of the drivers copied %s", d.ID)
		}
	}
	for _, a := range append(append(append(apps, live...), onW1...), app) {
		if f.t.Apps[a.ID] != a {
			t.Errorf("a read of the apps copied %s", a.ID)
		}
	}
}

// The events an FSM holds are bounded in bytes as well as in number: the
// changes of an app whose environment is large push the oldest out long
// before the count would, and a reader resuming from before them starts
// again from the tables, with a reset.
func TestEventBufferBoundedInBytes(t *testing.T) {
	b := &logBuilder{t: t}
	b.add(&model.RegisterApp{ID: appID(1), Token: "app", Argv: []string{"executor"},
		Env: map[string]string{"DATA": strings.Repeat("x", 200<<10)}, CoresPerExecutor: 1, MemoryPerExecutorMB: 64, ExecutorLimit: -1, Time: 1})
	for i := range 10 {
		b.add(&model.RequestExecutors{AppID: appID(1), Total: i, Time: int64(2 + i)})
	}
	for _, c := range []struct {
		bytes  int64
		resync bool
	}{{64 << 20, false}, {1 << 20, true}} {
		f := NewBuffered(events.Bounds{Events: 1000, Bytes: c.bytes})
		for i, e := range b.entries {
			f.ApplyCommand(uint64(i+1), e)
		}
		sub, first := f.Subscribe(1, events.Filter{}, 1000)
		sub.Close()
		if resync := len(first) > 0; resync != c.resync {
			t.Fatalf("11 events of a 200 KiB environment in %d bytes: resuming from index 1 starts again: %v, want %v", c.bytes, resync, c.resync)
		}
		if c.resync && (first[0].Op != api.OpReset || len(first) != 2 || first[1].App == nil || first[1].App.ExecutorLimit != 9) {
			t.Fatalf("the restart: %+v", first)
		}
	}
}
