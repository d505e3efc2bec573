package fsm

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"pgregory.net/rapid"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/fsm/events"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/model/ids"
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

func (b *logBuilder) add(payload model.Command) []byte {
	data, err := Encode(payload)
	if err != nil {
		b.t.Fatalf("encode %s: %v", payload.CommandType(), err)
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
	h, err := f.State().StateHash()
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
	b.add(&model.RegisterWorker{ID: "w1", HTTPAddr: "127.0.0.1:1", Cores: 4, MemoryMB: 4096, Time: 1})
	b.add(&model.RegisterWorker{ID: "w2", HTTPAddr: "127.0.0.1:2", Cores: 2, MemoryMB: 2048, Time: 2})
	b.add(&model.SubmitDriver{ID: driverID(0), Token: "t0", DriverSpec: model.DriverSpec{Argv: []string{"a"}, Cores: 1, MemoryMB: 512, Supervise: true}, Time: 3})
	b.add(&model.SubmitDriver{ID: driverID(1), Token: "t1", DriverSpec: model.DriverSpec{Argv: []string{"b"}, Cores: 1, MemoryMB: 512}, Time: 4, Client: "10.0.0.1"})
	b.add(&model.SubmitDriver{ID: driverID(2), Token: "t2", DriverSpec: model.DriverSpec{Argv: []string{"c"}, Cores: 1, MemoryMB: 512}, Time: 5})
	b.add(&model.SubmitDriver{ID: driverID(3), Token: "t0", DriverSpec: model.DriverSpec{Argv: []string{"dup"}, Cores: 1, MemoryMB: 512}, Time: 6})
	b.add(&model.PlaceDrivers{Time: 7, Placements: []model.Placement{
		{DriverID: driverID(0), Attempt: 1, WorkerID: "w1"},
		{DriverID: driverID(1), Attempt: 1, WorkerID: "w1"},
		{DriverID: driverID(2), Attempt: 1, WorkerID: "nope"},
	}})
	b.add(&model.ReportAttempts{WorkerID: "w1", Time: 8, Reports: []model.AttemptReport{
		{DriverID: driverID(0), Attempt: 1, State: model.DriverRunning, Runs: 1},
		{DriverID: driverID(1), Attempt: 1, State: model.DriverRunning, Runs: 1},
	}})
	b.add(&model.WorkerLost{WorkerID: "w1", Time: 9})
	b.add(&model.PlaceDrivers{Time: 10, Placements: []model.Placement{{DriverID: driverID(0), Attempt: 2, WorkerID: "w2"}}})
	// A stale report for attempt 1 after attempt 2 is placed.
	b.add(&model.ReportAttempts{WorkerID: "w1", Time: 11, Reports: []model.AttemptReport{
		{DriverID: driverID(0), Attempt: 1, State: model.DriverFailed, ExitCode: intp(1)},
	}})
	b.add(&model.KillDriver{DriverID: driverID(2), Time: 12})
	b.add(&model.KillDriver{DriverID: "driver-20261129120000-9999", Time: 13})
	b.add(&model.ReportAttempts{WorkerID: "w2", Time: 14, Reports: []model.AttemptReport{
		{DriverID: driverID(0), Attempt: 2, State: model.DriverFinished, ExitCode: intp(0), Runs: 1},
	}})
	b.add(&model.RegisterWorker{ID: "w1", HTTPAddr: "127.0.0.1:3", Cores: 4, MemoryMB: 4096, Time: 15})
	b.add(&model.SubmitDriver{ID: driverID(4), Token: "t4", DriverSpec: model.DriverSpec{Argv: []string{"e"}, Cores: 1, MemoryMB: 512, Supervise: true, Artifacts: scenarioArtifacts}, Time: 16})
	b.add(&model.SubmitDriver{ID: driverID(5), Token: "t5", DriverSpec: model.DriverSpec{Argv: []string{"f"}, Cores: 1, MemoryMB: 512}, Time: 17})
	b.add(&model.PlaceDrivers{Time: 18, Placements: []model.Placement{
		{DriverID: driverID(4), Attempt: 1, WorkerID: "w2"},
		{DriverID: driverID(5), Attempt: 1, WorkerID: "w2"},
	}})
	b.add(&model.DecommissionWorker{WorkerID: "w2", Reason: "worker shut down", Time: 19})
	b.add(&model.ReportAttempts{WorkerID: "w2", Time: 20, Reports: []model.AttemptReport{
		{DriverID: driverID(4), Attempt: 1, State: model.DriverKilled, Reason: "worker shut down"},
		{DriverID: driverID(5), Attempt: 1, State: model.DriverKilled, Reason: "worker shut down"},
	}})
	if len(b.entries) != driverScenarioLen {
		t.Fatalf("the driver part of the scenario has %d entries, want %d", len(b.entries), driverScenarioLen)
	}
	// Applications and executors. w1 (4 cores) is ALIVE, w2 DECOMMISSIONED.
	b.add(&model.RegisterApp{ID: appID(0), Token: "at0", Name: "pi", MaxCores: 3, CoresPerExecutor: 1, MemoryPerExecutorMB: 256,
		ExecutorLimit: -1, Argv: []string{"exec"}, Env: map[string]string{"K": "v"}, MaxExecutorRetries: 1, Time: 21})
	// A retried registration, and a refused one.
	b.add(&model.RegisterApp{ID: appID(1), Token: "at0", CoresPerExecutor: 1, MemoryPerExecutorMB: 256, ExecutorLimit: -1, Argv: []string{"exec"}, Time: 22})
	b.add(&model.RegisterApp{ID: appID(2), Token: "at2", CoresPerExecutor: 0, MemoryPerExecutorMB: 256, ExecutorLimit: -1, Argv: []string{"exec"}, Time: 23})
	b.add(&model.SubmitDriver{ID: driverID(6), Token: "t6", DriverSpec: model.DriverSpec{Argv: []string{"g"}, Cores: 1, MemoryMB: 512}, Time: 24})
	b.add(&model.PlaceDrivers{Time: 25, Placements: []model.Placement{{DriverID: driverID(6), Attempt: 1, WorkerID: "w1"}}})
	b.add(&model.ReportAttempts{WorkerID: "w1", Time: 26, Reports: []model.AttemptReport{{DriverID: driverID(6), Attempt: 1, State: model.DriverRunning, Runs: 1}}})
	// An app of driver 6's attempt 1.
	b.add(&model.RegisterApp{ID: appID(3), Token: "at3", DriverID: driverID(6), DriverAttempt: 1, CoresPerExecutor: 1, MemoryPerExecutorMB: 256,
		ExecutorLimit: 2, Argv: []string{"exec"}, MaxExecutorRetries: 0, Time: 27})
	// w2 is decommissioned and w1 fills up: app 3's second executor and the
	// unknown app are skipped.
	place := &model.PlaceExecutors{Time: 28, Placements: []model.ExecutorPlacement{
		{AppID: appID(0), ExecutorID: 0, WorkerID: "w1"}, {AppID: appID(0), ExecutorID: 1, WorkerID: "w1"},
		{AppID: appID(0), ExecutorID: 2, WorkerID: "w2"}, {AppID: appID(3), ExecutorID: 0, WorkerID: "w1"},
		{AppID: appID(3), ExecutorID: 1, WorkerID: "w1"}, {AppID: appID(99), ExecutorID: 0, WorkerID: "w1"},
	}}
	b.add(place)
	b.add(place) // committed twice
	b.add(&model.ReportAttempts{WorkerID: "w1", Time: 30, Executors: []model.ExecutorReport{
		{AppID: appID(0), ExecutorID: 0, State: model.ExecRunning},
		{AppID: appID(0), ExecutorID: 1, State: model.ExecFailed, ExitCode: intp(1), Reason: "boom"},
		{AppID: appID(3), ExecutorID: 0, State: model.ExecRunning},
	}})
	// From the wrong worker: ignored.
	b.add(&model.ReportAttempts{WorkerID: "w2", Time: 31, Executors: []model.ExecutorReport{{AppID: appID(0), ExecutorID: 0, State: model.ExecFailed, ExitCode: intp(1)}}})
	b.add(&model.PlaceExecutors{Time: 32, Placements: []model.ExecutorPlacement{{AppID: appID(0), ExecutorID: 2, WorkerID: "w1"}}})
	b.add(&model.KillExecutors{AppID: appID(0), ExecutorIDs: []int{2}, Time: 33})
	b.add(&model.KillExecutors{AppID: appID(0), ExecutorIDs: []int{7}, Time: 34})
	b.add(&model.RequestExecutors{AppID: appID(0), Total: 3, Time: 35})
	b.add(&model.RequestExecutors{AppID: appID(3), Total: -1, Time: 36})
	b.add(&model.ReportAttempts{WorkerID: "w1", Time: 37, Executors: []model.ExecutorReport{{AppID: appID(0), ExecutorID: 0, State: model.ExecExited, ExitCode: intp(0)}}})
	b.add(&model.EndApp{AppID: appID(0), State: model.AppFinished, Time: 38})
	b.add(&model.EndApp{AppID: appID(0), State: model.AppFinished, Time: 39})
	b.add(&model.EndApp{AppID: appID(0), State: model.AppKilled, Time: 40})
	// Driver 6 finishes, and with it app 3.
	b.add(&model.ReportAttempts{WorkerID: "w1", Time: 41, Reports: []model.AttemptReport{{DriverID: driverID(6), Attempt: 1, State: model.DriverFinished, ExitCode: intp(0), Runs: 1}}})
	b.add(&model.RegisterWorker{ID: "w3", HTTPAddr: "127.0.0.1:4", Cores: 2, MemoryMB: 1024, Time: 42})
	b.add(&model.RegisterApp{ID: appID(4), Token: "at4", CoresPerExecutor: 1, MemoryPerExecutorMB: 256, ExecutorLimit: -1, Argv: []string{"exec"}, Time: 43})
	b.add(&model.PlaceExecutors{Time: 44, Placements: []model.ExecutorPlacement{{AppID: appID(4), ExecutorID: 0, WorkerID: "w3"}, {AppID: appID(4), ExecutorID: 1, WorkerID: "w3"}}})
	b.add(&model.ReportAttempts{WorkerID: "w3", Time: 45, Executors: []model.ExecutorReport{{AppID: appID(4), ExecutorID: 0, State: model.ExecRunning}}})
	b.add(&model.WorkerLost{WorkerID: "w3", Time: 46})
	b.add(&model.PruneCompleted{DriverIDs: []string{driverID(6), driverID(4), driverID(999)}, AppIDs: []string{appID(0), appID(4), appID(999)}})
	// Custom resources and bounded supervision on w4, which offers two
	// GPUs; w5's offer names one address twice and is refused.
	b.add(&model.RegisterWorker{ID: "w4", HTTPAddr: "127.0.0.1:5", Cores: 4, MemoryMB: 4096, Resources: model.Resources{"gpu": {"0", "1"}}, Time: 47})
	b.add(&model.RegisterWorker{ID: "w5", HTTPAddr: "127.0.0.1:6", Cores: 4, MemoryMB: 4096, Resources: model.Resources{"gpu": {"0", "0"}}, Time: 48})
	// Driver 7 and app 5 run as a user of their own.
	b.add(&model.SubmitDriver{ID: driverID(7), Token: "t7", DriverSpec: model.DriverSpec{Argv: []string{"h"}, Cores: 1, MemoryMB: 512, Supervise: true, Resources: model.ResourceAmounts{"gpu": 1}, MaxRestarts: 2, RestartWindowMS: 60_000, RescheduleAfter: 1, User: "etl"},
		Time: 49})
	b.add(&model.SubmitDriver{ID: driverID(8), Token: "t8", DriverSpec: model.DriverSpec{Argv: []string{"i"}, Cores: 1, MemoryMB: 512, Resources: model.ResourceAmounts{"gpu": 2}}, Time: 50})
	// Bounds without supervise: refused.
	b.add(&model.SubmitDriver{ID: driverID(9), Token: "t9", DriverSpec: model.DriverSpec{Argv: []string{"j"}, Cores: 1, MemoryMB: 512, MaxRestarts: 2}, Time: 51})
	// Driver 8 asks for an address driver 7 takes in the same batch: skipped.
	b.add(&model.PlaceDrivers{Time: 52, Placements: []model.Placement{
		{DriverID: driverID(7), Attempt: 1, WorkerID: "w4", Resources: model.Resources{"gpu": {"0"}}},
		{DriverID: driverID(8), Attempt: 1, WorkerID: "w4", Resources: model.Resources{"gpu": {"0", "1"}}},
	}})
	b.add(&model.ReportAttempts{WorkerID: "w4", Time: 53, Reports: []model.AttemptReport{
		{DriverID: driverID(7), Attempt: 1, State: model.DriverFailed, ExitCode: intp(1), Runs: 1, Failures: []int64{1000}, Reschedule: true, Reason: "1 run failed"},
	}})
	b.add(&model.PlaceDrivers{Time: 54, Placements: []model.Placement{
		{DriverID: driverID(7), Attempt: 2, WorkerID: "w4", Resources: model.Resources{"gpu": {"1"}}},
	}})
	b.add(&model.ReportAttempts{WorkerID: "w4", Time: 55, Reports: []model.AttemptReport{
		{DriverID: driverID(7), Attempt: 2, State: model.DriverRunning, Runs: 2, Failures: []int64{2000}},
	}})
	b.add(&model.RegisterApp{ID: appID(5), Token: "at5", CoresPerExecutor: 1, MemoryPerExecutorMB: 256, ExecutorLimit: 1, Argv: []string{"exec"},
		ResourcesPerExecutor: model.ResourceAmounts{"gpu": 1}, User: "etl", Time: 56})
	b.add(&model.PlaceExecutors{Time: 57, Placements: []model.ExecutorPlacement{{AppID: appID(5), ExecutorID: 0, WorkerID: "w4", Resources: model.Resources{"gpu": {"0"}}}}})
	// A group of submissions: two new ones, a token twice in the group,
	// a token of an earlier entry, and one refused (no cores) between
	// them, which the others outlive.
	b.add(&model.SubmitDrivers{Drivers: []model.SubmitDriver{
		{ID: driverID(10), Token: "t10", DriverSpec: model.DriverSpec{Argv: []string{"k"}, Cores: 1, MemoryMB: 512}, Time: 58},
		{ID: driverID(11), Token: "t10", DriverSpec: model.DriverSpec{Argv: []string{"k"}, Cores: 1, MemoryMB: 512}, Time: 58},
		{ID: driverID(12), Token: "t1", DriverSpec: model.DriverSpec{Argv: []string{"b"}, Cores: 1, MemoryMB: 512}, Time: 58},
		{ID: driverID(13), Token: "t13", DriverSpec: model.DriverSpec{Argv: []string{"l"}, Cores: 0, MemoryMB: 512}, Time: 58},
		{ID: driverID(14), Token: "t14", DriverSpec: model.DriverSpec{Argv: []string{"m"}, Cores: 1, MemoryMB: 512, Supervise: true, Artifacts: scenarioArtifacts}, Time: 58},
	}})
	// Two workers' heartbeats in one entry; w1's report names an attempt
	// on w4 and only w4's count.
	b.add(&model.ReportBatch{Reports: []model.ReportAttempts{
		{WorkerID: "w4", Time: 58, Executors: []model.ExecutorReport{{AppID: appID(5), ExecutorID: 0, State: model.ExecRunning}}},
		{WorkerID: "w1", Time: 59, Reports: []model.AttemptReport{{DriverID: driverID(7), Attempt: 2, State: model.DriverFailed, ExitCode: intp(1)}}},
		{WorkerID: "w4", Time: 60, Reports: []model.AttemptReport{{DriverID: driverID(7), Attempt: 2, State: model.DriverRunning, Runs: 2, Failures: []int64{2000}}}},
	}})
	// Namespaces and ACL tokens: a namespace with every setting, one
	// refused (weight 0); a driver of it above its quota, one of a
	// namespace that does not exist; tokens made, refused and revoked;
	// a namespace in use that cannot be deleted, and one that can.
	etl := model.Namespace{Name: "etl", Quota: model.Quota{Cores: 2, MemoryMB: 1024, Resources: model.ResourceAmounts{"gpu": 1}, RunningDrivers: 1},
		MaxQueuedDrivers: 2, Weight: 2, DriverShare: 0.5, PriorityMax: 80, Preempt: true}
	b.add(&model.ApplyNamespace{Namespace: etl, Time: 61})
	b.add(&model.ApplyNamespace{Namespace: model.Namespace{Name: "ml", Weight: 0, DriverShare: 1, PriorityMax: 100}, Time: 62})
	b.add(&model.SubmitDrivers{Drivers: []model.SubmitDriver{
		{ID: driverID(15), Token: "t15", DriverSpec: model.DriverSpec{Argv: []string{"n"}, Cores: 1, MemoryMB: 512, Namespace: "etl", Priority: intp(70)}, Time: 63},
		{ID: driverID(16), Token: "t16", DriverSpec: model.DriverSpec{Argv: []string{"o"}, Cores: 2, MemoryMB: 512, Namespace: "etl"}, Time: 63},
		{ID: driverID(17), Token: "t17", DriverSpec: model.DriverSpec{Argv: []string{"p"}, Cores: 1, MemoryMB: 512, Namespace: "nope"}, Time: 63},
		{ID: driverID(18), Token: "t18", DriverSpec: model.DriverSpec{Argv: []string{"q"}, Cores: 1, MemoryMB: 512, Namespace: "etl", Priority: intp(90)}, Time: 63},
	}})
	b.add(&model.PlaceDrivers{Time: 64, Placements: []model.Placement{
		{DriverID: driverID(15), Attempt: 1, WorkerID: "w1"},
		{DriverID: driverID(16), Attempt: 1, WorkerID: "w1"},
	}})
	b.add(&model.CreateACLToken{Token: model.ACLToken{Accessor: "acc-1", SecretHash: sumA, Name: "etl ci", Policy: model.PolicySubmit, Namespaces: []string{"etl"}, ExpiresAt: 1000}, Time: 65})
	b.add(&model.CreateACLToken{Token: model.ACLToken{Accessor: "acc-2", SecretHash: sumA, Policy: model.PolicyRead, Namespaces: []string{"etl", "default"}}, Time: 66})
	b.add(&model.CreateACLToken{Token: model.ACLToken{Accessor: "acc-3", SecretHash: strings.Repeat("b", 64), Policy: model.PolicyRead, Namespaces: []string{"etl", "default"}}, Time: 67})
	b.add(&model.RevokeACLToken{Accessor: "acc-1", Time: 68})
	b.add(&model.RevokeACLToken{Accessor: "acc-9", Time: 69})
	b.add(&model.DeleteNamespace{Name: "etl", Time: 70})
	b.add(&model.ApplyNamespace{Namespace: model.Namespace{Name: "ml", Weight: 1, DriverShare: 1, PriorityMax: 100}, Time: 71})
	b.add(&model.DeleteNamespace{Name: "ml", Time: 72})
	// Preemption for etl: a supervised and an unsupervised driver of
	// default under notice, with items skipped (etl's own driver, an
	// executor LOST already); an end with no item, refused; the
	// unsupervised one's exit after its notice, and the supervised one
	// ended at its deadline.
	b.add(&model.SubmitDriver{ID: driverID(19), Token: "t19", DriverSpec: model.DriverSpec{Argv: []string{"r"}, Cores: 1, MemoryMB: 256, Supervise: true}, Time: 73})
	b.add(&model.SubmitDriver{ID: driverID(20), Token: "t20", DriverSpec: model.DriverSpec{Argv: []string{"s"}, Cores: 1, MemoryMB: 256}, Time: 74})
	b.add(&model.PlaceDrivers{Time: 75, Placements: []model.Placement{
		{DriverID: driverID(19), Attempt: 1, WorkerID: "w1"},
		{DriverID: driverID(20), Attempt: 1, WorkerID: "w1"},
	}})
	b.add(&model.ReportAttempts{WorkerID: "w1", Time: 76, Reports: []model.AttemptReport{
		{DriverID: driverID(19), Attempt: 1, State: model.DriverRunning, Runs: 1},
		{DriverID: driverID(20), Attempt: 1, State: model.DriverRunning, Runs: 1},
	}})
	b.add(&model.PreemptAttempts{Deadline: 90, Time: 77, Items: []model.Preemption{
		{DriverID: driverID(19), Attempt: 1, By: "etl"},
		{DriverID: driverID(20), Attempt: 1, By: "etl"},
		{DriverID: driverID(15), Attempt: 1, By: "etl"},
		{AppID: appID(4), ExecutorID: 0, By: "etl"},
	}})
	b.add(&model.PreemptAttempts{End: true, Time: 78})
	b.add(&model.ReportAttempts{WorkerID: "w1", Time: 79, Reports: []model.AttemptReport{
		{DriverID: driverID(20), Attempt: 1, State: model.DriverFailed, ExitCode: intp(143), Runs: 1},
	}})
	b.add(&model.PreemptAttempts{End: true, Time: 90, Items: []model.Preemption{{DriverID: driverID(19), Attempt: 1}}})
	// Schedules: nightly forbids overlap and keeps one ended run; a
	// name taken and a namespace unknown are refused. Its first slot
	// fires (two missed before it, one nonexistent local time), then
	// the same slot is refused, the next skipped (its run is live), one
	// past its deadline missed; a manual run is skipped by forbid
	// without a trace. Suspended, its slot is refused but a manual run
	// starts once the live run is killed. hourly replaces: its second
	// slot kills the first run; deleted, its run goes on.
	nightly := model.Schedule{Name: "nightly", Cron: "0 2 * * *", TimeZone: "UTC", Concurrency: model.ConcurrencyForbid, StartingDeadlineMS: 60_000, History: 1,
		Template: model.SubmitDriver{Name: "etl", DriverSpec: model.DriverSpec{Argv: []string{"t"}, Cores: 1, MemoryMB: 256}}}
	b.add(&model.CreateSchedule{Schedule: nightly, Time: 91})
	b.add(&model.CreateSchedule{Schedule: nightly, Time: 92})
	b.add(&model.CreateSchedule{Schedule: model.Schedule{Name: "other", Cron: "@daily", TimeZone: "UTC", Concurrency: model.ConcurrencyAllow, History: 10,
		Template: model.SubmitDriver{DriverSpec: model.DriverSpec{Argv: []string{"u"}, Cores: 1, MemoryMB: 256, Namespace: "nope"}}}, Time: 93})
	b.add(&model.FireSchedule{Name: "nightly", Slot: 100_000, Missed: 2, DSTSkipped: 1, DriverID: driverID(21), Time: 100_001})
	b.add(&model.FireSchedule{Name: "nightly", Slot: 100_000, DriverID: driverID(22), Time: 100_002})
	b.add(&model.FireSchedule{Name: "nightly", Slot: 200_000, DriverID: driverID(22), Time: 200_001})
	b.add(&model.FireSchedule{Name: "nightly", Slot: 300_000, Late: true, Time: 390_000})
	b.add(&model.FireSchedule{Name: "nightly", Slot: 300_500, Manual: true, DriverID: driverID(22), Time: 300_500})
	b.add(&model.SuspendSchedule{Name: "nightly", Suspended: true, Time: 300_600})
	b.add(&model.FireSchedule{Name: "nightly", Slot: 400_000, DriverID: driverID(22), Time: 400_001})
	b.add(&model.KillDriver{DriverID: driverID(21), Time: 400_100})
	b.add(&model.FireSchedule{Name: "nightly", Slot: 400_200, Manual: true, DriverID: driverID(22), Time: 400_200})
	b.add(&model.SuspendSchedule{Name: "nightly", Suspended: false, Time: 400_300})
	b.add(&model.CreateSchedule{Schedule: model.Schedule{Name: "hourly", Cron: "0 * * * *", TimeZone: "Europe/Berlin", Concurrency: model.ConcurrencyReplace, History: 10,
		Template: model.SubmitDriver{Name: "sync", DriverSpec: model.DriverSpec{Argv: []string{"v"}, Cores: 1, MemoryMB: 256, Priority: intp(60)}}}, Time: 400_400})
	b.add(&model.FireSchedule{Name: "hourly", Slot: 500_000, DriverID: driverID(23), Time: 500_001})
	b.add(&model.FireSchedule{Name: "hourly", Slot: 600_000, DriverID: driverID(24), Time: 600_001})
	b.add(&model.DeleteSchedule{Name: "hourly", Time: 600_100})
	b.add(&model.DeleteSchedule{Name: "hourly", Time: 600_200})
	return b.entries
}

// driverScenarioLen is how many entries of scenario come before the first
// application command: a log a master without applications could write.
const driverScenarioLen = 20

func intp(v int) *int { return &v }

// resultText shows an Apply result for comparison: its type and its
// fields, errors by their text (%#v would show the addresses of errors
// held in a result's fields).
func resultText(res any) string { return fmt.Sprintf("%T %+v", res, res) }

const sumA = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

// scenarioArtifacts are one of each kind, as NormalizeArtifact leaves them.
var scenarioArtifacts = []model.Artifact{
	{Source: "https://h/app.tgz?checksum=sha256:" + sumA, URL: "https://h/app.tgz", SHA256: sumA, Archive: "tar.gz", Dest: "lib"},
	{Upload: sumA, SHA256: sumA, Name: "run.sh", Mode: 0o755},
}

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
	d0, _ := f.State().Driver(driverID(0))
	if d0.State != model.DriverFinished || d0.Attempt != 2 || d0.WorkerID != "w2" {
		t.Fatalf("supervised driver: got %s attempt %d on %s, want FINISHED attempt 2 on w2", d0.State, d0.Attempt, d0.WorkerID)
	}
	if len(d0.Attempts) != 2 || d0.Attempts[0].State != model.DriverError || d0.Attempts[0].ExitCode != nil {
		t.Fatalf("attempt 1 record must end in ERROR (worker lost), untouched by the stale FAILED report: %+v", d0.Attempts)
	}
	d1, _ := f.State().Driver(driverID(1))
	if d1.State != model.DriverError {
		t.Fatalf("unsupervised driver on a lost worker: got %s, want ERROR", d1.State)
	}
	d2, _ := f.State().Driver(driverID(2))
	if d2.State != model.DriverKilled {
		t.Fatalf("killed waiting driver: got %s", d2.State)
	}
	if _, ok := f.State().Driver(driverID(3)); ok {
		t.Fatal("a resubmitted token made a second driver")
	}
	for _, w := range f.State().Workers() {
		want := map[string]model.WorkerState{"w1": model.WorkerAlive, "w2": model.WorkerDecommissioned, "w3": model.WorkerDead}[w.ID]
		if w.ID == "w4" {
			continue
		}
		// w1 holds the one driver of namespace etl its quota let on.
		cores, mem := map[string]int{"w1": 1}[w.ID], map[string]int64{"w1": 512}[w.ID]
		if w.CoresUsed != cores || w.MemoryUsedMB != mem || w.State != want {
			t.Fatalf("worker %s: used %d cores %d MiB, state %s; want %d, %d, %s", w.ID, w.CoresUsed, w.MemoryUsedMB, w.State, cores, mem, want)
		}
	}
	d4, _ := f.State().Driver(driverID(4))
	d5, _ := f.State().Driver(driverID(5))
	if d4.State != model.DriverRelaunching || d4.Attempt != 2 || d5.State != model.DriverKilled || d5.Message != "worker shut down" {
		t.Fatalf("after decommission: supervised %s attempt %d, unsupervised %s (%q); want RELAUNCHING 2, KILLED with the reason",
			d4.State, d4.Attempt, d5.State, d5.Message)
	}
	var waiting []string
	for _, d := range f.State().WaitingDrivers() {
		waiting = append(waiting, d.ID)
	}
	// Driver 19 waits again, preempted for etl; 22 and 24 are runs of
	// schedules, nightly's manual one and hourly's second slot's.
	if want := []string{driverID(4), driverID(8), driverID(10), driverID(14), driverID(16), driverID(19), driverID(22), driverID(24)}; !slices.Equal(waiting, want) {
		t.Fatalf("waiting = %v, want %v", waiting, want)
	}
	d19, _ := f.State().Driver(driverID(19))
	d20, _ := f.State().Driver(driverID(20))
	if d19.State != model.DriverRelaunching || d19.Message != "preempted by namespace etl" || d20.State != model.DriverKilled || d20.Message != "preempted by namespace etl" {
		t.Fatalf("preempted drivers: supervised %s (%q), unsupervised %s (%q); want RELAUNCHING and KILLED, preempted by namespace etl",
			d19.State, d19.Message, d20.State, d20.Message)
	}
	if p := f.State().Preemptions("default"); p != (Preemptions{Suffered: 2}) || f.State().Preemptions("etl") != (Preemptions{Caused: 2}) {
		t.Fatalf("preemptions of default %+v, etl %+v; want 2 suffered, 2 caused", p, f.State().Preemptions("etl"))
	}
	for _, seq := range []int{11, 12, 13} {
		if _, ok := f.State().Driver(driverID(seq)); ok {
			t.Fatalf("the group's submission %d, a known token or refused, made a driver", seq)
		}
	}
	if !reflect.DeepEqual(d4.Artifacts, scenarioArtifacts) {
		t.Fatalf("artifacts = %+v, want the submission's %+v", d4.Artifacts, scenarioArtifacts)
	}
	if f.State().NextDriverSeq() != 25 {
		t.Fatalf("NextDriverSeq = %d, want 25 (after driver 24, a schedule's run)", f.State().NextDriverSeq())
	}
	// Schedules: nightly fired one slot, skipped one for forbid and
	// missed three (two before its first slot, one late), and ran once
	// by hand; hourly's second slot replaced its first run, and its
	// delete left the second going.
	nightly, _ := f.State().Schedule("nightly")
	if nightly.Fired != 1 || nightly.Skipped != 1 || nightly.Missed != 3 || nightly.DSTSkipped != 1 || nightly.ManualRuns != 1 || nightly.LastSlot != 300_000 || nightly.Suspended {
		t.Fatalf("nightly: %+v", nightly)
	}
	if _, ok := f.State().Schedule("hourly"); ok {
		t.Fatal("hourly was not deleted")
	}
	d23, _ := f.State().Driver(driverID(23))
	d24, _ := f.State().Driver(driverID(24))
	if d23.State != model.DriverKilled || d24.State != model.DriverSubmitted || d24.Schedule != "hourly" || d24.Slot != 600_000 {
		t.Fatalf("hourly's runs: %s, then %s of %q at %d", d23.State, d24.State, d24.Schedule, d24.Slot)
	}
	// Namespace etl: its quota of one running driver placed driver 15
	// and left 16 waiting; 17 named no namespace, 18 a priority above
	// etl's highest; etl could not be deleted with work in it, ml
	// could; acc-2, with acc-1's secret, was refused, and acc-1 revoked.
	d15, _ := f.State().Driver(driverID(15))
	if d15.WorkerID != "w1" || d15.Namespace != "etl" || d15.Priority == nil || *d15.Priority != 70 {
		t.Fatalf("driver 15: %+v, want placed on w1 in etl at priority 70", d15)
	}
	for _, seq := range []int{17, 18} {
		if _, ok := f.State().Driver(driverID(seq)); ok {
			t.Fatalf("driver %d was made", seq)
		}
	}
	if ns := f.State().Namespaces(); len(ns) != 2 || ns[0].Name != "default" || ns[1].Name != "etl" || ns[1].Weight != 2 {
		t.Fatalf("namespaces %+v, want default and etl", ns)
	}
	if u := f.State().NamespaceUse("etl"); u.RunningDrivers != 1 || u.Cores != 1 || u.Queued != 1 || u.LiveDrivers != 2 {
		t.Fatalf("etl's use %+v, want 1 running driver of 1 core and 1 queued", u)
	}
	if toks := f.State().ACLTokens(); len(toks) != 1 || toks[0].Accessor != "acc-3" || toks[0].SecretHash != "" {
		t.Fatalf("ACL tokens %+v, want acc-3 alone, without its hash", toks)
	}
	if _, ok := f.State().ACLTokenBySecretHash(sumA); ok {
		t.Fatal("the revoked token's secret still names a token")
	}
	if _, ok := f.State().Worker("w5"); ok {
		t.Fatal("a worker offering one address twice was registered")
	}
	w4, _ := f.State().Worker("w4")
	if got := w4.ResourcesUsed.String(); got != "gpu=0,1" || w4.CoresUsed != 2 {
		t.Fatalf("w4 holds %q with %d cores used, want gpu=0,1 (driver 7 and app 5's executor) and 2", got, w4.CoresUsed)
	}
	d7, _ := f.State().Driver(driverID(7))
	if d7.State != model.DriverRunning || d7.Attempt != 2 || !d7.Attempts[0].Rescheduled || d7.Attempts[1].Resources.String() != "gpu=1" ||
		!reflect.DeepEqual(d7.FailuresBefore(3), []int64{1000, 2000}) || d7.User != "etl" {
		t.Fatalf("driver 7: %+v, want RUNNING attempt 2 holding gpu 1 after attempt 1 was rescheduled, failures 1000 and 2000, user etl", d7)
	}
	if as, _ := f.State().DriversOn("w4", nil); len(as) != 1 || as[0].ID != driverID(7) || as[0].User != "etl" {
		t.Fatalf("w4's assignments %+v, want driver 7's attempt 2 as user etl", as)
	}

	// Applications.
	if _, ok := f.State().Driver(driverID(6)); ok {
		t.Fatal("finished driver 6 was not pruned")
	}
	if _, ok := f.State().DriverByToken("t6"); ok {
		t.Fatal("pruned driver 6's token kept")
	}
	for _, seq := range []int{0, 1, 2} {
		if _, _, ok := f.State().App(appID(seq)); ok {
			t.Fatalf("app %d exists (pruned, retried token, refused)", seq)
		}
	}
	if _, ok := f.State().AppByToken("at0"); ok {
		t.Fatal("pruned app 0's token kept")
	}
	a3, e3, _ := f.State().App(appID(3))
	if a3 == nil || a3.State != model.AppFinished || len(e3) != 1 || e3[0].State != model.ExecKilled || a3.CoresGranted != 0 {
		t.Fatalf("app 3 of the finished driver: %+v %+v, want FINISHED with its executor KILLED", a3, e3)
	}
	a4, e4, _ := f.State().App(appID(4))
	if a4 == nil || a4.State != model.AppRunning || a4.RetryCount != 0 || len(e4) != 2 || e4[0].State != model.ExecLost || e4[1].State != model.ExecLost {
		t.Fatalf("app 4 after losing w3: %+v %+v, want RUNNING, no retry, two executors LOST", a4, e4)
	}
	if f.State().NextAppSeq() != 6 {
		t.Fatalf("NextAppSeq = %d, want 6", f.State().NextAppSeq())
	}
	f.mu.RLock()
	n := len(f.t.Executors)
	f.mu.RUnlock()
	if n != 4 {
		t.Fatalf("%d executor rows, want 4 (app 0's were pruned)", n)
	}
	if e := f.t.executorClones(appID(5)); len(e) != 1 || e[0].Resources.String() != "gpu=0" {
		t.Fatalf("app 5's executors %+v, want one holding gpu 0", e)
	}
	if _, apps := f.State().ExecutorsOn("w4"); len(apps) != 1 || apps[0].ID != appID(5) || apps[0].User != "etl" {
		t.Fatalf("the apps of w4's executors %+v, want app 5 as user etl", apps)
	}
}

