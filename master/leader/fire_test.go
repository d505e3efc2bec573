package leader

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/fsm/events"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/model/ids"
)

// t0 is a creation time on a whole second, Unix ms.
const t0 = int64(1_800_000_000_000)

// fireTerm is a term over a fresh FSM holding schedule "nightly" of
// spec cron, created at created, committing straight into the FSM (one
// entry at a time, as Raft applies them).
func fireTerm(t testing.TB, cron string, created int64) (*Term, *fsm.FSM) {
	t.Helper()
	f := fsm.New()
	var mu sync.Mutex
	var idx uint64
	apply := func(c model.Command) (any, error) {
		data, err := fsm.Encode(c)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		idx++
		res := f.ApplyCommand(idx, data)
		if err, ok := res.(error); ok {
			return nil, err
		}
		return res, nil
	}
	term := &Term{IDs: ids.NewMaker(0, 0), d: Deps{FSM: f, Apply: apply, Log: slog.New(slog.DiscardHandler)}}
	sc := model.Schedule{Name: "nightly", Cron: cron, TimeZone: "UTC", Concurrency: model.ConcurrencyAllow, History: 100,
		Template: model.SubmitDriver{Name: "etl", DriverSpec: model.DriverSpec{Argv: []string{"job"}, Cores: 1, MemoryMB: 256}}}
	if _, err := apply(&model.CreateSchedule{Schedule: sc, Time: created}); err != nil {
		t.Fatal(err)
	}
	return term, f
}

// row is schedule "nightly" as f holds it.
func row(t testing.TB, f *fsm.FSM) *model.Schedule {
	t.Helper()
	sc, ok := f.State().Schedule("nightly")
	if !ok {
		t.Fatal("schedule nightly is gone")
	}
	return sc
}

// slotDrivers counts the drivers of schedule "nightly" by slot.
func slotDrivers(f *fsm.FSM) map[int64]int {
	out := map[int64]int{}
	for _, d := range f.State().Drivers() {
		if d.Schedule == "nightly" {
			out[d.Slot]++
		}
	}
	return out
}

// Each due slot fires once, at the tick that reaches it; a tick between
// slots fires nothing; the next slot is the wait.
func TestFireEachDueSlotOnce(t *testing.T) {
	term, f := fireTerm(t, "@every 1s", t0)
	fr := newFirer(term)
	fr.load(f.State().Schedules(), t0)
	if w := fr.wait(t0); w != time.Second {
		t.Fatalf("wait at creation = %v, want 1s", w)
	}
	for at := t0 + 1000; at <= t0+5000; at += 500 {
		fr.fire(at)
		// What the duty does with the fire's event.
		fr.update(row(t, f), at)
	}
	sc := row(t, f)
	if sc.Fired != 5 || sc.Missed != 0 || sc.LastSlot != t0+5000 {
		t.Fatalf("fired %d missed %d last %d, want 5, 0, %d", sc.Fired, sc.Missed, sc.LastSlot, t0+5000)
	}
	for slot, n := range slotDrivers(f) {
		if n != 1 || (slot-t0)%1000 != 0 {
			t.Fatalf("slot %d has %d drivers", slot, n)
		}
	}
	if w := fr.wait(t0 + 5000); w != time.Second {
		t.Fatalf("wait after slot 5 = %v, want 1s", w)
	}
}

// A leader that reaches the schedule late fires the latest slot and
// counts the ones before it missed; with a starting deadline passed, the
// latest is counted missed too and starts nothing.
func TestFireCountsMissedSlots(t *testing.T) {
	term, f := fireTerm(t, "@every 1s", t0)
	fr := newFirer(term)
	fr.load(f.State().Schedules(), t0+10_500)
	fr.fire(t0 + 10_500)
	sc := row(t, f)
	if sc.Fired != 1 || sc.Missed != 9 || sc.LastSlot != t0+10_000 {
		t.Fatalf("fired %d missed %d last %d, want 1, 9, %d", sc.Fired, sc.Missed, sc.LastSlot, t0+10_000)
	}
	if got := slotDrivers(f); len(got) != 1 || got[t0+10_000] != 1 {
		t.Fatalf("drivers by slot %v, want one for %d", got, t0+10_000)
	}
}

