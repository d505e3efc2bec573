package checker

import (
	"strings"
	"testing"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/jepsen/changes"
	"github.com/drover-project/drover/model"
)

// changeLog builds a made-up change log, index by index.
type changeLog struct{ evs []api.Event }

// worker adds an ALIVE worker of cores cores at index.
func (l *changeLog) worker(index uint64, id string, cores int) {
	l.evs = append(l.evs, api.Event{Index: index, Kind: api.EventWorker, ID: id, Op: api.OpUpsert,
		Worker: &model.Worker{ID: id, Cores: cores, MemoryMB: 8192, State: model.WorkerAlive}})
}

// driver adds a version of driver id of namespace ns at index: placed on
// worker (queued when ""), in state, at its attempt, of cores and 64 MiB.
func (l *changeLog) driver(index uint64, id, ns, worker string, state model.DriverState, attempt int, reason string) {
	d := &model.Driver{ID: id, DriverSpec: model.DriverSpec{Namespace: ns, Cores: 1, MemoryMB: 64},
		State: state, WorkerID: worker, Attempt: attempt}
	for a := 1; a <= attempt; a++ {
		d.Attempts = append(d.Attempts, model.Attempt{Attempt: a, WorkerID: "w1"})
	}
	if reason != "" {
		d.Attempts[attempt-1].Reason = reason
	}
	l.evs = append(l.evs, api.Event{Index: index, Kind: api.EventDriver, ID: id, Op: api.OpUpsert, Driver: d})
}

// notice adds a version of driver id of namespace ns at index, running
// attempt 1 on w1 under a preemption notice for namespace by; with
// ended, that attempt's end, KILLED with the reason the notice gives.
func (l *changeLog) notice(index uint64, id, ns, by string, ended bool) {
	state, reason := model.DriverRunning, ""
	if ended {
		state, reason = model.DriverKilled, model.PreemptedReason(by)
	}
	l.driver(index, id, ns, "w1", state, 1, reason)
	l.evs[len(l.evs)-1].Driver.Attempts[0].PreemptedBy = by
}

func (l *changeLog) input(nss ...model.Namespace) Input {
	return Input{Changes: &changes.Log{Events: l.evs}, Namespaces: nss}
}

// TestNamespaceQuotas: a namespace at its quota passes, one placement
// past it fails naming the namespace, the bound and the index, for each
// kind of bound; the changes of one index count together, in whatever
// order the entry's events come.
func TestNamespaceQuotas(t *testing.T) {
	for _, c := range []struct {
		name  string
		quota model.Quota
		// third is the index at which d3 is placed; d1 ends at 4.
		third uint64
		want  string
	}{
		{"cores at the bound", model.Quota{Cores: 2}, 4, ""},
		{"cores past", model.Quota{Cores: 2}, 3, "etl cores 3>2 @3"},
		{"memory at the bound", model.Quota{MemoryMB: 128}, 4, ""},
		{"memory past", model.Quota{MemoryMB: 128}, 3, "etl memory_mb 192>128 @3"},
		{"running drivers past", model.Quota{RunningDrivers: 2}, 3, "etl running_drivers 3>2 @3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var l changeLog
			l.worker(1, "w1", 8)
			l.driver(2, "d1", "etl", "w1", model.DriverRunning, 1, "")
			l.driver(2, "d2", "etl", "w1", model.DriverRunning, 1, "")
			l.driver(2, "d3", "etl", "", model.DriverSubmitted, 0, "")
			l.driver(2, "o1", "", "w1", model.DriverRunning, 1, "") // default: no quota
			// d3's placement comes before d1's end within index 4.
			l.driver(c.third, "d3", "etl", "w1", model.DriverRunning, 1, "")
			l.driver(4, "d1", "etl", "w1", model.DriverFinished, 1, "")
			r := NamespaceQuotas(l.input(model.Namespace{Name: "etl", Quota: c.quota, Weight: 1}))
			if c.want == "" {
				if !r.Valid {
					t.Fatalf("want valid, got %s", r.Line())
				}
				return
			}
			if r.Valid || len(r.Offending) != 1 || r.Offending[0] != c.want {
				t.Fatalf("want offending %q, got %s", c.want, r.Line())
			}
		})
	}
}

