package master_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/master"
	"github.com/drover-project/drover/master/leader"
	"github.com/drover-project/drover/master/mastertest"
	"github.com/drover-project/drover/master/service"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/model/ids"
)

func submitReq() api.SubmitRequest {
	return api.SubmitRequest{Token: client.NewToken(), DriverSpec: model.DriverSpec{Argv: []string{"/bin/true"}, Cores: 1, MemoryMB: 64}}
}

// post sends one request to one master, as a program other than the client
// would, and returns the status, the serving master and the body.
func post(t *testing.T, addr, path string, body any, header http.Header) (int, string, []byte) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get(api.HeaderServedBy), out
}

// A follower takes a write and hands it to the leader once; the answer is
// the leader's, the row is in the leader's tables at once, and a request a
// master forwarded already is never forwarded again.
func TestFollowerForwardsOnce(t *testing.T) {
	c := mastertest.Start(t, 3, nil)
	leader, follower := c.Leader(), c.Followers()[0]

	status, servedBy, body := post(t, follower.HTTP(), api.PathDrivers, submitReq(), nil)
	var res api.SubmitResponse
	if status != http.StatusOK || servedBy != follower.ID || json.Unmarshal(body, &res) != nil || res.DriverID == "" {
		t.Fatalf("submit to follower %s: %d from %q: %s", follower.ID, status, servedBy, body)
	}
	// A linearizable read on the leader sees it: the follower's answer
	// was the commit's.
	if _, err := c.Client(leader).Driver(c.Context(), res.DriverID); err != nil {
		t.Fatalf("leader does not have %s: %v", res.DriverID, err)
	}

	status, _, body = post(t, follower.HTTP(), api.PathDrivers, submitReq(), http.Header{api.HeaderForwarded: {"m9"}})
	var e api.Error
	if status != http.StatusServiceUnavailable || json.Unmarshal(body, &e) != nil || e.Code != api.CodeNoLeader ||
		!strings.Contains(e.Error, "not the leader") || e.Leader != leader.HTTP() {
		t.Fatalf("forwarded twice: %d %s, want 503 no_leader naming leader %s", status, body, leader.HTTP())
	}
}

// A read on a follower is the leader's unless it may be stale; either way
// the follower answers.
func TestFollowerReads(t *testing.T) {
	c := mastertest.Start(t, 3, nil)
	follower := c.Followers()[0]
	res, err := c.Client().Submit(c.Context(), submitReq())
	if err != nil {
		t.Fatal(err)
	}
	// Right after the commit the follower may not have applied it; the
	// linearizable read is answered by the leader, so it must find it.
	d, err := c.Client(follower).Driver(c.Context(), res.DriverID)
	if err != nil || d.ID != res.DriverID {
		t.Fatalf("linearizable read through %s: %+v, %v", follower.ID, d, err)
	}
	// Unknown rows keep their code across the forwarding.
	if _, err := c.Client(follower).Driver(c.Context(), ids.Format(ids.Driver, time.Unix(0, 0), 999)); !errors.Is(err, model.ErrUnknownDriver) {
		t.Fatalf("unknown driver through a follower: %v", err)
	}
}