// A run bound by a starting deadline is proposed only once a quorum
// confirms the leader: while it cannot, the slot waits, and past the
// deadline it is counted missed, never started; a schedule without a
// deadline fires meanwhile.
func TestFireWithADeadlineWaitsForAQuorum(t *testing.T) {
	term, f := fireTerm(t, "@every 1s", t0)
	bounded := *row(t, f)
	bounded.Name, bounded.Cron, bounded.StartingDeadlineMS, bounded.CreatedAt = "bounded", "@every 10s", 1500, 0
	if _, err := term.d.Apply(&model.CreateSchedule{Schedule: bounded, Time: t0}); err != nil {
		t.Fatal(err)
	}
	quorum := errors.New("no quorum")
	confirmed := false
	term.d.VerifyLeader = func() error {
		if confirmed {
			return nil
		}
		return quorum
	}
	fr := newFirer(term)
	fr.load(f.State().Schedules(), t0)
	// tick is the duty's round: fire, then the events of the rows the
	// fires changed.
	seen := f.Index()
	tick := func(at int64, quorum bool) *model.Schedule {
		confirmed = quorum
		fr.fire(at)
		for _, sc := range f.State().Schedules() {
			if sc.ModifyIndex > seen {
				fr.update(sc, at)
			}
		}
		seen = f.Index()
		b, _ := f.State().Schedule("bounded")
		return b
	}
	if b := tick(t0+10_000, false); b.LastSlot != 0 || row(t, f).LastSlot != t0+10_000 {
		t.Fatalf("without a quorum: bounded's last slot %d, nightly's %d; want bounded held, nightly fired", b.LastSlot, row(t, f).LastSlot)
	}
	if w := fr.wait(t0 + 10_000); w != fireRetry {
		t.Fatalf("bounded is tried again in %v, want %v", w, fireRetry)
	}
	// Confirmed within the deadline: the slot fires.
	if b := tick(t0+11_000, true); b.Fired != 1 || b.LastFired != t0+10_000 {
		t.Fatalf("confirmed 1 s after the slot: fired %d, last fired %d; want slot %d", b.Fired, b.LastFired, t0+10_000)
	}
	// Unconfirmed until past the deadline: counted missed, no run.
	tick(t0+20_000, false)
	tick(t0+21_000, false)
	if b := tick(t0+22_000, true); b.Fired != 1 || b.Missed != 1 || b.LastSlot != t0+20_000 {
		t.Fatalf("confirmed 2 s after the slot: fired %d missed %d last slot %d; want slot %d missed", b.Fired, b.Missed, b.LastSlot, t0+20_000)
	}
	n := 0
	for _, d := range f.State().Drivers() {
		if d.Schedule == "bounded" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("bounded started %d runs, want 1", n)
	}
}

// A clock behind the last accounted slot (a new leader whose clock lags)
// fires nothing, and waits for the slot after the last accounted one.
func TestFireClockBehindFiresNothing(t *testing.T) {
	term, f := fireTerm(t, "@every 1s", t0)
	fr := newFirer(term)
	fr.load(f.State().Schedules(), t0+10_000)
	fr.fire(t0 + 10_000)
	index := f.Index()
	behind := newFirer(term)
	behind.load(f.State().Schedules(), t0+5_000)
	behind.fire(t0 + 5_000)
	if f.Index() != index {
		t.Fatalf("a clock behind the last slot committed %d entries", f.Index()-index)
	}
	if w := behind.wait(t0 + 5_000); w != 6*time.Second {
		t.Fatalf("wait = %v, want 6s (the slot after the last accounted one)", w)
	}
}

// A suspended schedule fires nothing; resumed, its latest slot fires and
// the ones it passed are counted missed.
func TestFireSuspendedFiresNothing(t *testing.T) {
	term, f := fireTerm(t, "@every 1s", t0)
	mustApply(t, term)(&model.SuspendSchedule{Name: "nightly", Suspended: true, Time: t0})
	fr := newFirer(term)
	fr.load(f.State().Schedules(), t0+5_000)
	index := f.Index()
	fr.fire(t0 + 5_000)
	if f.Index() != index || fr.wait(t0+5_000) != time.Hour {
		t.Fatalf("a suspended schedule committed %d entries, or waits %v", f.Index()-index, fr.wait(t0+5_000))
	}
	mustApply(t, term)(&model.SuspendSchedule{Name: "nightly", Time: t0 + 5_200})
	fr.update(row(t, f), t0+5_300)
	fr.fire(t0 + 5_300)
	if sc := row(t, f); sc.Fired != 1 || sc.Missed != 4 {
		t.Fatalf("after resume fired %d missed %d, want 1 and 4", sc.Fired, sc.Missed)
	}
}

