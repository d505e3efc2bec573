package fsm

// Fuzz targets for the two ways untrusted bytes reach the tables: Raft log
// entries (Decode, through Apply) and snapshots (Restore). `go test ./fsm`
// runs their seeds (f.Add and testdata/fuzz/<name>/); `make fuzz-smoke`
// fuzzes each briefly, `make fuzz` for long. go test ./fsm -run
// TestWriteFuzzCorpus -update-fuzz-corpus rewrites the committed seed files
// from the commands and snapshots below.

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/drover-project/drover/model"
)

var updateFuzzCorpus = flag.Bool("update-fuzz-corpus", false, "rewrite the seed files in testdata/fuzz")

// fuzzLog is the log of the tables both targets start from, a busy
// cluster with a row in every state a command can meet:
//
//	w1 ALIVE and full: driver 0 (RUNNING, supervised), driver 6 (RUNNING,
//	   its second run), app 0's executors 0 (RUNNING) and 1 (LAUNCHING)
//	w2 DECOMMISSIONED, still holding driver 4 (SUBMITTED)
//	w3 DEAD: driver 5 was relaunched from it (RELAUNCHING, attempt 2)
//	w4 ALIVE with room: app 3's executor 0 (RUNNING); app 1's two ended
//	drivers 1 FINISHED, 2 KILLED; 3 (64 cores), 7 and 5 wait, in that
//	   order; 8 was killed and pruned, taking its token with it
//	apps 0 RUNNING (driver 0, attempt 1, run 1), 1 FINISHED (a FAILED and
//	   an EXITED executor), 2 WAITING with none, 3 RUNNING (driver 6, run 2)
func fuzzLog(t tb) [][]byte {
	b := &logBuilder{t: t}
	now := int64(1_795_000_000_000)
	tick := func() int64 { now++; return now }
	for i, w := range []struct {
		id    string
		cores int
		mem   int64
	}{{"w1", 4, 4096}, {"w2", 2, 2048}, {"w3", 2, 1024}, {"w4", 8, 8192}} {
		b.add(&model.RegisterWorker{ID: w.id, Instance: "inst-" + w.id, HTTPAddr: fmt.Sprintf("127.0.0.1:%d", 7401+i),
			Cores: w.cores, MemoryMB: w.mem, Time: tick()})
	}
	submit := func(seq, cores int, mem int64, supervise bool) {
		b.add(&model.SubmitDriver{ID: driverID(seq), Token: fmt.Sprint("t", seq), Name: fmt.Sprint("driver ", seq),
			DriverSpec: model.DriverSpec{
				Argv:      []string{"/bin/prog", fmt.Sprint("--n=", seq)},
				Env:       map[string]string{"K": "v"},
				Cores:     cores,
				MemoryMB:  mem,
				Supervise: supervise,
			},
			Time: tick()})
	}
	submit(0, 1, 256, true)
	submit(1, 1, 256, false)
	submit(2, 1, 256, false)
	submit(3, 64, 256, false)
	submit(4, 2, 128, false)
	submit(5, 2, 128, true)
	submit(6, 1, 256, true)
	submit(7, 1, 128, false)
	b.add(&model.PlaceDrivers{Time: tick(), Placements: []model.Placement{
		{DriverID: driverID(0), Attempt: 1, WorkerID: "w1"}, {DriverID: driverID(1), Attempt: 1, WorkerID: "w1"},
		{DriverID: driverID(6), Attempt: 1, WorkerID: "w1"}, {DriverID: driverID(4), Attempt: 1, WorkerID: "w2"},
		{DriverID: driverID(5), Attempt: 1, WorkerID: "w3"},
	}})
	b.add(&model.ReportAttempts{WorkerID: "w1", Time: tick(), Reports: []model.AttemptReport{
		{DriverID: driverID(0), Attempt: 1, State: model.DriverRunning, Runs: 1},
		{DriverID: driverID(1), Attempt: 1, State: model.DriverFinished, ExitCode: intp(0), Runs: 1},
		{DriverID: driverID(6), Attempt: 1, State: model.DriverRunning, Runs: 2},
	}})
	b.add(&model.KillDriver{DriverID: driverID(2), Time: tick()})
	b.add(&model.ReportAttempts{WorkerID: "w3", Time: tick(), Reports: []model.AttemptReport{
		{DriverID: driverID(5), Attempt: 1, State: model.DriverRunning, Runs: 1},
	}})
	b.add(&model.DecommissionWorker{WorkerID: "w2", Reason: "worker shut down", Time: tick()})
	b.add(&model.WorkerLost{WorkerID: "w3", Reason: "missing from the gossip pool", Time: tick()})
	b.add(&model.RegisterApp{ID: appID(0), Token: "at0", Name: "pi", DriverID: driverID(0), DriverAttempt: 1, DriverRun: 1,
		CoresPerExecutor: 1, MemoryPerExecutorMB: 256, ExecutorLimit: 2, Argv: []string{"/bin/exec"}, Env: map[string]string{"E": "1"},
		MaxExecutorRetries: 3, Time: tick()})
	b.add(&model.RegisterApp{ID: appID(1), Token: "at1", MaxCores: 2, CoresPerExecutor: 1, MemoryPerExecutorMB: 128,
		ExecutorLimit: -1, Argv: []string{"/bin/exec"}, MaxExecutorRetries: 10, Time: tick()})
	b.add(&model.RegisterApp{ID: appID(2), Token: "at2", CoresPerExecutor: 2, MemoryPerExecutorMB: 512,
		ExecutorLimit: -1, Argv: []string{"/bin/exec"}, MaxExecutorRetries: -1, Time: tick()})
	b.add(&model.RegisterApp{ID: appID(3), Token: "at3", DriverID: driverID(6), DriverAttempt: 1, DriverRun: 2,
		CoresPerExecutor: 1, MemoryPerExecutorMB: 256, ExecutorLimit: 1, Argv: []string{"/bin/exec"}, MaxExecutorRetries: 0, Time: tick()})
	b.add(&model.PlaceExecutors{Time: tick(), Placements: []model.ExecutorPlacement{
		{AppID: appID(0), ExecutorID: 0, WorkerID: "w1"}, {AppID: appID(0), ExecutorID: 1, WorkerID: "w1"},
		{AppID: appID(1), ExecutorID: 0, WorkerID: "w4"}, {AppID: appID(3), ExecutorID: 0, WorkerID: "w4"},
	}})
	b.add(&model.ReportAttempts{WorkerID: "w1", Time: tick(), Executors: []model.ExecutorReport{
		{AppID: appID(0), ExecutorID: 0, State: model.ExecRunning},
	}})
	b.add(&model.ReportAttempts{WorkerID: "w4", Time: tick(), Executors: []model.ExecutorReport{
		{AppID: appID(1), ExecutorID: 0, State: model.ExecFailed, ExitCode: intp(1), Reason: "exited 1"},
		{AppID: appID(3), ExecutorID: 0, State: model.ExecRunning},
	}})
	b.add(&model.PlaceExecutors{Time: tick(), Placements: []model.ExecutorPlacement{{AppID: appID(1), ExecutorID: 1, WorkerID: "w4"}}})
	b.add(&model.ReportAttempts{WorkerID: "w4", Time: tick(), Executors: []model.ExecutorReport{
		{AppID: appID(1), ExecutorID: 1, State: model.ExecExited, ExitCode: intp(0)},
	}})
	b.add(&model.EndApp{AppID: appID(1), State: model.AppFinished, Time: tick()})
	b.add(&model.RequestExecutors{AppID: appID(0), Total: 2, Time: tick()})
	submit(8, 1, 64, false)
	b.add(&model.KillDriver{DriverID: driverID(8), Reason: "operator", AttemptReason: true, Time: tick()})
	b.add(&model.PruneCompleted{DriverIDs: []string{driverID(8)}})
	b.add(&model.ReportBatch{Reports: []model.ReportAttempts{
		{WorkerID: "w1", Time: tick(), Reports: []model.AttemptReport{{DriverID: driverID(0), Attempt: 1, State: model.DriverRunning, Runs: 1}}},
		{WorkerID: "w3", Time: tick(), Reports: []model.AttemptReport{{DriverID: driverID(5), Attempt: 1, State: model.DriverFinished, ExitCode: intp(0), Runs: 1}}},
	}})
	return b.entries
}