// The leader's rules, at Go level: a token names one driver however often
// it is sent, IDs are checked before they reach the tables, kills are
// idempotent, and refusals carry their codes.
func TestSubmitAndKillRules(t *testing.T) {
	c := mastertest.Start(t, 1, nil)
	cl, ctx := c.Client(), c.Context()
	req := submitReq()
	first, err := cl.Submit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := cl.Submit(ctx, req)
	if err != nil || again.DriverID != first.DriverID || !again.Existing {
		t.Fatalf("the same token again: %+v, %v; want %s, existing", again, err, first.DriverID)
	}
	for _, tc := range []struct {
		name string
		req  api.SubmitRequest
		want error
	}{
		{"no token", api.SubmitRequest{DriverSpec: model.DriverSpec{Argv: []string{"x"}, Cores: 1, MemoryMB: 1}}, api.ErrInvalidRequest},
		{"no program", api.SubmitRequest{Token: "t1", DriverSpec: model.DriverSpec{Cores: 1, MemoryMB: 1}}, api.ErrInvalidRequest},
		{"reserved variable", api.SubmitRequest{Token: "t2", DriverSpec: model.DriverSpec{Argv: []string{"x"}, Cores: 1, MemoryMB: 1, Env: map[string]string{"DROVER_X": "1"}}}, api.ErrInvalidRequest},
		{"control character in the name", api.SubmitRequest{Token: "t3", Name: "a\x1bb", DriverSpec: model.DriverSpec{Argv: []string{"x"}, Cores: 1, MemoryMB: 1}}, api.ErrInvalidRequest},
		{"artifact of an unknown scheme", api.SubmitRequest{Token: "t4", DriverSpec: model.DriverSpec{Argv: []string{"x"}, Cores: 1, MemoryMB: 1, Artifacts: []model.Artifact{{Source: "ftp://h/a.jar"}}}}, api.ErrInvalidRequest},
		{"artifact with a malformed checksum", api.SubmitRequest{Token: "t5", DriverSpec: model.DriverSpec{Argv: []string{"x"}, Cores: 1, MemoryMB: 1, Artifacts: []model.Artifact{{Source: "https://h/a.jar?checksum=sha256:zz"}}}}, api.ErrInvalidRequest},
		{"two artifacts of one name", api.SubmitRequest{Token: "t6", DriverSpec: model.DriverSpec{Argv: []string{"x"}, Cores: 1, MemoryMB: 1, Artifacts: []model.Artifact{{Source: "https://h/a.jar"}, {Source: "https://g/a.jar"}}}}, api.ErrInvalidRequest},
	} {
		if err := cl.Do(ctx, http.MethodPost, api.PathDrivers, tc.req, nil); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if err := cl.Kill(ctx, first.DriverID); err != nil {
		t.Fatal(err)
	}
	if err := cl.Kill(ctx, first.DriverID); err != nil {
		t.Fatalf("second kill: %v", err)
	}
	if err := cl.Kill(ctx, "driver-1"); !errors.Is(err, api.ErrInvalidRequest) {
		t.Fatalf("kill of a malformed ID: %v", err)
	}
	if err := cl.Kill(ctx, ids.Format(ids.Driver, time.Unix(0, 0), 999)); !errors.Is(err, model.ErrUnknownDriver) {
		t.Fatalf("kill of an unknown ID: %v", err)
	}
}

// A submission's artifacts are normalized once, before Raft, and reach the
// worker the driver is placed on as the row holds them.
func TestArtifactsReachTheWorker(t *testing.T) {
	c := mastertest.Start(t, 1, func(cfg *master.Config) { cfg.RegisterWithoutGossip = true })
	cl, ctx := c.Client(), c.Context()
	reg := api.RegisterWorkerRequest{ID: "w1", Instance: "i1", HTTPAddr: "127.0.0.1:1", Cores: 2, MemoryMB: 1024}
	if err := cl.Do(ctx, http.MethodPost, api.PathRegisterWorker, reg, nil); err != nil {
		t.Fatal(err)
	}
	sum := strings.Repeat("ab", 32)
	req := submitReq()
	req.Artifacts = []model.Artifact{
		{Source: "https://h/job.tar.gz?checksum=sha256:" + strings.ToUpper(sum)},
		{Upload: sum, Name: "run.sh", Mode: 0o755, Dest: "bin"},
	}
	res, err := cl.Submit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	want := []model.Artifact{
		{Source: req.Artifacts[0].Source, URL: "https://h/job.tar.gz", SHA256: sum, Archive: "tar.gz"},
		{Upload: sum, SHA256: sum, Name: "run.sh", Mode: 0o755, Dest: "bin"},
	}
	d, err := cl.Driver(ctx, res.DriverID)
	if err != nil || !reflect.DeepEqual(d.Artifacts, want) {
		t.Fatalf("row artifacts = %+v, %v; want %+v", d.Artifacts, err, want)
	}
	for {
		var hb api.HeartbeatResponse
		if err := cl.Do(ctx, http.MethodPost, api.WorkerPath("w1", "/heartbeat"), api.HeartbeatRequest{Instance: "i1"}, &hb); err != nil {
			t.Fatal(err)
		}
		if len(hb.Assignments) == 1 {
			if got := hb.Assignments[0].Artifacts; !reflect.DeepEqual(got, want) {
				t.Fatalf("assignment artifacts = %+v, want %+v", got, want)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the driver was never assigned")
		}
	}

	// The driver's app gives its executors the driver's artifacts, then
	// its own.
	reg2 := func(own []model.Artifact, driverID string) (api.RegisterAppResponse, error) {
		var resp api.RegisterAppResponse
		err := cl.Do(ctx, http.MethodPost, api.PathApps, api.RegisterAppRequest{Token: client.NewToken(), DriverID: driverID, DriverAttempt: 1,
			CoresPerExecutor: 1, MemoryPerExecutorMB: 64, Argv: []string{"./run.sh"}, Artifacts: own, DriverArtifacts: true}, &resp)
		return resp, err
	}
	app, err := reg2([]model.Artifact{{Source: "https://h/conf.json"}}, res.DriverID)
	if err != nil {
		t.Fatal(err)
	}
	st, err := cl.AppStatus(ctx, app.AppID)
	wantApp := append(slices.Clone(want), model.Artifact{Source: "https://h/conf.json", URL: "https://h/conf.json", Name: "conf.json"})
	if err != nil || !reflect.DeepEqual(st.App.Artifacts, wantApp) {
		t.Fatalf("app artifacts = %+v, %v; want %+v", st, err, wantApp)
	}
	for _, tc := range []struct {
		name   string
		own    []model.Artifact
		driver string
	}{
		{"a file the driver's artifacts stage too", []model.Artifact{{Upload: sum, Name: "run.sh", Dest: "bin"}}, res.DriverID},
		{"no driver to inherit from", nil, ""},
	} {
		if _, err := reg2(tc.own, tc.driver); !errors.Is(err, api.ErrInvalidRequest) {
			t.Errorf("%s: %v, want an invalid request", tc.name, err)
		}
	}
}

// A request the service refuses for what it asks reads "invalid request",
// in the user's terms, wherever the same check in the tables would say
// "invalid command"; it keeps its code and changes nothing.
func TestRefusedRequestsReadAsRequests(t *testing.T) {
	c := mastertest.Start(t, 1, nil)
	cl, ctx := c.Client(), c.Context()
	var app api.RegisterAppResponse
	if err := cl.Do(ctx, http.MethodPost, api.PathApps, api.RegisterAppRequest{Token: client.NewToken(),
		CoresPerExecutor: 1, MemoryPerExecutorMB: 64, Argv: []string{"/bin/true"}}, &app); err != nil {
		t.Fatal(err)
	}
	before, err := cl.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		body       any
		want       string
	}{
		{"zero cores", api.PathDrivers, api.SubmitRequest{Token: "t1", DriverSpec: model.DriverSpec{Argv: []string{"x"}, MemoryMB: 1}}, "cores must be positive"},
		{"a variable the worker sets", api.PathDrivers, api.SubmitRequest{Token: "t2", DriverSpec: model.DriverSpec{Argv: []string{"x"}, Cores: 1, MemoryMB: 1, Env: map[string]string{"DROVER_ATTEMPT": "9"}}}, "set by Drover itself"},
		{"an app's negative core cap", api.PathApps, api.RegisterAppRequest{Token: "t3", MaxCores: -1, CoresPerExecutor: 1,
			MemoryPerExecutorMB: 1, Argv: []string{"x"}}, "max cores must not be negative"},
		{"a negative executor total", api.AppPath(app.AppID, "/executors"), api.RequestExecutorsRequest{Total: -1}, "executor total must not be negative"},
	} {
		err := cl.Do(ctx, http.MethodPost, tc.path, tc.body, nil)
		if !errors.Is(err, api.ErrInvalidRequest) || !strings.HasPrefix(err.Error(), "invalid request: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want \"invalid request: ...%s...\"", tc.name, err, tc.want)
		}
	}
	assertNothingCommitted(t, ctx, cl, before)
}

