package master_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/internal/freeport"
	"github.com/drover-project/drover/master"
	"github.com/drover-project/drover/master/mastertest"
	"github.com/drover-project/drover/master/spark/restsubmit"
	"github.com/drover-project/drover/model"
)

// registerWorkers registers workers with 4 cores and 4 GiB each, worker ID
// w standing for instance i-w.
func registerWorkers(t *testing.T, c *mastertest.Cluster, ids ...string) {
	t.Helper()
	cl, ctx := c.Client(), c.Context()
	for _, id := range ids {
		reg := api.RegisterWorkerRequest{ID: id, Instance: "i-" + id, HTTPAddr: "127.0.0.1:1", Cores: 4, MemoryMB: 4096}
		if err := cl.Do(ctx, http.MethodPost, api.PathRegisterWorker, reg, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// A submission's user reaches its row (GET /v1/drivers/ID and the list,
// which status --json and list --json print), the assignment of its first
// attempt and of its relaunch on another worker, and, through an app its
// driver registers with its driver token, every executor's assignment. A
// retry with the token and another user is the first driver, unchanged; a
// driver token naming another user for its executors is refused 403; and
// a restarted master, replaying its log, still holds the user.
func TestUserTravelsFromSubmissionToWorkers(t *testing.T) {
	c := mastertest.Start(t, 1, func(cfg *master.Config) {
		cfg.RegisterWithoutGossip = true
		cfg.OperatorToken = "OperatorTok-0123456789abcdef"
		// No worker is lost for heartbeating only when the test does.
		cfg.WorkerTimeout = time.Minute
	})
	cl, ctx := c.Client(), c.Context()
	registerWorkers(t, c, "w1", "w2")
	req := submitReq()
	req.Supervise, req.RescheduleAfter, req.User = true, 1, "etl"
	res, err := cl.Submit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	again := req
	again.User, again.Argv = "root", []string{"/bin/false"}
	if r, err := cl.Submit(ctx, again); err != nil || r.DriverID != res.DriverID || !r.Existing {
		t.Fatalf("the token again with user root: %+v %v, want driver %s, existing", r, err, res.DriverID)
	}

	var row map[string]any
	if err := cl.Do(ctx, http.MethodGet, api.DriverPath(res.DriverID, ""), nil, &row); err != nil || row["user"] != "etl" {
		t.Fatalf("GET %s: user %v (%v), want etl", res.DriverID, row["user"], err)
	}
	var rows []map[string]any
	if err := cl.Do(ctx, http.MethodGet, api.PathDrivers, nil, &rows); err != nil || len(rows) != 1 || rows[0]["user"] != "etl" {
		t.Fatalf("GET %s: %v %v, want one driver as etl", api.PathDrivers, rows, err)
	}

	d, err := cl.Driver(ctx, res.DriverID)
	for err == nil && d.WorkerID == "" {
		d, err = cl.Driver(ctx, res.DriverID)
	}
	if err != nil {
		t.Fatal(err)
	}
	first, other := d.WorkerID, map[string]string{"w1": "w2", "w2": "w1"}[d.WorkerID]
	hb := heartbeatUntil(t, ctx, cl, first, api.HeartbeatRequest{Instance: "i-" + first}, func(hb api.HeartbeatResponse) bool { return len(hb.Assignments) == 1 })
	if as := hb.Assignments[0]; as.Attempt != 1 || as.User != "etl" || as.Token == "" {
		t.Fatalf("attempt 1's assignment %+v, want user etl and a driver token", as)
	}
	resched := api.HeartbeatRequest{Instance: "i-" + first, Reports: []model.AttemptReport{{DriverID: res.DriverID, Attempt: 1, State: model.DriverFailed,
		ExitCode: new(1), Runs: 1, Failures: []int64{100}, Reschedule: true, Reason: "1 run failed"}}}
	heartbeatUntil(t, ctx, cl, first, resched, func(hb api.HeartbeatResponse) bool { return len(hb.Assignments) == 0 })
	hb = heartbeatUntil(t, ctx, cl, other, api.HeartbeatRequest{Instance: "i-" + other}, func(hb api.HeartbeatResponse) bool { return len(hb.Assignments) == 1 })
	as := hb.Assignments[0]
	if as.Attempt != 2 || as.User != "etl" {
		t.Fatalf("the relaunch's assignment on %s: %+v, want attempt 2 as etl", other, as)
	}
	running := api.HeartbeatRequest{Instance: "i-" + other, Running: []api.AttemptRef{{DriverID: res.DriverID, Attempt: 2}},
		Reports: []model.AttemptReport{{DriverID: res.DriverID, Attempt: 2, State: model.DriverRunning, Runs: 1}}}
	heartbeatUntil(t, ctx, cl, other, running, func(hb api.HeartbeatResponse) bool { return len(hb.Acked) == 1 })

	// The driver registers an app with its own token.
	drv, err := client.New([]string{c.Nodes[0].HTTP()}, client.Options{Token: as.Token, RetryInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	spec := client.AppSpec{DriverID: res.DriverID, DriverAttempt: 2, CoresPerExecutor: 1, MemoryPerExecutorMB: 64, Executors: 1, Argv: []string{"/bin/true"}}
	before, err := cl.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	spec.User = "root"
	if _, err := drv.RegisterApp(ctx, spec); !errors.Is(err, api.ErrForbidden) || !strings.Contains(err.Error(), `only as its driver's user, "etl", not "root"`) {
		t.Fatalf("the driver's app as root: %v, want 403", err)
	}
	assertNothingCommitted(t, ctx, cl, before)
	spec.User = ""
	app, err := drv.RegisterApp(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	st, err := cl.AppStatus(ctx, app.ID())
	for err == nil && len(st.Executors) == 0 {
		st, err = cl.AppStatus(ctx, app.ID())
	}
	if err != nil || st.User != "etl" {
		t.Fatalf("the driver's app: %+v %v, want user etl", st.App, err)
	}
	on := st.Executors[0].WorkerID
	hb = heartbeatUntil(t, ctx, cl, on, api.HeartbeatRequest{Instance: "i-" + on}, func(hb api.HeartbeatResponse) bool { return len(hb.Executors) == 1 })
	if e := hb.Executors[0]; e.AppID != app.ID() || e.ExecutorID != 0 || e.User != "etl" {
		t.Fatalf("executor assignment on %s: %+v, want app %s's executor 0 as etl", on, e, app.ID())
	}

	// The log replayed by a restarted master holds the user.
	n := c.Nodes[0]
	c.Stop(n)
	c.Restart(n)
	c.Leader()
	if d, err := cl.Driver(ctx, res.DriverID); err != nil || d.User != "etl" || d.Attempt != 2 {
		t.Fatalf("after a restart: %+v %v, want attempt 2 as etl", d, err)
	}
}

// An app registered with an operator or submit token runs its executors
// as the user it names, or as each worker's default when it names none.
func TestAppWithoutDriverNamesItsUser(t *testing.T) {
	c := mastertest.Start(t, 1, func(cfg *master.Config) { cfg.RegisterWithoutGossip = true })
	cl, ctx := c.Client(), c.Context()
	registerWorkers(t, c, "w1")
	for _, user := range []string{"spark", ""} {
		app, err := cl.RegisterApp(ctx, client.AppSpec{CoresPerExecutor: 1, MemoryPerExecutorMB: 64, Executors: 1, Argv: []string{"/bin/true"}, User: user})
		if err != nil {
			t.Fatal(err)
		}
		hb := heartbeatUntil(t, ctx, cl, "w1", api.HeartbeatRequest{Instance: "i-w1"}, func(hb api.HeartbeatResponse) bool {
			for _, e := range hb.Executors {
				if e.AppID == app.ID() {
					return true
				}
			}
			return false
		})
		for _, e := range hb.Executors {
			if e.AppID == app.ID() && e.User != user {
				t.Fatalf("executor %+v, want user %q", e, user)
			}
		}
		app.Close()
	}
}

// A user of a form useradd refuses, or a uid, is refused in one line
// naming the rule, as a submission, in a batch, as an app's, and through
// Spark REST, and nothing is committed; a name of 32 bytes is taken in a
// batch, and Spark REST's spark.drover.user reaches the row.
func TestUserNamesAreChecked(t *testing.T) {
	ports, err := freeport.Get("127.0.0.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	c := mastertest.Start(t, 1, func(cfg *master.Config) { cfg.RegisterWithoutGossip, cfg.SparkRESTPort = true, ports[0] })
	cl, ctx := c.Client(), c.Context()
	before, err := cl.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("a", model.MaxUserLen)
	for _, tc := range []struct{ user, want string }{
		{long + "a", "user name exceeds 32 bytes"},
		{"1000", "numeric uid"},
		{"Root", "not a portable user name"},
		{"-rf", "not a portable user name"},
		{"a:b", "not a portable user name"},
	} {
		req := submitReq()
		req.User = tc.user
		app := api.RegisterAppRequest{Token: client.NewToken(), CoresPerExecutor: 1, MemoryPerExecutorMB: 1, Argv: []string{"x"}, User: tc.user}
		for path, body := range map[string]any{api.PathDrivers: req, api.PathApps: app} {
			err := cl.Do(ctx, http.MethodPost, path, body, nil)
			if !errors.Is(err, api.ErrInvalidRequest) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s as %q: %v, want one line of invalid request with %q", path, tc.user, err, tc.want)
			}
		}
		var batch api.SubmitBatchResponse
		if err := cl.Do(ctx, http.MethodPost, api.PathSubmitBatch, api.SubmitBatchRequest{Submissions: []api.SubmitRequest{req}}, &batch); err != nil ||
			len(batch.Results) != 1 || batch.Results[0].Error == nil || batch.Results[0].Error.Code != api.CodeInvalidRequest ||
			!strings.Contains(batch.Results[0].Error.Error, tc.want) {
			t.Errorf("a batch as %q: %+v %v, want its submission refused with %q", tc.user, batch, err, tc.want)
		}
		status, body := sparkCreate(t, c, tc.user)
		if status != http.StatusBadRequest || !strings.Contains(body, tc.want) {
			t.Errorf("Spark REST as %q: %d %s, want 400 with %q", tc.user, status, body, tc.want)
		}
	}
	assertNothingCommitted(t, ctx, cl, before)

	req := submitReq()
	req.User = long
	var batch api.SubmitBatchResponse
	if err := cl.Do(ctx, http.MethodPost, api.PathSubmitBatch, api.SubmitBatchRequest{Submissions: []api.SubmitRequest{req}}, &batch); err != nil ||
		len(batch.Results) != 1 || batch.Results[0].Error != nil {
		t.Fatalf("a batch as a user of %d bytes: %+v %v", len(long), batch, err)
	}
	status, body := sparkCreate(t, c, "etl")
	var created struct{ SubmissionID string }
	if err := json.Unmarshal([]byte(body), &created); status != http.StatusOK || err != nil {
		t.Fatalf("Spark REST create as etl: %d %s", status, body)
	}
	for id, want := range map[string]string{batch.Results[0].DriverID: long, created.SubmissionID: "etl"} {
		if d, err := cl.Driver(ctx, id); err != nil || d.User != want {
			t.Errorf("driver %s: %+v %v, want user %q", id, d, err, want)
		}
	}
}

// sparkCreate posts a Spark REST create whose spark.drover.user is user to
// the cluster's only master, and returns the status and body.
func sparkCreate(t *testing.T, c *mastertest.Cluster, user string) (int, string) {
	t.Helper()
	body := fmt.Sprintf(`{"action":"CreateSubmissionRequest","appResource":"local:/jobs/pi.jar","clientSparkVersion":"3.5.1","mainClass":"Pi",
		"sparkProperties":{"spark.app.name":"pi","%s":%q}}`, restsubmit.UserProperty, user)
	url := fmt.Sprintf("http://127.0.0.1:%d/v1/submissions/create", c.Nodes[0].Config.SparkRESTPort)
	resp, err := http.Post(url, "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}
