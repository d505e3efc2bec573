package master_test

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/master"
	"github.com/drover-project/drover/master/mastertest"
	"github.com/drover-project/drover/model"
)

// heartbeatUntil heartbeats as worker id until done accepts the answer.
func heartbeatUntil(t *testing.T, ctx context.Context, cl *client.Client, id string, req api.HeartbeatRequest, done func(api.HeartbeatResponse) bool) api.HeartbeatResponse {
	t.Helper()
	for {
		var hb api.HeartbeatResponse
		if err := cl.Do(ctx, http.MethodPost, api.WorkerPath(id, "/heartbeat"), req, &hb); err != nil {
			t.Fatal(err)
		}
		if done(hb) {
			return hb
		}
		req.Reports = nil
		if ctx.Err() != nil {
			t.Fatalf("heartbeats of %s: the awaited answer never came; last %+v", id, hb)
		}
	}
}

// Two drivers asking for a GPU each on a worker offering two get one
// address each, and their assignments say which; a third waits for a free
// one, a driver asking for a resource no worker offers is reported as
// unplaceable, and once the gpus are free an app's two executors asking
// one each hold one address each.
func TestCustomResourcesArePlacedAndAssigned(t *testing.T) {
	c := mastertest.Start(t, 1, func(cfg *master.Config) { cfg.RegisterWithoutGossip = true })
	cl, ctx := c.Client(), c.Context()
	reg := api.RegisterWorkerRequest{ID: "w1", Instance: "i1", HTTPAddr: "127.0.0.1:1", Cores: 8, MemoryMB: 8192,
		Resources: model.Resources{"gpu": {"0", "1"}}}
	if err := cl.Do(ctx, http.MethodPost, api.PathRegisterWorker, reg, nil); err != nil {
		t.Fatal(err)
	}
	gpu := func() string {
		req := submitReq()
		req.Resources = model.ResourceAmounts{"gpu": 1}
		res, err := cl.Submit(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return res.DriverID
	}
	a, b := gpu(), gpu()
	hb := heartbeatUntil(t, ctx, cl, "w1", api.HeartbeatRequest{Instance: "i1"}, func(hb api.HeartbeatResponse) bool { return len(hb.Assignments) == 2 })
	held := map[string]string{}
	for _, as := range hb.Assignments {
		held[as.DriverID] = as.Resources.String()
	}
	if held[a] == held[b] || !strings.HasPrefix(held[a], "gpu=") || !strings.HasPrefix(held[b], "gpu=") || len(held[a]) != 5 {
		t.Fatalf("assignments hold %v, want one different gpu each", held)
	}
	third := gpu()
	fpga := submitReq()
	fpga.Resources = model.ResourceAmounts{"fpga": 1}
	res, err := cl.Submit(ctx, fpga)
	if err != nil {
		t.Fatal(err)
	}
	d, err := cl.Driver(ctx, third)
	if err != nil || d.WorkerID != "" || strings.Contains(d.Message, api.ReasonUnplaceable) {
		t.Fatalf("third gpu driver: %+v %v, want waiting for a free gpu", d, err)
	}
	d, err = cl.Driver(ctx, res.DriverID)
	if err != nil || !strings.Contains(d.Message, api.ReasonUnplaceable) || !strings.Contains(d.Message, "fpga=1") || !strings.Contains(d.Message, "fpga=0") {
		t.Fatalf("fpga driver: %q %v, want it unplaceable, saying what it asks and what the largest worker offers", d.Message, err)
	}
	w, err := cl.State(ctx)
	if err != nil || len(w.Workers) != 1 || w.Workers[0].ResourcesUsed.String() != "gpu=0,1" || w.Workers[0].Resources.String() != "gpu=0,1" {
		t.Fatalf("/v1/state workers %+v %v, want gpu 0,1 offered and held", w.Workers, err)
	}

	// The first driver ends; the third takes its address.
	end := api.HeartbeatRequest{Instance: "i1", Reports: []model.AttemptReport{{DriverID: a, Attempt: 1, State: model.DriverFinished, ExitCode: new(0)}}}
	hb = heartbeatUntil(t, ctx, cl, "w1", end, func(hb api.HeartbeatResponse) bool {
		for _, as := range hb.Assignments {
			if as.DriverID == third {
				return true
			}
		}
		return false
	})
	for _, as := range hb.Assignments {
		if as.DriverID == third && as.Resources.String() != held[a] {
			t.Fatalf("third driver holds %v, want the freed %s", as.Resources, held[a])
		}
	}

	// Once the gpu drivers end, an app's two executors asking one gpu
	// each hold one address each.
	end = api.HeartbeatRequest{Instance: "i1", Reports: []model.AttemptReport{
		{DriverID: b, Attempt: 1, State: model.DriverFinished, ExitCode: new(0)},
		{DriverID: third, Attempt: 1, State: model.DriverFinished, ExitCode: new(0)},
	}}
	heartbeatUntil(t, ctx, cl, "w1", end, func(hb api.HeartbeatResponse) bool { return len(hb.Assignments) == 0 })
	app, err := cl.RegisterApp(ctx, client.AppSpec{CoresPerExecutor: 1, MemoryPerExecutorMB: 64, Executors: 2, Argv: []string{"/bin/true"},
		ExecutorResources: model.ResourceAmounts{"gpu": 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	hb = heartbeatUntil(t, ctx, cl, "w1", api.HeartbeatRequest{Instance: "i1"}, func(hb api.HeartbeatResponse) bool { return len(hb.Executors) == 2 })
	var execHeld []string
	for _, e := range hb.Executors {
		if e.AppID != app.ID() {
			t.Fatalf("executor %+v of another app", e)
		}
		execHeld = append(execHeld, e.Resources.String())
	}
	slices.Sort(execHeld)
	if !slices.Equal(execHeld, []string{"gpu=0", "gpu=1"}) {
		t.Fatalf("the app's executors hold %v, want gpu=0 and gpu=1, one each", execHeld)
	}
}

// What the service refuses of resources and restart bounds it refuses in
// one line, before Raft: the tables and the log are unchanged.
func TestResourceAndBoundRefusals(t *testing.T) {
	c := mastertest.Start(t, 1, func(cfg *master.Config) { cfg.RegisterWithoutGossip = true })
	cl, ctx := c.Client(), c.Context()
	before, err := cl.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	with := func(f func(*api.SubmitRequest)) api.SubmitRequest { r := submitReq(); f(&r); return r }
	for _, tc := range []struct {
		name, path string
		body       any
		want       string
	}{
		{"zero amount", api.PathDrivers, with(func(r *api.SubmitRequest) { r.Resources = model.ResourceAmounts{"gpu": 0} }), "amount 0"},
		{"malformed name", api.PathDrivers, with(func(r *api.SubmitRequest) { r.Resources = model.ResourceAmounts{"GPU": 1} }), "resource name"},
		{"bounds without supervise", api.PathDrivers, with(func(r *api.SubmitRequest) { r.MaxRestarts = 2 }), "need supervise"},
		{"negative max restarts", api.PathDrivers, with(func(r *api.SubmitRequest) { r.Supervise, r.MaxRestarts = true, -1 }), "max restarts"},
		{"window under a second", api.PathDrivers, with(func(r *api.SubmitRequest) { r.Supervise, r.MaxRestarts, r.RestartWindowMS = true, 1, 999 }), "at least 1s"},
		{"window without max restarts", api.PathDrivers, with(func(r *api.SubmitRequest) { r.Supervise, r.RestartWindowMS = true, 5000 }), "needs max restarts"},
		{"negative reschedule", api.PathDrivers, with(func(r *api.SubmitRequest) { r.Supervise, r.RescheduleAfter = true, -3 }), "reschedule after"},
		{"executor amount", api.PathApps, api.RegisterAppRequest{Token: "a1", CoresPerExecutor: 1, MemoryPerExecutorMB: 1, Argv: []string{"x"},
			ExecutorResources: model.ResourceAmounts{"gpu": -1}}, "executor resources"},
		{"empty address list", api.PathRegisterWorker, api.RegisterWorkerRequest{ID: "w1", Instance: "i", HTTPAddr: "127.0.0.1:1", Cores: 1, MemoryMB: 1,
			Resources: model.Resources{"gpu": {}}}, "no addresses"},
		{"address twice", api.PathRegisterWorker, api.RegisterWorkerRequest{ID: "w1", Instance: "i", HTTPAddr: "127.0.0.1:1", Cores: 1, MemoryMB: 1,
			Resources: model.Resources{"gpu": {"0", "0"}}}, "given twice"},
	} {
		err := cl.Do(ctx, http.MethodPost, tc.path, tc.body, nil)
		if !errors.Is(err, api.ErrInvalidRequest) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line of invalid request with %q", tc.name, err, tc.want)
		}
	}
	assertNothingCommitted(t, ctx, cl, before)
}

// A bounded supervised driver's assignment carries its bounds, and after a
// reschedule the next attempt's carries the failed runs of the one before.
func TestBoundsReachTheWorkerAcrossAReschedule(t *testing.T) {
	c := mastertest.Start(t, 1, func(cfg *master.Config) { cfg.RegisterWithoutGossip = true })
	cl, ctx := c.Client(), c.Context()
	for _, id := range []string{"w1", "w2"} {
		reg := api.RegisterWorkerRequest{ID: id, Instance: "i-" + id, HTTPAddr: "127.0.0.1:1", Cores: 4, MemoryMB: 4096}
		if err := cl.Do(ctx, http.MethodPost, api.PathRegisterWorker, reg, nil); err != nil {
			t.Fatal(err)
		}
	}
	req := submitReq()
	req.Supervise, req.MaxRestarts, req.RestartWindowMS, req.RescheduleAfter = true, 3, 60_000, 2
	res, err := cl.Submit(ctx, req)
	if err != nil {
		t.Fatal(err)
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
	if as := hb.Assignments[0]; as.MaxRestarts != 3 || as.RestartWindowMS != 60_000 || as.RescheduleAfter != 2 || as.Failures != nil {
		t.Fatalf("assignment %+v, want the bounds and no earlier failures", as)
	}
	resched := api.HeartbeatRequest{Instance: "i-" + first, Reports: []model.AttemptReport{{DriverID: res.DriverID, Attempt: 1, State: model.DriverFailed,
		ExitCode: new(1), Runs: 2, Failures: []int64{100, 200}, Reschedule: true, Reason: "2 runs failed in a row"}}}
	heartbeatUntil(t, ctx, cl, first, resched, func(hb api.HeartbeatResponse) bool { return len(hb.Assignments) == 0 })
	hb = heartbeatUntil(t, ctx, cl, other, api.HeartbeatRequest{Instance: "i-" + other}, func(hb api.HeartbeatResponse) bool { return len(hb.Assignments) == 1 })
	if as := hb.Assignments[0]; as.Attempt != 2 || !reflect.DeepEqual(as.Failures, []int64{100, 200}) {
		t.Fatalf("attempt 2's assignment on %s: %+v, want the failures of attempt 1", other, as)
	}
}