// TestScenarioUsesEveryCommandType keeps scenario complete: the snapshot
// and replay tests are only as good as the commands it holds.
func TestScenarioUsesEveryCommandType(t *testing.T) {
	seen := map[model.CommandType]bool{}
	executorReports := false
	for _, e := range scenario(t) {
		ct, p, err := Decode(e)
		if err != nil {
			t.Fatal(err)
		}
		seen[ct] = true
		if r, ok := p.(*model.ReportAttempts); ok && len(r.Executors) > 0 {
			executorReports = true
		}
	}
	for ct := model.CmdRegisterWorker; ct <= model.CmdFireSchedule; ct++ {
		if !seen[ct] {
			t.Errorf("scenario has no %s", ct)
		}
	}
	if !executorReports {
		t.Error("scenario has no executor reports")
	}
	if model.CommandType(model.CmdFireSchedule+1).String() != fmt.Sprintf("CommandType(%d)", model.CmdFireSchedule+1) {
		t.Error("a command type was added: add it to scenario and to this test's range")
	}
}

// A ReportBatch changes the tables exactly as its reports would, each
// applied as an entry of its own at the same index, and it changes them.
func TestReportBatchAppliesAsItsReports(t *testing.T) {
	batched, split := New(), New()
	batches := 0
	for i, e := range scenario(t) {
		index := uint64(i + 1)
		ct, p, err := Decode(e)
		if err != nil {
			t.Fatal(err)
		}
		if ct != model.CmdReportBatch {
			batched.ApplyCommand(index, e)
			split.ApplyCommand(index, e)
			continue
		}
		batches++
		before, _ := batched.State().StateHash()
		if res := batched.ApplyCommand(index, e); res != nil {
			t.Fatalf("ReportBatch: %v", res)
		}
		if after, _ := batched.State().StateHash(); after == before {
			t.Fatal("the scenario's ReportBatch changed nothing")
		}
		for _, r := range p.(*model.ReportBatch).Reports {
			data, err := Encode(&r)
			if err != nil {
				t.Fatal(err)
			}
			split.ApplyCommand(index, data)
		}
	}
	if batches == 0 {
		t.Fatal("the scenario has no ReportBatch")
	}
	hb, _ := batched.State().StateHash()
	hs, _ := split.State().StateHash()
	if hb != hs {
		t.Fatal("a ReportBatch and its reports one by one give different tables")
	}
}

