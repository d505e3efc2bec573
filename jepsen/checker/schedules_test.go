package checker

import (
	"slices"
	"strings"
	"testing"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/jepsen/changes"
	"github.com/drover-project/drover/jepsen/history"
	"github.com/drover-project/drover/model"
)

// createdAt is when the made-up schedules are created (Unix ms, a whole
// second): @every 2s has its slots at createdAt+2000, createdAt+4000, ...
const createdAt = 1_780_000_000_000

// slotLog builds a made-up change log of schedule rows and the drivers
// they fire, each row and driver carrying the index that changed it last.
type slotLog struct {
	evs  []api.Event
	rows map[string]*model.Schedule
	ops  []history.Op
}

// create adds schedule name, @every 2s, created at createdAt, at index.
func (l *slotLog) create(index uint64, name string) {
	l.rows = map[string]*model.Schedule{}
	l.row(index, &model.Schedule{Name: name, Cron: "@every 2s", TimeZone: "UTC", Concurrency: model.ConcurrencyAllow, History: 10, CreatedAt: createdAt})
}

// row adds a version of a schedule's row at index.
func (l *slotLog) row(index uint64, s *model.Schedule) {
	s.ModifyIndex = index
	l.rows[s.Name] = s
	l.evs = append(l.evs, api.Event{Index: index, Kind: api.EventSchedule, ID: s.Name, Op: api.OpUpsert, Schedule: s})
}

// fire adds, at index, schedule name's fire of slot createdAt+at ms: the row
// accounts it (and missed slots before it) and, unless skipped, driver
// id is submitted delay ms after the slot. manual makes it a manual run,
// at that instant, which accounts no slot.
func (l *slotLog) fire(index uint64, name, id string, at, missed int64, skipped, manual bool, delay int64) {
	s := l.rows[name].Clone()
	slot := createdAt + at
	switch {
	case manual:
		s.ManualRuns++
	case skipped:
		s.LastSlot, s.Skipped, s.Missed = slot, s.Skipped+1, s.Missed+missed
	default:
		s.LastSlot, s.LastFired, s.Fired, s.Missed = slot, slot, s.Fired+1, s.Missed+missed
	}
	if id != "" && !skipped {
		s.Runs = append(s.Runs, model.ScheduleRun{Slot: slot, DriverID: id, Manual: manual})
		d := &model.Driver{ID: id, State: model.DriverSubmitted, Schedule: name, Slot: slot, SubmittedAt: slot + delay, ModifyIndex: index}
		l.evs = append(l.evs, api.Event{Index: index, Kind: api.EventDriver, ID: id, Op: api.OpUpsert, Driver: d})
	}
	l.row(index, s)
}

// input is the log with one master's final tables: every row's and
// driver's last recorded version.
func (l *slotLog) input() Input {
	v := MasterView{ID: "m1"}
	last := map[string]api.Event{}
	for _, e := range l.evs {
		last[string(e.Kind)+"/"+e.ID] = e
	}
	for _, k := range sortedKeys(last) {
		if e := last[k]; e.Driver != nil {
			v.Drivers = append(v.Drivers, e.Driver)
		} else {
			v.Schedules = append(v.Schedules, e.Schedule)
		}
	}
	return Input{Changes: &changes.Log{Events: l.evs}, Final: []MasterView{v}, Schedules: []string{"nightly"}, Ops: l.ops}
}

// valid is a history that keeps every promise: a slot fired, a slot
// missed before the next fired (after an outage), a slot skipped.
func valid() *slotLog {
	l := &slotLog{}
	l.create(1, "nightly")
	l.fire(2, "nightly", "d1", 2000, 0, false, false, 3)
	l.fire(3, "nightly", "d2", 6000, 1, false, false, 900)
	l.fire(4, "nightly", "", 8000, 0, true, false, 0)
	return l
}