// fuzzStart is fuzzLog, built once, and the hash of its tables.
var fuzzStart struct {
	once    sync.Once
	entries [][]byte
	hash    string
}

func fuzzBase(t tb) ([][]byte, string) {
	fuzzStart.once.Do(func() {
		fuzzStart.entries = fuzzLog(t)
		fuzzStart.hash = hashOf(t, replay(t, fuzzStart.entries))
	})
	if fuzzStart.hash == "" {
		t.Fatal("fuzz baseline failed to build")
	}
	return fuzzStart.entries, fuzzStart.hash
}

// TestFuzzBaseline keeps fuzzLog what its comment says, so the fuzz targets
// keep meeting every kind of row.
func TestFuzzBaseline(t *testing.T) {
	entries, _ := fuzzBase(t)
	f := New()
	for i, e := range entries {
		if err, ok := f.ApplyCommand(uint64(i+1), e).(error); ok {
			t.Fatalf("entry %d refused: %v", i+1, err)
		}
	}
	checkInvariants(t, f)
	wantWorkers := map[string]model.WorkerState{"w1": model.WorkerAlive, "w2": model.WorkerDecommissioned, "w3": model.WorkerDead, "w4": model.WorkerAlive}
	for _, w := range f.State().Workers() {
		if w.State != wantWorkers[w.ID] {
			t.Errorf("worker %s is %s, want %s", w.ID, w.State, wantWorkers[w.ID])
		}
	}
	if w, _ := f.State().Worker("w1"); w.CoresFree() != 0 {
		t.Errorf("w1 has %d free cores, want 0", w.CoresFree())
	}
	wantDrivers := []model.DriverState{model.DriverRunning, model.DriverFinished, model.DriverKilled, model.DriverSubmitted, model.DriverSubmitted, model.DriverRelaunching, model.DriverRunning, model.DriverSubmitted}
	for seq, want := range wantDrivers {
		if d, ok := f.State().Driver(driverID(seq)); !ok || d.State != want {
			t.Errorf("driver %d: %+v, want %s", seq, d, want)
		}
	}
	if _, ok := f.State().Driver(driverID(8)); ok {
		t.Error("driver 8 was not pruned")
	}
	var waiting []string
	for _, d := range f.State().WaitingDrivers() {
		waiting = append(waiting, d.ID)
	}
	if fmt.Sprint(waiting) != fmt.Sprint([]string{driverID(3), driverID(7), driverID(5)}) {
		t.Errorf("waiting %v", waiting)
	}
	wantApps := []model.ApplicationState{model.AppRunning, model.AppFinished, model.AppWaiting, model.AppRunning}
	for seq, want := range wantApps {
		if a, _, ok := f.State().App(appID(seq)); !ok || a.State != want {
			t.Errorf("app %d: %+v, want %s", seq, a, want)
		}
	}
	if _, es, _ := f.State().App(appID(0)); len(es) != 2 || es[0].State != model.ExecRunning || es[1].State != model.ExecLaunching {
		t.Errorf("app 0's executors: %+v", es)
	}
}

