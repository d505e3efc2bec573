package fsm

import (
	"encoding/json"
	"sync"
	"testing"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/events"
)

// Every event keeps its row as it was at the event's index, whatever later
// entries do to the row: an entry changes a copy of a driver row that an
// earlier entry made (ownDriver), never the row an event holds, and a
// worker's event holds a copy of its row. The scenario changes the same
// drivers and workers again and again (placements, reports, relaunches,
// kills, a worker's loss, custom resources held and freed). Under -race a
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
		drivers := 0
		for _, s := range all {
			if text, _ := json.Marshal(s.e); string(text) != s.text {
				t.Fatalf("the event of %s at index %d changed after it was published:\nthen %s\nnow  %s", s.e.ID, s.e.Index, s.text, text)
			}
			if s.e.Driver != nil {
				drivers++
			}
		}
		if drivers < 20 {
			t.Fatalf("only %d driver events: the scenario should change drivers often", drivers)
		}
	}
}

// A driver row costs its memory once, however many events and snapshots
// hold it: the latest event of each driver and a snapshot taken after
// hold the row of the drivers table itself, not copies of it.
func TestEventsAndSnapshotsShareDriverRows(t *testing.T) {
	f := New()
	sub, _ := f.Subscribe(0, events.Filter{Kinds: map[api.EventKind]bool{api.EventDriver: true}}, 1<<30)
	defer sub.Close()
	for i, e := range sharingLog(t) {
		f.ApplyCommand(uint64(i+1), e)
	}
	batches, err := sub.Take()
	if err != nil {
		t.Fatal(err)
	}
	latest := map[string]api.Event{}
	for _, b := range batches {
		for _, e := range b.Events {
			latest[e.ID] = e
		}
	}
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if len(latest) != len(f.t.Drivers) || len(latest) == 0 {
		t.Fatalf("events of %d drivers, %d in the table", len(latest), len(f.t.Drivers))
	}
	for id, d := range f.t.Drivers {
		if latest[id].Driver != d {
			t.Errorf("the latest event of %s holds a copy of its row", id)
		}
		if snap.(*snapshot).t.Drivers[id] != d {
			t.Errorf("the snapshot holds a copy of the row of %s", id)
		}
	}
}