// assertNothingCommitted fails t unless the tables and the log are as they
// were in before. It compares commit indexes, not applied ones: Raft marks
// an entry applied only after handing it to the FSM, which may already
// have answered the write that made it, so the applied index can still
// move on by itself.
func assertNothingCommitted(t *testing.T, ctx context.Context, cl *client.Client, before *api.State) {
	t.Helper()
	after, err := cl.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.StateHash != before.StateHash || after.CommitIndex != before.CommitIndex {
		t.Fatalf("refused requests changed the tables or the log: commit index %d -> %d", before.CommitIndex, after.CommitIndex)
	}
}

// Killing every driver kills those that have not ended, through a
// follower, with a kill's access; clearing drops the finished drivers and
// apps, tokens included, with an operator's; neither takes a body.
func TestKillAllAndClearCompleted(t *testing.T) {
	const submitToken = "SubmitTok-0123456789abcdef"
	c := mastertest.Start(t, 3, func(cfg *master.Config) {
		cfg.OperatorToken, cfg.SubmitToken = "OperatorTok-0123456789abcdef", submitToken
	})
	ctx, follower := c.Context(), c.Followers()[0]
	op := c.Client(follower)
	sub, err := client.New([]string{follower.HTTP()}, client.Options{Token: submitToken, RetryInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	reqs := []api.SubmitRequest{submitReq(), submitReq(), submitReq()}
	var ids []string
	for _, r := range reqs {
		res, err := sub.Submit(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.DriverID)
	}
	if err := sub.Kill(ctx, ids[2]); err != nil {
		t.Fatal(err)
	}
	app, err := sub.RegisterApp(ctx, client.AppSpec{CoresPerExecutor: 1, MemoryPerExecutorMB: 64, Argv: []string{"/bin/true"}})
	if err != nil {
		t.Fatal(err)
	}
	app.Close()
	if err := sub.KillApp(ctx, app.ID()); err != nil {
		t.Fatal(err)
	}

	status, _, body := post(t, follower.HTTP(), api.PathKillAllDrivers, map[string]string{"driver_id": ids[0]},
		http.Header{"Authorization": {"Bearer " + submitToken}})
	if status != http.StatusBadRequest {
		t.Fatalf("kill-all with a body: %d %s, want 400", status, body)
	}
	// The reply names the drivers this call killed: when a loaded machine
	// loses the first answer and the client sends the request again, the
	// second call finds them killed already and names fewer. What must
	// hold is that it names no other driver and that both end KILLED.
	var killed api.KillAllResponse
	if err := sub.Do(ctx, http.MethodPost, api.PathKillAllDrivers, nil, &killed); err != nil ||
		slices.ContainsFunc(killed.DriverIDs, func(id string) bool { return !slices.Contains(ids[:2], id) }) {
		t.Fatalf("kill-all: %+v, %v; want some of %v", killed, err, ids[:2])
	}
	for i, id := range ids {
		d, err := sub.Driver(ctx, id)
		if err != nil || d.State != model.DriverKilled {
			t.Fatalf("%s after kill-all: %+v, %v", id, d, err)
		}
		want := service.KilledByKillAll
		if i == 2 {
			want = service.KilledByClient
		}
		if d.Message != want {
			t.Errorf("%s after kill-all says %q, want %q", id, d.Message, want)
		}
	}
	if err := sub.Do(ctx, http.MethodPost, api.PathKillAllDrivers, nil, &killed); err != nil || len(killed.DriverIDs) != 0 {
		t.Fatalf("kill-all again: %+v, %v; want none killed", killed, err)
	}

	if err := sub.Do(ctx, http.MethodPost, api.PathClearCompleted, nil, nil); !errors.Is(err, api.ErrForbidden) {
		t.Fatalf("clear with the submit token: %v, want forbidden", err)
	}
	var cleared api.ClearCompletedResponse
	if err := op.Do(ctx, http.MethodPost, api.PathClearCompleted, nil, &cleared); err != nil ||
		!slices.Equal(slices.Sorted(slices.Values(cleared.DriverIDs)), ids) || !slices.Equal(cleared.AppIDs, []string{app.ID()}) {
		t.Fatalf("clear: %+v, %v; want drivers %v and app %s", cleared, err, ids, app.ID())
	}
	ds, err := op.Drivers(ctx)
	if err != nil || len(ds) != 0 {
		t.Fatalf("after clear: %d drivers (%v)", len(ds), err)
	}
	if as, err := op.Apps(ctx); err != nil || len(as) != 0 {
		t.Fatalf("after clear: %d apps (%v)", len(as), err)
	}
	// The tokens went with the rows, as under retention.
	if res, err := sub.Submit(ctx, reqs[0]); err != nil || res.Existing || res.DriverID == ids[0] {
		t.Fatalf("a cleared driver's token again: %+v, %v; want a new driver", res, err)
	}
}

// A worker ID held by a live worker process is refused to another one.
func TestWorkerIDTakeover(t *testing.T) {
	c := mastertest.Start(t, 1, func(cfg *master.Config) { cfg.RegisterWithoutGossip = true })
	cl, ctx := c.Client(), c.Context()
	reg := api.RegisterWorkerRequest{ID: "w1", Instance: "first", HTTPAddr: "127.0.0.1:1", Cores: 2, MemoryMB: 1024}
	if err := cl.Do(ctx, http.MethodPost, api.PathRegisterWorker, reg, nil); err != nil {
		t.Fatal(err)
	}
	reg.Instance = "second"
	err := cl.Do(ctx, http.MethodPost, api.PathRegisterWorker, reg, nil)
	if !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), "in use by another worker process") {
		t.Fatalf("a second process under w1: %v, want a conflict", err)
	}
}