// fuzzCommandSeeds are hand-made entries against the fuzzLog tables, beside
// the encoded commands in testdata/fuzz/FuzzCommand.
func fuzzCommandSeeds(t tb) [][]byte {
	enc := func(payload model.Command) []byte {
		data, err := Encode(payload)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	seeds := [][]byte{
		nil, {FormatJSON}, {FormatJSON, byte(model.CmdSubmitDriver)}, {2, 2, '{', '}'}, {1, 99, '{', '}'}, {1, 2, '{'},
		[]byte("\x01\x02{\"id\":1}"), []byte("\x01\x05{\"driver_id\":\"x\",\"bogus\":1}"), []byte("\x01\x0d{} {}"),
		{1, 0x80 | 99, '{', '}'}, {1, 0x80, 'x'}, []byte("\x01\x85{\"driver_id\":\"" + driverID(4) + "\",\"added_later\":[1]}"),
		{FormatPack}, {FormatPack, byte(model.CmdKillDriver)}, {FormatPack, byte(model.CmdKillDriver), 0xc0}, {FormatPack, 0x80 | 99, 0x80},
		[]byte("\x02\x05\x81\xa9driver_id\x01"), []byte("\x02\x05\x80\x80"), []byte("\x02\x02\xdd\xff\xff\xff\xff"),
		[]byte("\x02\x85\x82\xa9driver_id\xba" + driverID(4) + "\xabadded_later\x91\x01"),
		enc(&model.ReportAttempts{WorkerID: "w1", Time: 9, Reports: []model.AttemptReport{
			{DriverID: driverID(0), Attempt: 1, State: model.DriverKilled}, {DriverID: driverID(6), Attempt: 1, State: model.DriverRunning, Runs: 3}}}),
		enc(&model.ReportAttempts{WorkerID: "w1", Time: 9, Executors: []model.ExecutorReport{
			{AppID: appID(0), ExecutorID: 1, State: model.ExecFailed, ExitCode: intp(2)}, {AppID: appID(0), ExecutorID: 0, State: model.ExecFailed}}}),
		enc(&model.WorkerLost{WorkerID: "w1", Time: 9}),
		enc(&model.PlaceDrivers{Time: 9, Placements: []model.Placement{{DriverID: driverID(7), Attempt: 1, WorkerID: "w4"},
			{DriverID: driverID(5), Attempt: 2, WorkerID: "w4"}, {DriverID: driverID(3), Attempt: 1, WorkerID: "w4"}}}),
		enc(&model.PlaceExecutors{Time: 9, Placements: []model.ExecutorPlacement{{AppID: appID(2), ExecutorID: 0, WorkerID: "w4"},
			{AppID: appID(2), ExecutorID: 1, WorkerID: "w4"}, {AppID: appID(0), ExecutorID: 2, WorkerID: "w4"}}}),
		enc(&model.KillExecutors{AppID: appID(0), ExecutorIDs: []int{1, 0}, Time: 9}),
		enc(&model.EndApp{AppID: appID(3), State: model.AppKilled, Time: 9}),
		enc(&model.KillDriver{DriverID: driverID(4), Time: 9}),
		enc(&model.KillDriver{DriverID: driverID(0), Reason: "killed by a client request", AttemptReason: true, Time: 9}),
		enc(&model.RegisterApp{ID: appID(9), Token: "at9", DriverID: driverID(6), DriverAttempt: 1, DriverRun: 1,
			CoresPerExecutor: 1, MemoryPerExecutorMB: 1, ExecutorLimit: -1, Argv: []string{"x"}, Time: 9}),
		enc(&model.PruneCompleted{DriverIDs: []string{driverID(1), driverID(2), driverID(0)}, AppIDs: []string{appID(1), appID(0)}}),
		enc(&model.SubmitDrivers{Drivers: []model.SubmitDriver{
			{ID: driverID(9), Token: "t9", DriverSpec: model.DriverSpec{Argv: []string{"x"}, Cores: 1, MemoryMB: 1}, Time: 9},
			{ID: driverID(10), Token: "t9", DriverSpec: model.DriverSpec{Argv: []string{"x"}, Cores: 1, MemoryMB: 1}, Time: 9},
			{ID: driverID(0), Token: "t11", DriverSpec: model.DriverSpec{Argv: []string{"x"}, Cores: 1, MemoryMB: 1}, Time: 9}}}),
	}
	// Every registered type with an empty payload, in both formats and
	// flagged: a type added to the registry is fuzzed from its first day.
	for ct, c := range commands {
		if c != nil {
			seeds = append(seeds, []byte{FormatJSON, byte(ct), '{', '}'}, []byte{FormatJSON, byte(ct) | 0x80, '{', '}'},
				[]byte{FormatPack, byte(ct), 0x80})
		}
	}
	return seeds
}

// FuzzCommand decodes arbitrary bytes as a log entry and applies it to the
// fuzzLog tables. Whatever the bytes: no panic. An entry Decode refuses
// halts the FSM with the tables of the entries before it, which nothing
// changes afterwards (checkHalt). Any other entry advances the applied
// index without halting; a skipped (unknown, ignorable) or refused one
// changes nothing else; an accepted one applies the same on a second
// replica, decodes to what it encodes back to, keeps the invariants of
// TestRandomLogsKeepInvariants, and survives Snapshot, Persist and Restore
// into a fresh FSM unchanged.
func FuzzCommand(f *testing.F) {
	entries, baseHash := fuzzBase(f)
	for _, s := range fuzzCommandSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		defer watchdog("FuzzCommand", data)()
		idx := uint64(len(entries) + 1)
		entry := &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: data}
		fs := replay(t, entries)
		ct, payload, decErr := Decode(data)
		res := fs.Apply(entry)
		if decErr != nil {
			checkHalt(t, fs, idx-1, baseHash, res)
			checkWorkerIndex(t, fs)
			return
		}
		if fs.Err() != nil || fs.Index() != idx {
			t.Fatalf("entry %d that decodes: Index %d, Err %v", idx, fs.Index(), fs.Err())
		}
		after := hashOf(t, fs)
		if payload == nil {
			if res != nil || after != baseHash {
				t.Fatalf("skipped entry of type byte %#x returned %v, changed the tables %v", data[1], res, after != baseHash)
			}
			return
		}
		if err, refused := res.(error); refused {
			if after != baseHash {
				t.Fatalf("refused entry (%v) changed the tables", err)
			}
			checkWorkerIndex(t, fs)
			return
		}

		replica := replay(t, entries)
		if res2 := replica.Apply(entry); resultText(res2) != resultText(res) {
			t.Fatalf("%s applied differently on two replicas: %s vs %s", ct, resultText(res), resultText(res2))
		}
		if h := hashOf(t, replica); h != after {
			t.Fatalf("%s left different tables on two replicas", ct)
		}

		again, err := EncodeAs(data[0], payload)
		if err != nil {
			t.Fatalf("%s decoded but does not encode: %v", ct, err)
		}
		ct2, payload2, err := Decode(again)
		if err != nil || ct2 != ct {
			t.Fatalf("%s re-encoded as %q does not decode: %v", ct, again, err)
		}
		if j1, j2 := mustJSON(t, payload), mustJSON(t, payload2); !bytes.Equal(j1, j2) {
			t.Fatalf("%s changed through Encode and Decode: %s vs %s", ct, j1, j2)
		}

		checkInvariants(t, fs)
		if h := hashOf(t, snapshotRestore(t, fs)); h != after {
			t.Fatalf("after %s: snapshot and restore changed the tables", ct)
		}
	})
}

