package fsm

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/drover-project/drover/model"
)

// goldenEntries are entries as masters wrote them before a submission or
// a registration could name a user, byte for byte (scenario's third and
// forty-third, in both formats; testdata/fuzz/FuzzCommand holds them
// too).
var goldenEntries = map[string][]byte{
	"SubmitDriver in JSON": []byte("\x01\x02{\"id\":\"driver-20261129120000-0000\",\"token\":\"t0\",\"argv\":[\"a\"],\"cores\":1,\"memory_mb\":512,\"supervise\":true,\"time\":3}"),
	"SubmitDriver in MessagePack": []byte("\x02\x02\x87\xa4argv\x91\xa1a\xa5cores\x01\xa2id\xbadriver-20261129120000-0000\xa9memory_mb\xd1\x02\x00\xa9supervise\xc3" +
		"\xa4time\x03\xa5token\xa2t0"),
	"RegisterApp in JSON": []byte("\x01\b{\"id\":\"app-20261129120000-0004\",\"token\":\"at4\",\"max_cores\":0,\"cores_per_executor\":1,\"memory_per_executor_mb\":256," +
		"\"executor_limit\":-1,\"argv\":[\"exec\"],\"max_executor_retries\":0,\"time\":43}"),
	"RegisterApp in MessagePack": []byte("\x02\b\x89\xa4argv\x91\xa4exec\xb2cores_per_executor\x01\xaeexecutor_limit\xff\xa2id\xb7app-20261129120000-0004" +
		"\xa9max_cores\x00\xb4max_executor_retries\x00\xb6memory_per_executor_mb\xd1\x01\x00\xa4time+\xa5token\xa3at4"),
}

// An entry written before users existed decodes with no user, makes a row
// with none (which runs as its worker's default user, as before) whose
// JSON has no user field, so tables and their StateHash are what older
// masters hold; and a command without a user encodes to the very bytes
// older masters wrote, so a log or snapshot they read is unchanged.
func TestEntriesWithoutUserAreAsBefore(t *testing.T) {
	for name, entry := range goldenEntries {
		_, payload, err := Decode(entry)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var user string
		switch p := payload.(type) {
		case *model.SubmitDriver:
			user = p.User
		case *model.RegisterApp:
			user = p.User
		}
		if user != "" {
			t.Fatalf("%s decoded with user %q", name, user)
		}
		again, err := EncodeAs(entry[0], payload)
		if err != nil || !bytes.Equal(again, entry) {
			t.Fatalf("%s encodes again as %q (%v), want the bytes older masters wrote", name, again, err)
		}
		f := New()
		if res, bad := f.ApplyCommand(1, entry).(error); bad {
			t.Fatalf("%s: %v", name, res)
		}
		f.mu.RLock()
		rows, err := json.Marshal(f.t)
		f.mu.RUnlock()
		if err != nil || bytes.Contains(rows, []byte(`"user"`)) {
			t.Fatalf("%s: the tables hold a user: %s %v", name, rows, err)
		}
	}
	// The snapshots masters wrote before users existed restore to rows
	// without one (TestCommittedSnapshotsRoundTrip checks their bytes).
	for _, name := range []string{"scenario", "base-after-32", packedPrefix + "scenario-drivers-only", packedPrefix + "base-after-33"} {
		f := restoreBytes(t, committedSnapshot(t, name))
		for _, d := range f.State().Drivers() {
			if d.User != "" {
				t.Fatalf("%s: driver %s runs as %q", name, d.ID, d.User)
			}
		}
		apps, _ := f.State().Apps()
		for _, a := range apps {
			if a.User != "" {
				t.Fatalf("%s: app %s runs as %q", name, a.ID, a.User)
			}
		}
	}
}

// A driver's user and its app's are kept in its row, in either entry
// format, across its relaunch on another worker, in the assignments of
// every attempt, and through both snapshot versions.
func TestUserIsKeptEverywhere(t *testing.T) {
	b := &logBuilder{t: t}
	b.add(&model.RegisterWorker{ID: "w1", HTTPAddr: "127.0.0.1:1", Cores: 4, MemoryMB: 4096, Time: 1})
	b.add(&model.RegisterWorker{ID: "w2", HTTPAddr: "127.0.0.1:2", Cores: 4, MemoryMB: 4096, Time: 2})
	b.add(&model.SubmitDrivers{Drivers: []model.SubmitDriver{
		{ID: driverID(0), Token: "t0", DriverSpec: model.DriverSpec{Argv: []string{"a"}, Cores: 1, MemoryMB: 64, Supervise: true, User: "etl"}, Time: 3},
		{ID: driverID(1), Token: "t1", DriverSpec: model.DriverSpec{Argv: []string{"b"}, Cores: 1, MemoryMB: 64}, Time: 3},
	}})
	b.add(&model.PlaceDrivers{Time: 4, Placements: []model.Placement{
		{DriverID: driverID(0), Attempt: 1, WorkerID: "w1"}, {DriverID: driverID(1), Attempt: 1, WorkerID: "w1"}}})
	b.add(&model.WorkerLost{WorkerID: "w1", Time: 5})
	b.add(&model.PlaceDrivers{Time: 6, Placements: []model.Placement{{DriverID: driverID(0), Attempt: 2, WorkerID: "w2"}}})
	b.add(&model.ReportAttempts{WorkerID: "w2", Time: 7, Reports: []model.AttemptReport{
		{DriverID: driverID(0), Attempt: 2, State: model.DriverRunning, Runs: 1}}})
	b.add(&model.RegisterApp{ID: appID(0), Token: "a0", DriverID: driverID(0), DriverAttempt: 2, CoresPerExecutor: 1,
		MemoryPerExecutorMB: 64, ExecutorLimit: -1, Argv: []string{"exec"}, User: "etl", Time: 8})
	b.add(&model.PlaceExecutors{Time: 9, Placements: []model.ExecutorPlacement{{AppID: appID(0), ExecutorID: 0, WorkerID: "w2"}}})

	check := func(name string, f *FSM) {
		t.Helper()
		d, _ := f.State().Driver(driverID(0))
		other, _ := f.State().Driver(driverID(1))
		if d == nil || d.User != "etl" || d.Attempt != 2 || other == nil || other.User != "" {
			t.Fatalf("%s: drivers %+v and %+v, want attempt 2 as etl and one without a user", name, d, other)
		}
		if as, _ := f.State().DriversOn("w2", nil); len(as) != 1 || as[0].Attempt != 2 || as[0].User != "etl" {
			t.Fatalf("%s: w2's assignments %+v, want attempt 2 as etl", name, as)
		}
		if _, apps := f.State().ExecutorsOn("w2"); len(apps) != 1 || apps[0].User != "etl" {
			t.Fatalf("%s: the apps of w2's executors %+v, want one as etl", name, apps)
		}
		rows, err := json.Marshal(d)
		if err != nil || !bytes.Contains(rows, []byte(`"user":"etl"`)) {
			t.Fatalf("%s: the driver's JSON %s %v has no user", name, rows, err)
		}
	}
	plain := replay(t, b.entries)
	check("JSON entries", plain)
	check("MessagePack entries", replay(t, inPack(t, b.entries)))
	check("snapshot", restoreBytes(t, snapshotBytes(t, plain)))
	check("JSON snapshot", restoreBytes(t, marshalled(t, plain)))
}