// TestNamespaceQuotasCountsExecutors: a live executor holds its cores in
// its app's namespace; an ended one holds nothing.
func TestNamespaceQuotasCountsExecutors(t *testing.T) {
	var l changeLog
	l.driver(2, "d1", "ml", "w1", model.DriverRunning, 1, "")
	l.evs = append(l.evs,
		api.Event{Index: 3, Kind: api.EventApp, ID: "a1", Op: api.OpUpsert, App: &model.App{ID: "a1", Namespace: "ml"}},
		api.Event{Index: 4, Kind: api.EventExecutor, ID: "a1/1", Op: api.OpUpsert,
			Executor: &model.Executor{AppID: "a1", ID: 1, WorkerID: "w1", Cores: 2, State: model.ExecRunning}},
		api.Event{Index: 5, Kind: api.EventExecutor, ID: "a1/1", Op: api.OpUpsert,
			Executor: &model.Executor{AppID: "a1", ID: 1, WorkerID: "w1", Cores: 2, State: model.ExecExited}},
	)
	r := NamespaceQuotas(l.input(model.Namespace{Name: "ml", Quota: model.Quota{Cores: 2}}))
	if r.Valid || len(r.Offending) != 1 || r.Offending[0] != "ml cores 3>2 @4" {
		t.Fatalf("want ml past its cores at 4, got %s", r.Line())
	}
}

// TestNamespaceCheckersNotCheckableWithGaps: a log the recorder could not
// follow without a gap proves nothing: neither checker calls it valid,
// and both say how many indexes were missed.
func TestNamespaceCheckersNotCheckableWithGaps(t *testing.T) {
	var l changeLog
	l.driver(2, "d1", "etl", "w1", model.DriverRunning, 1, "")
	in := l.input(model.Namespace{Name: "etl", Quota: model.Quota{Cores: 2}})
	in.Changes.Gaps = []changes.Gap{{After: 2, Until: 9}}
	for _, r := range []Result{NamespaceQuotas(in), PreemptionVictims(in)} {
		if r.Valid || !strings.Contains(r.Summary, "not checkable: the change recorder missed up to 7 indexes (3-9)") {
			t.Errorf("want not checkable, got %s", r.Line())
		}
	}
}

// preemptLog is a cluster of 4 cores where batch's drivers d1..dN run
// from index 2, urgent's u1 waits from 3, d1's attempt gets a notice for
// urgent at 5 and ends preempted by urgent at 6.
func preemptLog(batchDrivers int) changeLog {
	var l changeLog
	l.worker(1, "w1", 4)
	ids := []string{"d1", "d2", "d3", "d4"}[:batchDrivers]
	for _, id := range ids {
		l.driver(2, id, "batch", "w1", model.DriverRunning, 1, "")
	}
	l.driver(3, "u1", "urgent", "", model.DriverSubmitted, 0, "")
	l.notice(5, "d1", "batch", "urgent", false)
	l.driver(6, "d1", "batch", "", model.DriverRelaunching, 2, "")
	first := &l.evs[len(l.evs)-1].Driver.Attempts[0]
	first.Reason, first.PreemptedBy = preemptedPrefix+"urgent", "urgent"
	return l
}

// TestPreemptionVictims: a namespace that held more than its weighted
// share of the alive cores among the namespaces with work when its
// attempt's notice came passes; one that did not fails, and the weights
// are the applied ones.
func TestPreemptionVictims(t *testing.T) {
	urgent := model.Namespace{Name: "urgent", Weight: 2, Preempt: true}
	for _, c := range []struct {
		name   string
		batch  int     // batch's running drivers (cores)
		weight float64 // batch's weight (0: never applied, 1)
		valid  bool
	}{
		// Share of batch: 4 × 1/3 = 1.33 cores.
		{"above its share", 3, 0, true},
		{"below its share", 1, 0, false},
		// Share: 4 × 3/5 = 2.4 cores; then 4 × 6/8 = 3.
		{"above its weighted share", 3, 3, true},
		{"at its weighted share", 3, 6, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := preemptLog(c.batch)
			nss := []model.Namespace{urgent}
			if c.weight > 0 {
				nss = append(nss, model.Namespace{Name: "batch", Weight: c.weight})
			}
			r := PreemptionVictims(l.input(nss...))
			if r.Valid != c.valid {
				t.Fatalf("want valid %v, got %s", c.valid, r.Line())
			}
			if !c.valid && (len(r.Offending) != 1 || r.Offending[0] != "d1/1 of batch for urgent") {
				t.Fatalf("want d1/1 named, got %s", r.Line())
			}
		})
	}
}

