package leader

import (
	"container/heap"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/fsm/events"
	"github.com/drover-project/drover/master/schedule"
	"github.com/drover-project/drover/model"
)

// The firing of schedules' slots (Kubernetes' CronJob controller, Nomad's
// periodic dispatcher), a duty of each term: the leader keeps every
// schedule's next slot in a heap, sleeps until the earliest or until a
// schedule changes, and commits one FireSchedule per due schedule
// (schedule.Due.Fire). Nothing it holds matters for correctness: it is
// rebuilt from the tables when a term starts, and the tables refuse a
// slot at or before a schedule's last accounted one, so a new leader, a
// retry or a clock stepped back fires no slot twice.

const (
	// maxConcurrentFires bounds the fires committing at once: Raft
	// gathers those in flight into few disk writes, so a thousand
	// schedules due in the same second take a few round trips, not a
	// thousand.
	maxConcurrentFires = 256
	// fireRetry is how soon a fire that was not committed (no quorum,
	// a timeout) is tried again; the slot fires then if it is still the
	// latest due and within its deadline.
	fireRetry = time.Second
	// fireEvents bounds the schedule events the duty may leave unread
	// before its subscription is closed, after which it reloads every
	// schedule from the tables.
	fireEvents = 1 << 16
)

// fireSchedules fires schedules' slots while this master leads.
func (t *Term) fireSchedules(ctx context.Context) {
	f := newFirer(t)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var sub *events.Sub
	defer func() {
		if sub != nil {
			sub.Close()
		}
	}()
	for {
		if sub == nil {
			// Subscribed first, so that no change between the read
			// and the subscription is lost; one seen twice is only
			// recomputed.
			sub, _ = t.d.FSM.Subscribe(t.d.FSM.Index(), events.Filter{Kinds: map[model.EventKind]bool{model.EventSchedule: true}}, fireEvents)
			f.load(t.d.FSM.State().Schedules(), now())
		}
		f.fire(now())
		timer.Reset(f.wait(now()))
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-sub.Ready():
			batches, err := sub.Take()
			if err != nil {
				sub.Close()
				sub = nil
				continue
			}
			at := now()
			for _, b := range batches {
				for _, e := range b.Events {
					if e.Schedule != nil {
						f.update(e.Schedule, at)
					} else {
						f.forget(e.ID)
					}
				}
			}
		}
	}
}

// firer is the state of one term's firing: each schedule's parsed spec
// and next slot.
type firer struct {
	t *Term
	// specs caches each schedule's parsed spec by name, with the spec
	// and zone it was parsed from: a zone's rules load once per term.
	specs map[string]parsedSpec
	// next is each schedule's next slot (Unix ms); the heap holds it,
	// and entries that no longer match next, which pop as stale.
	next  map[string]int64
	slots slotHeap
}

type parsedSpec struct {
	cron, zone string
	spec       *schedule.Spec
}

func newFirer(t *Term) *firer {
	return &firer{t: t, specs: map[string]parsedSpec{}, next: map[string]int64{}}
}

// load replaces what f holds with the schedules scs at at.
func (f *firer) load(scs []*model.Schedule, at int64) {
	clear(f.next)
	f.slots = f.slots[:0]
	kept := make(map[string]parsedSpec, len(scs))
	for _, sc := range scs {
		if p, ok := f.specs[sc.Name]; ok {
			kept[sc.Name] = p
		}
	}
	f.specs = kept
	for _, sc := range scs {
		f.update(sc, at)
	}
}

// update sets schedule sc's next slot from its row at at: now when a slot
// is due (a schedule resumed, or one a fire has not reached yet), else
// the first slot after its last accounted one and at; none while it is
// suspended, when no slot comes within five years, or when its spec does
// not parse here.
func (f *firer) update(sc *model.Schedule, at int64) {
	spec := f.spec(sc)
	if spec == nil || sc.Suspended {
		delete(f.next, sc.Name)
		return
	}
	d := spec.Due(schedule.WindowOf(sc, at))
	when := d.Next
	if d.Slot != 0 {
		when = at
	}
	f.set(sc.Name, when)
}

// forget drops schedule name, deleted.
func (f *firer) forget(name string) {
	delete(f.next, name)
	delete(f.specs, name)
}

// set makes when (Unix ms; 0 for none) schedule name's next slot.
func (f *firer) set(name string, when int64) {
	if when == 0 {
		delete(f.next, name)
		return
	}
	if old, ok := f.next[name]; ok && old == when {
		return
	}
	f.next[name] = when
	heap.Push(&f.slots, slotEntry{at: when, name: name})
	// Stale entries pile up as slots move; rebuild the heap before they
	// outnumber the live ones.
	if len(f.slots) > 2*len(f.next)+1024 {
		f.slots = f.slots[:0]
		for n, w := range f.next {
			f.slots = append(f.slots, slotEntry{at: w, name: n})
		}
		heap.Init(&f.slots)
	}
}