// fuzzInputLimit bounds the time one fuzz input may take. Go's fuzzing
// engine has no such bound: an input that hangs only stalls the run.
const fuzzInputLimit = 10 * time.Second

// watchdog crashes the process, naming the input, if the returned stop is
// not called within fuzzInputLimit; under -fuzz the engine then keeps the
// input as a failure in testdata/fuzz.
func watchdog(target string, data []byte) (stop func()) {
	tm := time.AfterFunc(fuzzInputLimit, func() {
		panic(fmt.Sprintf("%s: one input took over %s: %q", target, fuzzInputLimit, data))
	})
	return func() { tm.Stop() }
}

func mustJSON(t tb, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fuzzRestoreSeeds are hand-made snapshots, beside the real ones in
// testdata/fuzz/FuzzRestore.
func fuzzRestoreSeeds() [][]byte {
	var seeds [][]byte
	for _, s := range []string{
		``, `{}`, `null`, `{"version":1}`, `{"version":1,"tables":null}`, `{"version":2,"tables":{}}`,
		`{"version":1,"tables":{"workers":{"w1":null}}}`,
		`{"version":1,"tables":{"drivers":{"x":{"id":"y"}}}}`,
		`{"version":1,"tables":{"waiting_drivers":["ghost"]}}`,
		`{"version":1,"tables":{"tokens":{"t":"ghost"}}}`,
		`{"version":1,"tables":{"apps":{"a":{"id":"a","first_executor_id":2,"next_executor_id":1}}}}`,
		`{"version":1,"tables":{"executors":{"a/0":{"app_id":"a","id":0}}}}`,
		`{"version":1,"tables":{"app_tokens":{"t":"ghost"}}}`,
		`{"version":1,"tables":{},"extra":1}`,
		`{"version":1,"tables":{}} {}`,
		`{"version":1,"tables":{"workers":{"w":{"id":"w","cores":1,"memory_mb":1,"state":"ALIVE"}},` +
			`"drivers":{"d":{"id":"d","argv":["x"],"cores":1,"memory_mb":1,"state":"RUNNING","worker_id":"w","attempt":1,"attempts":[]}},` +
			`"apps":{"a":{"id":"a","driver_id":"d","driver_attempt":1,"cores_per_executor":1,"memory_per_executor_mb":1,"executor_limit":-1,"state":"RUNNING","next_executor_id":1}},` +
			`"executors":{"a/0":{"app_id":"a","id":0,"worker_id":"w","cores":1,"memory_mb":1,"state":"RUNNING"}}}}`,
	} {
		seeds = append(seeds, []byte(s))
	}
	return seeds
}

// FuzzRestore restores arbitrary bytes as a snapshot into an FSM that holds
// the fuzzLog tables. Whatever the bytes: no panic; a refused snapshot
// leaves the old tables and their per-worker index as they were; an
// accepted one gives the same tables restored into a fresh FSM, snapshots
// and restores to the same tables again, has a per-worker index that
// matches its rows, and takes commands (reads, reports, placements, kills,
// a worker loss, pruning) without panicking or leaving tables that no
// longer restore.
func FuzzRestore(f *testing.F) {
	entries, baseHash := fuzzBase(f)
	for _, s := range fuzzRestoreSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		defer watchdog("FuzzRestore", data)()
		fs := replay(t, entries)
		if err := fs.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
			if hashOf(t, fs) != baseHash {
				t.Fatalf("refused snapshot (%v) changed the tables", err)
			}
			checkWorkerIndex(t, fs)
			return
		}
		h := hashOf(t, fs)
		fresh := New()
		if err := fresh.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
			t.Fatalf("snapshot restores over the fuzzLog tables but not into a fresh FSM: %v", err)
		}
		if hashOf(t, fresh) != h {
			t.Fatal("the same snapshot restored differently over other tables")
		}
		if hashOf(t, snapshotRestore(t, fs)) != h {
			t.Fatal("restored tables changed through a second snapshot and restore")
		}
		checkWorkerIndex(t, fs)
		driveRestored(t, fs)
		g := snapshotRestore(t, fs)
		if hashOf(t, g) != hashOf(t, fs) {
			t.Fatal("tables changed through snapshot and restore after commands on restored tables")
		}
	})
}

