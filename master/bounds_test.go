package master_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/internal/freeport"
	"github.com/drover-project/drover/master"
	"github.com/drover-project/drover/master/mastertest"
	"github.com/drover-project/drover/model"
)

// program returns the argv of a program of exactly size bytes
// (model.SubmitDriver.ProgramSize) with no name, environment or artifact.
func program(size int) []string {
	return []string{"/bin/true", strings.Repeat("a", size-len("/bin/true"))}
}

// A program of --max-program-size bytes is taken, one byte more is
// refused 413 naming the bound and the size, before anything is
// committed: alone, in a batch (where it is refused alone and the others
// are committed), through Spark's REST protocol, and as an app's executor
// program.
func TestProgramSizeBound(t *testing.T) {
	const limit = 4096
	ports, err := freeport.Get("127.0.0.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	c := mastertest.Start(t, 1, func(cfg *master.Config) {
		cfg.MaxProgramSize = limit
		cfg.SparkRESTPort = ports[0]
	})
	cl, ctx := c.Client(), c.Context()
	over := func(what string, err error, size int) {
		t.Helper()
		want := fmt.Sprintf("of %d bytes exceeds --max-program-size of %d bytes", size, limit)
		if !errors.Is(err, api.ErrTooLarge) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s of %d bytes: %v, want 413 too_large saying %q", what, size, err, want)
		}
	}
	at := submitReq()
	at.Argv = program(limit)
	if _, err := cl.Submit(ctx, at); err != nil {
		t.Fatalf("a program at the bound: %v", err)
	}
	// Every string of the program counts: a name, a user, the environment
	// and an artifact, at the bound and past it.
	mixed := submitReq()
	mixed.Name, mixed.User, mixed.Env = "n", "etl", map[string]string{"K": "v"}
	mixed.Artifacts = []model.Artifact{{Source: "https://example.com/a.jar"}}
	norm, err := model.NormalizeArtifact(mixed.Artifacts[0])
	if err != nil {
		t.Fatal(err)
	}
	rest := limit - 6 - (&model.SubmitDriver{DriverSpec: model.DriverSpec{Artifacts: []model.Artifact{norm}}}).ProgramSize()
	mixed.Argv = program(rest)
	if _, err := cl.Submit(ctx, mixed); err != nil {
		t.Fatalf("a named program with a user, environment and artifact at the bound: %v", err)
	}

	// A Spark REST create becomes a program through the launcher
	// template: one argument of the right length puts it at the bound.
	status, body := sparkCreateArg(t, ports[0], "x")
	var created struct{ SubmissionID string }
	if status != http.StatusOK || json.Unmarshal(body, &created) != nil || created.SubmissionID == "" {
		t.Fatalf("Spark REST create: %d %s", status, body)
	}
	d, err := cl.Driver(ctx, created.SubmissionID)
	if err != nil {
		t.Fatal(err)
	}
	spark := limit - (&model.SubmitDriver{Name: d.Name, DriverSpec: model.DriverSpec{Argv: d.Argv, Env: d.Env, Artifacts: d.Artifacts, Resources: d.Resources}}).ProgramSize()
	if status, body := sparkCreateArg(t, ports[0], "x"+strings.Repeat("y", spark)); status != http.StatusOK || !bytes.Contains(body, []byte(`"success": true`)) {
		t.Fatalf("Spark REST create at the bound: %d %s", status, body)
	}

	before, err := cl.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	status, body = sparkCreateArg(t, ports[0], "x"+strings.Repeat("y", spark+1))
	if want := fmt.Sprintf("program of %d bytes exceeds --max-program-size of %d bytes", limit+1, limit); status != http.StatusRequestEntityTooLarge ||
		!bytes.Contains(body, []byte(want)) {
		t.Errorf("Spark REST create past the bound: %d %s, want 413 saying %q", status, body, want)
	}
	mixed.Token, mixed.Argv = client.NewToken(), program(rest+1)
	_, err = cl.Submit(ctx, mixed)
	over("a submission", err, limit+1)

	var batch api.SubmitBatchResponse
	past := submitReq()
	past.Argv = program(limit + 1)
	if err := cl.Do(ctx, http.MethodPost, api.PathSubmitBatch, api.SubmitBatchRequest{Submissions: []api.SubmitRequest{past}}, &batch); err != nil {
		t.Fatal(err)
	}
	if len(batch.Results) != 1 || batch.Results[0].Error == nil || batch.Results[0].Error.Code != api.CodeTooLarge {
		t.Fatalf("a batch of one program past the bound: %+v", batch.Results)
	}
	over("a batch's submission", batch.Results[0].Error.Err(http.StatusRequestEntityTooLarge), limit+1)

	app := api.RegisterAppRequest{Token: client.NewToken(), CoresPerExecutor: 1, MemoryPerExecutorMB: 64, Argv: program(limit + 1)}
	over("an executor program", cl.Do(ctx, http.MethodPost, api.PathApps, app, nil), limit+1)

	assertNothingCommitted(t, ctx, cl, before)

	// The rest of a batch goes on without the submission past the bound.
	good := submitReq()
	if err := cl.Do(ctx, http.MethodPost, api.PathSubmitBatch, api.SubmitBatchRequest{Submissions: []api.SubmitRequest{past, good}}, &batch); err != nil {
		t.Fatal(err)
	}
	if len(batch.Results) != 2 || batch.Results[0].Error == nil || batch.Results[1].Error != nil || batch.Results[1].DriverID == "" {
		t.Fatalf("a batch of a program past the bound and one within: %+v", batch.Results)
	}
	app.Argv = program(limit)
	if err := cl.Do(ctx, http.MethodPost, api.PathApps, app, nil); err != nil {
		t.Fatalf("an executor program at the bound: %v", err)
	}
}

