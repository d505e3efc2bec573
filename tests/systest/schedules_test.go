package systest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/testcluster"
)

// everyRequest is a schedule named name of "@every period" whose runs
// are argv (1 core, 64 MB), with the concurrency policy and starting
// deadline given ("" and 0 for the defaults).
func everyRequest(name string, period time.Duration, conc model.Concurrency, deadline time.Duration, argv ...string) api.ScheduleRequest {
	return api.ScheduleRequest{Name: name, Cron: "@every " + period.String(), Concurrency: conc, StartingDeadlineMS: deadline.Milliseconds(),
		Template: api.SubmitRequest{DriverSpec: model.DriverSpec{Argv: argv, Cores: 1, MemoryMB: 64}}}
}

// scheduleOf is schedule name's status, nil while no master answers (a
// leader killed).
func scheduleOf(cl *client.Client, name string) *api.ScheduleStatus {
	s, err := cl.Schedule(context.Background(), name)
	if err != nil {
		return nil
	}
	return &s
}

// scheduleDrivers is the drivers schedule name started, by slot.
func scheduleDrivers(t *testing.T, cl *client.Client, name string) map[int64][]*model.Driver {
	t.Helper()
	bySlot := map[int64][]*model.Driver{}
	if err := cl.ListDrivers(context.Background(), api.ListQuery{Schedule: name}, func(ds []*model.Driver) error {
		for _, d := range ds {
			bySlot[d.Slot] = append(bySlot[d.Slot], d)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return bySlot
}

// everySlots is the slots (Unix ms) of "@every period" for a schedule
// created at createdAt, up to and including upTo: whole periods from its
// creation cut to the second (docs/schedules.md), computed here and not
// by the masters' code.
func everySlots(createdAt int64, period time.Duration, upTo int64) []int64 {
	var slots []int64
	for s := createdAt - createdAt%1000 + period.Milliseconds(); s <= upTo; s += period.Milliseconds() {
		slots = append(slots, s)
	}
	return slots
}

// checkAccounted checks schedule s ("@every period") against its drivers
// bySlot, listed after s was read: no slot has two drivers, every
// driver's slot is a slot of the spec, the manual runs (by s.Runs)
// aside, each driver fired for the latest slot due when it was submitted
// (a late slot is counted, never fired), and fired + missed + skipped is
// the number of slots up to s.LastSlot. It returns those slots; drivers
// of later slots fired after s was read.
func checkAccounted(t *testing.T, s *api.ScheduleStatus, bySlot map[int64][]*model.Driver, period time.Duration) []int64 {
	t.Helper()
	manual := map[string]bool{}
	for _, r := range s.Runs {
		manual[r.DriverID] = r.Manual
	}
	last := s.LastSlot
	for slot := range bySlot {
		last = max(last, slot)
	}
	grid := everySlots(s.CreatedAt, period, last)
	fired := int64(0)
	for slot, ds := range bySlot {
		if len(ds) != 1 {
			t.Errorf("schedule %s: slot %d has %d drivers", s.Name, slot, len(ds))
		}
		if manual[ds[0].ID] {
			continue
		}
		if slot <= s.LastSlot {
			fired++
		}
		if !slices.Contains(grid, slot) {
			t.Errorf("schedule %s: driver %s has slot %d, not one of the spec's", s.Name, ds[0].ID, slot)
		}
		if late := ds[0].SubmittedAt - slot; late < 0 || late >= period.Milliseconds() {
			t.Errorf("schedule %s: driver %s of slot %d submitted %d ms after it, not while it was the latest due", s.Name, ds[0].ID, slot, late)
		}
	}
	slots := everySlots(s.CreatedAt, period, s.LastSlot)
	if s.Fired+s.Missed+s.Skipped != int64(len(slots)) || fired != s.Fired {
		t.Errorf("schedule %s: fired %d + missed %d + skipped %d, %d slots with a driver; want the %d slots up to %d accounted",
			s.Name, s.Fired, s.Missed, s.Skipped, fired, len(slots), s.LastSlot)
	}
	return slots
}

// TestScheduleFiresAcrossLeaderKills: a schedule of @every 2s on three
// masters goes on firing while the leader is SIGKILLed ten times (and
// restarted), three of those times with a follower for 4 s, without a
// quorum; no slot has two drivers, every driver's slot is a slot of the
// spec, and every slot up to the last accounted one is fired, skipped or
// counted missed, some of them missed.
func TestScheduleFiresAcrossLeaderKills(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	cl, ctx := c.Client(), context.Background()
	if _, err := cl.CreateSchedule(ctx, everyRequest("every2s", 2*time.Second, "", 0, "/bin/true")); err != nil {
		t.Fatal(err)
	}
	fired := func() int64 {
		if s := scheduleOf(cl, "every2s"); s != nil {
			return s.Fired
		}
		return -1
	}
	waitFor(t, 10*time.Second, "a first slot fired", func() bool { return fired() >= 1 })
	for i := range 10 {
		old, err := c.Leader(10 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		killed := []*testcluster.Node{old}
		// Every third kill takes a follower too, for 4 s: an election
		// alone is quicker than a slot, so only a quorum lost makes
		// slots pass without a leader, to be counted missed.
		if i%3 == 2 {
			killed = append(killed, c.Follower(old))
		}
		before := fired()
		for _, m := range killed {
			m.Kill()
			<-m.Exited()
		}
		if len(killed) > 1 {
			time.Sleep(4 * time.Second)
		}
		for _, m := range killed {
			if err := m.Start(); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, 15*time.Second, "a slot fired after the kill", func() bool { return fired() > before })
	}
	s := scheduleOf(cl, "every2s")
	if s == nil {
		t.Fatal("no master answers")
	}
	slots := checkAccounted(t, s, scheduleDrivers(t, cl, "every2s"), 2*time.Second)
	if s.Missed == 0 {
		t.Errorf("no slot counted missed across three quorums lost for 4 s")
	}
	t.Logf("%d slots: %d fired, %d missed across ten leader kills", len(slots), s.Fired, s.Missed)
}