// spec returns sc's parsed spec, parsing it when its spec or zone is new;
// nil when it does not parse on this master (a zone its tzdata lacks),
// which is logged once per term.
func (f *firer) spec(sc *model.Schedule) *schedule.Spec {
	if p, ok := f.specs[sc.Name]; ok && p.cron == sc.Cron && p.zone == sc.TimeZone {
		return p.spec
	}
	spec, err := schedule.Parse(sc.Cron, sc.TimeZone)
	if err != nil {
		f.t.d.Log.Warn("schedule not fired: its spec does not parse on this master", "schedule", sc.Name, "err", err)
	}
	f.specs[sc.Name] = parsedSpec{cron: sc.Cron, zone: sc.TimeZone, spec: spec}
	return spec
}

// wait is how long until the earliest next slot after at, an hour at
// most.
func (f *firer) wait(at int64) time.Duration {
	for len(f.slots) > 0 {
		e := f.slots[0]
		if w, ok := f.next[e.name]; !ok || w != e.at {
			heap.Pop(&f.slots)
			continue
		}
		return min(time.Duration(max(e.at-at, 0))*time.Millisecond, time.Hour)
	}
	return time.Hour
}

// fire commits the fires of the schedules whose next slot is at or
// before at (Unix ms), concurrently, and sets each one's next slot.
func (f *firer) fire(at int64) {
	st := f.t.d.FSM.State()
	var fires []*model.FireSchedule
	// bound holds the fires that start a run within a starting deadline.
	var bound map[*model.FireSchedule]bool
	for len(f.slots) > 0 && f.slots[0].at <= at {
		e := heap.Pop(&f.slots).(slotEntry)
		if w, ok := f.next[e.name]; !ok || w != e.at {
			continue
		}
		delete(f.next, e.name)
		sc, ok := st.Schedule(e.name)
		if !ok || sc.Suspended {
			continue
		}
		spec := f.spec(sc)
		if spec == nil {
			continue
		}
		d := spec.Due(schedule.WindowOf(sc, at))
		var id string
		if d.Slot != 0 && !d.Late {
			id = f.t.IDs.Driver(time.UnixMilli(at))
		}
		if c := d.Fire(sc.Name, id, at); c != nil {
			fires = append(fires, c)
			if sc.StartingDeadlineMS > 0 && !c.Late {
				if bound == nil {
					bound = map[*model.FireSchedule]bool{}
				}
				bound[c] = true
			}
		}
		// The fire's event sets it again from the row it makes.
		f.set(sc.Name, d.Next)
	}
	fires = f.withinDeadlines(fires, bound, at)
	for i, err := range f.commit(fires) {
		if err != nil {
			f.set(fires[i].Name, at+fireRetry.Milliseconds())
		}
	}
}

// withinDeadlines returns fires but for those that start a run bound by
// a starting deadline, which stay only once a quorum confirms that this
// master leads (Deps.VerifyLeader); the others are tried again after
// fireRetry, by when the slot may be counted missed. Raft commits an
// entry its leader appended before losing its quorum once a quorum is
// back, whenever that is: a fire appended by a leader cut off would
// start its run past the deadline it was judged by. Confirming first
// leaves that only to a quorum lost in the round trip between the
// confirmation and the append. Fires without a deadline, and those that
// count a late slot missed, may commit late and go on unchecked.
func (f *firer) withinDeadlines(fires []*model.FireSchedule, bound map[*model.FireSchedule]bool, at int64) []*model.FireSchedule {
	if f.t.d.VerifyLeader == nil || len(bound) == 0 {
		return fires
	}
	err := f.t.d.VerifyLeader()
	if err == nil {
		return fires
	}
	f.t.d.Log.Warn("schedule fires with a starting deadline held back: leadership not confirmed", "err", err)
	return slices.DeleteFunc(fires, func(c *model.FireSchedule) bool {
		if bound[c] {
			f.set(c.Name, at+fireRetry.Milliseconds())
		}
		return bound[c]
	})
}

// commit commits fires, at most maxConcurrentFires at once, and returns
// for each the error of one not committed; a fire the tables refused
// (its slot accounted already, the schedule suspended or gone) is normal
// after a change of leader or a race with a change, and counts as done.
func (f *firer) commit(fires []*model.FireSchedule) []error {
	errs := make([]error, len(fires))
	sem := make(chan struct{}, maxConcurrentFires)
	var wg sync.WaitGroup
	for i, c := range fires {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			res, err := fsm.FireSchedule.Commit(f.t.d.Apply, c)
			log := f.t.d.Log
			switch {
			case errors.Is(err, model.ErrSlotAccounted), errors.Is(err, model.ErrScheduleSuspended), errors.Is(err, model.ErrUnknownSchedule):
				log.Debug("schedule fire refused", "schedule", c.Name, "slot", c.Slot, "err", err)
			case err != nil:
				log.Warn("schedule fire not committed", "schedule", c.Name, "slot", c.Slot, "err", err)
				errs[i] = err
			default:
				log.Info("schedule slot accounted", "schedule", c.Name, "slot", c.Slot, "outcome", res.Outcome,
					"driver", res.DriverID, "missed", c.Missed, "reason", res.Reason, "killed", res.Killed)
			}
		}()
	}
	wg.Wait()
	return errs
}

// slotEntry is one schedule's next slot in the heap.
type slotEntry struct {
	at   int64
	name string
}

// slotHeap is a min-heap of slots by time (container/heap).
type slotHeap []slotEntry

func (h slotHeap) Len() int           { return len(h) }
func (h slotHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h slotHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *slotHeap) Push(x any)        { *h = append(*h, x.(slotEntry)) }
func (h *slotHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
