package systest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/testcluster"
)

// TestScheduleOutageCatchesUpOnce: all three masters SIGKILLed for 10 s.
// A schedule whose deadline (30 s) outlasts the outage fires one
// catch-up run, for the latest slot due, and counts the slots before it
// missed; one whose deadline (2 s) is shorter than the outage fires
// nothing for its slot in the outage and counts it missed.
func TestScheduleOutageCatchesUpOnce(t *testing.T) {
	const outage = 10 * time.Second
	c := testcluster.New(t, testcluster.Options{})
	cl, ctx := c.Client(), context.Background()
	for _, req := range []api.ScheduleRequest{
		everyRequest("within", 2*time.Second, "", 30*time.Second, "/bin/true"),
		everyRequest("past", 12*time.Second, "", 2*time.Second, "/bin/true"),
	} {
		if _, err := cl.CreateSchedule(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	// The outage starts 9 s after a slot of "past", so that its next
	// slot falls 3 s into it and is reached at least 7 s late.
	var first int64
	waitFor(t, 20*time.Second, "a first slot of past fired", func() bool {
		if s := scheduleOf(cl, "past"); s != nil && s.LastFired > 0 {
			first = s.LastFired
			return true
		}
		return false
	})
	time.Sleep(time.Until(time.UnixMilli(first + 9000)))
	down := time.Now().UnixMilli()
	for _, m := range c.Masters {
		m.Kill()
	}
	for _, m := range c.Masters {
		<-m.Exited()
	}
	time.Sleep(outage)
	up := time.Now().UnixMilli()
	for _, m := range c.Masters {
		if err := m.Start(); err != nil {
			t.Fatal(err)
		}
	}
	inOutage := first + 12000
	waitFor(t, 20*time.Second, "past's slot in the outage accounted", func() bool {
		s := scheduleOf(cl, "past")
		return s != nil && s.LastSlot >= inOutage
	})
	waitFor(t, 20*time.Second, "within fired after the outage", func() bool {
		s := scheduleOf(cl, "within")
		return s != nil && s.LastFired > down
	})

	past := scheduleOf(cl, "past")
	pastDrivers := scheduleDrivers(t, cl, "past")
	checkAccounted(t, past, pastDrivers, 12*time.Second)
	if _, ok := pastDrivers[inOutage]; ok || past.Missed < 1 {
		t.Errorf("past: slot %d, %d ms into the outage, has drivers %v, missed %d; want none, counted missed",
			inOutage, inOutage-down, pastDrivers[inOutage], past.Missed)
	}

	within := scheduleOf(cl, "within")
	drivers := scheduleDrivers(t, cl, "within")
	checkAccounted(t, within, drivers, 2*time.Second)
	var slots []int64
	for slot := range drivers {
		slots = append(slots, slot)
	}
	slices.Sort(slots)
	i := slices.IndexFunc(slots, func(s int64) bool { return s > down })
	if i < 1 {
		t.Fatalf("within: driver slots %v: want one before the outage (%d) and one after", slots, down)
	}
	before, catchUp := slots[i-1], slots[i]
	gap := (catchUp-before)/2000 - 1
	if catchUp-before < outage.Milliseconds() || within.Missed < gap || drivers[catchUp][0].SubmittedAt < up {
		t.Errorf("within: last run before the outage %d, first after %d (submitted %d, masters restarted %d), missed %d: want one catch-up run after the restart, the %d slots between counted missed",
			before, catchUp, drivers[catchUp][0].SubmittedAt, up, within.Missed, gap)
	}
	t.Logf("within: catch-up of slot %d, %d ms after the restart; %d slots of the outage missed; past: slot %d missed",
		catchUp, drivers[catchUp][0].SubmittedAt-up, gap, inOutage)
}

// TestScheduleConcurrencyPolicies: runs that do not end, a slot every
// 2 s. forbid keeps its one run and counts the next slots skipped;
// replace kills each run as it starts the next, never two RUNNING at
// once in the tables; allow has two runs RUNNING at once.
func TestScheduleConcurrencyPolicies(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Workers: 1, WorkerCores: 16, WorkerMemory: "8g"})
	cl, ctx := c.Client(), context.Background()
	for _, conc := range []model.Concurrency{model.ConcurrencyForbid, model.ConcurrencyReplace, model.ConcurrencyAllow} {
		if _, err := cl.CreateSchedule(ctx, everyRequest(string(conc), 2*time.Second, conc, 0, "/bin/sleep", "600")); err != nil {
			t.Fatal(err)
		}
	}
	running := func(name string) (n int, ds map[int64][]*model.Driver) {
		ds = scheduleDrivers(t, cl, name)
		for _, d := range ds {
			if d[0].State == model.DriverRunning {
				n++
			}
		}
		return n, ds
	}
	waitFor(t, 45*time.Second, "forbid skipped two slots, replace fired three, allow ran two at once", func() bool {
		r, _ := running("replace")
		if r > 1 {
			t.Fatalf("replace: %d runs RUNNING at once", r)
		}
		a, _ := running("allow")
		f, rp := scheduleOf(cl, "forbid"), scheduleOf(cl, "replace")
		return a >= 2 && f != nil && f.Skipped >= 2 && rp != nil && rp.Fired >= 3
	})
	for _, name := range []string{"allow", "replace"} {
		if _, err := cl.SuspendSchedule(ctx, name); err != nil {
			t.Fatal(err)
		}
	}

	f := scheduleOf(cl, "forbid")
	n, fds := running("forbid")
	if len(fds) != 1 || n != 1 || f.Fired != 1 {
		t.Errorf("forbid: %d drivers, %d RUNNING, fired %d, skipped %d: want its one run going on and the next slots skipped", len(fds), n, f.Fired, f.Skipped)
	}
	checkAccounted(t, f, fds, 2*time.Second)

	rp := scheduleOf(cl, "replace")
	_, rds := running("replace")
	checkAccounted(t, rp, rds, 2*time.Second)
	var slots []int64
	for slot := range rds {
		slots = append(slots, slot)
	}
	slices.Sort(slots)
	for _, slot := range slots[:len(slots)-1] {
		if d := rds[slot][0]; d.State != model.DriverKilled || !strings.Contains(d.Message, "replaced by schedule replace") {
			t.Errorf("replace: run %s of slot %d is %s (%q), want KILLED by its successor", d.ID, slot, d.State, d.Message)
		}
	}
	t.Logf("forbid: 1 run, %d slots skipped; replace: %d runs, %d killed", f.Skipped, len(slots), len(slots)-1)
}

