package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/hashicorp/raft"
	"pgregory.net/rapid"
)

// tb is what both *testing.T and *rapid.T offer.
type tb interface {
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// logBuilder collects encoded commands as a Raft log would hold them.
type logBuilder struct {
	t       tb
	entries [][]byte
}

func (b *logBuilder) add(ct CommandType, payload any) []byte {
	data, err := Encode(ct, payload)
	if err != nil {
		b.t.Fatalf("encode %s: %v", ct, err)
	}
	b.entries = append(b.entries, data)
	return data
}

func replay(t tb, entries [][]byte) *FSM {
	f := New()
	for i, e := range entries {
		f.ApplyCommand(uint64(i+1), e)
	}
	return f
}

func hashOf(t tb, f *FSM) string {
	h, err := f.StateHash()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// snapshotRestore returns a new FSM restored from f's snapshot.
func snapshotRestore(t tb, f *FSM) *FSM {
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	g := New()
	if err := g.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	return g
}

type memSink struct{ bytes.Buffer }

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { return nil }
func (s *memSink) Close() error  { return nil }

var _ raft.SnapshotSink = (*memSink)(nil)

func driverID(seq int) string { return fmt.Sprintf("driver-20261129120000-%04d", seq) }

// scenario is a log that uses every command type, including refused and
// stale ones.
func scenario(t tb) [][]byte {
	b := &logBuilder{t: t}
	b.add(CmdRegisterWorker, &RegisterWorker{ID: "w1", HTTPAddr: "127.0.0.1:1", Cores: 4, MemoryMB: 4096, Time: 1})
	b.add(CmdRegisterWorker, &RegisterWorker{ID: "w2", HTTPAddr: "127.0.0.1:2", Cores: 2, MemoryMB: 2048, Time: 2})
	b.add(CmdSubmitDriver, &SubmitDriver{ID: driverID(0), Token: "t0", Argv: []string{"a"}, Cores: 1, MemoryMB: 512, Supervise: true, Time: 3})
	b.add(CmdSubmitDriver, &SubmitDriver{ID: driverID(1), Token: "t1", Argv: []string{"b"}, Cores: 1, MemoryMB: 512, Time: 4})
	b.add(CmdSubmitDriver, &SubmitDriver{ID: driverID(2), Token: "t2", Argv: []string{"c"}, Cores: 1, MemoryMB: 512, Time: 5})
	b.add(CmdSubmitDriver, &SubmitDriver{ID: driverID(3), Token: "t0", Argv: []string{"dup"}, Cores: 1, MemoryMB: 512, Time: 6})
	b.add(CmdPlaceDrivers, &PlaceDrivers{Time: 7, Placements: []Placement{
		{DriverID: driverID(0), Attempt: 1, WorkerID: "w1"},
		{DriverID: driverID(1), Attempt: 1, WorkerID: "w1"},
		{DriverID: driverID(2), Attempt: 1, WorkerID: "nope"},
	}})
	b.add(CmdReportAttempts, &ReportAttempts{WorkerID: "w1", Time: 8, Reports: []AttemptReport{
		{DriverID: driverID(0), Attempt: 1, State: DriverRunning, Runs: 1},
		{DriverID: driverID(1), Attempt: 1, State: DriverRunning, Runs: 1},
	}})
	b.add(CmdWorkerLost, &WorkerLost{WorkerID: "w1", Time: 9})
	b.add(CmdPlaceDrivers, &PlaceDrivers{Time: 10, Placements: []Placement{{DriverID: driverID(0), Attempt: 2, WorkerID: "w2"}}})
	// A stale report for attempt 1 after attempt 2 is placed.
	b.add(CmdReportAttempts, &ReportAttempts{WorkerID: "w1", Time: 11, Reports: []AttemptReport{
		{DriverID: driverID(0), Attempt: 1, State: DriverFailed, ExitCode: intp(1)},
	}})
	b.add(CmdKillDriver, &KillDriver{DriverID: driverID(2), Time: 12})
	b.add(CmdKillDriver, &KillDriver{DriverID: "driver-20261129120000-9999", Time: 13})
	b.add(CmdReportAttempts, &ReportAttempts{WorkerID: "w2", Time: 14, Reports: []AttemptReport{
		{DriverID: driverID(0), Attempt: 2, State: DriverFinished, ExitCode: intp(0), Runs: 1},
	}})
	b.add(CmdRegisterWorker, &RegisterWorker{ID: "w1", HTTPAddr: "127.0.0.1:3", Cores: 4, MemoryMB: 4096, Time: 15})
	b.add(CmdSubmitDriver, &SubmitDriver{ID: driverID(4), Token: "t4", Argv: []string{"e"}, Cores: 1, MemoryMB: 512, Supervise: true, Time: 16})
	b.add(CmdSubmitDriver, &SubmitDriver{ID: driverID(5), Token: "t5", Argv: []string{"f"}, Cores: 1, MemoryMB: 512, Time: 17})
	b.add(CmdPlaceDrivers, &PlaceDrivers{Time: 18, Placements: []Placement{
		{DriverID: driverID(4), Attempt: 1, WorkerID: "w2"},
		{DriverID: driverID(5), Attempt: 1, WorkerID: "w2"},
	}})
	b.add(CmdDecommissionWorker, &DecommissionWorker{WorkerID: "w2", Reason: "worker shut down", Time: 19})
	b.add(CmdReportAttempts, &ReportAttempts{WorkerID: "w2", Time: 20, Reports: []AttemptReport{
		{DriverID: driverID(4), Attempt: 1, State: DriverKilled, Reason: "worker shut down"},
		{DriverID: driverID(5), Attempt: 1, State: DriverKilled, Reason: "worker shut down"},
	}})
	return b.entries
}

func intp(v int) *int { return &v }

func TestEveryCommandSameAfterSnapshotRestore(t *testing.T) {
	entries := scenario(t)
	for cut := 0; cut <= len(entries); cut++ {
		direct := replay(t, entries)
		restored := snapshotRestore(t, replay(t, entries[:cut]))
		for i, e := range entries[cut:] {
			restored.ApplyCommand(uint64(cut+i+1), e)
		}
		if a, b := hashOf(t, direct), hashOf(t, restored); a != b {
			t.Fatalf("snapshot after %d entries then replay: tables differ (%s vs %s)", cut, a, b)
		}
	}
}

func TestReplayTwiceIdentical(t *testing.T) {
	entries := scenario(t)
	if a, b := hashOf(t, replay(t, entries)), hashOf(t, replay(t, entries)); a != b {
		t.Fatalf("two replays differ: %s vs %s", a, b)
	}
}

func TestScenarioOutcome(t *testing.T) {
	f := replay(t, scenario(t))
	d0, _ := f.Driver(driverID(0))
	if d0.State != DriverFinished || d0.Attempt != 2 || d0.WorkerID != "w2" {
		t.Fatalf("supervised driver: got %s attempt %d on %s, want FINISHED attempt 2 on w2", d0.State, d0.Attempt, d0.WorkerID)
	}
	if len(d0.Attempts) != 2 || d0.Attempts[0].State != DriverError || d0.Attempts[0].ExitCode != nil {
		t.Fatalf("attempt 1 record must end in ERROR (worker lost), untouched by the stale FAILED report: %+v", d0.Attempts)
	}
	d1, _ := f.Driver(driverID(1))
	if d1.State != DriverError {
		t.Fatalf("unsupervised driver on a lost worker: got %s, want ERROR", d1.State)
	}
	d2, _ := f.Driver(driverID(2))
	if d2.State != DriverKilled {
		t.Fatalf("killed waiting driver: got %s", d2.State)
	}
	if _, ok := f.Driver(driverID(3)); ok {
		t.Fatal("a resubmitted token made a second driver")
	}
	for _, w := range f.Workers() {
		want := map[string]WorkerState{"w1": WorkerAlive, "w2": WorkerDecommissioned}[w.ID]
		if w.CoresUsed != 0 || w.MemoryUsedMB != 0 || w.State != want {
			t.Fatalf("worker %s: used %d cores %d MiB, state %s; want 0, 0, %s", w.ID, w.CoresUsed, w.MemoryUsedMB, w.State, want)
		}
	}
	d4, _ := f.Driver(driverID(4))
	d5, _ := f.Driver(driverID(5))
	if d4.State != DriverRelaunching || d4.Attempt != 2 || d5.State != DriverKilled || d5.Message != "worker shut down" {
		t.Fatalf("after decommission: supervised %s attempt %d, unsupervised %s (%q); want RELAUNCHING 2, KILLED with the reason",
			d4.State, d4.Attempt, d5.State, d5.Message)
	}
	if w := f.WaitingDrivers(); len(w) != 1 || w[0].ID != driverID(4) {
		t.Fatalf("waiting = %v, want only %s", w, driverID(4))
	}
	if f.NextDriverSeq() != 6 {
		t.Fatalf("NextDriverSeq = %d, want 6 (the duplicate token took no number)", f.NextDriverSeq())
	}
}

func TestRetriedTokenYieldsSameDriver(t *testing.T) {
	f := New()
	submit := func(id string) any {
		data, _ := Encode(CmdSubmitDriver, &SubmitDriver{ID: id, Token: "tok", Argv: []string{"x"}, Cores: 1, MemoryMB: 1, Time: 1})
		return f.ApplyCommand(1, data)
	}
	first := submit(driverID(7)).(SubmitResult)
	before := hashOf(t, f)
	second := submit(driverID(8)).(SubmitResult)
	if first.DriverID != driverID(7) || first.Existing {
		t.Fatalf("first submit: %+v", first)
	}
	if second.DriverID != first.DriverID || !second.Existing {
		t.Fatalf("retry: got %+v, want %s existing", second, first.DriverID)
	}
	if hashOf(t, f) != before {
		t.Fatal("a retried token changed the tables")
	}
}

func TestRefusedCommandsChangeNothing(t *testing.T) {
	f := replay(t, scenario(t))
	before := hashOf(t, f)
	bad := []struct {
		ct      CommandType
		payload any
		want    error
	}{
		{CmdSubmitDriver, &SubmitDriver{ID: driverID(50), Token: "n1", Argv: nil, Cores: 1, MemoryMB: 1}, ErrInvalidCommand},
		{CmdSubmitDriver, &SubmitDriver{ID: driverID(51), Token: "n2", Argv: []string{"x"}, Cores: 0, MemoryMB: 1}, ErrInvalidCommand},
		{CmdSubmitDriver, &SubmitDriver{ID: driverID(52), Token: "n3", Argv: []string{"x"}, Cores: 1, MemoryMB: -5}, ErrInvalidCommand},
		{CmdSubmitDriver, &SubmitDriver{ID: "driver-x", Token: "n4", Argv: []string{"x"}, Cores: 1, MemoryMB: 1}, ErrInvalidCommand},
		{CmdSubmitDriver, &SubmitDriver{ID: driverID(53), Token: "n5", Argv: []string{"x"}, Env: map[string]string{"A=B": "1"}, Cores: 1, MemoryMB: 1}, ErrInvalidCommand},
		{CmdSubmitDriver, &SubmitDriver{ID: driverID(0), Token: "n6", Argv: []string{"x"}, Cores: 1, MemoryMB: 1}, ErrDuplicateID},
		{CmdKillDriver, &KillDriver{DriverID: "driver-20261129120000-9999"}, ErrUnknownDriver},
		{CmdKillDriver, &KillDriver{DriverID: driverID(0)}, ErrDriverEnded},
		{CmdWorkerLost, &WorkerLost{WorkerID: "nobody"}, ErrUnknownWorker},
		{CmdRegisterWorker, &RegisterWorker{ID: "w9", HTTPAddr: "x:1", Cores: -1, MemoryMB: 1}, ErrInvalidCommand},
	}
	for _, c := range bad {
		data, err := Encode(c.ct, c.payload)
		if err != nil {
			t.Fatal(err)
		}
		res := f.ApplyCommand(100, data)
		err, _ = res.(error)
		if !errors.Is(err, c.want) {
			t.Errorf("%s %+v: got %v, want %v", c.ct, c.payload, res, c.want)
		}
		if hashOf(t, f) != before {
			t.Fatalf("%s %+v changed the tables", c.ct, c.payload)
		}
	}
	for _, raw := range [][]byte{nil, {1}, {2, 2, '{', '}'}, {1, 99, '{', '}'}, {1, 2, '{'}, []byte("\x01\x02{\"id\":1}"), []byte("\x01\x05{\"driver_id\":\"x\",\"bogus\":1}")} {
		if _, ok := f.ApplyCommand(101, raw).(error); !ok {
			t.Errorf("malformed entry %q was accepted", raw)
		}
		if hashOf(t, f) != before {
			t.Fatalf("malformed entry %q changed the tables", raw)
		}
	}
}

func TestKillIsIdempotent(t *testing.T) {
	b := &logBuilder{t: t}
	b.add(CmdSubmitDriver, &SubmitDriver{ID: driverID(0), Token: "t", Argv: []string{"x"}, Cores: 1, MemoryMB: 1, Time: 1})
	kill := b.add(CmdKillDriver, &KillDriver{DriverID: driverID(0), Time: 2})
	f := replay(t, b.entries)
	before := hashOf(t, f)
	if res := f.ApplyCommand(3, kill); res != nil {
		t.Fatalf("second kill: %v, want success", res)
	}
	if hashOf(t, f) != before {
		t.Fatal("second kill changed the tables")
	}
}

func TestRestoreRefusesCorruptSnapshot(t *testing.T) {
	f := replay(t, scenario(t))
	before := hashOf(t, f)
	for _, s := range []string{
		``, `{}`, `{"version":2,"tables":{}}`, `not json`,
		`{"version":1,"tables":{"drivers":{"x":{"id":"y"}}}}`,
		`{"version":1,"tables":{"waiting_drivers":["ghost"]}}`,
		`{"version":1,"tables":{"tokens":{"t":"ghost"}}}`,
		`{"version":1,"tables":{},"extra":1}`,
	} {
		if err := f.Restore(io.NopCloser(bytes.NewReader([]byte(s)))); err == nil {
			t.Errorf("snapshot %q was accepted", s)
		}
		if hashOf(t, f) != before {
			t.Fatalf("refused snapshot %q changed the tables", s)
		}
	}
}

// TestRandomLogsKeepInvariants applies random command sequences and checks,
// after every entry: resources used equal the sum over placed unfinished
// drivers and are never negative or above capacity; waitingDrivers holds
// exactly the unplaced unfinished drivers; a snapshot restores identical
// tables.
func TestRandomLogsKeepInvariants(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		f := New()
		workers := []string{"w1", "w2", "w3"}
		seq := 0
		var ids []string
		n := rapid.IntRange(1, 60).Draw(rt, "n")
		for i := 0; i < n; i++ {
			var ct CommandType
			var payload any
			pickDriver := func() string {
				if len(ids) == 0 || rapid.IntRange(0, 9).Draw(rt, "ghost") == 0 {
					return driverID(999)
				}
				return rapid.SampledFrom(ids).Draw(rt, "driver")
			}
			switch rapid.IntRange(0, 6).Draw(rt, "cmd") {
			case 0:
				ct, payload = CmdRegisterWorker, &RegisterWorker{ID: rapid.SampledFrom(workers).Draw(rt, "w"), HTTPAddr: "h:1",
					Cores: rapid.IntRange(1, 4).Draw(rt, "cores"), MemoryMB: int64(rapid.IntRange(1, 4).Draw(rt, "mem")) * 512, Time: int64(i)}
			case 1:
				id := driverID(seq)
				seq++
				ids = append(ids, id)
				ct, payload = CmdSubmitDriver, &SubmitDriver{ID: id, Token: fmt.Sprint("t", rapid.IntRange(0, 20).Draw(rt, "tok")), Argv: []string{"p"},
					Cores: rapid.IntRange(1, 3).Draw(rt, "dc"), MemoryMB: 512, Supervise: rapid.Bool().Draw(rt, "sup"), Time: int64(i)}
			case 2:
				var ps []Placement
				for j := rapid.IntRange(1, 4).Draw(rt, "np"); j > 0; j-- {
					ps = append(ps, Placement{DriverID: pickDriver(), Attempt: rapid.IntRange(1, 3).Draw(rt, "att"), WorkerID: rapid.SampledFrom(workers).Draw(rt, "pw")})
				}
				ct, payload = CmdPlaceDrivers, &PlaceDrivers{Placements: ps, Time: int64(i)}
			case 3:
				states := []DriverState{DriverRunning, DriverFinished, DriverFailed, DriverKilled, DriverError}
				ct, payload = CmdReportAttempts, &ReportAttempts{WorkerID: rapid.SampledFrom(workers).Draw(rt, "rw"), Time: int64(i), Reports: []AttemptReport{{
					DriverID: pickDriver(), Attempt: rapid.IntRange(1, 3).Draw(rt, "ra"), State: rapid.SampledFrom(states).Draw(rt, "rs"), ExitCode: intp(1)}}}
			case 4:
				ct, payload = CmdKillDriver, &KillDriver{DriverID: pickDriver(), Time: int64(i)}
			case 5:
				ct, payload = CmdWorkerLost, &WorkerLost{WorkerID: rapid.SampledFrom(workers).Draw(rt, "lw"), Time: int64(i)}
			case 6:
				ct, payload = CmdDecommissionWorker, &DecommissionWorker{WorkerID: rapid.SampledFrom(workers).Draw(rt, "dw"), Time: int64(i)}
			}
			data, err := Encode(ct, payload)
			if err != nil {
				rt.Fatal(err)
			}
			f.ApplyCommand(uint64(i+1), data)
			checkInvariants(rt, f)
		}
		if a, b := hashOf(rt, f), hashOf(rt, snapshotRestore(rt, f)); a != b {
			rt.Fatalf("snapshot/restore changed the tables")
		}
	})
}