// driveRestored reads everything from restored tables and applies a fixed
// set of commands chosen from what they hold, as a follower does with the
// entries after a snapshot it installed.
func driveRestored(t *testing.T, f *FSM) {
	idx := f.Index()
	apply := func(payload model.Command) {
		data, err := Encode(payload)
		if err != nil {
			t.Fatal(err)
		}
		idx++
		f.ApplyCommand(idx, data)
	}
	workers := f.State().Workers()
	drivers := f.State().Drivers()
	apps, _ := f.State().Apps()
	f.State().LiveApps()
	f.State().Completed()
	f.State().WaitingDrivers()
	demands := f.State().WaitingDemands()
	for _, d := range drivers {
		f.State().DriverByToken(d.Token)
	}
	for _, a := range apps {
		f.State().App(a.ID)
		f.State().AppByToken(a.Token)
	}
	for _, w := range workers {
		var reports []model.AttemptReport
		for _, a := range f.State().AttemptsOn(w.ID) {
			reports = append(reports, model.AttemptReport{DriverID: a.DriverID, Attempt: a.Attempt, State: model.DriverRunning, Runs: 2})
		}
		es, _ := f.State().ExecutorsOn(w.ID)
		var execs []model.ExecutorReport
		for _, e := range es {
			execs = append(execs, model.ExecutorReport{AppID: e.AppID, ExecutorID: e.ID, State: model.ExecRunning})
		}
		apply(&model.ReportAttempts{WorkerID: w.ID, Reports: reports, Executors: execs, Time: 1})
		var ps []model.Placement
		for _, d := range demands {
			ps = append(ps, model.Placement{DriverID: d.DriverID, Attempt: d.Attempt, WorkerID: w.ID})
		}
		apply(&model.PlaceDrivers{Placements: ps, Time: 2})
		var eps []model.ExecutorPlacement
		for _, a := range apps {
			eps = append(eps, model.ExecutorPlacement{AppID: a.ID, ExecutorID: a.NextExecutorID, WorkerID: w.ID})
		}
		apply(&model.PlaceExecutors{Placements: eps, Time: 3})
		for i, e := range es {
			state := []model.ExecutorState{model.ExecFailed, model.ExecExited, model.ExecKilled}[i%3]
			apply(&model.ReportAttempts{WorkerID: w.ID, Executors: []model.ExecutorReport{{AppID: e.AppID, ExecutorID: e.ID, State: state}}, Time: 4})
		}
	}
	for i, d := range drivers {
		if i%2 == 0 {
			apply(&model.KillDriver{DriverID: d.ID, Time: 5})
		} else if d.WorkerID != "" {
			apply(&model.ReportAttempts{WorkerID: d.WorkerID, Reports: []model.AttemptReport{{DriverID: d.ID, Attempt: d.Attempt, State: model.DriverKilled}}, Time: 5})
		}
	}
	for _, a := range apps {
		apply(&model.RequestExecutors{AppID: a.ID, Total: 1, Time: 6})
		apply(&model.KillExecutors{AppID: a.ID, ExecutorIDs: []int{a.FirstExecutorID}, Time: 6})
		apply(&model.EndApp{AppID: a.ID, State: model.AppKilled, Time: 6})
	}
	if len(workers) > 0 {
		apply(&model.DecommissionWorker{WorkerID: workers[0].ID, Time: 7})
		apply(&model.WorkerLost{WorkerID: workers[len(workers)-1].ID, Time: 7})
	}
	ds, as := f.State().Completed()
	apply(&model.PruneCompleted{DriverIDs: ds, AppIDs: as})
	checkWorkerIndex(t, f)
}

