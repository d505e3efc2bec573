package fsm

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/drover-project/drover/model"
)

// newSchedule returns the settings of a schedule called name with policy
// c, which runs a small driver of namespace ns.
func newSchedule(name string, c model.Concurrency, ns string) model.Schedule {
	return model.Schedule{Name: name, Cron: "0 * * * *", TimeZone: "UTC", Concurrency: c, History: model.DefaultHistory,
		Template: model.SubmitDriver{Name: name, DriverSpec: model.DriverSpec{Argv: []string{"job"}, Cores: 1, MemoryMB: 256, Namespace: ns}}}
}

// scheduleFSM returns an FSM holding schedule s, created at 1,000, and
// its applier.
func scheduleFSM(t *testing.T, s model.Schedule) (*FSM, func(model.Command) any) {
	t.Helper()
	f := New()
	apply := applier(t, f)
	if res := apply(&model.CreateSchedule{Schedule: s, Time: 1000}); res != nil {
		t.Fatalf("create: %v", res)
	}
	return f, apply
}

// fire fires slot of schedule name with the run driverID(seq).
func fire(name string, slot int64, seq int) *model.FireSchedule {
	return &model.FireSchedule{Name: name, Slot: slot, DriverID: driverID(seq), Time: slot + 1}
}

// fired returns apply's result as a FireResult, failing on a refusal.
func fired(t *testing.T, res any) FireResult {
	t.Helper()
	r, ok := res.(FireResult)
	if !ok {
		t.Fatalf("fire: %v", res)
	}
	return r
}

// refusedAlike checks that res is a refusal wrapping want and that the
// entry changed nothing.
func refusedAlike(t *testing.T, f *FSM, apply func(model.Command) any, c model.Command, want error) {
	t.Helper()
	before := hashOf(t, f)
	res := apply(c)
	if err, ok := res.(error); !ok || !errors.Is(err, want) {
		t.Fatalf("%s: %v, want %v", c.CommandType(), res, want)
	}
	if hashOf(t, f) != before {
		t.Fatalf("the refused %s changed the tables", c.CommandType())
	}
}

func scheduleRow(t *testing.T, f *FSM, name string) *model.Schedule {
	t.Helper()
	s, ok := f.State().Schedule(name)
	if !ok {
		t.Fatalf("no schedule %s", name)
	}
	return s
}

// TestFireRefusesAccountedSlots: a slot at or before the last accounted
// one, or the schedule's creation, is refused and changes nothing, so a
// second leader or a retry never fires a slot twice.
func TestFireRefusesAccountedSlots(t *testing.T) {
	f, apply := scheduleFSM(t, newSchedule("s", model.ConcurrencyAllow, ""))
	refusedAlike(t, f, apply, fire("s", 1000, 0), model.ErrSlotAccounted)
	if r := fired(t, apply(fire("s", 3_600_000, 0))); r.Outcome != FireStarted || r.DriverID != driverID(0) {
		t.Fatalf("first slot: %+v", r)
	}
	refusedAlike(t, f, apply, fire("s", 3_600_000, 1), model.ErrSlotAccounted)
	refusedAlike(t, f, apply, fire("s", 3_599_999, 1), model.ErrSlotAccounted)
	if r := fired(t, apply(fire("s", 3_600_001, 1))); r.Outcome != FireStarted {
		t.Fatalf("the next slot: %+v", r)
	}
	d, _ := f.State().Driver(driverID(1))
	if d.Schedule != "s" || d.Slot != 3_600_001 || d.SubmittedAt != 3_600_002 || d.Name != "s" {
		t.Fatalf("run's row: schedule %q slot %d submitted %d name %q", d.Schedule, d.Slot, d.SubmittedAt, d.Name)
	}
	s := scheduleRow(t, f, "s")
	if s.LastSlot != 3_600_001 || s.LastFired != 3_600_001 || s.Fired != 2 || len(s.Runs) != 2 {
		t.Fatalf("schedule: %+v", s)
	}
	// More missed slots than whole seconds between: refused.
	refusedAlike(t, f, apply, &model.FireSchedule{Name: "s", Slot: 3_605_001, Missed: 5, DriverID: driverID(2), Time: 1}, model.ErrInvalidCommand)
}

