package fsm

import (
	"testing"

	"github.com/drover-project/drover/model"
)

// The drivers that have not ended are counted in all and by the client
// they came from, and the apps that have not ended in all, as entries
// apply and after a restore. An entry an older master wrote, without a
// client, counts in all and under no client.
func TestLiveCounts(t *testing.T) {
	f := New()
	index := uint64(0)
	apply := func(payload model.Command) {
		t.Helper()
		data, err := Encode(payload)
		if err != nil {
			t.Fatal(err)
		}
		index++
		if err, ok := f.ApplyCommand(index, data).(error); ok {
			t.Fatalf("%s: %v", payload.CommandType(), err)
		}
	}
	check := func(f *FSM, client string, want Live) {
		t.Helper()
		if got := f.State().Live(client); got != want {
			t.Fatalf("Live(%q) = %+v, want %+v", client, got, want)
		}
	}
	old := append([]byte{FormatJSON, byte(model.CmdSubmitDriver)},
		`{"id":"driver-20261129120000-0000","token":"t0","argv":["a"],"cores":1,"memory_mb":64,"supervise":false,"time":1}`...)
	index++
	if err, ok := f.ApplyCommand(index, old).(error); ok {
		t.Fatal(err)
	}
	check(f, "", Live{Drivers: 1})
	apply(&model.SubmitDrivers{Drivers: []model.SubmitDriver{
		{ID: driverID(1), Token: "t1", DriverSpec: model.DriverSpec{Argv: []string{"a"}, Cores: 1, MemoryMB: 64}, Client: "10.0.0.1"},
		{ID: driverID(2), Token: "t2", DriverSpec: model.DriverSpec{Argv: []string{"a"}, Cores: 1, MemoryMB: 64}, Client: "10.0.0.1"},
		// The same token again makes no driver, and counts nothing.
		{ID: driverID(3), Token: "t2", DriverSpec: model.DriverSpec{Argv: []string{"a"}, Cores: 1, MemoryMB: 64}, Client: "10.0.0.1"},
		{ID: driverID(4), Token: "t4", DriverSpec: model.DriverSpec{Argv: []string{"a"}, Cores: 1, MemoryMB: 64}, Client: "10.0.0.2"},
	}})
	check(f, "10.0.0.1", Live{Drivers: 4, ClientDrivers: 2})
	check(f, "10.0.0.2", Live{Drivers: 4, ClientDrivers: 1})
	apply(&model.RegisterApp{ID: appID(0), Token: "a0", Argv: []string{"e"}, CoresPerExecutor: 1, MemoryPerExecutorMB: 64, ExecutorLimit: -1})
	apply(&model.RegisterApp{ID: appID(1), Token: "a1", Argv: []string{"e"}, CoresPerExecutor: 1, MemoryPerExecutorMB: 64, ExecutorLimit: -1})
	check(f, "10.0.0.1", Live{Drivers: 4, ClientDrivers: 2, Apps: 2})

	apply(&model.KillDriver{DriverID: driverID(1)})
	apply(&model.KillDriver{DriverID: "driver-20261129120000-0000"})
	apply(&model.EndApp{AppID: appID(0), State: model.AppFinished})
	check(f, "10.0.0.1", Live{Drivers: 2, ClientDrivers: 1, Apps: 1})
	// Dropping ended rows changes no count.
	apply(&model.PruneCompleted{DriverIDs: []string{driverID(1)}, AppIDs: []string{appID(0)}})
	check(f, "10.0.0.1", Live{Drivers: 2, ClientDrivers: 1, Apps: 1})
	r := snapshotRestore(t, f)
	check(r, "10.0.0.1", Live{Drivers: 2, ClientDrivers: 1, Apps: 1})
	check(r, "10.0.0.2", Live{Drivers: 2, ClientDrivers: 1, Apps: 1})
	check(r, "10.0.0.3", Live{Drivers: 2, Apps: 1})
	if d, _ := r.State().Driver(driverID(2)); d.Client != "10.0.0.1" {
		t.Fatalf("a restored row names client %q, want 10.0.0.1", d.Client)
	}
}
