package fsm

// Benchmarks of Apply, one sub-benchmark per command type, on tables of a
// busy cluster, and of Snapshot and Restore with 100,000 drivers. They only
// print figures; `make bench` collects them into docs/benchmarks.md.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-project/drover/model"
)

// benchSizes describes the tables a benchmark starts from: workers, drivers
// (all supervised), how many of those still wait (the rest are placed and
// RUNNING, spread evenly over the workers), and apps, each registered by a
// running driver and holding two RUNNING executors.
type benchSizes struct{ workers, drivers, waiting, apps int }

var (
	// applySizes are the tables every Apply benchmark starts from.
	applySizes = benchSizes{workers: 100, drivers: 10_000, waiting: 1_000, apps: 100}
	// snapshotSizes are the tables of BenchmarkSnapshot100k and
	// BenchmarkRestore100k.
	snapshotSizes = benchSizes{workers: 1_000, drivers: 100_000, apps: 100}
)

// submitGroup is the size of the SubmitDrivers groups benchmarked.
const submitGroup = 64

// benchEpoch is the Unix millisecond the benchmark clock starts at.
const benchEpoch int64 = 1_795_000_000_000

// benchFSM is an FSM driven the way a leader drives it: every change is an
// encoded command applied at the next index, with a clock and the ID
// counters a leader keeps.
type benchFSM struct {
	t       testing.TB
	f       *FSM
	idx     uint64
	clock   int64
	workers []string // the starting workers, in ID order
	running []string // the starting RUNNING drivers, in ID order
	apps    []string // the starting apps, in ID order
	next    benchNext
}

// benchNext is the ID counters a benchFSM keeps.
type benchNext struct{ driver, app, worker, turn, namespace, token, schedule int }

// benchFormat is the format of the benchmarks' entries: FormatPack, which
// a leader writes once every voter reads it ($DROVER_BENCH_FORMAT=json for
// FormatJSON).
var benchFormat = map[bool]byte{false: FormatPack, true: FormatJSON}[os.Getenv("DROVER_BENCH_FORMAT") == "json"]

func benchDriverID(seq int) string { return fmt.Sprintf("driver-20261129120000-%06d", seq) }
func benchAppID(seq int) string    { return fmt.Sprintf("app-20261129120000-%06d", seq) }

func (s *benchFSM) tick() int64 { s.clock++; return benchEpoch + s.clock }

func (s *benchFSM) encode(payload model.Command) []byte {
	data, err := EncodeAs(benchFormat, payload)
	if err != nil {
		s.t.Fatalf("encode %s: %v", payload.CommandType(), err)
	}
	return data
}

func (s *benchFSM) apply(data []byte) any {
	s.idx++
	return s.f.ApplyCommand(s.idx, data)
}

// must applies a command that has to take effect.
func (s *benchFSM) must(payload model.Command) any {
	res := s.apply(s.encode(payload))
	if why := refusal(res); why != "" {
		s.t.Fatalf("%s: %s", payload.CommandType(), why)
	}
	return res
}

// refusal says why Apply's result shows a command that did nothing, or ""
// when it took effect.
func refusal(res any) string {
	switch r := res.(type) {
	case error:
		return r.Error()
	case PlaceResult:
		if len(r.Applied) == 0 {
			return "no placement applied"
		}
	case PlaceExecutorsResult:
		if len(r.Applied) == 0 {
			return "no executor placement applied"
		}
	case SubmitResult:
		if r.Existing {
			return "token already known"
		}
	case SubmitDriversResult:
		for _, o := range r.Outcomes {
			if o.Err != nil {
				return o.Err.Error()
			}
			if o.Existing {
				return "token already known"
			}
		}
	case RegisterAppResult:
		if r.Existing {
			return "token already known"
		}
	case FireResult:
		if r.Outcome != FireStarted {
			return "slot " + string(r.Outcome) + ": " + r.Reason
		}
	}
	return ""
}

// schedules creates n schedules of the submission submitCommand makes
// and returns their names.
func (s *benchFSM) schedules(n int) []string {
	names := make([]string, n)
	for i := range names {
		c := s.scheduleCommand()
		s.must(c)
		names[i] = c.Schedule.Name
	}
	return names
}