// TestWriteFuzzCorpus rewrites testdata/fuzz/{FuzzCommand,FuzzRestore}
// when run with -update-fuzz-corpus: every entry of fuzzLog and of
// scenario, and snapshots of those tables at several points.
func TestWriteFuzzCorpus(t *testing.T) {
	if !*updateFuzzCorpus {
		t.Skip("run with -update-fuzz-corpus to rewrite testdata/fuzz")
	}
	entries, _ := fuzzBase(t)
	cmds := map[string][]byte{}
	for i, e := range entries {
		ct, _, _ := Decode(e)
		cmds[fmt.Sprintf("base-%02d-%s", i+1, ct)] = e
	}
	for i, e := range scenario(t) {
		ct, p, _ := Decode(e)
		cmds[fmt.Sprintf("scenario-%02d-%s", i+1, ct)] = e
		packed, err := EncodeAs(FormatPack, p)
		if err != nil {
			t.Fatal(err)
		}
		cmds[fmt.Sprintf("scenario-pack-%02d-%s", i+1, ct)] = packed
	}
	writeCorpus(t, "FuzzCommand", cmds)

	snaps := map[string][]byte{}
	for name, f := range packedStates(t) {
		snaps[name] = snapshotBytes(t, f)
	}
	writeCorpus(t, "FuzzRestore", snaps)
}