// A token already known yields its driver, unchanged, whatever program
// and user the retry names.
func TestRetriedTokenYieldsSameDriver(t *testing.T) {
	f := New()
	submit := func(id, arg, user string) any {
		data, _ := Encode(&model.SubmitDriver{ID: id, Token: "tok", DriverSpec: model.DriverSpec{Argv: []string{arg}, Cores: 1, MemoryMB: 1, User: user}, Time: 1})
		return f.ApplyCommand(1, data)
	}
	first := submit(driverID(7), "x", "etl").(SubmitResult)
	before := hashOf(t, f)
	second := submit(driverID(8), "y", "root").(SubmitResult)
	if first.DriverID != driverID(7) || first.Existing {
		t.Fatalf("first submit: %+v", first)
	}
	if second.DriverID != first.DriverID || !second.Existing {
		t.Fatalf("retry: got %+v, want %s existing", second, first.DriverID)
	}
	if d, _ := f.State().Driver(first.DriverID); hashOf(t, f) != before || d.User != "etl" || d.Argv[0] != "x" {
		t.Fatalf("a retried token changed the tables: %+v", d)
	}
}

// Each submission of a SubmitDrivers applies as a SubmitDriver of its own
// would, in order: a token twice in the group or known from an earlier
// entry yields the first driver, a refused submission gets its own error
// and leaves no trace, and the others apply.
func TestSubmitDriversAppliesEachOnItsOwn(t *testing.T) {
	sub := func(seq int, tok string, cores int) model.SubmitDriver {
		return model.SubmitDriver{ID: driverID(seq), Token: tok, DriverSpec: model.DriverSpec{Argv: []string{"x"}, Cores: cores, MemoryMB: 1}, Time: int64(seq)}
	}
	batched, alone := New(), New()
	first := []model.SubmitDriver{sub(1, "a", 1)}
	group := []model.SubmitDriver{sub(2, "b", 1), sub(3, "b", 1), sub(4, "a", 1), sub(5, "c", 0), sub(2, "d", 1), sub(6, "e", 1)}
	data, err := Encode(&first[0])
	if err != nil {
		t.Fatal(err)
	}
	batched.ApplyCommand(1, data)
	alone.ApplyCommand(1, data)
	data, err = Encode(&model.SubmitDrivers{Drivers: group})
	if err != nil {
		t.Fatal(err)
	}
	res, ok := batched.ApplyCommand(2, data).(SubmitDriversResult)
	if !ok || len(res.Outcomes) != len(group) {
		t.Fatalf("SubmitDrivers of %d: %+v", len(group), res)
	}
	want := []SubmitOutcome{
		{SubmitResult: SubmitResult{DriverID: driverID(2)}},
		{SubmitResult: SubmitResult{DriverID: driverID(2), Existing: true}},
		{SubmitResult: SubmitResult{DriverID: driverID(1), Existing: true}},
		{Err: model.ErrInvalidCommand},
		{Err: model.ErrDuplicateID},
		{SubmitResult: SubmitResult{DriverID: driverID(6)}},
	}
	for i, o := range res.Outcomes {
		if o.SubmitResult != want[i].SubmitResult || !errors.Is(o.Err, want[i].Err) || (o.Err == nil) != (want[i].Err == nil) {
			t.Errorf("submission %d: %+v, want %+v", i, o, want[i])
		}
	}
	// The same submissions one entry each give the same tables.
	for i := range group {
		data, err := Encode(&group[i])
		if err != nil {
			t.Fatal(err)
		}
		alone.ApplyCommand(2, data)
	}
	if hashOf(t, batched) != hashOf(t, alone) {
		t.Fatal("a group applied differently from its submissions one by one")
	}
	var waiting []string
	for _, d := range batched.State().WaitingDrivers() {
		waiting = append(waiting, d.ID)
	}
	if fmt.Sprint(waiting) != fmt.Sprint([]string{driverID(1), driverID(2), driverID(6)}) {
		t.Fatalf("waiting %v", waiting)
	}
	// An empty group is refused and changes nothing but the index.
	before := hashOf(t, batched)
	data, err = Encode(&model.SubmitDrivers{})
	if err != nil {
		t.Fatal(err)
	}
	if err, _ := batched.ApplyCommand(3, data).(error); !errors.Is(err, model.ErrInvalidCommand) {
		t.Fatalf("empty SubmitDrivers: %v, want ErrInvalidCommand", err)
	}
	if hashOf(t, batched) != before || batched.Index() != 3 {
		t.Fatal("an empty SubmitDrivers changed the tables")
	}
}

