package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/master"
	"github.com/drover-project/drover/master/mastertest"
	"github.com/drover-project/drover/model"
)

// scaleDrivers is the table of TestListRunningOf300kDrivers: past
// 200,000 drivers the whole list is larger than the client's 64 MiB
// bound on one answer.
const scaleDrivers = 300_000

// list --state RUNNING over 300,000 drivers gets the four running ones
// from the master, which filters, rather than all 300,000 that it would
// have to filter itself (and could not: their list is past the 64 MiB
// one answer may hold). The test states the time and memory.
func TestListRunningOf300kDrivers(t *testing.T) {
	c := mastertest.Start(t, 1, func(cfg *master.Config) {
		// No process runs w1: its drivers stay RUNNING while the test
		// lasts.
		cfg.WorkerTimeout, cfg.WorkerHeartbeatTimeout = 10*time.Minute, 10*time.Minute
	})
	start := time.Now()
	c.Seed(c.Nodes[0], seedScale)
	t.Logf("a master restarted on %d drivers (%d MiB of JSON in a list of them all) in %s", scaleDrivers, scaleJSONBytes>>20, time.Since(start).Round(time.Millisecond))
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	peak := watchHeap()
	start = time.Now()
	stdout, stderr, code := drover("client", "list", "--masters", c.Nodes[0].HTTP(), "--state", "RUNNING")
	took := time.Since(start)
	top := peak()
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	rows := listed(t, stdout)
	t.Logf("list --state RUNNING: %d rows in %s; heap %d MiB before, at most %d MiB during; peak RSS of the test process (master and client) %d MiB",
		len(rows), took.Round(time.Millisecond), before.HeapInuse>>20, top>>20, ru.Maxrss>>10)
	if code != 0 || len(rows) != 4 {
		t.Fatalf("list --state RUNNING: exit %d, %d rows: %s%s", code, len(rows), stdout, stderr)
	}
	for i, r := range rows {
		if want := scaleID(i * 1000); r[0] != want || r[1] != "w1" {
			t.Fatalf("row %d: %v; want %s on w1", i, r, want)
		}
	}
	if scaleJSONBytes <= 64<<20 {
		t.Fatalf("the drivers are %d bytes of JSON, not past the 64 MiB the test is about", scaleJSONBytes)
	}
}

// scaleJSONBytes is the size of the seeded drivers in JSON, as a list
// of them all would send them.
var scaleJSONBytes int

func scaleID(i int) string { return fmt.Sprintf("driver-20261206120000-%06d", i) }

// seedScale makes the tables of TestListRunningOf300kDrivers: a worker
// w1, scaleDrivers drivers shaped like spark-submit's, and drivers 0,
// 1000, 2000 and 3000 placed on w1 and RUNNING.
func seedScale(apply func(model.Command)) {
	const at = 1_796_558_400_000
	apply(&model.RegisterWorker{ID: "w1", Instance: "i1", HTTPAddr: "127.0.0.1:1", Cores: 16, MemoryMB: 65536, Time: at})
	for from := 0; from < scaleDrivers; from += 1000 {
		c := &model.SubmitDrivers{}
		for i := from; i < from+1000; i++ {
			d := model.SubmitDriver{ID: scaleID(i), Token: fmt.Sprintf("scale-%d", i), Name: fmt.Sprintf("nightly-%d", i),
				DriverSpec: model.DriverSpec{
					Argv:     []string{"/opt/spark/bin/spark-submit", "--class", "com.example.Nightly", "/jobs/nightly.jar", fmt.Sprint(i)},
					Cores:    1,
					MemoryMB: 1024,
				},
				Time: at + int64(i)}
			c.Drivers = append(c.Drivers, d)
		}
		apply(c)
	}
	place := &model.PlaceDrivers{Time: at + scaleDrivers}
	report := &model.ReportAttempts{WorkerID: "w1", Time: at + scaleDrivers + 1}
	for i := range 4 {
		place.Placements = append(place.Placements, model.Placement{DriverID: scaleID(i * 1000), Attempt: 1, WorkerID: "w1"})
		report.Reports = append(report.Reports, model.AttemptReport{DriverID: scaleID(i * 1000), Attempt: 1, State: model.DriverRunning, Runs: 1})
	}
	apply(place)
	apply(report)
	// A floor: the row of a waiting driver also says why it waits.
	row, _ := json.Marshal(&model.Driver{ID: scaleID(scaleDrivers - 1), Token: "scale-299999", Name: "nightly-299999",
		DriverSpec: model.DriverSpec{
			Argv:     []string{"/opt/spark/bin/spark-submit", "--class", "com.example.Nightly", "/jobs/nightly.jar", "299999"},
			Cores:    1,
			MemoryMB: 1024,
		},
		State: model.DriverSubmitted, Attempt: 1, Attempts: []model.Attempt{}, SubmittedAt: at, UpdatedAt: at})
	scaleJSONBytes = len(row) * scaleDrivers
}

// watchHeap samples the heap in use every 10 ms until the returned
// function is called, which returns the largest sample.
func watchHeap() func() uint64 {
	var top atomic.Uint64
	done := make(chan struct{})
	go func() {
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapInuse > top.Load() {
				top.Store(m.HeapInuse)
			}
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return func() uint64 { close(done); return top.Load() }
}

// list --json prints one JSON array of every driver, a page at a time,
// the bytes printJSON writes for the whole array, whose whole is past
// --max-response-size while each page is within it; a page past it is an
// error naming the bound, never a list cut short.
func TestListPrintsEveryPage(t *testing.T) {
	c := mastertest.Start(t, 1, nil)
	ids := c.Submit(60, func(i int) api.SubmitRequest {
		return api.SubmitRequest{Token: fmt.Sprintf("page-%d", i), Name: fmt.Sprintf("job-%d", i),
			DriverSpec: model.DriverSpec{
				Argv:     []string{"/bin/echo", strings.Repeat("<&>", 400)},
				Cores:    1,
				MemoryMB: 64,
			}}
	})
	addr := c.Nodes[0].HTTP()
	stdout, stderr, code := drover("client", "list", "--masters", addr, "--json", "--page-size", "7", "--max-response-size", "64k")
	var ds []driverJSON
	if err := json.Unmarshal([]byte(stdout), &ds); code != 0 || err != nil || len(ds) != len(ids) {
		t.Fatalf("list --json in pages of 7: exit %d (%s), %v, %d drivers", code, stderr, err, len(ds))
	}
	if len(stdout) <= 64<<10 {
		t.Fatalf("the list is %d bytes, not past the bound of one answer", len(stdout))
	}
	var whole strings.Builder
	k := &cli{stdout: &whole}
	for i := range ds {
		if ds[i].ID != ids[i] {
			t.Fatalf("driver %d is %s, want %s", i, ds[i].ID, ids[i])
		}
	}
	k.printJSON(ds)
	if stdout != whole.String() {
		t.Fatal("the array written a row at a time differs from printJSON's")
	}
	_, stderr, code = drover("client", "list", "--masters", addr, "--json", "--page-size", "60", "--max-response-size", "64k")
	if code != 1 || !strings.Contains(stderr, "exceeds 65536 bytes") || !strings.Contains(stderr, "--max-response-size") {
		t.Fatalf("a page past --max-response-size: exit %d, %q; want exit 1 naming the bound", code, stderr)
	}
	stdout, _, code = drover("client", "list", "--masters", addr, "--json", "--state", "FAILED")
	if code != 0 || stdout != "[]\n" {
		t.Fatalf("list --json of nothing: exit %d, %q", code, stdout)
	}
}