// seqOf returns a driver ID's sequence number.
func seqOf(t *testing.T, id string) int {
	t.Helper()
	n, err := ids.Seq(ids.Driver, id)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Submissions acknowledged before a leader change are all there after it,
// and the new leader's IDs continue the old one's: no ID twice.
func TestLeaderChangeKeepsSubmissionsAndIDs(t *testing.T) {
	c := mastertest.Start(t, 3, nil)
	cl, ctx := c.Client(), c.Context()
	seen := map[string]bool{}
	submit := func(n int) {
		for range n {
			res, err := cl.Submit(ctx, submitReq())
			if err != nil {
				t.Fatal(err)
			}
			if seen[res.DriverID] {
				t.Fatalf("%s given twice", res.DriverID)
			}
			seen[res.DriverID] = true
		}
	}
	submit(10)
	old := c.Leader()
	c.Stop(old)
	submit(10)
	ds, err := cl.Drivers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		delete(seen, d.ID)
	}
	if len(seen) != 0 {
		t.Fatalf("acknowledged but gone after the leader change: %v", seen)
	}
	if next := c.Leader(); next == old {
		t.Fatalf("%s still leads after it stopped", old.ID)
	}
}

// restoreToken is the operator token of the restore tests' master.
const restoreToken = "OperatorTok-0123456789abcdef"