func TestRefusedCommandsChangeNothing(t *testing.T) {
	f := replay(t, scenario(t))
	before := hashOf(t, f)
	bad := []struct {
		payload model.Command
		want    error
	}{
		{&model.SubmitDriver{ID: driverID(50), Token: "n1", DriverSpec: model.DriverSpec{Argv: nil, Cores: 1, MemoryMB: 1}}, model.ErrInvalidCommand},
		{&model.SubmitDriver{ID: driverID(51), Token: "n2", DriverSpec: model.DriverSpec{Argv: []string{"x"}, Cores: 0, MemoryMB: 1}}, model.ErrInvalidCommand},
		{&model.SubmitDriver{ID: driverID(52), Token: "n3", DriverSpec: model.DriverSpec{Argv: []string{"x"}, Cores: 1, MemoryMB: -5}}, model.ErrInvalidCommand},
		{&model.SubmitDriver{ID: "driver-x", Token: "n4", DriverSpec: model.DriverSpec{Argv: []string{"x"}, Cores: 1, MemoryMB: 1}}, model.ErrInvalidCommand},
		{&model.SubmitDriver{ID: driverID(53), Token: "n5", DriverSpec: model.DriverSpec{Argv: []string{"x"}, Env: map[string]string{"A=B": "1"}, Cores: 1, MemoryMB: 1}}, model.ErrInvalidCommand},
		{&model.SubmitDriver{ID: driverID(0), Token: "n6", DriverSpec: model.DriverSpec{Argv: []string{"x"}, Cores: 1, MemoryMB: 1}}, model.ErrDuplicateID},
		{&model.SubmitDriver{ID: driverID(54), Token: "n7", DriverSpec: model.DriverSpec{Argv: []string{"x"}, Cores: 1, MemoryMB: 1, Artifacts: []model.Artifact{{Source: "https://h/a"}}}}, model.ErrInvalidCommand},
		{&model.SubmitDriver{ID: driverID(55), Token: "n8", DriverSpec: model.DriverSpec{Argv: []string{"x"}, Cores: 1, MemoryMB: 1, Artifacts: []model.Artifact{scenarioArtifacts[1], scenarioArtifacts[1]}}}, model.ErrInvalidCommand},
		{&model.RegisterApp{ID: appID(51), Token: "new2", CoresPerExecutor: 1, MemoryPerExecutorMB: 1, ExecutorLimit: -1, Argv: []string{"x"},
			Artifacts: []model.Artifact{{URL: "https://h/a", Name: "a", Dest: "/abs"}}}, model.ErrInvalidCommand},
		{&model.SubmitDriver{ID: driverID(56), Token: "n9", DriverSpec: model.DriverSpec{Argv: []string{"x"}, Cores: 1, MemoryMB: 1, User: "Root"}}, model.ErrInvalidCommand},
		{&model.RegisterApp{ID: appID(52), Token: "new3", CoresPerExecutor: 1, MemoryPerExecutorMB: 1, ExecutorLimit: -1, Argv: []string{"x"},
			User: "1000"}, model.ErrInvalidCommand},
		{&model.KillDriver{DriverID: "driver-20261129120000-9999"}, model.ErrUnknownDriver},
		{&model.KillDriver{DriverID: driverID(0)}, model.ErrDriverEnded},
		{&model.WorkerLost{WorkerID: "nobody"}, model.ErrUnknownWorker},
		{&model.RegisterWorker{ID: "w9", HTTPAddr: "x:1", Cores: -1, MemoryMB: 1}, model.ErrInvalidCommand},
		{&model.RegisterApp{ID: appID(3), Token: "new", CoresPerExecutor: 1, MemoryPerExecutorMB: 1, ExecutorLimit: -1, Argv: []string{"x"}}, model.ErrDuplicateID},
		{&model.RegisterApp{ID: "app-1", Token: "new", CoresPerExecutor: 1, MemoryPerExecutorMB: 1, ExecutorLimit: -1, Argv: []string{"x"}}, model.ErrInvalidCommand},
		{&model.RegisterApp{ID: appID(50), Token: "new", DriverID: driverID(0), DriverAttempt: 2, CoresPerExecutor: 1, MemoryPerExecutorMB: 1, ExecutorLimit: -1, Argv: []string{"x"}}, model.ErrDriverEnded},
		{&model.RequestExecutors{AppID: appID(999), Total: 1}, model.ErrUnknownApp},
		{&model.RequestExecutors{AppID: appID(3), Total: 1}, model.ErrAppEnded},
		{&model.KillExecutors{AppID: appID(4), ExecutorIDs: []int{0, 5}}, model.ErrUnknownExecutor},
		{&model.KillExecutors{AppID: appID(3), ExecutorIDs: []int{0}}, model.ErrAppEnded},
		{&model.EndApp{AppID: appID(3), State: model.AppKilled}, model.ErrAppEnded},
		{&model.EndApp{AppID: appID(4), State: model.AppRunning}, model.ErrInvalidCommand},
		{&model.EndApp{AppID: appID(999), State: model.AppFinished}, model.ErrUnknownApp},
	}
	for _, c := range bad {
		data, err := Encode(c.payload)
		if err != nil {
			t.Fatal(err)
		}
		res := f.ApplyCommand(100, data)
		err, _ = res.(error)
		if !errors.Is(err, c.want) {
			t.Errorf("%s %+v: got %v, want %v", c.payload.CommandType(), c.payload, res, c.want)
		}
		if hashOf(t, f) != before {
			t.Fatalf("%s %+v changed the tables", c.payload.CommandType(), c.payload)
		}
	}
}

