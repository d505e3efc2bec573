package systest

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/testcluster"
)

// groupGone reports whether no process is left in process group pgid.
func groupGone(pgid int) bool {
	return errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
}

// TestLeaderKillDoesNotDisturbRunningDriver: SIGKILL the leader while a
// supervised driver runs; a new leader is elected, a new submission is
// accepted, and the driver finishes having started exactly once.
func TestLeaderKillDoesNotDisturbRunningDriver(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Workers: 2})
	p := newProbe(t)
	id := submit(t, c, p.request("sleep 4", true))
	c.WaitDriver(id, 20*time.Second, "RUNNING", isState(model.DriverRunning))

	old, err := c.Leader(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	old.Kill()
	next, err := c.Leader(15 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if next == old {
		t.Fatal("the killed master is still reported as leader")
	}
	id2 := submit(t, c, p.request("true", false))
	t.Logf("leader %s killed; %s leads; next submission %s accepted after %s", old.ID, next.ID, id2, time.Since(killed).Round(time.Millisecond))

	if d := p.finishes(c, id, 1); len(d.Attempts) != 1 {
		t.Fatalf("%d attempt records, want 1", len(d.Attempts))
	}
	c.WaitDriver(id2, 30*time.Second, "FINISHED", isState(model.DriverFinished))
}

// TestWorkerKillRelaunchesSupervisedDriver: SIGKILL the whole process group
// of the worker running a supervised driver; the driver runs again on the
// other worker as attempt 2 and finishes, and attempt 1's program is gone.
func TestWorkerKillRelaunchesSupervisedDriver(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Workers: 2})
	p := newProbe(t)
	id := submit(t, c, p.request(`if [ "$DROVER_ATTEMPT" = 1 ]; then sleep 300; else sleep 1; fi`, true))
	d := c.WaitDriver(id, 20*time.Second, "RUNNING", isState(model.DriverRunning))
	waitFor(t, 10*time.Second, "attempt 1 recorded its start", func() bool { return len(p.starts(id)) == 1 })
	first := d.WorkerID
	pid1, _ := strconv.Atoi(p.starts(id)[0][3])

	killed := time.Now()
	c.Worker(first).KillGroup()
	d = c.WaitDriver(id, 30*time.Second, "RUNNING again", func(d *model.Driver) bool {
		return d.Attempt == 2 && d.State == model.DriverRunning
	})
	t.Logf("worker %s killed; attempt 2 RUNNING on %s after %s", first, d.WorkerID, time.Since(killed).Round(time.Millisecond))
	if d.WorkerID == first {
		t.Fatalf("attempt 2 placed on the dead worker %s", first)
	}
	d = p.finishes(c, id, 2)
	starts := p.starts(id)
	if len(starts) != 2 || starts[0][1] != "1" || starts[0][2] != first || starts[1][1] != "2" || starts[1][2] != d.WorkerID {
		t.Fatalf("starts = %v, want attempt 1 on %s then attempt 2 on %s", starts, first, d.WorkerID)
	}
	if d.Attempts[0].State != model.DriverError || !strings.Contains(d.Attempts[0].Reason, "lost") {
		t.Fatalf("attempt 1 record = %+v, want ERROR because its worker was lost", d.Attempts[0])
	}
	waitFor(t, 15*time.Second, "attempt 1's process group gone", func() bool { return groupGone(pid1) })
}

// TestSupervisedDriverRestartsWithBackoff: a supervised driver that exits 1
// twice, then 0, ends FINISHED in attempt 1 on the same worker after 3 runs,
// with back-off of at least 1 s and then 2 s between runs.
func TestSupervisedDriverRestartsWithBackoff(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Workers: 2})
	p := newProbe(t)
	id := submit(t, c, p.request(`n=$(grep -c '^start' "$f"); [ "$n" -ge 3 ]`, true))
	d := c.WaitDriver(id, 40*time.Second, "ended", func(d *model.Driver) bool { return d.State.Terminal() })
	if d.State != model.DriverFinished || d.Attempt != 1 || len(d.Attempts) != 1 || d.Attempts[0].Runs != 3 {
		t.Fatalf("got %s attempt %d, records %+v; want FINISHED in attempt 1 after 3 runs", d.State, d.Attempt, d.Attempts)
	}
	starts := p.starts(id)
	if len(starts) != 3 {
		t.Fatalf("starts = %v, want 3", starts)
	}
	var at []float64
	for _, s := range starts {
		if s[2] != d.WorkerID {
			t.Fatalf("run on %s, want every run on %s", s[2], d.WorkerID)
		}
		v, _ := strconv.ParseFloat(s[4], 64)
		at = append(at, v)
	}
	if gap1, gap2 := at[1]-at[0], at[2]-at[1]; gap1 < 0.95 || gap2 < 1.95 {
		t.Fatalf("gaps between runs %.2fs and %.2fs, want >= 1s then >= 2s", gap1, gap2)
	}
}

// TestKillRunningDriver: a kill of a running driver ends it KILLED and
// leaves nothing of its process group, children included; the driver and
// its attempt say a client killed it, not that its worker lost it.
func TestKillRunningDriver(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Workers: 2})
	p := newProbe(t)
	id := submit(t, c, p.request(`sleep 300 & sleep 300 & wait`, true))
	c.WaitDriver(id, 20*time.Second, "RUNNING", isState(model.DriverRunning))
	waitFor(t, 10*time.Second, "start recorded", func() bool { return len(p.starts(id)) == 1 })
	pgid, _ := strconv.Atoi(p.starts(id)[0][3])
	if groupGone(pgid) {
		t.Fatal("the driver's process group is not running before the kill")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Client().Kill(ctx, id); err != nil {
		t.Fatal(err)
	}
	d := c.WaitDriver(id, 20*time.Second, "KILLED with its attempt ended", func(d *model.Driver) bool {
		return d.State == model.DriverKilled && len(d.Attempts) == 1 && d.Attempts[0].State == model.DriverKilled
	})
	if d.Attempt != 1 {
		t.Fatalf("attempt %d after kill, want 1 (a killed supervised driver is not relaunched)", d.Attempt)
	}
	const want = "killed by a client request"
	if d.Message != want || d.Attempts[0].Reason != want {
		t.Errorf("killed driver says %q, its attempt %q; want %q for both", d.Message, d.Attempts[0].Reason, want)
	}
	waitFor(t, 15*time.Second, "process group gone", func() bool { return groupGone(pgid) })
}
