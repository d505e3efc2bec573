package worker_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/drover-project/drover/api"
	"github.com/drover-project/drover/model"
	"github.com/drover-project/drover/worker"
	"github.com/drover-project/drover/worker/spark/resourcesfile"
	"github.com/drover-project/drover/worker/unitdir"
)

// A worker registers the resources it offers; a unit holding some finds
// its addresses in DROVER_RESOURCE_<NAME> and in a Spark resources file
// named by DROVER_RESOURCES_FILE, of its own component, which it can read
// as whatever user it runs as.
func TestUnitsLearnTheirAddresses(t *testing.T) {
	fm := newFakeMaster(t)
	offer := model.Resources{"gpu": {"0", "1", "2"}, "fpga": {"f"}}
	_, cfg := newWorker(t, fm, func(c *worker.Config) { c.Resources = offer })
	fm.waitFor(t, "a registration", func() bool { return len(fm.registrations) > 0 })
	fm.set(func() {
		if got := fm.registrations[0].Resources; !reflect.DeepEqual(got, offer) {
			t.Fatalf("registered %v, want %v", got, offer)
		}
	})
	show := []string{"/bin/sh", "-c", `echo "$DROVER_RESOURCE_GPU|$DROVER_RESOURCE_FPGA|$DROVER_RESOURCES_FILE"
if [ -n "$DROVER_RESOURCES_FILE" ] && grep -q resourceName "$DROVER_RESOURCES_FILE"; then echo readable; fi`}
	fm.assign(api.Assignment{DriverID: driverA, Attempt: 1, Argv: show, Cores: 1, MemoryMB: 64, Resources: model.Resources{"gpu": {"2", "0"}}},
		api.Assignment{DriverID: driverB, Attempt: 1, Argv: show, Cores: 1, MemoryMB: 64})
	fm.assignExecutors(api.ExecutorAssignment{AppID: appA, ExecutorID: 0, Argv: show, Cores: 1, MemoryMB: 64, Resources: model.Resources{"fpga": {"f"}}})
	fm.waitReport(t, driverA, 1, model.DriverFinished)
	fm.waitReport(t, driverB, 1, model.DriverFinished)
	fm.waitExecReport(t, appA, 0, model.ExecExited)

	dir := filepath.Join(cfg.WorkDir, driverA, "attempt-1")
	file := filepath.Join(dir, unitdir.ResourcesFile)
	if got, want := readStream(t, dir, unitdir.StdoutFile), "2,0||"+file+"\nreadable\n"; got != want {
		t.Fatalf("driver A printed %q, want %q", got, want)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := resourcesfile.Parse(b, resourcesfile.Driver); err != nil || got.String() != "gpu=2,0" {
		t.Fatalf("resources file %s: %v %v", b, got, err)
	}
	if got := readStream(t, filepath.Join(cfg.WorkDir, driverB, "attempt-1"), unitdir.StdoutFile); got != "||\n" {
		t.Fatalf("driver B, holding nothing, printed %q", got)
	}
	edir := filepath.Join(cfg.WorkDir, appA, "0")
	if got := readStream(t, edir, unitdir.StdoutFile); !strings.HasPrefix(got, "|f|") {
		t.Fatalf("executor printed %q", got)
	}
	if b, err := os.ReadFile(filepath.Join(edir, unitdir.ResourcesFile)); err != nil || !strings.Contains(string(b), resourcesfile.Executor) {
		t.Fatalf("executor's resources file %s %v, want the %s component", b, err, resourcesfile.Executor)
	}
}

// A worker refuses an offer it could never register.
func TestWorkerRefusesABadOffer(t *testing.T) {
	cfg := worker.DefaultConfig()
	cfg.ID, cfg.Masters, cfg.WorkDir, cfg.Cores, cfg.MemoryMB = "w1", []string{"127.0.0.1:1"}, t.TempDir(), 1, 1
	cfg.Resources = model.Resources{"gpu": {"0", "0"}}
	if _, err := worker.New(cfg); err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Fatalf("New: %v, want the duplicate address refused", err)
	}
}

// A bounded supervised attempt's reports carry its failed runs, and its
// end by the bounds says so: FAILED after max restarts, with no
// reschedule.
func TestBoundedAttemptReportsItsFailures(t *testing.T) {
	fm := newFakeMaster(t)
	newWorker(t, fm, nil)
	fm.assign(api.Assignment{DriverID: driverA, Attempt: 1, Argv: []string{"/bin/sh", "-c", "exit 3"}, Cores: 1, MemoryMB: 64, Supervise: true,
		MaxRestarts: 1, RestartWindowMS: 60_000, Failures: []int64{}})
	failed, _ := fm.waitReport(t, driverA, 1, model.DriverFailed)
	if failed.Runs != 2 || len(failed.Failures) != 2 || failed.Reschedule || !strings.Contains(failed.Reason, "2 runs failed") {
		t.Fatalf("final report %+v, want FAILED after 2 runs with both failures", failed)
	}
	fm.set(func() {
		for _, r := range fm.reports() {
			if r.State == model.DriverRunning && len(r.Failures) != r.Runs-1 {
				t.Fatalf("RUNNING report %+v does not carry the failures before it", r)
			}
		}
	})
}