func TestKillIsIdempotent(t *testing.T) {
	b := &logBuilder{t: t}
	b.add(&model.SubmitDriver{ID: driverID(0), Token: "t", DriverSpec: model.DriverSpec{Argv: []string{"x"}, Cores: 1, MemoryMB: 1}, Time: 1})
	kill := b.add(&model.KillDriver{DriverID: driverID(0), Time: 2})
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
		// A token its driver's row does not name would outlive the
		// driver's removal.
		fmt.Sprintf(finishedDriverWithTokens, "b"),
	} {
		if err := f.Restore(io.NopCloser(bytes.NewReader([]byte(s)))); err == nil {
			t.Errorf("snapshot %q was accepted", s)
		}
		if hashOf(t, f) != before {
			t.Fatalf("refused snapshot %q changed the tables", s)
		}
	}
	if err := New().Restore(io.NopCloser(bytes.NewReader([]byte(fmt.Sprintf(finishedDriverWithTokens, "a"))))); err != nil {
		t.Fatalf("the consistent snapshot: %v", err)
	}
}

// finishedDriverWithTokens is a snapshot of one finished driver whose row
// names token "a", and a token index that names it under the token given.
const finishedDriverWithTokens = `{"version":1,"tables":{"drivers":{"driver-20261129120000-0000":` +
	`{"id":"driver-20261129120000-0000","state":"FINISHED","token":"a"}},"tokens":{%q:"driver-20261129120000-0000"},"next_driver_seq":1}}`

