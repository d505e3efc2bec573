package systest

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/testcluster"
)

// executorScript is the body of a test executor run by /bin/sh: it records
// "start WORKER PID CORES" in $PROBE/$DROVER_APP_ID-$DROVER_EXECUTOR_ID,
// then runs $BODY.
const executorScript = `echo "start $DROVER_WORKER_ID $$ $DROVER_EXECUTOR_CORES" >> "$PROBE/$DROVER_APP_ID-$DROVER_EXECUTOR_ID"
echo "executor $DROVER_EXECUTOR_ID of $DROVER_APP_ID"
eval "$BODY"`

func (p *probe) appSpec(body string, maxCores int) client.AppSpec {
	return client.AppSpec{
		Name:                "probe",
		MaxCores:            maxCores,
		CoresPerExecutor:    1,
		MemoryPerExecutorMB: 256,
		Argv:                []string{"/bin/sh", "-c", executorScript},
		Env:                 map[string]string{"PROBE": p.dir, "BODY": body},
	}
}

// running waits until n executors of the app have started and returns
// them by ID.
func running(t *testing.T, a *client.App, n int) map[int]model.Executor {
	t.Helper()
	out := map[int]model.Executor{}
	for len(out) < n {
		ev := nextEvent(t, a, 30*time.Second, "executor RUNNING", kind(client.ExecutorRunning))
		out[ev.Executor.ID] = ev.Executor
	}
	return out
}

// TestExecutorsSpreadRunAndAreReplacedWhenTheirWorkerIsLost: an app's
// executors land one per worker with their environment; killing a worker's
// whole process group makes its executor LOST (no retry counted) and a
// replacement with the next ID starts on another worker.
func TestExecutorsSpreadRunAndAreReplacedWhenTheirWorkerIsLost(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Workers: 3, WorkerCores: 2})
	p := newProbe(t)
	a := registerApp(t, c, p.appSpec("exec sleep 600", 3))
	execs := running(t, a, 3)
	workers := map[string]int{}
	for id, e := range execs {
		workers[e.WorkerID]++
		// RUNNING means the program started; its first line follows.
		name := a.ID() + "-" + strconv.Itoa(id)
		waitFor(t, 10*time.Second, "executor "+strconv.Itoa(id)+" records its start", func() bool { return len(p.lines(name)) > 0 })
		if l := p.lines(name); len(l) != 1 || l[0][1] != e.WorkerID || l[0][3] != "1" {
			t.Errorf("executor %d recorded %v; want one start on %s with 1 core", id, l, e.WorkerID)
		}
	}
	if len(workers) != 3 {
		t.Fatalf("executors on workers %v: spread out should use all 3", workers)
	}
	if out, errOut, code := runDrover(t, nil, "client", "--masters", c.MasterAddrs, "logs", a.ID(), "--executor", "2"); code != 0 ||
		out != "executor 2 of "+a.ID()+"\n" {
		t.Errorf("logs --executor 2: exit %d, %q %q", code, out, errOut)
	}

	victim := execs[1].WorkerID
	c.Worker(victim).KillGroup()
	lost := nextEvent(t, a, 30*time.Second, "executor LOST", kind(client.ExecutorLost))
	if lost.Executor.ID != 1 || lost.Executor.WorkerID != victim {
		t.Fatalf("lost %+v; want executor 1 on %s", lost.Executor, victim)
	}
	repl := nextEvent(t, a, 30*time.Second, "replacement RUNNING", kind(client.ExecutorRunning))
	if repl.Executor.ID != 3 || repl.Executor.WorkerID == victim {
		t.Fatalf("replacement %+v; want executor 3 on a live worker", repl.Executor)
	}
	s := appStatus(t, c, a.ID())
	if s.State != model.AppRunning || s.RetryCount != 0 || s.CoresGranted != 3 {
		t.Errorf("app %s, %d retries, %d cores; want RUNNING, 0, 3", s.State, s.RetryCount, s.CoresGranted)
	}
}

