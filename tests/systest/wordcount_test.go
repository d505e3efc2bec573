package systest

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/testcluster"
)

var summaryLine = regexp.MustCompile(`wordcount: \d+ files, \d+ distinct words, \d+ words, digest=[0-9a-f]{64}`)

// TestWordcountOnClusterMatchesSingleProcess runs examples/wordcount as a
// driver with 4 executors over the Go source tree and checks that its full
// result (the digest of every word's count) equals a single-process count
// of the same files: undisturbed, with the leader SIGKILLed mid-job, and
// with the worker of one executor (not the driver's) killed mid-job.
func TestWordcountOnClusterMatchesSingleProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("counts the whole Go source tree several times")
	}
	bin := buildWordcount(t)
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatal(err)
	}
	input := filepath.Join(strings.TrimSpace(string(goroot)), "src")
	out, err := exec.Command(bin, "--top", "5", input).CombinedOutput()
	if err != nil {
		t.Fatalf("single-process wordcount: %v\n%s", err, out)
	}
	want := summaryLine.FindString(string(out))
	if want == "" {
		t.Fatalf("no summary line in %s", out)
	}

	c := testcluster.New(t, testcluster.Options{Workers: 3, WorkerCores: 3})
	for _, tc := range []struct {
		name  string
		fault func(driver *model.Driver, app api.AppStatus)
	}{
		{"undisturbed", func(*model.Driver, api.AppStatus) {}},
		{"leader killed", func(*model.Driver, api.AppStatus) {
			l, err := c.Leader(5 * time.Second)
			if err != nil {
				t.Fatal(err)
			}
			l.Kill()
			t.Cleanup(func() { _ = l.Start() })
		}},
		{"executor's worker killed", func(d *model.Driver, a api.AppStatus) {
			for _, e := range a.Executors {
				if e.WorkerID != d.WorkerID && !e.State.Terminal() {
					c.Worker(e.WorkerID).KillGroup()
					return
				}
			}
			t.Fatalf("every executor of %s is on the driver's worker %s", a.ID, d.WorkerID)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := submit(t, c, api.SubmitRequest{
				DriverSpec: model.DriverSpec{
					Argv:     []string{bin, "--executors", "4", "--top", "5", input},
					Cores:    1,
					MemoryMB: 256,
				},
			})
			d := c.WaitDriver(id, 30*time.Second, "RUNNING", isState(model.DriverRunning))
			app := appOf(t, c, id)
			tc.fault(d, app)
			d = c.WaitDriver(id, 3*time.Minute, "ended", func(d *model.Driver) bool { return d.State.Terminal() })
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			logs, _, err := c.Client().Logs(ctx, id, true, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if d.State != model.DriverFinished {
				t.Fatalf("driver %s: %s\n%s", d.State, d.Message, logs)
			}
			if got := summaryLine.FindString(string(logs)); got != want {
				t.Fatalf("cluster result %q\nsingle process %q", got, want)
			}
			if a := appStatus(t, c, app.ID); a.State != model.AppFinished {
				t.Errorf("app %s ended %s (%s), want FINISHED", a.ID, a.State, a.Message)
			}
		})
	}
}

// appOf waits until driver id has registered an app with a RUNNING
// executor, and returns it.
func appOf(t *testing.T, c *testcluster.Cluster, id string) api.AppStatus {
	t.Helper()
	var found api.AppStatus
	waitFor(t, 30*time.Second, "app of "+id+" with a RUNNING executor", func() bool {
		as, err := c.Client().Apps(context.Background())
		if err != nil {
			return false
		}
		for _, a := range as {
			for _, e := range a.Executors {
				if a.DriverID == id && e.State == model.ExecRunning {
					found = a
					return true
				}
			}
		}
		return false
	})
	return found
}
