package fsm

import (
	"cmp"
	"slices"

	"github.com/drover-project/drover/fsm/events"
	"github.com/drover-project/drover/model"
)

// DefaultEventBuffer is how many events an FSM holds for subscribers that
// resume: at the rates of a busy cluster, a minute or more.
// DefaultEventBufferBytes bounds their estimated size (events.Size): at
// some 1 KiB an event, what drivers of a few environment variables take,
// the two bounds meet; events of larger programs are held for less long.
const (
	DefaultEventBuffer      = 65536
	DefaultEventBufferBytes = 64 << 20
)

// rowKey names one row: its kind and ID (an executor's is APP_ID/N).
type rowKey struct {
	kind model.EventKind
	id   string
}

// kindOrder is the order of a batch's events by kind; within a kind they
// are by ID, so every master makes the same batch.
var kindOrder = map[model.EventKind]int{model.EventDriver: 0, model.EventApp: 1, model.EventExecutor: 2, model.EventWorker: 3, model.EventSchedule: 4}

// changed records that the entry being applied changed (or dropped) a row.
// Called with f.mu held.
func (f *FSM) changed(kind model.EventKind, id string) {
	if f.touched == nil {
		f.touched = map[rowKey]struct{}{}
	}
	f.touched[rowKey{kind, id}] = struct{}{}
}

// publish stamps the rows the entry at index changed with that index, and
// hands their events to the buffer. Called with f.mu held, at the end of
// Apply.
func (f *FSM) publish(index uint64) {
	if len(f.touched) == 0 {
		return
	}
	keys := make([]rowKey, 0, len(f.touched))
	for k := range f.touched {
		keys = append(keys, k)
	}
	clear(f.touched)
	slices.SortFunc(keys, func(a, b rowKey) int {
		return cmp.Or(cmp.Compare(kindOrder[a.kind], kindOrder[b.kind]), cmp.Compare(a.id, b.id))
	})
	evs := make([]model.Event, 0, len(keys))
	for _, k := range keys {
		evs = append(evs, f.event(index, k, true))
	}
	f.events.Publish(index, evs)
}

// event is the event of row k at index: an upsert carrying the row (a
// driver's or app's own, a copy of a worker's or executor's), or a delete
// when the row is gone. stamp sets the row's ModifyIndex
// to index first.
func (f *FSM) event(index uint64, k rowKey, stamp bool) model.Event {
	e := model.Event{Index: index, Kind: k.kind, ID: k.id, Op: model.OpUpsert}
	switch k.kind {
	case model.EventDriver:
		if d, ok := f.t.Drivers[k.id]; ok {
			if stamp {
				d = f.ownDriver(d)
				d.ModifyIndex = index
			}
			// The buffer holds some 65,000 events: each holds the
			// row itself, which no later entry changes (ownDriver).
			e.Driver = d
			return e
		}
	case model.EventApp:
		if a, ok := f.t.Apps[k.id]; ok {
			if stamp {
				a = f.ownApp(k.id)
				a.ModifyIndex = index
			}
			// The row itself, as for drivers (ownApp): an event
			// of an app holds no copy of its environment.
			e.App = a
			return e
		}
	case model.EventExecutor:
		if x, ok := f.t.Executors[k.id]; ok {
			if stamp {
				x.ModifyIndex = index
			}
			e.Executor = x.Clone()
			return e
		}
	case model.EventWorker:
		if w, ok := f.t.Workers[k.id]; ok {
			if stamp {
				w.ModifyIndex = index
			}
			// A deep copy: Apply changes the addresses the worker's
			// units hold (ResourcesUsed) in place. Without the
			// instance, which no read shows.
			e.Worker = w.View()
			return e
		}
	case model.EventSchedule:
		// Rows are replaced, never changed in place, and carry the
		// index of the entry that made them.
		if s, ok := f.t.Schedules[k.id]; ok {
			e.Schedule = s
			return e
		}
	}
	e.Op = model.OpDelete
	return e
}

// Subscribe returns a subscriber to the changes applied past index after
// that the filter picks (events.Buffer.Subscribe), closed with
// events.ErrTooSlow once more than maxPending events wait unread. When
// the FSM no longer holds every event past after (after is older than the
// buffer, or than a snapshot the tables were restored from), the
// subscriber starts at the FSM's index instead, and first is what the
// caller must send before it: a reset event, then an upsert of every row
// the filter picks as it is at that index.
func (f *FSM) Subscribe(after uint64, filter events.Filter, maxPending int) (sub *events.Sub, first []model.Event) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	sub, complete := f.events.Subscribe(after, filter, maxPending)
	if complete {
		return sub, nil
	}
	sub.Close()
	sub, _ = f.events.Subscribe(f.index, filter, maxPending)
	first = []model.Event{{Index: f.index, Op: model.OpReset}}
	for _, kind := range []model.EventKind{model.EventDriver, model.EventApp, model.EventExecutor, model.EventWorker, model.EventSchedule} {
		if len(filter.Kinds) > 0 && !filter.Kinds[kind] {
			continue
		}
		for _, id := range f.t.rowIDs(kind) {
			if e := f.event(f.index, rowKey{kind, id}, false); filter.Match(e) {
				first = append(first, e)
			}
		}
	}
	return sub, first
}

// rowIDs returns the IDs of one table, in order.
func (t *tables) rowIDs(kind model.EventKind) []string {
	switch kind {
	case model.EventDriver:
		return sortedKeys(t.Drivers)
	case model.EventApp:
		return sortedKeys(t.Apps)
	case model.EventExecutor:
		return sortedKeys(t.Executors)
	case model.EventSchedule:
		return sortedKeys(t.Schedules)
	}
	return sortedKeys(t.Workers)
}