// TestAppFailsAfterMaxExecutorRetries: with --max-executor-retries 2, an
// app whose executors all exit non-zero FAILS at the third failure in a
// row, and no further executor is launched.
func TestAppFailsAfterMaxExecutorRetries(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Workers: 1, MasterArgs: []string{"--max-executor-retries", "2"}})
	p := newProbe(t)
	spec := p.appSpec("exit 3", 1)
	a := registerApp(t, c, spec)
	select {
	case <-a.Done():
	case <-time.After(60 * time.Second):
		t.Fatal("the app did not end")
	}
	s := a.Status()
	if s.State != model.AppFailed || len(s.Executors) != 3 || !strings.Contains(s.Message, "3 executors failed in a row") {
		t.Fatalf("app %s with %d executors, message %q; want FAILED after 3 executors", s.State, len(s.Executors), s.Message)
	}
	for _, e := range s.Executors {
		if e.State != model.ExecFailed || e.ExitCode == nil || *e.ExitCode != 3 {
			exit := "-"
			if e.ExitCode != nil {
				exit = strconv.Itoa(*e.ExitCode)
			}
			t.Errorf("executor %d: %s exit %s; want FAILED exit 3", e.ID, e.State, exit)
		}
	}
}

// TestAppEndsWithItsDriver: an app registered by a driver attempt ends
// with it, and its executors are stopped: KILLED when the driver is killed,
// FINISHED when it finishes.
func TestAppEndsWithItsDriver(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Workers: 2})
	p := newProbe(t)
	for _, tc := range []struct {
		name  string
		end   func(driverID string)
		state model.ApplicationState
	}{
		{"killed", func(id string) {
			if err := c.Client().Kill(context.Background(), id); err != nil {
				t.Fatal(err)
			}
		}, model.AppKilled},
		{"finished", func(id string) {
			if err := os.WriteFile(filepath.Join(p.dir, "go-"+id), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, model.AppFinished},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := submit(t, c, p.request(`while [ ! -e "$PROBE/go-$DROVER_DRIVER_ID" ]; do sleep 0.05; done`, false))
			c.WaitDriver(id, 20*time.Second, "RUNNING", isState(model.DriverRunning))
			spec := p.appSpec("exec sleep 600", 2)
			spec.DriverID, spec.DriverAttempt = id, 1
			a := registerApp(t, c, spec)
			execs := running(t, a, 2)
			// RUNNING means the program started; its first line, with the
			// pid checked below, follows, and an end before it would
			// leave no line to read.
			for eid := range execs {
				name := a.ID() + "-" + strconv.Itoa(eid)
				waitFor(t, 10*time.Second, "executor "+strconv.Itoa(eid)+" records its start", func() bool { return len(p.lines(name)) > 0 })
			}
			tc.end(id)
			select {
			case <-a.Done():
			case <-time.After(30 * time.Second):
				t.Fatal("the app did not end with its driver")
			}
			if s := a.Status(); s.State != tc.state {
				t.Fatalf("app %s (%s); want %s", s.State, s.Message, tc.state)
			}
			for eid := range execs {
				pid := p.lines(a.ID() + "-" + strconv.Itoa(eid))[0][2]
				waitFor(t, 20*time.Second, "executor "+pid+" stopped", func() bool { return !processAlive(pid) })
			}
		})
	}
}

func processAlive(pid string) bool {
	n, err := strconv.Atoi(pid)
	return err == nil && syscall.Kill(n, 0) == nil
}