// TestFireCountsMissedAndLate: the slots an entry says were missed are
// counted, and a late slot is counted missed without a driver.
func TestFireCountsMissedAndLate(t *testing.T) {
	f, apply := scheduleFSM(t, newSchedule("s", model.ConcurrencyAllow, ""))
	fired(t, apply(&model.FireSchedule{Name: "s", Slot: 4 * 3_600_000, Missed: 3, DSTSkipped: 1, DriverID: driverID(0), Time: 1}))
	if r := fired(t, apply(&model.FireSchedule{Name: "s", Slot: 5 * 3_600_000, Late: true, Time: 2})); r.Outcome != FireMissed || r.DriverID != "" {
		t.Fatalf("late slot: %+v", r)
	}
	s := scheduleRow(t, f, "s")
	if s.Fired != 1 || s.Missed != 4 || s.DSTSkipped != 1 || s.LastSlot != 5*3_600_000 || s.LastFired != 4*3_600_000 {
		t.Fatalf("schedule: fired %d missed %d dst %d last %d last fired %d", s.Fired, s.Missed, s.DSTSkipped, s.LastSlot, s.LastFired)
	}
	if _, ok := f.State().Driver(driverID(1)); ok {
		t.Fatal("a late slot made a driver")
	}
}

// TestFireForbidSkips: under forbid a slot is skipped, and counted, while
// a run has not ended; once it has, the next slot fires.
func TestFireForbidSkips(t *testing.T) {
	f, apply := scheduleFSM(t, newSchedule("s", model.ConcurrencyForbid, ""))
	fired(t, apply(fire("s", 10_000, 0)))
	r := fired(t, apply(fire("s", 20_000, 1)))
	if r.Outcome != FireSkipped || !strings.Contains(r.Reason, driverID(0)) {
		t.Fatalf("slot while the run is live: %+v", r)
	}
	if _, ok := f.State().Driver(driverID(1)); ok {
		t.Fatal("a skipped slot made a driver")
	}
	apply(&model.KillDriver{DriverID: driverID(0), Time: 20_500})
	if r := fired(t, apply(fire("s", 30_000, 1))); r.Outcome != FireStarted {
		t.Fatalf("slot after the run ended: %+v", r)
	}
	if s := scheduleRow(t, f, "s"); s.Fired != 2 || s.Skipped != 1 || s.LastSkipReason != r.Reason {
		t.Fatalf("schedule: %+v", s)
	}
}

// TestFireReplaceKills: under replace the live runs end KILLED, with the
// reason, in the entry that starts the new run.
func TestFireReplaceKills(t *testing.T) {
	f, apply := scheduleFSM(t, newSchedule("s", model.ConcurrencyReplace, ""))
	apply(&model.RegisterWorker{ID: "w1", HTTPAddr: "h:1", Cores: 4, MemoryMB: 4096, Time: 2})
	fired(t, apply(fire("s", 10_000, 0)))
	apply(&model.PlaceDrivers{Placements: []model.Placement{{DriverID: driverID(0), Attempt: 1, WorkerID: "w1"}}, Time: 10_100})
	r := fired(t, apply(fire("s", 20_000, 1)))
	if r.Outcome != FireStarted || len(r.Killed) != 1 || r.Killed[0] != driverID(0) {
		t.Fatalf("replace: %+v", r)
	}
	old, _ := f.State().Driver(driverID(0))
	if old.State != model.DriverKilled || !strings.Contains(old.Message, "replaced by schedule s's run of slot") {
		t.Fatalf("the replaced run: %s %q", old.State, old.Message)
	}
	if w, _ := f.State().Worker("w1"); w.CoresUsed != 0 {
		t.Fatalf("the replaced run still holds %d cores", w.CoresUsed)
	}
	if d, _ := f.State().Driver(driverID(1)); d.State != model.DriverSubmitted {
		t.Fatalf("the new run: %s", d.State)
	}
}

// TestManualRun: a manual run has its own slot, does not move the last
// accounted slot nor is refused by it, runs while suspended, and leaves
// no trace when forbid skips it or its submission is refused.
func TestManualRun(t *testing.T) {
	f, apply := scheduleFSM(t, newSchedule("s", model.ConcurrencyForbid, ""))
	fired(t, apply(fire("s", 10_000, 0)))
	before := hashOf(t, f)
	if r := fired(t, apply(&model.FireSchedule{Name: "s", Slot: 5_000, Manual: true, DriverID: driverID(1), Time: 10_001})); r.Outcome != FireSkipped {
		t.Fatalf("manual run under forbid: %+v", r)
	}
	if hashOf(t, f) != before {
		t.Fatal("a manual run forbid skipped changed the tables")
	}
	apply(&model.KillDriver{DriverID: driverID(0), Time: 10_002})
	apply(&model.SuspendSchedule{Name: "s", Suspended: true, Time: 10_003})
	if r := fired(t, apply(&model.FireSchedule{Name: "s", Slot: 5_000, Manual: true, DriverID: driverID(1), Time: 10_004})); r.Outcome != FireStarted {
		t.Fatalf("manual run while suspended: %+v", r)
	}
	s := scheduleRow(t, f, "s")
	if s.LastSlot != 10_000 || s.ManualRuns != 1 || s.Fired != 1 || !s.Runs[len(s.Runs)-1].Manual {
		t.Fatalf("schedule after the manual run: %+v", s)
	}
	refusedAlike(t, f, apply, &model.FireSchedule{Name: "s", Slot: 6_000, Manual: true, Missed: 1, DriverID: driverID(2), Time: 1}, model.ErrInvalidCommand)
	// The same driver ID again (a retried entry): refused as a
	// submission would be.
	apply(&model.KillDriver{DriverID: driverID(1), Time: 10_005})
	refusedAlike(t, f, apply, &model.FireSchedule{Name: "s", Slot: 7_000, Manual: true, DriverID: driverID(1), Time: 1}, model.ErrDuplicateID)
}

