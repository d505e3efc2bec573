package checker

import (
	"fmt"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/jepsen/history"
	"github.com/drover-project/drover/master/schedule"
	"github.com/drover-project/drover/model"
)

// NameScheduleSlots names the schedule checker.
const NameScheduleSlots = "schedule-slots"

// spec is one schedule as the checker counts its slots: the parsed spec,
// and the creation its @every periods count from.
type spec struct {
	*schedule.Spec
	created int64
}

// slots counts the slots of s in (since, upto], Unix ms, with the
// leader's own arithmetic (master/schedule.Spec.Due, whose unit tests
// check it against hand-counted slots on a fake clock): the latest due
// slot and the missed ones before it.
func (s spec) slots(since, upto int64) int64 {
	if upto <= since {
		return 0
	}
	d := s.Due(schedule.Window{Since: since, Anchor: s.created, Now: upto})
	if d.Slot == 0 {
		return 0
	}
	return d.Missed + 1
}

// isSlot says whether t (Unix ms) is a slot of s.
func (s spec) isSlot(t int64) bool {
	return s.Due(schedule.Window{Since: t - 1, Anchor: s.created, Now: t}).Slot == t
}

// accounted is how many slots row says it accounted: fired, skipped or
// counted missed (DSTSkipped and ManualRuns are not slots).
func accounted(row *model.Schedule) int64 { return row.Fired + row.Missed + row.Skipped }

// scheduled is a driver a schedule fired, as its first recorded version
// shows it.
type scheduled struct {
	id, schedule string
	slot         int64
	submittedAt  int64
}

// slotCheck is the state of one ScheduleSlots run: every schedule's
// latest recorded row and parsed spec, the drivers schedules fired, the
// manual runs, and what offends.
type slotCheck struct {
	rows    map[string]*model.Schedule
	specs   map[string]spec
	drivers []scheduled
	seen    map[string]bool
	manual  map[string]bool
	off     offenders
}

// spec returns row's parsed spec, parsed once; a spec the checker cannot
// parse offends (the masters refuse such a schedule at its creation).
func (c *slotCheck) spec(row *model.Schedule) (spec, bool) {
	if s, ok := c.specs[row.Name]; ok && s.created == row.CreatedAt {
		return s, true
	}
	p, err := schedule.Parse(row.Cron, row.TimeZone)
	if err != nil {
		c.off.add(fmt.Sprintf("%s: %v", row.Name, err))
		return spec{}, false
	}
	s := spec{Spec: p, created: row.CreatedAt}
	c.specs[row.Name] = s
	return s, true
}

// version checks a new recorded row of a schedule against the one
// before it (none, or one of an earlier schedule of that name: a row
// without progress created with it): the slots between the two last
// accounted slots are exactly those its counts grew by, and the last
// accounted slot never goes back.
func (c *slotCheck) version(index uint64, row *model.Schedule) {
	prev := c.rows[row.Name]
	if prev == nil || prev.CreatedAt != row.CreatedAt {
		prev = &model.Schedule{Name: row.Name, CreatedAt: row.CreatedAt}
	}
	c.rows[row.Name] = row
	for _, r := range row.Runs {
		if r.Manual {
			c.manual[r.DriverID] = true
		}
	}
	s, ok := c.spec(row)
	if !ok {
		return
	}
	if row.LastSlot < prev.LastSlot {
		c.off.add(fmt.Sprintf("%s: last accounted slot went back from %d to %d @%d", row.Name, prev.LastSlot, row.LastSlot, index))
		return
	}
	if n, d := s.slots(prev.Since(), row.LastSlot), accounted(row)-accounted(prev); n != d {
		c.off.add(fmt.Sprintf("%s: slots (%d, %d] are %d, %d accounted @%d", row.Name, prev.Since(), row.LastSlot, n, d, index))
	}
}