// snapshotBeforeOneOfTwo starts one master with restoreToken, submits a
// driver, saves a snapshot and submits a second driver: a restore that
// takes leaves one driver, one refused leaves two.
func snapshotBeforeOneOfTwo(t *testing.T) (*mastertest.Cluster, []byte) {
	t.Helper()
	c := mastertest.Start(t, 1, func(cfg *master.Config) { cfg.OperatorToken = restoreToken })
	ctx := c.Context()
	op := c.Client()
	if _, err := op.Submit(ctx, submitReq()); err != nil {
		t.Fatal(err)
	}
	archive, err := op.SnapshotSave(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := op.Submit(ctx, submitReq()); err != nil {
		t.Fatal(err)
	}
	return c, archive
}

// A snapshot restore must say its body is an archive (application/x-tar
// or application/octet-stream): the operator's own archive sent as
// text/plain, a form, multipart or with no type, as a page of another
// site can make a browser post, is 415 before its body is read, and the
// tables keep the driver submitted after the snapshot; sent as
// application/octet-stream it is restored.
func TestRestoreNeedsItsContentType(t *testing.T) {
	c, archive := snapshotBeforeOneOfTwo(t)
	ctx, op := c.Context(), c.Client()
	restore := func(ct string) (int, []byte) {
		req, err := http.NewRequest(http.MethodPost, "http://"+c.Leader().HTTP()+api.PathSnapshot, bytes.NewReader(archive))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+restoreToken)
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}
	for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/json"} {
		status, out := restore(ct)
		var e api.Error
		if status != http.StatusUnsupportedMediaType || json.Unmarshal(out, &e) != nil || e.Code != api.CodeUnsupportedMediaType ||
			!strings.Contains(e.Error, "Content-Type: application/x-tar or application/octet-stream") {
			t.Errorf("a restore with Content-Type %q: %d %s, want 415 unsupported_media_type", ct, status, out)
		}
	}
	if ds, err := op.Drivers(ctx); err != nil || len(ds) != 2 {
		t.Fatalf("after refused restores: %d drivers (%v), want the 2 submitted", len(ds), err)
	}
	if status, out := restore("application/octet-stream"); status != http.StatusOK {
		t.Fatalf("a restore as application/octet-stream: %d %s", status, out)
	}
	if ds, err := op.Drivers(ctx); err != nil || len(ds) != 1 {
		t.Fatalf("after the restore: %d drivers (%v), want the snapshot's 1", len(ds), err)
	}
}

// A restore whose meta.json names a Raft snapshot version this release
// does not know, or an index near the log's end, is refused 400 before
// Raft sees it, checksums recomputed or not: the tables keep the driver
// submitted after the snapshot and the log's index does not jump.
// Before, the version came back as 503 "may or may not have happened",
// which a client retries for ever, and the index moved the log there.
func TestRestoreRefusesAMetaRaftCannotTake(t *testing.T) {
	c, archive := snapshotBeforeOneOfTwo(t)
	ctx, op := c.Context(), c.Client()
	for _, tc := range []struct {
		field string
		value uint64
		want  string
	}{
		{"Version", 1<<63 - 1, "snapshot version 9223372036854775807 of Raft: this release restores versions"},
		{"Index", 1<<64 - 1, "index 18446744073709551615 is past 4611686018427387904"},
		{"Index", 1<<62 + 1, "index 4611686018427387905 is past 4611686018427387904"},
	} {
		_, err := op.SnapshotRestore(ctx, withMeta(t, archive, tc.field, tc.value))
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(ae.Message, tc.want) {
			t.Errorf("a restore with %s %d: %v, want 400 with %q", tc.field, tc.value, err, tc.want)
		}
	}
	if ds, err := op.Drivers(ctx); err != nil || len(ds) != 2 {
		t.Fatalf("after refused restores: %d drivers (%v), want the 2 submitted", len(ds), err)
	}
	if st, err := op.State(ctx); err != nil || st.AppliedIndex > 1000 {
		t.Fatalf("after refused restores the applied index is %v (%v)", st, err)
	}
	// At the bound, the archive is restored.
	if _, err := op.SnapshotRestore(ctx, withMeta(t, archive, "Index", 1<<62)); err != nil {
		t.Fatalf("a restore at index 2^62: %v", err)
	}
}

