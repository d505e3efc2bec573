package master

// FuzzHTTPBodies drives the real HTTP handler of a real single-voter master
// with arbitrary request bodies. `go test ./master` runs its seeds (f.Add
// and testdata/fuzz/FuzzHTTPBodies/); `make fuzz-smoke` fuzzes it briefly,
// `make fuzz` for long. go test ./master -run TestWriteHTTPFuzzCorpus
// -update-fuzz-corpus rewrites the committed seed files.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/fsm"
	"github.com/drover-project/drover/internal/strictjson"
	"github.com/drover-project/drover/model"
)

var updateFuzzCorpus = flag.Bool("update-fuzz-corpus", false, "rewrite the seed files in testdata/fuzz")

// The tables every input meets use IDs of a fixed, past second, so that
// seeds can name them and a new driver or app never takes one.
func fuzzDriverID(seq int) string { return fmt.Sprintf("driver-20200101000000-%04d", seq) }
func fuzzAppID(seq int) string    { return fmt.Sprintf("app-20200101000000-%04d", seq) }

// What the {id} of a path names, chosen by the fuzzer's selector byte: the
// rows of fuzzTables, then an unknown and a malformed ID.
var (
	fuzzWorkerTargets = []string{"w1", "w2", "w3", "w9", "-w"}
	fuzzDriverTargets = []string{fuzzDriverID(0), fuzzDriverID(1), fuzzDriverID(2), fuzzDriverID(3), fuzzDriverID(4),
		fuzzDriverID(5), fuzzDriverID(6), fuzzDriverID(7), "driver-20200101000000-9999", "driver-1"}
	fuzzAppTargets = []string{fuzzAppID(0), fuzzAppID(1), fuzzAppID(2), fuzzAppID(3), "app-20200101000000-9999", "app-x-1"}
)

// fuzzEndpoint is one POST endpoint; path makes its path for the n-th
// target.
type fuzzEndpoint struct {
	name string
	path func(n int) string
	// resp is a new value of the type of a 2xx answer.
	resp func() any
}

func fuzzTarget(targets []string, n int) string { return targets[n%len(targets)] }

// fuzzEndpoints are the POST endpoints of master/http.go and master/apps.go.
// The selector byte picks endpoint sel%len and target sel/len.
var fuzzEndpoints = []fuzzEndpoint{
	{"submit", func(int) string { return "/v1/drivers" }, func() any { return new(api.SubmitResponse) }},
	{"register-worker", func(int) string { return "/v1/workers/register" }, func() any { return new(api.RegisterWorkerResponse) }},
	{"heartbeat", func(n int) string { return "/v1/workers/" + fuzzTarget(fuzzWorkerTargets, n) + "/heartbeat" },
		func() any { return new(api.HeartbeatResponse) }},
	{"decommission", func(n int) string { return "/v1/workers/" + fuzzTarget(fuzzWorkerTargets, n) + "/decommission" },
		func() any { return new(api.RegisterWorkerResponse) }},
	{"register-app", func(int) string { return "/v1/apps" }, func() any { return new(api.RegisterAppResponse) }},
	{"request-executors", func(n int) string { return "/v1/apps/" + fuzzTarget(fuzzAppTargets, n) + "/executors" },
		func() any { return new(api.AppStatus) }},
	{"kill-executors", func(n int) string { return "/v1/apps/" + fuzzTarget(fuzzAppTargets, n) + "/executors/kill" },
		func() any { return new(api.AppStatus) }},
	{"unregister-app", func(n int) string { return "/v1/apps/" + fuzzTarget(fuzzAppTargets, n) + "/unregister" },
		func() any { return new(api.AppStatus) }},
	{"kill-driver", func(n int) string { return "/v1/drivers/" + fuzzTarget(fuzzDriverTargets, n) + "/kill" },
		func() any { return new(api.KillResponse) }},
	{"kill-app", func(n int) string { return "/v1/apps/" + fuzzTarget(fuzzAppTargets, n) + "/kill" },
		func() any { return new(api.AppStatus) }},
	{"submit-batch", func(int) string { return api.PathSubmitBatch }, func() any { return new(api.SubmitBatchResponse) }},
}