// TestAppSurvivesLeaderKill: the leader is SIGKILLed while an app runs.
// The app keeps its ID and its executors (none lost or restarted), its
// client follows the new leader, and asks for one more executor there.
func TestAppSurvivesLeaderKill(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Workers: 2})
	p := newProbe(t)
	spec := p.appSpec("exec sleep 600", 0)
	spec.Executors = 2
	a := registerApp(t, c, spec)
	running(t, a, 2)
	old, err := c.Leader(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	old.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.RequestExecutors(ctx, 3); err != nil {
		t.Fatalf("request executors after failover: %v", err)
	}
	ev := nextEvent(t, a, 30*time.Second, "third executor RUNNING", func(ev client.ExecutorEvent) bool {
		if ev.Kind == client.ExecutorLost || ev.Kind == client.ExecutorExited {
			t.Fatalf("executor %d %s during failover", ev.Executor.ID, ev.Kind)
		}
		return ev.Kind == client.ExecutorRunning
	})
	if ev.Executor.ID != 2 {
		t.Errorf("new executor has ID %d, want 2", ev.Executor.ID)
	}
	for id := 0; id < 3; id++ {
		if n := len(p.lines(a.ID() + "-" + strconv.Itoa(id))); n != 1 {
			t.Errorf("executor %d started %d times, want once", id, n)
		}
	}
	if s := appStatus(t, c, a.ID()); s.State != model.AppRunning || s.CoresGranted != 3 {
		t.Errorf("after failover: %s with %d cores; want RUNNING with 3", s.State, s.CoresGranted)
	}
}

// TestRetention: with --retained-drivers 2 and --retained-apps 1, only the
// newest finished drivers and apps stay in the tables; live ones stay.
func TestRetention(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Workers: 1,
		MasterArgs: []string{"--retained-drivers", "2", "--retained-apps", "1"}})
	p := newProbe(t)
	live := submit(t, c, p.request("sleep 600", false))
	var done []string
	for i := 0; i < 4; i++ {
		id := submit(t, c, p.request("true", false))
		c.WaitDriver(id, 20*time.Second, "FINISHED", isState(model.DriverFinished))
		done = append(done, id)
	}
	var apps []string
	for i := 0; i < 3; i++ {
		a := registerApp(t, c, p.appSpec("exec sleep 600", 1))
		if err := a.Unregister(context.Background(), model.AppFinished, ""); err != nil {
			t.Fatal(err)
		}
		apps = append(apps, a.ID())
	}
	waitFor(t, 10*time.Second, "retention", func() bool {
		ds, err := c.Client().Drivers(context.Background())
		as, err2 := c.Client().Apps(context.Background())
		return err == nil && err2 == nil && len(ds) == 3 && len(as) == 1
	})
	ds, _ := c.Client().Drivers(context.Background())
	got := []string{ds[0].ID, ds[1].ID, ds[2].ID}
	if want := []string{live, done[2], done[3]}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("drivers kept %v, want %v", got, want)
	}
	if as, _ := c.Client().Apps(context.Background()); as[0].ID != apps[2] {
		t.Errorf("app kept %s, want the newest %s", as[0].ID, apps[2])
	}
}