// TestSuspendedRefusesSlots: a suspended schedule refuses its slots; once
// resumed, the next slot fires.
func TestSuspendedRefusesSlots(t *testing.T) {
	f, apply := scheduleFSM(t, newSchedule("s", model.ConcurrencyAllow, ""))
	apply(&model.SuspendSchedule{Name: "s", Suspended: true, Time: 2})
	refusedAlike(t, f, apply, fire("s", 10_000, 0), model.ErrScheduleSuspended)
	apply(&model.SuspendSchedule{Name: "s", Suspended: false, Time: 3})
	if r := fired(t, apply(&model.FireSchedule{Name: "s", Slot: 20_000, Missed: 1, DriverID: driverID(0), Time: 20_001})); r.Outcome != FireStarted {
		t.Fatalf("after resume: %+v", r)
	}
	refusedAlike(t, f, apply, &model.SuspendSchedule{Name: "nope", Suspended: true}, model.ErrUnknownSchedule)
}

// TestFireTemplateRefusedSkips: a run whose submission would be refused
// (its namespace's queue full, the namespace deleted) accounts its slot
// as skipped, with the refusal as the reason.
func TestFireTemplateRefusedSkips(t *testing.T) {
	f := New()
	apply := applier(t, f)
	apply(&model.ApplyNamespace{Namespace: model.Namespace{Name: "etl", MaxQueuedDrivers: 1, Weight: 1, DriverShare: 0.5, PriorityMax: 100}, Time: 1})
	if res := apply(&model.CreateSchedule{Schedule: newSchedule("s", model.ConcurrencyAllow, "etl"), Time: 2}); res != nil {
		t.Fatal(res)
	}
	fired(t, apply(fire("s", 10_000, 0)))
	r := fired(t, apply(fire("s", 20_000, 1)))
	if r.Outcome != FireSkipped || !strings.Contains(r.Reason, "namespace queue full") {
		t.Fatalf("queue full: %+v", r)
	}
	s := scheduleRow(t, f, "s")
	if s.LastSlot != 20_000 || s.Skipped != 1 || s.LastSkipReason != r.Reason {
		t.Fatalf("schedule: %+v", s)
	}
	apply(&model.KillDriver{DriverID: driverID(0), Time: 20_100})
	apply(&model.DeleteNamespace{Name: "etl", Time: 20_200})
	if r := fired(t, apply(fire("s", 30_000, 1))); r.Outcome != FireSkipped || !strings.Contains(r.Reason, "unknown namespace: etl") {
		t.Fatalf("namespace deleted: %+v", r)
	}
	// A manual run is refused instead, and changes nothing.
	refusedAlike(t, f, apply, &model.FireSchedule{Name: "s", Slot: 1, Manual: true, DriverID: driverID(1), Time: 1}, model.ErrUnknownNamespace)
}

// TestDeleteScheduleLeavesRuns: a deleted schedule's runs go on and keep
// its name; its slots are refused as unknown.
func TestDeleteScheduleLeavesRuns(t *testing.T) {
	f, apply := scheduleFSM(t, newSchedule("s", model.ConcurrencyAllow, ""))
	fired(t, apply(fire("s", 10_000, 0)))
	if res := apply(&model.DeleteSchedule{Name: "s", Time: 10_100}); res != nil {
		t.Fatal(res)
	}
	if d, _ := f.State().Driver(driverID(0)); d.State.Terminal() || d.Schedule != "s" {
		t.Fatalf("the run after the delete: %s, schedule %q", d.State, d.Schedule)
	}
	refusedAlike(t, f, apply, fire("s", 20_000, 1), model.ErrUnknownSchedule)
	refusedAlike(t, f, apply, &model.DeleteSchedule{Name: "s"}, model.ErrUnknownSchedule)
	if len(f.State().Schedules()) != 0 {
		t.Fatal("the schedule is still listed")
	}
}