// TestScheduleSlots: a history with a fired, a missed and a skipped slot
// and a manual run beside a slot passes; each broken promise fails naming
// the schedule, the slot and what broke, and only that.
func TestScheduleSlots(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(l *slotLog)
		want string // "" for valid
	}{
		{"valid", func(*slotLog) {}, ""},
		{"manual run beside a slot", func(l *slotLog) {
			// A manual run at the very instant of the slot d1 fired for.
			l.fire(5, "nightly", "m1", 2000, 0, false, true, 0)
			l.ops = []history.Op{
				{Process: 1, Type: history.Invoke, F: history.FScheduleRun, Schedule: "nightly"},
				{Process: 1, Type: history.OK, F: history.FScheduleRun, Driver: "m1"},
			}
		}, ""},
		{"duplicate slot", func(l *slotLog) {
			// A second driver for slot createdAt+2000, accounted as a fire of the
			// slot after the last: counts add up, the slot has two drivers.
			l.fire(5, "nightly", "d3", 10000, 0, false, false, 5)
			l.evs[len(l.evs)-2].Driver.Slot = createdAt + 2000
		}, "nightly slot 1780000002000: d1 and d3"},
		{"unaccounted slot", func(l *slotLog) {
			// Slot createdAt+10000 passes with neither a driver nor a count.
			l.fire(5, "nightly", "d3", 12000, 0, false, false, 5)
		}, "nightly: slots (1780000008000, 1780000012000] are 2, 1 accounted @5"},
		{"fired early", func(l *slotLog) {
			l.fire(5, "nightly", "d3", 10000, 0, false, false, -1)
		}, "nightly slot 1780000010000: d3 committed 1 ms early"},
		{"fired past the deadline", func(l *slotLog) {
			l.fire(5, "nightly", "d3", 10000, 0, false, false, 1001)
			l.rows["nightly"].StartingDeadlineMS = 1000
		}, "nightly slot 1780000010000: d3 committed 1001 ms late, past its deadline of 1000 ms"},
		{"not a slot of the spec", func(l *slotLog) {
			l.fire(5, "nightly", "d3", 9000, 0, false, false, 5)
		}, "nightly slot 1780000009000: d3 is not a slot of @every 2s"},
		{"a fire without its driver", func(l *slotLog) {
			l.evs = slices.DeleteFunc(l.evs, func(e api.Event) bool { return e.ID == "d2" })
		}, "nightly: 2 slots fired, 1 drivers"},
		{"acknowledged manual run not recorded", func(l *slotLog) {
			l.ops = []history.Op{
				{Process: 1, Type: history.Invoke, F: history.FScheduleRun, Schedule: "nightly"},
				{Process: 1, Type: history.OK, F: history.FScheduleRun, Driver: "m9"},
			}
		}, "nightly: manual run m9 acknowledged, not recorded as one"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := valid()
			c.edit(l)
			r := ScheduleSlots(l.input())
			if c.want == "" {
				if !r.Valid {
					t.Fatalf("want valid, got %s", r.Line())
				}
				return
			}
			if r.Valid || !slices.Contains(r.Offending, c.want) {
				t.Fatalf("want offending %q, got %s", c.want, r.Line())
			}
		})
	}
}

// TestScheduleSlotsCounts: the summary and the measures give the slots
// fired, missed and skipped and the manual runs.
func TestScheduleSlotsCounts(t *testing.T) {
	l := valid()
	l.fire(5, "nightly", "m1", 2000, 0, false, true, 0)
	r := ScheduleSlots(l.input())
	if !r.Valid || r.Summary != "1 schedules: every slot accounted once, 2 fired, 1 missed, 1 skipped; 1 manual runs; no slot with two drivers" {
		t.Fatalf("got %s", r.Line())
	}
	if r.Measured["fired"] != 2 || r.Measured["missed"] != 1 || r.Measured["skipped"] != 1 || r.Measured["manual_runs"] != 1 {
		t.Fatalf("measured %v", r.Measured)
	}
}

// TestScheduleSlotsNotCheckable: a log with a gap, or without the last
// change of a schedule row of the leader's final tables, proves nothing:
// not valid, and it says why.
func TestScheduleSlotsNotCheckable(t *testing.T) {
	in := valid().input()
	in.Changes.Gaps = []changes.Gap{{After: 2, Until: 3}}
	if r := ScheduleSlots(in); r.Valid || !strings.Contains(r.Summary, "not checkable: the change recorder missed up to 1 indexes (3-3)") {
		t.Fatalf("gap: got %s", r.Line())
	}
	in = valid().input()
	in.Final[0].Schedules[0].ModifyIndex = 9
	want := "not checkable: the change log lacks the last change of 1 rows in m1's final tables: schedule nightly recorded up to 4, changed at 9"
	if r := ScheduleSlots(in); r.Valid || r.Summary != want {
		t.Fatalf("lost change: got %s", r.Line())
	}
}

// TestScheduleSlotsFinalTables: a master whose final row counts fewer
// slots than its spec has up to its last accounted slot, or whose final
// drivers hold two of one slot, fails, naming the master.
func TestScheduleSlotsFinalTables(t *testing.T) {
	in := valid().input()
	row := in.Final[0].Schedules[0].Clone()
	row.Missed = 0
	twin := *in.Final[0].Drivers[0]
	twin.ID = "d9"
	in.Final = append(in.Final, MasterView{ID: "m2", Schedules: []*model.Schedule{row}, Drivers: append(slices.Clone(in.Final[0].Drivers), &twin)})
	r := ScheduleSlots(in)
	for _, want := range []string{
		"nightly on m2: slots (1780000000000, 1780000008000] are 4, 3 accounted",
		"nightly slot 1780000002000 on m2: d1 and d9",
	} {
		if r.Valid || !slices.Contains(r.Offending, want) {
			t.Fatalf("want %q, got %s", want, r.Line())
		}
	}
}