// TestAppBadInput: refused registrations and commands answer 4xx with one
// line and change nothing; an app asking more memory per executor than any
// worker has waits and says why.
func TestAppBadInput(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Workers: 1, WorkerMemory: "1g"})
	p := newProbe(t)
	big := p.appSpec("exec sleep 600", 0)
	big.MemoryPerExecutorMB = 4096
	a := registerApp(t, c, big)
	waitFor(t, 10*time.Second, "waiting reason", func() bool {
		return strings.Contains(appStatus(t, c, a.ID()).Message, api.ReasonUnplaceable)
	})

	leader, err := c.Leader(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	hash := func() string {
		s, err := testcluster.State(context.Background(), leader)
		if err != nil {
			t.Fatal(err)
		}
		return s.StateHash
	}
	before := hash()
	spec := `{"token":"t1","cores_per_executor":1,"memory_per_executor_mb":256,"argv":["/bin/true"]}`
	for _, tc := range []struct {
		method, path, body string
		status             int
	}{
		{"POST", "/v1/apps", `{"token":"t1","cores_per_executor":0,"memory_per_executor_mb":256,"argv":["/bin/true"]}`, 400},
		{"POST", "/v1/apps", `{"token":"t1","cores_per_executor":1,"memory_per_executor_mb":-5,"argv":["/bin/true"]}`, 400},
		{"POST", "/v1/apps", `{"token":"t1","cores_per_executor":1,"memory_per_executor_mb":256,"argv":[]}`, 400},
		{"POST", "/v1/apps", `{"token":"t1","cores_per_executor":1,"memory_per_executor_mb":256,"argv":["/bin/true"],"max_cores":-1}`, 400},
		{"POST", "/v1/apps", `{"token":"t1","cores_per_executor":1,"memory_per_executor_mb":256,"argv":["/bin/true"],"executors":-1}`, 400},
		{"POST", "/v1/apps", `{"token":"t1","cores_per_executor":1,"memory_per_executor_mb":256,"argv":["/bin/true"],"bogus":1}`, 400},
		{"POST", "/v1/apps", `{"token":"t1","cores_per_executor":1,"memory_per_executor_mb":256,"argv":["/bin/true"],"driver_id":"driver-20261129120000-9999","driver_attempt":1}`, 404},
		{"POST", "/v1/apps", `{"cores_per_executor":1,"memory_per_executor_mb":256,"argv":["/bin/true"]}`, 400},
		{"POST", "/v1/apps", spec[:20], 400},
		{"GET", "/v1/apps/app-20261129120000-9999", "", 404},
		{"GET", "/v1/apps/nope", "", 400},
		{"POST", "/v1/apps/app-20261129120000-9999/kill", "", 404},
		{"POST", "/v1/apps/" + a.ID() + "/executors", `{"total":-1}`, 400},
		{"POST", "/v1/apps/" + a.ID() + "/executors/kill", `{"executor_ids":[7]}`, 404},
		{"POST", "/v1/apps/" + a.ID() + "/executors/kill", `{"executor_ids":[]}`, 400},
		{"POST", "/v1/apps/" + a.ID() + "/unregister", `{"state":"RUNNING"}`, 400},
		{"GET", "/v1/apps/" + a.ID() + "/executors/0/logs", "", 404},
		{"POST", "/v1/apps/" + a.ID() + "/kill", "garbage", 400},
		{"POST", "/v1/apps", `{"token":"t1","cores_per_executor":1,"memory_per_executor_mb":256,"argv":["/bin/true"],"driver_attempt":3}`, 400},
		{"POST", "/v1/apps", `{"token":"t1","name":"a\u001b[31mred","cores_per_executor":1,"memory_per_executor_mb":256,"argv":["/bin/true"]}`, 400},
		{"POST", "/v1/drivers", `{"token":"t2","name":"two\nlines","cores":1,"memory_mb":256,"argv":["/bin/true"]}`, 400},
	} {
		req, _ := http.NewRequest(tc.method, "http://"+leader.HTTP+tc.path, bytes.NewReader([]byte(tc.body)))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e api.Error
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != tc.status || e.Error == "" || strings.Contains(e.Error, "\n") {
			t.Errorf("%s %s %s: %d %q; want %d with one line", tc.method, tc.path, tc.body, resp.StatusCode, e.Error, tc.status)
		}
	}
	if after := hash(); after != before {
		t.Error("refused requests changed the tables")
	}
}

// TestAppEndsWhenItsClientStopsWatching: with --app-timeout 2s, an app
// whose client stops watching (Close) is ended FAILED and its executors
// stop; an app still watched in the meantime lives on.
func TestAppEndsWhenItsClientStopsWatching(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Workers: 1, MasterArgs: []string{"--app-timeout", "2s"}})
	p := newProbe(t)
	gone := registerApp(t, c, p.appSpec("exec sleep 600", 1))
	kept := registerApp(t, c, p.appSpec("exec sleep 600", 1))
	running(t, gone, 1)
	running(t, kept, 1)
	pid := p.lines(gone.ID() + "-0")[0][2]
	gone.Close()
	waitFor(t, 20*time.Second, "unwatched app ended", func() bool {
		return appStatus(t, c, gone.ID()).State.Terminal()
	})
	if s := appStatus(t, c, gone.ID()); s.State != model.AppFailed || !strings.Contains(s.Message, "not heard from") {
		t.Fatalf("unwatched app: %s %q, want FAILED for its silent client", s.State, s.Message)
	}
	waitFor(t, 20*time.Second, "executor "+pid+" stopped", func() bool { return !processAlive(pid) })
	if s := appStatus(t, c, kept.ID()); s.State != model.AppRunning {
		t.Fatalf("watched app: %s %q, want RUNNING", s.State, s.Message)
	}
}