// packedStates are the tables of the SnapshotVersion snapshots in
// testdata/fuzz/FuzzRestore, by file name: fuzzLog's at several points,
// and scenario's.
func packedStates(t *testing.T) map[string]*FSM {
	entries, _ := fuzzBase(t)
	states := map[string]*FSM{packedPrefix + "empty": New()}
	for _, cut := range []int{4, 14, 20, len(entries)} {
		states[fmt.Sprintf("%sbase-after-%02d", packedPrefix, cut)] = replay(t, entries[:cut])
	}
	sc := scenario(t)
	states[packedPrefix+"scenario-drivers-only"] = replay(t, sc[:driverScenarioLen])
	states[packedPrefix+"scenario"] = replay(t, sc)
	return states
}

// jsonSnapshots are the SnapshotVersionJSON snapshots in
// testdata/fuzz/FuzzRestore that masters wrote before SnapshotVersion,
// kept as they were.
var jsonSnapshots = []string{"empty", "base-after-04", "base-after-14", "base-after-20", "base-after-32", "scenario", "scenario-drivers-only"}

// packedPrefix begins the names of SnapshotVersion snapshots there.
const packedPrefix = "packed-"

// writeCorpus writes one file per seed into testdata/fuzz/name, in the
// format of go test fuzz v1 for a func(*testing.T, []byte) target. Other
// files there (inputs that once failed) stay.
func writeCorpus(t *testing.T, name string, seeds map[string][]byte) {
	dir := filepath.Join("testdata", "fuzz", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for file, data := range seeds {
		content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
		if err := os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWideExecutorIDRange: FuzzRestore found that a snapshot whose app has
// a NextExecutorID far above its rows (here 2^40) was accepted and then
// made every read of the app, and every end of one of its executors, walk
// the whole ID range: hours of a master's CPU per call under its lock.
// Reads now scan the rows when that is shorter.
func TestWideExecutorIDRange(t *testing.T) {
	far := 1 << 40
	snap := fmt.Sprintf(`{"version":1,"tables":{"workers":{"w1":{"id":"w1","http_addr":"h:1","cores":4,"memory_mb":4096,"state":"ALIVE"}},`+
		`"apps":{"%[1]s":{"id":"%[1]s","cores_per_executor":1,"memory_per_executor_mb":1,"executor_limit":-1,"argv":["x"],"max_executor_retries":-1,"state":"RUNNING","next_executor_id":%[2]d}},"next_app_seq":1,`+
		`"executors":{"%[1]s/5":{"app_id":"%[1]s","id":5,"worker_id":"w1","cores":1,"memory_mb":1,"state":"RUNNING"},`+
		`"%[1]s/%[3]d":{"app_id":"%[1]s","id":%[3]d,"worker_id":"w1","cores":1,"memory_mb":1,"state":"RUNNING"}}}}`,
		appID(0), far, far-1)
	f := New()
	if err := f.Restore(io.NopCloser(bytes.NewReader([]byte(snap)))); err != nil {
		t.Fatal(err)
	}
	// Each step is bounded, not only the whole: the old walk took hours.
	step := func(what string, fn func()) {
		done := make(chan struct{})
		go func() { defer close(done); fn() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s of an app whose executor IDs span 2^40 took over 10s", what)
		}
	}
	var execs [][]*model.Executor
	step("a read", func() { _, execs = f.State().Apps() })
	if len(execs) != 1 || len(execs[0]) != 2 || execs[0][0].ID != 5 || execs[0][1].ID != far-1 {
		t.Fatalf("executors %+v, want IDs 5 and %d", execs, far-1)
	}
	report, _ := Encode(&model.ReportAttempts{WorkerID: "w1", Time: 1, Executors: []model.ExecutorReport{{AppID: appID(0), ExecutorID: 5, State: model.ExecExited, ExitCode: intp(0)}}})
	step("an executor's end", func() { f.ApplyCommand(1, report) })
	place, _ := Encode(&model.PlaceExecutors{Time: 2, Placements: []model.ExecutorPlacement{{AppID: appID(0), ExecutorID: far, WorkerID: "w1"}}})
	var res any
	step("a placement", func() { res = f.ApplyCommand(2, place) })
	if r, ok := res.(PlaceExecutorsResult); !ok || len(r.Applied) != 1 {
		t.Fatalf("placement at NextExecutorID %d: %+v", far, res)
	}
	a, es, _ := f.State().App(appID(0))
	if a.FirstExecutorID != 5 || a.NextExecutorID != far+1 || len(es) != 3 || a.CoresGranted != 2 {
		t.Fatalf("app %+v with executors %+v", a, es)
	}
	checkInvariants(t, f)
	if hashOf(t, snapshotRestore(t, f)) != hashOf(t, f) {
		t.Fatal("snapshot and restore changed the tables")
	}
}
