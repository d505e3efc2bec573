package main

import (
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/master"
	"github.com/drover-project/drover/master/mastertest"
	"github.com/drover-project/drover/model"
)

// submit's resource and restart flags reach the request in its units, and
// bad ones are refused in one line before anything is sent.
func TestSubmitResourceAndRestartFlags(t *testing.T) {
	f := newFakeMaster(t)
	_, stderr, code := drover("client", "--masters", f.addr(), "submit", "--supervise", "--max-restarts", "2", "--restart-window", "10m",
		"--reschedule-after", "3", "--driver-resource", "gpu=2", "--driver-resource", "fpga=1", "--", "/bin/true")
	if code != 0 {
		t.Fatalf("submit: exit %d: %s", code, stderr)
	}
	f.mu.Lock()
	got := f.submitted[0]
	f.mu.Unlock()
	if got.MaxRestarts != 2 || got.RestartWindowMS != 600_000 || got.RescheduleAfter != 3 || !reflect.DeepEqual(got.Resources, model.ResourceAmounts{"gpu": 2, "fpga": 1}) {
		t.Fatalf("request %+v", got)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-restarts", "2"}, "--max-restarts needs --supervise"},
		{[]string{"--reschedule-after", "2"}, "--reschedule-after needs --supervise"},
		{[]string{"--supervise", "--max-restarts", "0"}, "--max-restarts 0 must be from 1"},
		{[]string{"--supervise", "--max-restarts", "-1"}, "--max-restarts -1 must be from 1"},
		{[]string{"--supervise", "--reschedule-after", "0"}, "--reschedule-after 0 must be from 1"},
		{[]string{"--supervise", "--max-restarts", "2", "--restart-window", "500ms"}, "--restart-window 500ms must be at least 1s"},
		{[]string{"--supervise", "--restart-window", "1m"}, "--restart-window needs --max-restarts"},
		{[]string{"--driver-resource", "gpu=0"}, "amount 0"},
		{[]string{"--driver-resource", "gpu"}, "NAME=AMOUNT"},
		{[]string{"--driver-resource", "gpu=1", "--driver-resource", "gpu=2"}, "asked for twice"},
		{[]string{"--driver-resource", "GPU=1"}, "resource name"},
		{[]string{"--driver-cores", "65537"}, "--driver-cores 65537 must be from 1 to 65536"},
		{[]string{"--driver-cores", "2147483648"}, "--driver-cores 2147483648 must be from 1 to 65536"},
		{[]string{"--driver-cores", "0"}, "--driver-cores 0 must be from 1 to 65536"},
		{[]string{"--driver-memory", "2147483648"}, `size "2147483648" is too large: at most 2147483647m`},
		{[]string{"--driver-memory", "99999999999999t"}, `size "99999999999999t" is too large: at most 2147483647m`},
		{[]string{"--driver-memory", "1e400"}, `size "1e400" is too large`},
		{[]string{"--driver-memory", "lots"}, `size "lots" is not a size like 512m`},
		{[]string{"--driver-memory", "inf"}, `size "inf" is not a size like 512m`},
	} {
		args := append(append([]string{"client", "--masters", f.addr(), "submit"}, bad.args...), "--", "/bin/true")
		stdout, stderr, code := drover(args...)
		if code != 1 || stdout != "" || !strings.Contains(stderr, bad.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1 with one line naming %q", bad.args, code, stdout, stderr, bad.want)
		}
	}
	// At the bounds the submission goes; a bare number is MiB.
	if _, stderr, code := drover("client", "--masters", f.addr(), "submit", "--driver-cores", "65536", "--driver-memory", "2147483647", "--", "/bin/true"); code != 0 {
		t.Fatalf("submit at the bounds: exit %d: %s", code, stderr)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.submitted) != 2 || f.submitted[1].Cores != 65536 || f.submitted[1].MemoryMB != 2147483647 {
		t.Fatalf("%d submissions sent, want only the two good ones", len(f.submitted))
	}
}