// scheduleCommand returns the creation of a new schedule.
func (s *benchFSM) scheduleCommand() *model.CreateSchedule {
	s.next.schedule++
	return &model.CreateSchedule{Schedule: model.Schedule{Name: fmt.Sprintf("sched-%06d", s.next.schedule), Cron: "@every 10s", TimeZone: "UTC",
		Concurrency: model.ConcurrencyAllow, History: model.DefaultHistory, Template: model.SubmitDriver{Name: "nightly", DriverSpec: s.submitCommand().DriverSpec}},
		Time: s.tick()}
}

// rotate returns the next element of list, round robin.
func (s *benchFSM) rotate(list []string) string {
	s.next.turn++
	return list[s.next.turn%len(list)]
}

// turn returns the next starting worker, round robin.
func (s *benchFSM) turn() string { return s.rotate(s.workers) }

func (s *benchFSM) registerWorker(id string) {
	s.must(&model.RegisterWorker{
		ID: id, Instance: "inst-" + id, HTTPAddr: "10.0.0.1:7402",
		// Room for every driver and executor the benchmarks place, so
		// none is skipped for lack of it.
		Cores: 1 << 20, MemoryMB: 1 << 40, Time: s.tick(),
	})
}

// submitCommand is a SubmitDriver for a new driver shaped like a Spark
// cluster-mode driver.
func (s *benchFSM) submitCommand() *model.SubmitDriver {
	seq := s.next.driver
	s.next.driver++
	return &model.SubmitDriver{
		ID: benchDriverID(seq), Token: fmt.Sprintf("token-%06d", seq), Name: fmt.Sprintf("etl-%d", seq%97),
		DriverSpec: model.DriverSpec{
			Argv: []string{"/opt/spark/bin/spark-class", "org.apache.spark.deploy.worker.DriverWrapper",
				"--class", "com.example.Etl", "/jobs/etl.jar", fmt.Sprint(seq)},
			Env:       map[string]string{"SPARK_HOME": "/opt/spark", "JAVA_OPTS": "-Xmx1g"},
			Cores:     1,
			MemoryMB:  1024,
			Supervise: true,
		},
		Time: s.tick(),
	}
}

func (s *benchFSM) submitDrivers(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		c := s.submitCommand()
		s.must(c)
		ids[i] = c.ID
	}
	return ids
}

// place places waiting drivers, round robin over the starting workers, in
// batches the size a leader commits, and returns them grouped by worker.
func (s *benchFSM) place(ids []string) map[string][]string {
	byWorker := map[string][]string{}
	for len(ids) > 0 {
		batch := ids[:min(len(ids), 1000)]
		ids = ids[len(batch):]
		c := &model.PlaceDrivers{Time: s.tick()}
		for _, id := range batch {
			w := s.turn()
			c.Placements = append(c.Placements, model.Placement{DriverID: id, Attempt: s.f.t.Drivers[id].Attempt, WorkerID: w})
			byWorker[w] = append(byWorker[w], id)
		}
		s.must(c)
	}
	return byWorker
}

// report has each worker report its drivers' current attempts in state.
func (s *benchFSM) report(byWorker map[string][]string, state model.DriverState) {
	for _, w := range sortedKeys(byWorker) {
		c := &model.ReportAttempts{WorkerID: w, Time: s.tick()}
		for _, id := range byWorker[w] {
			r := model.AttemptReport{DriverID: id, Attempt: s.f.t.Drivers[id].Attempt, State: state, Runs: 1}
			if state.Terminal() {
				r.ExitCode = new(int)
			}
			c.Reports = append(c.Reports, r)
		}
		s.must(c)
	}
}

// runDrivers submits n drivers, places them and reports them RUNNING.
func (s *benchFSM) runDrivers(n int) []string {
	ids := s.submitDrivers(n)
	s.report(s.place(ids), model.DriverRunning)
	return ids
}

