package checker

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-project/drover/jepsen/history"
	"github.com/drover-project/drover/jepsen/probe"
	"github.com/drover-project/drover/model"
)

// t0 is the run's epoch; at(s) is s seconds into the run.
const t0 = int64(1_700_000_000_000_000_000)

func at(s float64) int64 { return t0 + int64(s*float64(time.Second)) }

// hist builds a history; each helper appends an invoke and its completion.
type hist struct{ ops []history.Op }

func (h *hist) add(op history.Op) {
	op.Index = len(h.ops)
	h.ops = append(h.ops, op)
}

func (h *hist) submit(p int, from, to float64, token, driver string, supervise bool, t history.Type) {
	h.add(history.Op{Process: p, Type: history.Invoke, F: history.FSubmit, Time: at(from), Token: token, Supervise: supervise})
	done := history.Op{Process: p, Type: t, F: history.FSubmit, Time: at(to), Token: token, Supervise: supervise}
	if t == history.OK {
		done.Driver = driver
	}
	h.add(done)
}

func (h *hist) read(p int, from, to float64, driver string, state model.DriverState, attempt int) {
	h.add(history.Op{Process: p, Type: history.Invoke, F: history.FRead, Time: at(from), Driver: driver})
	h.add(history.Op{Process: p, Type: history.OK, F: history.FRead, Time: at(to), Driver: driver, State: string(state), Attempt: attempt})
}

func (h *hist) kill(p int, from, to float64, driver string, t history.Type) {
	h.add(history.Op{Process: p, Type: history.Invoke, F: history.FKill, Time: at(from), Driver: driver})
	h.add(history.Op{Process: p, Type: t, F: history.FKill, Time: at(to), Driver: driver})
}

func (h *hist) fault(window int, fault string, targets []string, from, to float64) {
	h.add(history.Op{Process: history.NemesisProcess, Type: history.Info, F: history.FStart, Time: at(from), Fault: fault, Targets: targets, Window: window})
	h.add(history.Op{Process: history.NemesisProcess, Type: history.Info, F: history.FStop, Time: at(to), Fault: fault, Targets: targets, Window: window})
}

func run(driver string, attempt, pid int, worker string, from, to float64) probe.Run {
	code := 0
	return probe.Run{Driver: driver, Attempt: attempt, PID: pid, Worker: worker,
		Start: at(from), LastBeat: at(to), End: at(to), Exit: &code}
}

func row(id, token string, supervise bool, state model.DriverState, workers ...string) *model.Driver {
	d := &model.Driver{ID: id, Token: token, DriverSpec: model.DriverSpec{Supervise: supervise}, State: state, Attempt: len(workers)}
	for i, w := range workers {
		d.Attempts = append(d.Attempts, model.Attempt{Attempt: i + 1, WorkerID: w})
	}
	return d
}