// fuzzSel is the selector byte for an endpoint (by name) and target.
func fuzzSel(t testing.TB, name string, target int) byte {
	for i, ep := range fuzzEndpoints {
		if ep.name == name {
			sel := target*len(fuzzEndpoints) + i
			if sel > 255 {
				t.Fatalf("target %d of %s does not fit a selector byte", target, name)
			}
			return byte(sel)
		}
	}
	t.Fatalf("no endpoint %s", name)
	return 0
}

// fuzzTables returns a snapshot of the tables every input meets, made by
// applying real commands, and their hash. They are a fixed point of the
// leader's duties (no ALIVE worker has a free core, nothing times out for
// an hour, nothing is beyond retention), so only requests change them:
//
//	w1 ALIVE and full: drivers 0 (RUNNING, supervised) and 6 (RUNNING, its
//	   second run); app 0's executors 0 (RUNNING) and 1 (LAUNCHING)
//	w2 DECOMMISSIONED, still holding driver 4; w3 DEAD, driver 5 was
//	   relaunched from it (RELAUNCHING, attempt 2)
//	drivers 1 FINISHED, 2 KILLED; 3 (64 cores), 7 and 5 wait
//	apps 0 RUNNING (driver 0 attempt 1 run 1), 1 FINISHED, 2 WAITING,
//	   3 WAITING (driver 6 attempt 1 run 2)
func fuzzTables(t testing.TB) ([]byte, string) {
	f := fsm.New()
	var idx uint64
	now := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	apply := func(payload model.Command) {
		data, err := fsm.Encode(payload)
		if err != nil {
			t.Fatal(err)
		}
		idx++
		now++
		if err, ok := f.ApplyCommand(idx, data).(error); ok {
			t.Fatalf("%s %+v: %v", payload.CommandType(), payload, err)
		}
	}
	for i, w := range []struct {
		id    string
		cores int
		mem   int64
	}{{"w1", 4, 4096}, {"w2", 2, 2048}, {"w3", 2, 1024}} {
		apply(&model.RegisterWorker{ID: w.id, Instance: "inst-" + w.id,
			HTTPAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(17401+i)), Cores: w.cores, MemoryMB: w.mem, Time: now})
	}
	for seq, d := range []struct {
		cores     int
		supervise bool
	}{{1, true}, {1, false}, {1, false}, {64, false}, {2, false}, {2, true}, {1, true}, {1, false}} {
		apply(&model.SubmitDriver{ID: fuzzDriverID(seq), Token: fmt.Sprint("tok-", seq), Name: fmt.Sprint("driver ", seq),
			DriverSpec: model.DriverSpec{
				Argv:      []string{"/bin/sleep", "600"},
				Env:       map[string]string{"K": "v"},
				Cores:     d.cores,
				MemoryMB:  128,
				Supervise: d.supervise,
			}, Time: now})
	}
	apply(&model.PlaceDrivers{Time: now, Placements: []model.Placement{
		{DriverID: fuzzDriverID(0), Attempt: 1, WorkerID: "w1"}, {DriverID: fuzzDriverID(1), Attempt: 1, WorkerID: "w1"},
		{DriverID: fuzzDriverID(6), Attempt: 1, WorkerID: "w1"}, {DriverID: fuzzDriverID(4), Attempt: 1, WorkerID: "w2"},
		{DriverID: fuzzDriverID(5), Attempt: 1, WorkerID: "w3"},
	}})
	apply(&model.ReportAttempts{WorkerID: "w1", Time: now, Reports: []model.AttemptReport{
		{DriverID: fuzzDriverID(0), Attempt: 1, State: model.DriverRunning, Runs: 1},
		{DriverID: fuzzDriverID(1), Attempt: 1, State: model.DriverFinished, ExitCode: new(int), Runs: 1},
		{DriverID: fuzzDriverID(6), Attempt: 1, State: model.DriverRunning, Runs: 2},
	}})
	apply(&model.KillDriver{DriverID: fuzzDriverID(2), Time: now})
	apply(&model.ReportAttempts{WorkerID: "w3", Time: now, Reports: []model.AttemptReport{
		{DriverID: fuzzDriverID(5), Attempt: 1, State: model.DriverRunning, Runs: 1},
	}})
	apply(&model.DecommissionWorker{WorkerID: "w2", Reason: "worker shut down", Time: now})
	apply(&model.WorkerLost{WorkerID: "w3", Reason: "worker w3 lost: missing from the gossip pool", Time: now})
	for seq, a := range []struct {
		driver            string
		attempt, run      int
		cores             int
		limit, maxRetries int
	}{{fuzzDriverID(0), 1, 1, 1, 2, 10}, {"", 0, 0, 1, -1, 10}, {"", 0, 0, 2, -1, -1}, {fuzzDriverID(6), 1, 2, 1, 1, 0}} {
		apply(&model.RegisterApp{ID: fuzzAppID(seq), Token: fmt.Sprint("app-tok-", seq), Name: fmt.Sprint("app ", seq),
			DriverID: a.driver, DriverAttempt: a.attempt, DriverRun: a.run, CoresPerExecutor: a.cores, MemoryPerExecutorMB: 256,
			ExecutorLimit: a.limit, Argv: []string{"/bin/executor"}, Env: map[string]string{"E": "1"}, MaxExecutorRetries: a.maxRetries, Time: now})
	}
	apply(&model.PlaceExecutors{Time: now, Placements: []model.ExecutorPlacement{
		{AppID: fuzzAppID(0), ExecutorID: 0, WorkerID: "w1"}, {AppID: fuzzAppID(0), ExecutorID: 1, WorkerID: "w1"},
	}})
	apply(&model.ReportAttempts{WorkerID: "w1", Time: now, Executors: []model.ExecutorReport{
		{AppID: fuzzAppID(0), ExecutorID: 0, State: model.ExecRunning},
	}})
	apply(&model.EndApp{AppID: fuzzAppID(1), State: model.AppFinished, Time: now})

	if w, _ := f.State().Worker("w1"); w.CoresFree() != 0 {
		t.Fatalf("w1 has %d free cores: the scheduler would change the tables", w.CoresFree())
	}
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink fuzzSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	h, err := f.State().StateHash()
	if err != nil {
		t.Fatal(err)
	}
	return sink.Bytes(), h
}