// registerAppCommand is a RegisterApp for a new app, registered by driver
// (when not empty) and without caps.
func (s *benchFSM) registerAppCommand(driver string) *model.RegisterApp {
	seq := s.next.app
	s.next.app++
	c := &model.RegisterApp{
		ID: benchAppID(seq), Token: fmt.Sprintf("app-token-%06d", seq), Name: fmt.Sprintf("etl-%d", seq%97),
		CoresPerExecutor: 1, MemoryPerExecutorMB: 2048, ExecutorLimit: -1, MaxExecutorRetries: 10,
		Argv: []string{"/opt/spark/bin/spark-class", "org.apache.spark.executor.CoarseGrainedExecutorBackend",
			"--app-id", benchAppID(seq)},
		Env:  map[string]string{"SPARK_HOME": "/opt/spark"},
		Time: s.tick(),
	}
	if driver != "" {
		c.DriverID, c.DriverAttempt = driver, s.f.t.Drivers[driver].Attempt
	}
	return c
}

// startApps registers one app per driver (or n driverless apps when drivers
// is nil) and places executors executors for each, round robin.
func (s *benchFSM) startApps(n int, drivers []string, executors int) []string {
	ids := make([]string, n)
	place := &model.PlaceExecutors{Time: s.tick()}
	for i := range ids {
		driver := ""
		if drivers != nil {
			driver = drivers[i]
		}
		c := s.registerAppCommand(driver)
		s.must(c)
		ids[i] = c.ID
		for e := range executors {
			place.Placements = append(place.Placements, model.ExecutorPlacement{AppID: c.ID, ExecutorID: e, WorkerID: s.turn()})
		}
	}
	if len(place.Placements) > 0 {
		s.must(place)
	}
	return ids
}

// buildTables makes the tables z describes, through commands.
func buildTables(t testing.TB, z benchSizes) *benchFSM {
	s := &benchFSM{t: t, f: New()}
	for i := range z.workers {
		s.workers = append(s.workers, fmt.Sprintf("worker-%05d", i))
		s.registerWorker(s.workers[i])
	}
	ids := s.submitDrivers(z.drivers)
	placed := ids[:z.drivers-z.waiting]
	s.report(s.place(placed), model.DriverRunning)
	for _, a := range s.startApps(z.apps, placed[:z.apps], 2) {
		for _, e := range s.f.t.executorsOf(a) {
			s.must(&model.ReportAttempts{WorkerID: e.WorkerID, Time: s.tick(),
				Executors: []model.ExecutorReport{{AppID: a, ExecutorID: e.ID, State: model.ExecRunning}}})
		}
	}
	return s
}

// benchBase is a snapshot of built tables, restored by each benchmark run
// so that none pays for building them or sees another's changes.
type benchBase struct {
	data []byte
	next benchNext
}

var benchBases struct {
	sync.Mutex
	m map[benchSizes]*benchBase
}

// baseOf builds the tables z describes once per process.
func baseOf(t testing.TB, z benchSizes) *benchBase {
	benchBases.Lock()
	defer benchBases.Unlock()
	if b, ok := benchBases.m[z]; ok {
		return b
	}
	s := buildTables(t, z)
	b := &benchBase{data: snapshotBytes(t, s.f), next: s.next}
	if benchBases.m == nil {
		benchBases.m = map[benchSizes]*benchBase{}
	}
	benchBases.m[z] = b
	return b
}

// open restores a fresh copy of the base tables.
func (b *benchBase) open(t testing.TB) *benchFSM {
	s := &benchFSM{t: t, f: restoreBytes(t, b.data), idx: 1 << 32, clock: 1 << 32, next: b.next}
	for _, w := range s.f.State().Workers() {
		s.workers = append(s.workers, w.ID)
	}
	for _, d := range s.f.State().Drivers() {
		if d.State == model.DriverRunning {
			s.running = append(s.running, d.ID)
		}
	}
	apps, _ := s.f.State().Apps()
	for _, a := range apps {
		s.apps = append(s.apps, a.ID)
	}
	return s
}

func restoreBytes(t testing.TB, data []byte) *FSM {
	f := New()
	if err := f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	return f
}

func snapshotBytes(t testing.TB, f *FSM) []byte {
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	var sink benchSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	return sink.Bytes()
}