// sparkCreateArg sends a Spark REST create whose one application argument is
// arg to the listener on port, and returns the answer's status and body.
func sparkCreateArg(t *testing.T, port int, arg string) (int, []byte) {
	t.Helper()
	args, _ := json.Marshal([]string{arg})
	body := `{"action":"CreateSubmissionRequest","clientSparkVersion":"3.5.1","appResource":"file:/jobs/pi.jar",` +
		`"mainClass":"Pi","appArgs":` + string(args) + `,"sparkProperties":{"spark.app.name":"pi"},"environmentVariables":{}}`
	u := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) + "/v1/submissions/create"
	resp, err := http.Post(u, "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// clientFrom returns a client of the given masters whose connections leave
// from ip, a client of its own to the per-client bounds.
func clientFrom(t *testing.T, ip string, nodes ...*mastertest.Node) *client.Client {
	t.Helper()
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.HTTP())
	}
	cl, err := client.New(addrs, client.Options{BindIP: ip, RequestTimeout: 5 * time.Second, RetryInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// limitReached fails t unless err is the 429 limit_reached refusal that
// names flag.
func limitReached(t *testing.T, what string, err error, flag string) {
	t.Helper()
	var ae *client.APIError
	if !errors.Is(err, api.ErrLimitReached) || !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests || !strings.Contains(err.Error(), flag) {
		t.Fatalf("%s: %v, want 429 limit_reached naming %s", what, err, flag)
	}
}

// The drivers that have not ended are bounded cluster-wide: at the bound
// a submission is refused 429 naming --max-live-drivers, and nothing is
// committed, through the leader, a follower and a batch; the repeat of
// an acknowledged submission still gets its driver; a driver that ends
// makes room for one more; and a new leader counts what the old one
// committed and refuses as it did.
func TestLiveDriversBound(t *testing.T) {
	const limit = 4
	c := mastertest.Start(t, 3, func(cfg *master.Config) { cfg.MaxLiveDrivers = limit })
	ctx, leader := c.Context(), c.Leader()
	follower := c.Followers()[0]
	a, b := clientFrom(t, "127.0.0.2", leader), clientFrom(t, "127.0.0.3", follower)
	var acked []api.SubmitRequest
	var ids []string
	for i := range limit {
		cl := a
		if i%2 == 1 {
			cl = b
		}
		r := submitReq()
		res, err := cl.Submit(ctx, r)
		if err != nil {
			t.Fatalf("submission %d of %d: %v", i+1, limit, err)
		}
		acked, ids = append(acked, r), append(ids, res.DriverID)
	}
	before, err := c.Client(leader).State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Submit(ctx, submitReq())
	limitReached(t, "past the bound at the leader", err, "--max-live-drivers (4)")
	_, err = b.Submit(ctx, submitReq())
	limitReached(t, "past the bound at a follower", err, "--max-live-drivers (4)")
	body, _ := json.Marshal(submitReq())
	resp, err := http.Post("http://"+follower.HTTP()+api.PathDrivers, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("past the bound: %s with Retry-After %q, want 429 with one", resp.Status, resp.Header.Get("Retry-After"))
	}
	var out api.SubmitBatchResponse
	if err := b.Do(ctx, http.MethodPost, api.PathSubmitBatch, api.SubmitBatchRequest{Submissions: []api.SubmitRequest{acked[0], submitReq()}}, &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Results) != 2 || out.Results[0].DriverID != ids[0] || !out.Results[0].Existing ||
		out.Results[1].Error == nil || out.Results[1].Error.Code != api.CodeLimitReached {
		t.Fatalf("a batch of an acknowledged submission and a new one at the bound: %+v", out.Results)
	}
	assertNothingCommitted(t, ctx, c.Client(leader), before)

	// A driver that ends makes room for one.
	if err := a.Kill(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Submit(ctx, submitReq()); err != nil {
		t.Fatalf("a submission after a driver ended: %v", err)
	}

	c.Stop(leader)
	next := c.Leader()
	before, err = c.Client(next).State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = clientFrom(t, "127.0.0.4", next).Submit(ctx, submitReq())
	limitReached(t, "past the bound at the next leader", err, "--max-live-drivers (4)")
	assertNothingCommitted(t, ctx, c.Client(next), before)
}

// The drivers one client has not seen end are bounded apart, under the
// client's address at the master its submission reached first, whether
// the leader took it or a follower passed it on; other clients still
// submit; and a new leader counts each client as the old one did.
func TestLiveDriversPerClientBound(t *testing.T) {
	const limit = 2
	c := mastertest.Start(t, 3, func(cfg *master.Config) { cfg.MaxLiveDriversPerClient = limit })
	ctx, leader := c.Context(), c.Leader()
	followers := c.Followers()
	viaLeader, viaFollower := clientFrom(t, "127.0.0.2", leader), clientFrom(t, "127.0.0.2", followers[0])
	for _, cl := range []*client.Client{viaFollower, viaLeader} {
		if _, err := cl.Submit(ctx, submitReq()); err != nil {
			t.Fatal(err)
		}
	}
	before, err := c.Client(leader).State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = viaLeader.Submit(ctx, submitReq())
	limitReached(t, "a third from one client at the leader", err, "drivers from 127.0.0.2 that have not ended are at --max-live-drivers-per-client (2)")
	_, err = viaFollower.Submit(ctx, submitReq())
	limitReached(t, "a third from one client at a follower", err, "--max-live-drivers-per-client (2)")
	assertNothingCommitted(t, ctx, c.Client(leader), before)
	if _, err := clientFrom(t, "127.0.0.3", followers[1]).Submit(ctx, submitReq()); err != nil {
		t.Fatalf("another client at the bound of the first: %v", err)
	}

	c.Stop(leader)
	next := c.Leader()
	_, err = clientFrom(t, "127.0.0.2", next).Submit(ctx, submitReq())
	limitReached(t, "a third from one client at the next leader", err, "--max-live-drivers-per-client (2)")
	if _, err := clientFrom(t, "127.0.0.3", next).Submit(ctx, submitReq()); err != nil {
		t.Fatalf("the second of another client at the next leader: %v", err)
	}
}

// Submissions that reach the leader together are counted against the
// bound while they commit, and only until the tables count them, so
// however many arrive at once, alone or in batches, exactly as many as
// the bound allows are committed: none past it, and none refused short
// of it.
func TestLiveDriversBoundCountsWhatCommits(t *testing.T) {
	const limit, tries = 20, 80
	for _, alone := range []bool{true, false} {
		t.Run(fmt.Sprintf("alone=%v", alone), func(t *testing.T) {
			c := mastertest.Start(t, 1, func(cfg *master.Config) { cfg.MaxLiveDrivers = limit })
			ctx := c.Context()
			cl, err := client.New([]string{c.Leader().HTTP()}, client.Options{NoBatching: alone, RequestTimeout: 5 * time.Second, RetryInterval: 20 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			errs := make([]error, tries)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range tries {
				wg.Go(func() {
					<-start
					_, errs[i] = cl.Submit(ctx, submitReq())
				})
			}
			close(start)
			wg.Wait()
			ok := 0
			for _, err := range errs {
				switch {
				case err == nil:
					ok++
				case !errors.Is(err, api.ErrLimitReached):
					t.Fatalf("a submission: %v", err)
				}
			}
			ds, err := c.Client().Drivers(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if ok != limit || len(ds) != limit {
				t.Fatalf("%d submissions at once with room for %d: %d acknowledged, %d drivers", tries, limit, ok, len(ds))
			}
		})
	}
}

// The apps that have not ended are bounded: at the bound a registration
// is refused 429 naming --max-live-apps and nothing is committed, an app
// that ends makes room for one, and a new leader refuses as the old one
// did.
func TestLiveAppsBound(t *testing.T) {
	const limit = 2
	c := mastertest.Start(t, 3, func(cfg *master.Config) { cfg.MaxLiveApps = limit })
	ctx, leader := c.Context(), c.Leader()
	cl := c.Client()
	register := func(cl *client.Client) (api.RegisterAppResponse, error) {
		var out api.RegisterAppResponse
		err := cl.Do(ctx, http.MethodPost, api.PathApps, api.RegisterAppRequest{Token: client.NewToken(), CoresPerExecutor: 1, MemoryPerExecutorMB: 64, Argv: []string{"/bin/true"}}, &out)
		return out, err
	}
	var apps []string
	for range limit {
		res, err := register(cl)
		if err != nil {
			t.Fatal(err)
		}
		apps = append(apps, res.AppID)
	}
	before, err := c.Client(leader).State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = register(cl)
	limitReached(t, "an app past the bound", err, "--max-live-apps (2)")
	assertNothingCommitted(t, ctx, c.Client(leader), before)
	if err := cl.KillApp(ctx, apps[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := register(cl); err != nil {
		t.Fatalf("an app after one ended: %v", err)
	}
	c.Stop(leader)
	next := c.Leader()
	_, err = register(c.Client(next))
	limitReached(t, "an app past the bound at the next leader", err, "--max-live-apps (2)")
}

// A master's store of uploads holds at most --max-upload-store bytes: a
// file that fills it exactly is taken, whether its length is declared or
// not; one byte more is refused 507 naming the bound, before the body is
// read when its Content-Length says so, and leaves nothing stored; the
// files a live driver names are kept, and a deletion makes room.
func TestUploadStoreBound(t *testing.T) {
	const limit = 2048
	c := mastertest.Start(t, 1, func(cfg *master.Config) {
		fastUploads(cfg)
		cfg.MaxUpload, cfg.MaxUploadStore, cfg.UploadGrace = limit, limit, time.Second
	})
	m1, cl, ctx := c.Nodes[0], c.Client(), c.Context()
	dir := filepath.Join(m1.Config.DataDir, "blobs")
	put := func(content string, declared bool) (int, api.Error) {
		t.Helper()
		r := &recordingReader{r: strings.NewReader(content)}
		req, err := http.NewRequest(http.MethodPut, "http://"+m1.HTTP()+api.BlobPath(digestOf(content)), r)
		if err != nil {
			t.Fatal(err)
		}
		if declared {
			req.ContentLength = int64(len(content))
			req.Header.Set("Expect", "100-continue")
		}
		status, body := doExpecting(t, req)
		var e api.Error
		_ = json.Unmarshal(body, &e)
		if declared && status == http.StatusInsufficientStorage && r.read.Load() {
			t.Errorf("the master read a body its declared length put past the bound")
		}
		return status, e
	}
	full := func(what string, status int, e api.Error, used int64) {
		t.Helper()
		if status != http.StatusInsufficientStorage || e.Code != api.CodeInsufficientStorage || !strings.Contains(e.Error, "--max-upload-store of 2048 bytes") {
			t.Fatalf("%s: %d %+v, want 507 insufficient_storage naming the bound", what, status, e)
		}
		st, err := cl.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Blobs.Bytes != used {
			t.Fatalf("%s: the store holds %d bytes, want %d", what, st.Blobs.Bytes, used)
		}
		if es, _ := os.ReadDir(dir); int64(len(es)) != int64(st.Blobs.Files) {
			t.Fatalf("%s: the store dir holds %d entries for %d files", what, len(es), st.Blobs.Files)
		}
	}
	// The first file stays: a driver that has not ended names it.
	named, namedSum := writeFile(t, "named.bin", strings.Repeat("n", 1024), 0o644)
	a, err := cl.Upload(ctx, named)
	if err != nil {
		t.Fatal(err)
	}
	req := submitReq()
	req.Artifacts = []model.Artifact{a}
	if _, err := cl.Submit(ctx, req); err != nil {
		t.Fatal(err)
	}
	before, err := cl.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	status, e := put(strings.Repeat("p", 1025), true)
	full("a declared length one byte past the bound", status, e, 1024)
	if status, e := put(strings.Repeat("d", 1024), true); status != http.StatusOK {
		t.Fatalf("a declared length at the bound: %d %+v", status, e)
	}
	status, e = put("q", false)
	full("a body without a length one byte past the bound", status, e, limit)
	assertNothingCommitted(t, ctx, cl, before)

	// The unnamed file goes after its grace; the named one stays.
	awaitHolders(t, c, digestOf(strings.Repeat("d", 1024)), "the unnamed upload after its grace")
	if !holds(t, m1, namedSum) {
		t.Fatal("garbage collection deleted an upload a live driver names")
	}
	if status, e := put(strings.Repeat("c", 1024), false); status != http.StatusOK {
		t.Fatalf("a body without a length at the bound: %d %+v", status, e)
	}
}

// A client IP holds at most --max-uploads-per-client uploads in flight on
// a master: at the bound the next is refused 429 naming it, with
// Retry-After, and stores nothing; another client uploads meanwhile; and
// an upload that ends gives its slot back.
func TestUploadsPerClientBound(t *testing.T) {
	c := mastertest.Start(t, 1, func(cfg *master.Config) { cfg.MaxUploadsPerClient = 2 })
	m1, ctx := c.Nodes[0], c.Context()
	dir := filepath.Join(m1.Config.DataDir, "blobs")
	from := func(ip string) *net.Dialer { return &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}} }
	// Two uploads from 127.0.0.2 that stall half-way hold both slots.
	var held []net.Conn
	for i := range 2 {
		conn, err := from("127.0.0.2").Dial("tcp", m1.HTTP())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		body := strings.Repeat(strconv.Itoa(i), 1000)
		fmt.Fprintf(conn, "PUT %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n%s", api.BlobPath(digestOf(body)), m1.HTTP(), len(body), body[:500])
		held = append(held, conn)
		awaitEntries(t, c, dir, "an upload stalled half-way", i+1)
	}
	third := "third upload"
	hc := &http.Client{Transport: &http.Transport{DialContext: from("127.0.0.2").DialContext}}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodPut, "http://"+m1.HTTP()+api.BlobPath(digestOf(third)), strings.NewReader(third))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var e api.Error
	_ = json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || e.Code != api.CodeTooManyRequests || resp.Header.Get("Retry-After") == "" ||
		!strings.Contains(e.Error, "2 uploads in flight here, the bound of --max-uploads-per-client") {
		t.Fatalf("a third upload in flight from one client: %s %+v, want 429 naming the bound with Retry-After", resp.Status, e)
	}
	if holds(t, m1, digestOf(third)) {
		t.Fatal("the refused upload was stored")
	}
	other, _ := writeFile(t, "other.txt", "from another client", 0o644)
	if _, err := clientFrom(t, "127.0.0.3", m1).Upload(ctx, other); err != nil {
		t.Fatalf("an upload from another client: %v", err)
	}
	// The Go client sends a 429 again until it is taken: once one stalled
	// upload is cut off, its slot is free.
	held[0].Close()
	mine, sum := writeFile(t, "mine.txt", third, 0o644)
	if _, err := clientFrom(t, "127.0.0.2", m1).Upload(ctx, mine); err != nil || !holds(t, m1, sum) {
		t.Fatalf("an upload once a slot was free: %v", err)
	}
}