func checkInvariants(t tb, f *FSM) {
	cores := map[string]int{}
	mem := map[string]int64{}
	waiting := map[string]bool{}
	for _, d := range f.WaitingDrivers() {
		if waiting[d.ID] {
			t.Fatalf("%s is twice in waitingDrivers", d.ID)
		}
		waiting[d.ID] = true
	}
	for _, d := range f.Drivers() {
		if d.State.Terminal() {
			if waiting[d.ID] {
				t.Fatalf("ended driver %s is waiting", d.ID)
			}
			continue
		}
		if d.WorkerID == "" {
			if !waiting[d.ID] {
				t.Fatalf("unplaced driver %s (%s) is not waiting", d.ID, d.State)
			}
			continue
		}
		if waiting[d.ID] {
			t.Fatalf("placed driver %s is waiting", d.ID)
		}
		if rec := d.currentAttempt(); rec == nil || rec.WorkerID != d.WorkerID {
			t.Fatalf("placed driver %s has no attempt record for attempt %d on %s", d.ID, d.Attempt, d.WorkerID)
		}
		cores[d.WorkerID] += d.Cores
		mem[d.WorkerID] += d.MemoryMB
	}
	for _, w := range f.Workers() {
		if w.CoresUsed != cores[w.ID] || w.MemoryUsedMB != mem[w.ID] {
			t.Fatalf("worker %s: used %d cores %d MiB, drivers sum to %d and %d", w.ID, w.CoresUsed, w.MemoryUsedMB, cores[w.ID], mem[w.ID])
		}
		if w.CoresUsed < 0 || w.MemoryUsedMB < 0 {
			t.Fatalf("worker %s: negative use", w.ID)
		}
	}
}