// clean is a run that keeps every promise, in default mode:
//   - dA (supervised) runs on w1; w1 is partitioned from 2 s to 6 s, dA is
//     relaunched on w2 at 5 s and the old attempt dies at 7 s, inside the
//     window plus CutSlack: the one allowed overlap;
//   - dB (unsupervised) is killed at 3.1 s and its probe ends at 3.3 s;
//   - dC (supervised) fails its first run and is restarted in place; its
//     submit timed out (info), so only its token names it;
//   - dD is the first write after the heal, 2.5 s after it.
func clean() Input {
	var h hist
	h.submit(0, 0, 0.1, "tokA", "dA", true, history.OK)
	h.submit(1, 0, 0.2, "tokB", "dB", false, history.OK)
	h.submit(2, 0.5, 0.6, "tokC", "", true, history.Info)
	h.read(0, 1, 1.1, "dA", model.DriverRunning, 1)
	h.fault(1, "partition-worker", []string{"w1"}, 2, 6)
	h.kill(1, 3, 3.1, "dB", history.OK)
	h.read(1, 4, 4.1, "dB", model.DriverKilled, 1)
	h.read(0, 7, 7.1, "dA", model.DriverRunning, 2)
	h.submit(3, 8, 8.5, "tokD", "dD", true, history.OK)
	h.read(0, 12, 12.1, "dA", model.DriverFinished, 2)
	rows := func() []*model.Driver {
		return []*model.Driver{
			row("dA", "tokA", true, model.DriverFinished, "w1", "w2"),
			row("dB", "tokB", false, model.DriverKilled, "w2"),
			row("dC", "tokC", true, model.DriverFinished, "w2"),
			row("dD", "tokD", true, model.DriverFinished, "w2"),
		}
	}
	return Input{
		Ops: h.ops,
		Runs: []probe.Run{
			run("dA", 1, 100, "w1", 1, 7),
			run("dA", 2, 101, "w2", 5, 11),
			run("dB", 1, 200, "w2", 0.5, 3.3),
			run("dC", 1, 300, "w2", 1, 2),
			run("dC", 1, 301, "w2", 3, 6),
			run("dD", 1, 400, "w2", 9, 10),
		},
		Sightings: []probe.Sighting{
			{Driver: "dA", Attempt: 1, Worker: "w1", PID: 100, First: at(1.05), Last: at(7.05)},
			{Driver: "dB", Attempt: 1, Worker: "w2", PID: 200, First: at(0.6), Last: at(3.2)},
		},
		Final: []MasterView{
			{ID: "m1", StateHash: "abcdef0123456789", StateIndex: 100, Drivers: rows()},
			{ID: "m2", StateHash: "abcdef0123456789", StateIndex: 100, Drivers: rows()},
			{ID: "m3", StateHash: "abcdef0123456789", StateIndex: 100, Drivers: rows()},
		},
		Leader:          1,
		HealAt:          at(6),
		DrainEnd:        at(13),
		WriteAcceptedAt: at(8.5),
		WriteBound:      5 * time.Second,
		KillGrace:       time.Second,
		CutSlack:        2 * time.Second,
	}
}