// benchSink is a raft.SnapshotSink into memory.
type benchSink struct{ bytes.Buffer }

func (*benchSink) ID() string    { return "bench" }
func (*benchSink) Cancel() error { return nil }
func (*benchSink) Close() error  { return nil }

// repair brings the starting workers back to ALIVE and places every
// relaunched driver again on the worker of its previous attempt, RUNNING,
// so the tables look as they did before workers were lost.
func (s *benchFSM) repair() {
	for _, w := range s.f.State().Workers() {
		if w.State != model.WorkerAlive {
			s.registerWorker(w.ID)
		}
	}
	byWorker := map[string][]string{}
	for _, id := range s.f.t.WaitingDrivers {
		if d := s.f.t.Drivers[id]; d.State == model.DriverRelaunching {
			w := d.Attempts[len(d.Attempts)-1].WorkerID
			byWorker[w] = append(byWorker[w], id)
		}
	}
	for _, w := range sortedKeys(byWorker) {
		c := &model.PlaceDrivers{Time: s.tick()}
		for _, id := range byWorker[w] {
			c.Placements = append(c.Placements, model.Placement{DriverID: id, Attempt: s.f.t.Drivers[id].Attempt, WorkerID: w})
		}
		s.must(c)
	}
	s.report(byWorker, model.DriverRunning)
}

// applyCase benchmarks one command type. prepare readies the tables for up
// to n commands of that type, which must all take effect, and returns them
// encoded (at least one); it runs with the benchmark timer stopped.
type applyCase struct {
	cmd     model.CommandType
	chunk   int // the most commands one prepare readies
	prepare func(s *benchFSM, n int) [][]byte
}

// each encodes n commands, made by payload(i).
func (s *benchFSM) each(n int, payload func(i int) model.Command) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = s.encode(payload(i))
	}
	return out
}

