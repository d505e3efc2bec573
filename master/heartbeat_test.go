package master_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/master"
	"github.com/drover-project/drover/master/mastertest"
	"github.com/drover-project/drover/model"
)

// heartbeat sends one heartbeat of worker id and returns the answer.
func heartbeat(t *testing.T, ctx context.Context, cl *client.Client, id string, req api.HeartbeatRequest) api.HeartbeatResponse {
	t.Helper()
	var resp api.HeartbeatResponse
	if err := cl.Do(ctx, http.MethodPost, api.WorkerPath(id, "/heartbeat"), req, &resp); err != nil {
		t.Fatalf("heartbeat of %s: %v", id, err)
	}
	return resp
}

// awaitAssigned heartbeats until worker id is assigned n attempts, and
// returns them.
func awaitAssigned(t *testing.T, ctx context.Context, cl *client.Client, id, instance string, n int) []api.Assignment {
	t.Helper()
	for {
		resp := heartbeat(t, ctx, cl, id, api.HeartbeatRequest{Instance: instance})
		if len(resp.Assignments) == n {
			return resp.Assignments
		}
		if ctx.Err() != nil {
			t.Fatalf("%s was assigned %d attempts, want %d", id, len(resp.Assignments), n)
		}
	}
}

// A brief answer names the attempts the worker says it runs and gives the
// others in full; without Brief, every attempt comes in full as before.
func TestBriefHeartbeatNamesOnlyWhatTheWorkerRuns(t *testing.T) {
	c := mastertest.Start(t, 1, func(cfg *master.Config) { cfg.RegisterWithoutGossip = true })
	cl, ctx := c.Client(), c.Context()
	reg := api.RegisterWorkerRequest{ID: "w1", Instance: "i1", HTTPAddr: "127.0.0.1:1", Cores: 4, MemoryMB: 1024}
	if err := cl.Do(ctx, http.MethodPost, api.PathRegisterWorker, reg, nil); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := cl.Submit(ctx, submitReq()); err != nil {
			t.Fatal(err)
		}
	}
	full := awaitAssigned(t, ctx, cl, "w1", "i1", 2)
	ref := func(a api.Assignment) api.AttemptRef { return api.AttemptRef{DriverID: a.DriverID, Attempt: a.Attempt} }
	both := []api.AttemptRef{ref(full[0]), ref(full[1])}

	resp := heartbeat(t, ctx, cl, "w1", api.HeartbeatRequest{Instance: "i1", Brief: true, Running: both[:1]})
	if !reflect.DeepEqual(resp.Assignments, full[1:]) || !reflect.DeepEqual(resp.Kept, both[:1]) {
		t.Fatalf("brief answer running the first: assignments %+v, kept %+v; want the second in full and the first kept", resp.Assignments, resp.Kept)
	}
	resp = heartbeat(t, ctx, cl, "w1", api.HeartbeatRequest{Instance: "i1", Brief: true, Running: both})
	if resp.Assignments == nil || len(resp.Assignments) != 0 || !reflect.DeepEqual(resp.Kept, both) {
		t.Fatalf("brief answer running both: assignments %+v, kept %+v; want [] and both kept", resp.Assignments, resp.Kept)
	}
	// An attempt the worker does not run is never kept, brief or not.
	stale := []api.AttemptRef{{DriverID: both[0].DriverID, Attempt: 7}}
	resp = heartbeat(t, ctx, cl, "w1", api.HeartbeatRequest{Instance: "i1", Brief: true, Running: stale})
	if !reflect.DeepEqual(resp.Assignments, full) || resp.Kept != nil {
		t.Fatalf("brief answer running another attempt: assignments %+v, kept %+v; want both in full", resp.Assignments, resp.Kept)
	}
	resp = heartbeat(t, ctx, cl, "w1", api.HeartbeatRequest{Instance: "i1", Running: both})
	if !reflect.DeepEqual(resp.Assignments, full) || resp.Kept != nil {
		t.Fatalf("full answer: assignments %+v, kept %+v; want both in full", resp.Assignments, resp.Kept)
	}
}

