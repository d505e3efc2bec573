package systest

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/client"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/tests/metricstest"
	"github.com/drover-project/drover/tests/testcluster"
)

// TestUploadSurvivesLeaderKill: a script uploaded with client.Upload to the
// leader of a secured cluster (its pushes to the other masters go over
// mutual TLS), and named by a supervised driver submitted while no worker
// runs, is still served byte for byte by both masters that survive a
// SIGKILL of the leader, the one that may have missed it catching up by
// anti-entropy;
// and a surviving master killed and started again on its data dir serves
// it from its disk, pulling nothing. The driver keeps the artifact across
// the failover, and a worker started only then stages the file from the
// masters (over mutual TLS, one of them dead) and runs it as ./job.sh.
func TestUploadSurvivesLeaderKill(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Secure: true, MasterArgs: []string{"--upload-sync-interval", "200ms"}})
	const script = "#!/bin/sh\necho the uploaded script ran\n"
	path := filepath.Join(t.TempDir(), "job.sh")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	old, err := c.Leader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Uploaded to the master about to die, so the survivors hold it only
	// if it pushed it to them before it answered.
	toLeader, err := client.New([]string{old.HTTP}, c.ClientOptions())
	if err != nil {
		t.Fatal(err)
	}
	a, err := toLeader.Upload(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if a.Name != "job.sh" || a.Mode != 0o755 || !model.IsSHA256(a.Upload) {
		t.Fatalf("artifact %+v", a)
	}
	id := submit(t, c, api.SubmitRequest{DriverSpec: model.DriverSpec{Argv: []string{"./job.sh"}, Cores: 1, MemoryMB: 64, Supervise: true, Artifacts: []model.Artifact{a}}})
	old.Kill()
	if _, err := c.Leader(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	d, err := c.Client().Driver(ctx, id)
	if err != nil || len(d.Artifacts) != 1 || d.Artifacts[0].Upload != a.Upload || d.State != model.DriverSubmitted {
		t.Fatalf("after the failover the driver is %+v (%v), want SUBMITTED naming the upload", d, err)
	}
	var survivors []*testcluster.Node
	for _, m := range c.Masters {
		if m != old {
			survivors = append(survivors, m)
		}
	}
	for _, m := range survivors {
		waitFor(t, 20*time.Second, m.ID+" serves the upload", func() bool { return serves(t, c, m, a.Upload, script) })
	}

	m := survivors[0]
	m.Kill()
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, m.ID+" restarted serves the upload", func() bool { return serves(t, c, m, a.Upload, script) })
	o := c.ClientOptions()
	s, err := metricstest.Get(&http.Client{Transport: &http.Transport{TLSClientConfig: o.TLS}}, "https://"+m.HTTP+"/metrics", o.Token)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := s.Value("drover_blob_pulls_total"); !ok || v != 0 {
		t.Fatalf("%s restarted pulled %v files (present %v); it should serve its own disk's", m.ID, v, ok)
	}

	c.AddWorker("w1")
	d = c.WaitDriver(id, 30*time.Second, "ended", func(d *model.Driver) bool { return d.State.Terminal() })
	if d.State != model.DriverFinished || d.Attempt != 1 {
		t.Fatalf("driver %s at attempt %d (%s), want FINISHED at attempt 1", d.State, d.Attempt, d.Message)
	}
	if out := driverLog(t, c, id); out != "the uploaded script ran\n" {
		t.Fatalf("driver log %q", out)
	}
}

// serves reports whether master n answers GET /v1/blobs/sum with want.
func serves(t *testing.T, c *testcluster.Cluster, n *testcluster.Node, sum, want string) bool {
	t.Helper()
	o := c.ClientOptions()
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: o.TLS}, Timeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, c.Scheme()+"://"+n.HTTP+api.BlobPath(sum), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+o.Token)
	resp, err := hc.Do(req)
	if err != nil {
		return false // not up yet
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	switch {
	case resp.StatusCode == http.StatusOK && string(b) == want:
		return true
	case resp.StatusCode == http.StatusOK:
		t.Fatalf("%s serves other bytes for %s: %q", n.ID, sum, b)
	case resp.StatusCode != http.StatusNotFound:
		t.Fatalf("%s: GET %s: %d %s", n.ID, sum, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return false
}