// applyCases covers every command type. Each command carries one item (one
// placement, one report, one ID), so ns/op is the cost of one log entry;
// a ReportBatch carries sixteen workers' reports, the batch a busy leader
// commits.
var applyCases = []applyCase{
	{model.CmdRegisterWorker, 1000, func(s *benchFSM, n int) [][]byte {
		return s.each(n, func(int) model.Command {
			s.next.worker++
			return &model.RegisterWorker{ID: fmt.Sprintf("worker-new-%06d", s.next.worker), HTTPAddr: "10.0.1.1:7402",
				Cores: 64, MemoryMB: 256 << 10, Time: s.tick()}
		})
	}},
	{model.CmdSubmitDriver, 1000, func(s *benchFSM, n int) [][]byte {
		return s.each(n, func(int) model.Command { return s.submitCommand() })
	}},
	// The exception to one item per command: a group of submitGroup
	// submissions, as a leader commits concurrent ones, so ns/op over
	// submitGroup is what a submission costs in a group.
	{model.CmdSubmitDrivers, 100, func(s *benchFSM, n int) [][]byte {
		return s.each(n, func(int) model.Command {
			c := &model.SubmitDrivers{Drivers: make([]model.SubmitDriver, submitGroup)}
			for i := range c.Drivers {
				c.Drivers[i] = *s.submitCommand()
			}
			return c
		})
	}},
	// A new driver joins the queue behind the waiting ones, then is placed.
	{model.CmdPlaceDrivers, 1000, func(s *benchFSM, n int) [][]byte {
		ids := s.submitDrivers(n)
		return s.each(n, func(i int) model.Command {
			return &model.PlaceDrivers{Placements: []model.Placement{{DriverID: ids[i], Attempt: 1, WorkerID: s.turn()}}, Time: s.tick()}
		})
	}},
	// A placed driver is reported RUNNING by its worker.
	{model.CmdReportAttempts, 1000, func(s *benchFSM, n int) [][]byte {
		byWorker := s.place(s.submitDrivers(n))
		var out [][]byte
		for _, w := range sortedKeys(byWorker) {
			for _, id := range byWorker[w] {
				out = append(out, s.encode(&model.ReportAttempts{WorkerID: w, Time: s.tick(),
					Reports: []model.AttemptReport{{DriverID: id, Attempt: 1, State: model.DriverRunning, Runs: 1}}}))
			}
		}
		return out
	}},
	// Sixteen workers' heartbeats, each reporting one placed driver
	// RUNNING, in one entry.
	{model.CmdReportBatch, 1000, func(s *benchFSM, n int) [][]byte {
		byWorker := s.place(s.submitDrivers(16 * n))
		var reports []model.ReportAttempts
		for _, w := range sortedKeys(byWorker) {
			for _, id := range byWorker[w] {
				reports = append(reports, model.ReportAttempts{WorkerID: w, Time: s.tick(),
					Reports: []model.AttemptReport{{DriverID: id, Attempt: 1, State: model.DriverRunning, Runs: 1}}})
			}
		}
		return s.each(n, func(i int) model.Command {
			return &model.ReportBatch{Reports: reports[16*i : 16*(i+1)]}
		})
	}},
	// A RUNNING driver is killed.
	{model.CmdKillDriver, 1000, func(s *benchFSM, n int) [][]byte {
		ids := s.runDrivers(n)
		return s.each(n, func(i int) model.Command {
			return &model.KillDriver{DriverID: ids[i], Reason: "killed by bench", Time: s.tick()}
		})
	}},
	// A worker with its share of the RUNNING drivers is lost; they are
	// relaunched. The next prepare puts them back.
	{model.CmdWorkerLost, 10, func(s *benchFSM, n int) [][]byte {
		s.repair()
		return s.each(min(n, len(s.workers)), func(int) model.Command {
			return &model.WorkerLost{WorkerID: s.turn(), Reason: "gossip: worker dead", Time: s.tick()}
		})
	}},
	{model.CmdDecommissionWorker, 50, func(s *benchFSM, n int) [][]byte {
		s.repair()
		return s.each(min(n, len(s.workers)), func(int) model.Command {
			return &model.DecommissionWorker{WorkerID: s.turn(), Reason: "SIGTERM", Time: s.tick()}
		})
	}},
	// A RUNNING driver registers an app.
	{model.CmdRegisterApp, 1000, func(s *benchFSM, n int) [][]byte {
		return s.each(n, func(int) model.Command { return s.registerAppCommand(s.rotate(s.running)) })
	}},
	// A new app gets its first executor.
	{model.CmdPlaceExecutors, 1000, func(s *benchFSM, n int) [][]byte {
		apps := s.startApps(n, nil, 0)
		return s.each(n, func(i int) model.Command {
			return &model.PlaceExecutors{Placements: []model.ExecutorPlacement{{AppID: apps[i], ExecutorID: 0, WorkerID: s.turn()}}, Time: s.tick()}
		})
	}},
	// A starting app asks for a new executor total.
	{model.CmdRequestExecutors, 1000, func(s *benchFSM, n int) [][]byte {
		return s.each(n, func(int) model.Command {
			return &model.RequestExecutors{AppID: s.rotate(s.apps), Total: 2 + s.next.turn%7, Time: s.tick()}
		})
	}},
	// An app with two executors kills one.
	{model.CmdKillExecutors, 1000, func(s *benchFSM, n int) [][]byte {
		apps := s.startApps(n, nil, 2)
		return s.each(n, func(i int) model.Command {
			return &model.KillExecutors{AppID: apps[i], ExecutorIDs: []int{0}, Time: s.tick()}
		})
	}},
	// An app with two executors unregisters.
	{model.CmdEndApp, 1000, func(s *benchFSM, n int) [][]byte {
		apps := s.startApps(n, nil, 2)
		return s.each(n, func(i int) model.Command {
			return &model.EndApp{AppID: apps[i], State: model.AppFinished, Time: s.tick()}
		})
	}},
	// A FINISHED driver and a FINISHED app are dropped.
	{model.CmdPruneCompleted, 1000, func(s *benchFSM, n int) [][]byte {
		ids := s.submitDrivers(n)
		s.report(s.place(ids), model.DriverFinished)
		apps := s.startApps(n, nil, 0)
		for _, a := range apps {
			s.must(&model.EndApp{AppID: a, State: model.AppFinished, Time: s.tick()})
		}
		return s.each(n, func(i int) model.Command {
			return &model.PruneCompleted{DriverIDs: []string{ids[i]}, AppIDs: []string{apps[i]}}
		})
	}},
	// A namespace is created, then updated.
	{model.CmdApplyNamespace, 1000, func(s *benchFSM, n int) [][]byte {
		return s.each(n, func(i int) model.Command {
			s.next.namespace++
			return &model.ApplyNamespace{Namespace: model.Namespace{Name: fmt.Sprintf("ns-%06d", s.next.namespace/2%4000), Quota: model.Quota{Cores: 64 + i},
				Weight: 1, DriverShare: 0.5, PriorityMax: 100}, Time: s.tick()}
		})
	}},
	// An empty namespace is deleted.
	{model.CmdDeleteNamespace, 1000, func(s *benchFSM, n int) [][]byte {
		names := make([]string, n)
		for i := range names {
			s.next.namespace++
			names[i] = fmt.Sprintf("gone-%06d", s.next.namespace)
			s.must(&model.ApplyNamespace{Namespace: model.Namespace{Name: names[i], Weight: 1, DriverShare: 0.5, PriorityMax: 100}, Time: s.tick()})
		}
		return s.each(n, func(i int) model.Command { return &model.DeleteNamespace{Name: names[i], Time: s.tick()} })
	}},
	{model.CmdCreateACLToken, 1000, func(s *benchFSM, n int) [][]byte {
		return s.each(n, func(int) model.Command { return s.tokenCommand() })
	}},
	{model.CmdRevokeACLToken, 1000, func(s *benchFSM, n int) [][]byte {
		accessors := make([]string, n)
		for i := range accessors {
			c := s.tokenCommand()
			s.must(c)
			accessors[i] = c.Token.Accessor
		}
		return s.each(n, func(i int) model.Command { return &model.RevokeACLToken{Accessor: accessors[i], Time: s.tick()} })
	}},
	{model.CmdCreateSchedule, 1000, func(s *benchFSM, n int) [][]byte {
		return s.each(n, func(int) model.Command { return s.scheduleCommand() })
	}},
	{model.CmdDeleteSchedule, 1000, func(s *benchFSM, n int) [][]byte {
		names := s.schedules(n)
		return s.each(n, func(i int) model.Command { return &model.DeleteSchedule{Name: names[i], Time: s.tick()} })
	}},
	{model.CmdSuspendSchedule, 1000, func(s *benchFSM, n int) [][]byte {
		names := s.schedules(n)
		return s.each(n, func(i int) model.Command {
			return &model.SuspendSchedule{Name: names[i], Suspended: true, Time: s.tick()}
		})
	}},
	// A schedule's slot submits its run.
	{model.CmdFireSchedule, 1000, func(s *benchFSM, n int) [][]byte {
		names := s.schedules(n)
		return s.each(n, func(i int) model.Command {
			now := s.tick() + 10_000
			seq := s.next.driver
			s.next.driver++
			return &model.FireSchedule{Name: names[i], Slot: now, DriverID: benchDriverID(seq), Time: now}
		})
	}},
	// A running driver gets a preemption notice.
	{model.CmdPreemptAttempts, 1000, func(s *benchFSM, n int) [][]byte {
		ids := s.runDrivers(n)
		return s.each(n, func(i int) model.Command {
			return &model.PreemptAttempts{Items: []model.Preemption{{DriverID: ids[i], Attempt: 1, By: "etl"}}, Deadline: s.tick() + 30_000, Time: s.tick()}
		})
	}},
}