// TestPreemptionVictimsAtTheNotice: batch holds 3 of 4 cores while
// urgent waits (above its share of 4 × 1/2 = 2), then 1, when its d1
// gets a notice for urgent and ends preempted. d1 ran while batch was
// above its share, but the notice came when it was below: a wrongful
// preemption, which a check over every index the attempt ran at would
// have passed. The same log with the notice at index 2 passes.
func TestPreemptionVictimsAtTheNotice(t *testing.T) {
	for _, c := range []struct {
		notice uint64
		valid  bool
	}{{4, false}, {2, true}} {
		var l changeLog
		l.worker(1, "w1", 4)
		l.driver(2, "d1", "batch", "w1", model.DriverRunning, 1, "")
		l.driver(2, "d2", "batch", "w1", model.DriverRunning, 1, "")
		l.driver(2, "d3", "batch", "w1", model.DriverRunning, 1, "")
		l.driver(2, "u1", "urgent", "", model.DriverSubmitted, 0, "")
		if c.notice == 2 {
			l.notice(2, "d1", "batch", "urgent", false)
		}
		l.driver(3, "d2", "batch", "w1", model.DriverFinished, 1, "")
		l.driver(3, "d3", "batch", "w1", model.DriverFinished, 1, "")
		if c.notice == 4 {
			l.notice(4, "d1", "batch", "urgent", false)
		}
		l.notice(5, "d1", "batch", "urgent", true)
		r := PreemptionVictims(l.input(model.Namespace{Name: "urgent", Weight: 1, Preempt: true}))
		if r.Valid != c.valid || (!c.valid && (len(r.Offending) != 1 || r.Offending[0] != "d1/1 of batch for urgent")) {
			t.Errorf("notice at %d: want valid %v (d1/1 named if not), got %s", c.notice, c.valid, r.Line())
		}
	}
}

// TestPreemptionVictimsWithoutANotice: an attempt the log shows ending
// preempted with no notice before it offends, whatever its namespace
// held: a preemption starts with a notice in an entry of its own.
func TestPreemptionVictimsWithoutANotice(t *testing.T) {
	var l changeLog
	l.worker(1, "w1", 4)
	for _, id := range []string{"d1", "d2", "d3"} {
		l.driver(2, id, "batch", "w1", model.DriverRunning, 1, "")
	}
	l.driver(2, "u1", "urgent", "", model.DriverSubmitted, 0, "")
	l.notice(5, "d1", "batch", "urgent", true)
	r := PreemptionVictims(l.input())
	if r.Valid || len(r.Offending) != 1 || r.Offending[0] != "d1/1 of batch for urgent: no notice recorded" {
		t.Fatalf("want d1/1 named without a notice, got %s", r.Line())
	}
}

// TestPreemptionVictimsNone: without a preempted attempt it passes and
// says so.
func TestPreemptionVictimsNone(t *testing.T) {
	var l changeLog
	l.worker(1, "w1", 4)
	l.driver(2, "d1", "batch", "w1", model.DriverRunning, 1, "")
	r := PreemptionVictims(l.input())
	if !r.Valid || r.Summary != "no attempt was preempted" {
		t.Fatalf("want a pass saying no preemption, got %s", r.Line())
	}
}

// TestNamespaceCheckersNotCheckableWhenTheLogLacksAChange: a log whose
// last version of a driver is older than the leader's final row lost
// changes without a gap it knew of: neither checker calls it valid.
func TestNamespaceCheckersNotCheckableWhenTheLogLacksAChange(t *testing.T) {
	var l changeLog
	l.driver(2, "d1", "etl", "w1", model.DriverRunning, 1, "")
	in := l.input(model.Namespace{Name: "etl", Quota: model.Quota{Cores: 2}})
	final := &model.Driver{ID: "d1", State: model.DriverFinished, ModifyIndex: 5}
	in.Final = []MasterView{{ID: "m1", Drivers: []*model.Driver{final}}}
	for _, r := range []Result{NamespaceQuotas(in), PreemptionVictims(in)} {
		if r.Valid || r.Summary != "not checkable: the change log lacks the last change of 1 rows in m1's final tables: driver d1 recorded up to 2, changed at 5" {
			t.Errorf("want not checkable, got %s", r.Line())
		}
	}
	final.ModifyIndex = 2
	if r := NamespaceQuotas(in); !r.Valid {
		t.Errorf("want valid once the log has the last change, got %s", r.Line())
	}
}