type fuzzSink struct{ bytes.Buffer }

func (s *fuzzSink) ID() string    { return "fuzz" }
func (s *fuzzSink) Cancel() error { return nil }
func (s *fuzzSink) Close() error  { return nil }

// httpFixture is one real master, leading alone, and the tables each input
// starts from.
type httpFixture struct {
	m        *Master
	tables   []byte
	baseHash string
}

// startHTTPFixture starts a single-voter master on 127.0.0.1 and installs
// fuzzTables through Raft (a user snapshot restore, as an operator restoring
// a backup would).
func startHTTPFixture(f testing.TB) *httpFixture {
	cfg := singleConfig(f)
	// No worker or app of fuzzTables times out while a run lasts.
	cfg.WorkerTimeout, cfg.AppTimeout = 24*time.Hour, 24*time.Hour
	// The fuzzed bodies register workers that never gossip.
	cfg.RegisterWithoutGossip = true
	m, err := New(cfg)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = m.Close() })
	waitReady(f, m)
	fx := &httpFixture{m: m}
	fx.tables, fx.baseHash = fuzzTables(f)
	fx.reset(f)
	return fx
}

func (fx *httpFixture) hash(t testing.TB) string {
	h, err := fx.m.fsm.State().StateHash()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// reset brings the master's tables back to fuzzTables when a request
// changed them, so that every input meets the same tables.
func (fx *httpFixture) reset(t testing.TB) {
	for try := 0; fx.hash(t) != fx.baseHash; try++ {
		if try == 3 {
			t.Fatal("the tables differ from fuzzTables after three restores")
		}
		meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Size: int64(len(fx.tables))}
		if err := fx.m.raft.Restore(meta, bytes.NewReader(fx.tables), 10*time.Second); err != nil {
			t.Fatalf("restore fuzzTables: %v", err)
		}
	}
}