// find returns the result named name.
func find(t *testing.T, rs []Result, name string) Result {
	t.Helper()
	for _, r := range rs {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no result named %s", name)
	return Result{}
}

// expectPass and expectFail run every checker and look at one; a failure
// must name the offending items.
func expectPass(t *testing.T, in Input, name string) Result {
	t.Helper()
	r := find(t, Check(in), name)
	if !r.Valid {
		t.Fatalf("%s: want valid, got %s", name, r.Line())
	}
	return r
}

func expectFail(t *testing.T, in Input, name string, offending ...string) Result {
	t.Helper()
	r := find(t, Check(in), name)
	if r.Valid {
		t.Fatalf("%s: want invalid, got %s", name, r.Line())
	}
	for _, o := range offending {
		if !slices.ContainsFunc(r.Offending, func(s string) bool { return strings.HasPrefix(s, o) }) {
			t.Errorf("%s: offending %v lacks %s", name, r.Offending, o)
		}
	}
	return r
}

func TestCleanRunPassesEveryChecker(t *testing.T) {
	rs := Check(clean())
	want := []string{NameLostSubmissions, NamePhantomDrivers, NameOneDriverPerToken, NameSingleLiveAttempt,
		NameAttemptsIncrease, NameUnsupervised, NameKilledStaysDead, NameSupervisedFinish,
		NameLinearizableReads, NameTablesIdentical, NameWritesAfterHeal}
	if len(rs) != len(want) {
		t.Fatalf("got %d results, want %d", len(rs), len(want))
	}
	for i, r := range rs {
		if r.Name != want[i] {
			t.Errorf("result %d is %s, want %s", i, r.Name, want[i])
		}
		if !r.Valid {
			t.Errorf("%s", r.Line())
		}
	}
}

func TestLostSubmissions(t *testing.T) {
	in := clean()
	lv := &in.Final[in.Leader]
	lv.Drivers = slices.DeleteFunc(lv.Drivers, func(d *model.Driver) bool { return d.ID == "dB" })
	expectFail(t, in, NameLostSubmissions, "dB")

	// Missing from a follower only is not a loss (tables-identical
	// reports the divergence).
	in = clean()
	in.Final[0].Drivers = in.Final[0].Drivers[:1]
	expectPass(t, in, NameLostSubmissions)

	in = clean()
	in.Leader = 7
	expectFail(t, in, NameLostSubmissions)
}

func TestPhantomDrivers(t *testing.T) {
	in := clean()
	for i := range in.Final {
		in.Final[i].Drivers = append(in.Final[i].Drivers, row("dX", "tokX", true, model.DriverFinished, "w1"))
	}
	expectFail(t, in, NamePhantomDrivers, "dX")

	in = clean()
	in.Final[2].Drivers = append(in.Final[2].Drivers, row("dY", "", false, model.DriverFinished, "w1"))
	expectFail(t, in, NamePhantomDrivers, "dY")

	// A driver one of the run's schedules fired has no token; one
	// naming a schedule the run never made is a phantom.
	in = clean()
	in.Schedules = []string{"nightly"}
	fired := row("dS", "", false, model.DriverFinished, "w1")
	fired.Schedule, fired.Slot = "nightly", 2000
	in.Final[1].Drivers = append(in.Final[1].Drivers, fired)
	expectPass(t, in, NamePhantomDrivers)
	in.Schedules = []string{"hourly"}
	expectFail(t, in, NamePhantomDrivers, "dS")
}

func TestOneDriverPerToken(t *testing.T) {
	// Two rows with one token: the submission ran twice.
	in := clean()
	in.Final[0].Drivers = append(in.Final[0].Drivers, row("dA2", "tokA", true, model.DriverFinished, "w2"))
	expectFail(t, in, NameOneDriverPerToken, "tokA")

	// A retry with the same token answered with the same driver is fine.
	var h hist
	h.ops = clean().Ops
	h.submit(5, 9, 9.1, "tokA", "dA", true, history.OK)
	in = clean()
	in.Ops = h.ops
	expectPass(t, in, NameOneDriverPerToken)

	// ... with another driver it is not.
	h.ops = clean().Ops
	h.submit(5, 9, 9.1, "tokA", "dD", true, history.OK)
	in.Ops = h.ops
	expectFail(t, in, NameOneDriverPerToken, "tokA")
}

func TestSingleLiveAttemptDefaultAllowsOverlapInsideWindow(t *testing.T) {
	r := expectPass(t, clean(), NameSingleLiveAttempt)
	// dA's attempts overlap from 5 s (attempt 2 starts) to 7.05 s (the
	// last sighting of attempt 1).
	if got := r.Measured["allowed_overlap_s"]; got < 2.04 || got > 2.06 {
		t.Errorf("allowed_overlap_s = %v, want 2.05", got)
	}
	if r.Measured["max_overlap_s"] != r.Measured["allowed_overlap_s"] {
		t.Errorf("max_overlap_s = %v, want the allowed one", r.Measured["max_overlap_s"])
	}
}

func TestSingleLiveAttemptDefaultRefusesOverlapOutsideWindow(t *testing.T) {
	// The fault hit w2, not the older attempt's worker w1.
	in := clean()
	for i := range in.Ops {
		if in.Ops[i].Process == history.NemesisProcess {
			in.Ops[i].Targets = []string{"w2"}
		}
	}
	r := expectFail(t, in, NameSingleLiveAttempt, "dA")
	if r.Measured["allowed_overlap_s"] != 0 || r.Measured["max_overlap_s"] < 2 {
		t.Errorf("measured %v", r.Measured)
	}

	// The old attempt outlived the window plus CutSlack (6 s + 2 s).
	in = clean()
	in.Runs[0] = run("dA", 1, 100, "w1", 1, 9)
	expectFail(t, in, NameSingleLiveAttempt, "dA")

	// The new attempt started before the fault began.
	in = clean()
	in.Runs[1] = run("dA", 2, 101, "w2", 1.5, 11)
	expectFail(t, in, NameSingleLiveAttempt, "dA")

	// Only the sampler saw the old attempt still alive.
	in = clean()
	in.Sightings[0].Last = at(10)
	expectFail(t, in, NameSingleLiveAttempt, "dA")
}

func TestSingleLiveAttemptStrictRefusesAnyOverlap(t *testing.T) {
	in := clean()
	in.Strict = true
	expectFail(t, in, NameSingleLiveAttempt, "dA")

	// Strict with the attempts one after the other is fine.
	in.Runs[0] = run("dA", 1, 100, "w1", 1, 4.9)
	in.Sightings[0].Last = at(4.95)
	expectPass(t, in, NameSingleLiveAttempt)
}

func TestSingleLiveAttemptRefusesOverlappingRunsOfOneAttempt(t *testing.T) {
	in := clean()
	// dC's restart began before its first run ended, even inside a fault
	// window on its worker.
	in.Runs[4] = run("dC", 1, 301, "w2", 1.5, 6)
	var h hist
	h.ops = in.Ops
	h.fault(2, "partition-worker", []string{"w2"}, 0, 10)
	in.Ops = h.ops
	expectFail(t, in, NameSingleLiveAttempt, "dC")
}

func TestAttemptsIncrease(t *testing.T) {
	// Attempt 1 ran again after attempt 2 had started.
	in := clean()
	in.Runs = append(in.Runs, run("dA", 1, 102, "w1", 11.5, 12))
	expectFail(t, in, NameAttemptsIncrease, "dA")

	// A row whose attempt history goes backwards.
	in = clean()
	d := in.Final[2].Drivers[0]
	d.Attempts[0].Attempt, d.Attempts[1].Attempt = 2, 2
	expectFail(t, in, NameAttemptsIncrease, "dA")
}

func TestUnsupervisedNotRelaunched(t *testing.T) {
	// dB (unsupervised) got a second attempt.
	in := clean()
	in.Runs = append(in.Runs, run("dB", 2, 201, "w1", 2, 2.5))
	expectFail(t, in, NameUnsupervised, "dB")

	// ... or was restarted in place.
	in = clean()
	in.Runs = append(in.Runs, run("dB", 1, 201, "w2", 3.35, 3.4))
	expectFail(t, in, NameUnsupervised, "dB")

	// ... or its row says so, even if the row claims it is supervised.
	in = clean()
	b := in.Final[1].Drivers[1]
	b.Supervise, b.Attempt = true, 2
	expectFail(t, in, NameUnsupervised, "dB")

	// A supervised driver restarted in place (dC) is fine.
	expectPass(t, clean(), NameUnsupervised)
}

func TestKilledStaysDead(t *testing.T) {
	// Killed at 3.1 s, alive until 5 s with its worker reachable.
	in := clean()
	in.Runs[2] = run("dB", 1, 200, "w2", 0.5, 5)
	expectFail(t, in, NameKilledStaysDead, "dB")

	// The same, while w2 was cut off: allowed until the window's stop (4.5 s)
	// plus CutSlack.
	var h hist
	h.ops = in.Ops
	h.fault(2, "partition-worker", []string{"w2"}, 2.9, 4.5)
	in.Ops = h.ops
	expectPass(t, in, NameKilledStaysDead)

	// The same, while every master was down just after the kill: no
	// leader could tell the worker.
	in = clean()
	in.Runs[2] = run("dB", 1, 200, "w2", 0.5, 5)
	h.ops = in.Ops
	h.fault(2, "kill-all-masters", masterIDs(in), 3.2, 4.5)
	in.Ops = h.ops
	expectPass(t, in, NameKilledStaysDead)

	// The sampler saw it past the deadline, though its trace ends in time.
	in = clean()
	in.Sightings[1].Last = at(4.5)
	expectFail(t, in, NameKilledStaysDead, "dB")

	// Killed while its probe was still starting: no trace, only the
	// sampler's sighting, which names its worker. Seen until 6.5 s, past
	// the grace (4.1 s): fails while w2 was reachable, passes while w2
	// was paused from 3.5 s to 5 s (the pause's stop plus CutSlack is 7 s).
	in = clean()
	in.Runs = slices.DeleteFunc(in.Runs, func(r probe.Run) bool { return r.Driver == "dB" })
	in.Sightings[1].Last = at(6.5)
	expectFail(t, in, NameKilledStaysDead, "dB")
	h.ops = in.Ops
	h.fault(2, "pause-worker", []string{"w2"}, 3.5, 5)
	in.Ops = h.ops
	expectPass(t, in, NameKilledStaysDead)
}

func masterIDs(in Input) []string {
	var ids []string
	for _, v := range in.Final {
		ids = append(ids, v.ID)
	}
	return ids
}

func TestKilledStaysDeadRefusesLaterStart(t *testing.T) {
	// A new attempt after the kill: the killed driver was relaunched.
	in := clean()
	in.Runs = append(in.Runs, run("dB", 2, 201, "w1", 3.5, 3.6))
	expectFail(t, in, NameKilledStaysDead, "dB")

	// A restart of the killed attempt after the grace.
	in = clean()
	in.Runs = append(in.Runs, run("dB", 1, 201, "w2", 4.5, 4.6))
	expectFail(t, in, NameKilledStaysDead, "dB")

	// A restart racing the kill to the worker, gone within the grace.
	in = clean()
	in.Runs = append(in.Runs, run("dB", 1, 201, "w2", 3.35, 3.4))
	expectPass(t, in, NameKilledStaysDead)
}

func TestSupervisedFinish(t *testing.T) {
	in := clean()
	in.Final[in.Leader].Drivers[0].State = model.DriverRunning
	expectFail(t, in, NameSupervisedFinish, "dA")

	// An unsupervised driver may still run.
	in = clean()
	in.Final[in.Leader].Drivers[1].State = model.DriverRunning
	expectPass(t, in, NameSupervisedFinish)
}

func TestLinearizableReadsCatchesStaleRead(t *testing.T) {
	// Process 4 reads attempt 1 RUNNING after process 0's read of attempt
	// 2 had completed.
	in := clean()
	var h hist
	h.ops = in.Ops
	h.read(4, 7.2, 7.3, "dA", model.DriverRunning, 1)
	in.Ops = h.ops
	r := expectFail(t, in, NameLinearizableReads, "dA")
	if len(r.Offending) != 1 {
		t.Errorf("offending %v, want only dA", r.Offending)
	}

	// Concurrent with it, the same read may be ordered first.
	in = clean()
	h.ops = in.Ops
	h.read(4, 6.5, 7.05, "dA", model.DriverRunning, 1)
	in.Ops = h.ops
	expectPass(t, in, NameLinearizableReads)
}

func TestLinearizableReadsStateOrder(t *testing.T) {
	cases := []struct {
		name  string
		build func(h *hist)
		ok    bool
	}{
		{"running then submitted", func(h *hist) {
			h.read(0, 1, 2, "d", model.DriverRunning, 1)
			h.read(0, 3, 4, "d", model.DriverSubmitted, 1)
		}, false},
		{"relaunching next attempt after running", func(h *hist) {
			h.read(0, 1, 2, "d", model.DriverRunning, 1)
			h.read(0, 3, 4, "d", model.DriverRelaunching, 2)
			h.read(0, 5, 6, "d", model.DriverSubmitted, 2)
		}, true},
		{"terminal changes", func(h *hist) {
			h.read(0, 1, 2, "d", model.DriverFailed, 1)
			h.read(0, 3, 4, "d", model.DriverFinished, 1)
		}, false},
		{"terminal then new attempt", func(h *hist) {
			h.read(0, 1, 2, "d", model.DriverFinished, 1)
			h.read(0, 3, 4, "d", model.DriverRunning, 2)
		}, false},
		{"read after ok kill is running", func(h *hist) {
			h.kill(1, 1, 2, "d", history.OK)
			h.read(0, 3, 4, "d", model.DriverRunning, 1)
		}, false},
		{"kill while a relaunch nobody read", func(h *hist) {
			h.read(0, 0.5, 0.6, "d", model.DriverRunning, 1)
			h.kill(1, 1, 2, "d", history.OK)
			h.read(0, 3, 4, "d", model.DriverKilled, 2)
		}, true},
		{"ok kill of a finished driver", func(h *hist) {
			h.read(0, 1, 2, "d", model.DriverFinished, 1)
			h.kill(1, 3, 4, "d", history.OK)
		}, false},
		{"info kill of a finished driver", func(h *hist) {
			h.read(0, 1, 2, "d", model.DriverFinished, 1)
			h.kill(1, 3, 4, "d", history.Info)
		}, true},
		{"info kill takes effect late", func(h *hist) {
			h.kill(1, 1, 2, "d", history.Info)
			h.read(0, 3, 4, "d", model.DriverRunning, 1)
			h.read(0, 5, 6, "d", model.DriverKilled, 1)
		}, true},
		{"failed kill is dropped", func(h *hist) {
			h.kill(1, 1, 2, "d", history.Fail)
			h.read(0, 3, 4, "d", model.DriverRunning, 1)
		}, true},
		{"unknown state", func(h *hist) {
			h.read(0, 1, 2, "d", model.DriverUnknown, 1)
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var h hist
			h.submit(2, 0, 0.1, "tok", "d", true, history.OK)
			c.build(&h)
			r := LinearizableReads(Input{Ops: h.ops})
			if r.Valid != c.ok {
				t.Errorf("got %s, want valid=%v", r.Line(), c.ok)
			}
		})
	}
}

func TestVisualizeReads(t *testing.T) {
	in := clean()
	var h hist
	h.ops = in.Ops
	h.read(4, 7.2, 7.3, "dA", model.DriverRunning, 1)
	in.Ops = h.ops
	path := filepath.Join(t.TempDir(), "reads.html")
	if err := VisualizeReads(in, path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "partition-worker") {
		t.Errorf("visualization lacks the fault window annotation")
	}
}

func TestTablesIdentical(t *testing.T) {
	in := clean()
	in.Final[2].StateHash = "ffff0000ffff0000"
	r := expectFail(t, in, NameTablesIdentical, "m1=abcdef012345@100", "m3=ffff0000ffff@100")
	if len(r.Offending) != 3 {
		t.Errorf("offending %v, want every master", r.Offending)
	}

	in = clean()
	in.Final[0].StateIndex = 99
	expectFail(t, in, NameTablesIdentical, "m1=abcdef012345@99")
}

func TestWritesAfterHeal(t *testing.T) {
	r := expectPass(t, clean(), NameWritesAfterHeal)
	if r.Measured["seconds"] != 2.5 {
		t.Errorf("seconds = %v, want 2.5", r.Measured["seconds"])
	}

	in := clean()
	in.WriteAcceptedAt = at(12)
	expectFail(t, in, NameWritesAfterHeal)

	in.WriteAcceptedAt = 0
	expectFail(t, in, NameWritesAfterHeal)
}

func TestLine(t *testing.T) {
	r := Result{Name: "x", Valid: true, Summary: "fine"}
	if got := r.Line(); got != "PASS x: fine" {
		t.Errorf("Line() = %q", got)
	}
	r = Result{Name: "x", Summary: "bad", Offending: []string{"a", "b"}}
	if got := r.Line(); got != "FAIL x: bad (offending: a, b)" {
		t.Errorf("Line() = %q", got)
	}
	for i := range 10 {
		r.Offending = append(r.Offending, string(rune('c'+i)))
	}
	if got := r.Line(); got != "FAIL x: bad (offending: a, b, c, d, e, f, g, h, ... and 4 more)" {
		t.Errorf("Line() = %q", got)
	}
}