// BenchmarkApply measures Apply (decoding included) of one command of each
// type on tables of 10,000 drivers (1,000 waiting), 100 workers and 100
// apps. Every command applied is a new one that takes effect.
func BenchmarkApply(b *testing.B) {
	base := baseOf(b, applySizes)
	for _, c := range applyCases {
		b.Run(c.cmd.String(), func(b *testing.B) {
			s := base.open(b)
			b.ReportAllocs()
			b.ResetTimer()
			for done := 0; done < b.N; {
				b.StopTimer()
				cmds := c.prepare(s, min(c.chunk, b.N-done))
				b.StartTimer()
				for _, data := range cmds {
					if why := refusal(s.apply(data)); why != "" {
						b.Fatalf("%s did not take effect: %s", c.cmd, why)
					}
				}
				done += len(cmds)
			}
		})
	}
}

// BenchmarkSnapshot100k measures Snapshot plus Persist into memory of
// tables with 100,000 placed, RUNNING drivers on 1,000 workers, and reports
// the snapshot's size and the two parts apart: Snapshot runs in Raft's FSM
// goroutine and holds up Apply, Persist runs beside it.
func BenchmarkSnapshot100k(b *testing.B) {
	f := restoreBytes(b, baseOf(b, snapshotSizes).data)
	var inSnapshot, inPersist time.Duration
	// One sink for every run, so that after the first Persist measures
	// the FSM's work rather than the growth of the sink's buffer (a real
	// sink is a file).
	var sink benchSink
	for b.Loop() {
		sink.Reset()
		start := time.Now()
		snap, err := f.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		taken := time.Now()
		if err := snap.Persist(&sink); err != nil {
			b.Fatal(err)
		}
		snap.Release()
		inSnapshot += taken.Sub(start)
		inPersist += time.Since(taken)
	}
	b.ReportMetric(float64(sink.Len()), "bytes")
	b.ReportMetric(float64(inSnapshot.Nanoseconds())/float64(b.N), "snapshot-ns/op")
	b.ReportMetric(float64(inPersist.Nanoseconds())/float64(b.N), "persist-ns/op")
}