// TestRandomLogsKeepInvariants applies random command sequences and checks,
// after every entry: resources used equal the sum over placed unfinished
// drivers and live executors and are never negative; waitingDrivers holds
// exactly the unplaced unfinished drivers; each app's CoresGranted is the
// sum over its live executors and within MaxCores; no finished app has a
// live executor; a placement never takes an app past its ExecutorLimit or a
// worker past its capacity; only placements make executors; a snapshot
// restores identical tables.
func TestRandomLogsKeepInvariants(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		f := New()
		workers := []string{"w1", "w2", "w3"}
		// Submissions come from two clients, or from none, as entries
		// written before SubmitDriver.Client say.
		clients := []string{"", "10.0.0.1", "10.0.0.2"}
		seq, appSeq := 0, 0
		var ids, apps []string
		// Start from three ALIVE workers, so that app commands have
		// somewhere to place executors.
		for i, w := range workers {
			data, err := Encode(&model.RegisterWorker{ID: w, HTTPAddr: "h:1", Cores: 4, MemoryMB: 4096})
			if err != nil {
				rt.Fatal(err)
			}
			f.ApplyCommand(uint64(i+1), data)
		}
		sub, _ := f.Subscribe(f.Index(), events.Filter{}, 1<<30)
		defer sub.Close()
		// Command kinds, weighted towards the app commands.
		mix := []int{0, 1, 1, 2, 2, 3, 4, 5, 6, 7, 7, 7, 8, 8, 8, 8, 9, 9, 9, 9, 9, 10, 11, 12, 13, 14}
		n := rapid.IntRange(1, 100).Draw(rt, "n")
		for i := len(workers); i < n+len(workers); i++ {
			var payload model.Command
			pickDriver := func() string {
				if len(ids) == 0 || rapid.IntRange(0, 9).Draw(rt, "ghost") == 9 {
					return driverID(999)
				}
				return rapid.SampledFrom(ids).Draw(rt, "driver")
			}
			pickApp := func() string {
				if len(apps) == 0 || rapid.IntRange(0, 9).Draw(rt, "ghostApp") == 9 {
					return appID(999)
				}
				return rapid.SampledFrom(apps).Draw(rt, "app")
			}
			switch rapid.SampledFrom(mix).Draw(rt, "cmd") {
			case 0:
				payload = &model.RegisterWorker{ID: rapid.SampledFrom(workers).Draw(rt, "w"), HTTPAddr: "h:1",
					Cores: rapid.IntRange(1, 8).Draw(rt, "cores"), MemoryMB: int64(rapid.IntRange(1, 8).Draw(rt, "mem")) * 512, Time: int64(i)}
			case 1:
				id := driverID(seq)
				tok := fmt.Sprint("t", seq)
				if rapid.IntRange(0, 7).Draw(rt, "retryDriverTok") == 7 {
					tok = fmt.Sprint("t", rapid.IntRange(0, seq).Draw(rt, "tok"))
				}
				seq++
				ids = append(ids, id)
				payload = &model.SubmitDriver{ID: id, Token: tok, DriverSpec: model.DriverSpec{Argv: []string{"p"}, Cores: rapid.IntRange(1, 3).Draw(rt, "dc"), MemoryMB: 512, Supervise: rapid.Bool().Draw(rt, "sup")},
					Time:   int64(i),
					Client: rapid.SampledFrom(clients).Draw(rt, "client")}
			case 2:
				var ps []model.Placement
				for j := rapid.IntRange(1, 4).Draw(rt, "np"); j > 0; j-- {
					ps = append(ps, model.Placement{DriverID: pickDriver(), Attempt: rapid.IntRange(1, 3).Draw(rt, "att"), WorkerID: rapid.SampledFrom(workers).Draw(rt, "pw")})
				}
				payload = &model.PlaceDrivers{Placements: ps, Time: int64(i)}
			case 3:
				states := []model.DriverState{model.DriverRunning, model.DriverFinished, model.DriverFailed, model.DriverKilled, model.DriverError}
				w, r := rapid.SampledFrom(workers).Draw(rt, "rw"), model.AttemptReport{DriverID: pickDriver(), Attempt: rapid.IntRange(1, 3).Draw(rt, "ra")}
				// Mostly about the running attempt of a placed driver, from
				// its worker.
				var placed []*model.Driver
				for _, d := range f.State().Drivers() {
					if d.WorkerID != "" && !d.State.Terminal() {
						placed = append(placed, d)
					}
				}
				if len(placed) > 0 && rapid.IntRange(0, 3).Draw(rt, "current") != 3 {
					d := rapid.SampledFrom(placed).Draw(rt, "placedDriver")
					w, r.DriverID, r.Attempt = d.WorkerID, d.ID, d.Attempt
				}
				r.State, r.ExitCode = rapid.SampledFrom(states).Draw(rt, "rs"), intp(1)
				payload = &model.ReportAttempts{WorkerID: w, Time: int64(i), Reports: []model.AttemptReport{r}}
			case 4:
				payload = &model.KillDriver{DriverID: pickDriver(), Time: int64(i)}
			case 5:
				payload = &model.WorkerLost{WorkerID: rapid.SampledFrom(workers).Draw(rt, "lw"), Time: int64(i)}
			case 6:
				payload = &model.DecommissionWorker{WorkerID: rapid.SampledFrom(workers).Draw(rt, "dw"), Time: int64(i)}
			case 7:
				id := appID(appSeq)
				if len(apps) > 0 && rapid.IntRange(0, 9).Draw(rt, "dupID") == 9 {
					id = rapid.SampledFrom(apps).Draw(rt, "dupApp")
				} else {
					appSeq++
					apps = append(apps, id)
				}
				// Mostly a fresh token, sometimes a retried one.
				tok := fmt.Sprint("a", appSeq)
				if rapid.IntRange(0, 7).Draw(rt, "retryTok") == 7 {
					tok = fmt.Sprint("a", rapid.IntRange(0, appSeq).Draw(rt, "atok"))
				}
				c := &model.RegisterApp{ID: id, Token: tok, Argv: []string{"e"},
					CoresPerExecutor:    rapid.IntRange(1, 2).Draw(rt, "ec"),
					MemoryPerExecutorMB: int64(rapid.IntRange(1, 2).Draw(rt, "em")) * 256,
					MaxCores:            rapid.SampledFrom([]int{0, 0, 2, 3, 4}).Draw(rt, "maxCores"),
					ExecutorLimit:       rapid.SampledFrom([]int{-1, -1, 0, 1, 2, 3}).Draw(rt, "limit"),
					MaxExecutorRetries:  rapid.SampledFrom([]int{-1, 0, 1, 2}).Draw(rt, "retries"),
					Time:                int64(i)}
				switch rapid.IntRange(0, 3).Draw(rt, "tied") {
				case 3:
					c.DriverID, c.DriverAttempt = pickDriver(), rapid.IntRange(1, 3).Draw(rt, "appAtt")
				case 2:
					// The running attempt of a placed driver, as a driver's
					// own registration would name it.
					var placed []*model.Driver
					for _, d := range f.State().Drivers() {
						if d.WorkerID != "" && !d.State.Terminal() {
							placed = append(placed, d)
						}
					}
					if len(placed) > 0 {
						d := rapid.SampledFrom(placed).Draw(rt, "appDriver")
						c.DriverID, c.DriverAttempt = d.ID, d.Attempt
					}
				}
				switch rapid.IntRange(0, 12).Draw(rt, "invalid") {
				case 7:
					c.CoresPerExecutor = 0
				case 8:
					c.MemoryPerExecutorMB = -1
				case 9:
					c.MaxCores = -1
				case 10:
					c.ExecutorLimit = -2
				case 11:
					c.MaxExecutorRetries = -2
				case 12:
					c.Env = map[string]string{"DROVER_APP_ID": "x"}
				}
				payload = c
			case 8:
				// Mostly the IDs a leader would pick (NextExecutorID,
				// counting up within the batch), sometimes stray ones.
				next := map[string]int{}
				var ps []model.ExecutorPlacement
				for j := rapid.IntRange(1, 4).Draw(rt, "nep"); j > 0; j-- {
					app := pickApp()
					id := rapid.IntRange(0, 6).Draw(rt, "strayID")
					if rapid.IntRange(0, 4).Draw(rt, "stray") != 4 {
						if _, ok := next[app]; !ok {
							if a, _, ok := f.State().App(app); ok {
								next[app] = a.NextExecutorID
							}
						}
						id = next[app]
						next[app]++
					}
					ps = append(ps, model.ExecutorPlacement{AppID: app, ExecutorID: id, WorkerID: rapid.SampledFrom(workers).Draw(rt, "ew")})
				}
				payload = &model.PlaceExecutors{Placements: ps, Time: int64(i)}
			case 9:
				// Mostly from a worker with live executors, about them.
				w := rapid.SampledFrom(workers).Draw(rt, "erw")
				var busy []string
				for _, bw := range workers {
					if on, _ := f.State().ExecutorsOn(bw); len(on) > 0 {
						busy = append(busy, bw)
					}
				}
				if len(busy) > 0 && rapid.IntRange(0, 3).Draw(rt, "busy") != 3 {
					w = rapid.SampledFrom(busy).Draw(rt, "busyWorker")
				}
				on, _ := f.State().ExecutorsOn(w)
				states := []model.ExecutorState{model.ExecRunning, model.ExecRunning, model.ExecExited, model.ExecFailed, model.ExecFailed, model.ExecKilled}
				var rs []model.ExecutorReport
				for j := rapid.IntRange(1, 3).Draw(rt, "ner"); j > 0; j-- {
					r := model.ExecutorReport{State: rapid.SampledFrom(states).Draw(rt, "es")}
					if len(on) > 0 && rapid.IntRange(0, 3).Draw(rt, "own") != 3 {
						e := rapid.SampledFrom(on).Draw(rt, "ownExec")
						r.AppID, r.ExecutorID = e.AppID, e.ID
					} else {
						r.AppID, r.ExecutorID = pickApp(), rapid.IntRange(0, 6).Draw(rt, "reid")
					}
					switch r.State {
					case model.ExecExited:
						r.ExitCode = intp(0)
					case model.ExecFailed:
						r.ExitCode = intp(1)
					}
					rs = append(rs, r)
				}
				payload = &model.ReportAttempts{WorkerID: w, Reports: []model.AttemptReport{}, Executors: rs, Time: int64(i)}
			case 10:
				payload = &model.RequestExecutors{AppID: pickApp(), Total: rapid.IntRange(-1, 4).Draw(rt, "total"), Time: int64(i)}
			case 11:
				var ks []int
				for j := rapid.IntRange(0, 2).Draw(rt, "nk"); j > 0; j-- {
					ks = append(ks, rapid.IntRange(0, 5).Draw(rt, "kid"))
				}
				payload = &model.KillExecutors{AppID: pickApp(), ExecutorIDs: ks, Time: int64(i)}
			case 12:
				states := []model.ApplicationState{model.AppFinished, model.AppFailed, model.AppKilled, model.AppRunning}
				payload = &model.EndApp{AppID: pickApp(), State: rapid.SampledFrom(states).Draw(rt, "as"), Time: int64(i)}
			case 13:
				// The oldest finished ones, as the leader picks them, plus
				// perhaps a live or unknown one.
				ds, as := f.State().Completed()
				ds = ds[:rapid.IntRange(0, len(ds)).Draw(rt, "pd")]
				as = as[:rapid.IntRange(0, len(as)).Draw(rt, "pa")]
				if rapid.Bool().Draw(rt, "pruneLive") {
					ds, as = append(ds, pickDriver()), append(as, pickApp())
				}
				payload = &model.PruneCompleted{DriverIDs: ds, AppIDs: as}
			case 14:
				// A group of submissions, as case 1 makes them, some
				// of them refused.
				var c model.SubmitDrivers
				for j := rapid.IntRange(1, 4).Draw(rt, "ns"); j > 0; j-- {
					id := driverID(seq)
					tok := fmt.Sprint("t", seq)
					if rapid.IntRange(0, 3).Draw(rt, "retryGroupTok") == 3 {
						tok = fmt.Sprint("t", rapid.IntRange(0, seq).Draw(rt, "gtok"))
					}
					seq++
					ids = append(ids, id)
					c.Drivers = append(c.Drivers, model.SubmitDriver{ID: id, Token: tok, DriverSpec: model.DriverSpec{Argv: []string{"p"}, Cores: rapid.IntRange(0, 3).Draw(rt, "gc"), MemoryMB: 512},
						Time: int64(i), Client: rapid.SampledFrom(clients).Draw(rt, "gclient")})
				}
				payload = &c
			}
			data, err := Encode(payload)
			if err != nil {
				rt.Fatal(err)
			}
			ct := payload.CommandType()
			before, rowsBefore := appCounts(f), rowTexts(f)
			res := f.ApplyCommand(uint64(i+1), data)
			after := appCounts(f)
			checkEvents(rt, f, sub, uint64(i+1), rowsBefore, rowTexts(f))
			if ct == model.CmdPlaceExecutors {
				checkPlacement(rt, f, before, after, res)
			} else if after.live > before.live {
				rt.Fatalf("%s made executors: %d live before, %d after", ct, before.live, after.live)
			}
			checkInvariants(rt, f)
			restored := snapshotRestore(rt, f)
			if a, b := hashOf(rt, f), hashOf(rt, restored); a != b {
				rt.Fatalf("after %s: snapshot/restore changed the tables", ct)
			}
			checkLive(rt, restored)
		}
	})
}