// ScheduleSlots proves that each slot of each schedule fired at most
// once and that every slot is accounted for, replaying the recorded row
// changes in index order (the exactly-once promise of docs/schedules.md;
// Nomad's periodic dispatcher launched twice after elections, and
// Kubernetes' CronJob says "two Jobs might be created, or no Job"):
//
//   - every driver carrying a schedule has a slot; no two drivers of a
//     schedule share a slot, manual runs (`schedule run`, marked in the
//     schedule's runs) aside, which have their own;
//   - every slot a driver fired for is a slot of the spec, after the
//     schedule's creation and at or before its last accounted slot, and
//     the driver was committed no earlier than its slot (the leader
//     never fires early; one machine's clock, so no skew is allowed) and,
//     with a starting deadline, no later than the deadline past it;
//   - at every recorded version of a schedule's row, the slots of the
//     spec since the version before (its last accounted slot, or the
//     schedule's creation) up to its new last accounted slot number
//     exactly what its fired, missed and skipped counts grew by: no slot
//     left out, none counted twice; and so do the slots from its creation
//     to its last accounted slot in every master's final row;
//   - its fired count is the number of its drivers that are not manual
//     runs, its manual-runs count the number of manual ones, and every
//     acknowledged schedule-run is a manual run of the log.
//
// Slots are counted with master/schedule, the leader's own arithmetic:
// the checker proves that the leaders and the tables kept their
// accounts through the faults, not that the arithmetic is right. A log
// with gaps, or without the last change of a driver or a schedule of
// the leader's final tables (see NamespaceQuotas), is not checkable (not valid). Offending:
// "SCHEDULE slot T: D1 and D2", "SCHEDULE: slots (A, B] are N, M
// accounted @index", and lines naming a driver and what it broke.
func ScheduleSlots(in Input) Result {
	if in.Changes == nil {
		return Result{Name: NameScheduleSlots, Summary: "no change log recorded"}
	}
	if why := uncheckable(in); why != "" {
		return notCheckable(NameScheduleSlots, why)
	}
	c := &slotCheck{rows: map[string]*model.Schedule{}, specs: map[string]spec{}, seen: map[string]bool{}, manual: map[string]bool{}}
	replay(in.Changes.Events, func(index uint64, batch []api.Event, _ *tables) {
		for _, e := range batch {
			switch {
			case e.Kind == api.EventSchedule && e.Schedule != nil && e.Op != api.OpDelete:
				c.version(index, e.Schedule)
			case e.Kind == api.EventDriver && e.Driver != nil && e.Driver.Schedule != "" && !c.seen[e.ID]:
				c.seen[e.ID] = true
				d := e.Driver
				c.drivers = append(c.drivers, scheduled{id: d.ID, schedule: d.Schedule, slot: d.Slot, submittedAt: d.SubmittedAt})
			}
		}
	})
	fired, manual := c.checkDrivers()
	for _, name := range sortedKeys(c.rows) {
		row := c.rows[name]
		if fired[name] != row.Fired {
			c.off.add(fmt.Sprintf("%s: %d slots fired, %d drivers", name, row.Fired, fired[name]))
		}
		if manual[name] != row.ManualRuns {
			c.off.add(fmt.Sprintf("%s: %d manual runs, %d drivers", name, row.ManualRuns, manual[name]))
		}
	}
	for _, v := range in.Final {
		c.checkFinal(v)
	}
	for _, cp := range clientOps(in.Ops) {
		if cp.inv.F == history.FScheduleRun && cp.outcome() == history.OK && !c.manual[cp.done.Driver] {
			c.off.add(fmt.Sprintf("%s: manual run %s acknowledged, not recorded as one", cp.inv.Schedule, cp.done.Driver))
		}
	}
	var f, m, k, r int64
	for _, row := range c.rows {
		f, m, k, r = f+row.Fired, m+row.Missed, k+row.Skipped, r+row.ManualRuns
	}
	res := result(NameScheduleSlots, c.off.list,
		fmt.Sprintf("%d schedules: every slot accounted once, %d fired, %d missed, %d skipped; %d manual runs; no slot with two drivers", len(c.rows), f, m, k, r),
		fmt.Sprintf("%d breaks of one driver per slot, of the slots' accounts or of their times", len(c.off.list)))
	res.Measured = map[string]float64{"fired": float64(f), "missed": float64(m), "skipped": float64(k), "manual_runs": float64(r)}
	return res
}

// checkDrivers checks every driver a schedule fired, and counts them by
// schedule: the slots fired, and the manual runs.
func (c *slotCheck) checkDrivers() (fired, manual map[string]int64) {
	fired, manual = map[string]int64{}, map[string]int64{}
	bySlot := map[string]string{}
	for _, d := range c.drivers {
		row := c.rows[d.schedule]
		switch {
		case d.slot <= 0:
			c.off.add(fmt.Sprintf("%s of %s: no slot", d.id, d.schedule))
			continue
		case row == nil:
			c.off.add(fmt.Sprintf("%s: fired by %s, which was never created", d.id, d.schedule))
			continue
		case c.manual[d.id]:
			manual[d.schedule]++
			continue
		}
		fired[d.schedule]++
		key := fmt.Sprintf("%s slot %d", d.schedule, d.slot)
		if other, ok := bySlot[key]; ok {
			c.off.add(fmt.Sprintf("%s: %s and %s", key, other, d.id))
		}
		bySlot[key] = d.id
		s, ok := c.spec(row)
		switch {
		case !ok:
		case !s.isSlot(d.slot) || d.slot <= row.CreatedAt:
			c.off.add(fmt.Sprintf("%s: %s is not a slot of %s", key, d.id, row.Cron))
		case d.slot > row.LastSlot:
			c.off.add(fmt.Sprintf("%s: %s fired past the last accounted slot %d", key, d.id, row.LastSlot))
		case d.submittedAt < d.slot:
			c.off.add(fmt.Sprintf("%s: %s committed %d ms early", key, d.id, d.slot-d.submittedAt))
		case row.StartingDeadlineMS > 0 && d.submittedAt-d.slot > row.StartingDeadlineMS:
			c.off.add(fmt.Sprintf("%s: %s committed %d ms late, past its deadline of %d ms", key, d.id, d.submittedAt-d.slot, row.StartingDeadlineMS))
		}
	}
	return fired, manual
}

// checkFinal checks one master's final tables: each schedule row
// accounts every slot from its creation to its last accounted slot, and
// no two of its drivers that are not manual runs share a slot.
func (c *slotCheck) checkFinal(v MasterView) {
	for _, row := range v.Schedules {
		s, ok := c.spec(row)
		if !ok {
			continue
		}
		if n := s.slots(row.CreatedAt, row.LastSlot); n != accounted(row) {
			c.off.add(fmt.Sprintf("%s on %s: slots (%d, %d] are %d, %d accounted", row.Name, v.ID, row.CreatedAt, row.LastSlot, n, accounted(row)))
		}
	}
	bySlot := map[string]string{}
	for _, d := range v.Drivers {
		if d.Schedule == "" || c.manual[d.ID] {
			continue
		}
		key := fmt.Sprintf("%s slot %d", d.Schedule, d.Slot)
		if other, ok := bySlot[key]; ok {
			c.off.add(fmt.Sprintf("%s on %s: %s and %s", key, v.ID, other, d.ID))
		}
		bySlot[key] = d.ID
	}
}
