package systest

import (
	"context"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/testcluster"
)

// TestScheduleFiresAcrossLeaderKills: a schedule of @every 2s on three
// masters goes on firing while the leader is SIGKILLed twice (and
// restarted); no slot has two drivers, and every slot up to the last
// accounted one is fired, skipped or counted missed.
func TestScheduleFiresAcrossLeaderKills(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	cl, ctx := c.Client(), context.Background()
	st, err := cl.CreateSchedule(ctx, api.ScheduleRequest{Name: "every2s", Cron: "@every 2s",
		Template: api.SubmitRequest{DriverSpec: model.DriverSpec{Argv: []string{"/bin/true"}, Cores: 1, MemoryMB: 64}}})
	if err != nil {
		t.Fatal(err)
	}
	fired := func() int64 {
		s, err := cl.Schedule(ctx, "every2s")
		if err != nil {
			return -1
		}
		return s.Fired
	}
	waitFor(t, 10*time.Second, "a first slot fired", func() bool { return fired() >= 1 })
	for range 2 {
		old, err := c.Leader(10 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		before := fired()
		old.Kill()
		<-old.Exited()
		if err := old.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 15*time.Second, "a slot fired after the kill", func() bool { return fired() > before })
	}
	s, err := cl.Schedule(ctx, "every2s")
	if err != nil {
		t.Fatal(err)
	}
	bySlot := map[int64][]string{}
	if err := cl.ListDrivers(ctx, api.ListQuery{Schedule: "every2s"}, func(ds []*model.Driver) error {
		for _, d := range ds {
			bySlot[d.Slot] = append(bySlot[d.Slot], d.ID)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for slot, ids := range bySlot {
		if len(ids) != 1 {
			t.Errorf("slot %d has drivers %v", slot, ids)
		}
	}
	anchor := st.CreatedAt - st.CreatedAt%1000
	slots := (s.LastSlot - anchor) / 2000
	if s.Fired+s.Missed+s.Skipped != slots || int64(len(bySlot)) != s.Fired {
		t.Fatalf("fired %d + missed %d + skipped %d, %d slots with a driver; want the %d slots up to %d accounted",
			s.Fired, s.Missed, s.Skipped, len(bySlot), slots, s.LastSlot)
	}
	t.Logf("%d slots: %d fired, %d missed across two leader kills", slots, s.Fired, s.Missed)
}