// fuzzRequestWait bounds how long a request may be held: a heartbeat whose
// worker already runs what it should is held until its context ends (up
// to 2s otherwise).
const fuzzRequestWait = 25 * time.Millisecond

// serve runs one request through the master's handler (the one its HTTP
// server runs), failing if it does not return within 10s.
func (fx *httpFixture) serve(t testing.TB, path string, body []byte) *httptest.ResponseRecorder {
	ctx, cancel := context.WithTimeout(context.Background(), fuzzRequestWait)
	defer cancel()
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	// An open master answers to its own address only.
	req.Host = fx.m.cfg.httpAddr()
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fx.m.server.Handler.ServeHTTP(rec, req)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("POST %s with body %q: no answer within 10s", path, body)
	}
	return rec
}

// settle waits, after a request that changed the tables, for the leader's
// own duties (scheduler, retention) to react: until no entry is applied
// for 3ms, at most 100ms. A duty that crashes on what the request made
// then crashes the process while this input runs, and the fuzzing engine
// keeps this input, not a later one, as the failure.
func (fx *httpFixture) settle() {
	deadline := time.Now().Add(100 * time.Millisecond)
	last, quiet := fx.m.fsm.Index(), time.Now()
	for time.Since(quiet) < 3*time.Millisecond && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
		if i := fx.m.fsm.Index(); i != last {
			last, quiet = i, time.Now()
		}
	}
}

// backgroundCommands are what the leader commits on its own (scheduler,
// retention, worker liveness); no request of fuzzEndpoints makes them.
var backgroundCommands = map[model.CommandType]bool{
	model.CmdPlaceDrivers: true, model.CmdPlaceExecutors: true, model.CmdPruneCompleted: true, model.CmdWorkerLost: true,
}

// committedBetween lists the types of the commands in the Raft log after
// index from up to index to.
func (fx *httpFixture) committedBetween(t *testing.T, from, to uint64) []model.CommandType {
	var out []model.CommandType
	for i := from + 1; i <= to; i++ {
		var l raft.Log
		if err := fx.m.store.GetLog(i, &l); err != nil {
			if errors.Is(err, raft.ErrLogNotFound) {
				continue
			}
			t.Fatalf("read log entry %d: %v", i, err)
		}
		if l.Type != raft.LogCommand {
			continue
		}
		ct, _, err := fsm.Decode(l.Data)
		if err != nil {
			ct = 0
		}
		out = append(out, ct)
	}
	return out
}