// status shows what a driver asks for, what its attempt holds and the
// failed runs its bounds count now.
func TestStatusShowsResourcesAndRestarts(t *testing.T) {
	now := time.Now().UnixMilli()
	d := &model.Driver{ID: "driver-20260101000000-0001", State: model.DriverRunning, WorkerID: "w1", Attempt: 2, DriverSpec: model.DriverSpec{Supervise: true, Cores: 1, MemoryMB: 1024, Resources: model.ResourceAmounts{"gpu": 1}, MaxRestarts: 3, RestartWindowMS: 60_000, RescheduleAfter: 2},
		Attempts: []model.Attempt{
			{Attempt: 1, WorkerID: "w2", State: model.DriverFailed, Failures: []int64{now - 120_000, now - 5000}, Rescheduled: true, Resources: model.Resources{"gpu": {"0"}}},
			{Attempt: 2, WorkerID: "w1", State: model.DriverRunning, Failures: []int64{now - 1000}, Resources: model.Resources{"gpu": {"1"}}},
		}}
	f := newFakeMaster(t, d)
	stdout, stderr, code := drover("client", "--masters", f.addr(), "status", d.ID)
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, stderr)
	}
	for _, want := range []string{"resources:  1 core, 1024 MiB, gpu=1\n", "holds:      gpu=1\n",
		"restarts:   2 failed runs counted, at most 3 restarts within 1m0s; another worker after 2 failed runs in a row\n", " gpu=0 "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("status lacks %q:\n%s", want, stdout)
		}
	}
}

// The worker's offer comes from --resource and a Spark resources file
// together; a name given twice, or a malformed file, is refused.
func TestOfferedResources(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "res.json")
	if err := os.WriteFile(file, []byte(`[{"id":{"componentName":"spark.worker","resourceName":"gpu"},"addresses":["0","1"]}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := offeredResources([]string{"fpga=a,b"}, file)
	if err != nil || r.String() != "fpga=a,b gpu=0,1" {
		t.Fatalf("offer %v %v", r, err)
	}
	if r, err := offeredResources(nil, ""); err != nil || r != nil {
		t.Fatalf("no offer: %v %v", r, err)
	}
	for _, bad := range []struct {
		flags []string
		file  string
		want  string
	}{
		{[]string{"gpu=2"}, file, "offered twice"},
		{[]string{"gpu="}, "", "no addresses"},
		{[]string{"gpu=1,1"}, "", "given twice"},
		{nil, filepath.Join(dir, "missing.json"), "--resources-file"},
	} {
		if _, err := offeredResources(bad.flags, bad.file); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v %s: %v, want %q", bad.flags, bad.file, err, bad.want)
		}
	}
}

// A driver asking for a resource no worker offers is accepted and
// reported like one too large for any worker: submit prints its ID,
// exits 3 at once and says why in one line, naming what it asks and what
// the largest worker offers, and the driver stays queued.
func TestSubmitOfAResourceNoWorkerOffersExits3(t *testing.T) {
	c := mastertest.Start(t, 1, func(cfg *master.Config) { cfg.RegisterWithoutGossip = true })
	cl, ctx := c.Client(), c.Context()
	reg := api.RegisterWorkerRequest{ID: "w1", Instance: "i1", HTTPAddr: "127.0.0.1:1", Cores: 8, MemoryMB: 8192,
		Resources: model.Resources{"gpu": {"0", "1"}}}
	if err := cl.Do(ctx, http.MethodPost, api.PathRegisterWorker, reg, nil); err != nil {
		t.Fatal(err)
	}
	// The worker heartbeats while submit runs, so that it stays ALIVE
	// however slowly the machine goes.
	done := make(chan struct{})
	beating := make(chan struct{})
	go func() {
		defer close(beating)
		for {
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
			_ = cl.Do(ctx, http.MethodPost, api.WorkerPath("w1", "/heartbeat"), api.HeartbeatRequest{Instance: "i1"}, nil)
		}
	}()
	stdout, stderr, code := drover("client", "submit", "--masters", c.Nodes[0].HTTP(), "--timeout", "1m",
		"--driver-resource", "fpga=1", "--", "/bin/true")
	close(done)
	<-beating
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	id := lines[len(lines)-1]
	var reasons []string
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if strings.HasPrefix(l, "drover: ") {
			reasons = append(reasons, l)
		}
	}
	if code != exitUnplaceable || len(reasons) != 1 || !strings.Contains(reasons[0], id+" cannot be placed") ||
		!strings.Contains(reasons[0], api.ReasonUnplaceable) || !strings.Contains(reasons[0], "fpga=1") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want exit 3 and one line saying %s cannot be placed, asking fpga=1", code, stdout, stderr, id)
	}
	if d, err := cl.Driver(ctx, id); err != nil || d.State != model.DriverSubmitted || d.WorkerID != "" {
		t.Fatalf("driver %+v (%v), want it queued", d, err)
	}
}