// TestScheduleHistoryBound: a schedule keeps its History latest ended
// runs and every run not ended.
func TestScheduleHistoryBound(t *testing.T) {
	s := newSchedule("s", model.ConcurrencyAllow, "")
	s.History = 2
	f, apply := scheduleFSM(t, s)
	for i := range 5 {
		fired(t, apply(fire("s", int64(i+1)*10_000, i)))
		if i < 4 {
			apply(&model.KillDriver{DriverID: driverID(i), Time: int64(i+1)*10_000 + 5})
		}
	}
	// Live run 1 among the ended: fire 6 keeps it.
	fired(t, apply(fire("s", 60_000, 5)))
	var kept []string
	for _, r := range scheduleRow(t, f, "s").Runs {
		kept = append(kept, r.DriverID)
	}
	// Runs 0 to 3 ended; 4 and 5 live: the two latest ended are 2 and 3.
	if want := []string{driverID(2), driverID(3), driverID(4), driverID(5)}; strings.Join(kept, " ") != strings.Join(want, " ") {
		t.Fatalf("runs kept: %v, want %v", kept, want)
	}
}

// TestCreateScheduleRefusals: a name taken, an unknown namespace and
// settings CheckSchedule refuses create nothing.
func TestCreateScheduleRefusals(t *testing.T) {
	f, apply := scheduleFSM(t, newSchedule("s", model.ConcurrencyAllow, ""))
	refusedAlike(t, f, apply, &model.CreateSchedule{Schedule: newSchedule("s", model.ConcurrencyForbid, ""), Time: 2}, model.ErrScheduleExists)
	refusedAlike(t, f, apply, &model.CreateSchedule{Schedule: newSchedule("t", model.ConcurrencyAllow, "nope"), Time: 2}, model.ErrUnknownNamespace)
	bad := newSchedule("t", model.ConcurrencyAllow, "")
	bad.History = 0
	refusedAlike(t, f, apply, &model.CreateSchedule{Schedule: bad, Time: 2}, model.ErrInvalidCommand)
	bad = newSchedule("t", "sometimes", "")
	refusedAlike(t, f, apply, &model.CreateSchedule{Schedule: bad, Time: 2}, model.ErrInvalidCommand)
	bad = newSchedule("t", model.ConcurrencyAllow, "")
	bad.Template.Token = "tok"
	refusedAlike(t, f, apply, &model.CreateSchedule{Schedule: bad, Time: 2}, model.ErrInvalidCommand)
	// Progress in the payload is not taken.
	p := newSchedule("u", model.ConcurrencyAllow, "")
	p.LastSlot, p.Fired = 1<<40, 7
	apply(&model.CreateSchedule{Schedule: p, Time: 3})
	if s := scheduleRow(t, f, "u"); s.LastSlot != 0 || s.Fired != 0 || s.CreatedAt != 3 {
		t.Fatalf("created with progress: %+v", s)
	}
}