// BenchmarkRestore100k measures Restore of BenchmarkSnapshot100k's snapshot
// into a new FSM.
func BenchmarkRestore100k(b *testing.B) {
	data := baseOf(b, snapshotSizes).data
	for b.Loop() {
		restoreBytes(b, data)
	}
	b.ReportMetric(float64(len(data)), "bytes")
}

// TestApplyBenchmarksTakeEffect runs every applyCase on small tables and
// checks that each command it makes changes the tables, so the benchmarks
// measure work rather than refusals, and that every command type has one.
func TestApplyBenchmarksTakeEffect(t *testing.T) {
	base := baseOf(t, benchSizes{workers: 4, drivers: 40, waiting: 8, apps: 3})
	covered := map[model.CommandType]bool{}
	for _, c := range applyCases {
		covered[c.cmd] = true
		t.Run(c.cmd.String(), func(t *testing.T) {
			s := base.open(t)
			for range 3 {
				cmds := c.prepare(s, min(c.chunk, 6))
				if len(cmds) == 0 {
					t.Fatal("prepare made no commands")
				}
				for _, d := range s.f.State().WaitingDrivers() {
					if d.State == model.DriverRelaunching {
						t.Fatalf("prepare left %s RELAUNCHING", d.ID)
					}
				}
				for _, data := range cmds {
					if ct, _, err := Decode(data); err != nil || ct != c.cmd {
						t.Fatalf("prepare made a %s (%v), want %s", ct, err, c.cmd)
					}
					before, _ := s.f.State().StateHash()
					if why := refusal(s.apply(data)); why != "" {
						t.Fatalf("refused: %s", why)
					}
					if after, _ := s.f.State().StateHash(); after == before {
						t.Fatal("the command changed nothing")
					}
				}
			}
		})
	}
	for ct := model.CommandType(1); !strings.HasPrefix(ct.String(), "CommandType("); ct++ {
		if !covered[ct] {
			t.Errorf("no Apply benchmark for %s", ct)
		}
	}
}

// tokenCommand makes a new ACL token of the default namespace.
func (s *benchFSM) tokenCommand() *model.CreateACLToken {
	s.next.token++
	sum := sha256.Sum256([]byte(strconv.Itoa(s.next.token)))
	return &model.CreateACLToken{Token: model.ACLToken{Accessor: fmt.Sprintf("acc-%06d", s.next.token), SecretHash: hex.EncodeToString(sum[:]),
		Policy: model.PolicySubmit, Namespaces: []string{model.DefaultNamespace}}, Time: s.tick()}
}