// withMeta rewrites one numeric field of a snapshot archive's meta.json
// and its checksum, as a hand-edited archive would.
func withMeta(t *testing.T, archive []byte, field string, value uint64) []byte {
	t.Helper()
	files := map[string][]byte{}
	var names []string
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[hdr.Name] = b
		names = append(names, hdr.Name)
	}
	var meta map[string]json.RawMessage
	if err := json.Unmarshal(files["meta.json"], &meta); err != nil {
		t.Fatal(err)
	}
	meta[field] = json.RawMessage(strconv.FormatUint(value, 10))
	b, err := json.Marshal(meta)
	if err != nil {
		t.Fatal(err)
	}
	files["meta.json"] = b
	var sums strings.Builder
	for _, name := range []string{"meta.json", "state.bin"} {
		sum := sha256.Sum256(files[name])
		fmt.Fprintf(&sums, "%s  %s\n", hex.EncodeToString(sum[:]), name)
	}
	files["SHA256SUMS"] = []byte(sums.String())
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	for _, name := range names {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: int64(len(files[name]))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(files[name]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// An operator's restore rolls the tables back, but not the sequence of
// IDs: a driver made after the restore never takes the ID of one that a
// client was given before it, on this leader or the next.
func TestRestoreNeverReusesIDs(t *testing.T) {
	c := mastertest.Start(t, 3, func(cfg *master.Config) { cfg.OperatorToken = "OperatorTok-0123456789abcdef" })
	ctx := c.Context()
	op := c.Client()
	var before []string
	for range 2 {
		res, err := op.Submit(ctx, submitReq())
		if err != nil {
			t.Fatal(err)
		}
		before = append(before, res.DriverID)
	}
	archive, err := op.SnapshotSave(ctx)
	if err != nil {
		t.Fatal(err)
	}
	highest := 0
	for range 3 {
		res, err := op.Submit(ctx, submitReq())
		if err != nil {
			t.Fatal(err)
		}
		highest = max(highest, seqOf(t, res.DriverID))
	}
	if _, err := op.SnapshotRestore(ctx, archive); err != nil {
		t.Fatal(err)
	}
	ds, err := op.Drivers(ctx)
	if err != nil || len(ds) != len(before) {
		t.Fatalf("after the restore: %d drivers (%v), want the %d of the snapshot", len(ds), err, len(before))
	}
	res, err := op.Submit(ctx, submitReq())
	if err != nil {
		t.Fatal(err)
	}
	if seq := seqOf(t, res.DriverID); seq <= highest {
		t.Fatalf("after the restore %s has sequence %d, not past %d given before it", res.DriverID, seq, highest)
	}
	c.Stop(c.Leader())
	res2, err := op.Submit(ctx, submitReq())
	if err != nil {
		t.Fatal(err)
	}
	if seq := seqOf(t, res2.DriverID); seq <= seqOf(t, res.DriverID) {
		t.Fatalf("the next leader made %s, not past %s", res2.DriverID, res.DriverID)
	}
}

// syncBuffer is a log sink that tests read while masters write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A pool deliberately split, a voter with another gossip key and a worker
// that heartbeats without gossiping, is reported by the leader within
// seconds: in its log, its metric, /v1/state and /v1/health. The log says
// it once per change of the set: once while the set stays the same, again
// when the worker goes silent, and "whole again" when the voter is gone.
func TestSplitPoolIsReported(t *testing.T) {
	logs := &syncBuffer{}
	c := mastertest.Start(t, 3, func(cfg *master.Config) {
		cfg.RegisterWithoutGossip = true
		cfg.GossipKey = []byte("0123456789abcdef")
		cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
		if cfg.ID == "m3" {
			cfg.GossipKey = []byte("fedcba9876543210")
		}
		// Each new term starts the report's grace (3 s) and its log
		// anew; Raft timeouts this long keep one leader through the
		// test on a loaded machine, where 200 ms ones moved it three
		// times in 30 s.
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 2*time.Second, 2*time.Second, time.Second
	})
	// Longer than every wait below together, so that a deadline, not the
	// context, says what did not happen.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cl, m3 := c.Client(), c.Nodes[2]
	reg := api.RegisterWorkerRequest{ID: "w9", Instance: "i9", HTTPAddr: "127.0.0.1:1", Cores: 1, MemoryMB: 64}
	if err := cl.Do(ctx, http.MethodPost, api.PathRegisterWorker, reg, nil); err != nil {
		t.Fatal(err)
	}
	stopBeats := make(chan struct{})
	beating := make(chan struct{})
	go func() {
		defer close(beating)
		for {
			select {
			case <-stopBeats:
				return
			default:
			}
			// The leader holds a heartbeat up to 2 s; a failed one (a
			// moment between leaders) is tried again.
			if err := cl.Do(ctx, http.MethodPost, api.WorkerPath("w9", "/heartbeat"), api.HeartbeatRequest{Instance: "i9"}, nil); err != nil {
				time.Sleep(50 * time.Millisecond)
			}
		}
	}()
	defer func() {
		select {
		case <-stopBeats:
		default:
			close(stopBeats)
		}
		<-beating
	}()

	// waitSplit waits until the master that leads now, m3 excepted,
	// reports want, and returns its state.
	waitSplit := func(want string) *api.State {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		var st *api.State
		var err error
		for {
			// m3 must not lead: it sees neither other master. While
			// it runs, it is stopped (handing over) and started again.
			if m3.Master() != nil && c.Leader() == m3 {
				c.Stop(m3)
				c.Restart(m3)
			} else if st, err = cl.State(ctx); err == nil && st.Role == "Leader" && st.ID != "m3" && leader.PoolNames(st.PoolSplit) == want {
				return st
			}
			if time.Now().After(deadline) {
				t.Fatalf("the leader did not report the split %q within a minute: %+v, %v", want, st, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// Reported, and said once: the set stays the same for many of the
	// leader's looks at its pool (every 250 ms) and the log keeps one line.
	const both = "master/m3, worker/w9"
	var first *api.State
	for first == nil {
		st := waitSplit(both)
		time.Sleep(2 * time.Second)
		if again := waitSplit(both); again.ID == st.ID && again.Term == st.Term {
			// m3 may be named alone first: its grace began with the
			// term, w9's with its registration.
			if got := splitLog(logs.String(), st.ID, st.Term); !saidOnce(got) || got[len(got)-1] != both {
				t.Fatalf("%s's log in term %d says %q, want each change once, ending with %s", st.ID, st.Term, got, both)
			}
			first = st
		}
	}
	lead := c.Nodes[slices.IndexFunc(c.Nodes, func(n *mastertest.Node) bool { return n.ID == first.ID })]
	resp, err := http.Get("http://" + lead.HTTP() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`drover_gossip_split_members{role="master"} 1`, `drover_gossip_split_members{role="worker"} 1`} {
		if !strings.Contains(string(body), want) {
			t.Fatalf("%s's metrics lack %s", first.ID, want)
		}
	}
	resp, err = http.Get("http://" + lead.HTTP() + "/v1/health")
	if err != nil {
		t.Fatal(err)
	}
	var h api.Health
	_ = json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || h.Status != "degraded" || !strings.Contains(fmt.Sprint(h.Checks), both) {
		t.Fatalf("%s's health: %d %+v, want degraded naming %s", first.ID, resp.StatusCode, h, both)
	}

	// The worker goes silent: the set changes, and so does the log.
	close(stopBeats)
	<-beating
	waitSplit("master/m3")
	// m3 stops: a voter the leader cannot reach is no split, and the
	// report is empty again.
	c.Stop(m3)
	last := waitSplit("")
	got := splitLog(logs.String(), last.ID, last.Term)
	if last.ID == first.ID && last.Term == first.Term {
		if want := []string{both, "master/m3", "whole"}; !saidOnce(got) || len(got) < 3 || !slices.Equal(got[len(got)-3:], want) {
			t.Fatalf("%s's log in term %d says %q, want each change once, ending %q", last.ID, last.Term, got, want)
		}
		return
	}
	// Leadership moved on the way: the new term's log says each change
	// once and ends whole.
	t.Logf("leadership moved from %s in term %d to %s in term %d", first.ID, first.Term, last.ID, last.Term)
	if !saidOnce(got) || got[len(got)-1] != "whole" {
		t.Fatalf("%s's log in term %d says %q, want each change once, ending whole", last.ID, last.Term, got)
	}
}

// saidOnce reports whether a log of the split report says something, and
// never the same twice in a row.
func saidOnce(log []string) bool {
	return len(log) > 0 && len(slices.Compact(slices.Clone(log))) == len(log)
}

// splitLog returns what master id logged about its gossip pool in one term
// of its leadership, in order: the missing members of each "gossip pool
// split" line, "whole" for each "gossip pool whole again".
func splitLog(logs, id string, term uint64) []string {
	var out []string
	in := false
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, " master="+id+" ") && !strings.HasSuffix(line, " master="+id) {
			continue
		}
		switch {
		case strings.Contains(line, "msg=leading "):
			in = strings.Contains(line, fmt.Sprintf(" term=%d ", term))
		case strings.Contains(line, `msg="lost leadership"`):
			in = false
		case !in:
		case strings.Contains(line, "gossip pool whole again"):
			out = append(out, "whole")
		case strings.Contains(line, "gossip pool split"):
			// slog quotes a value only when it holds a space.
			_, missing, _ := strings.Cut(line, " missing=")
			if strings.HasPrefix(missing, `"`) {
				missing, _, _ = strings.Cut(missing[1:], `"`)
			} else {
				missing, _, _ = strings.Cut(missing, " ")
			}
			out = append(out, missing)
		}
	}
	return out
}

// A master that is down is not a split pool: the leader's heartbeats do
// not reach it, so neither the split report nor any survivor's health
// names it, and a load balancer keeps both survivors.
func TestDownMasterIsNoSplit(t *testing.T) {
	// One leader through the window on a loaded machine (see
	// TestSplitPoolIsReported).
	c := mastertest.Start(t, 3, func(cfg *master.Config) {
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 2*time.Second, 2*time.Second, time.Second
	})
	leader, followers := c.Leader(), c.Followers()
	down, up := followers[0], followers[1]
	c.Stop(down)
	ctx := c.Context()
	// Past the split report's grace, with the leader's heartbeats to the
	// stopped master failing all along.
	until := time.Now().Add(splitWindow)
	for time.Now().Before(until) {
		for _, n := range []*mastertest.Node{leader, up} {
			code, body := get(t, n.HTTP(), "/v1/health")
			if code != http.StatusOK {
				t.Fatalf("%s health %d with %s down: %s", n.ID, code, down.ID, body)
			}
		}
		st, err := c.Client(leader).State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.PoolSplit) > 0 {
			t.Fatalf("split %+v with %s down", st.PoolSplit, down.ID)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// splitWindow is how long TestDownMasterIsNoSplit watches: past the
// leader's splitGrace (3 s), which a stopped master would outlast.
const splitWindow = 5 * time.Second

// get sends one GET to one master and returns the status and body.
func get(t *testing.T, addr, path string) (int, []byte) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// Bad event and blocking-read queries are refused with a clear error and
// hold nothing open.
func TestEventAndBlockingQueriesRefuseBadInput(t *testing.T) {
	c := mastertest.Start(t, 1, nil)
	addr := c.Leader().HTTP()
	res, err := c.Client().Submit(c.Context(), submitReq())
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{
		"/v1/events?index=abc", "/v1/events?index=-1", "/v1/events?index=99999999", "/v1/events?kind=bogus",
		"/v1/drivers/" + res.DriverID + "?index=x", "/v1/drivers/" + res.DriverID + "?index=1&wait=1h",
		"/v1/drivers/" + res.DriverID + "?index=1&wait=soon", "/v1/drivers/" + res.DriverID + "?wait=1s",
		"/v1/drivers/" + res.DriverID + "?index=99999999&wait=1s",
	} {
		status, body := get(t, addr, path)
		var e api.Error
		if status != http.StatusBadRequest || json.Unmarshal(body, &e) != nil || e.Code != api.CodeInvalidRequest || e.Error == "" {
			t.Errorf("GET %s: %d %s, want 400 invalid_request", path, status, body)
		}
	}
}

// A blocking read waits for its row's change and answers with it; one
// whose row does not change answers after its wait, unchanged.
func TestBlockingRead(t *testing.T) {
	c := mastertest.Start(t, 3, nil)
	cl, ctx := c.Client(), c.Context()
	res, err := cl.Submit(ctx, submitReq())
	if err != nil {
		t.Fatal(err)
	}
	d, index, err := cl.WaitDriver(ctx, res.DriverID, 0, 0)
	if err != nil || index != d.ModifyIndex || index == 0 {
		t.Fatalf("a plain read: %+v, index %d, %v", d, index, err)
	}
	start := time.Now()
	d2, index2, err := cl.WaitDriver(ctx, res.DriverID, index, 300*time.Millisecond)
	if err != nil || time.Since(start) < 300*time.Millisecond || index2 != index || d2.State != d.State {
		t.Fatalf("an unchanged row: %s later %+v index %d, %v", time.Since(start), d2, index2, err)
	}
	woke := make(chan *model.Driver, 1)
	go func() {
		d, _, err := cl.WaitDriver(ctx, res.DriverID, index, time.Minute)
		if err != nil {
			t.Error(err)
		}
		woke <- d
	}()
	if err := cl.Kill(ctx, res.DriverID); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-woke:
		if d.State != model.DriverKilled || d.ModifyIndex <= index {
			t.Fatalf("woke with %s at %d, want KILLED past %d", d.State, d.ModifyIndex, index)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the blocking read did not answer the change")
	}
}