// Workers reporting at the same moment each get their own reports
// acknowledged, whether they are committed alone or in a batch with
// others', and each report takes effect.
func TestConcurrentReportsAreEachAcknowledged(t *testing.T) {
	const n = 24
	// The workers are no gossip members and heartbeat one at a time here:
	// none may be lost meanwhile.
	c := mastertest.Start(t, 3, func(cfg *master.Config) { cfg.RegisterWithoutGossip, cfg.WorkerTimeout = true, time.Minute })
	cl, ctx := c.Client(), c.Context()
	for i := range n {
		reg := api.RegisterWorkerRequest{ID: fmt.Sprintf("w%d", i), Instance: "i", HTTPAddr: "127.0.0.1:1", Cores: 1, MemoryMB: 1024}
		if err := cl.Do(ctx, http.MethodPost, api.PathRegisterWorker, reg, nil); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		if _, err := cl.Submit(ctx, submitReq()); err != nil {
			t.Fatal(err)
		}
	}
	reports := make([]model.AttemptReport, n)
	for i := range n {
		a := awaitAssigned(t, ctx, cl, fmt.Sprintf("w%d", i), "i", 1)[0]
		reports[i] = model.AttemptReport{DriverID: a.DriverID, Attempt: a.Attempt, State: model.DriverRunning, Runs: 1}
	}
	acked := make([][]model.AttemptReport, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			acked[i] = heartbeat(t, ctx, cl, fmt.Sprintf("w%d", i), api.HeartbeatRequest{Instance: "i", Reports: reports[i : i+1]}).Acked
		})
	}
	wg.Wait()
	for i := range n {
		if !reflect.DeepEqual(acked[i], reports[i:i+1]) {
			t.Fatalf("w%d: acknowledged %+v, want its own report %+v", i, acked[i], reports[i])
		}
		d, err := cl.Driver(ctx, reports[i].DriverID)
		if err != nil || d.State != model.DriverRunning || d.WorkerID != fmt.Sprintf("w%d", i) {
			t.Fatalf("driver of w%d: %+v, %v; want RUNNING there", i, d, err)
		}
	}
}

// A staging report is committed once per change: the driver says its
// line at once, a resend of the same line (its acknowledgement lost) is
// acknowledged without a Raft entry, a line past model.MaxStagingReason
// is refused, naming the bound, with nothing committed, and the start of
// the program clears the line.
func TestStagingReportsCommitOncePerChange(t *testing.T) {
	c := mastertest.Start(t, 1, func(cfg *master.Config) { cfg.RegisterWithoutGossip = true })
	cl, ctx := c.Client(), c.Context()
	reg := api.RegisterWorkerRequest{ID: "w1", Instance: "i1", HTTPAddr: "127.0.0.1:1", Cores: 4, MemoryMB: 1024}
	if err := cl.Do(ctx, http.MethodPost, api.PathRegisterWorker, reg, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Submit(ctx, submitReq()); err != nil {
		t.Fatal(err)
	}
	a := awaitAssigned(t, ctx, cl, "w1", "i1", 1)[0]
	line := "fetching http://127.0.0.1:1/app.jar: connection refused, try 3, next in 4s"
	staging := model.AttemptReport{DriverID: a.DriverID, Attempt: a.Attempt, State: model.DriverSubmitted, Reason: line, Staging: true}
	first := heartbeat(t, ctx, cl, "w1", api.HeartbeatRequest{Instance: "i1", Reports: []model.AttemptReport{staging}})
	d, err := cl.Driver(ctx, a.DriverID)
	if err != nil || d.State != model.DriverSubmitted || d.Message != line || !d.Staging {
		t.Fatalf("driver %+v, %v; want SUBMITTED saying %q", d, err, line)
	}
	again := heartbeat(t, ctx, cl, "w1", api.HeartbeatRequest{Instance: "i1", Reports: []model.AttemptReport{staging}})
	if !reflect.DeepEqual(again.Acked, []model.AttemptReport{staging}) || again.Index != first.Index {
		t.Fatalf("resent line: acknowledged %+v at index %d, want it acknowledged with no entry past %d", again.Acked, again.Index, first.Index)
	}
	long := staging
	long.Reason = strings.Repeat("x", model.MaxStagingReason+1)
	var resp api.HeartbeatResponse
	err = cl.Do(ctx, http.MethodPost, api.WorkerPath("w1", "/heartbeat"), api.HeartbeatRequest{Instance: "i1", Reports: []model.AttemptReport{long}}, &resp)
	if want := fmt.Sprintf("staging reason of %s exceeds %d bytes", a.DriverID, model.MaxStagingReason); !errors.Is(err, api.ErrInvalidRequest) || !strings.Contains(err.Error(), want) {
		t.Fatalf("a line of %d bytes: %v, want a refusal saying %q", len(long.Reason), err, want)
	}
	atLimit := staging
	atLimit.Reason = strings.Repeat("x", model.MaxStagingReason)
	heartbeat(t, ctx, cl, "w1", api.HeartbeatRequest{Instance: "i1", Reports: []model.AttemptReport{atLimit}})
	if d, err := cl.Driver(ctx, a.DriverID); err != nil || d.Message != atLimit.Reason {
		t.Fatalf("driver %+v, %v; want the line of %d bytes", d, err, model.MaxStagingReason)
	}
	heartbeat(t, ctx, cl, "w1", api.HeartbeatRequest{Instance: "i1", Reports: []model.AttemptReport{{DriverID: a.DriverID, Attempt: a.Attempt, State: model.DriverRunning, Runs: 1}}})
	if d, err := cl.Driver(ctx, a.DriverID); err != nil || d.State != model.DriverRunning || d.Message != "" || d.Staging {
		t.Fatalf("driver %+v, %v; want RUNNING without the line", d, err)
	}
}