// fuzzHTTPSeeds are hand-made inputs: the bad requests of
// tests/systest/badinput_test.go and a few more, beside the well-formed bodies
// in testdata/fuzz/FuzzHTTPBodies.
func fuzzHTTPSeeds(t testing.TB) []struct {
	sel  byte
	body string
} {
	valid := `{"token":"t","argv":["true"],"cores":1,"memory_mb":64}`
	type seed = struct {
		sel  byte
		body string
	}
	submit := fuzzSel(t, "submit", 0)
	register := fuzzSel(t, "register-worker", 0)
	return []seed{
		{submit, `{"token":`},
		{submit, valid + `{}`},
		{submit, `{"token":"t","argv":["true"],"cores":1,"memory_mb":64,"gpus":1}`},
		{submit, `{"token":"t","argv":["true"],"cores":0,"memory_mb":64}`},
		{submit, `{"token":"t","argv":["true"],"cores":-2,"memory_mb":64}`},
		{submit, `{"token":"t","argv":["true"],"cores":1,"memory_mb":0}`},
		{submit, `{"token":"t","argv":["true"],"cores":1,"memory_mb":-64}`},
		{submit, `{"token":"t","argv":[],"cores":1,"memory_mb":64}`},
		{submit, `{"token":"t","argv":[""],"cores":1,"memory_mb":64}`},
		{submit, `{"token":"t","argv":["true"],"env":{"A B":"1"},"cores":1,"memory_mb":64}`},
		{submit, `{"token":"t","argv":["true"],"env":{"DROVER_ATTEMPT":"9"},"cores":1,"memory_mb":64}`},
		{submit, `{"argv":["true"],"cores":1,"memory_mb":64}`},
		{submit, `{"token":"t","argv":"true","cores":1,"memory_mb":64}`},
		{submit, `{"token":"` + strings.Repeat("x", api.MaxBodyBytes) + `"}`},
		{submit, `{"token":"tok-0","argv":["true"],"cores":1,"memory_mb":64}`},
		{submit, `{"token":"t","name":"a\u0007b","argv":["true"],"cores":1,"memory_mb":64}`},
		{submit, ``},
		{register, `{"id":"../x","http_addr":"127.0.0.1:1","cores":1,"memory_mb":1}`},
		{register, `{"id":"w9","http_addr":"127.0.0.1:1","cores":0,"memory_mb":1}`},
		{register, `{"id":"w9","http_addr":"nowhere","cores":1,"memory_mb":1}`},
		{register, `{"id":"w1","instance":"other","http_addr":"127.0.0.1:1","cores":4,"memory_mb":4096}`},
		{fuzzSel(t, "heartbeat", 0), `{"instance":"inst-w1","reports":[{"driver_id":"` + fuzzDriverID(0) + `","attempt":1,"state":"FINISHED","exit_code":0}],"running":[]}`},
		{fuzzSel(t, "heartbeat", 0), `{"instance":"inst-w1","running":[{"driver_id":"` + fuzzDriverID(0) + `","attempt":1},{"driver_id":"` + fuzzDriverID(6) + `","attempt":1}],` +
			`"running_executors":[{"app_id":"` + fuzzAppID(0) + `","executor_id":0},{"app_id":"` + fuzzAppID(0) + `","executor_id":1}],"wait_index":1}`},
		{fuzzSel(t, "heartbeat", 3), `{"instance":"","running":[]}`},
		{fuzzSel(t, "decommission", 1), `{"instance":"inst-w2","reason":"` + strings.Repeat("r", 300) + `"}`},
		{fuzzSel(t, "decommission", 3), `{"instance":""}`},
		{fuzzSel(t, "register-app", 0), `{"token":"a","driver_id":"driver-1","cores_per_executor":1,"memory_per_executor_mb":1,"argv":["x"]}`},
		{fuzzSel(t, "register-app", 0), `{"token":"a","executors":-1,"cores_per_executor":1,"memory_per_executor_mb":1,"argv":["x"]}`},
		{fuzzSel(t, "request-executors", 0), `{"total":-1}`},
		{fuzzSel(t, "kill-executors", 0), `{"executor_ids":[]}`},
		{fuzzSel(t, "kill-executors", 0), `{"executor_ids":[0,0]}`},
		{fuzzSel(t, "unregister-app", 0), `{"state":"KILLED"}`},
		{fuzzSel(t, "unregister-app", 1), `{"state":"FAILED"}`},
		{fuzzSel(t, "kill-driver", 1), ``},
		{fuzzSel(t, "kill-driver", 0), `{}`},
		{fuzzSel(t, "kill-driver", 9), ``},
		{fuzzSel(t, "kill-app", 4), ``},
		{fuzzSel(t, "kill-app", 0), `x`},
		{fuzzSel(t, "submit-batch", 0), `{"submissions":[]}`},
		{fuzzSel(t, "submit-batch", 0), `{"submissions":[` + valid + `,{"token":"t"},` + valid + `]}`},
		{fuzzSel(t, "submit-batch", 0), `{"submissions":[` + valid + `]}{}`},
		{fuzzSel(t, "submit-batch", 0), `[` + valid + `]`},
		{fuzzSel(t, "submit-batch", 0), `{"submissions":null}`},
	}
}

