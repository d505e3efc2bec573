package systest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/testcluster"
)

// serveFiles serves each body at its path from a loopback HTTP server
// and returns the server's URL.
func serveFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, "", time.Time{}, strings.NewReader(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// checksum is the ?checksum= option that names body.
func checksum(body string) string {
	s := sha256.Sum256([]byte(body))
	return "?checksum=sha256:" + hex.EncodeToString(s[:])
}

// driverLog returns the stdout of the latest attempt of driver id.
func driverLog(t *testing.T, c *testcluster.Cluster, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, _, err := c.Client().Logs(ctx, id, false, 0, 0)
	if err != nil {
		t.Fatalf("logs of %s: %v", id, err)
	}
	return string(out)
}

// TestArtifactsFromHTTP: a driver submitted with client.Submit and an
// artifact served by a loopback HTTP server runs it as ./app.sh from its
// attempt's directory, its output in the driver's log; one whose
// ?checksum= names other bytes ends FAILED saying "checksum mismatch",
// its program never run; and the executors of an app get the app's
// artifacts, each in its own directory.
func TestArtifactsFromHTTP(t *testing.T) {
	const app = "#!/bin/sh\necho \"app.sh ran in attempt $DROVER_ATTEMPT\"\n"
	const exec = "#!/bin/sh\necho \"executor $DROVER_EXECUTOR_ID read $(cat conf/shard)\"\nexec sleep 600\n"
	base := serveFiles(t, map[string]string{"/app.sh": app, "/exec.sh": exec, "/shard": "shard-7"})
	c := testcluster.New(t, testcluster.Options{Workers: 2, WorkerCores: 2})

	t.Run("runs", func(t *testing.T) {
		id := submit(t, c, api.SubmitRequest{DriverSpec: model.DriverSpec{Argv: []string{"./app.sh"}, Cores: 1, MemoryMB: 64, Artifacts: []model.Artifact{{Source: base + "/app.sh" + checksum(app)}}}})
		d := c.WaitDriver(id, 30*time.Second, "ended", func(d *model.Driver) bool { return d.State.Terminal() })
		if d.State != model.DriverFinished {
			t.Fatalf("driver %s (%s), want FINISHED", d.State, d.Message)
		}
		if out := driverLog(t, c, id); out != "app.sh ran in attempt 1\n" {
			t.Fatalf("driver log %q", out)
		}
	})

	t.Run("checksum mismatch", func(t *testing.T) {
		id := submit(t, c, api.SubmitRequest{DriverSpec: model.DriverSpec{Argv: []string{"./app.sh"}, Cores: 1, MemoryMB: 64, Artifacts: []model.Artifact{{Source: base + "/app.sh" + checksum("other bytes")}}}})
		d := c.WaitDriver(id, 30*time.Second, "ended", func(d *model.Driver) bool { return d.State.Terminal() })
		if d.State != model.DriverFailed || !strings.Contains(d.Message, "checksum mismatch") || !strings.Contains(d.Message, base+"/app.sh") {
			t.Fatalf("driver %s (%q), want FAILED naming the URL and a checksum mismatch", d.State, d.Message)
		}
		if out := driverLog(t, c, id); out != "" {
			t.Fatalf("the program ran: log %q", out)
		}
	})

	t.Run("executors", func(t *testing.T) {
		a := registerApp(t, c, client.AppSpec{Name: "staged", MaxCores: 2, CoresPerExecutor: 1, MemoryPerExecutorMB: 64,
			Argv: []string{"./exec.sh"},
			Artifacts: []model.Artifact{
				{Source: base + "/exec.sh" + checksum(exec)},
				{Source: base + "/shard", Dest: "conf"},
			}})
		execs := running(t, a, 2)
		workers := map[string]bool{}
		for id, e := range execs {
			workers[e.WorkerID] = true
			want := []byte("executor " + strconv.Itoa(id) + " read shard-7\n")
			waitFor(t, 20*time.Second, "executor output", func() bool {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				out, _, err := c.Client().ExecutorLogs(ctx, a.ID(), id, false, 0)
				return err == nil && bytes.Equal(out, want)
			})
		}
		if len(workers) != 2 {
			t.Fatalf("executors on %v; want one on each worker", workers)
		}
	})
}