// The duty itself, on the real clock: it fires each slot of a schedule
// every second; stopped and started again as a new leader's would be
// (a new ID maker, nothing in memory), it carries on from the tables and
// fires no slot twice; every slot up to the last accounted one is fired
// or counted missed.
func TestFireSchedulesAcrossRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for some seconds on the real clock")
	}
	created := time.Now().UnixMilli()
	term, f := fireTerm(t, "@every 1s", created)
	sub, _ := f.Subscribe(f.Index(), events.Filter{Kinds: map[model.EventKind]bool{model.EventSchedule: true}}, 1<<10)
	defer sub.Close()
	run := func(term *Term, fired int64) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); term.fireSchedules(ctx) }()
		defer func() { cancel(); <-done }()
		timeout := time.After(15 * time.Second)
		for row(t, f).Fired < fired {
			select {
			case <-sub.Ready():
				if _, err := sub.Take(); err != nil {
					t.Fatal(err)
				}
			case <-timeout:
				t.Fatalf("fired %d slots in 15 s, want %d", row(t, f).Fired, fired)
			}
		}
	}
	run(term, 2)
	next := &Term{IDs: ids.NewMaker(f.State().NextDriverSeq(), f.State().NextAppSeq()), d: term.d}
	run(next, 4)
	sc := row(t, f)
	byslot := slotDrivers(f)
	for slot, n := range byslot {
		if n != 1 {
			t.Fatalf("slot %d has %d drivers", slot, n)
		}
	}
	anchor := created - created%1000
	if slots := (sc.LastSlot - anchor) / 1000; sc.Fired+sc.Missed+sc.Skipped != slots || int64(len(byslot)) != sc.Fired {
		t.Fatalf("fired %d + missed %d + skipped %d, %d slots with drivers; want %d slots accounted", sc.Fired, sc.Missed, sc.Skipped, len(byslot), slots)
	}
	var lates []int64
	for _, d := range f.State().Drivers() {
		if late := d.SubmittedAt - d.Slot; d.Schedule == "nightly" {
			if late < 0 || late > 1000 {
				t.Errorf("slot %d's driver submitted %d ms after it", d.Slot, late)
			}
			lates = append(lates, late)
		}
	}
	slices.Sort(lates)
	t.Logf("drivers submitted after their slots: %v ms", lates)
}

// BenchmarkFire10k is ten seconds of a leader's firing of 10,000
// schedules of @every 10s, created a millisecond apart so their slots
// spread over the ten seconds, ticked every 100 ms and committed into an
// in-memory FSM (Raft's own cost aside). Its time per op against the ten
// seconds it stands for is the share of a core the duty and the fires'
// apply take.
func BenchmarkFire10k(b *testing.B) {
	const n = 10_000
	term, f := fireTerm(b, "@every 10s", t0)
	for i := 1; i < n; i++ {
		sc := *row(b, f)
		sc.Name = "s" + strconv.Itoa(i)
		sc.Runs, sc.Fired, sc.LastSlot, sc.LastFired = nil, 0, 0, 0
		if _, err := term.d.Apply(&model.CreateSchedule{Schedule: sc, Time: t0 + int64(i)}); err != nil {
			b.Fatal(err)
		}
	}
	fr := newFirer(term)
	fr.load(f.State().Schedules(), t0)
	at := t0 + 100
	b.ResetTimer()
	for range b.N {
		for end := at + 10_000; at < end; at += 100 {
			fr.fire(at)
		}
	}
	b.StopTimer()
	if sc := row(b, f); sc.Fired != int64(b.N) {
		b.Fatalf("schedule nightly fired %d slots in %d periods", sc.Fired, b.N)
	}
	b.ReportMetric(float64(b.Elapsed())/float64(b.N)/float64(10*time.Second), "core-share")
}