// TestScheduleSuspendResumeRunCLI, through the drover binary: a
// suspended schedule fires nothing over three slots; on resume the
// latest passed slot fires (within its 30 s deadline) and the ones
// before it are counted missed; schedule run starts a manual run that
// the schedule's runs show as manual and count in manual_runs.
func TestScheduleSuspendResumeRunCLI(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	cl, env := c.Client(), c.ClientEnv()
	drover := func(args ...string) string {
		t.Helper()
		return mustDrover(t, env, append([]string{"client"}, args...)...)
	}
	status := func() api.ScheduleStatus {
		t.Helper()
		var s api.ScheduleStatus
		if err := json.Unmarshal([]byte(drover("schedule", "status", "nightly", "--json")), &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	drover("schedule", "create", "nightly", "--cron", "@every 2s", "--starting-deadline", "30s", "--", "/bin/true")
	waitFor(t, 10*time.Second, "a first slot fired", func() bool { s := scheduleOf(cl, "nightly"); return s != nil && s.Fired >= 1 })

	drover("schedule", "suspend", "nightly")
	held := status()
	if !held.Suspended || held.Next != 0 {
		t.Fatalf("after suspend: suspended %v, next %d", held.Suspended, held.Next)
	}
	// Three slots pass while suspended.
	time.Sleep(time.Until(time.UnixMilli(held.LastSlot + 3*2000 + 500)))
	if s := status(); s.Fired != held.Fired || s.LastSlot != held.LastSlot || s.Missed != held.Missed {
		t.Fatalf("suspended: fired %d, last slot %d, missed %d; was %d, %d, %d", s.Fired, s.LastSlot, s.Missed, held.Fired, held.LastSlot, held.Missed)
	}

	drover("schedule", "resume", "nightly")
	waitFor(t, 10*time.Second, "a slot fired after resume", func() bool { s := scheduleOf(cl, "nightly"); return s != nil && s.Fired > held.Fired })
	resumed := status()
	ds := scheduleDrivers(t, cl, "nightly")
	checkAccounted(t, &resumed, ds, 2*time.Second)
	catchUp := int64(0)
	for slot := range ds {
		if slot > held.LastSlot && (catchUp == 0 || slot < catchUp) {
			catchUp = slot
		}
	}
	passed := (catchUp - held.LastSlot) / 2000
	if passed < 3 || resumed.Missed-held.Missed != passed-1 {
		t.Errorf("resume: first run after %d is of slot %d, %d slots later; missed went %d -> %d: want the latest of at least 3 passed slots, the others missed",
			held.LastSlot, catchUp, passed, held.Missed, resumed.Missed)
	}

	id := strings.TrimSpace(drover("schedule", "run", "nightly"))
	s := status()
	i := slices.IndexFunc(s.Runs, func(r api.ScheduleRunStatus) bool { return r.DriverID == id })
	if s.ManualRuns != 1 || i < 0 || !s.Runs[i].Manual {
		t.Errorf("schedule run started %q: manual_runs %d, runs %+v: want it among the runs as manual, counted in manual_runs only", id, s.ManualRuns, s.Runs)
	}
	d := testcluster.AwaitDriver(t, cl, id, 5*time.Second, "the manual run's driver", func(*model.Driver) bool { return true })
	if d.Schedule != "nightly" {
		t.Errorf("manual run %s: schedule %q, want nightly", id, d.Schedule)
	}
	// The manual run is not in fired: the slots' drivers alone are.
	checkAccounted(t, &s, scheduleDrivers(t, cl, "nightly"), 2*time.Second)
}

// A manual run, a create and a delete sent right after the leader is
// SIGKILLed wait out the election (every master answers no_leader until
// one is ready) and happen exactly once, rather than failing while the
// followers still name the dead leader.
func TestScheduleWritesWaitOutAnElection(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	cl, env := c.Client(), c.ClientEnv()
	drover := func(args ...string) string {
		t.Helper()
		return mustDrover(t, env, append([]string{"client", "--timeout", "30s"}, args...)...)
	}
	// killLeader SIGKILLs the leader and returns a func that starts it
	// again, for the next kill to leave a quorum.
	killLeader := func() func() {
		t.Helper()
		l, err := c.Leader(10 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		l.Kill()
		<-l.Exited()
		return func() {
			if err := l.Start(); err != nil {
				t.Fatal(err)
			}
		}
	}
	drover("schedule", "create", "yearly", "--cron", "@yearly", "--", "/bin/true")

	restart := killLeader()
	id := strings.TrimSpace(drover("schedule", "run", "yearly"))
	restart()
	s := scheduleOf(cl, "yearly")
	if s == nil || s.ManualRuns != 1 || len(s.Runs) != 1 || s.Runs[0].DriverID != id {
		t.Fatalf("one run through an election: driver %q, schedule %+v: want manual_runs 1 with that driver alone", id, s)
	}

	restart = killLeader()
	drover("schedule", "create", "hourly", "--cron", "@hourly", "--", "/bin/true")
	restart()
	if scheduleOf(cl, "hourly") == nil {
		t.Fatal("created through an election, but no master holds it")
	}

	killLeader()
	drover("schedule", "delete", "hourly")
	if _, err := cl.Schedule(context.Background(), "hourly"); !errors.Is(err, model.ErrUnknownSchedule) {
		t.Fatalf("deleted through an election, but reading it gives %v", err)
	}
}