// TestRandomSchedulesFireEachSlotOnce applies random logs of fires
// (slots before, at and after the last accounted one, late, with missed
// counts, manual), suspensions, kills, placements, reports and queue
// bounds, and checks after every entry that no schedule has two drivers
// of one slot, that its last accounted slot never moves back, and that
// its counts add up to the slots its accepted fires accounted; and at
// the end that a snapshot restores the same tables.
func TestRandomSchedulesFireEachSlotOnce(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		f := New()
		apply := applier(rt, f)
		apply(&model.RegisterWorker{ID: "w1", HTTPAddr: "h:1", Cores: 8, MemoryMB: 8192})
		apply(&model.ApplyNamespace{Namespace: model.Namespace{Name: "etl", MaxQueuedDrivers: 2, Weight: 1, DriverShare: 1, PriorityMax: 100}, Time: 1})
		names := []string{"a", "b", "c"}
		for i, name := range names {
			c := []model.Concurrency{model.ConcurrencyAllow, model.ConcurrencyForbid, model.ConcurrencyReplace}[i]
			s := newSchedule(name, c, []string{"", "etl"}[i%2])
			s.History = 1 + i
			if res := apply(&model.CreateSchedule{Schedule: s, Time: 1}); res != nil {
				rt.Fatal(res)
			}
		}
		accounted := map[string]int64{} // slots each schedule's accepted fires accounted
		manual := map[string]bool{}     // drivers of manual runs
		seq := 0
		n := rapid.IntRange(1, 120).Draw(rt, "n")
		for i := range n {
			now := int64(i+2) * 1000
			last := map[string]int64{}
			for _, s := range f.State().Schedules() {
				last[s.Name] = s.LastSlot
			}
			switch rapid.IntRange(0, 7).Draw(rt, "cmd") {
			case 0, 1, 2:
				name := rapid.SampledFrom(names).Draw(rt, "fs")
				c := &model.FireSchedule{Name: name, Slot: last[name] + int64(rapid.IntRange(-2, 4).Draw(rt, "step"))*1000,
					Late: rapid.IntRange(0, 5).Draw(rt, "late") == 0, Time: now}
				if c.Slot-max(last[name], 1) > 1000 {
					c.Missed = int64(rapid.IntRange(0, int((c.Slot-max(last[name], 1))/1000)-1).Draw(rt, "missed"))
				}
				if !c.Late {
					c.DriverID = driverID(seq)
					seq++
				}
				if _, ok := apply(c).(FireResult); ok {
					accounted[name] += c.Missed + 1
				}
			case 3:
				name := rapid.SampledFrom(names).Draw(rt, "ms")
				id := driverID(seq)
				seq++
				if r, ok := apply(&model.FireSchedule{Name: name, Slot: now, Manual: true, DriverID: id, Time: now}).(FireResult); ok && r.Outcome == FireStarted {
					manual[id] = true
				}
			case 4:
				apply(&model.SuspendSchedule{Name: rapid.SampledFrom(names).Draw(rt, "ss"), Suspended: rapid.Bool().Draw(rt, "sus"), Time: now})
			case 5:
				if ds := f.State().Drivers(); len(ds) > 0 {
					apply(&model.KillDriver{DriverID: rapid.SampledFrom(ds).Draw(rt, "kd").ID, Time: now})
				}
			case 6:
				var ps []model.Placement
				for _, d := range f.State().WaitingDrivers() {
					ps = append(ps, model.Placement{DriverID: d.ID, Attempt: d.Attempt, WorkerID: "w1"})
				}
				apply(&model.PlaceDrivers{Placements: ps, Time: now})
			case 7:
				for _, d := range f.State().Drivers() {
					if d.WorkerID != "" && !d.State.Terminal() && rapid.Bool().Draw(rt, "end") {
						apply(&model.ReportAttempts{WorkerID: "w1", Time: now, Reports: []model.AttemptReport{{DriverID: d.ID, Attempt: d.Attempt, State: model.DriverFinished, ExitCode: intp(0)}}})
					}
				}
			}
			slots := map[string]string{}
			fires := map[string]int64{}
			for _, d := range f.State().Drivers() {
				if d.Schedule == "" || manual[d.ID] {
					continue
				}
				k := fmt.Sprintf("%s@%d", d.Schedule, d.Slot)
				if other, dup := slots[k]; dup {
					rt.Fatalf("slot %s has two drivers: %s and %s", k, other, d.ID)
				}
				slots[k] = d.ID
				fires[d.Schedule]++
			}
			for _, s := range f.State().Schedules() {
				if s.LastSlot < last[s.Name] {
					rt.Fatalf("schedule %s's last slot moved back from %d to %d", s.Name, last[s.Name], s.LastSlot)
				}
				if s.Fired+s.Missed+s.Skipped != accounted[s.Name] || s.Fired != fires[s.Name] {
					rt.Fatalf("schedule %s counts fired %d + missed %d + skipped %d, want %d slots, %d fired", s.Name, s.Fired, s.Missed, s.Skipped, accounted[s.Name], fires[s.Name])
				}
			}
		}
		if a, b := hashOf(rt, f), hashOf(rt, snapshotRestore(rt, f)); a != b {
			rt.Fatalf("snapshot and restore changed the tables: %s vs %s", a, b)
		}
	})
}

// A fire leaves the schedule's row as readers hold it: the run's driver
// row gets an argv of its own to intern, rather than the template's,
// which the API encodes at the same time (under -race, a write into the
// template's argv while it is read fails the test).
func TestFireLeavesTheTemplateToReaders(t *testing.T) {
	f, apply := scheduleFSM(t, newSchedule("nightly", model.ConcurrencyAllow, ""))
	row := scheduleRow(t, f, "nightly")
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 100 {
			if _, err := json.Marshal(row); err != nil {
				t.Error(err)
			}
		}
	}()
	fired(t, apply(fire("nightly", 3_600_000, 1)))
	<-done
	if d, ok := f.State().Driver(driverID(1)); !ok || !slices.Equal(d.Argv, []string{"job"}) {
		t.Fatalf("the run: %+v", d)
	}
}