type counts struct {
	next map[string]int // NextExecutorID by app
	live int            // live executors of all apps
}

func appCounts(f *FSM) counts {
	c := counts{next: map[string]int{}}
	apps, execs := f.State().Apps()
	for i, a := range apps {
		c.next[a.ID] = a.NextExecutorID
		for _, e := range execs[i] {
			if !e.State.Terminal() {
				c.live++
			}
		}
	}
	return c
}

// checkPlacement checks a PlaceExecutors entry: what it reports applied is
// exactly the executors made; no app it grew is past its ExecutorLimit; no
// worker it placed on is past its capacity.
func checkPlacement(t tb, f *FSM, before, after counts, res any) {
	r, ok := res.(PlaceExecutorsResult)
	if !ok {
		t.Fatalf("PlaceExecutors returned %v", res)
	}
	made := 0
	for id, n := range after.next {
		if n < before.next[id] {
			t.Fatalf("app %s: NextExecutorID went down from %d to %d", id, before.next[id], n)
		}
		if n == before.next[id] {
			continue
		}
		made += n - before.next[id]
		a, es, _ := f.State().App(id)
		live := 0
		for _, e := range es {
			if !e.State.Terminal() {
				live++
			}
		}
		if a.ExecutorLimit >= 0 && live > a.ExecutorLimit {
			t.Fatalf("app %s has %d live executors, limit %d", id, live, a.ExecutorLimit)
		}
	}
	if made != len(r.Applied) || after.live-before.live != made {
		t.Fatalf("placement made %d executors (%d more live), reported %d applied", made, after.live-before.live, len(r.Applied))
	}
	for _, p := range r.Applied {
		_, es, _ := f.State().App(p.AppID)
		if p.ExecutorID >= len(es) || es[p.ExecutorID].ID != p.ExecutorID || es[p.ExecutorID].WorkerID != p.WorkerID {
			t.Fatalf("applied placement %+v made no such executor", p)
		}
		if w, _ := f.State().Worker(p.WorkerID); w.CoresUsed > w.Cores || w.MemoryUsedMB > w.MemoryMB || w.State != model.WorkerAlive {
			t.Fatalf("placed on worker %s (%s) using %d/%d cores %d/%d MiB", w.ID, w.State, w.CoresUsed, w.Cores, w.MemoryUsedMB, w.MemoryMB)
		}
	}
}

func checkInvariants(t tb, f *FSM) {
	checkWorkerIndex(t, f)
	checkLive(t, f)
	cores := map[string]int{}
	mem := map[string]int64{}
	held := map[string]model.Resources{}
	waiting := map[string]bool{}
	for _, d := range f.State().WaitingDrivers() {
		if waiting[d.ID] {
			t.Fatalf("%s is twice in waitingDrivers", d.ID)
		}
		waiting[d.ID] = true
	}
	for _, d := range f.State().Drivers() {
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
		if rec := d.CurrentAttempt(); rec == nil || rec.WorkerID != d.WorkerID {
			t.Fatalf("placed driver %s has no attempt record for attempt %d on %s", d.ID, d.Attempt, d.WorkerID)
		}
		cores[d.WorkerID] += d.Cores
		mem[d.WorkerID] += d.MemoryMB
		holds(t, held, d.WorkerID, d.CurrentAttempt().Resources)
	}
	apps, execs := f.State().Apps()
	rows := 0
	for i, a := range apps {
		granted := 0
		for _, e := range execs[i] {
			rows++
			if e.AppID != a.ID || e.ID < 0 || e.ID >= a.NextExecutorID {
				t.Fatalf("executor %s is filed under app %s (next ID %d)", model.ExecutorKey(e.AppID, e.ID), a.ID, a.NextExecutorID)
			}
			if e.State.Terminal() {
				continue
			}
			if a.State.Terminal() {
				t.Fatalf("app %s is %s but executor %d is %s", a.ID, a.State, e.ID, e.State)
			}
			if e.Cores != a.CoresPerExecutor || e.MemoryMB != a.MemoryPerExecutorMB {
				t.Fatalf("executor %s has %d cores %d MiB, its app asks %d and %d", model.ExecutorKey(a.ID, e.ID), e.Cores, e.MemoryMB, a.CoresPerExecutor, a.MemoryPerExecutorMB)
			}
			if w, ok := f.State().Worker(e.WorkerID); !ok || w.State == model.WorkerDead {
				t.Fatalf("live executor %s is on unknown or dead worker %s", model.ExecutorKey(a.ID, e.ID), e.WorkerID)
			}
			cores[e.WorkerID] += e.Cores
			mem[e.WorkerID] += e.MemoryMB
			holds(t, held, e.WorkerID, e.Resources)
			granted += e.Cores
		}
		if a.CoresGranted != granted {
			t.Fatalf("app %s: CoresGranted %d, live executors have %d", a.ID, a.CoresGranted, granted)
		}
		if a.MaxCores > 0 && a.CoresGranted > a.MaxCores {
			t.Fatalf("app %s: granted %d cores, max %d", a.ID, a.CoresGranted, a.MaxCores)
		}
		if a.RetryCount < 0 || a.ExecutorLimit < -1 || (a.State == model.AppWaiting && a.MaxExecutorRetries >= 0 && a.RetryCount > a.MaxExecutorRetries) {
			t.Fatalf("app %s: state %s retry %d (max %d) limit %d", a.ID, a.State, a.RetryCount, a.MaxExecutorRetries, a.ExecutorLimit)
		}
		if s, err := idSeq(ids.App, a.ID); err != nil || s >= f.State().NextAppSeq() {
			t.Fatalf("app %s: NextAppSeq %d is not past it (%v)", a.ID, f.State().NextAppSeq(), err)
		}
		if a.Token != "" {
			if id, ok := f.State().AppByToken(a.Token); !ok || id != a.ID {
				t.Fatalf("app %s: token %q names %q", a.ID, a.Token, id)
			}
		}
		// A live app of a driver lives with the attempt that registered it.
		if a.DriverID != "" && !a.State.Terminal() {
			d, ok := f.State().Driver(a.DriverID)
			if !ok || d.State.Terminal() || d.Attempt != a.DriverAttempt || d.WorkerID == "" {
				t.Fatalf("live app %s outlived driver %s attempt %d: %+v", a.ID, a.DriverID, a.DriverAttempt, d)
			}
		}
	}
	f.mu.RLock()
	total, tokens := len(f.t.Executors), len(f.t.AppTokens)
	f.mu.RUnlock()
	if rows != total {
		t.Fatalf("%d executor rows, %d reachable from their apps", total, rows)
	}
	withToken := 0
	for _, a := range apps {
		if a.Token != "" {
			withToken++
		}
	}
	if tokens != withToken {
		t.Fatalf("%d app tokens, %d apps with a token", tokens, withToken)
	}
	for _, w := range f.State().Workers() {
		if w.CoresUsed != cores[w.ID] || w.MemoryUsedMB != mem[w.ID] {
			t.Fatalf("worker %s: used %d cores %d MiB, drivers and executors sum to %d and %d", w.ID, w.CoresUsed, w.MemoryUsedMB, cores[w.ID], mem[w.ID])
		}
		if w.CoresUsed < 0 || w.MemoryUsedMB < 0 {
			t.Fatalf("worker %s: negative use", w.ID)
		}
		if got, want := w.ResourcesUsed.String(), held[w.ID].String(); got != want {
			t.Fatalf("worker %s: holds %q, its drivers and executors hold %q", w.ID, got, want)
		}
	}
}