// FuzzHTTPBodies posts an arbitrary body to one of the POST endpoints of a
// real leading master, the endpoint and the {id} of its path picked by sel,
// the tables reset to fuzzTables before each input. Whatever the body: an
// answer within 10s; never a 5xx but 503; every non-2xx answer a one-line
// JSON api.Error; every 2xx answer the endpoint's JSON type; and a non-2xx
// answer (but 503, whose outcome the API leaves unknown) changes no table.
func FuzzHTTPBodies(f *testing.F) {
	for _, s := range fuzzHTTPSeeds(f) {
		f.Add(s.sel, []byte(s.body))
	}
	fx := startHTTPFixture(f)
	f.Fuzz(func(t *testing.T, sel byte, body []byte) {
		fx.reset(t)
		ep := fuzzEndpoints[int(sel)%len(fuzzEndpoints)]
		path := ep.path(int(sel) / len(fuzzEndpoints))

		before := fx.m.fsm.Index()
		start := fx.hash(t)
		rec := fx.serve(t, path, body)
		after := fx.hash(t)
		last := fx.m.fsm.Index()

		status, resp := rec.Code, rec.Body.Bytes()
		if status >= 500 && status != http.StatusServiceUnavailable {
			t.Fatalf("POST %s with body %q: %d %s", path, body, status, resp)
		}
		if status >= 200 && status < 300 {
			if err := strictjson.Decode(bytes.NewReader(resp), ep.resp()); err != nil {
				t.Fatalf("POST %s with body %q: %d with a body that is not a %T: %v: %s", path, body, status, ep.resp(), err, resp)
			}
			if after != start {
				fx.settle()
			}
			return
		}
		var e api.Error
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Fatalf("POST %s with body %q: %d with Content-Type %q: %s", path, body, status, ct, resp)
		}
		if err := strictjson.Decode(bytes.NewReader(resp), &e); err != nil || e.Error == "" || strings.ContainsAny(e.Error, "\r\n") {
			t.Fatalf("POST %s with body %q: %d with %q, want a one-line api.Error (%v)", path, body, status, resp, err)
		}
		if status == http.StatusServiceUnavailable || after == start {
			return
		}
		// The tables changed: fail unless the leader itself committed
		// something meanwhile (it should not: fuzzTables is a fixed point
		// of its duties), which leaves the outcome unknown.
		cmds := fx.committedBetween(t, before, last)
		for _, ct := range cmds {
			if backgroundCommands[ct] {
				t.Logf("POST %s: %d, and the leader committed %v meanwhile: tables not compared", path, status, cmds)
				return
			}
		}
		t.Fatalf("POST %s with body %q: %d %s, yet the tables changed (entries %v)", path, body, status, resp, cmds)
	})
}

// httpSeed is a well-formed request about the rows of fuzzTables, as the
// client and the worker send them, and the status it must get.
type httpSeed struct {
	name, endpoint string
	target         int
	body           any
	want           int
}

func (s httpSeed) encode(t testing.TB) (byte, []byte) {
	var body []byte
	if s.body != nil {
		var err error
		if body, err = json.Marshal(s.body); err != nil {
			t.Fatal(err)
		}
	}
	return fuzzSel(t, s.endpoint, s.target), body
}

// httpSeeds are the committed seeds of FuzzHTTPBodies (see
// TestWriteHTTPFuzzCorpus).
func httpSeeds() []httpSeed {
	exit0, exit1 := 0, 1
	return []httpSeed{
		{"submit", "submit", 0, api.SubmitRequest{Token: "6f1c2a9e0b7d4c3a", Name: "wordcount", DriverSpec: model.DriverSpec{Argv: []string{"/usr/local/bin/wordcount", "--shards", "2"}, Env: map[string]string{"LANG": "C"}, Cores: 1, MemoryMB: 512, Supervise: true}}, 200},
		{"submit-retry", "submit", 0, api.SubmitRequest{Token: "tok-3", DriverSpec: model.DriverSpec{Argv: []string{"/bin/sleep", "600"}, Cores: 64, MemoryMB: 128}}, 200},
		{"register-worker-new", "register-worker", 0, api.RegisterWorkerRequest{ID: "w4", Instance: "inst-w4", HTTPAddr: "127.0.0.1:17404", Cores: 8, MemoryMB: 8192}, 200},
		{"register-worker-same", "register-worker", 0, api.RegisterWorkerRequest{ID: "w1", Instance: "inst-w1", HTTPAddr: "127.0.0.1:17401", Cores: 4, MemoryMB: 4096}, 200},
		{"register-worker-taken", "register-worker", 0, api.RegisterWorkerRequest{ID: "w1", Instance: "inst-other", HTTPAddr: "127.0.0.1:17405", Cores: 4, MemoryMB: 4096}, 409},
		{"register-worker-dead", "register-worker", 0, api.RegisterWorkerRequest{ID: "w3", Instance: "inst-w3b", HTTPAddr: "127.0.0.1:17403", Cores: 2, MemoryMB: 1024}, 200},
		{"heartbeat-reports", "heartbeat", 0, api.HeartbeatRequest{Instance: "inst-w1",
			Reports: []model.AttemptReport{{DriverID: fuzzDriverID(0), Attempt: 1, State: model.DriverKilled, ExitCode: &exit1, Runs: 1, Reason: "killed by signal 9"},
				{DriverID: fuzzDriverID(6), Attempt: 1, State: model.DriverRunning, Runs: 3}},
			ExecutorReports: []model.ExecutorReport{{AppID: fuzzAppID(0), ExecutorID: 1, State: model.ExecRunning},
				{AppID: fuzzAppID(0), ExecutorID: 0, State: model.ExecExited, ExitCode: &exit0}},
			Running:          []api.AttemptRef{{DriverID: fuzzDriverID(6), Attempt: 1}},
			RunningExecutors: []api.ExecutorRef{{AppID: fuzzAppID(0), ExecutorID: 1}}}, 200},
		{"heartbeat-idle", "heartbeat", 0, api.HeartbeatRequest{Instance: "inst-w1",
			Running:          []api.AttemptRef{{DriverID: fuzzDriverID(0), Attempt: 1}, {DriverID: fuzzDriverID(6), Attempt: 1}},
			RunningExecutors: []api.ExecutorRef{{AppID: fuzzAppID(0), ExecutorID: 0}, {AppID: fuzzAppID(0), ExecutorID: 1}}, WaitIndex: 40}, 200},
		{"heartbeat-decommissioned", "heartbeat", 1, api.HeartbeatRequest{Instance: "inst-w2",
			Reports: []model.AttemptReport{{DriverID: fuzzDriverID(4), Attempt: 1, State: model.DriverKilled, Reason: "worker shut down"}}, Running: []api.AttemptRef{}}, 200},
		{"heartbeat-dead", "heartbeat", 2, api.HeartbeatRequest{Instance: "inst-w3",
			Reports: []model.AttemptReport{{DriverID: fuzzDriverID(5), Attempt: 1, State: model.DriverFailed, ExitCode: &exit1}}, Running: []api.AttemptRef{}}, 200},
		{"decommission", "decommission", 0, api.DecommissionWorkerRequest{Instance: "inst-w1", Reason: "worker shut down"}, 200},
		{"decommission-unknown", "decommission", 3, api.DecommissionWorkerRequest{Instance: "inst-w9"}, 404},
		{"register-app", "register-app", 0, api.RegisterAppRequest{Token: "9a8b7c6d5e4f", Name: "wordcount", DriverID: fuzzDriverID(6), DriverAttempt: 1, DriverRun: 2,
			MaxCores: 4, CoresPerExecutor: 1, MemoryPerExecutorMB: 256, Executors: 2, Argv: []string{"/usr/local/bin/wordcount", "executor"}, Env: map[string]string{"SHARD": "0"}}, 200},
		{"register-app-stale", "register-app", 0, api.RegisterAppRequest{Token: "0f0e0d0c", DriverID: fuzzDriverID(6), DriverAttempt: 1, DriverRun: 1,
			CoresPerExecutor: 1, MemoryPerExecutorMB: 256, Argv: []string{"x"}}, 409},
		{"request-executors", "request-executors", 0, api.RequestExecutorsRequest{Total: 3}, 200},
		{"request-executors-waiting", "request-executors", 2, api.RequestExecutorsRequest{Total: 0}, 200},
		{"kill-executors", "kill-executors", 0, api.KillExecutorsRequest{ExecutorIDs: []int{1}}, 200},
		{"kill-executors-unknown", "kill-executors", 0, api.KillExecutorsRequest{ExecutorIDs: []int{0, 7}}, 404},
		{"unregister-app", "unregister-app", 0, api.UnregisterAppRequest{State: model.AppFinished, Message: "done"}, 200},
		{"unregister-app-ended", "unregister-app", 1, api.UnregisterAppRequest{State: model.AppFailed}, 409},
		{"kill-driver-running", "kill-driver", 0, nil, 200},
		{"kill-driver-waiting", "kill-driver", 3, nil, 200},
		{"kill-driver-finished", "kill-driver", 1, nil, 409},
		{"kill-driver-unknown", "kill-driver", 8, nil, 404},
		{"kill-app-running", "kill-app", 0, nil, 200},
		{"kill-app-finished", "kill-app", 1, nil, 409},
		{"kill-app-malformed", "kill-app", 5, nil, 400},
		{"submit-batch", "submit-batch", 0, api.SubmitBatchRequest{Submissions: []api.SubmitRequest{
			{Token: "5e4d3c2b1a09", Name: "etl-2026-12-01", DriverSpec: model.DriverSpec{Argv: []string{"/usr/local/bin/etl", "--day", "2026-12-01"}, Cores: 1, MemoryMB: 512}},
			{Token: "tok-3", DriverSpec: model.DriverSpec{Argv: []string{"/bin/sleep", "600"}, Cores: 64, MemoryMB: 128}},
			{Token: "5e4d3c2b1a0a", DriverSpec: model.DriverSpec{Argv: []string{"/usr/local/bin/etl"}, Cores: 0, MemoryMB: 512}},
		}}, 200},
		{"submit-batch-empty", "submit-batch", 0, api.SubmitBatchRequest{}, 400},
	}
}