// holds adds the addresses a live unit on worker holds to held, failing
// when another unit holds one of them already.
func holds(t tb, held map[string]model.Resources, worker string, rs model.Resources) {
	for name, addrs := range rs {
		for _, a := range addrs {
			if slices.Contains(held[worker][name], a) {
				t.Fatalf("address %s of %s on %s is held twice", a, name, worker)
			}
		}
	}
	r := held[worker]
	r.Hold(rs)
	held[worker] = r
}

// checkWorkerIndex compares DriversOn and ExecutorsOn, which read the
// per-worker index, with a walk of every row.
// checkLive checks the counts of what has not ended (State.Live) against
// the rows.
func checkLive(t tb, f *FSM) {
	var want Live
	byClient := map[string]int{}
	for _, d := range f.State().Drivers() {
		if !d.State.Terminal() {
			want.Drivers++
			byClient[d.Client]++
		}
	}
	apps, _ := f.State().Apps()
	for _, a := range apps {
		if !a.State.Terminal() {
			want.Apps++
		}
	}
	for _, client := range []string{"", "10.0.0.1", "10.0.0.2"} {
		want.ClientDrivers = byClient[client]
		if client == "" {
			want.ClientDrivers = 0
		}
		if got := f.State().Live(client); got != want {
			t.Fatalf("live rows of client %q: counted %+v, rows say %+v", client, got, want)
		}
	}
}

func checkWorkerIndex(t tb, f *FSM) {
	for _, w := range f.State().Workers() {
		var want []string
		for _, d := range f.State().Drivers() {
			if d.WorkerID == w.ID && !d.State.Terminal() {
				want = append(want, d.ID)
			}
		}
		var got []string
		for _, a := range f.State().AttemptsOn(w.ID) {
			got = append(got, a.DriverID)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("drivers on %s: index %v, rows %v", w.ID, got, want)
		}
		var wantE, gotE []string
		apps, execs := f.State().Apps()
		for i := range apps {
			for _, e := range execs[i] {
				if e.WorkerID == w.ID && !e.State.Terminal() {
					wantE = append(wantE, model.ExecutorKey(e.AppID, e.ID))
				}
			}
		}
		es, _ := f.State().ExecutorsOn(w.ID)
		for _, e := range es {
			gotE = append(gotE, model.ExecutorKey(e.AppID, e.ID))
		}
		if fmt.Sprint(gotE) != fmt.Sprint(wantE) {
			t.Fatalf("executors on %s: index %v, rows %v", w.ID, gotE, wantE)
		}
	}
}

// rowTexts is every row as JSON without its ModifyIndex (and a worker's
// without its instance, which events do not show), by kind and ID.
func rowTexts(f *FSM) map[rowKey]string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := map[rowKey]string{}
	add := func(kind api.EventKind, id string, row any) {
		b, _ := json.Marshal(row)
		out[rowKey{kind, id}] = string(b)
	}
	for id, d := range f.t.Drivers {
		c := *d
		c.ModifyIndex = 0
		add(api.EventDriver, id, c)
	}
	for id, a := range f.t.Apps {
		c := *a
		c.ModifyIndex = 0
		add(api.EventApp, id, c)
	}
	for id, e := range f.t.Executors {
		c := *e
		c.ModifyIndex = 0
		add(api.EventExecutor, id, c)
	}
	for id, w := range f.t.Workers {
		c := *w
		c.ModifyIndex, c.Instance = 0, ""
		add(api.EventWorker, id, c)
	}
	return out
}

// checkEvents checks the events of the entry at index against what it did
// to the rows: every row it added, changed or dropped has an event, in
// kind and ID order, an upsert carrying the row as it is now with
// ModifyIndex index, a delete for a row that is gone.
func checkEvents(t tb, f *FSM, sub *events.Sub, index uint64, before, after map[rowKey]string) {
	batches, err := sub.Take()
	if err != nil {
		t.Fatalf("entry %d: subscriber: %v", index, err)
	}
	got := map[rowKey]api.Event{}
	var order []rowKey
	for _, b := range batches {
		if b.Index != index {
			t.Fatalf("entry %d: a batch of index %d", index, b.Index)
		}
		for _, e := range b.Events {
			k := rowKey{e.Kind, e.ID}
			got[k] = e
			order = append(order, k)
		}
	}
	if !slices.IsSortedFunc(order, func(a, b rowKey) int {
		return cmp.Or(cmp.Compare(kindOrder[a.kind], kindOrder[b.kind]), cmp.Compare(a.id, b.id))
	}) {
		t.Fatalf("entry %d: events out of order: %v", index, order)
	}
	for k, text := range after {
		if before[k] != text {
			e, ok := got[k]
			if !ok || e.Op != api.OpUpsert {
				t.Fatalf("entry %d changed %v with no upsert event (%+v)", index, k, e)
			}
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok && got[k].Op != api.OpDelete {
			t.Fatalf("entry %d dropped %v with no delete event", index, k)
		}
	}
	for k, e := range got {
		if e.Op == api.OpDelete {
			if _, ok := after[k]; ok {
				t.Fatalf("entry %d: delete event for %v, which is still there", index, k)
			}
			continue
		}
		row := map[api.EventKind]any{api.EventDriver: e.Driver, api.EventApp: e.App, api.EventExecutor: e.Executor, api.EventWorker: e.Worker}[k.kind]
		b, _ := json.Marshal(row)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		if mi, _ := m["modify_index"].(float64); uint64(mi) != index {
			t.Fatalf("entry %d: upsert of %v has modify_index %v", index, k, m["modify_index"])
		}
		delete(m, "modify_index")
		var want map[string]any
		_ = json.Unmarshal([]byte(after[k]), &want)
		delete(want, "modify_index")
		if !reflect.DeepEqual(m, want) {
			t.Fatalf("entry %d: upsert of %v carries %v, the row is %v", index, k, m, want)
		}
	}
}

// A worker that registers again, as a new process after it was lost, keeps
// the time of its first registration; the rest of the row is the new
// registration's, so the UI can say both how long the worker has been part
// of the cluster and when it last came back.
func TestReRegistrationKeepsRegisteredAt(t *testing.T) {
	b := &logBuilder{t: t}
	b.add(&model.RegisterWorker{ID: "w1", Instance: "i1", HTTPAddr: "h:1", Cores: 2, MemoryMB: 512, Time: 1000})
	b.add(&model.WorkerLost{WorkerID: "w1", Reason: "gone", Time: 1500})
	b.add(&model.RegisterWorker{ID: "w1", Instance: "i2", HTTPAddr: "h:2", Cores: 4, MemoryMB: 1024, Time: 2000})
	f := replay(t, b.entries)
	w, ok := f.State().Worker("w1")
	if !ok {
		t.Fatal("w1 is not in the tables")
	}
	if w.RegisteredAt != 1000 || w.UpdatedAt != 2000 || !f.State().IsInstance("w1", "i2") || w.HTTPAddr != "h:2" || w.Cores != 4 ||
		w.MemoryMB != 1024 || w.State != model.WorkerAlive {
		t.Fatalf("after the second registration: %+v; want registered at 1000, updated at 2000, the new instance's offer, ALIVE", w)
	}
	if g := snapshotRestore(t, f); hashOf(t, g) != hashOf(t, f) {
		t.Fatal("a snapshot does not keep the registration times")
	}
}

// TestHashAtPairsTheHashWithItsIndex: while entries apply, every hash
// HashAt gives is that of the tables at the index it gives with it, as a
// serial replay to that index has them. Read apart (the index, then the
// hash), an entry applied in between pairs one index with the next
// index's tables: two masters would seem to differ at one index.
func TestHashAtPairsTheHashWithItsIndex(t *testing.T) {
	entries := scenario(t)
	want := make([]string, len(entries)+1)
	ref := New()
	want[0] = hashOf(t, ref)
	for i, e := range entries {
		ref.ApplyCommand(uint64(i+1), e)
		want[i+1] = hashOf(t, ref)
	}
	for range 20 {
		f := New()
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i, e := range entries {
				f.ApplyCommand(uint64(i+1), e)
			}
		}()
		for reading := true; reading; {
			select {
			case <-done:
				reading = false
			default:
			}
			h, index, err := f.HashAt()
			if err != nil {
				t.Fatal(err)
			}
			if h != want[index] {
				t.Fatalf("HashAt gave index %d with a hash that is not that index's tables'", index)
			}
		}
	}
}