// TestFuzzHTTPFixture checks that the seeds get the answers they were
// written for, so the fuzzer starts from requests that reach every branch
// they name (and the tables are what fuzzTables says).
func TestFuzzHTTPFixture(t *testing.T) {
	fx := startHTTPFixture(t)
	for _, s := range httpSeeds() {
		fx.reset(t)
		sel, body := s.encode(t)
		ep := fuzzEndpoints[int(sel)%len(fuzzEndpoints)]
		path := ep.path(int(sel) / len(fuzzEndpoints))
		rec := fx.serve(t, path, body)
		if rec.Code != s.want {
			t.Errorf("%s: POST %s: %d %s, want %d", s.name, path, rec.Code, rec.Body, s.want)
		}
	}
}

// TestWriteHTTPFuzzCorpus rewrites testdata/fuzz/FuzzHTTPBodies from
// httpSeeds when run with -update-fuzz-corpus.
func TestWriteHTTPFuzzCorpus(t *testing.T) {
	if !*updateFuzzCorpus {
		t.Skip("run with -update-fuzz-corpus to rewrite testdata/fuzz")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzHTTPBodies")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, s := range httpSeeds() {
		sel, body := s.encode(t)
		content := fmt.Sprintf("go test fuzz v1\nbyte(%q)\n[]byte(%q)\n", sel, body)
		if err := os.WriteFile(filepath.Join(dir, s.name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
